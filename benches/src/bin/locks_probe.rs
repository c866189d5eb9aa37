//! `locks_probe`: the `locks` bench's scenarios, run a given number
//! of times on one thread with a hand-written executor, for instruction
//! counts under callgrind.
//!
//! The contended `locks` bench moves by ±10 ns from run to run on a shared
//! machine, a fifth of its 50 ns target; instructions executed do not move.
//! Two runs that differ only in the number of operations give the
//! instructions of one, with everything else (start-up, the tasks'
//! registration, first polls, the first growth of each list) cancelled:
//!
//! ```text
//! cargo build -p benches --profile bench --bin locks_probe
//! for v in tokio async-stack; do for n in 20000 60000; do
//!   valgrind --tool=callgrind --separate-threads=yes \
//!     --callgrind-out-file=/tmp/cg.$v.$n target/release/locks_probe $v contended $n
//! done; done
//! # the main thread's file is /tmp/cg.V.N-01; its `totals:` line is Ir:
//! # instructions per operation = (Ir(60000) - Ir(20000)) / 40000
//! ```
//!
//! Only the main thread's count is read: async-stack's clock thread ticks
//! by time, and a run under callgrind lasts in proportion to its
//! operations, so its instructions would not cancel. Like
//! `root_poll_probe`, it calls [`benches::warm_up_clock`] before anything
//! is measured, so that the clock thread has stored a time (otherwise
//! every stamp reads the system clock, in some runs and not others).
//!
//! Arguments: the variant (`tokio`: `tokio::sync::Mutex`, the baseline;
//! `async-stack`: `async_stack::sync::Mutex`, which wraps it), the
//! scenario, the number of operations. Every task is a traced root
//! (`.traced()`) in both variants, as in the bench, so the difference
//! between the variants is the recording of holds and waits alone.
//!
//! - `uncontended`: one task locks and unlocks a free mutex N times, all
//!   in one poll. An operation is a `lock().await` and its unlock.
//! - `contended`: N rounds of two tasks, A and B. A locks the free mutex
//!   and returns `Pending` holding it; B polls `lock()` and gets `Pending`
//!   (its wait starts: the resource's first wait); A unlocks, which hands
//!   the lock to B and wakes it; B's next poll acquires (the wait ends:
//!   the resource's last wait), and B unlocks. An operation is a round:
//!   one contended wait and one uncontended lock (A's), so the added cost
//!   of one wait is this figure's difference minus `uncontended`'s.
//! - `turns`: the bench's `locks_contended` pattern, N rounds of two tasks
//!   each holding the lock across a yield, so that each waits for the
//!   other once per round. Here waits overlap (a task starts its wait
//!   before the other's has ended), so no wait after the first is the
//!   resource's first or last. An operation is a round of two waits.
//!
//! - `read`, `permit`: one task takes a read lock of a free `RwLock`
//!   (`tokio::sync::RwLock` or `async_stack::sync::RwLock`), or a permit
//!   of a `Semaphore` with permits to spare, and releases it, N times in
//!   one poll: the bench's `locks_uncontended_shared`. An operation is an
//!   acquire and its release.
//!
//! The executor polls the tasks in turn, each only if it was woken since
//! its last poll (a flag its waker sets), through a `black_box`ed
//! `Pin<&mut dyn Future>`, as `benches::poll_to_completion` does.

use std::hint::black_box;
use std::pin::Pin;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Wake, Waker};

use async_stack::TracedExt;
use benches::names;

const TOKIO: &str = "tokio";

type Task = Pin<Box<dyn Future<Output = ()>>>;

/// One task: `n` locks and unlocks of a free mutex.
macro_rules! uncontended {
    ($new:expr, $n:expr) => {{
        let (m, n) = ($new, $n);
        let task: Task = Box::pin(
            async move {
                for _ in 0..n {
                    *black_box(&m).lock().await += 1;
                }
            }
            .traced(),
        );
        vec![task]
    }};
}

/// One task: `n` shared acquires (`$acquire` of the resource `$new`,
/// bound to `$l`) and their releases, none contended.
macro_rules! shared {
    ($new:expr, $n:expr, |$l:ident| $acquire:expr) => {{
        let (r, n) = ($new, $n);
        let task: Task = Box::pin(
            async move {
                for _ in 0..n {
                    let $l = black_box(&r);
                    drop(black_box($acquire));
                }
            }
            .traced(),
        );
        vec![task]
    }};
}

