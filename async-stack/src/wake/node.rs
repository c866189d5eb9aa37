//! The **nodes** of the wake graph, and how the roots the wake probes
//! counted become nodes.
//!
//! # One node per entry
//!
//! A node stands for what a dump calls an **entry**: the traced roots
//! first polled inside one tokio task (feature `tokio`; see
//! [`crate::task::tokio_task`]) are **one** node, its **branches**, in the
//! order of their first poll; a root not filed under a tokio task is a node
//! of its own, as before. The graph keeps ended roots too, so a node's
//! branches are every root of that tokio task seen while recording (and
//! not forgotten by the ended-task cap), live or ended: a plain
//! `tokio::spawn(async { loop { handle(rx.recv().await).await } })` with
//! `handle` traced is one node across all its calls of `handle`.
//!
//! - **id**: the task id of its first branch (the smallest order), which
//!   may have ended; **tokio_id**: the tokio task's id, the number
//!   `JoinHandle::id()` displays.
//! - **name** and **spawn site**: those of the first branch that has one;
//!   **root**: the first branch's root function; **label**: the name, else
//!   that root function.
//! - **instances** 1, **live** 1 while any branch is.
//! - polls, wakes, self-wakes, waker clones and drops, slow polls and busy
//!   time are **sums** over the branches: a tokio task polls its branches
//!   one after another inside its own poll, so their busy times never
//!   overlap.
//! - scheduled and idle time are the **largest** branch's: the branches
//!   wait at the same time, so a sum would count the same moments several
//!   times (see the fields of [`TaskNode`]).
//! - the **lost-waker** flag is set only if every live branch has it: the
//!   tokio task is woken when any branch's waker fires, so one branch
//!   that can still be woken keeps the task from being lost.
//!
//! Edges follow (in [`mod@crate::wake::graph`]): a wake from any branch
//! is from the node, a wake of any branch is a wake of the node, and a
//! wake of one branch from another of the same node is a wake from inside
//! the node's own poll, counted as a self-wake of it, not as an edge to
//! itself.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::task::probe::{Counters, TaskDetails};

/// One node of the graph: a task (all its roots, for a tokio task; see the
/// rules in [`crate::wake`]'s docs) or, after [`WakeGraph::fold`], all
/// tasks that share a label.
///
/// [`WakeGraph::fold`]: crate::wake::WakeGraph::fold
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TaskNode {
    /// The task's id (as in dumps): for a tokio task with several traced
    /// roots, the id of the first one polled; for a folded node, the
    /// smallest id of its members.
    pub id: u64,
    /// What the graph calls it: the task's name, else its root function.
    pub label: String,
    /// The name given at spawn, if any.
    pub name: Option<String>,
    /// Where it was spawned (`file:line:column`), if a spawn helper said.
    pub spawn_site: Option<String>,
    /// The function of its root future (of its first root, for a tokio
    /// task with several).
    pub root: Option<String>,
    /// The id of the tokio task whose roots this node merges (what
    /// `JoinHandle::id()` displays), if its roots ran inside one; for a
    /// folded node, only if all its members share it. `None` when reading
    /// a graph written before this field existed.
    #[serde(default)]
    pub tokio_id: Option<u64>,
    /// How many tasks this node stands for (1 until folded; a tokio task
    /// counts once, however many roots it has).
    pub instances: u64,
    /// How many of them are still live.
    pub live: u64,
    /// Polls (tokio-metrics' `total_poll_count`); for a tokio task, the
    /// polls of its roots, summed (one poll of the tokio task that polls
    /// two roots counts twice).
    pub total_poll_count: u64,
    /// Wakes from outside the task's own polls (of any of its roots, for
    /// a tokio task, summed).
    pub wakes: u64,
    /// Wakes from inside its own polls (yields); for a tokio task, also
    /// the wakes of one of its roots from another.
    pub self_wakes: u64,
    /// Clones of its waker made.
    pub waker_clones: u64,
    /// Clones of its waker dropped.
    pub waker_drops: u64,
    /// Polls longer than the slow-poll threshold (of its roots, for a
    /// tokio task).
    pub total_slow_poll_count: u64,
    /// Time inside `poll` (busy), in nanoseconds; for a tokio task, the
    /// sum over its roots, which it polls one after another.
    pub total_poll_duration_ns: u64,
    /// Time from a wake to the poll that follows, in nanoseconds. For a
    /// tokio task, the largest among its roots, not a sum: the task is
    /// scheduled whenever one of its roots is, and those stretches
    /// overlap; the largest is a lower bound of the task's own.
    pub total_scheduled_duration_ns: u64,
    /// Time from `Pending` to the wake that follows (up to now for a task
    /// still idle), in nanoseconds. For a tokio task, the largest among
    /// its roots, not a sum: its roots wait at the same time, and a sum
    /// would count the same moments several times. (Roots that ran one
    /// after another, a loop calling a traced fn, did not overlap: there
    /// the largest understates the task's idle time.)
    pub total_idle_duration_ns: u64,
    /// How many of its tasks are flagged for a lost waker: pending, every
    /// clone of the waker dropped, and not woken. A tokio task is flagged
    /// only if every one of its live roots is: a wake of any of them wakes
    /// the task.
    pub lost_wakers: u64,
}

