//! What a user reads in a dump: the exact Go-style text, the JSON form
//! checked against the schema in `docs/`, filters, coalescing, and the
//! metadata spawn helpers add.

use std::time::Duration;

use async_stack::dump::format_duration;
use async_stack::{TaskDump, TaskState, traced_async};
use futures::channel::oneshot;
use futures::task::LocalSpawnExt;

#[traced_async]
async fn wait_one(rx: oneshot::Receiver<u32>) -> u32 {
    rx.await.unwrap_or(0)
}

#[traced_async]
async fn fan_out(a: oneshot::Receiver<u32>, b: oneshot::Receiver<u32>) -> u32 {
    let (x, y) = futures::join!(wait_one(a), wait_one(b));
    x + y
}

#[traced_async(name = "format-root")]
async fn format_root(a: oneshot::Receiver<u32>, b: oneshot::Receiver<u32>) -> u32 {
    fan_out(a, b).await
}

const WAIT_LINE: u32 = 14;
const JOIN_LINE: u32 = 19;
const ROOT_LINE: u32 = 25;

/// A task's frames as `(depth, function)`, in the order the dump lists them.
fn tree(task: &async_stack::TaskInfo) -> Vec<(u32, &str)> {
    task.frames
        .iter()
        .map(|f| (f.depth, &*f.function))
        .collect()
}

/// The dump of the one task named "format-root" by its root alone: the
/// JSON test runs the same root, concurrently, under the name "json-root",
/// which `with_name_containing` would match by its root function too.
fn own_task(mut d: TaskDump) -> TaskDump {
    d.tasks.retain(|t| t.name.as_deref() == Some("format-root"));
    assert_eq!(d.tasks.len(), 1, "{d}");
    d
}

