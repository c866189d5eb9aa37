//! Loom models of the wait-edge protocol (`cfg(async_stack_loom)`): the
//! double collect never reports a deadlock that was not whole at one
//! instant, never reports a wait that had ended, the exclusive hold slot
//! and the shared slots are only ever read whole (a shared slot is claimed
//! by one holder, and a second pass sees any change of it), and a resource is unlisted exactly once, before
//! it is freed, whichever of its owner and its last wait goes last.

use std::panic::Location;
use std::sync::Arc;

use crate::shim::{AtomicU64, Ordering};
use crate::waits::detect::{TaskView, detect};
use crate::waits::join_wait::JoinWait;
use crate::waits::resource::{
    Ask, HoldSlot, Kind, Owner, Registry, Resource, ResourceCopy, SharedPlace, WaitRecord,
};
use crate::waits::waiter::Waiter;

/// Every task idle, never woken; no tokio tasks.
struct Idle;

impl TaskView for Idle {
    fn idle(&self, _: u64) -> Option<u64> {
        Some(0)
    }
    fn roots_of(&self, _: u64) -> Vec<u64> {
        Vec::new()
    }
    fn name(&self, _: u64) -> Option<String> {
        None
    }
}

fn registry() -> &'static Registry {
    Box::leak(Box::new(Registry::new()))
}

fn mutex(reg: &'static Registry) -> Arc<Resource> {
    Arc::new(Resource::new(Kind::Mutex, Location::caller(), reg))
}

/// Task 1 stops waiting for `b`, then task 2 starts waiting for `a`: the
/// three waits 1 -> b, 2 -> a and 3 -> a, a deadlock together, never
/// exist at once. A reader that copied `b` before the first step and `a`
/// after the second would see all three; the second pass must catch it.
#[test]
fn a_cycle_never_whole_at_one_instant_is_never_reported() {
    loom::model(|| {
        let reg = registry();
        // `b` first: the reader copies resources in order of creation.
        let b = mutex(reg);
        let a = mutex(reg);
        a.exclusive.acquire(1, Location::caller(), 0);
        b.exclusive.acquire(2, Location::caller(), 0);
        let _w3 = WaitRecord::start(&a, Waiter::of(3), None, Ask::Exclusive);
        let w1 = WaitRecord::start(&b, Waiter::of(1), None, Ask::Exclusive);
        let writer = {
            let a = a.clone();
            loom::thread::spawn(move || {
                drop(w1);
                WaitRecord::start(&a, Waiter::of(2), None, Ask::Exclusive)
            })
        };
        let found = detect(reg, |_| Idle);
        assert!(found.is_empty(), "{:?}", found[0].edges);
        let _w2 = writer.join().unwrap();
    });
}

/// A deadlock whose wait ended before the reader started is not reported
/// (and one whose wait ends while it reads may or may not be).
#[test]
fn a_wait_that_ended_is_never_reported() {
    loom::model(|| {
        let reg = registry();
        let (a, b) = (mutex(reg), mutex(reg));
        a.exclusive.acquire(1, Location::caller(), 0);
        b.exclusive.acquire(2, Location::caller(), 0);
        let _w2 = WaitRecord::start(&a, Waiter::of(2), None, Ask::Exclusive);
        let w1 = WaitRecord::start(&b, Waiter::of(1), None, Ask::Exclusive);
        let ended = Arc::new(AtomicU64::new(0));
        let writer = {
            let ended = ended.clone();
            loom::thread::spawn(move || {
                drop(w1);
                ended.store(1, Ordering::SeqCst);
            })
        };
        let before = ended.load(Ordering::SeqCst);
        let found = detect(reg, |_| Idle);
        if before == 1 {
            assert!(found.is_empty());
        }
        writer.join().unwrap();
        assert!(detect(reg, |_| Idle).is_empty());
    });
}

