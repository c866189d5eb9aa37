//! The detector: the largest set of waiting tasks that nobody outside it
//! can let go, split into minimal deadlocks, each confirmed by a second
//! read (the double collect of the parent module's docs).
//!
//! # What a deadlock is
//!
//! A task waits for (is *blocked by*) every task that could let one of its
//! waits go:
//!
//! - the holders of the resource (the exclusive holder and every task
//!   holding shared permits: a `Semaphore`'s spread permits, an `RwLock`'s
//!   readers);
//! - the task queued directly ahead of it for the same resource: tokio's
//!   queues are FIFO, and a waiter ahead takes the permits first (a reader
//!   queued behind a waiting writer waits for that writer; the writer
//!   waits for the readers). It waits for every waiter further ahead too,
//!   but through the one directly ahead, which waits for the next, and so
//!   on (see [Queues](#queues));
//! - for a `JoinHandle`, every live traced root filed under the awaited
//!   tokio task.
//!
//! A task with several waits at once (a `join!` or `select!` of acquires)
//! is blocked by the union of them. A task that nobody is known to block
//! (no holder recorded), that is blocked by the unknown task `0` (or by a
//! holder a copy could not read: a shared slot caught mid-claim), or that
//! is not idle (running, or woken since its last poll) is free. A deadlock
//! is a set of waiting tasks that every blocker of every member belongs
//! to: repeatedly dropping the tasks with a blocker outside the set leaves
//! the largest one, and its strongly connected components that nothing
//! leaves are the minimal deadlocks reported (a task stuck only because it
//! waits for a deadlock is not a deadlock of its own).
//!
//! # Queues
//!
//! A waiter is blocked by every waiter ahead of it, but the graph has an
//! edge only to the one directly ahead: an edge to each would make a
//! queue of `n` waiters cost `n * (n - 1) / 2` edges (4,000 tasks queued
//! on one `Semaphore` took 1.9 GB), where the chain costs `n - 1`. Both
//! graphs give the same answer, because a task is free exactly when it
//! reaches, along edges, a task that is not both waiting and idle (the
//! unknown task `0` among them), and both the largest stuck set and its
//! strongly connected components depend only on which tasks reach which:
//!
//! - Every edge of the chain is an edge of the full graph: what a task
//!   reaches in the chain, it reaches in the full graph.
//! - An edge of the full graph from the waiter at position `k` of a queue
//!   to the one at `j < k` is the path `k -> k-1 -> ... -> j` of the chain,
//!   since every waiter of the queue has its own edge to the one directly
//!   ahead; unless a waiter between them is the unknown task `0`, which
//!   has no edges of its own. The chain then reaches `0` there, a free
//!   task, as the full graph does from `k` directly. A wait whose task
//!   left the `.await` that polled it has no edges of its own either, so
//!   the waiter behind it has edges past it, to every waiter ahead up to
//!   the nearest wait that holds (and, if none does, to the holders): the
//!   path goes on from there.
//! - So a task reaches a free task in one graph exactly when it does in
//!   the other: the stuck set is the same. No unknown task is queued ahead
//!   of a stuck task's waits, so among stuck tasks, who reaches whom is
//!   the same in both graphs: the same components, and the same ones that
//!   no edge leaves. A task waiting twice in one queue reaches itself in
//!   both (a self-edge in the full graph; a path, or a self-edge when the
//!   two waits are adjacent, in the chain).
//!
//! The same holds for a resource's holders: every waiter behind the first
//! reaches them through the chain, so past a few holders
//! ([`HOLDERS_NAMED_BEHIND`]) only the first waiter has edges to them (or
//! `n` waiters on a `Semaphore` that `m` tasks hold would cost `n * m`).
//!
//! What changes is only which edges a report lists: a waiter is reported
//! queued behind the waiter directly ahead of it (and, behind a resource
//! with many holders, not held by them), and a cycle may go through the
//! waiters between. Every edge listed still joins two members
//! of the deadlock, since no edge leaves a reported component.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::sync::Arc;

