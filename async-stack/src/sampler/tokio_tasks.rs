//! **Tokio tasks**: the traced roots polled inside one plain
//! `tokio::spawn` sampled as one task (feature `tokio`; see
//! [`crate::task::tokio_task`]), what dumps call one entry.
//!
//! `tokio::spawn(async { tokio::join!(left(), right()) })` polls two task
//! roots, `left` and `right`, inside one tokio task. Each has a record of
//! its own, and each is filed under the tokio task's id at its first poll.
//! The sampler shows them as one task:
//!
//! - the tokio task's **roots** are the live records filed under its id,
//!   in the order of their first poll (`TokioTask::order`); a root filed
//!   under none is a task of its own, as before;
//! - the task's **id** is its first root's task id, its **name** and
//!   **spawn location** those of the first root that has one, and its
//!   **root function** (the group of a task with neither) the first
//!   root's: so every root's samples fall in the group of the first;
//! - a tick samples it once: if a root runs, the path to the frame that
//!   root polls (on-CPU); else one off-CPU stack per pending leaf of every
//!   root, in root order, the tick's weight shared among them, as a
//!   `join!` inside one root always was.
//!
//! # Per tick
//!
//! The tick's scan hands every record whose `spawn` word says it is filed
//! under a tokio task to [`TokioTasks::file`], with the tokio task the
//! sampler's per-record cache remembers for it (or, for a task the cache
//! has not seen, the one its extension holds): the records of one tokio
//! task are chained to the first one found, which a table indexed by
//! tokio id finds (one load and one store per record; tokio ids are handed
//! out in sequence, so those alive at once seldom share a place, and a
//! hash map takes the few that do). [`TokioTasks::finish`] then gives the tick its
//! [`Unit`]s: a tokio task of one root (the common
//! `tokio::spawn(traced())`) as that root, sampled as any task (its id,
//! name and group are its own), and a tokio task of several as its roots
//! in order. Records filed under no tokio task take the path they always
//! took. After the tick, [`TokioTasks::roots_of`] tells the on-CPU intake
//! which roots share the tokio task of the root a signal caught.
//!
//! A tick reads the roots of one tokio task one after the other, each at
//! one instant: a tokio task whose poll moves from one root to the next
//! between two reads may be seen suspended in both.

use std::collections::HashMap;
use std::collections::hash_map::Entry as MapEntry;

use super::profile::interning::Fx;
use crate::task::record::TaskRecord;
use crate::task::tokio_task::TokioTask;

/// No next record in a chain.
const NONE: u32 = u32::MAX;

/// One root of a tokio task: its record index, the task id the scan saw
/// in it, and the record.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Root {
    pub(crate) index: u32,
    pub(crate) id: u64,
    pub(crate) record: &'static TaskRecord,
}

/// What one wall-clock sample is of.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Unit {
    /// A task of its own, or the one root of a tokio task: record
    /// `index`.
    Task(u32, &'static TaskRecord),
    /// A tokio task of several roots: [`TokioTasks::several`]`(k)`.
    Tokio(u32),
}

/// A tokio task of several roots, for a tick.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Several {
    pub(crate) tokio_id: u64,
    /// Its roots, in order: `TokioTasks::roots[at..at + len]`.
    at: u32,
    len: u32,
}

impl Several {
    /// How many roots it has (at least 2).
    pub(crate) fn len(&self) -> usize {
        self.len as usize
    }
}

/// One filed record the scan found.
#[derive(Clone, Copy, Debug)]
struct Found {
    root: Root,
    tokio: TokioTask,
    running: bool,
    /// The next found record of its tokio task after the first ([`NONE`]:
    /// none), in no order.
    next: u32,
    /// On the first found record of a tokio task: how many it has; `0` on
    /// the others.
    count: u32,
    /// On the first found record of a tokio task of several roots, after
    /// the scan: which one it is ([`TokioTasks::several`]).
    several: u32,
}

/// A place of [`TokioTasks::heads`]: the tick that wrote it, and the
/// first found record of a tokio task.
#[derive(Clone, Copy, Debug, Default)]
struct Head {
    tick: u32,
    at: u32,
}

