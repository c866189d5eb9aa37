//! No deadlock is ever reported for correctly ordered locking, however
//! contended, while `select!` and timeouts keep cancelling waits, and
//! `deadlocks()` is called thousands of times from another thread.
//!
//! Alone in its binary: any report in the process would be a false one.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use async_stack::sync::{Mutex, RwLock, Semaphore};
use async_stack::traced_async;

/// Checks the test waits for before stopping the workers.
const CHECKS: usize = 3_000;
/// Rounds of all workers together the test waits for.
const ROUNDS: usize = 2_000;

struct Shared {
    m1: Mutex<u64>,
    m2: Mutex<u64>,
    l: RwLock<u64>,
    s: Semaphore,
    stop: AtomicBool,
    rounds: AtomicUsize,
}

/// Takes the resources in the one global order m1 < m2 < l < s, waiting
/// in every way a program can: plain, raced against a timer in
/// `select!`, under `timeout`.
#[traced_async]
async fn worker(sh: Arc<Shared>, n: u64) -> u64 {
    let mut rounds = 0;
    while !sh.stop.load(Ordering::Relaxed) {
        rounds += 1;
        sh.rounds.fetch_add(1, Ordering::Relaxed);
        {
            let mut a = sh.m1.lock().await;
            let mut b = sh.m2.lock().await;
            *a += 1;
            tokio::task::yield_now().await;
            *b += 1;
        }
        tokio::select! {
            mut a = sh.m1.lock() => {
                tokio::task::yield_now().await;
                *a += 1;
            }
            _ = tokio::time::sleep(Duration::from_micros(20 + n)) => {}
        }
        if n.is_multiple_of(2) {
            if let Ok(mut w) = tokio::time::timeout(Duration::from_micros(30), sh.l.write()).await {
                *w += 1;
                let _p = sh.s.acquire().await.unwrap();
                tokio::task::yield_now().await;
            }
        } else {
            let r = sh.l.read().await;
            let p = tokio::time::timeout(Duration::from_micros(40), sh.s.acquire_many(2)).await;
            tokio::task::yield_now().await;
            drop((p, r));
        }
        let _m2 = sh.m2.lock().await;
        let _p = sh.s.acquire().await.unwrap();
    }
    rounds
}

#[test]
fn correctly_ordered_locking_is_never_reported() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let sh = Arc::new(Shared {
        m1: Mutex::new(0),
        m2: Mutex::new(0),
        l: RwLock::new(0),
        s: Semaphore::new(2),
        stop: AtomicBool::new(false),
        rounds: AtomicUsize::new(0),
    });
    // A task that waits all along (for a lock the test's untraced code
    // holds), so that every check reads a listed resource.
    let held = Arc::new(Mutex::new(()));
    let guard = held.try_lock().unwrap();
    let checks = Arc::new(AtomicUsize::new(0));
    let checker = {
        let (sh, checks) = (sh.clone(), checks.clone());
        std::thread::spawn(move || {
            while !sh.stop.load(Ordering::Relaxed) {
                let found = async_stack::deadlocks();
                assert!(found.is_empty(), "false report: {}", found[0]);
                checks.fetch_add(1, Ordering::Relaxed);
            }
        })
    };
    let rounds: u64 = rt.block_on(async {
        let workers: Vec<_> = (0..8)
            .map(|n| async_stack::tokio::spawn(worker(sh.clone(), n)))
            .collect();
        let waiter = {
            let held = held.clone();
            async_stack::tokio::spawn(async_stack::TracedExt::traced(async move {
                drop(held.lock().await);
            }))
        };
        let start = Instant::now();
        while (checks.load(Ordering::Relaxed) < CHECKS
            || sh.rounds.load(Ordering::Relaxed) < ROUNDS)
            && start.elapsed() < Duration::from_secs(120)
        {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        sh.stop.store(true, Ordering::Relaxed);
        drop(guard);
        waiter.await.unwrap();
        let mut rounds = 0;
        for w in workers {
            rounds += w.await.unwrap();
        }
        rounds
    });
    checker.join().expect("the checker found no deadlock");
    assert!(
        checks.load(Ordering::Relaxed) >= CHECKS,
        "only {} checks",
        checks.load(Ordering::Relaxed)
    );
    assert!(rounds as usize >= ROUNDS, "the workers ran {rounds} rounds");
    // Every wait and hold ended with its task: nothing is left to report.
    assert!(async_stack::deadlocks().is_empty());
}