use crate::record::location::SourceLocation;
use crate::record::site::{AwaitSite, await_site_by_id};
use crate::waits::resource::{Hold, Kind, Registry, ResourceCopy, Wait, Waited};
use crate::waits::waiter::{NOT_AT_AWAIT, awaited_site};

/// What the detector needs to know of tasks, read from the task registry
/// (or made up by a model).
pub(crate) trait TaskView {
    /// The task's wake count if it is live and idle (not running and not
    /// woken since its last poll began); `None` otherwise.
    fn idle(&self, task: u64) -> Option<u64>;
    /// The live traced roots filed under the tokio task `tokio_id`.
    fn roots_of(&self, tokio_id: u64) -> Vec<u64>;
    /// The task's name.
    fn name(&self, task: u64) -> Option<String>;
    /// The `.await` its deepest shown frame is suspended at: for a wait
    /// with no call site of its own (an awaited `JoinHandle` polled
    /// outside a traced `.await`), the line that awaits it, as a dump
    /// shows it.
    fn awaiting_at(&self, _task: u64) -> Option<SourceLocation> {
        None
    }
    /// Whether the task's shown frame that `awaiting` names (its birth) is
    /// still suspended at the `.await` it names (its site, see
    /// [`Waiter::awaiting`](crate::waits::waiter::Waiter)): a wait
    /// recorded there holds only while it is (an acquire future or a
    /// handle raced in `select!` and kept while the task went on to other
    /// `.await`s is not awaited any more, nor when another frame reached
    /// the same `.await`), under the same frames, each where it was (with
    /// a known `path`, its ancestry, see
    /// [`Waiter::path`](crate::waits::waiter::Waiter)): a traced fn raced
    /// in `select!` and kept stays at its own `.await` while its caller is
    /// at another.
    fn awaits_at(&self, _task: u64, _awaiting: u64, _path: u64) -> bool {
        true
    }
}

/// Why a waiter waits for a blocker.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Via {
    /// The blocker holds the resource (or some of its permits).
    Holds(Hold),
    /// The blocker is queued directly ahead for the same resource (see the
    /// module's docs, on queues).
    QueuedAhead(Wait),
    /// The blocker is a root of the awaited tokio task.
    Task,
}

/// One edge of a deadlock: `wait` (of `waiter`, for `resource`) is
/// blocked by `blocker`.
#[derive(Clone, Debug)]
pub(crate) struct Edge {
    pub(crate) waiter: u64,
    pub(crate) wait: Wait,
    pub(crate) resource: Arc<ResourceCopy>,
    pub(crate) blocker: u64,
    pub(crate) via: Via,
    /// The waiter's name (filled in once confirmed).
    pub(crate) waiter_name: Option<String>,
    /// For a wait without a call site of its own: the `.await` the waiter
    /// is suspended at (filled in once confirmed).
    pub(crate) awaiting_at: Option<SourceLocation>,
}

/// A confirmed deadlock: its edges, a cycle first (starting from the
/// smallest task id), then any other edges among its members.
#[derive(Clone, Debug)]
pub(crate) struct Found {
    pub(crate) edges: Vec<Edge>,
}

/// The tasks a pass asks the [`TaskView`] about: it may leave out all
/// others.
#[derive(Debug, Default)]
pub(crate) struct Interest {
    /// Waiting tasks.
    pub(crate) tasks: BTreeSet<u64>,
    /// Awaited tokio tasks (their roots).
    pub(crate) tokio: BTreeSet<u64>,
}

impl Interest {
    fn of<'a>(copies: impl IntoIterator<Item = &'a ResourceCopy>) -> Interest {
        let mut i = Interest::default();
        for r in copies {
            i.tasks
                .extend(r.waits.iter().map(|w| w.task).filter(|&t| t != 0));
            // A listed resource may have no wait (see `Registry`).
            if !r.waits.is_empty() {
                i.tokio.extend(r.target);
            }
        }
        i
    }
}

