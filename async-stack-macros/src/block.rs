//! `#[traced_async]` on a block: an `impl` block (inherent or trait impl),
//! a `trait`, or an inline `mod`.
//!
//! The block attribute puts `#[traced_async]` on each `async fn` of the
//! block that has a body, and on each `impl`, `trait` and `mod` nested in a
//! `mod`; the compiler then expands those one by one. Each fn therefore gets
//! exactly the expansion of [`crate::expand`], named as it would be with the
//! attribute written on it (`module::Type::method`, or
//! `<module::Type as module::Trait>::method`), and a nested block gets this
//! same treatment. For
//!
//! ```text
//! #[traced_async]
//! impl Store {
//!     async fn get(&self) { .. }
//!     #[traced_async(name = "store::put")]
//!     async fn put(&self) { .. }
//!     #[traced_async(skip)]
//!     async fn hot(&self) { .. }
//!     fn len(&self) -> usize { .. }
//!     const LIMIT: usize = 8;
//! }
//! ```
//!
//! the output is
//!
//! ```text
//! impl Store {
//!     #[::async_stack::traced_async]
//!     async fn get(&self) { .. }
//!     #[traced_async(name = "store::put")]
//!     async fn put(&self) { .. }
//!     async fn hot(&self) { .. }
//!     fn len(&self) -> usize { .. }
//!     const LIMIT: usize = 8;
//! }
//! ```
//!
//! # Rules
//!
//! * The new attribute goes first, above the item's own attributes: the
//!   fn is expanded as if the user had written `#[traced_async]` on top
//!   (see "Attribute order" in the crate docs).
//! * An item that already carries a `#[traced_async]` (with or without
//!   arguments) keeps it and gets no second one, so it is instrumented
//!   once, with its own arguments.
//! * A `#[traced_async(skip)]` marker is removed, and the item it is on is
//!   left as written, nested blocks included.
//! * Instrumented are the fns an attribute on the fn would accept: an
//!   `async fn` with a body, and a fn that `#[async_trait]` (above ours on
//!   the block) has already rewritten (see [`crate::async_trait`]). With
//!   `#[async_trait]` below ours, the methods are still `async fn`s here,
//!   and async-trait rewrites them, attribute included, before the
//!   attribute expands: both orders work.
//! * Other items (consts, types, plain fns, macro invocations, `use`s) are
//!   left untouched: what a macro invocation expands to is out of sight.
//! * A `mod name;` nested in an inline `mod` gets the attribute too, whose
//!   expansion then reports that it cannot see into the file.
//!
//! Nothing here can fail: what the block attribute rejects (a `name`, a
//! file module) is rejected by [`crate::parse`], and a fn's own errors are
//! reported, at the fn's tokens, when its attribute expands.

use proc_macro2::TokenStream;
use quote::ToTokens;
use syn::{
    Attribute, Block, ImplItem, Item, ItemImpl, ItemMod, ItemTrait, Signature, TraitItem,
    TraitItemFn, parse_quote,
};

use crate::async_trait;
use crate::parse::{is_skip_marker, is_traced_async};

/// The block, with `#[traced_async]` on each of its items that takes it.
pub(crate) fn expand(mut block: Item) -> TokenStream {
    match &mut block {
        Item::Impl(block) => {
            for item in &mut block.items {
                if let ImplItem::Fn(function) = item {
                    let instrument = instrumentable(&function.sig, &mut function.block);
                    mark(&mut function.attrs, instrument);
                }
            }
        }
        Item::Trait(block) => {
            for item in &mut block.items {
                if let TraitItem::Fn(TraitItemFn {
                    attrs,
                    sig,
                    default,
                    ..
                }) = item
                {
                    let instrument = default
                        .as_mut()
                        .is_some_and(|body| instrumentable(sig, body));
                    mark(attrs, instrument);
                }
            }
        }
        Item::Mod(ItemMod {
            content: Some((_, items)),
            ..
        }) => {
            for item in items {
                match item {
                    Item::Fn(function) => {
                        let instrument = instrumentable(&function.sig, &mut function.block);
                        mark(&mut function.attrs, instrument);
                    }
                    Item::Impl(ItemImpl { attrs, .. })
                    | Item::Trait(ItemTrait { attrs, .. })
                    | Item::Mod(ItemMod { attrs, .. }) => mark(attrs, true),
                    _ => {}
                }
            }
        }
        // `crate::parse` lets no other item through.
        _ => {}
    }
    block.into_token_stream()
}

/// Whether a fn with this signature and body is one that `#[traced_async]`
/// on the fn would instrument.
fn instrumentable(sig: &Signature, body: &mut Block) -> bool {
    sig.asyncness.is_some() || async_trait::boxed_future(body).is_some()
}

/// Removes a `skip` marker from `attrs`; otherwise, if `instrument`, puts
/// `#[traced_async]` on top unless one is there already.
fn mark(attrs: &mut Vec<Attribute>, instrument: bool) {
    let count = attrs.len();
    attrs.retain(|attr| !is_skip_marker(attr));
    let skipped = attrs.len() != count;
    if instrument && !skipped && !attrs.iter().any(|attr| is_traced_async(attr.path())) {
        attrs.insert(0, parse_quote!(#[::async_stack::traced_async]));
    }
}
