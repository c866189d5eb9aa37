//! Unit tests of the graph and the detector, on a registry of their own
//! and a made-up view of tasks.

use std::cell::Cell;
use std::collections::HashMap;
use std::panic::Location;
use std::sync::Arc;

use crate::waits::detect::{TaskView, Via, detect};
use crate::waits::join_wait::JoinWait;
use crate::waits::query::waiting_tasks;
use crate::waits::resource::{
    Ask, HoldSlot, Kind, Owner, Registry, Resource, SHARED_SLOTS, SharedPlace, SharedSlot,
    WaitRecord,
};
use crate::waits::waiter::Waiter;

/// Every task idle with no wakes, unless listed as busy; tokio tasks map
/// to the listed roots.
#[derive(Default, Clone)]
struct View {
    busy: Vec<u64>,
    roots: HashMap<u64, Vec<u64>>,
    /// `(task, awaiting)`: the task's frame is not suspended at that
    /// `.await` (see [`Waiter::awaiting`]).
    away: Vec<(u64, u64)>,
}

impl TaskView for View {
    fn idle(&self, task: u64) -> Option<u64> {
        (!self.busy.contains(&task)).then_some(0)
    }
    fn roots_of(&self, tokio_id: u64) -> Vec<u64> {
        self.roots.get(&tokio_id).cloned().unwrap_or_default()
    }
    fn name(&self, task: u64) -> Option<String> {
        Some(format!("t{task}"))
    }
    /// The ancestry is the process's business (`waiter::suspended_in`):
    /// the model names the waits that left by task and `.await`.
    fn awaits_at(&self, task: u64, awaiting: u64, _path: u64) -> bool {
        !self.away.contains(&(task, awaiting))
    }
}

fn registry() -> &'static Registry {
    Box::leak(Box::new(Registry::new()))
}

fn resource(reg: &'static Registry, kind: Kind) -> Arc<Resource> {
    Arc::new(Resource::new(kind, Location::caller(), reg))
}

fn at() -> &'static Location<'static> {
    Location::caller()
}

/// `(waiter, blocker)` of every edge of every deadlock.
fn pairs(found: &[crate::waits::detect::Found]) -> Vec<Vec<(u64, u64)>> {
    found
        .iter()
        .map(|d| d.edges.iter().map(|e| (e.waiter, e.blocker)).collect())
        .collect()
}

/// t1 holds a and waits for b; t2 holds b and waits for a.
fn inversion(reg: &'static Registry) -> (Arc<Resource>, Arc<Resource>, WaitRecord, WaitRecord) {
    let (a, b) = (resource(reg, Kind::Mutex), resource(reg, Kind::Mutex));
    a.exclusive.acquire(1, at(), 0);
    b.exclusive.acquire(2, at(), 0);
    let w1 = WaitRecord::start(&b, Waiter::of(1), Some(at()), Ask::Exclusive);
    let w2 = WaitRecord::start(&a, Waiter::of(2), Some(at()), Ask::Exclusive);
    (a, b, w1, w2)
}

#[test]
fn an_inversion_is_one_cycle_from_the_smallest_task() {
    let reg = registry();
    let _keep = inversion(reg);
    let found = detect(reg, |_| View::default());
    assert_eq!(pairs(&found), [vec![(1, 2), (2, 1)]]);
    assert!(matches!(found[0].edges[0].via, Via::Holds(h) if h.task == 2));
    assert_eq!(found[0].edges[0].waiter_name.as_deref(), Some("t1"));
}

/// Resources listed with no wait (locks contended once, whose owners
/// live) around an inversion: the readers skip them, and find it.
#[test]
fn idle_listed_resources_hide_no_deadlock() {
    let reg = registry();
    let idle: Vec<Owner> = (0..3)
        .map(|_| {
            let m = owned(reg, Kind::Mutex);
            drop(WaitRecord::start(
                &m,
                Waiter::of(9),
                Some(at()),
                Ask::Exclusive,
            ));
            m
        })
        .collect();
    assert_eq!((reg.listed().len(), reg.waited().len()), (3, 0));
    let (a, b, w1, w2) = inversion(reg);
    assert_eq!(reg.listed().len(), 5);
    let waited: Vec<*const Resource> = reg.waited().iter().map(Arc::as_ptr).collect();
    assert_eq!(waited, [Arc::as_ptr(&a), Arc::as_ptr(&b)]);
    let found = detect(reg, |_| View::default());
    assert_eq!(pairs(&found), [vec![(1, 2), (2, 1)]]);
    assert_eq!(
        waiting_tasks(reg)
            .keys()
            .copied()
            .collect::<std::collections::BTreeSet<_>>(),
        [1, 2].into()
    );
    drop((w1, w2, idle));
}

