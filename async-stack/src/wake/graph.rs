//! The recorded graph, its folding, and its JSON and DOT forms.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::sync::{Ordering, lock};
use crate::task::probe::{self, Counters, SOURCE_RUNTIME, SOURCE_THREAD, TaskDetails};
use crate::task::registry;

/// Who woke a task.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WakeSource {
    /// The task with this id ([`TaskNode::id`]), from inside its poll.
    Task(u64),
    /// A thread that polls tasks, outside any task's poll: a runtime's I/O
    /// or timer driver (tokio runs them on its worker threads and in
    /// `block_on`), or code around `block_on` itself.
    Runtime,
    /// A thread that never polled a task (a plain `std::thread`, a
    /// blocking pool).
    Thread,
}

impl WakeSource {
    fn from_raw(raw: u64) -> WakeSource {
        match raw {
            SOURCE_RUNTIME => WakeSource::Runtime,
            SOURCE_THREAD => WakeSource::Thread,
            id => WakeSource::Task(id),
        }
    }
}

/// One task of the graph (or, after [`WakeGraph::fold`], all tasks that
/// share a label).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TaskNode {
    /// The task's id (as in dumps); for a folded node, the smallest id of
    /// its members.
    pub id: u64,
    /// What the graph calls it: the task's name, else its root function.
    pub label: String,
    /// The name given at spawn, if any.
    pub name: Option<String>,
    /// Where it was spawned (`file:line:column`), if a spawn helper said.
    pub spawn_site: Option<String>,
    /// The function of its root future.
    pub root: Option<String>,
    /// How many tasks this node stands for (1 until folded).
    pub instances: u64,
    /// How many of them are still live.
    pub live: u64,
    /// Polls (tokio-metrics' `total_poll_count`).
    pub total_poll_count: u64,
    /// Wakes from outside the task's own polls.
    pub wakes: u64,
    /// Wakes from inside its own polls (yields).
    pub self_wakes: u64,
    /// Clones of its waker made.
    pub waker_clones: u64,
    /// Clones of its waker dropped.
    pub waker_drops: u64,
    /// Polls longer than the slow-poll threshold.
    pub total_slow_poll_count: u64,
    /// Time inside `poll` (busy), in nanoseconds.
    pub total_poll_duration_ns: u64,
    /// Time from a wake to the poll that follows, in nanoseconds.
    pub total_scheduled_duration_ns: u64,
    /// Time from `Pending` to the wake that follows (up to now for a task
    /// still idle), in nanoseconds.
    pub total_idle_duration_ns: u64,
    /// How many of its tasks are flagged for a lost waker: pending, every
    /// clone of the waker dropped, and not woken.
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

    fn new(id: u64, meta: &TaskDetails, c: Counters, live: bool) -> TaskNode {
        let label = meta
            .name
            .clone()
            .or_else(|| meta.root.clone())
            .unwrap_or_else(|| format!("task {id}"));
        TaskNode {
            id,
            label,
            name: meta.name.clone(),
            spawn_site: meta.spawn_site.clone(),
            root: meta.root.clone(),
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

    fn absorb(&mut self, other: &TaskNode) {
        self.id = self.id.min(other.id);
        self.instances = self.instances.saturating_add(other.instances);
        self.live = self.live.saturating_add(other.live);
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
        self.total_scheduled_duration_ns = self
            .total_scheduled_duration_ns
            .saturating_add(other.total_scheduled_duration_ns);
        self.total_idle_duration_ns = self
            .total_idle_duration_ns
            .saturating_add(other.total_idle_duration_ns);
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
    }
}

/// One edge: `from` woke task `to` `wakes` times.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WakeEdge {
    /// Who woke.
    pub from: WakeSource,
    /// The id of the woken task ([`TaskNode::id`]).
    pub to: u64,
    /// How many times.
    pub wakes: u64,
}