/// Replaces the time in a header (`[idle 12ms, ...`) so text compares exactly.
fn without_times(text: &str) -> String {
    text.lines()
        .map(|l| match (l.find('['), l.find(", ")) {
            (Some(open), Some(comma)) if l.starts_with("task ") && comma > open => {
                let state_end = l[open..].find(' ').map(|i| open + i).unwrap();
                format!("{}{}{}", &l[..state_end], " T", &l[comma..])
            }
            _ => l.to_string(),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn text_form_shows_pending_join_branches_as_a_tree_innermost_first() {
    let mut pool = futures::executor::LocalPool::new();
    let (ta, ra) = oneshot::channel();
    let (tb, rb) = oneshot::channel();
    let handle = pool
        .spawner()
        .spawn_local_with_handle(format_root(ra, rb))
        .unwrap();
    pool.run_until_stalled();
    let d = own_task(async_stack::dump());
    let id = d.tasks[0].id;
    let file = file!();
    let expected = format!(
        "task {id} \"format-root\" [idle T, 1 polls]:\n\
         \x20     dump_format::wait_one [async]\n\
         \x20         awaiting at {file}:{WAIT_LINE}:8\n\
         \x20     dump_format::wait_one [async]\n\
         \x20         awaiting at {file}:{WAIT_LINE}:8\n\
         \x20   dump_format::fan_out [async]\n\
         \x20       awaiting at {file}:{JOIN_LINE}:27\n\
         \x20 format-root [async]\n\
         \x20     awaiting at {file}:{ROOT_LINE}:19\n\
         \x20 root future defined at {file}:24:10"
    );
    assert_eq!(without_times(d.to_string().trim_end()), expected);

    // One branch completes: only the pending one remains, no stale frames.
    ta.send(1).unwrap();
    pool.run_until_stalled();
    let d = own_task(async_stack::dump());
    let names = tree(&d.tasks[0]);
    assert_eq!(
        names,
        [
            (0, "format-root"),
            (1, "dump_format::fan_out"),
            (2, "dump_format::wait_one")
        ]
    );
    assert_eq!(d.tasks[0].polls, 2);
    tb.send(2).unwrap();
    assert_eq!(pool.run_until(handle), 3);
    assert!(
        async_stack::dump().task(id).is_none(),
        "a finished task is not live"
    );
}

#[test]
fn coalesced_text_counts_identical_tasks() {
    let mut pool = futures::executor::LocalPool::new();
    let mut senders = Vec::new();
    for _ in 0..3 {
        let (tx, rx) = oneshot::channel();
        senders.push(tx);
        spawn_named(&pool, "coalesce-me", wait_one(rx));
    }
    pool.run_until_stalled();
    let d = async_stack::dump().with_name_containing("coalesce-me");
    let ids: Vec<String> = d
        .tasks
        .iter()
        .map(|t| format!("{} \"coalesce-me\"", t.id))
        .collect();
    let text = format!("{d:#}");
    let header = text.lines().next().unwrap();
    assert!(header.starts_with("3 tasks [idle "), "header: {header}");
    assert!(
        header.ends_with(&format!("]: {}", ids.join(", "))),
        "header: {header}"
    );
    assert_eq!(text.matches("dump_format::wait_one [async]").count(), 1);
    drop(senders);
    pool.run();
}

/// Spawns `fut` on `pool` as a task named `name`.
fn spawn_named<F: std::future::Future + 'static>(
    pool: &futures::executor::LocalPool,
    name: &str,
    fut: F,
) {
    pool.spawner()
        .spawn_local(async_stack::task::spawned(fut).named(name).map_unit())
        .unwrap();
}

trait MapUnit: std::future::Future + Sized {
    fn map_unit(self) -> futures::future::Map<Self, fn(Self::Output)> {
        futures::FutureExt::map(self, drop as fn(Self::Output))
    }
}
impl<F: std::future::Future> MapUnit for F {}

#[test]
fn filters_select_by_state_time_and_name() {
    let mut pool = futures::executor::LocalPool::new();
    let (tx, rx) = oneshot::channel();
    spawn_named(&pool, "filter-me", wait_one(rx));
    pool.run_until_stalled();
    let d = async_stack::dump().with_name_containing("filter-me");
    assert_eq!(d.tasks.len(), 1);
    assert_eq!(d.clone().with_states(&[TaskState::Idle]).tasks.len(), 1);
    assert_eq!(
        d.clone()
            .with_states(&[TaskState::Running, TaskState::Scheduled])
            .tasks
            .len(),
        0
    );
    assert_eq!(
        d.clone()
            .with_min_time_in_state(Duration::from_secs(3600))
            .tasks
            .len(),
        0
    );
    assert_eq!(
        d.clone().with_min_time_in_state(Duration::ZERO).tasks.len(),
        1
    );
    assert_eq!(d.with_name_containing("no-such-name").tasks.len(), 0);
    drop(tx);
    pool.run();
}

#[test]
fn json_output_matches_the_checked_in_schema_and_round_trips() {
    let schema_path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/task-dump.schema.json");
    let schema: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(schema_path).unwrap()).unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap();

    let mut pool = futures::executor::LocalPool::new();
    let (ta, ra) = oneshot::channel::<u32>();
    let (tb, rb) = oneshot::channel::<u32>();
    spawn_named(&pool, "json-root", format_root(ra, rb));
    pool.run_until_stalled();
    let d = async_stack::dump().with_name_containing("json-root");
    assert_eq!(d.tasks.len(), 1);
    let json = d.to_json();
    let value: serde_json::Value = serde_json::from_str(&json).unwrap();
    let errors: Vec<String> = validator
        .iter_errors(&value)
        .map(|e| e.to_string())
        .collect();
    assert!(errors.is_empty(), "schema errors: {errors:?}\n{json}");
    assert_eq!(TaskDump::from_json(&json).unwrap(), d);
    // The schema rejects what the format never produces.
    let mut bad = value.clone();
    bad["tasks"][0]["state"] = "sleeping".into();
    assert!(!validator.is_valid(&bad));
    let mut bad = value.clone();
    bad["version"] = 1.into();
    assert!(!validator.is_valid(&bad));
    let mut bad = value.clone();
    bad["tasks"][0]["frames"][0]["depth"] = u32::MAX.into();
    assert!(!validator.is_valid(&bad));
    drop((ta, tb));
    pool.run();
}

#[test]
fn the_schema_states_the_bounds_from_json_enforces() {
    let schema_path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/task-dump.schema.json");
    let schema: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(schema_path).unwrap()).unwrap();
    let task = &schema["$defs"]["task"]["properties"];
    let frame = &schema["$defs"]["frame"]["properties"];
    let capacity = async_stack::task::STACK_CAPACITY as u64;
    let max_string = TaskDump::MAX_STRING_CHARS as u64;
    let bounds = [
        (
            &schema["properties"]["tasks"]["maxItems"],
            TaskDump::MAX_TASKS as u64,
        ),
        // Per root; the list as a whole, for a root per task at most.
        (
            &task["frames"]["maxItems"],
            capacity * TaskDump::MAX_TASKS as u64,
        ),
        (&task["branches"]["maxItems"], TaskDump::MAX_TASKS as u64),
        (&frame["depth"]["maximum"], capacity - 1),
        (&task["state_ms"]["maximum"], TaskDump::MAX_STATE_MS),
        (
            &task["hidden_frames"]["maximum"],
            u64::from(TaskDump::MAX_HIDDEN_FRAMES),
        ),
        (&task["name"]["maxLength"], max_string),
        (&task["root"]["maxLength"], max_string),
        (&frame["function"]["maxLength"], max_string),
        (
            &schema["$defs"]["location"]["properties"]["file"]["maxLength"],
            max_string,
        ),
    ];
    for (i, (stated, enforced)) in bounds.into_iter().enumerate() {
        assert_eq!(stated.as_u64(), Some(enforced), "bound {i}");
    }
    assert_eq!(TaskDump::MAX_FRAMES as u64, capacity);
}