#[test]
fn a_busy_task_or_an_unknown_holder_frees_the_cycle() {
    let reg = registry();
    let _keep = inversion(reg);
    let view = View {
        busy: vec![2],
        ..View::default()
    };
    assert!(detect(reg, |_| view.clone()).is_empty());

    let reg = registry();
    let m = resource(reg, Kind::Mutex);
    m.exclusive.acquire(0, at(), 0);
    let _w = WaitRecord::start(&m, Waiter::of(1), Some(at()), Ask::Exclusive);
    assert!(
        detect(reg, |_| View::default()).is_empty(),
        "task 0 could let it go"
    );
}

#[test]
fn a_wait_that_ends_between_the_passes_is_not_reported() {
    let reg = registry();
    let (_a, b, w1, _w2) = inversion(reg);
    let calls = Cell::new(0);
    let wait = std::cell::RefCell::new(Some(w1));
    let found = detect(reg, |_| {
        calls.set(calls.get() + 1);
        if calls.get() == 2 {
            // Between the passes: task 1 stops waiting (cancelled)...
            drop(wait.borrow_mut().take());
            // ...and waits again, with a new generation.
            *wait.borrow_mut() = Some(WaitRecord::start(
                &b,
                Waiter::of(1),
                Some(at()),
                Ask::Exclusive,
            ));
        }
        View::default()
    });
    assert_eq!(calls.get(), 2);
    assert!(found.is_empty(), "the cycle was never whole at one instant");
    // Now it is.
    assert_eq!(pairs(&detect(reg, |_| View::default())).len(), 1);
}

#[test]
fn a_hold_that_changes_between_the_passes_is_not_reported() {
    let reg = registry();
    let (a, _b, _w1, _w2) = inversion(reg);
    let calls = Cell::new(0);
    let found = detect(reg, |_| {
        calls.set(calls.get() + 1);
        if calls.get() == 2 {
            a.exclusive.release();
            a.exclusive.acquire(1, at(), 0);
        }
        View::default()
    });
    assert!(found.is_empty());
}

#[test]
fn a_task_woken_between_the_passes_is_not_reported() {
    let reg = registry();
    let _keep = inversion(reg);
    let calls = Cell::new(0);
    let found = detect(reg, |_| {
        calls.set(calls.get() + 1);
        View {
            busy: if calls.get() == 2 { vec![1] } else { vec![] },
            ..View::default()
        }
    });
    assert!(found.is_empty());
}

#[test]
fn a_semaphore_waits_for_every_holder_of_permits() {
    let reg = registry();
    let s = resource(reg, Kind::Semaphore);
    let m = resource(reg, Kind::Mutex);
    s.hold_shared(2, at(), 1);
    let free = s.hold_shared(3, at(), 1);
    m.exclusive.acquire(1, at(), 0);
    let _ws = WaitRecord::start(&s, Waiter::of(1), Some(at()), Ask::Shared(1));
    let _wm = WaitRecord::start(&m, Waiter::of(2), Some(at()), Ask::Exclusive);
    // Task 3 runs: it could give its permit back.
    assert!(detect(reg, |_| View::default()).is_empty());
    s.release_shared(free);
    assert_eq!(
        pairs(&detect(reg, |_| View::default())),
        [vec![(1, 2), (2, 1)]]
    );
}

#[test]
fn a_reader_behind_a_waiting_writer_waits_for_it() {
    let reg = registry();
    let l = resource(reg, Kind::RwLock);
    l.hold_shared(1, at(), 1);
    let _w2 = WaitRecord::start(&l, Waiter::of(2), Some(at()), Ask::Exclusive);
    let _w1 = WaitRecord::start(&l, Waiter::of(1), Some(at()), Ask::Shared(1));
    let found = detect(reg, |_| View::default());
    // The cycle through the writer first, then the reader's own hold.
    assert_eq!(pairs(&found), [vec![(1, 2), (2, 1), (1, 1)]]);
    assert!(matches!(found[0].edges[0].via, Via::QueuedAhead(w) if w.task == 2));
}

#[test]
fn a_task_stuck_behind_a_deadlock_is_not_one_of_its_own() {
    let reg = registry();
    let (a, _b, _w1, _w2) = inversion(reg);
    let _w3 = WaitRecord::start(&a, Waiter::of(3), Some(at()), Ask::Exclusive);
    assert_eq!(
        pairs(&detect(reg, |_| View::default())),
        [vec![(1, 2), (2, 1)]]
    );
}

