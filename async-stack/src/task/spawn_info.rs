//! What a spawn helper's future ([`Spawned`](crate::task::spawn::Spawned))
//! hands the task roots inside it: the metadata ([`SpawnInfo`]), offered
//! in a thread-local slot for the duration of each of the wrapper's polls
//! ([`offer`]), and taken by every root that registers in that poll
//! ([`take_pending`], in `task/root.rs`): the first one takes over the
//! task registered at spawn, if any, and every one carries the task's
//! name, spawn site and parent, so that the task keeps them while any of
//! its roots lives, whichever ends first. Apart from the wrapper, so that
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

    /// The first poll is over: a root took the task registered at spawn
    /// over, or it ended; `parent` is the parent it had, for the roots
    /// that take the metadata later.
    pub(crate) fn unregistered(&mut self, parent: u64) {
        self.link = parent_link(parent);
    }

    /// The spawning task's id (`0`: unknown), or, if the task was
    /// registered at spawn, the place of that registration, whose record
    /// has it.
    pub(crate) fn parent(&self) -> Result<u64, u64> {
        if self.link & place::ROOT == 0 {
            Ok(self.link)
        } else {
            Err(self.link)
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

thread_local! {
    /// The parent of the task registered at spawn that a root of this
    /// thread took over last ([`adopted`]), for the helper's future to keep
    /// once its first poll is over (`0`: none).
    static ADOPTED_PARENT: Cell<u64> = const { Cell::new(0) };
}

/// A root took over the task registered at spawn, whose parent is
/// `parent` (see [`ADOPTED_PARENT`]).
pub(crate) fn adopted(parent: u64) {
    let _ = ADOPTED_PARENT.try_with(|c| c.set(parent));
}

/// The parent [`adopted`] noted, cleared (`0`: none).
pub(crate) fn take_adopted_parent() -> u64 {
    ADOPTED_PARENT.try_with(|c| c.replace(0)).unwrap_or(0)
}

/// Bit 0 of the offered pointer (a `SpawnInfo` is word-aligned): a root
/// of this poll took the metadata already.
const TAKEN: usize = 1;

/// Takes the spawn metadata waiting on this thread, if any: the root that
/// registers now is one of the task the spawn helper wraps. The offer
/// stays for the other roots that register in the same poll, marked
/// taken. Read in place, not copied: see [`Pending`].
pub(crate) fn take_pending() -> Pending {
    PENDING
        .try_with(|p| {
            let cur = p.get();
            if !cur.is_null() {
                p.set(cur.map_addr(|a| a | TAKEN));
            }
            Pending {
                info: cur.map_addr(|a| a & !TAKEN),
                first: cur.addr() & TAKEN == 0,
            }
        })
        .unwrap_or(Pending {
            info: std::ptr::null(),
            first: false,
        })
}

/// The spawn metadata a registering root took ([`take_pending`]): a
/// pointer into the `Spawned` future whose poll is running further down
/// this thread's stack, so it is only read during that poll, by the
/// registration that took it. Neither `Send` nor `Clone`: it stays in the
/// registration's frame.
pub(crate) struct Pending {
    info: *const SpawnInfo,
    /// The first root of the poll to take it (the one that takes over the
    /// task registered at spawn).
    first: bool,
}

impl Pending {
    /// The metadata, if a spawn helper left some.
    #[inline]
    pub(crate) fn get(&self) -> Option<&SpawnInfo> {
        // SAFETY: `PENDING` held null or a pointer (with `TAKEN` perhaps
        // set, cleared here) into a `Spawned` future whose poll is on this
        // thread's stack below the registration that took it (the poll
        // restores the slot on every exit path), and that poll does not
        // touch `info` again until the inner poll returns. The
        // registration, which owns `self`, runs inside that inner poll and
        // drops `self` before returning, so the future is alive and
        // unchanged while the borrow lasts.
        unsafe { self.info.as_ref() }
    }

    /// Whether this root is the first of the poll to take the metadata.
    #[inline]
    pub(crate) fn first(&self) -> bool {
        self.first
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
    /// Whether a root took the metadata (one registered during the offer).
    #[inline]
    pub(crate) fn taken(&self) -> bool {
        self.prev.is_some() && PENDING.try_with(|p| p.get() != self.info).unwrap_or(true)
    }
}

const _: () = assert!(std::mem::align_of::<SpawnInfo>() > TAKEN);

impl Drop for Offer {
    #[inline]
    fn drop(&mut self) {
        if let Some(prev) = self.prev {
            let _ = PENDING.try_with(|p| p.set(prev));
        }
    }
}
