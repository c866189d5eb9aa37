//! What a spawn helper's future ([`Spawned`](crate::task::spawn::Spawned))
//! hands the task root inside it: the metadata ([`SpawnInfo`]), offered in
//! a thread-local slot for the duration of the wrapper's poll
//! ([`offer`]), and taken by the first root that registers in that poll
//! ([`take_pending`], in `task/root.rs`). Apart from the wrapper, so that
//! the root's registration needs nothing of it.

use std::cell::Cell;
use std::panic::Location;
use std::sync::Arc;

use crate::task::place;
use crate::task::record::TaskName;

/// Metadata a spawn helper attaches to the task it spawns.
#[derive(Debug)]
pub(crate) struct SpawnInfo {
    pub(crate) name: Option<Arc<TaskName>>,
    pub(crate) location: &'static Location<'static>,
    /// The spawning task's id, or, once the task is registered at spawn
    /// (see `root::preregister`), the place of that registration, which
    /// keeps the parent in its record: [`ROOT`](place::ROOT) is set in a
    /// place and clear in every task id (ids count up from 1, and would
    /// take centuries to reach 2^57). One word for both, so that the
    /// wrapper stays three words.
    link: u64,
}

impl SpawnInfo {
    /// The metadata of a spawn at `location` from the task `parent` (`0`:
    /// none), without a name.
    pub(crate) fn new(location: &'static Location<'static>, parent: u64) -> Self {
        SpawnInfo {
            name: None,
            location,
            link: parent_link(parent),
        }
    }

    /// The task was registered at spawn, at place `pre` (`0`: no record
    /// was left, nothing changes). Its record keeps the parent.
    pub(crate) fn registered(&mut self, pre: u64) {
        if pre != 0 {
            self.link = pre;
        }
    }

    /// The task registered at spawn ended before any root took it over;
    /// `parent` is the parent it had, for the root that takes the
    /// metadata later.
    pub(crate) fn unregistered(&mut self, parent: u64) {
        self.link = parent_link(parent);
    }

    /// The spawning task's id (`0`: unknown), unless the task was
    /// registered at spawn (its record has it then).
    pub(crate) fn parent(&self) -> u64 {
        if self.link & place::ROOT == 0 {
            self.link
        } else {
            0
        }
    }

    /// The place of the task registered at spawn, `0` for none.
    pub(crate) fn pre(&self) -> u64 {
        if self.link & place::ROOT != 0 {
            self.link
        } else {
            0
        }
    }
}

/// The link of a spawn from the task `parent`: its id, or `0` (unknown)
/// for an id that would read as a place (none reaches 2^57).
fn parent_link(parent: u64) -> u64 {
    if parent & place::ROOT == 0 { parent } else { 0 }
}

thread_local! {
    /// The metadata of the `Spawned` future being polled on this thread,
    /// for the task root it contains (null: none).
    static PENDING: Cell<*const SpawnInfo> = const { Cell::new(std::ptr::null()) };
}

/// Takes the spawn metadata waiting on this thread, if any: the root that
/// registers now is the one the spawn helper wraps. Read in place, not
/// copied: see [`Pending`].
pub(crate) fn take_pending() -> Pending {
    Pending(
        PENDING
            .try_with(|p| p.replace(std::ptr::null()))
            .unwrap_or(std::ptr::null()),
    )
}

/// The spawn metadata a registering root took ([`take_pending`]): a
/// pointer into the `Spawned` future whose poll is running further down
/// this thread's stack, so it is only read during that poll, by the
/// registration that took it. Neither `Send` nor `Clone`: it stays in the
/// registration's frame.
pub(crate) struct Pending(*const SpawnInfo);

impl Pending {
    /// The metadata, if a spawn helper left some.
    #[inline]
    pub(crate) fn get(&self) -> Option<&SpawnInfo> {
        // SAFETY: `PENDING` held null or a pointer into a `Spawned` future
        // whose poll is on this thread's stack below the registration that
        // took it (the poll restores the pointer on every exit path), and
        // that poll does not touch `info` again until the inner poll
        // returns. The registration, which owns `self`, runs inside that
        // inner poll and drops `self` before returning, so the future is
        // alive and unchanged while the borrow lasts.
        unsafe { self.0.as_ref() }
    }
}

/// Offers `info` to the task roots that register on this thread until the
/// returned offer is dropped (on every exit of the wrapper's poll, an
/// unwinding one included), which puts back what was offered before.
#[inline]
pub(crate) fn offer(info: *const SpawnInfo) -> Offer {
    Offer {
        info,
        prev: PENDING.try_with(|p| p.replace(info)).ok(),
    }
}

/// An offer in progress ([`offer`]).
pub(crate) struct Offer {
    info: *const SpawnInfo,
    /// What was offered before, `None` if the thread's slot is gone (its
    /// destructors run): nothing was offered then.
    prev: Option<*const SpawnInfo>,
}

impl Offer {
    /// Whether a root took the metadata (it registered during the offer).
    #[inline]
    pub(crate) fn taken(&self) -> bool {
        self.prev.is_some() && PENDING.try_with(|p| p.get() != self.info).unwrap_or(true)
    }
}

impl Drop for Offer {
    #[inline]
    fn drop(&mut self) {
        if let Some(prev) = self.prev {
            let _ = PENDING.try_with(|p| p.set(prev));
        }
    }
}