/// Task 1 holds `m` and queues for it again behind tasks `2..=n + 1`.
/// Each waiter is blocked by the holder and by the waiter directly ahead
/// of it only: one queued edge per waiter, not one per waiter ahead.
#[test]
fn a_waiter_is_queued_behind_the_waiter_directly_ahead_only() {
    for n in [4u64, 2_000] {
        let reg = registry();
        let m = resource(reg, Kind::Mutex);
        m.exclusive.acquire(1, at(), 0);
        let waits: Vec<WaitRecord> = (2..=n + 1)
            .chain([1])
            .map(|t| WaitRecord::start(&m, Waiter::of(t), Some(at()), Ask::Exclusive))
            .collect();
        let found = detect(reg, |_| View::default());
        assert_eq!(found.len(), 1);
        // Each of the n + 1 waits: the holder; all but the first: the
        // waiter ahead.
        assert_eq!(found[0].edges.len() as u64, 2 * n + 1);
        if n == 4 {
            // The cycle 1 -> 5 -> 1, then the rest by waiter.
            assert_eq!(
                pairs(&found),
                [vec![
                    (1, 5),
                    (5, 1),
                    (1, 1),
                    (2, 1),
                    (3, 1),
                    (3, 2),
                    (4, 1),
                    (4, 3),
                    (5, 4)
                ]]
            );
            assert!(matches!(found[0].edges[0].via, Via::QueuedAhead(w) if w.task == 5));
            assert!(matches!(found[0].edges[8].via, Via::QueuedAhead(w) if w.task == 4));
        }
        drop(waits);
    }
}

/// Behind the first waiter, a waiter of a resource with more than
/// `HOLDERS_NAMED_BEHIND` holders has no edges to them of its own: ten
/// tasks hold a permit each and then queue for one more behind 2,000
/// waiters, and all wait for each other, through 2,019 edges (the first
/// waiter's ten to the holders, and one a wait to the wait ahead), where
/// an edge from every wait to every holder made 22,109.
#[test]
fn waiters_behind_the_first_reach_many_holders_through_the_queue() {
    let reg = registry();
    let s = resource(reg, Kind::Semaphore);
    let holders: Vec<_> = (1..=10).map(|t| s.hold_shared(t, at(), 1)).collect();
    let waits: Vec<WaitRecord> = (11..=2_010)
        .chain(1..=10)
        .map(|t| WaitRecord::start(&s, Waiter::of(t), Some(at()), Ask::Shared(1)))
        .collect();
    let found = detect(reg, |_| View::default());
    assert_eq!(found.len(), 1);
    let members: std::collections::BTreeSet<u64> =
        found[0].edges.iter().map(|e| e.waiter).collect();
    assert_eq!(members.len(), 2_010);
    assert_eq!(found[0].edges.len(), 2_019);
    let first_waiter_holds = found[0]
        .edges
        .iter()
        .filter(|e| e.waiter == 11 && matches!(e.via, Via::Holds(_)))
        .count();
    assert_eq!(first_waiter_holds, 10);
    drop(waits);
    for place in holders {
        s.release_shared(place);
    }
}

/// The unknown task queued anywhere ahead frees every waiter behind it,
/// directly ahead or not: task 3 is queued behind 4, which is behind task
/// 0. Once task 0 stops waiting, all four wait for each other: 1 holds `m`
/// and waits for `m2`, held by 3, which is queued for `m` behind 4, which
/// is behind 2.
#[test]
fn an_unknown_waiter_ahead_frees_the_queue_behind_it() {
    let reg = registry();
    let (m, m2) = (resource(reg, Kind::Mutex), resource(reg, Kind::Mutex));
    m.exclusive.acquire(1, at(), 0);
    m2.exclusive.acquire(3, at(), 0);
    let _w1 = WaitRecord::start(&m2, Waiter::of(1), Some(at()), Ask::Exclusive);
    let _w2 = WaitRecord::start(&m, Waiter::of(2), Some(at()), Ask::Exclusive);
    let w0 = WaitRecord::start(&m, Waiter::of(0), Some(at()), Ask::Exclusive);
    let _w4 = WaitRecord::start(&m, Waiter::of(4), Some(at()), Ask::Exclusive);
    let _w3 = WaitRecord::start(&m, Waiter::of(3), Some(at()), Ask::Exclusive);
    assert!(
        detect(reg, |_| View::default()).is_empty(),
        "task 0 could take `m` and let it go"
    );
    drop(w0);
    // 4 is now directly ahead of 3, and directly behind 2.
    assert_eq!(
        pairs(&detect(reg, |_| View::default())),
        [vec![(1, 3), (3, 1), (2, 1), (3, 4), (4, 1), (4, 2)]]
    );
}