impl TaskNode {
    /// Time inside `poll`.
    pub fn busy(&self) -> Duration {
        Duration::from_nanos(self.total_poll_duration_ns)
    }

    /// Time from `Pending` to the next wake.
    pub fn idle(&self) -> Duration {
        Duration::from_nanos(self.total_idle_duration_ns)
    }

    /// Time from a wake to the next poll.
    pub fn scheduled(&self) -> Duration {
        Duration::from_nanos(self.total_scheduled_duration_ns)
    }

    /// The node of one root, as a task of its own.
    pub(super) fn new(id: u64, meta: &TaskDetails, c: Counters, live: bool) -> TaskNode {
        TaskNode {
            id,
            label: label(id, meta.name.as_deref(), meta.root.as_deref()),
            name: meta.name.clone(),
            spawn_site: meta.spawn_site.clone(),
            root: meta.root.clone(),
            tokio_id: meta.tokio.map(|t| t.id),
            instances: 1,
            live: u64::from(live),
            total_poll_count: c.polls,
            wakes: c.wakes,
            self_wakes: c.self_wakes,
            waker_clones: c.clones,
            waker_drops: c.drops,
            total_slow_poll_count: c.slow_polls,
            total_poll_duration_ns: c.busy_ns,
            total_scheduled_duration_ns: c.scheduled_ns,
            total_idle_duration_ns: c.idle_ns,
            lost_wakers: u64::from(c.lost),
        }
    }

    /// Adds a later branch of the same tokio task (see the module docs).
    fn add_branch(&mut self, branch: &TaskNode) {
        self.live = self.live.max(branch.live);
        self.add_activity(branch);
        // Branches wait at the same time: the largest, not the sum.
        self.add_waits(branch, u64::max);
        for (mine, theirs) in [
            (&mut self.name, &branch.name),
            (&mut self.spawn_site, &branch.spawn_site),
        ] {
            if mine.is_none() {
                mine.clone_from(theirs);
            }
        }
        self.label = label(self.id, self.name.as_deref(), self.root.as_deref());
    }

    /// Adds the counters that are sums, whether merging branches or
    /// folding tasks.
    fn add_activity(&mut self, other: &TaskNode) {
        self.total_poll_count = self.total_poll_count.saturating_add(other.total_poll_count);
        self.wakes = self.wakes.saturating_add(other.wakes);
        self.self_wakes = self.self_wakes.saturating_add(other.self_wakes);
        self.waker_clones = self.waker_clones.saturating_add(other.waker_clones);
        self.waker_drops = self.waker_drops.saturating_add(other.waker_drops);
        self.total_slow_poll_count = self
            .total_slow_poll_count
            .saturating_add(other.total_slow_poll_count);
        self.total_poll_duration_ns = self
            .total_poll_duration_ns
            .saturating_add(other.total_poll_duration_ns);
    }

