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
//!   `module::path::function`. A non-empty string literal.
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
//! # Errors
//!
//! Misuse is reported at the offending token (an unknown argument, a second
//! `name`, a non-literal or empty name, a `const` or non-`async` fn, an item
//! that is not a fn), and the item is then emitted unchanged so that no
//! follow-up errors about it appear.
//!
//! [async-stack]: https://docs.rs/async-stack

#![forbid(unsafe_code)]

mod arguments;
mod async_trait;
mod expand;
mod parse;
mod rewrite_await;
mod validate;

use proc_macro::TokenStream;

/// Instruments an `async fn` as a frame of the async stack; see the [crate]
/// docs.
#[proc_macro_attribute]
pub fn traced_async(args: TokenStream, item: TokenStream) -> TokenStream {
    let (args, item) = (
        proc_macro2::TokenStream::from(args),
        proc_macro2::TokenStream::from(item),
    );
    let expanded = parse::parse(args, item.clone())
        .and_then(validate::validate)
        .map(expand::expand);
    expanded
        .unwrap_or_else(|error| expand::original_with_error(item, &error))
        .into()
}
