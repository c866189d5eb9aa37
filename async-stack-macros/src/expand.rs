//! Code generation: wraps the function's future in `Traced` and emits its
//! call-site record.
//!
//! For `<attrs> <vis> async fn name<G>(x: X, (a, b): (A, B)) -> Ret where .. { body }`:
//!
//! ```text
//! <attrs> <vis> async fn name<G>(x: X, (a, b): (A, B)) -> Ret where .. {
//!     static __ASYNC_STACK_CALLSITE: ::async_stack::__private::CallSite =
//!         ::async_stack::__private::CallSite::new(
//!             "name", ::core::module_path!(), ::core::file!(), ::core::line!(), ::core::column!(), false);
//!     ::async_stack::__private::Traced::new(async move {
//!         if let ::core::option::Option::Some(__ret) = ::core::option::Option::None::<Ret> {
//!             #[allow(unreachable_code)]
//!             return __ret;
//!         }
//!         let x = x;
//!         <body, with its .awaits rewritten by crate::rewrite_await>
//!     }, &__ASYNC_STACK_CALLSITE).await
//! }
//! ```
//!
//! The signature is emitted as written (attributes, docs, visibility,
//! `unsafe`, generics, where-clauses, receiver, `impl Trait` arguments), so
//! callers see the same function; the only change is that a `mut x` argument
//! loses its `mut` to the `let mut x = x;` inside (see [`crate::arguments`],
//! which keeps the drop order of a plain `async fn`). The future is `Send`
//! exactly when the original one is, since `Traced<F>` is `Send` iff `F` is and
//! the call site is a `static`.
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
//! When parsing or validation fails, [`original_with_error`] emits the item
//! unchanged next to the error, so that the only error is ours.

use proc_macro2::TokenStream;
use quote::{ToTokens, quote, quote_spanned};
use syn::spanned::Spanned;
use syn::visit_mut::{self, VisitMut};
use syn::{Block, Expr, ExprAsync, ReturnType, Signature, Stmt, Type, TypeInfer, parse_quote};

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
    let call_site: Stmt = parse_quote! {
        static __ASYNC_STACK_CALLSITE: ::async_stack::__private::CallSite =
            ::async_stack::__private::CallSite::new(#name, ::core::module_path!(), #location, #explicit_name);
    };
    if item.sig.asyncness.is_some() {
        let mut stmts = return_type_check(&item.sig);
        stmts.append(&mut arguments::move_into_body(&mut item.sig));
        stmts.append(&mut item.block.stmts);
        let mut body = Block {
            brace_token: item.block.brace_token,
            stmts,
        };
        rewrite_await::rewrite_block(&mut body);
        let future = ExprAsync {
            attrs: Vec::new(),
            async_token: Default::default(),
            capture: Some(Default::default()),
            block: body,
        };
        item.block.stmts = vec![
            call_site,
            Stmt::Expr(
                parse_quote!(::async_stack::__private::Traced::new(#future, &__ASYNC_STACK_CALLSITE).await),
                None,
            ),
        ];
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
    // type inferred to be `Ret` here" at `Ret`, not at the attribute.
    let return_ret = quote_spanned!(span=> return __ret);
    parse_quote! {
        if let ::core::option::Option::Some(__ret) = ::core::option::Option::None::<#ty> {
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
