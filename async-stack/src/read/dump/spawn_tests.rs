//! Spawn metadata ([`crate::task::spawn`]) as a dump shows it: which task
//! root takes it, and what the wrapper costs in the future it wraps.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

use crate::read::dump::{TaskInfo, dump};
use crate::task::spawn::{Spawned, spawned};
use crate::task::traced::TracedExt;

/// Polls `f` once with a no-op waker.
fn poll_once<F: Future>(f: Pin<&mut F>) -> Poll<F::Output> {
    f.poll(&mut Context::from_waker(Waker::noop()))
}

/// The dump's entry of the root named `root`, if it is live.
fn entry(root: &str) -> Option<TaskInfo> {
    dump()
        .tasks
        .into_iter()
        .find(|t| t.frames.first().is_some_and(|f| f.function.ends_with(root)))
}

/// Every root that registers inside the wrapper's polls takes its name
/// (over the root's own) and spawn location, in the first poll or a later
/// one: the task keeps them whichever root ends first. Outside a tokio
/// task, each root is a task of its own.
#[test]
fn every_root_inside_takes_the_metadata() {
    let first = std::future::pending::<()>().traced_named("spawn-test-first");
    let second = std::future::pending::<()>().traced_named("spawn-test-second");
    let third = std::future::pending::<()>().traced_named("spawn-test-third");
    let mut polls = 0;
    let (mut first, mut second, mut third) = (Box::pin(first), Box::pin(second), Box::pin(third));
    let line = line!() + 1;
    let wrapper = spawned(std::future::poll_fn(move |cx| {
        polls += 1;
        let _ = first.as_mut().poll(cx);
        let _ = second.as_mut().poll(cx);
        if polls == 2 {
            let _ = third.as_mut().poll(cx);
        }
        Poll::<()>::Pending
    }))
    .named("spawn-test-task");
    let mut wrapper = Box::pin(wrapper);
    assert!(poll_once(wrapper.as_mut()).is_pending());
    assert!(poll_once(wrapper.as_mut()).is_pending());

    let roots = ["spawn-test-first", "spawn-test-second", "spawn-test-third"];
    let mut ids = Vec::new();
    for root in roots {
        let t = entry(root).expect("every root is live");
        assert_eq!(t.name.as_deref(), Some("spawn-test-task"), "{root}");
        let at = t.spawned_at.expect("every root has the spawn location");
        assert_eq!((&*at.file, at.line), (file!(), line), "{root}");
        ids.push(t.id);
    }
    ids.dedup();
    assert_eq!(ids.len(), 3, "each root is a task of its own: {ids:?}");
}

/// The wrapper adds three words to the future it wraps, before and after
/// its metadata is taken (which only drops the name): no flag of its own.
#[test]
fn the_wrapper_adds_three_words() {
    type Inner = std::future::Ready<[u64; 5]>;
    assert_eq!(
        std::mem::size_of::<Spawned<Inner>>(),
        std::mem::size_of::<Inner>() + 3 * std::mem::size_of::<u64>()
    );
}

/// What the tokio helpers do to a wrapper before `tokio::spawn` takes it
/// (`Spawned::preregistered`), on any executor: the task is in dumps
/// before its first poll, and each way its registration can end ends it
/// exactly once.
mod preregistered {
    use super::*;
    use crate::shim::Ordering;
    use crate::task::TaskState;
    use crate::task::registry;
    use crate::task::stack::foreign;

    /// The place a wrapper registered its task at, read back from the
    /// dump's entry named `name`: its record's index and incarnation.
    fn registered(name: &str) -> (TaskInfo, u32, u32) {
        let t = dump()
            .tasks
            .into_iter()
            .find(|t| t.name.as_deref() == Some(name))
            .expect("the task is in the dump");
        let mut found = None;
        registry::for_each_record(|index, r| {
            if r.id.load(Ordering::Acquire) == t.id {
                found = Some((
                    index,
                    foreign::incarnation(r.foreign.load(Ordering::Acquire)),
                ));
            }
        });
        let (index, inc) = found.expect("a record holds it");
        (t, index, inc)
    }