/// Finds the deadlocks among the resources listed in `registry`. `view`
/// is called once per pass, and reads the tasks of interest then.
pub(crate) fn detect<V: TaskView>(
    registry: &Registry,
    mut view: impl FnMut(&Interest) -> V,
) -> Vec<Found> {
    if registry.is_empty() {
        return Vec::new();
    }
    let (resources, copies): (Vec<Waited>, Vec<Arc<ResourceCopy>>) = registry
        .copies()
        .into_iter()
        .map(|(from, copy)| (from, Arc::new(copy)))
        .unzip();
    let first = view(&Interest::of(copies.iter().map(|c| &**c)));
    let candidates = candidates(&copies, &first);
    if candidates.is_empty() {
        return Vec::new();
    }
    let mut again = Interest::default();
    for c in &candidates {
        again.tasks.extend(&c.members);
        again.tokio.extend(&c.targets);
    }
    let second = view(&again);
    candidates
        .into_iter()
        .filter(|c| confirmed(c, &resources, &copies, &first, &second))
        .map(|c| {
            let mut edges = c.edges;
            for e in &mut edges {
                e.waiter_name = second.name(e.waiter);
                if e.wait.at.is_none() {
                    e.awaiting_at = await_site_by_id(awaited_site(e.wait.awaiting))
                        .map(AwaitSite::location)
                        .or_else(|| second.awaiting_at(e.waiter));
                }
            }
            Found { edges }
        })
        .collect()
}

/// A deadlock of the first pass, with what the second must find again.
struct Candidate {
    edges: Vec<Edge>,
    /// Indices into the resources of the first pass.
    resources: BTreeSet<usize>,
    members: BTreeSet<u64>,
    /// Awaited tokio tasks.
    targets: BTreeSet<u64>,
}

/// Whether the second pass finds `c` unchanged.
fn confirmed<V: TaskView>(
    c: &Candidate,
    resources: &[Waited],
    copies: &[Arc<ResourceCopy>],
    first: &V,
    second: &V,
) -> bool {
    c.resources
        .iter()
        .all(|&i| resources[i].unchanged(&copies[i]))
        && c.members.iter().all(|&t| {
            let wakes = first.idle(t);
            wakes.is_some() && second.idle(t) == wakes
        })
        && c.targets
            .iter()
            .all(|&t| first.roots_of(t) == second.roots_of(t))
}

/// The most holders a waiter behind the first has edges to (each waiter
/// has one to every holder while there are no more): past it, `n` waiters
/// of a resource with `m` holders (a `Semaphore` shared widely) would cost
/// `n * m` edges for the same answer.
const HOLDERS_NAMED_BEHIND: usize = 8;

/// Whether the waiter of `w` left the `.await` that polled it (or polled
/// it between two `.await`s, [`NOT_AT_AWAIT`]: an idle task is suspended
/// at none of them): the wait is then no wait of its (the pass-2 check
/// that the waiter is idle and not woken keeps this true at the instant
/// between the passes), though it still queues the waiters behind it. A
/// waiter that is not idle is free whatever it waits for: its stack is
/// not read.
fn left<V: TaskView>(w: &Wait, view: &V) -> bool {
    w.awaiting != 0
        && view.idle(w.task).is_some()
        && (w.awaiting == NOT_AT_AWAIT || !view.awaits_at(w.task, w.awaiting, w.path))
}

