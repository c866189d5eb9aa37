//! A recorded join wait ([`JoinWait`]): an awaited `JoinHandle`'s wait
//! from its first `Pending` to its end, in a slot of the registry's join
//! arena (`join.rs`).
//!
//! A thread keeps the last slot it freed for its next join wait (and gives
//! it back when it ends), so `spawn(work()).await` in a loop takes no lock;
//! other slots come from the arena's free list, under its lock.

// The writer is the `JoinHandle` of feature `tokio` (and the tests).
#![cfg_attr(not(feature = "tokio"), allow(dead_code))]

use std::panic::Location;

use crate::waits::join::JoinSlot;
use crate::waits::resource::{Registry, next_generation, stamp};
use crate::waits::waiter::Waiter;

/// A recorded join wait, ended when dropped: what an awaited `JoinHandle`
/// keeps from its first `Pending` to its end.
#[derive(Debug)]
pub(crate) struct JoinWait {
    registry: &'static Registry,
    index: u32,
}

impl JoinWait {
    /// Records that `waiter` waits for the tokio task `target`, spawned at
    /// `spawned_at`; `None` if every slot is taken (the wait then goes
    /// unrecorded, as a wait outside the registry would).
    pub(crate) fn start(
        registry: &'static Registry,
        waiter: Waiter,
        target: u64,
        spawned_at: &'static Location<'static>,
    ) -> Option<JoinWait> {
        let joins = registry.joins();
        let index = match spare::take(registry) {
            Some(index) => index,
            None => joins.alloc()?,
        };
        let Some(slot) = joins.get(index) else {
            // Handed out, so its page exists (cannot happen).
            joins.release(index);
            return None;
        };
        slot.write(
            next_generation(),
            waiter,
            target,
            stamp(waiter.task),
            spawned_at,
        );
        Some(JoinWait {
            registry,
            index: index as u32,
        })
    }

    /// The waiter, as recorded (in the slot, which only this wait writes:
    /// a `JoinHandle` stays as small as before).
    pub(crate) fn waiter(&self) -> Option<Waiter> {
        self.registry
            .joins()
            .get(self.index as usize)
            .map(JoinSlot::waiter)
    }
}

impl Drop for JoinWait {
    fn drop(&mut self) {
        let joins = self.registry.joins();
        if let Some(slot) = joins.get(self.index as usize) {
            slot.clear();
        }
        if !spare::keep(self.registry, self.index as usize) {
            joins.release(self.index as usize);
        }
    }
}

/// Each thread keeps the last join slot it freed, for its next join wait:
/// `spawn(work()).await` in a loop then takes no lock at all, where the
/// arena's free list takes its lock at each start and each end.
#[cfg(not(async_stack_loom))]
mod spare {
    use std::cell::Cell;

    use crate::waits::resource::Registry;

    /// A free slot of `registry`'s join arena, given back to the arena's
    /// free list when the thread ends.
    struct Spare(Cell<Option<(&'static Registry, usize)>>);

    impl Drop for Spare {
        fn drop(&mut self) {
            if let Some((registry, index)) = self.0.take() {
                registry.joins().release(index);
            }
        }
    }

    thread_local! {
        static SPARE: Spare = const { Spare(Cell::new(None)) };
    }

    /// This thread's spare slot, if it is `registry`'s.
    #[inline]
    pub(super) fn take(registry: &'static Registry) -> Option<usize> {
        SPARE
            .try_with(|s| match s.0.get() {
                Some((r, index)) if std::ptr::eq(r, registry) => {
                    s.0.set(None);
                    Some(index)
                }
                _ => None,
            })
            .ok()
            .flatten()
    }

    /// Keeps the free slot `index` of `registry` as this thread's spare;
    /// whether it did (not if the thread has one, or is ending).
    #[inline]
    pub(super) fn keep(registry: &'static Registry, index: usize) -> bool {
        SPARE
            .try_with(|s| {
                if s.0.get().is_some() {
                    return false;
                }
                s.0.set(Some((registry, index)));
                true
            })
            .unwrap_or(false)
    }
}

/// Under loom every slot goes through the arena's free list, which the
/// models cover.
#[cfg(async_stack_loom)]
mod spare {
    use crate::waits::resource::Registry;

    pub(super) fn take(_: &'static Registry) -> Option<usize> {
        None
    }

    pub(super) fn keep(_: &'static Registry, _: usize) -> bool {
        false
    }
}