    /// Combines the scheduled and idle times with `other`'s.
    fn add_waits(&mut self, other: &TaskNode, combine: fn(u64, u64) -> u64) {
        self.total_scheduled_duration_ns = combine(
            self.total_scheduled_duration_ns,
            other.total_scheduled_duration_ns,
        );
        self.total_idle_duration_ns =
            combine(self.total_idle_duration_ns, other.total_idle_duration_ns);
    }

    /// Folds another task into this node ([`WakeGraph::fold`]): every
    /// counter summed, what they do not share forgotten.
    ///
    /// [`WakeGraph::fold`]: crate::wake::WakeGraph::fold
    pub(super) fn absorb(&mut self, other: &TaskNode) {
        self.id = self.id.min(other.id);
        self.instances = self.instances.saturating_add(other.instances);
        self.live = self.live.saturating_add(other.live);
        self.add_activity(other);
        self.add_waits(other, u64::saturating_add);
        self.lost_wakers = self.lost_wakers.saturating_add(other.lost_wakers);
        for (mine, theirs) in [
            (&mut self.name, &other.name),
            (&mut self.spawn_site, &other.spawn_site),
            (&mut self.root, &other.root),
        ] {
            if mine != theirs {
                *mine = None;
            }
        }
        if self.tokio_id != other.tokio_id {
            self.tokio_id = None;
        }
    }
}

/// The name, else the root function, else `task {id}`.
fn label(id: u64, name: Option<&str>, root: Option<&str>) -> String {
    name.or(root)
        .map_or_else(|| format!("task {id}"), str::to_owned)
}

/// One root the wake probes counted: its task id, what they noted of it,
/// its counters, and whether it is live.
pub(super) struct Root<'a> {
    pub(super) id: u64,
    pub(super) meta: &'a TaskDetails,
    pub(super) counters: Counters,
    pub(super) live: bool,
}

