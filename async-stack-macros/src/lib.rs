//! The `#[traced_async]` attribute of [async-stack].
//!
//! Use it through the main crate, as `async_stack::traced_async`; this crate
//! has no API of its own.
//!
//! `#[traced_async]` turns an `async fn` into a frame of the async stack: the
//! function's future is wrapped in a `Traced` future that carries a static
//! call-site record (name, module path, file, line and column of the function
//! name), and every `.await` in the body records its own file, line and column
//! just before it suspends, so a backtrace taken while the function waits
//! names the exact `.await` it waits at.
//!
//! The function becomes `fn name(..) -> impl Future<Output = Ret>` returning
//! the `Traced` body, which is how the compiler itself desugars an
//! `async fn`; argument lifetimes are captured as before, on every edition.
//! It stays an `async fn` (awaiting the `Traced` body) when another
//! attribute follows `#[traced_async]` or `Ret` mentions `!`.
//!
//! ```ignore
//! use async_stack::traced_async;
//!
//! #[traced_async]
//! async fn load_user(id: u64) -> std::io::Result<String> {
//!     let raw = read_record(id).await?; // a backtrace taken inside `read_record`
//!     Ok(raw.trim().to_owned())         // shows `load_user` at the line above
//! }
//!
//! #[traced_async(name = "storage::read")]
//! async fn read_record(id: u64) -> std::io::Result<String> {
//!     Ok(format!("user {id}\n"))
//! }
//! ```
//!
//! (This example is compiled and run as `tests/ui/pass/docs_example.rs`.)
//!
//! # Arguments
//!
//! * `name = "..."`: the name shown for the frame, instead of
//!   `module::path::function`. A non-empty string literal. Only on a fn.
//! * `skip`: leaves the item alone, and is removed. On a fn (or nested
//!   block) inside an instrumented block, it exempts that item. On an item
//!   outside any block it does nothing, so that a fn keeps its marker when
//!   it is moved out of a block. It takes no other argument.
//!
//! # On an `impl` block, a `trait` or an inline `mod`
//!
//! ```ignore
//! #[traced_async]
//! impl Store {
//!     async fn get(&self, key: &str) -> Option<String> { /* .. */ } // `app::Store::get`
//!
//!     #[traced_async(name = "store::put")] // kept: instrumented once, with this name
//!     async fn put(&self, key: &str, value: String) { /* .. */ }
//!
//!     #[traced_async(skip)] // left alone
//!     async fn hot(&self) -> usize { /* .. */ }
//!
//!     fn len(&self) -> usize { /* .. */ } // not async: untouched
//! }
//! ```
//!
//! On a block, the attribute instruments every `async fn` with a body
//! inside exactly as `#[traced_async]` on that fn would: same expansion,
//! same frame name (`module::Type::method`, `<module::Type as
//! module::Trait>::method`, `module::Trait::method` for a default method).
//! This holds for inherent and trait impls, generic or not, for trait
//! definitions (a method without a body is left alone), and for an inline
//! `mod`, where it reaches the `async fn`s of the mod, of its impl blocks
//! and traits, and of its nested inline mods. Everything else (consts,
//! types, plain fns, macro invocations) is left as written. A fn that
//! already carries a `#[traced_async]` keeps it, arguments included, and is
//! instrumented once.
//!
//! `mod name;` is an error: its items are in another file, which the
//! attribute cannot see on stable Rust (rustc also reports "file modules in
//! proc macro input are unstable"). Put the attribute on the impl blocks and
//! fns in that file, or write the module inline. A `name` on a block is an
//! error too, since it would name every fn alike.
//!
//! # What is attributed to which `.await`
//!
//! Only the `.await`s that belong to the function itself are rewritten: those
//! in the body, outside any nested `async` block, closure (sync or async) or
//! item (`fn`, `impl`, ...). An `async { .. }` block awaited in the body is
//! attributed to the outer `.await` of that block, because that is where the
//! function is suspended. Macro invocations cannot be looked into; those whose
//! tokens contain `.await`, and the awaiting macros `join!`, `try_join!`,
//! `select!`, `select_biased!` and `pending!` (from `futures` or `tokio`), are
//! attributed to the macro's name.
//!
//! # Attribute order
//!
//! Attribute macros expand from the outermost inwards, so the order matters:
//!
//! * **`#[async_trait]`**: put `#[async_trait]` on the `impl` (or `trait`)
//!   block and `#[traced_async]` on each method. async-trait rewrites the
//!   method first, into a plain `fn` returning `Box::pin(async move { .. })`;
//!   `#[traced_async]` recognises that shape and instruments the inner future.
//!   `#[traced_async]` on the block itself works above `#[async_trait]` (the
//!   methods get their attribute, then async-trait rewrites them) and below
//!   it (the rewritten methods are recognised).
//!
//!   ```ignore
//!   #[async_trait::async_trait]
//!   impl Store for Db {
//!       #[traced_async]
//!       async fn get(&self, key: &str) -> Option<String> { /* .. */ }
//!   }
//!   ```
//!
//! * **`#[tokio::main]`, `#[tokio::test]`** and other attributes that turn an
//!   `async fn` into a sync one: put `#[traced_async]` *above* them, so it sees
//!   the `async fn` first.
//!
//! * **tracing's `#[instrument]`**: put `#[traced_async]` *above* it. Below
//!   it, the frame keeps its name, but `#[instrument]` has moved the body into
//!   an `async` block of its own, so the body's `.await`s are not recorded and
//!   the frame is shown waiting at the `#[instrument]` line.
//!
//! Native `async fn` in traits and trait impls needs nothing special.
//!
//! # What does not change
//!
//! The instrumented fn behaves as the plain `async fn`: every argument,
//! `self` and `_` and the parts of a pattern included, is moved into the
//! future when the fn is called and dropped after the body's locals and
//! temporaries, last argument first, when the future completes or is
//! dropped; the body's tail expression may borrow an argument on every
//! edition. Rustdoc shows a destructured or `_` argument as `__argN`.
//!
//! This holds too when a `macro_rules!` brings the attribute and the fn
//! together from different places: a macro that puts `#[traced_async]` on
//! the items it is handed, or one that writes the fn and is handed its
//! attributes (`$($attr:tt)*` or `$(#[$attr:meta])*`). The names the
//! expansion adds resolve where the attribute is written, and the body's
//! names where the fn is.
//!
//! # Errors
//!
//! Misuse is reported at the offending token (an unknown argument, a second
//! `name`, a non-literal or empty name, `skip` with a value or another
//! argument, a `name` on a block, `mod name;`, a `const` or non-`async` fn,
//! an item that is neither a fn nor a block), and the item is then emitted
//! unchanged so that no follow-up errors about it appear. Inside a block,
//! each fn's own attribute reports its own errors.
//!
//! [async-stack]: https://docs.rs/async-stack

#![forbid(unsafe_code)]

mod arguments;
mod async_trait;
mod block;
mod expand;
mod parse;
mod rewrite_await;
mod validate;

use proc_macro::TokenStream;

use crate::parse::Annotated;

/// Instruments an `async fn` as a frame of the async stack, or every
/// `async fn` of an `impl` block, `trait` or inline `mod`; see the [crate]
/// docs.
#[proc_macro_attribute]
pub fn traced_async(args: TokenStream, item: TokenStream) -> TokenStream {
    let (args, item) = (
        proc_macro2::TokenStream::from(args),
        proc_macro2::TokenStream::from(item),
    );
    let expanded = parse::parse(args, item.clone()).and_then(|annotated| match annotated {
        Annotated::Skipped => Ok(item.clone()),
        Annotated::Fn(function) => validate::validate(function).map(expand::expand),
        Annotated::Block(block) => Ok(block::expand(block)),
    });
    expanded
        .unwrap_or_else(|error| expand::original_with_error(item, &error))
        .into()
}
