//! Streaming dumps as a user sees them: `write_text` and `write_json` write
//! exactly what `dump()` writes (in registry order), `live_tasks()` filters
//! by status before reading a task and hands over each task once, and a
//! task's `Display` is its entry in the dump.
//!
//! The memory a streamed dump takes is checked in `dump_streaming_memory.rs`,
//! a test binary of its own (it counts this thread's allocations).

use std::collections::BTreeMap;

use async_stack::dump::{TaskStatus, live_tasks};
use async_stack::{TaskDump, TaskInfo, TaskState, traced_async};
use futures::channel::oneshot;
use futures::task::LocalSpawnExt;

#[traced_async]
async fn wait_one(rx: oneshot::Receiver<u32>) -> u32 {
    rx.await.unwrap_or(0)
}

#[traced_async]
async fn both(a: oneshot::Receiver<u32>, b: oneshot::Receiver<u32>) -> u32 {
    let (x, y) = futures::join!(wait_one(a), wait_one(b));
    x + y
}

#[traced_async]
async fn stream_root(a: oneshot::Receiver<u32>, b: oneshot::Receiver<u32>) -> u32 {
    both(a, b).await
}

const WAIT_LINE: u32 = 18;
const JOIN_LINE: u32 = 23;
const ROOT_LINE: u32 = 29;
const SPAWN_LINE: u32 = 55;
const ROOT_DEFINED_LINE: u32 = 28;

/// Held by each test while its tasks live: both spawn the same three.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Spawns three tasks: a named one, through the spawn helper, with two
/// pending `join!` branches; an unnamed one, spawned as is; and a named
/// one with one branch left. Returns the senders that finish them: two of
/// the first, two of the second, one of the third.
fn spawn_three(pool: &futures::executor::LocalPool) -> Vec<oneshot::Sender<u32>> {
    let mut senders = Vec::new();
    for (i, name) in ["stream-a", "", "stream-c"].into_iter().enumerate() {
        let ((ta, ra), (tb, rb)) = (oneshot::channel(), oneshot::channel());
        let fut = stream_root(ra, rb);
        let spawned = match name {
            "" => pool.spawner().spawn_local(async move {
                fut.await;
            }),
            name => pool.spawner().spawn_local(async move {
                async_stack::task::spawned(fut).named(name).await;
            }),
        };
        spawned.unwrap();
        if i == 2 {
            ta.send(1).unwrap();
        } else {
            senders.push(ta);
        }
        senders.push(tb);
    }
    senders
}

/// The ids of the three tasks of [`spawn_three`]: `stream-a`, the unnamed
/// one, `stream-c`.
fn our_ids() -> Option<[u64; 3]> {
    let d = async_stack::dump().with_name_containing("dump_streaming::stream_root");
    let id = |name: Option<&str>| {
        let mut ids = d.tasks.iter().filter(|t| t.name.as_deref() == name);
        let first = ids.next()?.id;
        assert!(ids.next().is_none(), "{d}");
        Some(first)
    };
    Some([id(Some("stream-a"))?, id(None)?, id(Some("stream-c"))?])
}

/// A text dump's entries, by task id, each with the time in its header
/// replaced by `T` (two dumps read at two instants may differ by a tick).
fn entries(text: &str) -> BTreeMap<u64, String> {
    let mut out = BTreeMap::new();
    for entry in text.split_terminator("\n\n") {
        let header = entry.lines().next().unwrap();
        let rest = header.strip_prefix("task ").expect(header);
        let id: u64 = rest[..rest.find([' ', '[']).unwrap()].parse().unwrap();
        let open = header.find('[').unwrap();
        let time = open + header[open..].find(' ').unwrap();
        let comma = header.find(", ").unwrap();
        let header = format!("{} T{}", &header[..time], &header[comma..]);
        let body = &entry[entry.find('\n').map_or(entry.len(), |i| i + 1)..];
        let mut entry = header + "\n" + body;
        if !entry.ends_with('\n') {
            entry.push('\n');
        }
        assert!(out.insert(id, entry).is_none(), "task {id} twice");
    }
    out
}

