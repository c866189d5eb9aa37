//! UI tests of `#[traced_async]`: the forms it accepts compile and run
//! (`ui/pass`), and each misuse fails with the error in its `.stderr`
//! snapshot (`ui/fail`). Regenerate snapshots with `TRYBUILD=overwrite`, then
//! read every one.

#[test]
fn ui() {
    let t = trybuild::TestCases::new();
    t.pass("ui/pass/*.rs");
    t.compile_fail("ui/fail/*.rs");
}
