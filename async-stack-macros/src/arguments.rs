//! Moves the function's arguments into the instrumented future, the way
//! rustc lowers an `async fn`.
//!
//! An `async move` block only captures the arguments its body mentions, and
//! drops them when the future is dropped, in capture order; a plain
//! `async fn` moves every argument into its body (`let x = x;`, in declaration
//! order) so they are dropped after the body's locals, in reverse order. To
//! keep that order, each argument bound to a plain identifier is moved the
//! same way at the top of the instrumented block. Its `mut`, if any, moves
//! with it (the outer binding is never mutated, and would warn), and so do its
//! attributes (`#[cfg]`, lint levels). The new binding keeps the argument's
//! span, so "unused variable" and `unused_mut` still point at the argument.
//!
//! `self` and destructuring patterns (`(a, b): (A, B)`, `_`) are left to the
//! block's captures: their parts are dropped after the moved arguments.

use proc_macro2::Span;
use syn::ext::IdentExt;
use syn::{FnArg, Pat, PatIdent, PatType, Signature, Stmt, parse_quote};

/// The `let x = x;` statements that move `sig`'s identifier arguments into
/// the body, in declaration order; strips their `mut` from `sig`.
pub(crate) fn move_into_body(sig: &mut Signature) -> Vec<Stmt> {
    let mut moves = Vec::new();
    for input in &mut sig.inputs {
        let FnArg::Typed(PatType { attrs, pat, .. }) = input else {
            continue;
        };
        let Pat::Ident(PatIdent {
            by_ref: None,
            subpat: None,
            mutability,
            ident,
            ..
        }) = &mut **pat
        else {
            continue;
        };
        let mutability = mutability.take();
        let generated = Span::call_site().located_at(ident.span());
        // The moved-from use is generated code: lints about using a binding
        // (`clippy::used_underscore_binding`) must not fire on it.
        let mut moved = ident.clone();
        moved.set_span(generated);
        // The new binding keeps the user's span, so that an unused argument
        // is reported as usual; except a `_name`, which cannot be unused and
        // would trip `clippy::no_effect_underscore_binding` instead.
        let mut binding = ident.clone();
        if ident.unraw().to_string().starts_with('_') {
            binding.set_span(generated);
        }
        moves.push(parse_quote!(#(#attrs)* let #mutability #binding = #moved;));
    }
    moves
}
