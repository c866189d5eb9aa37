//! Rewrites the `.await`s of an instrumented body so that each one records
//! its own await site before it suspends.
//!
//! `<expr>.await` becomes
//!
//! ```text
//! match <expr> {
//!     __async_stack_fut => {
//!         static __ASYNC_STACK_AWAIT: ::async_stack::__private::AwaitSite =
//!             ::async_stack::__private::AwaitSite::new(
//!                 &__ASYNC_STACK_CALLSITE, ::core::file!(), ::core::line!(), ::core::column!());
//!         ::async_stack::__private::set_await_site(&__ASYNC_STACK_AWAIT);
//!         let __async_stack_out = __async_stack_fut.await;
//!         #[allow(unreachable_code)]
//!         ::async_stack::__private::clear_await_site();
//!         __async_stack_out
//!     }
//! }
//! ```
//!
//! Clearing the site once the `.await` completes keeps a frame that runs
//! code between two `.await`s (say, a nested `block_on`) from being
//! reported as still suspended on the previous one. The `allow` covers
//! futures whose output is `!`.
//!
//! with `<expr>` itself rewritten first. It is a `match` and not a `let`, like
//! the compiler's own desugaring of `.await`, so that temporaries in `<expr>`
//! live exactly as long as they would with a plain `.await`. The final
//! `.await` does the `IntoFuture::into_future` call itself (calling it in the
//! scrutinee too would report a non-future three times instead of once), and
//! takes the binding by value, so the binding is not `mut`.
//!
//! Each await site names the call site of the function it is in
//! (`__ASYNC_STACK_CALLSITE`, emitted by [`crate::expand`] at the top of the
//! function's block, so in scope in every block of the body): a frame then
//! keeps one word for "which function, at which `.await`".
//!
//! # Invariants
//!
//! * Only the function's own `.await`s are rewritten. The visitor does not
//!   enter nested `async` blocks, closures (sync or async) or items: their
//!   `.await`s suspend another future, which is attributed to the `.await`
//!   that awaits it.
//! * `file!()`, `line!()` and `column!()` carry the span of the `await`
//!   keyword, a span from the user's source, so they expand to the position of
//!   that `.await` and not to the attribute. The final `.await` keeps the
//!   original `.` and `await` tokens. Everything else is located at the
//!   `.await` but marked as macro-generated, so lints for hand-written code
//!   (`clippy::unnecessary_semicolon` after the `match`, ...) stay quiet.
//! * Macro invocations cannot be looked into. One that awaits (its tokens
//!   contain `. await`, or it is one of [`AWAITING_MACROS`]) is preceded by a
//!   site record spanned at the macro's name: as a statement of its own for a
//!   statement macro (so macros that expand to `let`s or items keep working,
//!   also as a block's tail), and as `{ <record>; mac!(..) }` in expression
//!   position.

use proc_macro2::{Span, TokenStream, TokenTree};
use quote::{ToTokens, quote_spanned};
use syn::visit_mut::{self, VisitMut};
use syn::{Block, Expr, ExprAwait, ExprMacro, Ident, Item, Macro, Stmt, parse_quote_spanned};

/// Macros from `futures` and `tokio` that await internally although their
/// arguments contain no `.await`.
const AWAITING_MACROS: &[&str] = &["join", "try_join", "select", "select_biased", "pending"];

/// Rewrites every `.await` of the function that `block` is the body of.
pub(crate) fn rewrite_block(block: &mut Block) {
    RewriteAwaits.visit_block_mut(block);
}

struct RewriteAwaits;

