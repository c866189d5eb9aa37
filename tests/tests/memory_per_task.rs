//! What a live task allocates beside its record, held to what the README
//! says ("Cost"): an unnamed task spawned on tokio takes no extension,
//! only its 8-byte tokio id (pages of 256 ids); a named one takes an
//! extension too. Benchmarks measure resident bytes only when someone
//! runs them; this catches a new per-task allocation on every CI run
//! (filing roots under their tokio task once put 32 bytes in every task's
//! extension, and no run noticed for three days).
//!
//! A process of its own: nothing else here allocates extensions.

use async_stack::debug::__testing::side_pages_allocated;
use async_stack::traced_async;

#[traced_async]
async fn idle(rx: tokio::sync::oneshot::Receiver<()>) {
    let _ = rx.await;
}

const TASKS: usize = 2_000;
/// Entries of a page of extensions or tokio ids.
const PAGE: usize = 256;

/// Runs `rt` until the dump shows `wanted` tasks polled at least once
/// (the helper registers each task as it spawns it, and its first poll
/// files it under its tokio task; the runtime polls a batch of tasks
/// between two polls of `block_on`'s future), or for at most `TASKS`
/// yields; returns how many polled tasks the dump shows then.
fn live_tasks_once_polled(rt: &tokio::runtime::Runtime, wanted: usize) -> usize {
    let live = || {
        async_stack::dump::dump()
            .tasks
            .iter()
            .filter(|t| t.polls > 0)
            .count()
    };
    rt.block_on(async {
        for _ in 0..TASKS {
            if live() == wanted {
                break;
            }
            tokio::task::yield_now().await;
        }
    });
    live()
}

#[test]
fn unnamed_tokio_tasks_take_no_extension_and_8_bytes_of_tokio_id() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    assert_eq!(side_pages_allocated(), (0, 0), "nothing yet");
    let _runtime = rt.enter();
    let keep: Vec<_> = (0..TASKS)
        .map(|_| {
            let (tx, rx) = tokio::sync::oneshot::channel();
            (tx, async_stack::tokio::spawn(idle(rx)))
        })
        .collect();
    assert_eq!(
        live_tasks_once_polled(&rt, TASKS),
        TASKS,
        "every task is live and registered"
    );
    let (ext_pages, tokio_pages) = side_pages_allocated();
    assert_eq!(ext_pages, 0, "an unnamed task takes no extension");
    // The records of this process are the first ones handed out, so the
    // tokio ids of 2,000 tasks fill the first pages.
    assert_eq!(
        tokio_pages,
        TASKS.div_ceil(PAGE),
        "8 bytes a task, in pages"
    );

    // A named task takes an extension (a page of them).
    let (tx, rx) = tokio::sync::oneshot::channel();
    let named = async_stack::tokio::spawn_named("named", idle(rx));
    assert_eq!(live_tasks_once_polled(&rt, TASKS + 1), TASKS + 1);
    assert_eq!(side_pages_allocated().0, 1);

    drop(tx);
    rt.block_on(async {
        named.await.unwrap();
        for (tx, handle) in keep {
            drop(tx);
            handle.await.unwrap();
        }
    });
}