/// A task queued twice for one `Semaphore` (a `join!` of two acquires),
/// with task 2 between its waits, and holding its only permit: its second
/// wait is behind 2, which is behind its first.
#[test]
fn a_task_queued_twice_reaches_itself_through_the_waiter_between() {
    let reg = registry();
    let s = resource(reg, Kind::Semaphore);
    s.hold_shared(1, at(), 1);
    let _first = WaitRecord::start(&s, Waiter::of(1), Some(at()), Ask::Shared(1));
    let _w2 = WaitRecord::start(&s, Waiter::of(2), Some(at()), Ask::Shared(1));
    let _second = WaitRecord::start(&s, Waiter::of(1), Some(at()), Ask::Shared(1));
    // The cycle through 2, then by waiter and wait: 1's first wait, its
    // second, and 2's queued edge.
    assert_eq!(
        pairs(&detect(reg, |_| View::default())),
        [vec![(1, 2), (2, 1), (1, 1), (1, 1), (2, 1)]]
    );
}

#[test]
fn a_join_handle_waits_for_every_root_of_its_task() {
    let reg = registry();
    let _w1 = JoinWait::start(reg, Waiter::of(1), 100, at()).expect("a free join slot");
    let _w2 = JoinWait::start(reg, Waiter::of(2), 200, at()).expect("a free join slot");
    let mut view = View::default();
    view.roots.insert(100, vec![2, 5]);
    view.roots.insert(200, vec![1]);
    // Root 5 of tokio task 100 is not waiting.
    assert!(detect(reg, |_| view.clone()).is_empty());
    view.roots.insert(100, vec![2]);
    let found = detect(reg, |_| view.clone());
    assert_eq!(pairs(&found), [vec![(1, 2), (2, 1)]]);
    let targets: Vec<(Kind, Option<u64>)> = found[0]
        .edges
        .iter()
        .map(|e| (e.resource.kind, e.resource.target))
        .collect();
    assert_eq!(
        targets,
        [(Kind::JoinHandle, Some(100)), (Kind::JoinHandle, Some(200))]
    );
    // No known root: nobody known could end it.
    assert!(detect(reg, |_| View::default()).is_empty());
}

/// A join wait recorded at an `.await` counts only while its waiter is
/// suspended there: once the waiter went on (a handle raced in `select!`
/// and kept), the cycle through that wait is none. One recorded at no
/// known `.await` always counts.
#[test]
fn a_join_wait_counts_only_while_its_waiter_is_at_its_await() {
    let reg = registry();
    let waiter = Waiter {
        task: 1,
        awaiting: 7,
        path: 0,
    };
    let _w1 = JoinWait::start(reg, waiter, 100, at()).expect("a free join slot");
    let _w2 = JoinWait::start(reg, Waiter::of(2), 200, at()).expect("a free join slot");
    let mut view = View::default();
    view.roots.insert(100, vec![2]);
    view.roots.insert(200, vec![1]);
    let found = detect(reg, |_| view.clone());
    assert_eq!(pairs(&found), [vec![(1, 2), (2, 1)]]);
    assert_eq!(found[0].edges[0].wait.awaiting, 7);
    view.away.push((1, 7));
    assert!(detect(reg, |_| view.clone()).is_empty());
    // Task 2's wait has no `.await` to leave.
    view.away = vec![(1, 8), (2, 0)];
    assert_eq!(
        pairs(&detect(reg, |_| view.clone())),
        [vec![(1, 2), (2, 1)]]
    );
}

/// Join waits sit in slots of the registry's join arena, not in listed
/// resources: readers copy each as a `JoinHandle` resource with its one
/// wait, in order of creation among the listed resources; its end frees
/// the slot for the next join wait.
#[test]
fn join_waits_read_in_order_of_creation_and_free_their_slot() {
    let reg = registry();
    assert!(reg.is_empty());
    let a = resource(reg, Kind::Mutex);
    let j1 = JoinWait::start(reg, Waiter::of(7), 100, at()).expect("a free join slot");
    let _wa = WaitRecord::start(&a, Waiter::of(8), Some(at()), Ask::Exclusive);
    let spawned_at = at();
    let j2 = JoinWait::start(reg, Waiter::of(9), 200, spawned_at).expect("a free join slot");
    assert!(!reg.is_empty());
    assert_eq!(reg.listed().len(), 1, "join waits are not listed");
    let seen: Vec<(Kind, u64)> = reg
        .copies()
        .iter()
        .map(|(_, c)| (c.kind, c.waits[0].task))
        .collect();
    // `a` was made before either join wait started.
    assert_eq!(
        seen,
        [
            (Kind::Mutex, 8),
            (Kind::JoinHandle, 7),
            (Kind::JoinHandle, 9)
        ]
    );
    let copies = reg.copies();
    let (_, c) = &copies[2];
    assert_eq!(c.target, Some(200));
    assert!(std::ptr::eq(c.created_at, spawned_at));
    assert_eq!(c.waits[0].ask, Ask::Finish);
    assert_eq!(c.waits[0].at, None);
    assert_eq!(c.waits[0].generation, c.key);
    assert!(c.exclusive.is_none() && c.holds.is_empty());
    assert_eq!(reg.joins().len(), 2);
    drop(j1);
    let tasks = |reg: &Registry| -> Vec<u64> {
        reg.copies().iter().map(|(_, c)| c.waits[0].task).collect()
    };
    assert_eq!(tasks(reg), [8, 9]);
    let j3 = JoinWait::start(reg, Waiter::of(10), 300, at()).expect("a free join slot");
    assert_eq!(reg.joins().len(), 2, "the freed slot was reused");
    assert_eq!(tasks(reg), [8, 9, 10]);
    drop((j2, j3));
    assert_eq!(tasks(reg), [8]);
}

