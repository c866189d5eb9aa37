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

/// The first root that registers inside the wrapper's poll takes its name
/// (over the root's own) and spawn location; a root that registers later
/// inside the same wrapper, in that poll or a later one, is a task of its
/// own and gets neither.
#[test]
fn only_the_first_root_inside_takes_the_metadata() {
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

    let first = entry("spawn-test-first").expect("the first root is live");
    assert_eq!(first.name.as_deref(), Some("spawn-test-task"));
    let at = first
        .spawned_at
        .expect("the first root has the spawn location");
    assert_eq!((&*at.file, at.line), (file!(), line));
    for other in ["spawn-test-second", "spawn-test-third"] {
        let t = entry(other).expect("the later roots are live");
        assert_ne!(t.id, first.id, "{other} is a task of its own");
        assert_eq!(
            t.name.as_deref(),
            Some(other),
            "its own name, not the spawn's"
        );
        assert!(t.spawned_at.is_none(), "{other}");
    }
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