/// How [`WakeGraph::fold`] merges tasks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Fold {
    /// By [`TaskNode::label`]: the name, else the root function.
    Name,
    /// By spawn site, else by root function.
    SpawnSite,
}

/// The wake graph: tasks (nodes, ordered by id) and who woke them (edges,
/// ordered by target, then source).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WakeGraph {
    /// The tasks.
    pub tasks: Vec<TaskNode>,
    /// The edges. Edges from or to tasks forgotten by the ended-task cap
    /// are left out (see `dropped_tasks`).
    pub edges: Vec<WakeEdge>,
    /// Ended tasks forgotten because more than 100,000 ended while
    /// recording.
    pub dropped_tasks: u64,
    /// How the tasks were folded, if they were.
    pub folded: Option<Fold>,
}

/// Builds the graph from the tables the wake probes fill.
pub(super) fn collect() -> WakeGraph {
    let now = probe::now();
    // Live tasks: an entry counting the task its record holds now.
    let mut live: Vec<(u64, Counters)> = Vec::new();
    for index in 0..registry::record_count() as u32 {
        let (Some(r), Some(entry)) = (registry::record(index), probe::existing_wakes(index)) else {
            continue;
        };
        let id = entry.task.load(Ordering::Acquire);
        if id != 0 && r.id.load(Ordering::Acquire) == id {
            live.push((id, entry.counters(now)));
        }
    }
    let (mut tasks, dropped_tasks) = {
        let t = lock(probe::tasks());
        let mut tasks: Vec<TaskNode> = live
            .iter()
            .filter_map(|(id, c)| {
                let meta = t.meta.get(id)?;
                // A task that ended since the scan above is taken below.
                meta.ended
                    .is_none()
                    .then(|| TaskNode::new(*id, meta, *c, true))
            })
            .collect();
        tasks.extend(
            t.meta
                .iter()
                .filter_map(|(id, meta)| Some(TaskNode::new(*id, meta, meta.ended?, false))),
        );
        (tasks, t.dropped)
    };
    tasks.sort_by_key(|t| t.id);
    let mut counts: BTreeMap<(u64, WakeSource), u64> = BTreeMap::new();
    let tables: Vec<_> = lock(probe::edge_tables()).clone();
    for table in tables {
        for (&(from, to), &n) in lock(&table).iter() {
            let c = counts.entry((to, WakeSource::from_raw(from))).or_insert(0);
            *c = c.saturating_add(n);
        }
    }
    let known = |id: u64| tasks.binary_search_by_key(&id, |t| t.id).is_ok();
    let edges = counts
        .into_iter()
        .filter(|&((to, from), _)| {
            known(to)
                && match from {
                    WakeSource::Task(id) => known(id),
                    _ => true,
                }
        })
        .map(|((to, from), wakes)| WakeEdge { from, to, wakes })
        .collect();
    WakeGraph {
        tasks,
        edges,
        dropped_tasks,
        folded: None,
    }
}

impl WakeGraph {
    /// The node of task `id`.
    pub fn task(&self, id: u64) -> Option<&TaskNode> {
        self.tasks
            .binary_search_by_key(&id, |t| t.id)
            .ok()
            .map(|i| &self.tasks[i])
    }

    /// All tasks with this label.
    pub fn tasks_labelled(&self, label: &str) -> Vec<&TaskNode> {
        self.tasks.iter().filter(|t| t.label == label).collect()
    }