/// A join wait that ended between the passes, and another in its slot
/// with the same task, target and spawn site, is a new wait: the second
/// pass does not confirm the first pass's deadlock.
#[test]
fn a_join_wait_replaced_between_the_passes_is_not_reported() {
    let reg = registry();
    let spawned_at = at();
    let w1 = std::cell::RefCell::new(JoinWait::start(reg, Waiter::of(1), 100, spawned_at));
    let _w2 = JoinWait::start(reg, Waiter::of(2), 200, spawned_at).expect("a free join slot");
    let mut view = View::default();
    view.roots.insert(100, vec![2]);
    view.roots.insert(200, vec![1]);
    let passes = Cell::new(0);
    let found = detect(reg, |_| {
        passes.set(passes.get() + 1);
        if passes.get() == 2 {
            let mut w1 = w1.borrow_mut();
            *w1 = None;
            *w1 = JoinWait::start(reg, Waiter::of(1), 100, spawned_at);
            assert!(w1.is_some());
        }
        view.clone()
    });
    assert_eq!(passes.get(), 2, "the first pass found the deadlock");
    assert!(found.is_empty(), "{:?}", pairs(&found));
    // Left alone, the same waits are reported.
    assert_eq!(
        pairs(&detect(reg, |_| view.clone())),
        [vec![(1, 2), (2, 1)]]
    );
}

/// With every join slot taken, a join wait goes unrecorded (and the
/// handle still works); a slot freed is taken by the next.
#[test]
fn a_join_wait_past_the_last_slot_goes_unrecorded() {
    let reg = registry();
    let capacity = reg.joins().capacity;
    let waits: Vec<JoinWait> = (0..capacity as u64)
        .map(|t| JoinWait::start(reg, Waiter::of(t + 1), 1, at()).expect("a free join slot"))
        .collect();
    assert!(JoinWait::start(reg, Waiter::of(0), 1, at()).is_none());
    assert_eq!(reg.copies().len(), capacity);
    drop(waits);
    assert!(reg.copies().is_empty());
    assert!(JoinWait::start(reg, Waiter::of(1), 1, at()).is_some());
    assert_eq!(reg.joins().len(), capacity, "no slot past the capacity");
}

#[test]
fn resources_leave_the_registry_with_their_last_wait() {
    let reg = registry();
    let (_a, _b, w1, w2) = inversion(reg);
    assert_eq!(reg.listed().len(), 2);
    drop(w1);
    drop(w2);
    assert!(reg.is_empty());
    assert!(detect(reg, |_| View::default()).is_empty());
}

/// The in-process readers go through the listed resources in order of
/// creation, whatever the order of their first waits; debuggers find each
/// in the slot of its index while it has waits, and indices are reused.
#[test]
fn listed_resources_read_in_order_of_creation_and_sit_in_slots_for_debuggers() {
    let reg = registry();
    let (a, b, c) = (
        resource(reg, Kind::Mutex),
        resource(reg, Kind::RwLock),
        resource(reg, Kind::Semaphore),
    );
    let keys = |reg: &Registry| reg.listed().iter().map(|r| r.key).collect::<Vec<_>>();
    let ptr = |r: &Arc<Resource>| Arc::as_ptr(r);
    let wc = WaitRecord::start(&c, Waiter::of(1), Some(at()), Ask::Shared(1));
    let wa = WaitRecord::start(&a, Waiter::of(2), Some(at()), Ask::Exclusive);
    let wa2 = WaitRecord::start(&a, Waiter::of(4), Some(at()), Ask::Exclusive);
    assert_eq!(keys(reg), [a.key, c.key]);
    assert_eq!(reg.slots(), [ptr(&c), ptr(&a)], "one slot a resource");
    drop(wc);
    assert_eq!(reg.slots(), [std::ptr::null(), ptr(&a)]);
    let wb = WaitRecord::start(&b, Waiter::of(3), Some(at()), Ask::Exclusive);
    assert_eq!(reg.slots(), [ptr(&b), ptr(&a)], "index 0 reused");
    assert_eq!(keys(reg), [a.key, b.key]);
    drop(wa);
    assert_eq!(reg.slots(), [ptr(&b), ptr(&a)], "a still has a wait");
    drop(wa2);
    drop(wb);
    assert_eq!(reg.slots(), [std::ptr::null(); 2]);
    assert!(reg.is_empty());
}