/// The tick's tokio tasks (see the module docs). Its buffers are kept from
/// tick to tick.
#[derive(Debug, Default)]
pub(crate) struct TokioTasks {
    /// The filed records the scan found, in scan order.
    found: Vec<Found>,
    /// The first found record of each tokio task, at its id modulo the
    /// table's length (a power of two, at least twice the records filed
    /// in the last tick): tokio ids are handed out in sequence, so the
    /// tokio tasks that live at once seldom share a place. A place this
    /// tick's scan wrote holds for this tick only; a tokio task whose
    /// place another took goes to `spilled`.
    heads: Vec<Head>,
    spilled: HashMap<u64, u32, Fx>,
    /// The ticks so far (`0`: none, what an unwritten place holds).
    tick: u32,
    /// The tokio tasks of several roots.
    several: Vec<Several>,
    /// Their roots, tokio task after tokio task, each in order.
    roots: Vec<Root>,
    /// Scratch: one chain, being put in order.
    chain: Vec<(u64, Root)>,
}

impl TokioTasks {
    /// Starts a tick's scan, forgetting the last tick's tokio tasks.
    pub(crate) fn begin(&mut self) {
        let len = (2 * self.found.len()).max(64).next_power_of_two();
        self.tick = self.tick.wrapping_add(1);
        if self.heads.len() < len || self.tick == 0 {
            self.heads.clear();
            self.heads.resize(len, Head::default());
            self.tick = 1;
        }
        self.found.clear();
        self.spilled.clear();
        self.several.clear();
        self.roots.clear();
    }

    /// The first found record of tokio task `tokio_id` this tick, if any.
    fn head(&self, tokio_id: u64) -> Option<u32> {
        let mask = self.heads.len().checked_sub(1)?;
        let h = self.heads[tokio_id as usize & mask];
        if h.tick == self.tick && self.found[h.at as usize].tokio.id == tokio_id {
            return Some(h.at);
        }
        self.spilled.get(&tokio_id).copied()
    }

    /// Takes in `root`, filed under `tokio`, found running or not.
    #[inline]
    pub(crate) fn file(&mut self, tokio: TokioTask, root: Root, running: bool) {
        let at = self.found.len() as u32;
        let mut found = Found {
            root,
            tokio,
            running,
            next: NONE,
            count: 1,
            several: 0,
        };
        let place = tokio.id as usize & (self.heads.len() - 1);
        let h = self.heads[place];
        let head = if h.tick != self.tick {
            self.heads[place] = Head {
                tick: self.tick,
                at,
            };
            None
        } else if self.found[h.at as usize].tokio.id == tokio.id {
            Some(h.at)
        } else {
            self.spill(tokio.id, at)
        };
        if let Some(head) = head {
            let first = &mut self.found[head as usize];
            found.next = first.next;
            first.next = at;
            first.count += 1;
            found.count = 0;
        }
        self.found.push(found);
    }

    /// The first found record of tokio task `tokio_id`, whose place in
    /// `heads` another took, if it has one; else `at` becomes it.
    #[cold]
    fn spill(&mut self, tokio_id: u64, at: u32) -> Option<u32> {
        match self.spilled.entry(tokio_id) {
            MapEntry::Occupied(o) => Some(*o.get()),
            MapEntry::Vacant(v) => {
                v.insert(at);
                None
            }
        }
    }

    /// Ends the scan: gives each tokio task to `offer` as a [`Unit`], with
    /// whether one of its roots was found running.
    pub(crate) fn finish(&mut self, mut offer: impl FnMut(Unit, bool)) {
        for at in 0..self.found.len() {
            let f = self.found[at];
            match f.count {
                0 => continue,
                1 => {
                    offer(Unit::Task(f.root.index, f.root.record), f.running);
                    continue;
                }
                _ => {}
            }
            self.chain.clear();
            let mut running = false;
            let mut next = at as u32;
            while let Some(g) = self.found.get(next as usize) {
                self.chain.push((g.tokio.order, g.root));
                running |= g.running;
                next = g.next;
            }
            self.chain.sort_unstable_by_key(|&(order, _)| order);
            let k = self.several.len() as u32;
            self.several.push(Several {
                tokio_id: f.tokio.id,
                at: self.roots.len() as u32,
                len: self.chain.len() as u32,
            });
            self.roots.extend(self.chain.iter().map(|&(_, root)| root));
            self.found[at].several = k;
            offer(Unit::Tokio(k), running);
        }
    }

