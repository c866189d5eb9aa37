//! The panic hook, as a user sees it: run a binary that panics inside
//! nested traced functions under tokio and read its stderr.

use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_panicky");
const SRC: &str = "tests/src/bin/panicky.rs";

fn run(backtrace: Option<&str>, args: &[&str]) -> (i32, String) {
    let mut cmd = Command::new(BIN);
    cmd.current_dir(env!("CARGO_MANIFEST_DIR"));
    cmd.args(args);
    match backtrace {
        Some(v) => cmd.env("RUST_BACKTRACE", v),
        None => cmd.env_remove("RUST_BACKTRACE"),
    };
    let out = cmd.output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8(out.stderr).unwrap(),
    )
}

/// The async frames of the report, as `(function, location)`.
fn async_frames(stderr: &str) -> Vec<(String, String)> {
    let lines: Vec<&str> = stderr.lines().collect();
    let mut out = Vec::new();
    for (i, l) in lines.iter().enumerate() {
        if let Some(pos) = l.find("[async] ") {
            let func = l[pos + 8..].to_string();
            let loc = lines.get(i + 1).map_or("", |n| n.trim()).to_string();
            out.push((func, loc));
        }
    }
    out
}

#[test]
fn reports_message_task_and_exact_async_frames() {
    let (code, stderr) = run(Some("1"), &[]);
    assert_eq!(code, 101, "stderr:\n{stderr}");
    let mut lines = stderr.lines();
    assert_eq!(
        lines.next(),
        Some(format!("thread 'main' panicked at {SRC}:11:9:").as_str()),
        "stderr:\n{stderr}"
    );
    assert_eq!(lines.next(), Some("row 7 is corrupt"));
    let task_line = lines.next().unwrap();
    assert!(
        task_line.starts_with("in task ") && task_line.ends_with(" \"loader\""),
        "{task_line}"
    );
    assert_eq!(lines.next(), Some("async backtrace:"));
    assert_eq!(
        async_frames(&stderr),
        [
            ("panicky::parse_row".to_string(), format!("at {SRC}:11:9")),
            (
                "panicky::load".to_string(),
                format!("awaiting at {SRC}:20:31")
            ),
        ],
        "stderr:\n{stderr}"
    );
    // Chained to std's default hook? No: the message is printed once.
    assert_eq!(
        stderr.matches("row 7 is corrupt").count(),
        1,
        "stderr:\n{stderr}"
    );
}

#[test]
fn respects_rust_backtrace() {
    let (_, off) = run(None, &[]);
    assert!(!off.contains("async backtrace:"), "{off}");
    assert!(off.contains("note: run with `RUST_BACKTRACE=1`"), "{off}");
    let (_, zero) = run(Some("0"), &[]);
    assert!(!zero.contains("async backtrace:"), "{zero}");
    let (_, full) = run(Some("full"), &[]);
    let (_, short) = run(Some("1"), &[]);
    let count = |s: &str| {
        s.lines()
            .filter(|l| {
                l.trim_start()
                    .chars()
                    .next()
                    .is_some_and(|c| c.is_ascii_digit())
                    && l.contains(": ")
            })
            .count()
    };
    assert!(
        count(&full) > count(&short),
        "full:\n{full}\nshort:\n{short}"
    );
    // The full form shows the plumbing the short one folds away.
    let poll = "<async_stack::task::traced::Traced<F> as core::future::future::Future>::poll";
    assert!(full.contains(poll), "{full}");
    assert!(!short.contains(poll), "{short}");
}

/// What `panicky`'s stderr holds: panic headers (`thread 'main' panicked
/// at ..:`, which std's default hook also writes, with the thread's id
/// after its name on recent Rust), async-stack reports (the only ones with
/// an `in task` line), and runs of the user hook of `--user-hook`.
fn reports(stderr: &str) -> (usize, usize, usize) {
    let headers = stderr
        .lines()
        .filter(|l| {
            l.strip_prefix("thread 'main'")
                .and_then(|l| l.strip_suffix(&format!(" panicked at {SRC}:11:9:")))
                .is_some_and(|id| {
                    id.is_empty()
                        || id
                            .strip_prefix(" (")
                            .and_then(|id| id.strip_suffix(')'))
                            .is_some_and(|id| id.bytes().all(|b| b.is_ascii_digit()))
                })
        })
        .count();
    let ours = stderr
        .lines()
        .filter(|l| l.starts_with("in task ") && l.ends_with(" \"loader\""))
        .count();
    let user = stderr
        .lines()
        .filter(|&l| l == "user hook: row 7 is corrupt")
        .count();
    (headers, ours, user)
}

#[test]
fn replaces_the_previous_hook_by_default() {
    // std's default hook before: the panic is reported once, by us.
    let (code, stderr) = run(Some("1"), &[]);
    assert_eq!(code, 101, "stderr:\n{stderr}");
    assert_eq!(reports(&stderr), (1, 1, 0), "stderr:\n{stderr}");
    // A user hook before: replaced too, unless asked for.
    let (code, stderr) = run(Some("1"), &["--user-hook"]);
    assert_eq!(code, 101, "stderr:\n{stderr}");
    assert_eq!(reports(&stderr), (1, 1, 0), "stderr:\n{stderr}");
    let (_, stderr) = run(None, &["--user-hook"]);
    assert_eq!(reports(&stderr), (1, 1, 0), "stderr:\n{stderr}");
}

#[test]
fn calls_the_previous_hook_when_asked_after_the_report() {
    let (code, stderr) = run(Some("1"), &["--user-hook", "--chain"]);
    assert_eq!(code, 101, "stderr:\n{stderr}");
    assert_eq!(reports(&stderr), (1, 1, 1), "stderr:\n{stderr}");
    // The user hook runs after the whole report, backtrace included.
    let user = stderr.find("user hook: ").unwrap();
    let last_frame = stderr.rfind("[async] panicky::load").unwrap();
    assert!(last_frame < user, "stderr:\n{stderr}");
    // Asked for with std's default hook before: both report, ours first.
    let (code, stderr) = run(None, &["--chain"]);
    assert_eq!(code, 101, "stderr:\n{stderr}");
    assert_eq!(reports(&stderr), (2, 1, 0), "stderr:\n{stderr}");
    assert_eq!(stderr.matches("row 7 is corrupt").count(), 2);
    assert!(stderr.starts_with(&format!("thread 'main' panicked at {SRC}:11:9:\n")));
}

#[test]
fn can_append_a_dump_of_all_tasks() {
    let (_, stderr) = run(Some("1"), &["--dump"]);
    let at = stderr.find("live tasks:").expect("no dump in stderr");
    let dump = &stderr[at..];
    assert!(dump.contains(" \"loader\" (tokio task "), "{dump}");
    assert!(dump.contains(") [running "), "{dump}");
    assert!(dump.contains(&format!("awaiting at {SRC}:20:31")), "{dump}");
    // The one live task, after the report, then an empty line.
    assert_eq!(dump.matches("\ntask ").count(), 1, "{dump}");
    assert!(dump.ends_with("\n\n"), "{dump:?}");
    assert_eq!(reports(&stderr), (1, 1, 0), "stderr:\n{stderr}");
}
