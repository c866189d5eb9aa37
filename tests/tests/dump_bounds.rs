//! `TaskDump::from_json` on input no dump writer produced: each bound
//! rejected with an error naming the field, each limit itself accepted,
//! and (a proptest over mutated real dumps) no input that panics, nor one
//! accepted whose text form is more than linear in the input's size.
//!
//! The limit on the number of tasks (`TaskDump::MAX_TASKS`, 2^21) would
//! take a file of hundreds of megabytes to pass; the list reader that
//! enforces it, shared with the frames' limit tested here, is tested with
//! a small limit in the library (`read/dump/bounds.rs`).

use std::sync::OnceLock;

use async_stack::task::STACK_CAPACITY;
use async_stack::{TaskDump, traced_async};
use futures::channel::oneshot;
use futures::task::LocalSpawnExt;
use proptest::prelude::*;

/// One frame, as `to_json` writes it but compact.
fn frame(depth: impl std::fmt::Display) -> String {
    frame_with(depth, "app::f", "src/lib.rs", "src/lib.rs")
}

fn frame_with(
    depth: impl std::fmt::Display,
    function: &str,
    defined: &str,
    awaiting: &str,
) -> String {
    format!(
        r#"{{"depth":{depth},"function":"{function}","defined_at":{{"file":"{defined}","line":3,"column":1}},"awaiting_at":{{"file":"{awaiting}","line":4,"column":9}},"running":false}}"#
    )
}

/// A task's fields, in the order `to_json` writes them.
struct Task {
    /// `tokio_id` and `branches` (format version 3), or none (1 and 2).
    tokio: Option<(String, String)>,
    name: String,
    state_ms: String,
    spawned_at: String,
    root: String,
    frames: Vec<String>,
    hidden_frames: String,
}

impl Default for Task {
    fn default() -> Self {
        Task {
            tokio: None,
            name: r#""worker""#.into(),
            state_ms: "1500".into(),
            spawned_at: r#"{"file":"src/main.rs","line":7,"column":5}"#.into(),
            root: r#""app::root""#.into(),
            frames: vec![frame(0), frame(1)],
            hidden_frames: "0".into(),
        }
    }
}