/// Tasks A and B: each of `n` rounds is one wait of B, the resource's
/// first and last, and one uncontended lock of A.
macro_rules! contended {
    ($new:expr, $n:expr) => {{
        let (m, n) = (Arc::new($new), $n);
        let m2 = Arc::clone(&m);
        let a: Task = Box::pin(
            async move {
                for _ in 0..n {
                    let mut g = black_box(&m).lock().await;
                    *g += 1;
                    benches::yield_leaf(1).await;
                    drop(g);
                    benches::yield_leaf(1).await;
                }
            }
            .traced(),
        );
        let b: Task = Box::pin(
            async move {
                for _ in 0..n {
                    *black_box(&m2).lock().await += 1;
                    benches::yield_leaf(1).await;
                }
            }
            .traced(),
        );
        vec![a, b]
    }};
}

/// Tasks A and B taking turns as in the bench: each of `n` rounds is two
/// overlapping waits.
macro_rules! turns {
    ($new:expr, $n:expr) => {{
        let (m, n) = (Arc::new($new), $n);
        let tasks: [Task; 2] = [Arc::clone(&m), m].map(|m| {
            Box::pin(
                async move {
                    for _ in 0..n {
                        let mut g = black_box(&m).lock().await;
                        *g += 1;
                        benches::yield_leaf(1).await;
                        drop(g);
                    }
                }
                .traced(),
            ) as Task
        });
        tasks.into()
    }};
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [variant, scenario, n] = &args[..] else {
        eprintln!("usage: locks_probe VARIANT SCENARIO N");
        return ExitCode::FAILURE;
    };
    let Ok(n) = n.parse::<u64>() else {
        eprintln!("locks_probe: N is a count");
        return ExitCode::FAILURE;
    };
    benches::warm_up_clock();
    let tasks = match (variant.as_str(), scenario.as_str()) {
        (TOKIO, "uncontended") => uncontended!(tokio::sync::Mutex::new(0u64), n),
        (names::ASYNC_STACK, "uncontended") => uncontended!(async_stack::sync::Mutex::new(0u64), n),
        (TOKIO, "contended") => contended!(tokio::sync::Mutex::new(0u64), n),
        (names::ASYNC_STACK, "contended") => contended!(async_stack::sync::Mutex::new(0u64), n),
        (TOKIO, "turns") => turns!(tokio::sync::Mutex::new(0u64), n),
        (names::ASYNC_STACK, "turns") => turns!(async_stack::sync::Mutex::new(0u64), n),
        (TOKIO, "read") => shared!(tokio::sync::RwLock::new(0u64), n, |l| l.read().await),
        (names::ASYNC_STACK, "read") => {
            shared!(async_stack::sync::RwLock::new(0u64), n, |l| l.read().await)
        }
        (TOKIO, "permit") => shared!(tokio::sync::Semaphore::new(4), n, |l| l.acquire().await),
        (names::ASYNC_STACK, "permit") => {
            shared!(async_stack::sync::Semaphore::new(4), n, |l| l
                .acquire()
                .await)
        }
        _ => {
            eprintln!(
                "locks_probe: VARIANT is `tokio` or `async-stack`, \
                 SCENARIO `uncontended`, `contended`, `turns`, `read` or `permit`"
            );
            return ExitCode::FAILURE;
        }
    };
    run(tasks);
    ExitCode::SUCCESS
}

/// A task's waker: sets the task's flag.
struct Flag(AtomicBool);

impl Wake for Flag {
    fn wake(self: Arc<Self>) {
        self.0.store(true, Ordering::Relaxed);
    }
    fn wake_by_ref(self: &Arc<Self>) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// Polls the tasks in turn, each only when woken, until all are done.
fn run(tasks: Vec<Task>) {
    let mut tasks: Vec<(Option<Task>, Arc<Flag>, Waker)> = tasks
        .into_iter()
        .map(|t| {
            let flag = Arc::new(Flag(AtomicBool::new(true)));
            let waker = Waker::from(Arc::clone(&flag));
            (Some(t), flag, waker)
        })
        .collect();
    let mut left = tasks.len();
    while left > 0 {
        let mut polled = false;
        for (task, flag, waker) in &mut tasks {
            let Some(fut) = task else { continue };
            if !flag.0.swap(false, Ordering::Relaxed) {
                continue;
            }
            polled = true;
            let fut: Pin<&mut dyn Future<Output = ()>> = black_box(fut.as_mut());
            if fut.poll(&mut Context::from_waker(waker)).is_ready() {
                *task = None;
                left -= 1;
            }
        }
        assert!(polled, "locks_probe: every task waits and none was woken");
    }
}
