//! Loom models of the task record: wakes racing a poll, and copies
//! racing consecutive polls.

use crate::record::current::Active;
use crate::task::TaskState;
use crate::task::loom_models::{ROOT, end_poll, start_poll, task, view};

/// A wake from another thread during a poll is not lost: the task ends
/// the poll scheduled, and the wake is counted.
#[test]
fn a_wake_during_a_poll_leaves_the_task_scheduled() {
    loom::model(|| {
        let t = task(&ROOT, 1);
        let a = Active::new();
        let seen = start_poll(t, &a);
        let waker = loom::thread::spawn(move || t.record.count_wake(|| 5));
        end_poll(t, &a, seen);
        waker.join().unwrap();
        assert_eq!(view(t).unwrap().1, TaskState::Scheduled);
    });
}

/// A copy taken while the task is polled twice in a row, both polls
/// ending in the very same idle word (same time, no wake), pairs an
/// idle task with no running frame and a running task with a path of
/// running frames: never an idle state read before a poll with the
/// running root of that poll.
#[test]
fn a_copy_never_pairs_an_idle_state_with_a_running_frame() {
    loom::model(|| {
        let t = task(&ROOT, 1);
        let poller = loom::thread::spawn(move || {
            let a = Active::new();
            for _ in 0..2 {
                let seen = start_poll(t, &a);
                end_poll(t, &a, seen);
            }
        });
        if let Some((_, state, frames)) = view(t) {
            let running = frames.iter().any(|f| f.2);
            assert!(
                state == TaskState::Running || !running,
                "{state:?} with a running frame: {frames:?}"
            );
        }
        poller.join().unwrap();
    });
}
