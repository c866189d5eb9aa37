//! The text form against a straightforward `format!` renderer (the one
//! the fast renderer replaced, kept here as the reference): byte for
//! byte, on dumps built to reach every branch and on random ones.

use std::borrow::Cow;
use std::time::Duration;

use super::text::TextStream;
use super::*;
use crate::task::TaskState;

/// The reference: every piece through `core::fmt`, frames by a
/// recursive walk, nothing cached.
mod reference {
    use std::collections::BTreeMap;
    use std::fmt::Write as _;
    use std::time::Duration;

    use super::super::*;
    use crate::task::STACK_CAPACITY;

    pub(super) fn duration(d: Duration) -> String {
        let ms = d.as_millis();
        if ms < 1_000 {
            format!("{ms}ms")
        } else if ms < 60_000 {
            format!("{}.{}s", ms / 1_000, (ms % 1_000) / 100)
        } else if ms < 3_600_000 {
            format!("{}m{}s", ms / 60_000, (ms % 60_000) / 1_000)
        } else {
            format!("{}h{}m", ms / 3_600_000, (ms % 3_600_000) / 60_000)
        }
    }

    fn frames(f: &mut String, frames: &[DumpFrame]) {
        fn subtree_end(frames: &[DumpFrame], i: usize) -> usize {
            let d = frames[i].depth;
            let mut j = i + 1;
            while j < frames.len() && frames[j].depth > d {
                j += 1;
            }
            j
        }
        fn walk(f: &mut String, frames: &[DumpFrame], i: usize) {
            let end = subtree_end(frames, i);
            let mut c = i + 1;
            while c < end {
                walk(f, frames, c);
                c = subtree_end(frames, c);
            }
            let fr = &frames[i];
            // Indentation stops at the deepest frame a stack holds.
            let pad = 2 * (fr.depth.min(STACK_CAPACITY as u32 - 1) as usize + 1);
            let _ = writeln!(f, "{:pad$}{} [async]", "", fr.function);
            let pad = pad + 4;
            let _ = match (&fr.awaiting_at, fr.running) {
                (Some(at), _) => writeln!(f, "{:pad$}awaiting at {at}", ""),
                (None, true) => writeln!(f, "{:pad$}running", ""),
                (None, false) => {
                    writeln!(f, "{:pad$}not suspended at an instrumented .await", "")
                }
            };
        }
        let mut i = 0;
        while i < frames.len() {
            walk(f, frames, i);
            i = subtree_end(frames, i);
        }
    }

    fn footer(f: &mut String, t: &TaskInfo) {
        if t.stack_unavailable {
            let _ = writeln!(f, "  (stack changed during every copy; not shown)");
        } else if t.frames.is_empty() && t.polls == 0 {
            let _ = writeln!(f, "  (not polled yet)");
        }
        if t.hidden_frames > 0 {
            let _ = writeln!(f, "  ... {} more frames not shown", t.hidden_frames);
        }
        let _ = match (&t.spawned_at, t.parent) {
            (Some(at), Some(p)) => writeln!(f, "  spawned at {at} by task {p}"),
            (Some(at), None) => writeln!(f, "  spawned at {at}"),
            (None, Some(p)) => writeln!(f, "  spawned by task {p}"),
            (None, None) => match t.frames.first().and_then(|r| r.defined_at.as_ref()) {
                Some(def) => writeln!(f, "  root future defined at {def}"),
                None => Ok(()),
            },
        };
    }

    fn header(f: &mut String, t: &TaskInfo) {
        let _ = write!(f, "task {}", t.id);
        if let Some(n) = &t.name {
            let _ = write!(f, " {n:?}");
        }
        let _ = writeln!(
            f,
            " [{} {}, {} polls]:",
            t.state,
            duration(t.time_in_state()),
            t.polls
        );
    }