    /// The record `index` after its task ended once: no id, the next
    /// incarnation, no reference left (recycled, not leaked, not freed
    /// twice).
    fn ended_once(index: u32, inc: u32) {
        let r = registry::record(index).expect("a record");
        assert_eq!(r.id.load(Ordering::Acquire), 0);
        assert_eq!(
            foreign::incarnation(r.foreign.load(Ordering::Acquire)),
            inc + 1,
            "one end, one incarnation"
        );
        assert_eq!(r.refs.load(Ordering::Acquire), 0, "recycled");
    }

    #[test]
    fn a_wrapper_dropped_unpolled_ends_its_task() {
        let w = spawned(std::future::pending::<()>().traced())
            .named("prereg-unpolled")
            .preregistered();
        let (t, index, inc) = registered("prereg-unpolled");
        assert_eq!(
            (t.state, t.polls, t.frames.len(), t.root.as_deref()),
            (TaskState::Scheduled, 0, 0, None)
        );
        let at = t.spawned_at.as_ref().expect("a spawn site");
        assert_eq!(&*at.file, file!());
        drop(w);
        ended_once(index, inc);
    }

    #[test]
    fn the_first_root_takes_the_task_over() {
        let mut w = Box::pin(
            spawned(std::future::pending::<()>().traced_named("prereg-root"))
                .named("prereg-taken")
                .preregistered(),
        );
        let (before, index, inc) = registered("prereg-taken");
        assert!(poll_once(w.as_mut()).is_pending());
        let (after, index_after, inc_after) = registered("prereg-taken");
        assert_eq!((after.id, index_after, inc_after), (before.id, index, inc));
        assert_eq!((after.state, after.polls), (TaskState::Idle, 1));
        assert_eq!(after.frames.len(), 1);
        assert_eq!(after.frames[0].function, "prereg-root");
        assert_eq!(after.spawned_at, before.spawned_at);
        drop(w);
        ended_once(index, inc);
    }

    /// A root that panics in the poll that took the task over leaves the
    /// metadata in the wrapper (its poll did not return); the wrapper's
    /// drop must leave the task to the root, which ends it.
    #[test]
    fn a_root_that_unwinds_in_its_first_poll_ends_the_task_once() {
        let boom = async { panic!("boom in the first poll") }.traced_named("boom");
        let mut w = Box::pin(spawned(boom).named("prereg-boom").preregistered());
        let (_, index, inc) = registered("prereg-boom");
        let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let _ = poll_once(w.as_mut());
        }));
        assert!(caught.is_err());
        let r = registry::record(index).expect("a record");
        assert_ne!(
            r.id.load(Ordering::Acquire),
            0,
            "kept until the root is dropped"
        );
        drop(w);
        ended_once(index, inc);
    }

    /// A first poll in which no root registers ends the task registered at
    /// spawn; the root that registers later takes the metadata, name,
    /// spawn site and parent, as a new task.
    #[test]
    fn a_first_poll_without_a_root_ends_the_task_and_passes_the_metadata_on() {
        let mut root = Some(Box::pin(
            std::future::pending::<()>().traced_named("prereg-late-root"),
        ));
        let mut polls = 0;
        let mut w = Box::pin(
            spawned(std::future::poll_fn(move |cx| {
                polls += 1;
                if polls > 1
                    && let Some(r) = root.as_mut()
                {
                    let _ = r.as_mut().poll(cx);
                }
                Poll::<()>::Pending
            }))
            .named("prereg-late")
            .preregistered(),
        );
        let (before, index, inc) = registered("prereg-late");
        assert!(poll_once(w.as_mut()).is_pending());
        ended_once(index, inc);
        assert!(dump().task(before.id).is_none());
        assert!(poll_once(w.as_mut()).is_pending());
        let (late, _, _) = registered("prereg-late");
        assert_ne!(late.id, before.id);
        assert_eq!(late.frames[0].function, "prereg-late-root");
        assert_eq!(late.spawned_at, before.spawned_at);
        assert_eq!(late.parent, before.parent);
    }
}
