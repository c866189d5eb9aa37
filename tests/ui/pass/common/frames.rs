// What the pass tests of the block attribute read: the names of the async
// frames at a call, as a user sees them. Kept out of `ui/pass/*.rs`, which
// trybuild runs as tests of their own.

/// The function names of the async frames at the call, innermost first.
pub fn frames() -> Vec<String> {
    let bt = async_stack::backtrace();
    bt.async_frames()
        .map(|frame| frame.function().unwrap_or("<none>").to_owned())
        .collect()
}

/// `path` in the crate of the test (`trybuildNNN::path`).
#[allow(dead_code)]
pub fn here(path: &str) -> String {
    let krate = module_path!().split("::").next().unwrap_or_default();
    format!("{krate}::{path}")
}
