//! `#[traced_async]` in a crate on edition 2021.
//!
//! The macro turns `async fn f(x: &str) -> T` into
//! `fn f(x: &str) -> impl Future<Output = T>`. Under edition 2021's capture
//! rules that `impl Future` would not capture the elided lifetime of `x`,
//! and the caller's crate would not compile; the macro spans it in its own
//! edition (2024), which captures every lifetime as the `async fn` did.
//! This workspace is on edition 2024, so the fns live in the fixture crate
//! `captures-2021` (edition 2021): that it compiles is the first half of
//! the test, and this runs it for the second.

#[test]
fn elided_lifetimes_are_captured_on_edition_2021() {
    let store = captures_2021::Store("store".to_string());
    let (sum, pushed, name, debug, frames) = captures_2021::run(&store);
    assert_eq!(sum, 3 + "store".len() + "xy".len());
    assert_eq!(pushed, [3]);
    assert_eq!(name, "store");
    assert_eq!(debug, "7");
    assert_eq!(frames, 1, "`all` is the only traced frame at the capture");
}