    /// Merges tasks that share a name (or spawn site): one node per key,
    /// with summed counters and `instances` members, and edges between the
    /// merged nodes with summed counts. Wakes between members of one node
    /// become an edge from the node to itself. Keeps cardinality bounded
    /// when thousands of tasks run the same code.
    pub fn fold(&self, by: Fold) -> WakeGraph {
        let key = |t: &TaskNode| match by {
            Fold::Name => t.label.clone(),
            Fold::SpawnSite => t
                .spawn_site
                .clone()
                .or_else(|| t.root.clone())
                .unwrap_or_else(|| t.label.clone()),
        };
        let mut merged: BTreeMap<String, TaskNode> = BTreeMap::new();
        let mut node_of: BTreeMap<u64, String> = BTreeMap::new();
        for t in &self.tasks {
            let k = key(t);
            node_of.insert(t.id, k.clone());
            match merged.get_mut(&k) {
                Some(node) => node.absorb(t),
                None => {
                    let mut node = t.clone();
                    if by == Fold::SpawnSite {
                        node.label = k.clone();
                    }
                    merged.insert(k, node);
                }
            }
        }
        let id_of = |id: u64| node_of.get(&id).and_then(|k| merged.get(k)).map(|n| n.id);
        let mut counts: BTreeMap<(u64, WakeSource), u64> = BTreeMap::new();
        for e in &self.edges {
            let (Some(to), Some(from)) = (
                id_of(e.to),
                match e.from {
                    WakeSource::Task(id) => id_of(id).map(WakeSource::Task),
                    other => Some(other),
                },
            ) else {
                continue;
            };
            let c = counts.entry((to, from)).or_insert(0);
            *c = c.saturating_add(e.wakes);
        }
        let mut tasks: Vec<TaskNode> = merged.into_values().collect();
        tasks.sort_by_key(|t| t.id);
        WakeGraph {
            tasks,
            edges: counts
                .into_iter()
                .map(|((to, from), wakes)| WakeEdge { from, to, wakes })
                .collect(),
            dropped_tasks: self.dropped_tasks,
            folded: Some(by),
        }
    }

    /// The graph as pretty-printed JSON: `tasks`, `edges` (each `from` is
    /// `{"task": id}`, `"runtime"` or `"thread"`), `dropped_tasks` and
    /// `folded`, with the field names of [`TaskNode`] and [`WakeEdge`].
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("a wake graph always serialises")
    }

    /// The graph in Graphviz DOT: one box per task (label, instances, busy
    /// and idle time, wakes; red if a waker was lost), one ellipse per
    /// outside source that woke anything, and one edge per [`WakeEdge`]
    /// labelled with its count and drawn wider the more it carries.
    /// `dot -Tsvg` draws it.
    pub fn to_dot(&self) -> String {
        let mut out = String::from(
            "digraph wakes {\n  rankdir=LR;\n  node [fontname=\"monospace\", fontsize=10];\n",
        );
        let heaviest = self.edges.iter().map(|e| e.wakes).max().unwrap_or(1).max(1);
        let sources: std::collections::BTreeSet<WakeSource> =
            self.edges.iter().map(|e| e.from).collect();
        if sources.contains(&WakeSource::Runtime) {
            out.push_str("  runtime [shape=ellipse, label=\"runtime (I/O or timer driver)\"];\n");
        }
        if sources.contains(&WakeSource::Thread) {
            out.push_str("  thread [shape=ellipse, label=\"other thread\"];\n");
        }
        for t in &self.tasks {
            let mut label = dot_escape(&t.label);
            if t.instances > 1 {
                let _ = write!(label, " ×{}", t.instances);
            }
            let _ = write!(
                label,
                "\\nbusy {} idle {}\\nwakes {} polls {}",
                ms(t.total_poll_duration_ns),
                ms(t.total_idle_duration_ns),
                t.wakes,
                t.total_poll_count
            );
            let color = if t.lost_wakers > 0 {
                ", color=red, fontcolor=red"
            } else {
                ""
            };
            if t.lost_wakers > 0 {
                let _ = write!(label, "\\nlost waker: {}", t.lost_wakers);
            }
            let _ = writeln!(out, "  t{} [shape=box, label=\"{label}\"{color}];", t.id);
        }
        for e in &self.edges {
            let from = match e.from {
                WakeSource::Task(id) => format!("t{id}"),
                WakeSource::Runtime => "runtime".to_owned(),
                WakeSource::Thread => "thread".to_owned(),
            };
            let width = 1.0 + 4.0 * (e.wakes as f64 / heaviest as f64);
            let _ = writeln!(
                out,
                "  {from} -> t{} [label=\"{}\", penwidth={width:.2}];",
                e.to, e.wakes
            );
        }
        out.push_str("}\n");
        out
    }
}

