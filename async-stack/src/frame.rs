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
//! | `key` | the constructor, then the body at each `.await` | at each `.await` | always: the frame's published entry without its depth |
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
//! body reaches a given `.await`, the site record it publishes (always
//! inlined at the `.await`) takes a cold path that unwinds one frame and
//! keeps the address it returns to, an address in the body's code inside
//! that `.await`. It is cached in the static [`AwaitSite`], and every poll
//! of a child copies its parent's with two loads. It symbolises
//! (addr2line) to the line of the parent's `.await`. Polls themselves are
//! inlined into the parent's code in optimised builds, so there is no
//! physical call to return to; the walker reads the same line off the
//! inlined frames of the stack it captures.

use crate::site::{AwaitSite, CallSite};
use crate::sync::{AtomicPtr, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use crate::task::published::Entry;

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
    /// The frame's entry in its task's published stack, depth aside: the
    /// interned ids of its call site and current await site, encoded as
    /// `task::published::Entry` does. Kept here so that a poll compares one
    /// word with its published entry instead of looking both ids up.
    pub(crate) key: AtomicU64,
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
            key: AtomicU64::new(Entry::encode(0, call_site.id(), 0)),
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
