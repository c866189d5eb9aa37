//! `root_poll_probe`: polls the `root_poll` bench's chains a given number
//! of times and nothing else, for instruction counts under callgrind.
//!
//! Timing on a shared machine moves with its load; instructions executed
//! do not. Two runs that differ only in the number of polls give the
//! instructions of one root poll, with everything else (start-up, the
//! first registration, the first poll on the thread) cancelled:
//!
//! ```text
//! cargo build -p benches --profile bench --bin root_poll_probe
//! for n in 5000 15000; do
//!   valgrind --tool=callgrind --separate-threads=yes \
//!     --callgrind-out-file=/tmp/cg.$n target/release/root_poll_probe async-stack 8 $n
//! done
//! # the main thread's file is /tmp/cg.N-01; its `totals:` line is Ir:
//! # instructions per root poll = (Ir(15000) - Ir(5000)) / 10000
//! ```
//!
//! Only the main thread's count is read: async-stack's clock thread ticks
//! by time, and a run under callgrind lasts in proportion to its polls, so
//! its instructions would not cancel.
//!
//! Arguments: the variant (`untraced`, `async-stack`, `async-backtrace`;
//! the names of [`benches::names`]; for depths 1 and 8 also
//! `async-stack-spawned`, the chain inside `async_stack::task::spawned`,
//! as a task spawned through a helper is polled), the depth (1 or 8), the
//! number of polls. Like the bench, it makes a new root every
//! [`POLLS_PER_ROOT`](root_poll::POLLS_PER_ROOT) polls. With `once` for the depth, each poll is of a
//! new one-level task that completes on it and is dropped, as in the
//! `root` bench with one poll: the instructions of a task root's whole
//! life. With `yield8`, it polls one chain shaped as `poll_depth`'s at
//! depth 8 (eight nested levels, not boxed, inlined into each other, over
//! a leaf that wakes its task on every poll, as a yield does) until its
//! leaf has been `Pending` POLLS times: the instructions of one poll of
//! that bench, the self-wake included. With `calls`, each poll is one of
//! the `calls` bench's task ([`benches::calls`]): eight calls of an
//! instrumented fn that completes at once. With `wide`, of its wide task:
//! one round of [`WIDE`](benches::calls::WIDE) (128) calls awaited at
//! once completes and the next starts.

use std::hint::black_box;
use std::process::ExitCode;

use benches::names;
use benches::root_poll::{self, Boxed};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [variant, depth, polls] = &args[..] else {
        eprintln!("usage: root_poll_probe VARIANT DEPTH POLLS");
        return ExitCode::FAILURE;
    };
    let Ok(polls) = polls.parse::<u64>() else {
        eprintln!("root_poll_probe: POLLS is a count");
        return ExitCode::FAILURE;
    };
    benches::warm_up_clock();
    if depth == "once" {
        return once(variant, polls);
    }
    if depth == "yield8" {
        return yield8(variant, polls);
    }
    if depth == "calls" {
        return calls(variant, polls, false);
    }
    if depth == "wide" {
        return calls(variant, polls, true);
    }
    let Ok(depth @ (1 | 8)) = depth.parse::<u32>() else {
        eprintln!("root_poll_probe: DEPTH is 1, 8, `once`, `yield8`, `calls` or `wide`");
        return ExitCode::FAILURE;
    };
    let make: fn(u32) -> Boxed = match variant.as_str() {
        names::UNTRACED => root_poll::untraced::root,
        names::ASYNC_STACK => root_poll::async_stack::root,
        names::ASYNC_BACKTRACE => root_poll::async_backtrace::root,
        // The same chain inside a spawn helper's wrapper, which offers its
        // metadata to the roots inside on every poll.
        SPAWNED => |depth| {
            Box::pin(async_stack::task::spawned(root_poll::async_stack::root(
                depth,
            )))
        },
        _ => {
            eprintln!("root_poll_probe: unknown variant {variant:?}");
            return ExitCode::FAILURE;
        }
    };
    root_poll::poll_roots(polls, &mut || make(depth));
    ExitCode::SUCCESS
}