/// The minimal deadlocks of one pass.
fn candidates<V: TaskView>(copies: &[Arc<ResourceCopy>], view: &V) -> Vec<Candidate> {
    // Every edge, by waiter; resource indices by waiter.
    let mut edges: BTreeMap<u64, Vec<(usize, Edge)>> = BTreeMap::new();
    for (i, r) in copies.iter().enumerate() {
        let holders = r.exclusive.iter().chain(&r.holds);
        // Behind the first waiter, a waiter reaches the holders through
        // the one directly ahead (see the module's docs, on queues): its
        // own edges to them only name them in its report, kept while
        // they are few.
        let named_behind = holders.clone().count() <= HOLDERS_NAMED_BEHIND;
        let left_waits: Vec<bool> = r
            .waits
            .iter()
            .map(|w| w.task != 0 && left(w, view))
            .collect();
        for (k, w) in r.waits.iter().enumerate() {
            if w.task == 0 || left_waits[k] {
                continue;
            }
            let out = edges.entry(w.task).or_default();
            let mut edge = |blocker: u64, via: Via| {
                out.push((
                    i,
                    Edge {
                        waiter: w.task,
                        wait: *w,
                        resource: Arc::clone(r),
                        blocker,
                        via,
                        waiter_name: None,
                        awaiting_at: None,
                    },
                ));
            };
            let mut any = false;
            if r.kind == Kind::JoinHandle {
                for root in r.target.map(|t| view.roots_of(t)).unwrap_or_default() {
                    edge(root, Via::Task);
                    any = true;
                }
            } else {
                // Only the waiter directly ahead (see the module's docs,
                // on queues), or, when its task left that wait (which then
                // has no edges of its own to carry the chain on), every
                // waiter ahead up to the nearest one that did not; when
                // that is the unknown task, this wait is free, as it was
                // with an edge to every waiter ahead.
                let nearest = (0..k).rev().find(|&j| !left_waits[j]);
                if k == 0 || named_behind || nearest.is_none() {
                    for h in holders.clone() {
                        edge(h.task, Via::Holds(*h));
                        any = true;
                    }
                }
                if r.unsettled {
                    // A holder the copy could not read: nobody known.
                    edge(0, Via::Task);
                }
                for ahead in r.waits[nearest.unwrap_or(0)..k].iter().rev() {
                    edge(ahead.task, Via::QueuedAhead(*ahead));
                    any = true;
                }
            }
            if !any {
                // Nobody known can let it go: it is free.
                edge(0, Via::Task);
            }
        }
    }

    // The largest stuck set: the idle waiting tasks, less every one that
    // reaches a task outside them. Freedom spreads backwards along the
    // edges from the tasks that are not idle and waiting, each task once,
    // so a queue (a chain, which frees one waiter per step) takes time in
    // proportion to its length.
    let mut stuck: BTreeSet<u64> = edges
        .keys()
        .copied()
        .filter(|&t| view.idle(t).is_some())
        .collect();
    let mut blocks: HashMap<u64, Vec<u64>> = HashMap::new();
    for &t in &stuck {
        for (_, e) in &edges[&t] {
            blocks.entry(e.blocker).or_default().push(t);
        }
    }
    let mut freed: Vec<u64> = blocks
        .keys()
        .copied()
        .filter(|b| !stuck.contains(b))
        .collect();
    while let Some(f) = freed.pop() {
        for t in blocks.remove(&f).unwrap_or_default() {
            if stuck.remove(&t) {
                freed.push(t);
            }
        }
    }

    let graph: BTreeMap<u64, BTreeSet<u64>> = stuck
        .iter()
        .map(|&t| (t, edges[&t].iter().map(|(_, e)| e.blocker).collect()))
        .collect();
    sink_components(&graph)
        .into_iter()
        .map(|members| {
            let mut mine: Vec<(usize, Edge)> = members
                .iter()
                .flat_map(|t| edges[t].iter().cloned())
                .collect();
            let resources = mine.iter().map(|(i, _)| *i).collect();
            let targets = mine
                .iter()
                .filter(|(_, e)| e.resource.kind == Kind::JoinHandle)
                .filter_map(|(_, e)| e.resource.target)
                .collect();
            let edges = cycle_first(&members, mine.drain(..).map(|(_, e)| e).collect());
            Candidate {
                edges,
                resources,
                members,
                targets,
            }
        })
        .collect()
}

/// The strongly connected components of `graph` that no edge leaves
/// (Tarjan's algorithm, iterative).
fn sink_components(graph: &BTreeMap<u64, BTreeSet<u64>>) -> Vec<BTreeSet<u64>> {
    let mut t = Tarjan::default();
    for &start in graph.keys() {
        if !t.index.contains_key(&start) {
            t.run(graph, start);
        }
    }
    t.components
        .into_iter()
        .filter(|c| c.iter().all(|n| graph[n].iter().all(|b| c.contains(b))))
        .collect()
}

