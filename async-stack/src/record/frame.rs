//! [`AsyncStackFrame`]: the record every instrumented future carries.
//!
//! # Layout and who touches what
//!
//! The frame is three words, `#[repr(C)]` so that debugger scripts can read
//! it at fixed offsets. Every field is an atomic word written with
//! `Relaxed` stores (plain moves on x86-64 and AArch64), so a signal
//! handler interrupting the polling thread reads whole words.
//!
//! | offset | field | written by | when |
//! |---:|---|---|---|
//! | 0 | `parent`: the frame that polls this one | the polling thread | on **every** poll, from the thread's current frame (null for a task root) |
//! | 8 | `site`: the function and the `.await` it is at (see below) | the constructor, then the body at each `.await` | always valid |
//! | 16 | `place`: where the frame is in its task's published stack ([`crate::task::place`]) | the polling or dropping thread (no other thread reads it) | when the frame takes or gives back a place |
//!
//! The parent pointer is stored on every poll, never only on the first: a
//! future can be moved before it is pinned, polled by different parents
//! (`futures::future::Shared`, caches), and dropped on any thread.
//!
//! # The site word
//!
//! `site` points to a `'static` [`CallSite`] (bit 0 clear) while the frame
//! is not at an instrumented `.await`, and to a `'static` [`AwaitSite`]
//! (bit 0 set) while it is: an await site names the call site of the
//! function it is in, so one word says which function and which `.await`.
//!
//! # The return address
//!
//! folly fills `returnAddress` with `__builtin_return_address(0)` in a
//! never-inlined `await_suspend`. Stable Rust has no such intrinsic, so
//! async-stack resolves it **once per `.await` site**: the first time a
//! body reaches a given `.await`, the site record takes a cold path that
//! unwinds one frame and keeps the address it returns to, an address in the
//! body's code inside that `.await`. It is cached in the static
//! [`AwaitSite`], so the return address of a frame into its parent is
//! `parent.site`'s (the `.await` that polls it), read through the chain
//! rather than copied into every frame: a child polled from two `.await`s
//! of one parent is placed at the right one, and the frame stays three
//! words. It symbolises (addr2line) to the line of the parent's `.await`.

use crate::record::site::{AwaitSite, CallSite, SiteId};
use crate::shim::{AtomicPtr, AtomicU64, Ordering};

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
    /// A `&'static CallSite`, or a `&'static AwaitSite` with bit 0 set.
    pub(crate) site: AtomicPtr<u8>,
    /// The frame's place in its task (see [`crate::task::place`]); `0`:
    /// none.
    pub(crate) place: AtomicU64,
}

/// Bit 0 of `site`: it points to an [`AwaitSite`].
pub(crate) const AT_AWAIT: usize = 1;

const _: () =
    assert!(std::mem::align_of::<CallSite>() > 1 && std::mem::align_of::<AwaitSite>() > 1);

impl AsyncStackFrame {
    pub(crate) fn new(call_site: &'static CallSite) -> Self {
        AsyncStackFrame {
            parent: AtomicPtr::new(std::ptr::null_mut()),
            site: AtomicPtr::new(std::ptr::from_ref(call_site).cast::<u8>().cast_mut()),
            place: AtomicU64::new(0),
        }
    }

