//! UI tests of `#[traced_async]`: the forms it accepts compile and run
//! (`pass/`), and each misuse fails with the error in its `.stderr`
//! snapshot (`fail/`). Regenerate snapshots with `TRYBUILD=overwrite`, then
//! read every one.
//!
//! # Build time
//!
//! trybuild builds the cases in a project of its own, which depends on
//! every dependency and dev-dependency of the package that runs it. They
//! run in this package, whose dependencies are only what the cases use
//! (async-stack, tokio with the features they use, futures, async-trait),
//! rather than in `tests/`, whose integration tests need axum, hyper,
//! pprof, jsonschema and more: that halves the build.
//!
//! trybuild also builds every dependency twice: first with its rustflags
//! ([`FLAGS`] but the last), then again when it builds the cases, with
//! all of [`FLAGS`], which changes every dependency's hash. Given as
//! `CARGO_ENCODED_RUSTFLAGS` (which takes precedence over the `--config`
//! flags trybuild passes), the same flags reach both builds, and the
//! dependencies are built once, with exactly the flags trybuild builds
//! the cases with: that halves it again.

/// trybuild's rustflags for the build of the cases, in order: those of
/// its `src/rustflags.rs`, then the one `build_all_tests` adds in its
/// `src/cargo.rs`. Read from the source of [`TRYBUILD`].
const FLAGS: [&str; 6] = [
    "--cfg",
    "trybuild",
    "--verbose",
    "-A",
    "dead_code",
    "--diagnostic-width=140",
];

/// The version of trybuild (in `Cargo.lock`) that [`FLAGS`] repeats.
const TRYBUILD: &str = "1.0.122";

#[test]
fn ui() {
    assert_eq!(
        locked_trybuild(),
        TRYBUILD,
        "trybuild was updated: check that its rustflags are still FLAGS \
         (src/rustflags.rs, and build_all_tests in src/cargo.rs), then update TRYBUILD"
    );
    // Flags of the caller's own (a coverage run's) already reach both
    // builds, as they did before.
    if std::env::var_os("CARGO_ENCODED_RUSTFLAGS").is_none() {
        // SAFETY: this is the only test of its binary, so no other thread
        // of the process reads or writes the environment meanwhile.
        unsafe { std::env::set_var("CARGO_ENCODED_RUSTFLAGS", FLAGS.join("\x1f")) };
    }
    let t = trybuild::TestCases::new();
    t.pass("pass/*.rs");
    t.compile_fail("fail/*.rs");
}

/// The version of trybuild the workspace's `Cargo.lock` holds.
fn locked_trybuild() -> String {
    let lock = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../Cargo.lock"))
        .expect("the workspace's Cargo.lock");
    let (_, after) = lock
        .split_once("name = \"trybuild\"\nversion = \"")
        .expect("trybuild in Cargo.lock");
    after.split('"').next().unwrap().to_owned()
}
