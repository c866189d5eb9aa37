//! A single-producer, single-consumer ring of `N` values: the on-CPU
//! signal handler (producer, on the sampled thread) hands samples to the
//! sampler thread (consumer) through it.
//!
//! # Protocol
//!
//! - `head` counts values published, `tail` values consumed; both only
//!   grow (wrapping), and `head - tail <= N`.
//! - The producer writes slot `head % N` only when `head - tail < N`
//!   (`tail` read with acquire ordering, so the consumer's read of that
//!   slot happened before), then publishes it by storing `head + 1` with
//!   release ordering.
//! - The consumer reads slot `tail % N` only when `tail != head` (`head`
//!   read with acquire ordering, so the producer's writes happened
//!   before), then frees it by storing `tail + 1` with release ordering.
//!
//! So no slot is ever written and read at once. The producer allocates
//! nothing and takes no lock; callers guarantee there is one producer and
//! one consumer at a time.

use std::mem::MaybeUninit;

use crate::sync::{AtomicU32, Ordering};

#[cfg(not(async_stack_loom))]
struct Slot<T>(std::cell::UnsafeCell<MaybeUninit<T>>);
#[cfg(async_stack_loom)]
struct Slot<T>(loom::cell::UnsafeCell<MaybeUninit<T>>);

impl<T> Slot<T> {
    fn new() -> Self {
        #[cfg(not(async_stack_loom))]
        {
            Slot(std::cell::UnsafeCell::new(MaybeUninit::uninit()))
        }
        #[cfg(async_stack_loom)]
        {
            Slot(loom::cell::UnsafeCell::new(MaybeUninit::uninit()))
        }
    }

    fn with_mut<R>(&self, f: impl FnOnce(*mut MaybeUninit<T>) -> R) -> R {
        #[cfg(not(async_stack_loom))]
        {
            f(self.0.get())
        }
        #[cfg(async_stack_loom)]
        {
            self.0.with_mut(f)
        }
    }
}

/// The ring (see the module docs).
pub(crate) struct Ring<T: Copy, const N: usize> {
    head: AtomicU32,
    tail: AtomicU32,
    slots: [Slot<T>; N],
}

// SAFETY: slots are accessed under the protocol of the module docs: a
// slot is written only by the producer while it is free, and read only by
// the consumer once published; `T: Copy + Send` values cross threads.
unsafe impl<T: Copy + Send, const N: usize> Sync for Ring<T, N> {}

impl<T: Copy, const N: usize> Ring<T, N> {
    pub(crate) fn new() -> Self {
        Ring {
            head: AtomicU32::new(0),
            tail: AtomicU32::new(0),
            slots: std::array::from_fn(|_| Slot::new()),
        }
    }

    /// The producer: fills the next free slot with `fill` (which must
    /// initialise it whole) and publishes it; `false` if the ring is full.
    ///
    /// # Safety
    ///
    /// No other producer runs at the same time, and `fill` writes a whole
    /// `T` through the pointer it is given.
    pub(crate) unsafe fn push_with(&self, fill: impl FnOnce(*mut T)) -> bool {
        let h = self.head.load(Ordering::Relaxed);
        if h.wrapping_sub(self.tail.load(Ordering::Acquire)) as usize >= N {
            return false;
        }
        self.slots[h as usize % N].with_mut(|p| fill(p.cast::<T>()));
        self.head.store(h.wrapping_add(1), Ordering::Release);
        true
    }

    /// The consumer: the oldest value, if any.
    pub(crate) fn pop(&self) -> Option<T> {
        let t = self.tail.load(Ordering::Relaxed);
        if t == self.head.load(Ordering::Acquire) {
            return None;
        }
        // SAFETY: slot `t` was published (`head` > t, acquire) whole, by
        // the producer's contract, and is not written again before `tail`
        // moves past it.
        let v = self.slots[t as usize % N].with_mut(|p| unsafe { (*p).assume_init_read() });
        self.tail.store(t.wrapping_add(1), Ordering::Release);
        Some(v)
    }

    /// The consumer, while no producer runs: drops nothing, forgets what
    /// is queued.
    pub(crate) fn clear(&self) {
        let h = self.head.load(Ordering::Acquire);
        self.tail.store(h, Ordering::Release);
    }
}

#[cfg(all(test, async_stack_loom))]
mod loom_tests {
    use super::*;
    use loom::sync::Arc;

    /// Values cross whole and in order, none twice, none lost except
    /// those refused when the ring was full.
    #[test]
    fn loom_ring_hands_over_whole_values_in_order() {
        loom::model(|| {
            let ring = Arc::new(Ring::<(u64, u64), 2>::new());
            let producer = {
                let ring = ring.clone();
                loom::thread::spawn(move || {
                    let mut pushed = Vec::new();
                    for v in 1..=3u64 {
                        // SAFETY: the only producer; writes a whole value.
                        if unsafe { ring.push_with(|p| p.write((v, v * 10))) } {
                            pushed.push(v);
                        }
                    }
                    pushed
                })
            };
            let mut got = Vec::new();
            for _ in 0..3 {
                if let Some((a, b)) = ring.pop() {
                    assert_eq!(b, a * 10, "a torn value");
                    got.push(a);
                }
            }
            let pushed = producer.join().unwrap();
            while let Some((a, b)) = ring.pop() {
                assert_eq!(b, a * 10);
                got.push(a);
            }
            assert_eq!(got, pushed);
        });
    }
}