    pub(super) fn text(dump: &TaskDump, coalesce: bool) -> String {
        let mut f = String::new();
        if !coalesce {
            for (i, t) in dump.tasks.iter().enumerate() {
                if i > 0 {
                    f.push('\n');
                }
                header(&mut f, t);
                frames(&mut f, &t.frames);
                footer(&mut f, t);
            }
            return f;
        }
        type Key<'a> = (TaskState, &'a [DumpFrame], Option<&'a SourceLocation>);
        let mut groups: BTreeMap<u64, (Key<'_>, Vec<&TaskInfo>)> = BTreeMap::new();
        let mut index: Vec<(Key<'_>, u64)> = Vec::new();
        for t in &dump.tasks {
            let key: Key<'_> = (t.state, &t.frames, t.spawned_at.as_ref());
            match index.iter().find(|(k, _)| *k == key) {
                Some((_, first)) => groups.get_mut(first).map(|g| g.1.push(t)).unwrap_or(()),
                None => {
                    index.push((key, t.id));
                    groups.insert(t.id, (key, vec![t]));
                }
            }
        }
        for (i, (_, members)) in groups.values().enumerate() {
            if i > 0 {
                f.push('\n');
            }
            let first = members[0];
            if members.len() == 1 {
                header(&mut f, first);
            } else {
                let min = members.iter().map(|t| t.state_ms).min().unwrap_or(0);
                let max = members.iter().map(|t| t.state_ms).max().unwrap_or(0);
                let ids: Vec<String> = members
                    .iter()
                    .map(|t| match &t.name {
                        Some(n) => format!("{} {n:?}", t.id),
                        None => t.id.to_string(),
                    })
                    .collect();
                let _ = writeln!(
                    f,
                    "{} tasks [{} {}..{}]: {}",
                    members.len(),
                    first.state,
                    duration(Duration::from_millis(min)),
                    duration(Duration::from_millis(max)),
                    ids.join(", ")
                );
            }
            frames(&mut f, &first.frames);
            footer(&mut f, first);
        }
        f
    }
}

/// Every text form of `dump` is the reference's, byte for byte.
fn assert_same_text(dump: &TaskDump) {
    let plain = reference::text(dump, false);
    let coalesced = reference::text(dump, true);
    assert_eq!(dump.to_text(false), plain);
    assert_eq!(dump.to_string(), plain);
    assert_eq!(dump.to_text(true), coalesced);
    assert_eq!(format!("{dump:#}"), coalesced);
    assert_eq!(streamed(&dump.tasks), plain);
    assert_eq!(one_by_one(&dump.tasks), plain);
}

/// The tasks through the streaming writer, as `write_text` writes them.
fn streamed(tasks: &[TaskInfo]) -> String {
    let mut out = Vec::new();
    let mut stream = TextStream::new(&mut out);
    for t in tasks {
        stream.task(t);
    }
    stream.finish().unwrap();
    String::from_utf8(out).unwrap()
}

/// Each task's `Display`, separated by an empty line.
fn one_by_one(tasks: &[TaskInfo]) -> String {
    let each: Vec<String> = tasks.iter().map(TaskInfo::to_string).collect();
    each.join("\n")
}

fn at(file: &str, line: u32, column: u32) -> SourceLocation {
    SourceLocation {
        file: Cow::Owned(file.to_string()),
        line,
        column,
    }
}

fn frame(depth: u32, function: &str, awaiting: Option<(u32, u32)>, running: bool) -> DumpFrame {
    DumpFrame {
        depth,
        function: Cow::Owned(function.to_string()),
        defined_at: Some(at("src/lib.rs", depth + 1, 1)),
        awaiting_at: awaiting.map(|(l, c)| at("src/lib.rs", l, c)),
        running,
    }
}

fn task(id: u64, frames: Vec<DumpFrame>) -> TaskInfo {
    TaskInfo {
        id,
        tokio_id: None,
        branches: vec![id],
        name: None,
        state: TaskState::Idle,
        state_ms: 0,
        polls: 1,
        wakes: 0,
        parent: None,
        spawned_at: None,
        root: None,
        frames,
        hidden_frames: 0,
        stack_unavailable: false,
        waits: Vec::new(),
    }
}

fn dump_of(tasks: Vec<TaskInfo>) -> TaskDump {
    TaskDump {
        version: DUMP_FORMAT_VERSION,
        tasks,
        torn_copies: 0,
        untracked_roots: 0,
    }
}

#[test]
fn durations_match_the_reference_at_every_boundary() {
    let ms = [
        0,
        1,
        999,
        1_000,
        1_099,
        1_100,
        59_999,
        60_000,
        61_000,
        3_599_999,
        3_600_000,
        3_660_000,
        u64::MAX,
    ];
    for ms in ms {
        let d = Duration::from_millis(ms);
        assert_eq!(format_duration(d), reference::duration(d), "{ms} ms");
    }
    // Beyond u64 milliseconds (the u128 path).
    assert_eq!(
        format_duration(Duration::MAX),
        reference::duration(Duration::MAX)
    );
}

#[test]
fn indentation_stops_at_the_deepest_frame_a_stack_holds() {
    use crate::task::STACK_CAPACITY;
    // Depths only a dump built in code can hold: past the capacity, and
    // `u32::MAX`, which once asked for 8 GiB of spaces.
    let deepest = STACK_CAPACITY as u32 - 1;
    let mut beyond = frame(0, "app::beyond", None, true);
    beyond.depth = u32::MAX;
    let d = dump_of(vec![task(
        1,
        vec![
            frame(0, "app::root", Some((7, 5)), false),
            frame(deepest, "app::deepest", Some((2, 3)), false),
            beyond,
        ],
    )]);
    let wide = " ".repeat(2 * STACK_CAPACITY);
    assert_eq!(wide.len(), 126);
    let expected = format!(
        "task 1 [idle 0ms, 1 polls]:\n\
         {wide}app::beyond [async]\n\
         {wide}    running\n\
         {wide}app::deepest [async]\n\
         {wide}    awaiting at src/lib.rs:2:3\n  \
         app::root [async]\n      \
         awaiting at src/lib.rs:7:5\n  \
         root future defined at src/lib.rs:1:1\n"
    );
    assert_eq!(d.to_string(), expected);
    assert_same_text(&d);
}

#[test]
fn every_header_body_and_footer_branch_matches_the_reference() {
    let chain = |n: u32| -> Vec<DumpFrame> {
        (0..n)
            .map(|d| frame(d, &format!("app::level{d}"), Some((10 + d, 5)), false))
            .collect()
    };
    let mut named = task(1, chain(3));
    named.name = Some("worker \"7\"\n\tä\\".into());
    named.state_ms = 2_345;
    let mut plain_name = task(2, chain(3));
    plain_name.name = Some("plain-name".into());
    plain_name.state = TaskState::Running;
    plain_name.frames[2].awaiting_at = None;
    plain_name.frames[2].running = true;
    plain_name.frames[1].running = true;
    plain_name.frames[0].running = true;
    let mut not_at_await = task(3, chain(2));
    not_at_await.frames[1].awaiting_at = None;
    not_at_await.state = TaskState::Scheduled;
    not_at_await.state_ms = 7_380_000;
    let mut unavailable = task(4, Vec::new());
    unavailable.stack_unavailable = true;
    unavailable.spawned_at = Some(at("src/main.rs", 3, 9));
    unavailable.parent = Some(1);
    let mut hidden = task(5, chain(4));
    hidden.hidden_frames = 12;
    hidden.spawned_at = Some(at("src/main.rs", 4, 9));
    let mut by_parent = task(6, chain(1));
    by_parent.parent = Some(2);
    let mut no_defined = task(7, chain(1));
    no_defined.frames[0].defined_at = None;
    // Deeper than the padding constant: indentation beyond 64 spaces.
    let deep = task(8, chain(40));
    // A join: branches at the same depth, a branch with its own child,
    // then a depth that skips a level and one that goes back to the
    // root's depth (a second top-level frame).
    let depths = [0, 1, 2, 1, 1, 3, 2, 0, 1];
    let join = task(
        9,
        depths
            .iter()
            .enumerate()
            .map(|(i, &d)| frame(d, &format!("app::f{i}"), Some((i as u32, 1)), false))
            .collect(),
    );
    // Starts deeper than it continues.
    let odd = task(
        10,
        vec![
            frame(2, "app::a", Some((1, 1)), false),
            frame(0, "app::b", None, true),
            frame(1, "app::c", None, false),
        ],
    );
    let empty = task(11, Vec::new());
    // Each a name that needs escaping for one reason only.
    let escaped = [
        "back\\slash",
        "tab\there",
        "größe",
        "quote\"d",
        "\u{301}accent",
    ]
    .into_iter()
    .enumerate()
    .map(|(i, name)| {
        let mut t = task(20 + i as u64, chain(1));
        t.name = Some(name.to_string());
        t
    });
    assert_same_text(&dump_of(escaped.collect()));
    assert_same_text(&dump_of(vec![
        named,
        plain_name,
        not_at_await,
        unavailable,
        hidden,
        by_parent,
        no_defined,
        deep,
        join,
        odd,
        empty,
    ]));
    assert_same_text(&dump_of(Vec::new()));
}

/// Frames that a cache could confuse (same lengths, lines and columns,
/// so the same slot) keep their own text, and equal frames in separate
/// allocations share it.
#[test]
fn frames_that_look_alike_keep_their_own_text() {
    let tasks = (0..6)
        .map(|i| {
            let f = if i % 2 == 0 { "app::x" } else { "app::y" };
            let file = if i % 3 == 0 { "src/a.rs" } else { "src/b.rs" };
            let mut fr = frame(0, f, Some((4, 2)), false);
            fr.awaiting_at = Some(at(file, 4, 2));
            task(i, vec![fr])
        })
        .collect();
    let dump = dump_of(tasks);
    assert_same_text(&dump);
    let text = dump.to_text(false);
    assert_eq!(text.matches("app::x [async]").count(), 3);
    assert_eq!(text.matches("awaiting at src/a.rs:4:2").count(), 2);
}

/// Random dumps: a few functions, files, depths and states, so that
/// stacks, frames and groups repeat and collide in every way.
#[test]
fn random_dumps_match_the_reference() {
    let mut seed = 0x2545_f491_4f6c_dd1d_u64;
    let mut next = move |n: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % n
    };
    let names = [
        "app::a",
        "app::b",
        "app::cc",
        "<future at x.rs:1:1>",
        "a::b",
    ];
    let files = ["src/a.rs", "src/b.rs", "x.rs"];
    for round in 0..300 {
        let tasks = (0..next(40))
            .map(|id| {
                let mut depth = 0u32;
                let frames = (0..next(12))
                    .map(|i| {
                        if i > 0 {
                            depth = match next(4) {
                                0 => depth.saturating_sub(1),
                                1 => depth,
                                _ => depth + 1,
                            };
                        }
                        let awaiting = match next(4) {
                            0 => None,
                            _ => Some(at(
                                files[next(3) as usize],
                                next(3) as u32 + 1,
                                next(2) as u32 + 1,
                            )),
                        };
                        DumpFrame {
                            depth,
                            function: Cow::Owned(names[next(5) as usize].to_string()),
                            defined_at: (next(4) > 0).then(|| at("src/def.rs", 1, 1)),
                            awaiting_at: awaiting,
                            running: next(2) == 0,
                        }
                    })
                    .collect();
                let mut t = task(id * 3 + next(3), frames);
                t.name = match next(3) {
                    0 => None,
                    1 => Some(format!("t{}", next(4))),
                    _ => Some("q\"uote".to_string()),
                };
                t.state =
                    [TaskState::Idle, TaskState::Running, TaskState::Scheduled][next(3) as usize];
                t.state_ms = next(5_000_000);
                t.polls = next(100);
                t.parent = (next(2) == 0).then(|| next(10));
                t.spawned_at = (next(2) == 0).then(|| at(files[next(3) as usize], 9, 9));
                t.hidden_frames = if next(8) == 0 { 3 } else { 0 };
                t.stack_unavailable = next(10) == 0;
                t
            })
            .collect();
        let dump = dump_of(tasks);
        let plain = reference::text(&dump, false);
        assert_eq!(dump.to_text(false), plain, "round {round}");
        assert_eq!(dump.to_string(), plain, "round {round}");
        assert_eq!(streamed(&dump.tasks), plain, "round {round}");
        assert_eq!(one_by_one(&dump.tasks), plain, "round {round}");
        assert_eq!(
            format!("{dump:#}"),
            reference::text(&dump, true),
            "round {round}"
        );
    }
}

/// A real dump of this process (whatever tasks the other tests left
/// running), in every form.
#[test]
fn a_live_dump_matches_the_reference() {
    assert_same_text(&dump());
}

/// A stream longer than its buffer is written in several chunks, whole:
/// the same text as the dump's, and the target sees chunks of at least
/// 32 KB (but the last).
#[test]
fn a_long_stream_is_written_whole_in_large_chunks() {
    /// Records the size of every write.
    struct Chunks(Vec<u8>, Vec<usize>);
    impl std::io::Write for Chunks {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.extend_from_slice(buf);
            self.1.push(buf.len());
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let tasks: Vec<TaskInfo> = (0..2_000)
        .map(|id| {
            let depth = 1 + (id % 9) as u32;
            let frames = (0..depth)
                .map(|d| frame(d, &format!("app::level{d}"), Some((10 + d, 5)), false))
                .collect();
            task(id, frames)
        })
        .collect();
    let dump = dump_of(tasks);
    let mut out = Chunks(Vec::new(), Vec::new());
    let mut stream = TextStream::new(&mut out);
    for t in &dump.tasks {
        stream.task(t);
    }
    stream.finish().unwrap();
    assert_eq!(String::from_utf8(out.0).unwrap(), dump.to_string());
    let (last, full) = out.1.split_last().unwrap();
    assert!(full.len() >= 20, "{} writes", out.1.len());
    assert!(full.iter().all(|&n| n >= 32 * 1024), "{:?}", out.1);
    assert!(*last > 0);
}

/// The target's first error is returned, and nothing is written after it.
#[test]
fn a_stream_returns_the_first_error_and_stops_writing() {
    /// Fails every write after the first.
    struct FailSecond(usize);
    impl std::io::Write for FailSecond {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += 1;
            match self.0 {
                1 => Ok(buf.len()),
                _ => Err(std::io::Error::new(
                    std::io::ErrorKind::BrokenPipe,
                    "closed",
                )),
            }
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let tasks: Vec<TaskInfo> = (0..2_000)
        .map(|id| task(id, vec![frame(0, "app::a", Some((1, 1)), false)]))
        .collect();
    let mut out = FailSecond(0);
    let mut stream = TextStream::new(&mut out);
    for t in &tasks {
        stream.task(t);
    }
    let err = stream.finish().unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::BrokenPipe);
    assert_eq!(out.0, 2, "writes after the error");
}

/// A hold taken outside traced tasks is not timed: its holder shows no
/// time, and a task's hold shows how long ago it was taken.
#[test]
fn a_hold_outside_traced_tasks_shows_no_time() {
    let mut t = task(3, vec![frame(0, "app::wait", Some((9, 5)), false)]);
    let holder = |task, line, held_ms| ResourceHolder {
        task,
        acquired_at: at("src/main.rs", line, 7),
        held_ms,
        permits: 1,
    };
    t.waits.push(ResourceWait {
        task: 3,
        resource: ResourceKind::Semaphore,
        created_at: at("src/lib.rs", 2, 13),
        waiting_at: Some(at("src/lib.rs", 9, 5)),
        waiting_ms: 1_500,
        holders: vec![holder(0, 4, 0), holder(7, 20, 3_200)],
        tokio_task: None,
    });
    let text = t.to_string();
    let want = "      awaiting at src/lib.rs:9:5\n      waiting for Semaphore created at \
                src/lib.rs:2:13, held by code outside traced tasks (acquired at \
                src/main.rs:4:7) and task 7 (acquired at src/main.rs:20:7, 3.2s ago), \
                for 1.5s\n";
    assert!(text.contains(want), "{text}");
}
