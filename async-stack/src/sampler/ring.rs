//! A single-producer, single-consumer ring of `N` values: the on-CPU
//! signal handler (producer, on the sampled thread) hands samples to the
//! sampler thread (consumer) through it; and [`OwnedRing`], the same ring
//! lent to one producer at a time, which the consumer hands from one
//! producer to the next.
//!
//! # Protocol of the ring
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
//!
//! # Protocol of the owned ring
//!
//! - `owner` names the producer the ring is lent to (`0`: none); only the
//!   consumer writes it. `busy` is held by a producer while it produces,
//!   and by the consumer while the ring changes hands.
//! - A producer (thread `me`) takes `busy` (swap, acquire) *before* it
//!   reads `owner`: if `busy` was held, the consumer holds it (producers
//!   are never concurrent: each owner produces from one thread, and only
//!   the owner gets past the check), and the ring is changing hands. If
//!   `owner` is not `me`, it lets `busy` go. Otherwise it pushes, counts a
//!   full ring in `lost`, and lets `busy` go (release). While it holds
//!   `busy` with `owner == me`, nothing the consumer writes under `busy`
//!   changes: the caller's own per-owner data (the sampled thread's state
//!   and stack bounds) is the owner's.
//! - The consumer **revokes** the ring (`owner = 0`), then takes `busy`
//!   (compare-exchange, acquire): once it holds it, no producer is inside
//!   and none will push again, so what it drains then is everything that
//!   was pushed. Holding `busy` with `owner` at `0`, it may empty the ring,
//!   rewrite per-owner data and **hand** the ring to the next owner, then
//!   let `busy` go (release), which the next producer's swap acquires.
//! - `lost` only grows in producers (`fetch_add`); the consumer takes it
//!   with a swap to `0`, so each loss is taken once.

use std::mem::MaybeUninit;

use crate::shim::{AtomicU32, AtomicU64, Ordering};

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

    /// Values published and not consumed yet (a snapshot).
    pub(crate) fn len(&self) -> usize {
        let t = self.tail.load(Ordering::Acquire);
        self.head.load(Ordering::Acquire).wrapping_sub(t) as usize
    }

    /// The consumer, while no producer runs: drops nothing, forgets what
    /// is queued.
    pub(crate) fn clear(&self) {
        let h = self.head.load(Ordering::Acquire);
        self.tail.store(h, Ordering::Release);
    }
}

/// What [`OwnedRing::push_as`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Push {
    /// The value was pushed.
    Pushed,
    /// Counted in `lost`: the ring was full, or the consumer held it while
    /// `me` still owned it.
    Lost,
    /// The ring is not `me`'s: nothing was done.
    NotOwner,
}

/// A [`Ring`] lent to one producer at a time (see the module docs).
pub(crate) struct OwnedRing<T: Copy, const N: usize> {
    owner: AtomicU32,
    /// `1` while held, by a producer or the consumer.
    busy: AtomicU32,
    lost: AtomicU64,
    ring: Ring<T, N>,
}

impl<T: Copy, const N: usize> OwnedRing<T, N> {
    /// A ring with no owner, held by the consumer that makes it.
    pub(crate) fn new_held() -> Self {
        OwnedRing {
            owner: AtomicU32::new(0),
            busy: AtomicU32::new(1),
            lost: AtomicU64::new(0),
            ring: Ring::new(),
        }
    }

    /// The producer `me` (not `0`): if the ring is `me`'s, fills its next
    /// free slot with `fill` and publishes it. `fill` runs while `me`
    /// holds the ring, so whatever the consumer writes only while it
    /// holds the ring is `me`'s and stays so meanwhile.
    ///
    /// # Safety
    ///
    /// Only one producer calls this for a given `me` at a time, and `fill`
    /// writes a whole `T` through the pointer it is given.
    pub(crate) unsafe fn push_as(&self, me: u32, fill: impl FnOnce(*mut T)) -> Push {
        if self.busy.swap(1, Ordering::Acquire) == 1 {
            // The consumer holds it (see the module docs).
            if self.owner.load(Ordering::Relaxed) == me {
                self.lost.fetch_add(1, Ordering::Relaxed);
                return Push::Lost;
            }
            return Push::NotOwner;
        }
        if self.owner.load(Ordering::Relaxed) != me {
            self.busy.store(0, Ordering::Release);
            return Push::NotOwner;
        }
        // SAFETY: `me` owns the ring and holds `busy`: the only producer.
        let pushed = unsafe { self.ring.push_with(fill) };
        if !pushed {
            self.lost.fetch_add(1, Ordering::Relaxed);
        }
        self.busy.store(0, Ordering::Release);
        if pushed { Push::Pushed } else { Push::Lost }
    }

