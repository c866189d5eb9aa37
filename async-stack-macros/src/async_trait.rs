//! Recognises a method already rewritten by `#[async_trait]`.
//!
//! `#[async_trait]` sits on the `impl` (or `trait`) block, so it expands
//! before the `#[traced_async]` on one of its methods. What reaches us is a
//! plain `fn` returning `Pin<Box<dyn Future<..> + ..>>` whose body is
//!
//! ```text
//! Box::pin(async move {
//!     if let ::core::option::Option::Some(__ret) = ::core::option::Option::None::<Ret> { .. }
//!     let __self = self;
//!     let __ret: Ret = { /* the user's body */ };
//!     __ret
//! })
//! ```
//!
//! (async-trait 0.1, `transform_block`). The `async move` block is the
//! method's real future: that is what gets instrumented.

use syn::{Block, Expr, ExprCall, ExprPath, Stmt};

/// The `async move { .. }` argument of a trailing `Box::pin(async move { .. })`
/// in `body`, if the body has that shape.
pub(crate) fn boxed_future(body: &mut Block) -> Option<&mut Expr> {
    let Some(Stmt::Expr(Expr::Call(ExprCall { func, args, .. }), None)) = body.stmts.last_mut()
    else {
        return None;
    };
    let Expr::Path(ExprPath {
        qself: None, path, ..
    }) = &**func
    else {
        return None;
    };
    let mut segments = path.segments.iter().rev();
    let is_box_pin = matches!(
        (segments.next(), segments.next()),
        (Some(pin), Some(boxed)) if pin.ident == "pin" && boxed.ident == "Box"
    );
    if !is_box_pin || args.len() != 1 {
        return None;
    }
    match args.first_mut() {
        Some(future @ Expr::Async(_)) => Some(future),
        _ => None,
    }
}