/// A reader racing a release and a new acquire reads no hold, or one
/// whole hold: never one holder's task with another's site.
#[test]
fn the_hold_slot_is_read_whole() {
    static FIRST: &Location<'static> = Location::caller();
    loom::model(|| {
        let slot = Arc::new(HoldSlot::new());
        let second = Location::caller();
        slot.acquire(1, FIRST, 10);
        let writer = {
            let slot = slot.clone();
            loom::thread::spawn(move || {
                slot.release();
                slot.acquire(2, second, 20);
            })
        };
        if let Some(h) = slot.read() {
            let whole = (h.task, h.since_ms) == (1, 10) && std::ptr::eq(h.at, FIRST)
                || (h.task, h.since_ms) == (2, 20) && std::ptr::eq(h.at, second);
            assert!(whole, "{h:?}");
        }
        writer.join().unwrap();
    });
}

/// Where task `t` acquires its shared hold in the models below.
static SITES: [&Location<'static>; 3] =
    [Location::caller(), Location::caller(), Location::caller()];

/// Each shared hold a copy read, as `task`, checking that it is whole:
/// task `t` holds `10 + t` permits, acquired at `sites[t]`.
fn whole_holds(copy: &ResourceCopy, sites: &[&'static Location<'static>]) -> Vec<u64> {
    copy.holds
        .iter()
        .map(|h| {
            let site = sites.get(h.task as usize);
            let whole =
                h.permits == 10 + h.task as u32 && site.is_some_and(|s| std::ptr::eq(h.at, *s));
            assert!(whole, "{h:?}");
            h.task
        })
        .collect()
}

/// Two readers of an `RwLock` record their holds at once while a reader
/// copies the resource: each claims a slot of its own, and the copy reads
/// each hold whole or not at all.
#[test]
fn shared_slots_are_claimed_by_one_holder_each_and_read_whole() {
    loom::model(|| {
        let reg = registry();
        let l = Arc::new(Resource::new(Kind::RwLock, Location::caller(), reg));
        let holders: Vec<_> = [1u64, 2]
            .into_iter()
            .map(|task| {
                let l = l.clone();
                loom::thread::spawn(move || {
                    l.hold_shared(task, SITES[task as usize], 10 + task as u32)
                })
            })
            .collect();
        let copy = l.copy();
        assert!(whole_holds(&copy, &SITES).len() <= 2);
        let places: Vec<SharedPlace> = holders.into_iter().map(|h| h.join().unwrap()).collect();
        assert_ne!(places[0], places[1], "one slot each");
        assert!(
            places.iter().all(|p| matches!(p, SharedPlace::Slot(0 | 1))),
            "{places:?}"
        );
        let mut tasks = whole_holds(&l.copy(), &SITES);
        tasks.sort_unstable();
        assert_eq!(tasks, [1, 2]);
    });
}

/// A holder releases its slot and another takes it while a reader copies
/// the resource: the copy reads task 1's hold, task 2's, or none, each
/// whole, and a second pass after both finds the copy unchanged only if
/// it saw task 2's hold (the state that lasts; a copy that read `last`
/// before the hand-over is found changed, which costs a report, never
/// makes one up).
#[test]
fn a_shared_slot_changing_hands_is_read_whole_and_seen_to_change() {
    loom::model(|| {
        let reg = registry();
        let l = Arc::new(Resource::new(Kind::Semaphore, Location::caller(), reg));
        let first = l.hold_shared(1, SITES[1], 11);
        let writer = {
            let l = l.clone();
            loom::thread::spawn(move || {
                l.release_shared(first);
                l.hold_shared(2, SITES[2], 12)
            })
        };
        let seen = l.copy();
        let read = whole_holds(&seen, &SITES);
        assert!(read.len() <= 1 && (read.is_empty() || !seen.unsettled));
        assert_eq!(writer.join().unwrap(), first, "the same slot, free again");
        if l.unchanged(&seen) {
            assert_eq!(read, [2]);
        }
        assert!(l.unchanged(&l.copy()));
    });
}

/// The owner's drop and the end of the last wait race each other and a
/// reader that lists and copies the resources: the reader's references
/// are taken while the resource is alive (`Resource`'s drop asserts, under
/// loom, that it is not listed when freed), and whichever goes last
/// unlists it.
#[test]
fn the_owner_and_the_last_wait_racing_a_reader_unlist_it_before_it_is_freed() {
    loom::model(|| {
        let reg = registry();
        let owner = Owner::new(Resource::new(Kind::Mutex, Location::caller(), reg));
        owner.exclusive.acquire(1, Location::caller(), 0);
        let w = WaitRecord::start(&owner, Waiter::of(2), None, Ask::Exclusive);
        let waiter = loom::thread::spawn(move || drop(w));
        let dropper = loom::thread::spawn(move || drop(owner));
        for r in reg.listed() {
            let copy = r.copy();
            assert!(copy.waits.len() <= 1);
        }
        waiter.join().unwrap();
        dropper.join().unwrap();
        assert!(reg.listed().is_empty());
        assert!(reg.is_empty());
    });
}

/// A first wait that starts as the owner goes (an owned acquire future
/// first polled after its lock was dropped) lists the resource again, and
/// its end unlists it.
#[test]
fn a_first_wait_racing_the_owners_drop_is_unlisted_by_its_end() {
    loom::model(|| {
        let reg = registry();
        let owner = Owner::new(Resource::new(Kind::Mutex, Location::caller(), reg));
        let resource = Arc::clone(&owner);
        let dropper = loom::thread::spawn(move || drop(owner));
        let w = WaitRecord::start(&resource, Waiter::of(2), None, Ask::Exclusive);
        assert!(!reg.is_empty());
        drop(w);
        dropper.join().unwrap();
        assert!(reg.listed().is_empty());
        assert!(reg.is_empty());
    });
}

/// A resource without an owner whose last `Arc` goes before its waits
/// end: the waits keep it alive (their record holds only its address),
/// and whichever ends last unlists it and then frees it, while a reader
/// lists and copies it.
#[test]
fn waits_without_an_owner_keep_their_resource_alive_until_the_last_ends() {
    loom::model(|| {
        let reg = registry();
        let m = mutex(reg);
        let w1 = WaitRecord::start(&m, Waiter::of(1), None, Ask::Exclusive);
        let w2 = WaitRecord::start(&m, Waiter::of(2), None, Ask::Exclusive);
        drop(m);
        let first = loom::thread::spawn(move || drop(w1));
        let second = loom::thread::spawn(move || drop(w2));
        for r in reg.listed() {
            assert!(r.copy().waits.len() <= 2);
        }
        first.join().unwrap();
        second.join().unwrap();
        assert!(reg.listed().is_empty());
        assert!(reg.is_empty());
    });
}

/// A join wait ends and another starts in the same slot, on another
/// thread, while a reader copies the registry's waits: the reader sees
/// each wait whole (its task with its own `.await`, target and spawn
/// site) or not at all, and only the second after its start.
#[test]
fn a_join_slot_is_only_ever_read_whole() {
    loom::model(|| {
        let reg = registry();
        let here = Location::caller();
        let there = Location::caller();
        let at = |task, awaiting| Waiter {
            task,
            awaiting,
            path: 0,
        };
        let first = JoinWait::start(reg, at(1, 10), 100, here).expect("a free join slot");
        let writer = loom::thread::spawn(move || {
            drop(first);
            JoinWait::start(reg, at(2, 20), 200, there)
        });
        let copies = reg.copies();
        assert!(copies.len() <= 1, "one slot, one wait at a time");
        for (_, c) in copies {
            let w = c.waits[0];
            let seen = (w.task, w.awaiting, c.target, c.created_at.line());
            assert!(
                seen == (1, 10, Some(100), here.line()) || seen == (2, 20, Some(200), there.line()),
                "{seen:?}"
            );
        }
        let second = writer.join().unwrap().expect("the freed slot");
        assert_eq!(reg.joins().len(), 1, "the same slot");
        let copies = reg.copies();
        assert_eq!(copies.len(), 1);
        assert_eq!(copies[0].1.waits[0].task, 2);
        drop(second);
        assert!(reg.copies().is_empty());
    });
}