/// The state of Tarjan's algorithm.
#[derive(Default)]
struct Tarjan {
    index: HashMap<u64, usize>,
    low: HashMap<u64, usize>,
    on_stack: BTreeSet<u64>,
    stack: Vec<u64>,
    /// (node, its successors, the next successor to visit)
    work: Vec<(u64, Vec<u64>, usize)>,
    components: Vec<BTreeSet<u64>>,
}

impl Tarjan {
    fn visit(&mut self, graph: &BTreeMap<u64, BTreeSet<u64>>, n: u64) {
        let i = self.index.len();
        self.index.insert(n, i);
        self.low.insert(n, i);
        self.stack.push(n);
        self.on_stack.insert(n);
        self.work.push((n, graph[&n].iter().copied().collect(), 0));
    }

    fn run(&mut self, graph: &BTreeMap<u64, BTreeSet<u64>>, start: u64) {
        self.visit(graph, start);
        while let Some((n, succ, next)) = self.work.last_mut() {
            let n = *n;
            if let Some(&m) = succ.get(*next) {
                *next += 1;
                if !self.index.contains_key(&m) {
                    self.visit(graph, m);
                } else if self.on_stack.contains(&m) {
                    let lm = self.index[&m];
                    let ln = self.low.entry(n).or_default();
                    *ln = (*ln).min(lm);
                }
                continue;
            }
            self.work.pop();
            let ln = self.low[&n];
            if let Some((parent, _, _)) = self.work.last() {
                let lp = self.low.entry(*parent).or_default();
                *lp = (*lp).min(ln);
            }
            if ln == self.index[&n] {
                let mut component = BTreeSet::new();
                while let Some(m) = self.stack.pop() {
                    self.on_stack.remove(&m);
                    component.insert(m);
                    if m == n {
                        break;
                    }
                }
                self.components.push(component);
            }
        }
    }
}

/// Orders `edges` (all among `members`): the shortest cycle through the
/// smallest member first, then the others by waiter.
fn cycle_first(members: &BTreeSet<u64>, mut edges: Vec<Edge>) -> Vec<Edge> {
    edges.sort_by_key(|e| (e.waiter, e.wait.generation, rank(&e.via), e.blocker));
    let Some(&start) = members.first() else {
        return edges;
    };
    // A self-edge starts the order only when it is the whole deadlock.
    let loops = members.len() == 1;
    let mut by_waiter: HashMap<u64, Vec<usize>> = HashMap::new();
    for (i, e) in edges.iter().enumerate() {
        if loops || e.blocker != e.waiter {
            by_waiter.entry(e.waiter).or_default().push(i);
        }
    }
    // Breadth-first from `start` back to `start`.
    let mut came: HashMap<u64, usize> = HashMap::new();
    let mut queue = VecDeque::from([start]);
    let mut last = None;
    'search: while let Some(n) = queue.pop_front() {
        for &i in by_waiter.get(&n).into_iter().flatten() {
            let e = &edges[i];
            if e.blocker == start {
                last = Some(i);
                break 'search;
            }
            if let std::collections::hash_map::Entry::Vacant(v) = came.entry(e.blocker) {
                v.insert(i);
                queue.push_back(e.blocker);
            }
        }
    }
    let mut cycle = Vec::new();
    let mut at = last;
    while let Some(i) = at {
        cycle.push(i);
        let waiter = edges[i].waiter;
        at = if waiter == start {
            None
        } else {
            came.get(&waiter).copied()
        };
    }
    cycle.reverse();
    let on_cycle: BTreeSet<usize> = cycle.iter().copied().collect();
    let mut ordered: Vec<Edge> = cycle.iter().map(|&i| edges[i].clone()).collect();
    ordered.extend(
        edges
            .iter()
            .enumerate()
            .filter(|(i, _)| !on_cycle.contains(i))
            .map(|(_, e)| e.clone()),
    );
    ordered
}

/// Holds before queues before tasks, for a stable order.
fn rank(via: &Via) -> u8 {
    match via {
        Via::Holds(_) => 0,
        Via::QueuedAhead(_) => 1,
        Via::Task => 2,
    }
}
