//! Loom models of the published stack: copies racing the writer, foreign
//! retirements, resets and the end of a task.

use crate::record::current::Active;
use crate::shim::Ordering;
use crate::task::TaskState::{Idle, Running, Scheduled};
use crate::task::loom_models::{
    CHILD, OTHER, ROOT, bounded_model, end_poll, enter_child, frame, leave_child, start_poll, task,
    view,
};
use crate::task::{end, place, relink};

/// A reader copying while the writer polls a task, gives a child a
/// slot, runs it, moves it to an `.await`, runs the root again and
/// frees the child, never gets a mix of two moments: state, frames and
/// running marks are always those of one instant of the poll.
#[test]
fn a_copy_is_one_instant_of_a_poll() {
    loom::model(|| {
        let t = task(&ROOT, 1);
        let child = frame(&CHILD);
        let writer = loom::thread::spawn(move || {
            let a = Active::new();
            let seen = start_poll(t, &a);
            let restore = enter_child(child, &a);
            leave_child(&a, restore);
            relink::unlink(child.place.swap(0, Ordering::Relaxed), Some(&a));
            end_poll(t, &a, seen);
        });
        let (r, c) = (ROOT.id(), CHILD.id());
        if let Some((id, state, frames)) = view(t) {
            assert_eq!(id, 1);
            // (state, frames as (depth, site, running)).
            type Frames<'a> = &'a [(u32, u32, bool)];
            let allowed: &[(_, Frames)] = &[
                (Scheduled, &[(0, r, false)]),
                (Running, &[(0, r, false)]),
                (Running, &[(0, r, true)]),
                (Running, &[(0, r, true), (1, c, false)]),
                (Running, &[(0, r, true), (1, c, true)]),
                (Idle, &[(0, r, false)]),
            ];
            assert!(
                allowed.contains(&(state, &frames[..])),
                "torn copy: {state:?} {frames:?}"
            );
        }
        writer.join().unwrap();
    });
}

/// Places `child` under the root of `t` with a whole poll on this
/// thread, and leaves the task idle.
fn place_child(t: crate::task::loom_models::Task, child: &crate::record::frame::AsyncStackFrame) {
    let a = Active::new();
    let seen = start_poll(t, &a);
    let restore = enter_child(child, &a);
    leave_child(&a, restore);
    end_poll(t, &a, seen);
}

/// A frame dropped on another thread leaves its task's tree at once,
/// whatever the writer does meanwhile (here: collecting retirements at
/// the start of a poll), and a copy is never torn by it.
#[test]
fn a_frame_retired_by_another_thread_leaves_at_once() {
    loom::model(|| {
        let t = task(&ROOT, 1);
        let child = frame(&CHILD);
        place_child(t, child);
        let p = child.place.swap(0, Ordering::Relaxed);
        let dropper = loom::thread::spawn(move || relink::unlink(p, None));
        let reader = loom::thread::spawn(move || view(t));
        t.record.collect_foreign();
        let (r, c) = (ROOT.id(), CHILD.id());
        if let Some((_, _, frames)) = reader.join().unwrap() {
            assert!(
                frames == [(0, r, false), (1, c, false)] || frames == [(0, r, false)],
                "{frames:?}"
            );
        }
        dropper.join().unwrap();
        assert_eq!(view(t).unwrap().2, [(0, r, false)]);
        t.record.collect_foreign();
        assert_eq!(view(t).unwrap().2, [(0, r, false)]);
        assert_eq!(t.record.meta().top, 1, "the slot is free again");
    });
}

/// A task that ends while a reader copies its non-empty stack, and a
/// new task that takes the same record, are never mixed in one copy.
#[test]
fn a_reset_racing_a_copy_never_mixes_two_tasks() {
    bounded_model(2, || {
        let t = task(&ROOT, 1);
        let child = frame(&CHILD);
        place_child(t, child);
        let index = t.index;
        let ender = loom::thread::spawn(move || {
            end::end_task(place::root(t.key));
            let next = task(&OTHER, 2);
            assert_eq!(next.index, index, "the freed record is reused");
        });
        let (r, c, o) = (ROOT.id(), CHILD.id(), OTHER.id());
        if let Some((id, _, frames)) = view(t) {
            match id {
                1 => assert_eq!(frames, [(0, r, false), (1, c, false)]),
                2 => assert_eq!(frames, [(0, o, false)]),
                _ => panic!("task {id}"),
            }
        }
        ender.join().unwrap();
    });
}

/// A task that ends with no frame but its root closes its incarnation
/// with a store (see `close_incarnation`): a reader copying it, and the
/// next task that takes the record, are still never mixed.
#[test]
fn a_root_only_task_ending_under_a_copy_is_never_mixed_with_the_next() {
    bounded_model(2, || {
        let t = task(&ROOT, 1);
        let index = t.index;
        let ender = loom::thread::spawn(move || {
            end::end_task(place::root(t.key));
            let next = task(&OTHER, 2);
            assert_eq!(next.index, index, "the freed record is reused");
        });
        let (r, o) = (ROOT.id(), OTHER.id());
        if let Some((id, _, frames)) = view(t) {
            match id {
                1 => assert_eq!(frames, [(0, r, false)]),
                2 => assert_eq!(frames, [(0, o, false)]),
                _ => panic!("task {id}"),
            }
        }
        ender.join().unwrap();
    });
}