fn ms(ns: u64) -> String {
    format!("{:.1}ms", ns as f64 / 1e6)
}

/// `text` inside a DOT double-quoted string.
fn dot_escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '"' | '\\' => {
                out.push('\\');
                out.push(c);
            }
            '\n' | '\r' => out.push(' '),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(id: u64, label: &str, busy: u64) -> TaskNode {
        TaskNode::new(
            id,
            &TaskDetails {
                name: Some(label.to_owned()),
                ..TaskDetails::default()
            },
            Counters {
                polls: 2,
                wakes: 1,
                busy_ns: busy,
                ..Counters::default()
            },
            true,
        )
    }

    fn graph() -> WakeGraph {
        WakeGraph {
            tasks: vec![
                node(1, "p", 10),
                node(2, "c", 5),
                node(3, "c", 7),
                node(4, "q\"x", 1),
            ],
            edges: vec![
                WakeEdge {
                    from: WakeSource::Task(1),
                    to: 2,
                    wakes: 3,
                },
                WakeEdge {
                    from: WakeSource::Task(1),
                    to: 3,
                    wakes: 4,
                },
                WakeEdge {
                    from: WakeSource::Runtime,
                    to: 1,
                    wakes: 5,
                },
                WakeEdge {
                    from: WakeSource::Task(2),
                    to: 3,
                    wakes: 1,
                },
            ],
            dropped_tasks: 0,
            folded: None,
        }
    }

    #[test]
    fn folding_by_name_sums_members_and_edges() {
        let f = graph().fold(Fold::Name);
        let labels: Vec<_> = f
            .tasks
            .iter()
            .map(|t| (t.id, t.label.as_str(), t.instances))
            .collect();
        assert_eq!(labels, [(1, "p", 1), (2, "c", 2), (4, "q\"x", 1)]);
        assert_eq!(f.task(2).unwrap().total_poll_duration_ns, 12);
        assert_eq!(f.task(2).unwrap().total_poll_count, 4);
        assert_eq!(
            f.edges,
            [
                WakeEdge {
                    from: WakeSource::Runtime,
                    to: 1,
                    wakes: 5
                },
                WakeEdge {
                    from: WakeSource::Task(1),
                    to: 2,
                    wakes: 7
                },
                WakeEdge {
                    from: WakeSource::Task(2),
                    to: 2,
                    wakes: 1
                },
            ]
        );
        assert_eq!(f.folded, Some(Fold::Name));
    }

    #[test]
    fn dot_names_every_node_and_edge_and_escapes_labels() {
        let dot = graph().to_dot();
        assert!(dot.starts_with("digraph wakes {\n"));
        assert!(dot.contains("  runtime [shape=ellipse"));
        assert!(!dot.contains("  thread [shape"));
        assert!(dot.contains("t4 [shape=box, label=\"q\\\"x\\n"));
        assert_eq!(dot.matches(" -> ").count(), 4);
        assert!(
            dot.contains("  t1 -> t3 [label=\"4\", penwidth=4.20];"),
            "{dot}"
        );
        assert!(
            dot.contains("  runtime -> t1 [label=\"5\", penwidth=5.00];"),
            "{dot}"
        );
        assert!(dot.trim_end().ends_with('}'));
    }

    #[test]
    fn json_round_trips() {
        let g = graph();
        let back: WakeGraph = serde_json::from_str(&g.to_json()).unwrap();
        assert_eq!(back, g);
        assert!(g.to_json().contains("\"from\": \"runtime\""));
        assert!(
            g.to_json()
                .contains("\"from\": {\n        \"task\": 1\n      }")
        );
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
