//! One million live tasks fit in the registry, every one is in a dump with
//! its stack, and the registry returns to empty once they end.
//!
//! A million tasks take seconds in a debug build, so this runs in release
//! (`scripts/test.sh` runs it with the `release-lines` profile); a debug
//! run lists it as ignored.

use std::future::{Future, Pending};
use std::pin::Pin;
use std::task::{Context, Waker};

use async_stack::{Traced, TracedExt};

const TASKS: usize = 1_000_000;

type Task = Pin<Box<Traced<Traced<Pending<()>>>>>;

/// Polls a million two-frame tasks once each and checks the dump sees them
/// all; returns the tasks, still live.
fn a_million() -> Vec<Task> {
    let mut cx = Context::from_waker(Waker::noop());
    let mut tasks: Vec<Task> = (0..TASKS)
        .map(|_| {
            Box::pin(
                std::future::pending::<()>()
                    .traced_named("leaf")
                    .traced_named("million"),
            )
        })
        .collect();
    for t in &mut tasks {
        assert!(t.as_mut().poll(&mut cx).is_pending());
    }
    tasks
}

#[test]
#[cfg_attr(
    debug_assertions,
    ignore = "a million tasks: scripts/test.sh runs this in release"
)]
fn a_million_live_tasks_fit_and_the_registry_empties_after() {
    // Three rounds: 3 million records would not fit under the cap (2^21 - 2),
    // so the later rounds show that ended tasks gave their records back.
    for round in 0..3 {
        let tasks = a_million();
        let d = async_stack::dump();
        assert_eq!(d.untracked_roots, 0, "round {round}");
        assert_eq!(d.tasks.len(), TASKS, "round {round}");
        let ids: Vec<u64> = tasks.iter().map(|t| t.task_id().unwrap()).collect();
        assert!(ids.windows(2).all(|w| w[0] < w[1]), "ids in spawn order");
        for (t, id) in d.tasks.iter().zip(&ids) {
            assert_eq!(t.id, *id);
            let frames: Vec<&str> = t.frames.iter().map(|f| &*f.function).collect();
            assert_eq!(frames, ["million", "leaf"], "task {id}");
            assert_eq!(t.hidden_frames, 0);
        }
        drop(tasks);
        let after = async_stack::dump();
        assert!(
            after.tasks.is_empty(),
            "round {round}: {} left",
            after.tasks.len()
        );
    }
}