#[test]
fn write_text_writes_the_text_of_dump_task_by_task() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let mut pool = futures::executor::LocalPool::new();
    let senders = spawn_three(&pool);
    pool.run_until_stalled();
    let ids = our_ids().expect("three live tasks");

    let mut streamed = Vec::new();
    let summary = live_tasks()
        .filter(|s| ids.contains(&s.id))
        .write_text(&mut streamed)
        .unwrap();
    assert_eq!(summary.tasks, 3);
    let streamed = String::from_utf8(streamed).unwrap();

    let file = file!();
    let [a, b, c] = ids;
    let wait = format!(
        "      dump_streaming::wait_one [async]\n\
         \x20         awaiting at {file}:{WAIT_LINE}:8\n"
    );
    let rest = format!(
        "    dump_streaming::both [async]\n\
         \x20       awaiting at {file}:{JOIN_LINE}:27\n\
         \x20 dump_streaming::stream_root [async]\n\
         \x20     awaiting at {file}:{ROOT_LINE}:16\n"
    );
    let spawned = format!("  spawned at {file}:{SPAWN_LINE}:17\n");
    let expected = BTreeMap::from([
        (
            a,
            format!("task {a} \"stream-a\" [idle T, 1 polls]:\n{wait}{wait}{rest}{spawned}"),
        ),
        (
            b,
            format!(
                "task {b} [idle T, 1 polls]:\n{wait}{wait}{rest}\
                 \x20 root future defined at {file}:{ROOT_DEFINED_LINE}:10\n"
            ),
        ),
        (
            c,
            format!("task {c} \"stream-c\" [idle T, 1 polls]:\n{wait}{rest}{spawned}"),
        ),
    ]);
    assert_eq!(entries(&streamed), expected, "streamed:\n{streamed}");

    // The same text as the whole dump's, entry by entry, and as each
    // task's `Display`.
    let mut whole = async_stack::dump();
    whole.tasks.retain(|t| ids.contains(&t.id));
    assert_eq!(entries(&whole.to_string()), expected);
    let displayed: Vec<String> = whole.tasks.iter().map(TaskInfo::to_string).collect();
    assert_eq!(displayed.join("\n"), whole.to_string());

    drop(senders);
    pool.run();
    assert_eq!(our_ids(), None);
}

#[test]
fn write_json_writes_the_json_of_dump_task_by_task() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let mut pool = futures::executor::LocalPool::new();
    let senders = spawn_three(&pool);
    pool.run_until_stalled();
    let ids = our_ids().expect("three live tasks");

    let mut streamed = Vec::new();
    let summary = live_tasks()
        .filter(|s| ids.contains(&s.id))
        .write_json(&mut streamed)
        .unwrap();
    assert_eq!(summary.tasks, 3);
    let streamed = String::from_utf8(streamed).unwrap();

    // One document, which `from_json` reads back, and which `to_json`
    // writes byte for byte from the tasks it holds.
    let read = TaskDump::from_json(&streamed).unwrap();
    assert_eq!(read.to_json(), streamed);
    assert_eq!(read.version, async_stack::dump::DUMP_FORMAT_VERSION);
    assert_eq!(read.torn_copies, summary.torn_copies);
    assert_eq!(read.untracked_roots, summary.untracked_roots);

    // The same tasks as the whole dump's (times in state aside: two reads
    // at two instants may differ by a tick), in registry order.
    let mut whole = async_stack::dump();
    whole.tasks.retain(|t| ids.contains(&t.id));
    let mut tasks = read.tasks;
    tasks.sort_by_key(|t| t.id);
    for t in tasks.iter_mut().chain(&mut whole.tasks) {
        t.state_ms = 0;
    }
    assert_eq!(tasks, whole.tasks);
    let [a, b, c] = ids;
    let frames: Vec<(u64, usize, Option<&str>)> = tasks
        .iter()
        .map(|t| (t.id, t.frames.len(), t.name.as_deref()))
        .collect();
    assert_eq!(
        frames,
        [
            (a, 4, Some("stream-a")),
            (b, 4, None),
            (c, 3, Some("stream-c"))
        ]
    );

    drop(senders);
    pool.run();
    assert_eq!(our_ids(), None);
}

#[test]
fn live_tasks_filters_by_status_and_hands_each_task_over_once() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let mut pool = futures::executor::LocalPool::new();
    let mut senders = spawn_three(&pool);
    pool.run_until_stalled();
    let [a, b, c] = our_ids().expect("three live tasks");
    // Wakes the unnamed task (one of its branches is ready): scheduled.
    senders.remove(2).send(5).unwrap();

    // The filter sees every live task once, ours among them, with the
    // state the dump shows; only the idle ones of ours are read.
    let mut statuses: Vec<TaskStatus> = Vec::new();
    let mut read: Vec<(u64, Option<String>, TaskState, usize)> = Vec::new();
    let summary = live_tasks()
        .filter(|s| {
            if [a, b, c].contains(&s.id) {
                statuses.push(*s);
            }
            true
        })
        .filter(|s| [a, b, c].contains(&s.id) && s.state == TaskState::Idle)
        .for_each(|t| read.push((t.id, t.name.clone(), t.state, t.frames.len())));
    let mut seen: Vec<(u64, TaskState)> = statuses.iter().map(|s| (s.id, s.state)).collect();
    seen.sort_unstable();
    let mut expected = [
        (a, TaskState::Idle),
        (b, TaskState::Scheduled),
        (c, TaskState::Idle),
    ];
    expected.sort_unstable();
    assert_eq!(seen, expected);
    read.sort();
    let mut expected = [
        (a, Some("stream-a".to_owned()), TaskState::Idle, 4),
        (c, Some("stream-c".to_owned()), TaskState::Idle, 3),
    ];
    expected.sort();
    assert_eq!(read, expected);
    assert_eq!(summary.tasks, 2);
    assert_eq!(summary.untracked_roots, 0);

    drop(senders);
    pool.run();
}