    /// The consumer: the oldest value, if any (at any time).
    pub(crate) fn pop(&self) -> Option<T> {
        self.ring.pop()
    }

    /// The consumer: the values lost since the last call.
    pub(crate) fn take_lost(&self) -> u64 {
        self.lost.swap(0, Ordering::Relaxed)
    }

    /// The consumer: takes the ring from its owner, who pushes nothing
    /// once the consumer next holds it.
    pub(crate) fn revoke(&self) {
        self.owner.store(0, Ordering::Release);
    }

    /// The consumer: holds the ring if no producer is inside.
    pub(crate) fn try_hold(&self) -> bool {
        self.busy
            .compare_exchange(0, 1, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
    }

    /// The consumer, holding the ring: forgets what it holds (values and
    /// losses).
    pub(crate) fn reset(&self) {
        self.ring.clear();
        self.lost.store(0, Ordering::Relaxed);
    }

    /// The consumer, holding the ring with no owner: lends it to `owner`
    /// (not `0`) and lets it go.
    pub(crate) fn hand_to(&self, owner: u32) {
        self.owner.store(owner, Ordering::Relaxed);
        self.unhold();
    }

    /// The consumer, holding the ring: lets it go.
    pub(crate) fn unhold(&self) {
        self.busy.store(0, Ordering::Release);
    }

    /// Values queued and values lost, not yet taken (a snapshot, for
    /// tests).
    pub(crate) fn backlog(&self) -> (usize, u64) {
        (self.ring.len(), self.lost.load(Ordering::Relaxed))
    }

    /// Whether `id` owns the ring now.
    pub(crate) fn is_owned_by(&self, id: u32) -> bool {
        self.owner.load(Ordering::Acquire) == id
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

    /// The consumer takes a ring from producer 7 while it pushes, and
    /// hands it to producer 9 with 9's data (`data`, written only while
    /// the consumer holds the ring). Producer 7 reads only its own data
    /// while it pushes, pushes nothing after the consumer first held the
    /// ring, and every value pushed is drained exactly once.
    #[test]
    fn loom_owned_ring_changes_hands_without_a_stray_push() {
        use crate::shim::AtomicUsize;
        loom::model(|| {
            let ring = Arc::new(OwnedRing::<u64, 2>::new_held());
            let data = Arc::new(AtomicUsize::new(70));
            ring.hand_to(7);
            let producer = {
                let (ring, data) = (ring.clone(), data.clone());
                loom::thread::spawn(move || {
                    let mut pushed = Vec::new();
                    for v in 1..=2u64 {
                        // SAFETY: the only producer as 7; writes a whole
                        // value.
                        let push = unsafe {
                            ring.push_as(7, |p| {
                                assert_eq!(data.load(Ordering::Relaxed), 70, "7 read 9's data");
                                p.write(v);
                            })
                        };
                        if push == Push::Pushed {
                            pushed.push(v);
                        }
                    }
                    pushed
                })
            };
            ring.revoke();
            let mut drained = Vec::new();
            let held = ring.try_hold();
            if held {
                while let Some(v) = ring.pop() {
                    drained.push(v);
                }
                data.store(90, Ordering::Relaxed);
                ring.hand_to(9);
            }
            let pushed = producer.join().unwrap();
            if held {
                assert_eq!(
                    ring.pop(),
                    None,
                    "7 pushed after the consumer held the ring"
                );
            }
            while let Some(v) = ring.pop() {
                drained.push(v);
            }
            assert_eq!(drained, pushed);
        });
    }
}
