//! `async_stack::sync`'s locks against tokio's, where a user can tell them
//! apart without looking at a dump: what an owned guard or an owned acquire
//! future keeps alive, and which types can be sent.
//!
//! An owned guard (and an owned acquire future) keeps its lock's `Arc`, as
//! tokio's do, so the lock cannot be taken out of it while they live.
//! Before, they kept only the lock's insides: `Arc::try_unwrap` succeeded
//! under a live guard, and `into_inner` or `get_mut` then panicked inside
//! the library.

use std::cell::Cell;
use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

/// What a user sees of an `Arc`'d lock while something owned of it lives,
/// and after: `(strong count with it, try_unwrap fails with it, strong
/// count after, value taken out after)`.
type Seen = (usize, bool, usize, u32);

/// Runs `scenario` on a current-thread runtime.
fn run<F: Future<Output = Seen>>(scenario: F) -> Seen {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
        .block_on(scenario)
}

macro_rules! owned_guard {
    ($lock:path, $acquire:ident) => {
        run(async {
            let l = Arc::new(<$lock>::new(7u32));
            let g = Arc::clone(&l).$acquire().await;
            let with = Arc::strong_count(&l);
            let l = Arc::try_unwrap(l).expect_err("a guard keeps its lock");
            drop(g);
            let after = Arc::strong_count(&l);
            let value = Arc::try_unwrap(l).expect("no guard left").into_inner();
            (with, true, after, value)
        })
    };
}

/// Runs `$scenario` for each owned acquire, with tokio's lock and ours:
/// tokio's shows `(2, true, 1, 7)`, and ours the same.
macro_rules! like_tokio {
    ($scenario:ident) => {
        for (acquire, tokio, ours) in [
            (
                "lock_owned",
                $scenario!(tokio::sync::Mutex<u32>, lock_owned),
                $scenario!(async_stack::sync::Mutex<u32>, lock_owned),
            ),
            (
                "read_owned",
                $scenario!(tokio::sync::RwLock<u32>, read_owned),
                $scenario!(async_stack::sync::RwLock<u32>, read_owned),
            ),
            (
                "write_owned",
                $scenario!(tokio::sync::RwLock<u32>, write_owned),
                $scenario!(async_stack::sync::RwLock<u32>, write_owned),
            ),
        ] {
            assert_eq!(tokio, (2, true, 1, 7), "tokio, {acquire}");
            assert_eq!(ours, tokio, "{acquire}");
        }
    };
}

#[test]
fn an_owned_guard_keeps_its_lock_as_tokio_s_does() {
    like_tokio!(owned_guard);
}

/// A downgraded owned write guard still keeps the lock.
#[test]
fn a_downgraded_owned_guard_keeps_its_lock() {
    let seen = run(async {
        let l = Arc::new(async_stack::sync::RwLock::new(7u32));
        let r = Arc::clone(&l).write_owned().await.downgrade();
        let with = Arc::strong_count(&l);
        let mut l = Arc::try_unwrap(l).expect_err("a guard keeps its lock");
        assert!(Arc::get_mut(&mut l).is_none());
        drop(r);
        let after = Arc::strong_count(&l);
        let value = *Arc::get_mut(&mut l).expect("no guard left").get_mut();
        (with, true, after, value)
    });
    assert_eq!(seen, (2, true, 1, 7));
}

macro_rules! owned_future {
    ($lock:path, $acquire:ident) => {
        run(async {
            let l = Arc::new(<$lock>::new(7u32));
            let held = l.try_write_or_lock();
            let with;
            {
                let mut fut = pin!(Arc::clone(&l).$acquire());
                let mut cx = Context::from_waker(Waker::noop());
                assert!(matches!(fut.as_mut().poll(&mut cx), Poll::Pending));
                with = Arc::strong_count(&l);
                drop(held);
            }
            let after = Arc::strong_count(&l);
            let value = Arc::try_unwrap(l).expect("nothing left").into_inner();
            (with, with > 1, after, value)
        })
    };
}

/// Takes the lock exclusively at once, whatever its kind.
trait TryExclusive {
    type Guard<'a>
    where
        Self: 'a;
    fn try_write_or_lock(&self) -> Self::Guard<'_>;
}

impl TryExclusive for tokio::sync::Mutex<u32> {
    type Guard<'a> = tokio::sync::MutexGuard<'a, u32>;
    fn try_write_or_lock(&self) -> Self::Guard<'_> {
        self.try_lock().unwrap()
    }
}

impl TryExclusive for async_stack::sync::Mutex<u32> {
    type Guard<'a> = async_stack::sync::MutexGuard<'a, u32>;
    fn try_write_or_lock(&self) -> Self::Guard<'_> {
        self.try_lock().unwrap()
    }
}

impl TryExclusive for tokio::sync::RwLock<u32> {
    type Guard<'a> = tokio::sync::RwLockWriteGuard<'a, u32>;
    fn try_write_or_lock(&self) -> Self::Guard<'_> {
        self.try_write().unwrap()
    }
}

impl TryExclusive for async_stack::sync::RwLock<u32> {
    type Guard<'a> = async_stack::sync::RwLockWriteGuard<'a, u32>;
    fn try_write_or_lock(&self) -> Self::Guard<'_> {
        self.try_write().unwrap()
    }
}

/// A pending owned acquire future keeps the lock too.
#[test]
fn a_pending_owned_acquire_keeps_its_lock_as_tokio_s_does() {
    like_tokio!(owned_future);
}

/// An owned permit keeps its semaphore, as tokio's does, and so does
/// each permit split off it.
#[test]
fn an_owned_permit_keeps_its_semaphore_as_tokio_s_does() {
    macro_rules! counts {
        ($semaphore:path) => {{
            let s = Arc::new(<$semaphore>::new(3));
            let mut p = Arc::clone(&s).try_acquire_many_owned(3).unwrap();
            let with_one = Arc::strong_count(&s);
            let q = p.split(1).unwrap();
            let with_two = Arc::strong_count(&s);
            assert!(Arc::ptr_eq(q.semaphore(), &s));
            drop((p, q));
            (with_one, with_two, Arc::strong_count(&s))
        }};
    }
    let tokio = counts!(tokio::sync::Semaphore);
    assert_eq!(tokio, (2, 3, 1));
    assert_eq!(counts!(async_stack::sync::Semaphore), tokio);
}

fn sent<T: Send + 'static, R: Send + 'static>(value: T, f: fn(T) -> R) -> R {
    std::thread::spawn(move || f(value)).join().unwrap()
}

/// Locks of a value that is `Send` but not `Sync` can be sent, as tokio's
/// can (their guards and `Arc`s cannot, as tokio's cannot).
#[test]
fn a_lock_of_a_send_value_is_send_as_tokio_s_is() {
    let tokio = sent(tokio::sync::RwLock::new(Cell::new(3u8)), |l| {
        l.into_inner().get()
    });
    let ours = sent(async_stack::sync::RwLock::new(Cell::new(3u8)), |l| {
        l.into_inner().get()
    });
    assert_eq!((ours, tokio), (3, 3));
    let ours = sent(async_stack::sync::Mutex::new(Cell::new(4u8)), |l| {
        l.into_inner().get()
    });
    assert_eq!(ours, 4);
}
