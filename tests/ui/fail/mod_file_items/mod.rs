// The file module of `mod_file.rs`, which `#[traced_async]` cannot see.
pub async fn fetch() {}