    /// The call site of this frame.
    #[inline]
    pub fn call_site(&self) -> &'static CallSite {
        match self.await_site() {
            Some(a) => a.call_site(),
            None => {
                let p = self.site.load(Ordering::Relaxed);
                // SAFETY: with bit 0 clear, `site` holds a pointer derived
                // from a `&'static CallSite` (`new`, `clear_await`).
                unsafe { &*p.cast::<CallSite>() }
            }
        }
    }

    /// The `.await` this frame is suspended on (or polling now), if it is at
    /// an instrumented one.
    #[inline]
    pub fn await_site(&self) -> Option<&'static AwaitSite> {
        let p = self.site.load(Ordering::Relaxed);
        if p.addr() & AT_AWAIT == 0 {
            return None;
        }
        // SAFETY: with bit 0 set, `site` holds a pointer derived from a
        // `&'static AwaitSite` with that bit added (`set_await`).
        Some(unsafe { &*p.map_addr(|a| a & !AT_AWAIT).cast::<AwaitSite>() })
    }

    /// The frame is now at the `.await` of `site` (an `.await` of its own
    /// function).
    #[inline(always)]
    pub(crate) fn set_await(&self, site: &'static AwaitSite) {
        let p = std::ptr::from_ref(site).cast::<u8>().cast_mut();
        self.site
            .store(p.map_addr(|a| a | AT_AWAIT), Ordering::Relaxed);
    }

    /// The frame left its `.await` and runs code between two.
    #[inline(always)]
    pub(crate) fn clear_await(&self) {
        if let Some(a) = self.await_site() {
            let p = std::ptr::from_ref(a.call_site()).cast::<u8>().cast_mut();
            self.site.store(p, Ordering::Relaxed);
        }
    }

    /// Takes the frame's place (see [`crate::task::place`]), leaving none.
    ///
    /// A load and a store, not a swap (which on x86-64 is a locked
    /// instruction, some twenty cycles): only the thread that holds the
    /// frame's future, to poll or to drop it, writes its place; other
    /// threads never read it.
    #[inline(always)]
    pub(crate) fn take_place(&self) -> u64 {
        let p = self.place.load(Ordering::Relaxed);
        self.place.store(0, Ordering::Relaxed);
        p
    }

    /// The site field of this frame's published word (see
    /// [`crate::task::stack`]): its await site's id, or its call site's.
    pub(crate) fn site_id(&self) -> SiteId {
        // One load of the word (each of `await_site` and `call_site` loads
        // it again).
        let p = self.site.load(Ordering::Relaxed);
        if p.addr() & AT_AWAIT != 0 {
            // SAFETY: as in `await_site`: with bit 0 set, `p` is a
            // `&'static AwaitSite` with that bit added.
            let a = unsafe { &*p.map_addr(|a| a & !AT_AWAIT).cast::<AwaitSite>() };
            SiteId::at_await(a.id())
        } else {
            // SAFETY: as in `call_site`: with bit 0 clear, `p` is a
            // `&'static CallSite`.
            let c = unsafe { &*p.cast::<CallSite>() };
            SiteId::call(c.id())
        }
    }

    /// The return address cached at this frame's current `.await`: where a
    /// child it polls now returns to, an address in this frame's code that
    /// symbolises to that `.await` (`0` if unknown).
    #[inline]
    pub fn child_return_address(&self) -> usize {
        self.await_site()
            .map_or(0, AwaitSite::cached_return_address)
    }
}

#[cfg(all(test, not(async_stack_loom)))]
mod tests {
    use super::*;

    static CALL: CallSite = CallSite::new("f", "m", "src/m.rs", 3, 1, false);
    static AWAIT: AwaitSite = AwaitSite::new(&CALL, "src/m.rs", 4, 9);

    #[test]
    fn the_site_word_says_which_function_and_which_await() {
        let f = AsyncStackFrame::new(&CALL);
        assert_eq!(std::mem::size_of::<AsyncStackFrame>(), 24);
        assert!(std::ptr::eq(f.call_site(), &CALL));
        assert!(f.await_site().is_none());
        f.set_await(&AWAIT);
        assert!(std::ptr::eq(f.await_site().unwrap(), &AWAIT));
        assert!(std::ptr::eq(f.call_site(), &CALL));
        assert_eq!(f.site_id(), SiteId::at_await(AWAIT.id()));
        f.clear_await();
        assert!(f.await_site().is_none());
        assert!(std::ptr::eq(f.call_site(), &CALL));
        assert_eq!(f.site_id(), SiteId::call(CALL.id()));
    }
}