fn owned(reg: &'static Registry, kind: Kind) -> Owner {
    Owner::new(Resource::new(kind, Location::caller(), reg))
}

/// An owned resource stays listed from its first wait until its owner is
/// dropped, in the same slot at each wait, and shows nothing while it has
/// no wait; the owner's drop frees the slot for the next resource.
#[test]
fn an_owned_resource_stays_listed_until_its_owner_goes_and_shows_nothing_meanwhile() {
    let reg = registry();
    let m = owned(reg, Kind::Mutex);
    let ptr = Arc::as_ptr(&m);
    m.exclusive.acquire(1, at(), 0);
    for waiter in [2, 3] {
        let w = WaitRecord::start(&m, Waiter::of(waiter), Some(at()), Ask::Exclusive);
        assert!(!reg.is_empty());
        assert_eq!(
            waiting_tasks(reg).keys().copied().collect::<Vec<_>>(),
            [waiter]
        );
        assert_eq!(reg.slots(), [ptr]);
        assert_eq!(reg.waited().len(), 1);
        drop(w);
        // Listed, in the same slot, and invisible.
        assert_eq!(reg.slots(), [ptr], "no slot more per wait");
        assert_eq!(reg.listed().len(), 1);
        assert!(!reg.is_empty(), "the readers' fast path is for none listed");
        assert!(reg.waited().is_empty(), "the readers skip it");
        assert!(waiting_tasks(reg).is_empty());
        assert!(detect(reg, |_| View::default()).is_empty());
    }
    drop(m);
    assert_eq!(reg.slots(), [std::ptr::null()], "the owner's drop frees it");
    assert!(reg.listed().is_empty());
    assert!(reg.is_empty());
    let s = owned(reg, Kind::Semaphore);
    let w = WaitRecord::start(&s, Waiter::of(4), Some(at()), Ask::Shared(1));
    assert_eq!(reg.slots(), [Arc::as_ptr(&s)], "slot 0 reused");
    drop(w);
    drop(s);
    assert_eq!(reg.slots(), [std::ptr::null()]);
}

/// An owner dropped while waits are left (an owned acquire future can
/// outlive its lock) leaves the unlisting to the last of them.
#[test]
fn the_last_wait_unlists_a_resource_whose_owner_went_first() {
    let reg = registry();
    let m = owned(reg, Kind::Mutex);
    let resource = Arc::clone(&m);
    m.exclusive.acquire(1, at(), 0);
    let w2 = WaitRecord::start(&m, Waiter::of(2), Some(at()), Ask::Exclusive);
    let w3 = WaitRecord::start(&m, Waiter::of(3), Some(at()), Ask::Exclusive);
    drop(m);
    assert_eq!(waiting_tasks(reg).len(), 2, "its waits still show");
    drop(w2);
    assert!(reg.lists(Arc::as_ptr(&resource)));
    drop(w3);
    assert!(!reg.lists(Arc::as_ptr(&resource)));
    assert_eq!(reg.slots(), [std::ptr::null()]);
    assert!(reg.is_empty());
    // Freed unlisted (debug builds check it in `Resource`'s drop).
    assert_eq!(Arc::strong_count(&resource), 1);
}

/// A wait record holds only its resource's address: the waits keep the
/// resource alive once nothing else does (its owner gone, or it never had
/// one), and the last of them to end unlists it and frees it.
#[test]
fn the_waits_keep_their_resource_alive_and_the_last_frees_it() {
    let reg = registry();
    let m = owned(reg, Kind::Mutex);
    let weak = Arc::downgrade(&m);
    let w2 = WaitRecord::start(&m, Waiter::of(2), Some(at()), Ask::Exclusive);
    let w3 = WaitRecord::start(&m, Waiter::of(3), Some(at()), Ask::Exclusive);
    drop(m);
    assert_eq!(
        weak.strong_count(),
        1,
        "the owner's reference, left to the waits"
    );
    drop(w3);
    assert_eq!(waiting_tasks(reg).keys().copied().collect::<Vec<_>>(), [2]);
    drop(w2);
    assert_eq!(weak.strong_count(), 0, "freed by the last wait's end");
    assert!(reg.is_empty());

    let unowned = resource(reg, Kind::Semaphore);
    let weak = Arc::downgrade(&unowned);
    let w = WaitRecord::start(&unowned, Waiter::of(4), Some(at()), Ask::Shared(1));
    drop(unowned);
    assert_eq!(reg.listed()[0].copy().waits.len(), 1);
    drop(w);
    assert_eq!(weak.strong_count(), 0);
    assert!(reg.is_empty());
}

