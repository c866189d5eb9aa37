//! `#[traced_async]` in a crate on edition 2021.
//!
//! The macro turns `async fn f(x: &str) -> T` into
//! `fn f(x: &str) -> impl Future<Output = T>`. Under edition 2021's capture
//! rules that `impl Future` would not capture the elided lifetime of `x`,
//! and the caller's crate would not compile; the macro spans it in its own
//! edition (2024), which captures every lifetime as the `async fn` did.
//! This workspace is on edition 2024, so the test builds and runs a small
//! edition-2021 crate of its own, offline, with the workspace's lock file.

use std::path::{Path, PathBuf};
use std::process::Command;

const MANIFEST: &str = r#"[package]
name = "edition2021-fixture"
version = "0.0.0"
edition = "2021"
publish = false

[dependencies]
async-stack = { path = "ASYNC_STACK" }

[workspace]
"#;

const MAIN: &str = r#"
use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Waker};

use async_stack::traced_async;

struct Store(String);

impl Store {
    #[traced_async]
    async fn len_with(&self, extra: &str) -> usize {
        self.0.len() + extra.len()
    }

    #[traced_async]
    async fn name<'a>(&'a self, _unused: &str) -> &'a str {
        &self.0
    }
}

#[traced_async]
async fn push_len(x: &str, out: &mut Vec<usize>) -> usize {
    out.push(x.len());
    x.len()
}

#[traced_async]
async fn debug<T: std::fmt::Debug>(t: T) -> String {
    format!("{t:?}")
}

#[traced_async]
async fn all(store: &Store) -> (usize, Vec<usize>, String, String, usize) {
    let mut out = Vec::new();
    let a = push_len("abc", &mut out).await + store.len_with("xy").await;
    let frames = async_stack::backtrace().async_depth();
    (a, out, store.name("z").await.to_string(), debug(7).await, frames)
}

fn block_on<F: Future>(f: F) -> F::Output {
    let mut f = pin!(f);
    let mut cx = Context::from_waker(Waker::noop());
    loop {
        if let Poll::Ready(out) = f.as_mut().poll(&mut cx) {
            return out;
        }
    }
}

fn main() {
    let store = Store("store".to_string());
    println!("{:?}", block_on(all(&store)));
}
"#;

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ has a parent")
        .to_path_buf()
}

#[test]
fn elided_lifetimes_are_captured_on_edition_2021() {
    let root = workspace_root();
    let dir = root.join("target").join("edition2021-fixture");
    std::fs::create_dir_all(dir.join("src")).unwrap();
    let async_stack = root.join("async-stack");
    std::fs::write(
        dir.join("Cargo.toml"),
        MANIFEST.replace("ASYNC_STACK", &async_stack.display().to_string()),
    )
    .unwrap();
    std::fs::write(dir.join("src").join("main.rs"), MAIN).unwrap();
    // The workspace's lock file pins the same versions, already fetched.
    std::fs::copy(root.join("Cargo.lock"), dir.join("Cargo.lock")).unwrap();

    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let out = Command::new(cargo)
        .args(["run", "--quiet", "--offline", "--manifest-path"])
        .arg(dir.join("Cargo.toml"))
        .env("CARGO_TARGET_DIR", root.join("target").join("edition2021"))
        .env_remove("RUSTFLAGS")
        .output()
        .expect("cargo runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "the edition-2021 crate failed:\n{stderr}"
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        r#"(10, [3], "store", "7", 1)"#,
        "{stderr}"
    );
}
