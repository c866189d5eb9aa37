//! Async stack traces for Rust that read like synchronous ones.
//!
//! `#[traced_async]` (and [`TracedExt::traced`]) make every poll of a future
//! record an [`AsyncStackFrame`]: a parent pointer, a return address into
//! the awaiting code, a static call site, and the `.await` the frame is
//! suspended on. The chain is then read in several ways:
//!
//! - [`backtrace()`] splices it into the current thread's native backtrace,
//!   so a capture reads like a synchronous backtrace with exact `.await`
//!   lines;
//! - every traced future polled while no traced frame is active is a **task
//!   root**, registered in a process-wide registry that other threads can
//!   read without blocking anyone.
//!
//! ```
//! use async_stack::traced_async;
//!
//! #[traced_async]
//! async fn fetch(id: u32) -> String {
//!     let bt = async_stack::backtrace();
//!     format!("{id}: {} async frames", bt.async_depth())
//! }
//!
//! #[traced_async]
//! async fn handle() -> String {
//!     fetch(7).await
//! }
//!
//! assert_eq!(futures::executor::block_on(handle()), "7: 2 async frames");
//! ```
//!
//! # Cost
//!
//! Per instrumented level and poll: a few loads and plain stores, inlined
//! into the parent's poll (no call, no lock, no allocation, no atomic
//! read-modify-write). A frame's first poll under a parent, and its end,
//! take a cold call that gives it a place in its task's published stack
//! and takes it back. A task root additionally takes a registry slot on its
//! first poll and gives it back at the end, and on each poll stamps its
//! state with the time read from one atomic word.
//!
//! That word is kept by a background thread, `async-stack-clock`, started
//! by the first task root and ticking every 4 ms (the resolution of times
//! in dumps); it parks after about a second without task polls. Set the
//! environment variable `ASYNC_STACK_CLOCK=system` to do without it (every
//! stamp then reads the system clock, a few nanoseconds more per task
//! poll). See `BENCHMARKS.md` for measured figures.
//!
//! # Stack accuracy
//!
//! Async frames come from data the instrumented code records itself, so
//! they are exact whatever the optimisation level: the function (from the
//! macro or the `.traced()` call site) and the `.await` line and column
//! (from a static record the macro emits beside each `.await`) need no debug
//! information at all. Native frames and the *running* location of the
//! innermost async frame come from unwinding and symbolisation, and are as
//! good as the binary's debug information. What can make the output wrong
//! or poorer:
//!
//! - **No debug info** (`debug = 0`, `strip = true`): native frames show
//!   function names only (or `<unknown>` when symbols are stripped); the
//!   innermost async frame has no running location. Async frames and their
//!   `.await` lines are unaffected. The walker cannot see inlined
//!   `Traced` polls, so it places each async frame at the native frame
//!   that runs its body's code: the function holding an address in that
//!   code, which the first `.await` of each function records once, or the
//!   body's own symbol (`app::handler::{{closure}}`) when it has one. The
//!   synchronous code the leaf calls then comes first, as in a debug build.
//!   Only a frame whose function has reached no `.await` yet and whose body
//!   was inlined cannot be placed; it goes with the nearest frame that
//!   can. When none can (a first poll with everything inlined), the async
//!   frames come first, then every native frame below the capture. On-CPU
//!   samples end their native frames at the first that runs a body, by the
//!   same two tests (see [`sampler`]). One body is known by one copy of its
//!   code: run under two executors that inline it differently, into a
//!   function not named after it, its other copy is not recognised, and
//!   there samples keep their interrupted address.
//! - **Line tables only** (`debug = "line-tables-only"`): everything above
//!   works, including inlined frames; this is the recommended release
//!   setting. Columns of native frames may be missing. Its debug info
//!   names functions without their path (`poll<app::Handler>`,
//!   `{closure#0}<..>`): a native frame that is a function of its own takes
//!   its full name from the symbol table instead, as full debug info would
//!   name it, in backtraces and profiles alike; an inlined frame keeps the
//!   short name, as in std's own backtraces. So an unnamed `.traced()`
//!   future whose body was inlined is named by its location. One inlined
//!   frame is named in full: in a profile, the body of a traced fn inlined
//!   into its poll (`{async_block#0}`), the native frame right above the
//!   fn's async frame, is `app::leaf::{{closure}}`, as full debug info
//!   names it.
//! - **Inlining** (release builds): `Traced::poll` is inlined into the
//!   parent's code, and so, often, is the whole chain of bodies. Inlined
//!   native frames are still reported (as separate frames of the same
//!   address), since symbolisation reads the inline tables; the walker
//!   finds each async frame's place by the one `Traced::poll` closure each
//!   level has on the stack, inlined or not.
//! - **Optimisation levels**: at `opt-level` 2-3 the compiler may merge
//!   identical code, so a native frame's line can point at a sibling call
//!   with the same code; tail calls can remove a native frame entirely.
//!   Async frames do not depend on either.
//! - **Untraced futures** in between traced ones are invisible as async
//!   frames (their polls appear among the folded plumbing in `{:#}`). A
//!   traced function awaited inside an untraced one still links to the
//!   nearest traced ancestor.
//! - **`.await` inside macros**: an `.await` the macro cannot see (inside
//!   the arguments of `println!`, or generated by `join!`/`select!`) is
//!   attributed to the line of the macro call, for the macros it knows
//!   (`join!`, `try_join!`, `select!`, `select_biased!`, `pending!`) and
//!   any macro whose arguments contain `.await`.
//! - **`.traced()` futures** have no await sites (their bodies are not
//!   rewritten); a parent created with `.traced()` shows the line where its
//!   body polls the child, taken from debug info instead.
//! - **Return addresses** are resolved once per `.await` site, the first
//!   time a body reaches it, by unwinding one frame; they symbolise to the
//!   `.await` line in debug builds and in release builds with line tables.
//!   A capture reports the address it read off the stack itself (the
//!   parent's code at its `.await`, inlined or not), which symbolises to the
//!   same line. They are meant for debugger scripts; the walker takes the
//!   `.await` lines from the static await sites.
//! - **Processors**: which frame of a task is running is marked on x86-64
//!   only, where the current-frame word carries the frame's slot in
//!   address bits that user-space pointers leave clear. Elsewhere (where
//!   pointers may carry tags of their own, as with Arm's memory tagging)
//!   a running task is shown running with its whole stack, no frame of it
//!   is marked `running`, and its innermost frame shows the last `.await`
//!   it reached even when it has moved on from it.
//!
//! # Module map
//!
//! The modules form layers, listed from the bottom up: each imports only
//! from the layers below it, and no file imports a file that imports it
//! back (`python3 ../shared/tools/layers.py` checks both).
//!
//! 1. **Base**: `shim` (the one switch between std's and loom's atomics),
//!    `pages` (never-freed page tables, the storage of every table that
//!    other threads and debuggers read without a lock), `clock` (the
//!    coarse clock that stamps task states) and `warn`.
//! 2. **Record** (`record/`): what an instrumented future writes on every
//!    poll: the [`AsyncStackFrame`], the static [`CallSite`] and
//!    [`AwaitSite`] records and their interned ids (`SiteId` owns the
//!    await bit), the thread's current frame, and the list of threads that
//!    poll tasks; and the source location readers show. It knows nothing
//!    of tasks.
//! 3. **Task** (`task/`): task records, their published stacks, the
//!    registry, wakers, spawn data, and [`Traced`], the poll protocol that
//!    drives all of them; `task::probe` records what the wake graph reads.
//! 4. **Readers**: `read/` (the walker behind [`backtrace()`], the check of
//!    the live chain against the published stack, and [`dump`](mod@dump)),
//!    [`sampler`], [`wake`] (the wake graph, its reduction, and the
//!    [`workload`] it replays), and [`debug`] (the descriptor that debugger
//!    scripts read, built from the addresses of statics); on top of them,
//!    `http` (feature `http`), the debug endpoint that serves what they
//!    read. Below the readers and above the task layer, `waits/`, the
//!    waits-for graph: each wrapped resource's holds and waits, and the
//!    detector behind [`deadlocks()`]; its writers are `sync` (feature
//!    `tokio`: the `Mutex`, `RwLock` and `Semaphore` wrappers) and the
//!    `JoinHandle` of `tokio`; the dump reads it to show what
//!    each task waits for.
//! 5. **Reports**: [`panic`](mod@panic), [`signal`] and [`stall`], which print what
//!    the readers find; then this crate root, which declares the modules
//!    and re-exports the public API.

