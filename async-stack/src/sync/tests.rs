//! What the wrappers record: holds with their lines and tasks, waits from
//! the first `Pending` to their end, whatever ends them.

use std::sync::Arc;

use crate::sync::{Mutex, RwLock, Semaphore};
use crate::task::record::layout::current_task_id;
use crate::task::traced::TracedExt;
use crate::waits::query::{WaitingFor, waiting_tasks};
use crate::waits::resource::{Kind, Registry};

fn rt() -> ::tokio::runtime::Runtime {
    ::tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// What task `task` waits for now.
fn waits_of(task: u64) -> Option<WaitingFor> {
    waiting_tasks(Registry::global()).remove(&task)
}

/// Spawns `fut` as a traced task and gives it turns until it waits;
/// returns its id and handle.
async fn waiting<F>(fut: F) -> (u64, crate::tokio::JoinHandle<()>)
where
    F: Future<Output = ()> + Send + 'static,
{
    let (tx, rx) = ::tokio::sync::oneshot::channel();
    let h = crate::tokio::spawn(
        async move {
            tx.send(current_task_id().unwrap()).unwrap();
            fut.await;
        }
        .traced(),
    );
    let id = rx.await.unwrap();
    for _ in 0..100 {
        if waits_of(id).is_some() {
            return (id, h);
        }
        ::tokio::task::yield_now().await;
    }
    panic!("task {id} never waited");
}

#[test]
fn a_wait_names_the_holder_and_ends_when_acquired() {
    rt().block_on(async {
        let m = Arc::new(Mutex::new(0));
        let created = line!() - 1;
        let (ready, held) = ::tokio::sync::oneshot::channel();
        let (release, go) = ::tokio::sync::oneshot::channel::<()>();
        let m2 = m.clone();
        let holder = crate::tokio::spawn(
            async move {
                let (g, line) = (m2.lock().await, line!());
                ready.send((current_task_id().unwrap(), line)).unwrap();
                go.await.unwrap();
                drop(g);
            }
            .traced(),
        );
        let (holder_id, acquired) = held.await.unwrap();
        let m3 = m.clone();
        let (waiter, h) = waiting(async move {
            drop(m3.lock().await);
        })
        .await;
        let w = waits_of(waiter).unwrap();
        assert_eq!(
            (w.kind, w.created_at.line(), w.permits),
            (Kind::Mutex, created, 1)
        );
        assert_eq!(w.holders.len(), 1);
        assert_eq!(
            (w.holders[0].task, w.holders[0].acquired_at.line()),
            (holder_id, acquired)
        );
        release.send(()).unwrap();
        holder.await.unwrap();
        h.await.unwrap();
        assert!(waits_of(waiter).is_none());
    });
}

#[test]
fn a_wait_cancelled_by_select_timeout_or_abort_leaves_no_record() {
    rt().block_on(async {
        let m = Arc::new(Mutex::new(0));
        let _held = m.lock().await;
        let (stop, stopped) = ::tokio::sync::oneshot::channel::<()>();
        let m2 = m.clone();
        let (by_select, h) = waiting(async move {
            ::tokio::select! {
                _ = m2.lock() => unreachable!("the lock is held"),
                _ = stopped => {}
            }
        })
        .await;
        stop.send(()).unwrap();
        h.await.unwrap();
        assert!(waits_of(by_select).is_none());

        let m3 = m.clone();
        let (by_timeout, h) = waiting(async move {
            let late = ::tokio::time::timeout(std::time::Duration::from_millis(5), m3.lock());
            assert!(late.await.is_err());
        })
        .await;
        h.await.unwrap();
        assert!(waits_of(by_timeout).is_none());

        let m4 = m.clone();
        let (by_abort, h) = waiting(async move {
            drop(m4.lock().await);
        })
        .await;
        h.abort();
        assert!(h.await.unwrap_err().is_cancelled());
        assert!(waits_of(by_abort).is_none());
    });
}

#[test]
fn shared_holds_and_downgrades_are_recorded_with_their_lines() {
    rt().block_on(async {
        let l = Arc::new(RwLock::new(0));
        let s = Arc::new(Semaphore::new(3));
        let permits = s.acquire_many(2).await.unwrap();
        let w = l.write().await;
        let r = w.downgrade();
        let downgraded = line!() - 1;
        let (l2, s2) = (l.clone(), s.clone());
        let (writer, h) = waiting(async move {
            drop(l2.write().await);
            drop(s2.acquire_many(3).await.unwrap());
        })
        .await;
        let wait = waits_of(writer).unwrap();
        assert_eq!(wait.kind, Kind::RwLock);
        // Outside any traced task: the unknown task 0, with no time.
        let held: Vec<_> = wait
            .holders
            .iter()
            .map(|h| (h.task, h.acquired_at.line(), h.since_ms))
            .collect();
        assert_eq!(held, [(0, downgraded, 0)]);
        drop(r);
        for _ in 0..100 {
            if waits_of(writer).is_some_and(|w| w.kind == Kind::Semaphore) {
                break;
            }
            ::tokio::task::yield_now().await;
        }
        let wait = waits_of(writer).unwrap();
        assert_eq!(
            (wait.kind, wait.permits, wait.holders.len()),
            (Kind::Semaphore, 3, 1)
        );
        assert_eq!(wait.holders[0].permits, 2);
        permits.forget();
        s.add_permits(2);
        h.await.unwrap();
        assert!(waits_of(writer).is_none());
    });
}

/// More readers than a resource has shared slots: the first four take
/// the slots, the rest the list, and a waiter's holders name all six, in
/// that order, each at its line; once they are gone (slots and list
/// freed), a new reader is shown alone.
#[test]
fn every_reader_is_a_holder_past_the_shared_slots() {
    rt().block_on(async {
        let l = Arc::new(RwLock::new(0));
        let mut guards = Vec::new();
        let mut lines = Vec::new();
        for _ in 0..6 {
            guards.push(l.read().await);
            lines.push(line!() - 1);
        }
        let l2 = l.clone();
        let (writer, h) = waiting(async move { drop(l2.write().await) }).await;
        let wait = waits_of(writer).unwrap();
        let held: Vec<_> = wait
            .holders
            .iter()
            .map(|h| (h.task, h.acquired_at.line(), h.permits))
            .collect();
        let want: Vec<_> = lines.iter().map(|&line| (0, line, 1)).collect();
        assert_eq!(held, want);
        drop(guards);
        h.await.unwrap();
        assert!(waits_of(writer).is_none());
        let r = l.read().await;
        let again = line!() - 1;
        let (writer, h) = waiting({
            let l = l.clone();
            async move { drop(l.write().await) }
        })
        .await;
        let held: Vec<_> = waits_of(writer)
            .unwrap()
            .holders
            .iter()
            .map(|h| h.acquired_at.line())
            .collect();
        assert_eq!(held, [again]);
        drop(r);
        h.await.unwrap();
    });
}

/// A mutex whose waits ended stays listed while it lives and shows in
/// neither a dump's waits nor `deadlocks()`; dropping it unlists it.
#[test]
fn a_mutex_whose_waits_ended_shows_nothing_and_its_drop_unlists_it() {
    rt().block_on(async {
        let (m, created) = (Arc::new(Mutex::new(0)), line!());
        let held = m.lock().await;
        let m2 = m.clone();
        let (waiter, h) = waiting(async move {
            drop(m2.lock().await);
        })
        .await;
        let address = Arc::as_ptr(m.resource());
        assert!(Registry::global().lists(address));
        drop(held);
        h.await.unwrap();
        assert!(waits_of(waiter).is_none());
        assert!(Registry::global().lists(address), "listed while it lives");
        // Other tests' tasks may wait meanwhile, for other resources.
        let dump = crate::read::dump::dump().to_string();
        let ours = format!("waiting for Mutex created at {}:{created}:", file!());
        assert!(!dump.contains(&ours), "{dump}");
        assert!(
            crate::waits::report::deadlocks()
                .iter()
                .all(|d| d.edges.iter().all(|e| e.created_at.line != created))
        );
        drop(m);
        assert!(!Registry::global().lists(address));
    });
}

/// An acquire future leaked while queued (`mem::forget`) leaks its wait
/// and the `Arc` of the resource it holds: the mutex's drop leaves the
/// resource listed, alive, with that one wait, and nothing dangles.
#[test]
fn a_leaked_acquire_future_outlives_its_mutex_without_dangling() {
    rt().block_on(async {
        let m = Arc::new(Mutex::new(0));
        let held = m.clone().lock_owned().await;
        let m2 = m.clone();
        let (waiter, h) = waiting(async move {
            let mut f = Box::pin(m2.lock_owned());
            std::future::poll_fn(|cx| {
                assert!(f.as_mut().poll(cx).is_pending());
                std::task::Poll::Ready(())
            })
            .await;
            std::mem::forget(f);
            std::future::pending::<()>().await;
        })
        .await;
        let address = Arc::as_ptr(m.resource());
        drop(m);
        drop(held);
        assert!(Registry::global().lists(address));
        let wait = waits_of(waiter).unwrap();
        assert_eq!((wait.kind, wait.holders.len()), (Kind::Mutex, 0));
        h.abort();
        assert!(h.await.unwrap_err().is_cancelled());
        // Read again after the owner and the task are gone: still whole.
        assert_eq!(waits_of(waiter).unwrap().kind, Kind::Mutex);
    });
}
