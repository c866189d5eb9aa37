//! Moves every argument into the instrumented future, the way rustc lowers
//! an `async fn` (`lower_coroutine_body_with_moved_arguments`).
//!
//! A plain `async fn` owns all of its arguments from the call on: each one
//! is moved into the future, whether the body mentions it or not, and is
//! dropped when the future completes or is dropped, after the body's locals
//! and temporaries, last argument first. An `async move` block only captures
//! what its body mentions, so the generated code mentions every argument,
//! in declaration order, at the top of the block:
//!
//! * `x: T`, `mut x: T` and `x @ <pat>: T` (a by-value binding): the
//!   argument stays `x` and the block starts with `let <pattern> = x;`. Its
//!   `mut` moves to the `let` (the outer binding is never mutated, and would
//!   warn). The new binding keeps the argument's span, so "unused variable"
//!   and `unused_mut` still point at the argument; except when another
//!   attribute follows ours, which may use the argument outside the body
//!   (`#[instrument]` records it in its span): there an argument the body
//!   does not use is not reported. The argument itself, and the `x` moved
//!   from, are renamed nothing but respanned where our attribute is, so
//!   that they name each other when the attribute and the fn come from
//!   different macro contexts (a `macro_rules!` that puts
//!   `#[traced_async]` on the fns passed to it).
//! * Any other pattern (`_`, `(a, _b)`, `Pair { left, .. }`, `[a, ..]`,
//!   `ref x`, ...): the argument becomes `__argN: T` (hygienic: the body
//!   cannot name it) and the block starts with `let __argN = __argN;` (`mut`
//!   if the pattern has a `ref mut`) and `let <pattern> = __argN;`. What the
//!   pattern does not bind (a `_` part)
//!   stays in `__argN` and is dropped with it, after the pattern's bindings.
//!   A bare `_` gets no second `let`. Rustdoc shows the argument as
//!   `__argN`.
//! * `self`, in any form (`self`, `mut self`, `&self`, `self: Box<Self>`,
//!   ...): `let _ = &self;`, which makes the block capture `self` by value
//!   without renaming it in the body. A captured value the body does not
//!   move out is dropped when the future completes or is dropped, after
//!   every local: exactly where rustc drops the first argument.
//!
//! The argument's attributes (`#[cfg]`, lint levels) go on each of its
//! `let`s as well, so that an argument `#[cfg]`'d out leaves no `let` behind.
//! [`crate::expand`] runs the body after these statements in a scope of its
//! own, so that its tail temporaries are dropped before the arguments.

use proc_macro2::Span;
use quote::quote;
use syn::ext::IdentExt;
use syn::spanned::Spanned;
use syn::visit::Visit;
use syn::{FnArg, Ident, Pat, PatIdent, PatType, Signature, Stmt, parse_quote};

/// The statements that move `sig`'s arguments into the body, in declaration
/// order; rewrites `sig`'s patterns to match (see the module docs). Unless
/// `lint_unused`, an argument the body does not use is not reported.
pub(crate) fn move_into_body(sig: &mut Signature, lint_unused: bool) -> Vec<Stmt> {
    let mut moves = Vec::new();
    for (index, input) in sig.inputs.iter_mut().enumerate() {
        match input {
            FnArg::Receiver(receiver) => {
                let self_token = &receiver.self_token;
                moves.push(parse_quote!(let _ = &#self_token;));
            }
            FnArg::Typed(PatType { attrs, pat, .. }) => {
                if let Pat::Ident(PatIdent { by_ref: None, .. }) = &**pat {
                    moves.push(move_binding(attrs, pat, lint_unused));
                } else {
                    moves.extend(move_pattern(index, attrs, pat));
                }
            }
        }
    }
    moves
}

/// `x`, `mut x` or `x @ <pat>`: `let <pattern> = x;`, and the argument
/// becomes a plain `x`.
fn move_binding(attrs: &[syn::Attribute], pat: &mut Pat, lint_unused: bool) -> Stmt {
    let Pat::Ident(argument) = pat else {
        unreachable!("checked by the caller");
    };
    let binding = argument.clone();
    argument.mutability = None;
    argument.subpat = None;
    // The argument and the moved-from use are generated code, resolved
    // where our attribute is: they name each other whatever the macro
    // contexts of the fn's tokens and of the attribute (a `macro_rules!`
    // that puts `#[traced_async]` on the fns passed to it, or one that
    // writes the fn and is passed the attribute). Lints about using a
    // binding (`clippy::used_underscore_binding`) do not fire on them.
    let generated = Span::call_site().located_at(argument.ident.span());
    argument.ident.set_span(generated);
    let moved = &argument.ident;
    // The new binding keeps the user's span, so that the body's tokens
    // name it and an unused argument is reported as usual; except where an
    // attribute below ours may use the argument outside the body, and for
    // a `_name`, which cannot be unused but would trip
    // `clippy::no_effect_underscore_binding` instead.
    let underscore = binding.ident.unraw().to_string().starts_with('_');
    let allow = if !lint_unused {
        Some(quote!(#[allow(unused_variables)]))
    } else if underscore && binding.subpat.is_none() {
        Some(quote!(#[allow(clippy::no_effect_underscore_binding)]))
    } else {
        None
    };
    parse_quote!(#(#attrs)* #allow let #binding = #moved;)
}

/// Any other pattern: the argument becomes `__argN`, moved whole into the
/// body before the pattern binds from it.
fn move_pattern(index: usize, attrs: &[syn::Attribute], pat: &mut Pat) -> Vec<Stmt> {
    // Hygienic, so that it cannot clash with a name of the body's.
    let argument = Ident::new(
        &format!("__arg{index}"),
        Span::mixed_site().located_at(pat.span()),
    );
    let pattern = std::mem::replace(pat, parse_quote!(#argument));
    // `mut` only where a `ref mut` binding needs it: an unused `mut` would
    // warn.
    let mutability = binds_by_mut_ref(&pattern).then(<syn::Token![mut]>::default);
    let mut moves = vec![parse_quote!(#(#attrs)* let #mutability #argument = #argument;)];
    if !matches!(pattern, Pat::Wild(_)) {
        moves.push(parse_quote!(#(#attrs)* let #pattern = #argument;));
    }
    moves
}

/// Whether `pat` has a `ref mut` binding.
fn binds_by_mut_ref(pat: &Pat) -> bool {
    struct Find(bool);
    impl Visit<'_> for Find {
        fn visit_pat_ident(&mut self, pat: &PatIdent) {
            self.0 |= pat.by_ref.is_some() && pat.mutability.is_some();
            syn::visit::visit_pat_ident(self, pat);
        }
    }
    let mut find = Find(false);
    find.visit_pat(pat);
    find.0
}