    /// The tokio task of several roots `k` of this tick.
    pub(crate) fn several(&self, k: u32) -> Several {
        self.several[k as usize]
    }

    /// The roots of `several`, in order.
    pub(crate) fn roots(&self, several: Several) -> &[Root] {
        let at = several.at as usize;
        &self.roots[at..at + several.len as usize]
    }

    /// The roots the last tick found filed under tokio task `tokio_id`,
    /// in order (some may have ended since, and roots first polled since
    /// are not in it); empty if it found none.
    // The on-CPU intake's (Linux only).
    #[cfg_attr(not(all(target_os = "linux", not(async_stack_loom))), allow(dead_code))]
    pub(crate) fn roots_of(&self, tokio_id: u64) -> &[Root] {
        let Some(head) = self.head(tokio_id) else {
            return &[];
        };
        let first = &self.found[head as usize];
        match first.count {
            1 => std::slice::from_ref(&first.root),
            _ => self.roots(self.several(first.several)),
        }
    }
}

#[cfg(all(test, not(async_stack_loom)))]
mod tests {
    use super::*;

    /// Records filed under tokio tasks, scanned out of order: each tokio
    /// task of one root is that root, each of several its roots by first
    /// poll, whatever order the scan found them in, and whether or not its
    /// id shares a place of the table with another's (7, 71 and 135 do in
    /// a table of 64 places).
    #[test]
    fn roots_are_grouped_by_tokio_task_in_the_order_of_their_first_poll() {
        let records: &'static [TaskRecord] = Box::leak((0..9).map(|_| TaskRecord::new()).collect());
        let root = |index: u32| Root {
            index,
            id: u64::from(index) + 100,
            record: &records[index as usize],
        };
        let mut t = TokioTasks::default();
        for round in 0..3 {
            t.begin();
            assert_eq!(t.heads.len(), 64);
            // (tokio id, order) by record: tokio task 7 has three roots,
            // 8 and 71 one, 9 and 135 two.
            let filed = [
                (7, 30),
                (8, 5),
                (7, 10),
                (71, 4),
                (9, 2),
                (135, 7),
                (7, 20),
                (9, 1),
                (135, 3),
            ];
            for (index, &(id, order)) in filed.iter().enumerate() {
                t.file(TokioTask { id, order }, root(index as u32), index == 6);
            }
            let mut units = Vec::new();
            t.finish(|unit, running| {
                units.push(match unit {
                    Unit::Task(index, _) => (Some(index), None, running),
                    Unit::Tokio(k) => (None, Some(k), running),
                })
            });
            assert_eq!(
                units,
                [
                    (None, Some(0), true),
                    (Some(1), None, false),
                    (Some(3), None, false),
                    (None, Some(1), false),
                    (None, Some(2), false),
                ],
                "round {round}"
            );
            let indices = |roots: &[Root]| roots.iter().map(|r| r.index).collect::<Vec<_>>();
            let several: Vec<_> = (0..3)
                .map(|k| (t.several(k).tokio_id, indices(t.roots(t.several(k)))))
                .collect();
            assert_eq!(
                several,
                [(7, vec![2, 6, 0]), (9, vec![7, 4]), (135, vec![8, 5])]
            );
            assert_eq!(indices(t.roots_of(7)), [2, 6, 0]);
            assert_eq!(indices(t.roots_of(8)), [1]);
            assert_eq!(indices(t.roots_of(71)), [3]);
            assert_eq!(indices(t.roots_of(135)), [8, 5]);
            assert_eq!(t.roots_of(8)[0].id, 101);
            assert!(t.roots_of(10).is_empty());
            assert!(t.roots_of(199).is_empty(), "7's place, another id");
        }
    }
}