#[test]
fn malformed_json_is_a_clear_error_not_a_panic() {
    // (input, path, message): each error names where reading stopped.
    let cases = [
        ("", "", "EOF while parsing a value at line 1 column 0"),
        ("{", "", "EOF while parsing an object at line 1 column 1"),
        (
            "{\"version\":1}",
            "",
            "missing field `tasks` at line 1 column 13",
        ),
        (
            "{\"version\":1,\"tasks\":[{\"id\":1,",
            "tasks[0]",
            "EOF while parsing a value at line 1 column 30",
        ),
        (
            "{\"version\":1,\"tasks\":[{}],\"torn_copies\":0,\"untracked_roots\":0}",
            "tasks[0]",
            "missing field `id` at line 1 column 24",
        ),
        ("\u{0}\u{ffff}", "", "expected value at line 1 column 1"),
        (
            "{\"version\":1,\"tasks\":[],\"torn_copies\":-1,\"untracked_roots\":0}",
            "torn_copies",
            "invalid value: integer `-1`, expected u64 at line 1 column 40",
        ),
        // A list cut short fails where it ends, without allocating for
        // what it might have held.
        (
            "{\"version\":1,\"tasks\":[1,2,3",
            "tasks[0]",
            "invalid type: integer `1`, expected struct TaskInfo at line 1 column 23",
        ),
    ];
    for (input, path, message) in cases {
        let err = TaskDump::from_json(input).unwrap_err();
        assert_eq!(err.path(), path, "input {input:?}");
        let expected = if path.is_empty() {
            message.to_owned()
        } else {
            format!("{path}: {message}")
        };
        assert_eq!(err.to_string(), expected, "input {input:?}");
        assert!(err.line_column().is_some(), "input {input:?}");
    }
}

#[test]
fn durations_read_like_a_person_would_write_them() {
    assert_eq!(format_duration(Duration::from_millis(0)), "0ms");
    assert_eq!(format_duration(Duration::from_millis(850)), "850ms");
    assert_eq!(format_duration(Duration::from_millis(2_345)), "2.3s");
    assert_eq!(format_duration(Duration::from_secs(252)), "4m12s");
    assert_eq!(format_duration(Duration::from_secs(7_380)), "2h3m");
}