/// A wait record that is never dropped (a leaked acquire future) keeps
/// its resource listed, and alive, after the owner's drop: readers read
/// it as it is, a wait that never ends.
#[test]
fn a_leaked_wait_keeps_its_resource_alive_and_listed() {
    let reg = registry();
    let m = owned(reg, Kind::Mutex);
    let ptr = Arc::as_ptr(&m);
    m.exclusive.acquire(1, at(), 0);
    std::mem::forget(WaitRecord::start(
        &m,
        Waiter::of(2),
        Some(at()),
        Ask::Exclusive,
    ));
    drop(m);
    assert_eq!(reg.slots(), [ptr]);
    let listed = reg.listed();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].copy().waits.len(), 1);
    assert_eq!(waiting_tasks(reg)[&2].holders[0].task, 1);
    assert!(!reg.is_empty());
}

#[test]
fn the_dump_query_names_the_holders() {
    let reg = registry();
    let m = resource(reg, Kind::Mutex);
    let held_at = at();
    m.exclusive.acquire(7, held_at, 40);
    let wait_at = at();
    let _w = WaitRecord::start(&m, Waiter::of(9), Some(wait_at), Ask::Exclusive);
    let w = &waiting_tasks(reg)[&9];
    assert_eq!(
        (w.kind, w.waiting_at, w.permits),
        (Kind::Mutex, Some(wait_at), 1)
    );
    assert_eq!(w.holders.len(), 1);
    assert_eq!(
        (
            w.holders[0].task,
            w.holders[0].acquired_at,
            w.holders[0].since_ms
        ),
        (7, held_at, 40)
    );
    assert_eq!(crate::waits::query::waiting_for(reg, 7), None);
}

#[test]
fn a_hold_slot_reads_whole_holds_only() {
    let slot = HoldSlot::new();
    assert_eq!(slot.read(), None);
    let here = at();
    let generation = slot.acquire(4, here, 12);
    let h = slot.read().unwrap();
    assert_eq!(
        (h.task, h.at, h.since_ms, h.generation),
        (4, here, 12, generation)
    );
    slot.release();
    assert_eq!((slot.read(), slot.generation()), (None, 0));
    assert_ne!(
        slot.acquire(4, here, 12),
        generation,
        "generations are never reused"
    );
}

/// `(task, permits)` of every shared hold a reader sees, in its order.
fn shared_holders(r: &Resource) -> Vec<(u64, u32)> {
    r.copy().holds.iter().map(|h| (h.task, h.permits)).collect()
}

#[test]
fn shared_holds_fill_the_slots_then_the_list_and_read_in_that_order() {
    let reg = registry();
    let s = resource(reg, Kind::Semaphore);
    let places: Vec<SharedPlace> = (1..=6).map(|t| s.hold_shared(t, at(), t as u32)).collect();
    let slots: Vec<SharedPlace> = (0..SHARED_SLOTS).map(SharedPlace::Slot).collect();
    assert_eq!(places[..4], slots);
    assert!(
        matches!(
            places[4..],
            [SharedPlace::Listed(_), SharedPlace::Listed(_)]
        ),
        "{places:?}"
    );
    assert_eq!(
        shared_holders(&s),
        [(1, 1), (2, 2), (3, 3), (4, 4), (5, 5), (6, 6)]
    );
    let listed = s.view.holds_len.load(std::sync::atomic::Ordering::Relaxed);
    assert_eq!(
        listed, 2,
        "only the last two are in the list debuggers read"
    );

    // A freed slot is taken by the next hold; resizes keep each in place.
    s.release_shared(places[1]);
    s.release_shared(places[4]);
    assert_eq!(shared_holders(&s), [(1, 1), (3, 3), (4, 4), (6, 6)]);
    assert_eq!(s.hold_shared(7, at(), 1), SharedPlace::Slot(1));
    s.resize_shared(places[0], 9);
    s.resize_shared(places[5], 8);
    assert_eq!(shared_holders(&s), [(1, 9), (7, 1), (3, 3), (4, 4), (6, 8)]);
    for place in [places[0], places[2], places[3], places[5], slots[1]] {
        s.release_shared(place);
    }
    assert_eq!(shared_holders(&s), []);
}