/// The variant of the chains polled inside `async_stack::task::spawned`.
const SPAWNED: &str = "async-stack-spawned";

async fn untraced_one(pending: u32) {
    benches::yield_leaf(pending).await
}

#[async_stack::traced_async]
async fn async_stack_one(pending: u32) {
    benches::yield_leaf(pending).await
}

#[async_backtrace::framed]
async fn async_backtrace_one(pending: u32) {
    benches::yield_leaf(pending).await
}

/// `tasks` one-level tasks, each created, polled once to completion and
/// dropped.
fn once(variant: &str, tasks: u64) -> ExitCode {
    let run: fn(u32) -> u32 = match variant {
        names::UNTRACED => |p| benches::poll_to_completion(untraced_one(p)).1,
        names::ASYNC_STACK => |p| benches::poll_to_completion(async_stack_one(p)).1,
        names::ASYNC_BACKTRACE => |p| benches::poll_to_completion(async_backtrace_one(p)).1,
        _ => {
            eprintln!("root_poll_probe: unknown variant {variant:?}");
            return ExitCode::FAILURE;
        }
    };
    for _ in 0..tasks {
        assert_eq!(run(black_box(0)), 1);
    }
    ExitCode::SUCCESS
}

/// `polls` polls of the `calls` bench's task (its wide task if `wide`), a
/// new root every [`POLLS_PER_ROOT`](root_poll::POLLS_PER_ROOT) polls.
fn calls(variant: &str, polls: u64, wide: bool) -> ExitCode {
    use benches::calls;
    let make: fn() -> Boxed = match (variant, wide) {
        (names::UNTRACED, false) => calls::untraced::root,
        (names::ASYNC_STACK, false) => calls::with_async_stack::root,
        (names::ASYNC_BACKTRACE, false) => calls::with_async_backtrace::root,
        (names::UNTRACED, true) => calls::untraced::wide_root,
        (names::ASYNC_STACK, true) => calls::with_async_stack::wide_root,
        (names::ASYNC_BACKTRACE, true) => calls::with_async_backtrace::wide_root,
        _ => {
            eprintln!("root_poll_probe: unknown variant {variant:?}");
            return ExitCode::FAILURE;
        }
    };
    root_poll::poll_roots(polls, &mut { make });
    ExitCode::SUCCESS
}

/// `poll_depth`'s chain of eight levels, plain and traced.
mod yielding {
    pub mod untraced {
        macro_rules! level {
            ($name:ident => $callee:ident) => {
                pub async fn $name(pending: u32) {
                    $callee(pending).await
                }
            };
        }
        use benches::yield_leaf;
        benches::chain!(8, level, yield_leaf);
    }

    pub mod async_stack {
        macro_rules! level {
            ($name:ident => $callee:ident) => {
                #[async_stack::traced_async]
                pub async fn $name(pending: u32) {
                    $callee(pending).await
                }
            };
        }
        use benches::yield_leaf;
        benches::chain!(8, level, yield_leaf);
    }
}

/// One `poll_depth` chain of depth 8 polled to completion, its leaf
/// `Pending` `polls` times.
fn yield8(variant: &str, polls: u64) -> ExitCode {
    let Ok(pending) = u32::try_from(polls) else {
        eprintln!(
            "root_poll_probe: POLLS is at most {} with `yield8`",
            u32::MAX
        );
        return ExitCode::FAILURE;
    };
    let done = match variant {
        names::UNTRACED => benches::poll_to_completion(yielding::untraced::l8(pending)).1,
        names::ASYNC_STACK => benches::poll_to_completion(yielding::async_stack::l8(pending)).1,
        _ => {
            eprintln!("root_poll_probe: `yield8` has variants untraced and async-stack");
            return ExitCode::FAILURE;
        }
    };
    assert_eq!(u64::from(done), polls + 1);
    ExitCode::SUCCESS
}
