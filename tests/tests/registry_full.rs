//! A full registry, as a user sees it: roots that find no record run
//! untracked, register once (they never retry on later polls), and are
//! counted once each in `untracked_roots`. `ASYNC_STACK_MAX_TASKS` sets
//! the limit; a bad value is reported once and ignored.

use std::process::Command;

fn run(max_tasks: &str) -> (String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_registry_full"))
        .env("ASYNC_STACK_MAX_TASKS", max_tasks)
        .output()
        .expect("the helper runs");
    assert!(out.status.success(), "{out:?}");
    (
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

#[test]
fn roots_beyond_the_limit_run_untracked_and_are_counted_once_each() {
    let (stdout, stderr) = run("2");
    assert_eq!(stderr, "");
    assert_eq!(
        stdout,
        "full.live=first,second\n\
         full.untracked_roots=1\n\
         full.first.tracked=true\n\
         full.spare.tracked=false\n\
         freed.live=second,late\n\
         freed.untracked_roots=2\n\
         freed.spare.tracked=false\n\
         freed.late.tracked=true\n\
         freed.another.tracked=false\n"
    );
}

#[test]
fn a_limit_it_cannot_use_is_reported_once_and_the_default_applies() {
    for bad in ["", "0", "many", "-3", "99999999999"] {
        let (stdout, stderr) = run(bad);
        assert_eq!(
            stderr.lines().count(),
            1,
            "one warning for {bad:?}: {stderr}"
        );
        assert!(
            stderr.starts_with(&format!(
                "async-stack: ASYNC_STACK_MAX_TASKS={bad:?} is not a number of tasks from 1 to "
            )),
            "{stderr}"
        );
        assert!(
            stdout.contains("full.live=first,second,spare\n"),
            "{stdout}"
        );
        assert!(stdout.contains("full.untracked_roots=0\n"), "{stdout}");
    }
}