#[test]
fn only_the_kinds_with_shared_holds_carry_shared_slots() {
    let reg = registry();
    let with = |kind| resource(reg, kind).shared.is_some();
    assert!(with(Kind::RwLock) && with(Kind::Semaphore));
    assert!(!with(Kind::Mutex) && !with(Kind::JoinHandle));
    // What the README and BENCHMARKS.md say the slots cost.
    assert_eq!(size_of::<[SharedSlot; SHARED_SLOTS]>(), 192);
    // Without slots, every shared hold goes to the list (not a path the
    // wrappers take, but a safe one).
    let m = resource(reg, Kind::Mutex);
    let place = m.hold_shared(1, at(), 1);
    assert!(matches!(place, SharedPlace::Listed(_)));
    assert_eq!(shared_holders(&m), [(1, 1)]);
    m.release_shared(place);
    m.release_shared(SharedPlace::Slot(0));
    assert_eq!(shared_holders(&m), []);
}

#[test]
fn the_second_pass_sees_every_change_of_a_shared_slot() {
    let reg = registry();
    let l = resource(reg, Kind::RwLock);
    let seen = l.copy();
    assert!(l.unchanged(&seen));
    // A hold that began and ended between the passes: the slot reads free
    // again, but it is not the state the first pass saw throughout.
    let place = l.hold_shared(1, at(), 1);
    l.release_shared(place);
    assert_eq!(shared_holders(&l), []);
    assert!(!l.unchanged(&seen), "a hold began and ended in between");

    let place = l.hold_shared(1, at(), 1);
    let seen = l.copy();
    assert!(l.unchanged(&seen));
    l.resize_shared(place, 2);
    assert!(!l.unchanged(&seen), "resized");
    let seen = l.copy();
    assert!(l.unchanged(&seen));
    l.release_shared(place);
    assert!(!l.unchanged(&seen), "ended");
}

/// A reader holds `l`'s slot 0 and waits for `m`, held by the writer that
/// waits for `l`: a deadlock, unless another holder of `l` exists that
/// the readers cannot read (a holder preempted between its claim of slot
/// 1 and its writes), which could let `l` go.
#[test]
fn a_slot_caught_mid_claim_blocks_any_report_through_it_and_hides_no_other_holder() {
    let reg = registry();
    let l = resource(reg, Kind::RwLock);
    let m = resource(reg, Kind::Mutex);
    assert_eq!(l.hold_shared(2, at(), 1), SharedPlace::Slot(0));
    assert!(l.claim_only(1));
    assert!(!l.claim_only(1), "a claimed slot is nobody else's");
    m.exclusive.acquire(1, at(), 0);
    let _wl = WaitRecord::start(&l, Waiter::of(1), Some(at()), Ask::Exclusive);
    let _wm = WaitRecord::start(&m, Waiter::of(2), Some(at()), Ask::Exclusive);

    let copy = l.copy();
    assert!(copy.unsettled);
    assert_eq!(shared_holders(&l), [(2, 1)]);
    assert!(detect(reg, |_| View::default()).is_empty());
    let holders: Vec<u64> = waiting_tasks(reg)[&1]
        .holders
        .iter()
        .map(|h| h.task)
        .collect();
    assert_eq!(holders, [2]);
    // The next hold takes the next free slot.
    let next = l.hold_shared(3, at(), 1);
    assert_eq!(next, SharedPlace::Slot(2));
    l.release_shared(next);

    l.release_shared(SharedPlace::Slot(1));
    assert!(!l.copy().unsettled);
    assert_eq!(
        pairs(&detect(reg, |_| View::default())),
        [vec![(1, 2), (2, 1)]]
    );
}

/// A thread keeps the join slot it freed last for its next join wait, and
/// gives it back when it ends: a process of short-lived threads that each
/// awaited a handle once needs one slot, not one per thread.
#[test]
fn a_thread_gives_its_spare_join_slot_back_when_it_ends() {
    let reg = registry();
    for _ in 0..3 {
        std::thread::spawn(move || {
            let w = JoinWait::start(reg, Waiter::of(1), 100, at()).expect("a free join slot");
            drop(w);
            // Kept as this thread's spare, and taken again.
            let w = JoinWait::start(reg, Waiter::of(1), 100, at()).expect("a free join slot");
            drop(w);
        })
        .join()
        .unwrap();
        assert_eq!(reg.joins().len(), 1, "the same slot every time");
    }
    assert!(reg.copies().is_empty());
}