impl Task {
    fn json(&self, id: u64) -> String {
        let Task {
            tokio,
            name,
            state_ms,
            spawned_at,
            root,
            frames,
            hidden_frames,
        } = self;
        let frames = frames.join(",");
        let tokio = match tokio {
            Some((tokio_id, branches)) => {
                format!(r#""tokio_id":{tokio_id},"branches":{branches},"#)
            }
            None => String::new(),
        };
        format!(
            r#"{{"id":{id},{tokio}"name":{name},"state":"idle","state_ms":{state_ms},"polls":2,"wakes":1,"parent":null,"spawned_at":{spawned_at},"root":{root},"frames":[{frames}],"hidden_frames":{hidden_frames},"stack_unavailable":false}}"#
        )
    }
}

/// A dump of two tasks, ids 1 and 2, the second as `second` says.
fn dump_json(version: &str, second: Task) -> String {
    format!(
        r#"{{"version":{version},"tasks":[{},{}],"torn_copies":0,"untracked_roots":0}}"#,
        Task::default().json(1),
        second.json(2)
    )
}

/// The error for `json`, which must not parse.
fn error(json: &str) -> async_stack::FromJsonError {
    TaskDump::from_json(json).expect_err("rejected")
}

/// The 1-based column just after the first `needle` in one-line `json`,
/// where the JSON parser reports a value that ends there.
fn column_after(json: &str, needle: &str) -> usize {
    json.find(needle).expect("needle") + needle.len()
}

/// An error found after reading, with no line and column: `path: reason`.
fn assert_out_of_bounds(json: &str, path: &str, reason: &str) {
    let err = error(json);
    assert_eq!(err.path(), path);
    assert_eq!(err.line_column(), None);
    assert_eq!(err.to_string(), format!("{path}: {reason}"));
    assert!(std::error::Error::source(&err).is_none());
}

#[test]
fn the_base_dump_is_accepted_and_renders_exactly() {
    let d = TaskDump::from_json(&dump_json("2", Task::default())).unwrap();
    assert_eq!(d.tasks.len(), 2);
    let expected = "\
task 1 \"worker\" [idle 1.5s, 2 polls]:
    app::f [async]
        awaiting at src/lib.rs:4:9
  app::f [async]
      awaiting at src/lib.rs:4:9
  spawned at src/main.rs:7:5

task 2 \"worker\" [idle 1.5s, 2 polls]:
    app::f [async]
        awaiting at src/lib.rs:4:9
  app::f [async]
      awaiting at src/lib.rs:4:9
  spawned at src/main.rs:7:5
";
    assert_eq!(d.to_string(), expected);
}

#[test]
fn an_unknown_version_is_named_before_anything_else() {
    for version in ["0", "4", "4294967295"] {
        // The rest of a future format may differ: the version is checked
        // first, where it is read.
        let json = format!(r#"{{"version":{version},"tasks":"changed"}}"#);
        let err = error(&json);
        let column = column_after(&json, &format!("\"version\":{version}"));
        assert_eq!(err.path(), "version");
        assert_eq!(err.line_column(), Some((1, column)));
        assert_eq!(
            err.to_string(),
            format!(
                "version: unknown format version {version}; this build reads versions 1 to 3 \
                 at line 1 column {column}"
            )
        );
        assert!(std::error::Error::source(&err).is_some());
    }
}

#[test]
fn version_1_is_read_with_its_old_field_name() {
    let json = dump_json(
        "1",
        Task {
            hidden_frames: "7".into(),
            ..Task::default()
        },
    )
    .replace("hidden_frames", "truncated");
    let d = TaskDump::from_json(&json).unwrap();
    assert_eq!(d.version, 1);
    assert_eq!(
        d.tasks.iter().map(|t| t.hidden_frames).collect::<Vec<_>>(),
        [0, 7]
    );
}

#[test]
fn a_task_holds_at_most_stack_capacity_frames() {
    assert_eq!(TaskDump::MAX_FRAMES, STACK_CAPACITY);
    assert_eq!(STACK_CAPACITY, 63);
    // A chain as deep as a stack holds: accepted.
    let chain = |n: usize| (0..n).map(frame).collect::<Vec<_>>();
    let json = dump_json(
        "2",
        Task {
            frames: chain(STACK_CAPACITY),
            ..Task::default()
        },
    );
    let d = TaskDump::from_json(&json).unwrap();
    let depths: Vec<u32> = d.tasks[1].frames.iter().map(|f| f.depth).collect();
    assert_eq!(depths, (0..63).collect::<Vec<u32>>());
    // One more frame, even a shallow one: rejected where that frame ends.
    let mut frames = chain(STACK_CAPACITY);
    frames.push(frame(1));
    let json = dump_json(
        "2",
        Task {
            frames,
            ..Task::default()
        },
    );
    // Counted after reading, per root: the error names the first frame
    // past the limit.
    assert_out_of_bounds(
        &json,
        "tasks[1].frames[63]",
        "more than 63 frames under one root; the most is TaskDump::MAX_FRAMES",
    );
}

/// Format version 3: each task lists its roots (`branches`, its own id
/// first); a tokio task with two roots holds a full stack under each.
#[test]
fn branches_name_each_root_with_the_task_first() {
    let chain = |n: usize| (0..n).map(frame).collect::<Vec<_>>();
    let two = |tokio: (&str, &str), frames: Vec<String>| {
        dump_json(
            "3",
            Task {
                tokio: Some((tokio.0.into(), tokio.1.into())),
                frames,
                ..Task::default()
            },
        )
        .replacen(r#""id":1,"#, r#""id":1,"tokio_id":null,"branches":[1],"#, 1)
    };
    let mut both = chain(STACK_CAPACITY);
    both.extend(chain(STACK_CAPACITY));
    let d = TaskDump::from_json(&two(("34", "[2,9]"), both)).unwrap();
    assert_eq!(d.tasks[1].tokio_id, Some(34));
    assert_eq!(d.tasks[1].branches, [2, 9]);
    assert_eq!(d.tasks[1].frames.len(), 2 * STACK_CAPACITY);
    assert_eq!(d.tasks[0].branches, [1]);
    let text = d.to_string();
    assert!(
        text.contains("task 2 \"worker\" (tokio task 34; roots 2, 9) [idle 1.5s, 2 polls]:\n"),
        "{text}"
    );
    // Read back from its own JSON, the same dump.
    assert_eq!(TaskDump::from_json(&d.to_json()).unwrap(), d);

    assert_out_of_bounds(
        &two(("34", "[9,2]"), chain(2)),
        "tasks[1].branches[0]",
        "9, not the task's id 2; the first branch is the task itself",
    );
    assert_out_of_bounds(
        &two(("null", "[]"), chain(2)),
        "tasks[1].branches",
        "an empty list; a task has at least one branch, its own id",
    );
    let mut three_roots = chain(1);
    three_roots.extend(chain(1));
    three_roots.extend(chain(1));
    assert_out_of_bounds(
        &two(("34", "[2,9]"), three_roots),
        "tasks[1].frames[2].depth",
        "root number 3 of a task with 2 branches; each root is a branch",
    );
    // Version 3 without the field: no branch at all, rejected.
    assert_out_of_bounds(
        &dump_json("3", Task::default()).replacen(r#""id":1,"#, r#""id":1,"branches":[1],"#, 1),
        "tasks[1].branches",
        "an empty list; a task has at least one branch, its own id",
    );
    let err = error(&two(("34", r#"[2,"x"]"#), chain(1)));
    assert_eq!(err.path(), "tasks[1].branches[1]");
}

/// Versions 1 and 2 have no branches: each task is its own one branch,
/// and no task is a tokio task.
#[test]
fn older_versions_read_each_task_as_its_own_branch() {
    for version in ["1", "2"] {
        let json = dump_json(version, Task::default()).replace(
            "hidden_frames",
            if version == "1" {
                "truncated"
            } else {
                "hidden_frames"
            },
        );
        let d = TaskDump::from_json(&json).unwrap();
        assert_eq!(d.version.to_string(), version);
        let got: Vec<(u64, Option<u64>, Vec<u64>)> = d
            .tasks
            .iter()
            .map(|t| (t.id, t.tokio_id, t.branches.clone()))
            .collect();
        assert_eq!(got, [(1, None, vec![1]), (2, None, vec![2])]);
    }
}

#[test]
fn depths_must_form_a_tree_in_pre_order() {
    let with_depths = |depths: &[&str]| {
        dump_json(
            "2",
            Task {
                frames: depths.iter().map(frame).collect(),
                ..Task::default()
            },
        )
    };
    // Branches and returns to a shallower depth are fine.
    let d = TaskDump::from_json(&with_depths(&["0", "1", "2", "1", "2", "3", "1"])).unwrap();
    assert_eq!(d.tasks[1].frames.len(), 7);

    assert_out_of_bounds(
        &with_depths(&["1", "2"]),
        "tasks[1].frames[0].depth",
        "1 for the first frame; a task's first frame is its root, at depth 0",
    );
    assert_out_of_bounds(
        &with_depths(&["0", "1", "3"]),
        "tasks[1].frames[2].depth",
        "3 after a frame at depth 1; a frame is at most one deeper than the frame before it",
    );
    // The depth that once made rendering ask for 8 GiB of spaces.
    assert_out_of_bounds(
        &with_depths(&["0", "4294967295"]),
        "tasks[1].frames[1].depth",
        "4294967295 after a frame at depth 0; a frame is at most one deeper than the frame before it",
    );
    // Past `u32`: the parser's own error, with the path.
    let json = with_depths(&["0", "4294967296"]);
    let err = error(&json);
    let column = column_after(&json, "4294967296");
    assert_eq!(err.path(), "tasks[1].frames[1].depth");
    assert_eq!(
        err.to_string(),
        format!(
            "tasks[1].frames[1].depth: invalid value: integer `4294967296`, expected u32 \
             at line 1 column {column}"
        )
    );
}

#[test]
fn time_in_state_is_at_most_a_century() {
    assert_eq!(TaskDump::MAX_STATE_MS, 3_155_760_000_000);
    let with_state_ms = |ms: u64| {
        dump_json(
            "2",
            Task {
                state_ms: ms.to_string(),
                ..Task::default()
            },
        )
    };
    let d = TaskDump::from_json(&with_state_ms(TaskDump::MAX_STATE_MS)).unwrap();
    assert!(d.to_string().contains("[idle 876600h0m, 2 polls]"), "{d}");
    assert_out_of_bounds(
        &with_state_ms(TaskDump::MAX_STATE_MS + 1),
        "tasks[1].state_ms",
        "3155760000001 is more than TaskDump::MAX_STATE_MS (3155760000000, 100 years)",
    );
    assert_out_of_bounds(
        &with_state_ms(u64::MAX),
        "tasks[1].state_ms",
        "18446744073709551615 is more than TaskDump::MAX_STATE_MS (3155760000000, 100 years)",
    );
}

#[test]
fn hidden_frames_are_bounded() {
    let with_hidden = |n: u32| {
        dump_json(
            "2",
            Task {
                hidden_frames: n.to_string(),
                ..Task::default()
            },
        )
    };
    let d = TaskDump::from_json(&with_hidden(TaskDump::MAX_HIDDEN_FRAMES)).unwrap();
    assert!(
        d.to_string()
            .contains("  ... 2147483648 more frames not shown\n"),
        "{d}"
    );
    assert_out_of_bounds(
        &with_hidden(TaskDump::MAX_HIDDEN_FRAMES + 1),
        "tasks[1].hidden_frames",
        "2147483649 is more than TaskDump::MAX_HIDDEN_FRAMES (2147483648)",
    );
}

#[test]
fn every_string_is_bounded_and_named_by_its_path() {
    assert_eq!(TaskDump::MAX_STRING_CHARS, 65_536);
    // Characters, not bytes: `é` is two bytes.
    let at_limit = "é".repeat(TaskDump::MAX_STRING_CHARS);
    let too_long = format!("{at_limit}x");
    let reason = "a string of 65537 characters; the most is TaskDump::MAX_STRING_CHARS (65536)";
    type Edit = fn(&mut Task, &str);
    let fields: [(&str, Edit); 6] = [
        ("tasks[1].name", |t, s| t.name = format!("\"{s}\"")),
        ("tasks[1].spawned_at.file", |t, s| {
            t.spawned_at = format!(r#"{{"file":"{s}","line":7,"column":5}}"#)
        }),
        ("tasks[1].root", |t, s| t.root = format!("\"{s}\"")),
        ("tasks[1].frames[1].function", |t, s| {
            t.frames[1] = frame_with(1, s, "src/lib.rs", "src/lib.rs")
        }),
        ("tasks[1].frames[1].defined_at.file", |t, s| {
            t.frames[1] = frame_with(1, "app::f", s, "src/lib.rs")
        }),
        ("tasks[1].frames[1].awaiting_at.file", |t, s| {
            t.frames[1] = frame_with(1, "app::f", "src/lib.rs", s)
        }),
    ];
    for (path, edit) in fields {
        let mut task = Task::default();
        edit(&mut task, &at_limit);
        let d = TaskDump::from_json(&dump_json("2", task)).unwrap();
        assert!(d.to_json().contains(&at_limit), "{path}");
        let mut task = Task::default();
        edit(&mut task, &too_long);
        assert_out_of_bounds(&dump_json("2", task), path, reason);
    }
}

#[test]
fn counts_are_read_as_what_they_are() {
    let json = r#"{"version":2,"tasks":[],"torn_copies":-1,"untracked_roots":0}"#;
    let err = error(json);
    let column = column_after(json, "-1");
    assert_eq!(err.path(), "torn_copies");
    assert_eq!(err.line_column(), Some((1, column)));
    assert_eq!(
        err.to_string(),
        format!("torn_copies: invalid value: integer `-1`, expected u64 at line 1 column {column}")
    );
}

#[test]
fn what_is_wrong_with_the_document_itself_has_no_path() {
    let cases = [
        (
            "",
            "EOF while parsing a value at line 1 column 0",
            Some((1, 0)),
        ),
        (
            "[]",
            "invalid length 0, expected struct TaskDump with 4 elements at line 1 column 2",
            Some((1, 2)),
        ),
        (
            r#"{"version":2,"tasks":[],"torn_copies":0,"untracked_roots":0} {}"#,
            // The `{` after the dump.
            "trailing characters at line 1 column 62",
            Some((1, 62)),
        ),
    ];
    for (json, message, at) in cases {
        let err = error(json);
        assert_eq!(err.path(), "", "{json:?}");
        assert_eq!(err.to_string(), message, "{json:?}");
        assert_eq!(err.line_column(), at, "{json:?}");
    }
}

#[traced_async]
async fn wait_one(rx: oneshot::Receiver<u32>) -> u32 {
    rx.await.unwrap_or(0)
}

#[traced_async]
async fn fan_out(a: oneshot::Receiver<u32>, b: oneshot::Receiver<u32>) -> u32 {
    let (x, y) = futures::join!(wait_one(a), wait_one(b));
    x + y
}

#[traced_async(name = "bounds-root")]
async fn bounds_root(a: oneshot::Receiver<u32>, b: oneshot::Receiver<u32>) -> u32 {
    fan_out(a, b).await
}

/// The JSON of a real dump: three tasks suspended in a `join!` of two
/// branches under two levels, and one with a single frame, read from this
/// process (other tests' tasks filtered out).
fn real_dump_json() -> &'static str {
    static JSON: OnceLock<String> = OnceLock::new();
    JSON.get_or_init(|| {
        let mut pool = futures::executor::LocalPool::new();
        let mut senders = Vec::new();
        for _ in 0..3 {
            let (ta, ra) = oneshot::channel();
            let (tb, rb) = oneshot::channel();
            senders.push((ta, tb));
            pool.spawner()
                .spawn_local(async move {
                    bounds_root(ra, rb).await;
                })
                .unwrap();
        }
        let (tx, rx) = oneshot::channel();
        pool.spawner()
            .spawn_local(async move {
                wait_one(rx).await;
            })
            .unwrap();
        pool.run_until_stalled();
        let mut d = async_stack::dump();
        d.tasks.retain(|t| {
            t.frames
                .first()
                .is_some_and(|f| f.function == "bounds-root" || f.function.ends_with("::wait_one"))
        });
        assert_eq!(d.tasks.len(), 4, "{d}");
        let json = d.to_json();
        // The tasks stay suspended for good: a dump of them is all we need.
        std::mem::forget((pool, senders, tx));
        json
    })
}

/// The text form of any accepted dump is at most this long, for `input`
/// bytes of JSON. Each piece of text comes from a piece of the input at
/// least a quarter as long: a frame's two lines (at most 130 columns of
/// indentation, then its function, file and numbers) from its JSON object
/// (about 80 bytes of keys and punctuation, plus the same strings), a
/// header and footer from a task's object (about 170 bytes), and a
/// `Debug`-escaped name from its own text (at most 3.5 times as long).
fn text_bound(input: usize) -> usize {
    4 * input
}

/// Checks the bound on what `json` renders to, when it is accepted.
fn check_rendering(json: &str) -> Result<(), TestCaseError> {
    let d = match TaskDump::from_json(json) {
        Ok(d) => d,
        Err(e) => {
            // Every error says where: a path, or a line and column.
            prop_assert!(!e.path().is_empty() || e.line_column().is_some(), "{e}");
            return Ok(());
        }
    };
    for text in [d.to_string(), format!("{d:#}")] {
        prop_assert!(
            text.len() <= text_bound(json.len()),
            "{} bytes of text from {} bytes of JSON",
            text.len(),
            json.len()
        );
    }
    // What was accepted is written back the same way.
    prop_assert_eq!(TaskDump::from_json(&d.to_json()).unwrap(), d);
    Ok(())
}

#[test]
fn the_densest_accepted_dumps_stay_within_the_bound() {
    // A full chain of frames with one-letter names and no locations, and
    // the longest name `Debug` escapes most, written compactly: more text
    // per byte of JSON than any real dump (about 2 and 3.4 times).
    let bare = |depth: usize| {
        format!(
            r#"{{"depth":{depth},"function":"f","defined_at":null,"awaiting_at":null,"running":false}}"#
        )
    };
    let frames = (0..STACK_CAPACITY).map(bare).collect::<Vec<_>>();
    let deep = Task {
        frames: frames.clone(),
        ..Task::default()
    };
    let escaped = Task {
        // Two bytes each, and an unassigned code point: `Debug` writes
        // `\u{378}`, seven.
        name: format!("\"{}\"", "\u{378}".repeat(TaskDump::MAX_STRING_CHARS)),
        frames,
        ..Task::default()
    };
    for task in [deep, escaped] {
        let json = dump_json("2", task);
        let d = TaskDump::from_json(&json).unwrap();
        let ratio = d.to_string().len() as f64 / json.len() as f64;
        assert!(ratio > 1.9, "ratio {ratio}");
        check_rendering(&json).unwrap();
    }
}

/// Where a mutation applies, as a fraction of the input's length (or of
/// its count of numbers).
type At = prop::sample::Index;

#[derive(Clone, Debug)]
enum Mutation {
    /// Overwrite one byte.
    Byte(At, u8),
    /// Remove up to 16 bytes.
    Cut(At, usize),
    /// Insert a piece of JSON syntax.
    Insert(At, &'static str),
    /// Replace a number with another.
    Number(At, String),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    let number = prop_oneof![
        prop::sample::select(vec![
            "0",
            "1",
            "-1",
            "62",
            "63",
            "64",
            "2147483648",
            "2147483649",
            "4294967295",
            "4294967296",
            "3155760000000",
            "3155760000001",
            "18446744073709551615",
            "18446744073709551616",
            "1e3",
            "1.5",
        ])
        .prop_map(str::to_owned),
        any::<u32>().prop_map(|n| n.to_string()),
        any::<u64>().prop_map(|n| n.to_string()),
    ];
    prop_oneof![
        1 => (any::<At>(), any::<u8>()).prop_map(|(at, b)| Mutation::Byte(at, b)),
        1 => (any::<At>(), 1..16usize).prop_map(|(at, n)| Mutation::Cut(at, n)),
        1 => (
            any::<At>(),
            prop::sample::select(vec![
                "[", "]", "{", "}", ",", "\"", ":", "null", "\"x\"", "{}", "[]", "\\u0000", "\u{85}",
            ])
        )
            .prop_map(|(at, s)| Mutation::Insert(at, s)),
        4 => (any::<At>(), number).prop_map(|(at, n)| Mutation::Number(at, n)),
    ]
}

/// Applies `m` to `json`.
fn apply(json: &mut Vec<u8>, m: &Mutation) {
    match m {
        Mutation::Byte(at, b) if !json.is_empty() => {
            let i = at.index(json.len());
            json[i] = *b;
        }
        Mutation::Cut(at, n) if !json.is_empty() => {
            let i = at.index(json.len());
            let end = (i + n).min(json.len());
            json.drain(i..end);
        }
        Mutation::Insert(at, s) => {
            let i = at.index(json.len() + 1);
            json.splice(i..i, s.bytes());
        }
        Mutation::Number(at, n) => {
            // Runs of digits, each with a `-` before it if any.
            let mut runs = Vec::new();
            let mut i = 0;
            while i < json.len() {
                if json[i].is_ascii_digit() {
                    let start = if i > 0 && json[i - 1] == b'-' {
                        i - 1
                    } else {
                        i
                    };
                    while i < json.len() && json[i].is_ascii_digit() {
                        i += 1;
                    }
                    runs.push(start..i);
                } else {
                    i += 1;
                }
            }
            if !runs.is_empty() {
                let run = runs[at.index(runs.len())].clone();
                json.splice(run, n.bytes());
            }
        }
        _ => {}
    }
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 512,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    /// Mutated real dumps, pretty and compact: `from_json` never panics,
    /// every error says where, and what it accepts renders to text within
    /// a linear bound and is written back as read.
    #[test]
    fn mutated_real_dumps_never_panic_and_render_within_a_linear_bound(
        compact in any::<bool>(),
        mutations in prop::collection::vec(mutation(), 1..6),
    ) {
        let real = real_dump_json();
        let mut json = if compact {
            let value: serde_json::Value = serde_json::from_str(real).unwrap();
            serde_json::to_vec(&value).unwrap()
        } else {
            real.as_bytes().to_vec()
        };
        for m in &mutations {
            apply(&mut json, m);
        }
        check_rendering(&String::from_utf8_lossy(&json))?;
    }
}
