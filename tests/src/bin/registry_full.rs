//! Run by `tests/tests/registry_full.rs` with `ASYNC_STACK_MAX_TASKS` set:
//! fills the registry, then polls roots that find no record, and prints
//! what a user would see, one `key=value` per line.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Waker};

use async_stack::{Traced, TracedExt};

type Root = Pin<Box<Traced<Traced<std::future::Pending<()>>>>>;

/// A root whose child is a traced frame too, so that an untracked root
/// still has a frame to link.
fn root(name: &'static str) -> Root {
    Box::pin(
        std::future::pending::<()>()
            .traced_named("child")
            .traced_named(name),
    )
}

fn poll(root: &mut Root, times: usize) {
    let mut cx = Context::from_waker(Waker::noop());
    for _ in 0..times {
        assert!(root.as_mut().poll(&mut cx).is_pending());
    }
}

fn report(step: &str, roots: &[(&str, &Root)]) {
    let d = async_stack::dump();
    let live: Vec<&str> = d.tasks.iter().filter_map(|t| t.name.as_deref()).collect();
    println!("{step}.live={}", live.join(","));
    println!("{step}.untracked_roots={}", d.untracked_roots);
    for (name, r) in roots {
        println!("{step}.{name}.tracked={}", r.task_id().is_some());
    }
}

fn main() {
    let mut first = root("first");
    let mut second = root("second");
    poll(&mut first, 1);
    poll(&mut second, 1);
    let mut spare = root("spare");
    poll(&mut spare, 100);
    report("full", &[("first", &first), ("spare", &spare)]);

    // A record comes free: the untracked root does not take it (it asked
    // once), a new root does.
    drop(first);
    poll(&mut spare, 100);
    let mut late = root("late");
    poll(&mut late, 1);
    let mut another = root("another");
    poll(&mut another, 10);
    report(
        "freed",
        &[("spare", &spare), ("late", &late), ("another", &another)],
    );
}
