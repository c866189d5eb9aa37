//! The goroutine profile: every live task as one pprof sample of value 1,
//! what `go tool pprof http://.../debug/pprof/goroutine` reads.
//!
//! A task is a tree of pending frames (a `join!` has several branches);
//! a pprof sample is one stack. A task's sample is the path from its root
//! to its **first** pending branch in source order, each frame at the
//! `.await` it waits on (or where it is defined, before its first
//! `.await`); the text dump shows every branch. A task whose stack could
//! not be read (it changed on every copy) has the single frame
//! `[stack unavailable]`, and a task spawned through a helper and not
//! polled yet the single frame `[not polled yet]`, at its spawn site.
//! Labels: `task_id`, `task_name` (when named),
//! `tokio_task_id` (for a tokio task, feature `tokio`) and `state`, as in
//! the sampler's profiles.

use std::io;
use std::time::{SystemTime, UNIX_EPOCH};

use crate::read::dump::{DumpFrame, TaskInfo, live_tasks};
use crate::sampler::{CountFrame, CountPprof, TaskLabels};

/// The gzipped profile of every live task, read one task at a time.
pub(super) fn profile() -> io::Result<Vec<u8>> {
    let mut pprof = CountPprof::new("goroutine");
    live_tasks().for_each(|task| add(&mut pprof, task));
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX));
    let mut out = Vec::new();
    pprof.write(now, &mut out)?;
    Ok(out)
}

/// Adds `task`'s sample.
fn add(pprof: &mut CountPprof, task: &TaskInfo) {
    // Pre-order: the first branch is the run of frames whose depth is
    // their index.
    let path = task
        .frames
        .iter()
        .enumerate()
        .take_while(|(i, f)| f.depth as usize == *i)
        .count();
    let unavailable = [CountFrame {
        function: "[stack unavailable]",
        file: "",
        line: 0,
        column: 0,
    }];
    let labels = TaskLabels {
        task_id: task.id,
        tokio_id: task.tokio_id.unwrap_or(0),
        task_name: task.name.as_deref().unwrap_or(""),
        state: task.state.as_str(),
    };
    if task.not_polled_yet() {
        let at = task.spawned_at.as_ref();
        let queued = [CountFrame {
            function: "[not polled yet]",
            file: at.map_or("", |l| &l.file),
            line: at.map_or(0, |l| l.line),
            column: at.map_or(0, |l| l.column),
        }];
        pprof.add(queued, &labels);
    } else if path == 0 {
        pprof.add(unavailable, &labels);
    } else {
        pprof.add(task.frames[..path].iter().rev().map(frame), &labels);
    }
}

/// `f` as a pprof frame: at its `.await`, or where it is defined.
fn frame(f: &DumpFrame) -> CountFrame<'_> {
    let at = f.awaiting_at.as_ref().or(f.defined_at.as_ref());
    CountFrame {
        function: &f.function,
        file: at.map_or("", |l| &l.file),
        line: at.map_or(0, |l| l.line),
        column: at.map_or(0, |l| l.column),
    }
}
