//! `unwakeable()`: tasks pending with every waker dropped, found without
//! wake recording. A lost wakeup (a leaf that returns `Pending` and keeps no
//! waker, or drops the one it kept) is listed; a task whose waker a channel
//! keeps is not; a tokio task is listed only when every root of it is.

use std::future::Future;
use std::pin::Pin;
use std::sync::Mutex;
use std::task::{Context, Poll, RawWaker, RawWakerVTable, Waker};

use async_stack::{TaskInfo, TracedExt, traced_async, unwakeable};
use futures::channel::oneshot;

/// Returns `Pending` and keeps nothing: nobody can wake its task.
#[traced_async]
async fn lost() {
    std::future::poll_fn(|_| Poll::<()>::Pending).await
}
const LOST_AWAIT: u32 = line!() - 2;

/// Keeps a clone of its waker in `slot` until told to drop it.
#[traced_async]
async fn kept(slot: &'static Mutex<Option<Waker>>) {
    std::future::poll_fn(|cx| {
        slot.lock()
            .unwrap()
            .get_or_insert_with(|| cx.waker().clone());
        Poll::<()>::Pending
    })
    .await
}

#[traced_async]
async fn parked(rx: oneshot::Receiver<()>) {
    let _ = rx.await;
}

/// An executor's waker whose vtable is a `static`, so that every copy of
/// it has the same address and the root sees one waker throughout. (The
/// vtables of `Waker::noop()` and of `Waker::from(Arc<_>)` are constants
/// that copies may carry at different addresses: a root then takes a
/// second, fallback waker, whose clones it does not count.)
static VTABLE: RawWakerVTable = RawWakerVTable::new(
    |_| RawWaker::new(std::ptr::null(), &VTABLE),
    |_| {},
    |_| {},
    |_| {},
);

fn poll_once<F: Future>(f: &mut Pin<Box<F>>) {
    // SAFETY: the vtable's functions do nothing and never read the (null)
    // data pointer, so any use of the waker is sound.
    let waker = unsafe { Waker::from_raw(RawWaker::new(std::ptr::null(), &VTABLE)) };
    assert!(
        f.as_mut()
            .poll(&mut Context::from_waker(&waker))
            .is_pending()
    );
}

fn listed(id: u64) -> Option<TaskInfo> {
    unwakeable().into_iter().find(|t| t.branches.contains(&id))
}

#[test]
fn a_lost_wakeup_is_listed_a_kept_waker_is_not_until_dropped() {
    static SLOT: Mutex<Option<Waker>> = Mutex::new(None);
    let mut a = Box::pin(async { lost().await }.traced_named("unw-lost"));
    let mut b = Box::pin(kept(&SLOT).traced_named("unw-kept"));
    let (tx, rx) = oneshot::channel();
    let mut c = Box::pin(parked(rx).traced_named("unw-parked"));
    poll_once(&mut a);
    poll_once(&mut b);
    poll_once(&mut c);
    let (ia, ib, ic) = (
        a.task_id().unwrap(),
        b.task_id().unwrap(),
        c.task_id().unwrap(),
    );

    let t = listed(ia).expect("the lost wakeup is listed");
    let frames: Vec<(&str, Option<u32>)> = t
        .frames
        .iter()
        .map(|f| (&*f.function, f.awaiting_at.as_ref().map(|at| at.line)))
        .collect();
    assert_eq!(
        frames,
        [("unw-lost", None), ("unwakeable::lost", Some(LOST_AWAIT))]
    );
    assert!(listed(ib).is_none(), "a waker is kept");
    assert!(listed(ic).is_none(), "the channel keeps the waker");

    // The kept waker dropped: now nobody can wake it.
    SLOT.lock().unwrap().take();
    assert!(listed(ib).is_some());
    // The channel's sender dropped wakes the receiver: woken, not listed.
    drop(tx);
    assert!(listed(ic).is_none());
    drop((a, b, c));
    assert!(listed(ia).is_none(), "a dropped task is not live");
}

/// A tokio task is listed only when each of its roots is: a sibling whose
/// waker lives gets the task (and so the lost one) polled again.
#[test]
fn a_tokio_task_is_listed_when_every_root_is() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    rt.block_on(async {
        let (tx, rx) = oneshot::channel::<()>();
        let mixed = tokio::spawn(async move { futures::join!(lost(), parked(rx)) });
        let both = tokio::spawn(async { futures::join!(lost(), lost()) });
        tokio::task::yield_now().await;
        let tokio_of =
            |h: &tokio::task::JoinHandle<((), ())>| -> u64 { h.id().to_string().parse().unwrap() };
        let stuck = unwakeable();
        let ids: Vec<Option<u64>> = stuck.iter().map(|t| t.tokio_id).collect();
        assert!(!ids.contains(&Some(tokio_of(&mixed))), "{ids:?}");
        let t = stuck
            .iter()
            .find(|t| t.tokio_id == Some(tokio_of(&both)))
            .expect("both roots lost");
        assert_eq!(t.branches.len(), 2);
        drop(tx);
        mixed.abort();
        both.abort();
    });
}