impl VisitMut for RewriteAwaits {
    fn visit_block_mut(&mut self, block: &mut Block) {
        let stmts = std::mem::take(&mut block.stmts);
        for mut stmt in stmts {
            if let Stmt::Macro(stmt_macro) = &stmt
                && let Some(span) = awaiting_macro(&stmt_macro.mac)
            {
                let record = record_await_site(span);
                block
                    .stmts
                    .push(parse_quote_spanned!(generated(span)=> { #record }));
            }
            self.visit_stmt_mut(&mut stmt);
            block.stmts.push(stmt);
        }
    }

    fn visit_expr_mut(&mut self, expr: &mut Expr) {
        match expr {
            // Another future, and closures: not suspension points of this fn.
            Expr::Async(_) | Expr::Closure(_) => {}
            Expr::Await(await_expr) => {
                self.visit_expr_mut(&mut await_expr.base);
                *expr = recording_await(await_expr);
            }
            Expr::Macro(ExprMacro { mac, .. }) => {
                if let Some(span) = awaiting_macro(mac) {
                    let record = record_await_site(span);
                    *expr = parse_quote_spanned!(generated(span)=> { #record #expr });
                }
            }
            _ => visit_mut::visit_expr_mut(self, expr),
        }
    }

    /// Nested `fn`s, `impl`s, ... are other functions.
    fn visit_item_mut(&mut self, _: &mut Item) {}
}

/// `<base>.await` -> `match into_future(<base>) { fut => { <record>; fut.await } }`.
fn recording_await(await_expr: &ExprAwait) -> Expr {
    let ExprAwait {
        attrs,
        base,
        dot_token,
        await_token,
    } = await_expr;
    let span = generated(await_token.span);
    let record = record_await_site(await_token.span);
    // Local to the generated code: cannot capture or shadow a user variable.
    // Located where `<base>` ends, so that rustc's "remove the `.await`"
    // suggestion removes exactly `.await`.
    let base_end = base
        .to_token_stream()
        .into_iter()
        .last()
        .map_or(span, |token| token.span());
    let future = Ident::new("__async_stack_fut", Span::mixed_site().located_at(base_end));
    let out = Ident::new("__async_stack_out", Span::mixed_site().located_at(base_end));
    // A struct literal at the start of the scrutinee would be read as the
    // `match`'s body: parenthesise it, and only it (elsewhere the parentheses
    // would be `unused_parens`).
    let base = if exterior_struct_literal(base) {
        quote_spanned!(span=> (#base))
    } else {
        base.to_token_stream()
    };
    parse_quote_spanned! {span=>
        #(#attrs)*
        match #base {
            #future => {
                #record
                let #out = #future #dot_token #await_token;
                #[allow(unreachable_code)]
                ::async_stack::__private::clear_await_site();
                #out
            }
        }
    }
}

/// Whether `expr` has a struct literal outside any delimiter, which a
/// `match` scrutinee (like an `if` condition) does not accept.
fn exterior_struct_literal(expr: &Expr) -> bool {
    match expr {
        Expr::Struct(_) => true,
        Expr::MethodCall(e) => exterior_struct_literal(&e.receiver),
        Expr::Field(e) => exterior_struct_literal(&e.base),
        Expr::Await(e) => exterior_struct_literal(&e.base),
        Expr::Try(e) => exterior_struct_literal(&e.expr),
        Expr::Index(e) => exterior_struct_literal(&e.expr),
        Expr::Cast(e) => exterior_struct_literal(&e.expr),
        Expr::Unary(e) => exterior_struct_literal(&e.expr),
        Expr::Reference(e) => exterior_struct_literal(&e.expr),
        Expr::Binary(e) => exterior_struct_literal(&e.left) || exterior_struct_literal(&e.right),
        Expr::Assign(e) => exterior_struct_literal(&e.left) || exterior_struct_literal(&e.right),
        Expr::Range(e) => {
            e.start.as_deref().is_some_and(exterior_struct_literal)
                || e.end.as_deref().is_some_and(exterior_struct_literal)
        }
        _ => false,
    }
}

/// The statements that record `at`'s position as the current await site.
fn record_await_site(at: Span) -> TokenStream {
    let span = generated(at);
    let location = quote_spanned!(at=> ::core::file!(), ::core::line!(), ::core::column!());
    quote_spanned! {span=>
        static __ASYNC_STACK_AWAIT: ::async_stack::__private::AwaitSite =
            ::async_stack::__private::AwaitSite::new(&__ASYNC_STACK_CALLSITE, #location);
        ::async_stack::__private::set_await_site(&__ASYNC_STACK_AWAIT);
    }
}

/// A span at `at`'s position that is marked as macro-generated, so that lints
/// meant for hand-written code (`clippy::unnecessary_semicolon` after the
/// `match`, ...) leave the generated code alone. Not for `line!()` & co,
/// which would then report the attribute's position.
fn generated(at: Span) -> Span {
    Span::call_site().located_at(at)
}

/// If `mac` awaits, the span its await site is attributed to: its name.
fn awaiting_macro(mac: &Macro) -> Option<Span> {
    let name = &mac.path.segments.last()?.ident;
    if name == "macro_rules" {
        return None;
    }
    let awaits = AWAITING_MACROS.iter().any(|awaiting| name == awaiting)
        || contains_await(mac.tokens.clone());
    awaits.then(|| name.span())
}

/// Whether `tokens` contain `. await`, at any depth.
fn contains_await(tokens: TokenStream) -> bool {
    let mut after_dot = false;
    for token in tokens {
        match token {
            TokenTree::Ident(ident) if after_dot && ident == "await" => return true,
            TokenTree::Group(group) if contains_await(group.stream()) => return true,
            TokenTree::Punct(punct) => {
                after_dot = punct.as_char() == '.';
                continue;
            }
            _ => {}
        }
        after_dot = false;
    }
    false
}