#![deny(unsafe_op_in_unsafe_fn)]
#![deny(clippy::undocumented_unsafe_blocks)]
#![warn(missing_docs)]

mod clock;
#[cfg(not(async_stack_loom))]
pub mod debug;
mod pages;
mod read;
mod record;
mod report;
pub mod sampler;
pub(crate) mod shim;
pub mod task;
#[cfg(not(async_stack_loom))]
pub mod wake;
mod warn;
#[cfg(not(async_stack_loom))]
#[doc(inline)]
pub use wake::workload;

#[cfg(feature = "tokio")]
pub mod tokio;

/// Drop-in `Mutex`, `RwLock` and `Semaphore` that record who holds and
/// who waits for them (feature `tokio`); see [`deadlocks()`].
#[cfg(all(feature = "tokio", not(async_stack_loom)))]
pub mod sync;
// Under loom, `deadlocks()` and the wrappers are left out: only the
// models use the graph.
#[cfg_attr(async_stack_loom, allow(dead_code))]
mod waits;

#[cfg(all(feature = "http", not(async_stack_loom)))]
pub mod http;

#[doc(inline)]
pub use read::dump;
#[cfg(unix)]
#[doc(inline)]
pub use report::signal;
#[doc(inline)]
pub use report::{panic, stall};

pub use async_stack_macros::traced_async;
pub use dump::{FromJsonError, TaskDump, TaskInfo, dump, unwakeable};
pub use read::walker::{Backtrace, BacktraceFrame, FrameKind, backtrace};
pub use record::frame::AsyncStackFrame;
pub use record::site::{AwaitSite, CallSite};
pub use task::TaskState;
pub use task::record::layout::current_task_id;
pub use task::traced::{Traced, TracedExt};
#[cfg(not(async_stack_loom))]
pub use waits::report::deadlocks;
pub use waits::report::{Deadlock, ResourceKind, WaitEdge};

/// Items used by the `#[traced_async]` expansion. Not a public API.
#[doc(hidden)]
pub mod __private {
    pub use crate::record::site::{AwaitSite, CallSite};
    pub use crate::task::traced::Traced;
    pub use crate::task::traced::{clear_await_site, set_await_site};
}