#[traced_async]
async fn child_task(rx: tokio::sync::oneshot::Receiver<()>) {
    let _ = rx.await;
}

#[traced_async]
async fn parent_task() -> (
    u64,
    u64,
    u32,
    tokio::sync::oneshot::Sender<()>,
    async_stack::tokio::JoinHandle<()>,
) {
    let (tx, rx) = tokio::sync::oneshot::channel();
    let line = line!() + 1;
    let h = async_stack::tokio::spawn_named("the-child", child_task(rx));
    tokio::task::yield_now().await;
    let me = async_stack::current_task_id().unwrap();
    let d = async_stack::dump().with_name_containing("the-child");
    (me, d.tasks[0].parent.unwrap(), line, tx, h)
}

#[tokio::test]
async fn spawn_helpers_record_name_location_and_parent() {
    let (parent_id, recorded_parent, line, tx, h) =
        async_stack::tokio::spawn(parent_task()).await.unwrap();
    assert_eq!(recorded_parent, parent_id);
    let d = async_stack::dump().with_name_containing("the-child");
    let child = &d.tasks[0];
    assert_eq!(child.name.as_deref(), Some("the-child"));
    let at = child.spawned_at.as_ref().unwrap();
    assert_eq!((&*at.file, at.line, at.column), (file!(), line, 13));
    assert_eq!(child.root.as_deref(), Some("dump_format::child_task"));
    assert!(d.to_string().contains(&format!(
        "  spawned at {}:{line}:13 by task {parent_id}",
        file!()
    )));
    // Plain tokio::spawn of a traced future registers it too.
    let (tx2, rx2) = tokio::sync::oneshot::channel();
    let plain = tokio::spawn(child_task(rx2));
    tokio::task::yield_now().await;
    let roots = async_stack::dump()
        .tasks
        .iter()
        .filter(|t| t.root.as_deref() == Some("dump_format::child_task"))
        .count();
    assert_eq!(roots, 2);
    tx.send(()).unwrap();
    tx2.send(()).unwrap();
    h.await.unwrap();
    plain.await.unwrap();
}

#[traced_async]
async fn first_arm(rx: tokio::sync::oneshot::Receiver<()>) {
    for _ in 0..3 {
        tokio::task::yield_now().await;
    }
    let _ = rx.await;
}

#[traced_async]
async fn second_arm(rx: tokio::sync::oneshot::Receiver<()>) {
    for _ in 0..3 {
        tokio::task::yield_now().await;
    }
    let _ = rx.await;
}

#[traced_async(name = "rotating-join")]
async fn rotating_join(
    a: tokio::sync::oneshot::Receiver<()>,
    b: tokio::sync::oneshot::Receiver<()>,
) {
    tokio::join!(first_arm(a), second_arm(b));
}

/// `tokio::join!` starts polling at a different arm on each poll; the dump
/// still lists the arms in source order.
#[tokio::test(flavor = "current_thread")]
async fn join_branches_read_in_source_order_even_when_polled_in_rotation() {
    let (ta, ra) = tokio::sync::oneshot::channel();
    let (tb, rb) = tokio::sync::oneshot::channel();
    let h = tokio::spawn(rotating_join(ra, rb));
    for _ in 0..20 {
        tokio::task::yield_now().await;
    }
    let d = async_stack::dump().with_name_containing("rotating-join");
    let task = &d.tasks[0];
    assert!(task.polls >= 4, "the join was polled {} times", task.polls);
    let names = tree(task);
    assert_eq!(
        names,
        [
            (0, "rotating-join"),
            (1, "dump_format::first_arm"),
            (1, "dump_format::second_arm")
        ]
    );
    ta.send(()).unwrap();
    tb.send(()).unwrap();
    h.await.unwrap();
}
