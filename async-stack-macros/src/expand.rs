//! Code generation: wraps the function's future in `Traced` and emits its
//! call-site record.
//!
//! For `<attrs> <vis> async fn name<G>(&self, x: X, (a, _b): (A, B), _: C) -> Ret where .. { body }`:
//!
//! ```text
//! <attrs> <vis> fn name<G>(&self, x: X, __arg2: (A, B), __arg3: C) -> impl Future<Output = Ret> where .. {
//!     static __ASYNC_STACK_CALLSITE: ::async_stack::__private::CallSite = {
//!         fn __async_stack_here() {}
//!         ::async_stack::__private::CallSite::new(
//!             "name", ::core::module_path!(), ::core::file!(), ::core::line!(), ::core::column!(), false)
//!             .with_path(|| ::core::any::type_name_of_val(&__async_stack_here))
//!     };
//!     ::async_stack::__private::Traced::new(async move {
//!         if let ::core::option::Option::Some(__ret) = ::core::option::Option::None::<Ret> {
//!             #[allow(unreachable_code)]
//!             return __ret;
//!         }
//!         let _ = &self;
//!         let x = x;
//!         let __arg2 = __arg2;
//!         let (a, _b) = __arg2;
//!         let __arg3 = __arg3;
//!         match () {
//!             () => { <body, with its .awaits rewritten by crate::rewrite_await> }
//!         }
//!     }, &__ASYNC_STACK_CALLSITE)
//! }
//! ```
//!
//! That is the `async fn`'s own desugaring with `Traced` around its body: one
//! generator per level, as without the macro, so the compiler inlines a
//! chain of traced calls as it would inline plain ones. The `impl Future` is
//! spanned in this crate's edition, whose capture rules keep every lifetime
//! of the arguments (elided ones too) as an `async fn` does, also in a
//! caller on an older edition.
//!
//! The `let`s move every argument into the future, as rustc does for an
//! `async fn` (see [`crate::arguments`], which also says what becomes of
//! `mut x`, `ref x` and `x @ ..` arguments). The body then runs in a `match`
//! arm, whose temporaries, those of the body's tail expression included,
//! are dropped when the arm ends: before the arguments, as rustc's own
//! lowering does (`drop-temps { body }`). A tail such as
//! `*mutex.lock().unwrap()` therefore compiles on every edition, and an
//! argument outlives whatever in the body borrows it. A `return { body };`
//! would do the same but warn `unreachable_code` when the body diverges
//! (`loop { .. }`); a `let __ret: Ret = { body };` would extend the life of
//! a temporary the tail borrows (`&temp()`), and cannot name an
//! `impl Trait` in `Ret`.
//!
//! `__async_stack_here`'s type name is the fn's path, impl type included
//! (`app::Store::get::..`), which `module_path!()` lacks.
//!
//! The fn stays an `async fn`, awaiting the `Traced` inside
//! (`Traced::new(..).await`), when an attribute other than the inert
//! built-in ones (`doc`, lints, `cfg`, `inline`, `must_use`, ...) follows
//! ours and may expect an `async fn` (`#[tokio::main]`, `#[tokio::test]`,
//! tracing's `#[instrument]`), or when `Ret` mentions `!` (`Output = !` is
//! not stable). The `async move` block is the same; it is then moved into
//! the outer `async fn`'s future, and maybe into further `async` blocks of
//! the attribute below, which is why the record's path may end in
//! `{{closure}}`s (the record drops them).
//!
//! Apart from the argument patterns, the signature is emitted as written
//! (attributes, docs, visibility, `unsafe`, generics, where-clauses,
//! receiver, `impl Trait` arguments), so callers see the same function.
//! The future is `Send` exactly when the original one is, since `Traced<F>`
//! is `Send` iff `F` is and the call site is a `static`.
//!
//! The never-taken `if let` fixes the `async` block's output type to `Ret`
//! before the body is type-checked, so `?` and `return` infer as in the
//! original fn. Each `impl Trait` in `Ret` becomes `_`, since it cannot be
//! named in a body; when nothing is left to say (`-> impl Trait`), the check is
//! left out. The file, line and column of the call site are spanned at the fn's
//! name; the async block keeps the body's braces, so a type error in the body
//! points into the body.
//!
//! For a method already rewritten by `#[async_trait]`, the same `Traced::new`
//! wraps the `async move` block inside `Box::pin(..)` instead (async-trait has
//! already fixed its output type and moved the arguments in).
//!
//! On an `impl` block, `trait` or inline `mod`, [`crate::block`] puts
//! `#[traced_async]` on each `async fn` inside, each of which then gets this
//! same expansion.
//!
//! When parsing or validation fails, [`original_with_error`] emits the item
//! unchanged next to the error, so that the only error is ours.

