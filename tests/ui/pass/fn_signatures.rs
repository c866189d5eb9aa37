// Everything in a signature survives: docs, attributes, visibility, unsafe,
// lifetimes, generics, where-clauses, `impl Trait` arguments, patterns,
// `mut` bindings, raw identifiers and explicit names.
#![deny(warnings)]

use std::fmt::Display;

use async_stack::traced_async;

mod inner {
    use async_stack::traced_async;

    /// Documented, `pub(crate)`, with attributes.
    #[traced_async]
    #[inline(never)]
    #[must_use]
    pub(crate) async fn visible() -> u32 {
        1
    }
}

#[traced_async]
async fn lifetimes<'a, 'b: 'a>(x: &'a str, _y: &'b str) -> &'a str {
    x
}

#[traced_async]
async fn elided(x: &str) -> &str {
    x
}

#[traced_async]
async fn generic<T, const N: usize>(items: [T; N]) -> usize
where
    T: Clone + Send + 'static,
{
    items.to_vec().len()
}

#[traced_async]
async fn impl_trait_arg(x: impl Display + Send, y: &(impl Display + ?Sized)) -> String {
    format!("{x}{y}")
}

#[traced_async]
async fn patterns((a, b): (u32, u32), mut c: u32, _: String) -> u32 {
    c += a + b;
    c
}

#[traced_async]
async fn r#type() -> &'static str {
    "raw"
}

#[traced_async(name = "custom name")]
async fn renamed() {}

/// # Safety
/// None needed; only checks that `unsafe` is kept.
#[traced_async]
async unsafe fn unsafe_fn(p: *const u32) -> u32 {
    // SAFETY: the caller passes a valid pointer.
    unsafe { *p }
}

#[traced_async]
pub async fn no_return_type(flag: bool) {
    if flag {
        return;
    }
}

fn main() {
    futures::executor::block_on(async {
        assert_eq!(inner::visible().await, 1);
        assert_eq!(lifetimes("a", "b").await, "a");
        assert_eq!(elided("e").await, "e");
        assert_eq!(generic([1u8, 2, 3]).await, 3);
        assert_eq!(impl_trait_arg(1, "2").await, "12");
        assert_eq!(patterns((1, 2), 3, String::new()).await, 6);
        assert_eq!(r#type().await, "raw");
        renamed().await;
        let x = 5;
        // SAFETY: `&x` is valid.
        assert_eq!(unsafe { unsafe_fn(&x) }.await, 5);
        no_return_type(true).await;
    });
}