/// A task ends on one thread while one of its frames is dropped on
/// another: the retirement lands in the ended task or nowhere, never in
/// the next task of the record.
#[test]
fn a_retirement_racing_the_end_of_a_task_never_reaches_the_next() {
    bounded_model(2, || {
        let t = task(&ROOT, 1);
        let child = frame(&CHILD);
        place_child(t, child);
        let p = child.place.swap(0, Ordering::Relaxed);
        let dropper = loom::thread::spawn(move || relink::unlink(p, None));
        end::end_task(place::root(t.key));
        let next = task(&OTHER, 2);
        dropper.join().unwrap();
        next.record.collect_foreign();
        assert_eq!(view(next).unwrap().2, [(0, OTHER.id(), false)]);
        let m = next.record.meta();
        assert_eq!((m.top, m.hidden), (1, 0), "{m:?}");
    });
}

/// A frame of one task polled by another task on another thread (a
/// `Shared` future) moves from the first tree to the second: each copy
/// shows it in one place or the other, never torn, and the first task
/// no longer shows it once the move is done, before it polls again.
#[test]
fn a_frame_relinked_into_another_task_moves_whole() {
    loom::model(|| {
        let ta = task(&ROOT, 1);
        let tb = task(&OTHER, 2);
        let shared = frame(&CHILD);
        place_child(ta, shared);
        let mover = loom::thread::spawn(move || place_child(tb, shared));
        let (r, c, o) = (ROOT.id(), CHILD.id(), OTHER.id());
        if let Some((_, _, frames)) = view(ta) {
            assert!(
                frames == [(0, r, false), (1, c, false)] || frames == [(0, r, false)],
                "{frames:?}"
            );
        }
        mover.join().unwrap();
        assert_eq!(view(ta).unwrap().2, [(0, r, false)]);
        assert_eq!(view(tb).unwrap().2, [(0, o, false), (1, c, false)]);
        assert_eq!(place::index(shared.place.load(Ordering::Relaxed)), tb.index);
    });
}

/// A task registered at spawn (a tokio helper's) whose root takes it over
/// and polls it while a reader copies it: the reader sees it without
/// frames and never polled, or with its root, in a state of one instant;
/// never a root half placed.
#[test]
fn a_task_taken_over_by_its_root_is_copied_whole() {
    bounded_model(2, || {
        let (pre, index) = crate::task::loom_models::preregistered(1);
        let record = crate::task::registry::record(index).unwrap();
        let root = frame(&ROOT);
        let writer = loom::thread::spawn(move || {
            let cx = std::task::Context::from_waker(std::task::Waker::noop());
            let p = crate::task::root::adopt(root, &cx, pre).expect("not taken yet");
            assert_eq!(p, pre);
            let t = crate::task::loom_models::Task {
                index,
                record,
                key: place::key_of(pre),
                root,
            };
            let a = Active::new();
            let seen = start_poll(t, &a);
            end_poll(t, &a, seen);
        });
        let t = crate::task::loom_models::Task {
            index,
            record,
            key: place::key_of(pre),
            root,
        };
        let r = ROOT.id();
        if let Some((id, state, frames)) = view(t) {
            assert_eq!(id, 1);
            type Frames<'a> = &'a [(u32, u32, bool)];
            let allowed: &[(_, Frames)] = &[
                (Scheduled, &[]),
                (Scheduled, &[(0, r, false)]),
                (Running, &[(0, r, false)]),
                (Running, &[(0, r, true)]),
                (Idle, &[(0, r, false)]),
            ];
            assert!(
                allowed.contains(&(state, &frames[..])),
                "torn copy: {state:?} {frames:?}"
            );
        }
        writer.join().unwrap();
    });
}

/// A task registered at spawn and dropped unpolled ends once, whether a
/// reader copies it meanwhile or not: the reader sees it whole or not at
/// all, and the record is recycled.
#[test]
fn a_task_dropped_before_its_root_ran_ends_once_under_a_copy() {
    bounded_model(2, || {
        let (pre, index) = crate::task::loom_models::preregistered(1);
        let record = crate::task::registry::record(index).unwrap();
        let ender = loom::thread::spawn(move || {
            assert_eq!(crate::task::root::end_unadopted(pre), 0, "no parent");
            // Ended already: a second call does nothing.
            crate::task::root::end_unadopted(pre);
        });
        let t = crate::task::loom_models::Task {
            index,
            record,
            key: place::key_of(pre),
            root: frame(&ROOT),
        };
        if let Some((id, state, frames)) = view(t) {
            assert_eq!((id, state, frames.len()), (1, Scheduled, 0));
        }
        ender.join().unwrap();
        assert_eq!(record.id.load(Ordering::Acquire), 0);
        assert_eq!(record.refs.load(Ordering::Acquire), 0, "recycled once");
    });
}