use proc_macro2::{Ident, Span, TokenStream};
use quote::{ToTokens, quote, quote_spanned};
use syn::spanned::Spanned;
use syn::visit_mut::{self, VisitMut};
use syn::{
    Block, Expr, ExprAsync, ReturnType, Signature, Stmt, Type, TypeInfer, parse_quote,
    parse_quote_spanned,
};

use crate::arguments;
use crate::async_trait;
use crate::rewrite_await;
use crate::validate::Validated;

/// The instrumented function.
pub(crate) fn expand(
    Validated {
        name,
        explicit_name,
        mut item,
    }: Validated,
) -> TokenStream {
    let span = item.sig.ident.span();
    let location = quote_spanned!(span=> ::core::file!(), ::core::line!(), ::core::column!());
    // `__async_stack_here`'s type name is the fn's path, impl type included
    // (`app::Store::get::__async_stack_here`), which `module_path!()` lacks.
    let call_site: Stmt = parse_quote! {
        static __ASYNC_STACK_CALLSITE: ::async_stack::__private::CallSite = {
            fn __async_stack_here() {}
            ::async_stack::__private::CallSite::new(#name, ::core::module_path!(), #location, #explicit_name)
                .with_path(|| ::core::any::type_name_of_val(&__async_stack_here))
        };
    };
    if item.sig.asyncness.is_some() {
        let mut stmts = return_type_check(&item.sig);
        // An attribute below may use the arguments outside our body
        // (`#[instrument]` records them), where rustc cannot see it.
        let lint_unused = !attribute_below(&item);
        stmts.append(&mut arguments::move_into_body(&mut item.sig, lint_unused));
        let brace_token = item.block.brace_token;
        let empty = Block {
            brace_token,
            stmts: Vec::new(),
        };
        let mut user_body = std::mem::replace(&mut *item.block, empty);
        rewrite_await::rewrite_block(&mut user_body);
        // The body's own scope: see the module docs.
        stmts.push(Stmt::Expr(
            parse_quote!(match () { () => #user_body }),
            None,
        ));
        let body = Block { brace_token, stmts };
        let future = ExprAsync {
            attrs: Vec::new(),
            async_token: Default::default(),
            capture: Some(Default::default()),
            block: body,
        };
        let traced: Expr =
            parse_quote!(::async_stack::__private::Traced::new(#future, &__ASYNC_STACK_CALLSITE));
        let tail: Expr = if let Some(output) = desugared_output(&item) {
            item.sig.asyncness = None;
            item.sig.output = output;
            traced
        } else {
            parse_quote!(#traced.await)
        };
        item.block.stmts = vec![call_site, Stmt::Expr(tail, None)];
    } else if let Some(future) = async_trait::boxed_future(&mut item.block) {
        if let Expr::Async(ExprAsync { block, .. }) = future {
            rewrite_await::rewrite_block(block);
        }
        *future =
            parse_quote!(::async_stack::__private::Traced::new(#future, &__ASYNC_STACK_CALLSITE));
        item.block.stmts.insert(0, call_site);
    }
    item.into_token_stream()
}

/// Attributes that leave a fn's signature alone, so it may lose its
/// `async`. Anything else (`#[tokio::main]`, `#[tokio::test]`,
/// `#[tracing::instrument]`, a `cfg_attr` that could expand to one of them)
/// may still expect an `async fn` after us.
const INERT_ATTRIBUTES: &[&str] = &[
    "doc",
    "allow",
    "warn",
    "deny",
    "forbid",
    "expect",
    "cfg",
    "must_use",
    "deprecated",
    "inline",
    "cold",
];

/// Whether an attribute other than the inert built-in ones follows ours.
fn attribute_below(item: &syn::ItemFn) -> bool {
    let inert = |attr: &syn::Attribute| {
        attr.path()
            .get_ident()
            .is_some_and(|ident| INERT_ATTRIBUTES.iter().any(|known| ident == known))
    };
    !item.attrs.iter().all(inert)
}

/// The return type of the desugared `fn .. -> impl Future<Output = Ret>`,
/// or `None` when the fn must stay an `async fn` around the `Traced` (an
/// attribute below ours may need it, or `Ret` mentions `!`, which cannot be
/// an associated type on stable Rust).
fn desugared_output(item: &syn::ItemFn) -> Option<ReturnType> {
    if attribute_below(item) {
        return None;
    }
    let ret: Type = match &item.sig.output {
        ReturnType::Default => parse_quote!(()),
        ReturnType::Type(_, ty) => (**ty).clone(),
    };
    let mut never = FindNever(false);
    syn::visit::Visit::visit_type(&mut never, &ret);
    if never.0 {
        return None;
    }
    // Spanned at no token of the caller's: generated tokens carry this
    // crate's edition (2024) whatever the caller's, so the `impl Future`
    // captures every lifetime of the arguments, elided ones included, as
    // the `async fn` did. (Spanned at the return type, a crate on edition
    // 2021 would fail with E0700; `macro_edition2021` checks this.)
    let edition_2024 = Span::mixed_site();
    Some(parse_quote_spanned! {edition_2024=>
        -> impl ::core::future::Future<Output = #ret>
    })
}

/// Whether a type mentions `!`.
struct FindNever(bool);

impl<'ast> syn::visit::Visit<'ast> for FindNever {
    fn visit_type_never(&mut self, _: &'ast syn::TypeNever) {
        self.0 = true;
    }
}

/// The statements that pin the `async` block's output type to the fn's
/// return type, if anything can be said about it.
fn return_type_check(sig: &Signature) -> Vec<Stmt> {
    let (mut ty, span) = match &sig.output {
        ReturnType::Default => (parse_quote!(()), sig.paren_token.span.close()),
        ReturnType::Type(_, ty) => ((**ty).clone(), ty.span()),
    };
    InferUnnameable.visit_type_mut(&mut ty);
    if let Type::Infer(_) = ty {
        return Vec::new();
    }
    // Spanned at the return type: a mismatch in the body then notes "return
    // type inferred to be `Ret` here" at `Ret`, not at the attribute. The
    // binding too, so that both `__ret`s name each other whatever the macro
    // contexts of the return type and of our attribute.
    let ret = Ident::new("__ret", span);
    let return_ret = quote_spanned!(span=> return #ret);
    parse_quote! {
        if let ::core::option::Option::Some(#ret) = ::core::option::Option::None::<#ty> {
            #[allow(unreachable_code)]
            #return_ret;
        }
    }
}

/// Replaces the types that cannot be written in a body (`impl Trait`, `!`)
/// and those that might expand to one (type macros) with `_`.
struct InferUnnameable;

impl VisitMut for InferUnnameable {
    fn visit_type_mut(&mut self, ty: &mut Type) {
        match ty {
            Type::ImplTrait(_) | Type::Never(_) | Type::Macro(_) => {
                *ty = Type::Infer(TypeInfer {
                    underscore_token: Default::default(),
                });
            }
            _ => visit_mut::visit_type_mut(self, ty),
        }
    }
}

/// The unchanged item followed by `error`, so that rustc reports `error` and
/// nothing that would follow from the item being missing.
pub(crate) fn original_with_error(item: TokenStream, error: &syn::Error) -> TokenStream {
    let error = error.to_compile_error();
    quote!(#item #error)
}
