//! [`AsyncStackFrame`]: the record every instrumented future carries.
//!
//! # Layout and who touches what
//!
//! The frame is `#[repr(C)]` so that debugger scripts can read it at fixed
//! offsets. Every field is an atomic word written with `Relaxed` stores
//! (plain moves on x86-64 and AArch64), so a signal handler interrupting
//! the polling thread reads whole words.
//!
//! | field | written by | when | meaningful |
//! |---|---|---|---|
//! | `parent` | the polling thread | on **every** poll, from the thread's active frame | while the frame is being polled |
//! | `return_address` | the polling thread | on every poll, from its parent's await-site cache | while being polled |
//! | `call_site` | the constructor | once | always |
//! | `await_site` | the body, just before each `.await` | at each `.await` | always; null before the first `.await` |
//! | `poll_marker` | the polling thread | on every poll | while being polled (stale otherwise) |
//! | `body_fn` | the polling thread | on every poll (a constant) | always, once polled |
//! | `birth` | the polling thread | first poll under a task | always, once set |
//!
//! The parent is re-linked on every poll, never only on the first: a future
//! can be moved before it is pinned, polled by different parents
//! (`futures::future::Shared`, caches), and dropped on any thread. A frame is
//! therefore never linked into anything between polls, and dropping it
//! needs no unlinking.
//!
//! # The return address
//!
//! folly fills `returnAddress` with `__builtin_return_address(0)` in a
//! never-inlined `await_suspend`. Stable Rust has no such intrinsic, so
//! async-stack resolves it **once per `.await` site**: the first time a
//! child is polled from a given parent `.await`, a cold path unwinds the
//! native stack (from [`Traced`](crate::Traced)'s never-inlined `poll`) and
//! takes the address in the parent's code that called down towards the
//! child. That address is cached in the parent's static [`AwaitSite`], and
//! every later poll copies it with one load. It symbolises (addr2line) to
//! the line of the parent's `.await`.

use crate::site::{AwaitSite, CallSite};
use crate::sync::{AtomicPtr, AtomicU32, AtomicUsize, Ordering};

/// One async stack frame: the record an instrumented future keeps while it
/// runs, linked to the frame of the future that polls it.
///
/// Frames live inside [`Traced`](crate::Traced) futures. You normally never
/// touch one directly; they are documented because debugger scripts and the
/// sampler read them at fixed offsets (`#[repr(C)]`).
#[repr(C)]
#[derive(Debug)]
pub struct AsyncStackFrame {
    /// The frame that polled this one (valid only during this frame's poll).
    pub(crate) parent: AtomicPtr<AsyncStackFrame>,
    /// An address inside the parent's code that symbolises to the `.await`
    /// that polls this frame; `0` when unknown.
    pub(crate) return_address: AtomicUsize,
    /// The static call-site record (immutable, so a plain reference).
    pub(crate) call_site: &'static CallSite,
    /// The `.await` this frame is suspended on (or was last suspended on).
    pub(crate) await_site: AtomicPtr<AwaitSite>,
    /// An address on the native stack inside this frame's current `poll`
    /// (`0` before the first; stale between polls, when nothing reads it).
    /// The walker uses it to splice the frames of the active chain.
    pub(crate) poll_marker: AtomicUsize,
    /// Address of the body's `poll` function (`<F as Future>::poll`), to
    /// tell from unwind data whether the body has a physical frame of its
    /// own or was inlined into the marker frame.
    pub(crate) body_fn: AtomicUsize,
    /// Per-task number taken on the first poll under a task; orders
    /// siblings in dumps (`0` until then).
    pub(crate) birth: AtomicU32,
}

impl AsyncStackFrame {
    pub(crate) fn new(call_site: &'static CallSite) -> Self {
        AsyncStackFrame {
            parent: AtomicPtr::new(std::ptr::null_mut()),
            return_address: AtomicUsize::new(0),
            call_site,
            await_site: AtomicPtr::new(std::ptr::null_mut()),
            poll_marker: AtomicUsize::new(0),
            body_fn: AtomicUsize::new(0),
            birth: AtomicU32::new(0),
        }
    }

    /// The call site of this frame.
    #[inline]
    pub fn call_site(&self) -> &'static CallSite {
        self.call_site
    }

    /// The `.await` this frame is suspended on, or last suspended on.
    #[inline]
    pub fn await_site(&self) -> Option<&'static AwaitSite> {
        let p = self.await_site.load(Ordering::Relaxed);
        // SAFETY: `await_site` only ever holds null or a pointer derived from
        // a `&'static AwaitSite` (see `active::set_await_site`).
        unsafe { p.cast_const().as_ref() }
    }

    /// The cached return address into the parent's code (`0` if unknown).
    #[inline]
    pub fn return_address(&self) -> usize {
        match self.return_address.load(Ordering::Relaxed) {
            // `1` marks a site whose resolution failed.
            1 => 0,
            ra => ra,
        }
    }
}