/// The nodes of these roots, ordered by id (see the module docs), and the
/// node id of each root's task id.
pub(super) fn entries(roots: Vec<Root<'_>>) -> (Vec<TaskNode>, BTreeMap<u64, u64>) {
    let mut nodes = Vec::new();
    let mut node_of = BTreeMap::new();
    // The roots of each tokio task, with their order.
    let mut by_tokio: BTreeMap<u64, Vec<(u64, Root<'_>)>> = BTreeMap::new();
    for root in roots {
        match root.meta.tokio {
            Some(t) => by_tokio.entry(t.id).or_default().push((t.order, root)),
            None => {
                node_of.insert(root.id, root.id);
                nodes.push(TaskNode::new(root.id, root.meta, root.counters, root.live));
            }
        }
    }
    for mut branches in by_tokio.into_values() {
        branches.sort_by_key(|(order, root)| (*order, root.id));
        let mut node: Option<TaskNode> = None;
        // Lost only if every live branch is (and one is).
        let mut lost = None;
        for (_, b) in &branches {
            if b.live {
                lost = Some(lost.unwrap_or(true) && b.counters.lost);
            }
            let branch = TaskNode::new(b.id, b.meta, b.counters, b.live);
            match &mut node {
                Some(node) => node.add_branch(&branch),
                None => node = Some(branch),
            }
        }
        let Some(mut node) = node else { continue };
        node.lost_wakers = u64::from(lost == Some(true));
        for (_, b) in &branches {
            node_of.insert(b.id, node.id);
        }
        nodes.push(node);
    }
    nodes.sort_by_key(|t| t.id);
    (nodes, node_of)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::task::tokio_task::TokioTask;

    fn meta(name: Option<&str>, root: &str, tokio: Option<(u64, u64)>) -> TaskDetails {
        TaskDetails {
            name: name.map(str::to_owned),
            spawn_site: None,
            root: Some(root.to_owned()),
            tokio: tokio.map(|(id, order)| TokioTask { id, order }),
            ended: None,
        }
    }

    fn counters(n: u64, lost: bool) -> Counters {
        Counters {
            polls: n,
            wakes: n,
            self_wakes: n,
            clones: n,
            drops: n,
            slow_polls: n,
            busy_ns: 100 * n,
            scheduled_ns: 10 * n,
            idle_ns: 1000 * n,
            lost,
        }
    }

    #[test]
    fn the_roots_of_one_tokio_task_are_one_node() {
        // Task ids do not follow first polls: root 9 was polled first.
        let metas = [
            (9, meta(None, "a::left", Some((34, 5)))),
            (7, meta(Some("worker"), "a::right", Some((34, 6)))),
            (8, meta(None, "a::alone", None)),
            (10, meta(None, "a::other", Some((35, 7)))),
        ];
        let roots = vec![
            Root {
                id: 7,
                meta: &metas[1].1,
                counters: counters(2, true),
                live: true,
            },
            Root {
                id: 9,
                meta: &metas[0].1,
                counters: counters(3, false),
                live: false,
            },
            Root {
                id: 8,
                meta: &metas[2].1,
                counters: counters(1, true),
                live: true,
            },
            Root {
                id: 10,
                meta: &metas[3].1,
                counters: counters(1, false),
                live: true,
            },
        ];
        let (nodes, node_of) = entries(roots);
        let ids: Vec<_> = nodes.iter().map(|n| (n.id, n.tokio_id)).collect();
        assert_eq!(ids, [(8, None), (9, Some(34)), (10, Some(35))]);
        assert_eq!(
            node_of.into_iter().collect::<Vec<_>>(),
            [(7, 9), (8, 8), (9, 9), (10, 10)]
        );
        let t = &nodes[1];
        // The name of the first branch that has one; the first branch's root.
        assert_eq!(t.label, "worker");
        assert_eq!(t.name.as_deref(), Some("worker"));
        assert_eq!(t.root.as_deref(), Some("a::left"));
        assert_eq!((t.instances, t.live), (1, 1));
        // Sums.
        assert_eq!(
            (
                t.total_poll_count,
                t.wakes,
                t.self_wakes,
                t.waker_clones,
                t.waker_drops,
                t.total_slow_poll_count,
                t.total_poll_duration_ns
            ),
            (5, 5, 5, 5, 5, 5, 500)
        );
        // The largest.
        assert_eq!(
            (t.total_scheduled_duration_ns, t.total_idle_duration_ns),
            (30, 3000)
        );
        // The only live branch is lost: the task is.
        assert_eq!(t.lost_wakers, 1);
        // A task of its own is unchanged.
        assert_eq!(
            nodes[0],
            TaskNode::new(8, &metas[2].1, counters(1, true), true)
        );
    }

    #[test]
    fn a_tokio_task_is_lost_only_if_every_live_root_is() {
        let m = [
            meta(None, "a::x", Some((1, 1))),
            meta(None, "a::y", Some((1, 2))),
        ];
        let node = |lost: [bool; 2], live: [bool; 2]| {
            let roots = (0..2)
                .map(|i| Root {
                    id: i as u64 + 1,
                    meta: &m[i],
                    counters: counters(1, lost[i]),
                    live: live[i],
                })
                .collect();
            let (nodes, _) = entries(roots);
            assert_eq!(nodes.len(), 1);
            (nodes[0].lost_wakers, nodes[0].live)
        };
        assert_eq!(node([true, true], [true, true]), (1, 1));
        assert_eq!(node([true, false], [true, true]), (0, 1));
        assert_eq!(node([false, true], [true, true]), (0, 1));
        // An ended root is waiting for nothing: the live one decides.
        assert_eq!(node([false, true], [false, true]), (1, 1));
        assert_eq!(node([false, false], [false, false]), (0, 0));
    }
}

#[cfg(test)]
pub(super) mod tests_support {
    use super::*;

    /// A live task node with these counters.
    pub(in crate::wake) fn node(id: u64, meta: &TaskDetails, c: Counters) -> TaskNode {
        TaskNode::new(id, meta, c, true)
    }
}
