//! The recorded graph, its folding, and its JSON and DOT forms.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use crate::shim::{Ordering, lock};
use crate::task::probe::{self, Counters, SOURCE_RUNTIME, SOURCE_THREAD};
use crate::task::registry;

use super::node::{self, Root, TaskNode};

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
    let ((mut tasks, node_of), dropped_tasks) = {
        let t = lock(probe::tasks());
        let mut roots: Vec<Root<'_>> = live
            .iter()
            .filter_map(|&(id, counters)| {
                let meta = t.meta.get(&id)?;
                // A task that ended since the scan above is taken below.
                meta.ended.is_none().then_some(Root {
                    id,
                    meta,
                    counters,
                    live: true,
                })
            })
            .collect();
        roots.extend(t.meta.iter().filter_map(|(&id, meta)| {
            Some(Root {
                id,
                meta,
                counters: meta.ended?,
                live: false,
            })
        }));
        (node::entries(roots), t.dropped)
    };
    // Each edge between the nodes of its ends; edges from or to a task
    // not in the graph are left out.
    let mut counts: BTreeMap<(u64, WakeSource), u64> = BTreeMap::new();
    let tables: Vec<_> = lock(probe::edge_tables()).clone();
    for table in tables {
        for (&(from, to), &n) in lock(&table).iter() {
            let Some(&to) = node_of.get(&to) else {
                continue;
            };
            let from = match WakeSource::from_raw(from) {
                WakeSource::Task(id) => match node_of.get(&id) {
                    Some(&node) => WakeSource::Task(node),
                    None => continue,
                },
                other => other,
            };
            let c = counts.entry((to, from)).or_insert(0);
            *c = c.saturating_add(n);
        }
    }
    // A root woken by another root of its own tokio task was woken from
    // inside the task's poll: a self-wake of the node, not an edge.
    counts.retain(|&(to, from), &mut n| {
        if from != WakeSource::Task(to) {
            return true;
        }
        if let Ok(i) = tasks.binary_search_by_key(&to, |t| t.id) {
            let node = &mut tasks[i];
            node.wakes = node.wakes.saturating_sub(n);
            node.self_wakes = node.self_wakes.saturating_add(n);
        }
        false
    });
    let edges = counts
        .into_iter()
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
    /// The node whose id is `id` (for a tokio task with several traced
    /// roots, the id of the first one; see [`TaskNode::id`]).
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
    /// `folded`, with the field names of [`TaskNode`] (`tokio_id` is a
    /// number or `null`) and [`WakeEdge`]. It reads back with serde
    /// (`serde_json::from_str::<WakeGraph>`), and so do graphs written
    /// before `tokio_id` existed.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("a wake graph always serialises")
    }

    /// The graph in Graphviz DOT: one box per task (label, instances, the
    /// tokio task it stands for, busy and idle time, wakes; red if a waker
    /// was lost), one ellipse per
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
            if let Some(id) = t.tokio_id {
                let _ = write!(label, "\\ntokio task {id}");
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
    use crate::task::probe::TaskDetails;

    fn node(id: u64, label: &str, busy: u64) -> TaskNode {
        crate::wake::node::tests_support::node(
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

    /// The tokio task a node stands for is in both forms, and folding keeps
    /// it only where the members share it.
    #[test]
    fn the_tokio_task_is_shown_and_folds_only_when_shared() {
        let mut g = graph();
        g.tasks[0].tokio_id = Some(34);
        g.tasks[1].tokio_id = Some(35);
        g.tasks[2].tokio_id = Some(36);
        let json = g.to_json();
        assert!(json.contains("\"tokio_id\": 34,"), "{json}");
        assert!(json.contains("\"tokio_id\": null,"), "{json}");
        assert_eq!(serde_json::from_str::<WakeGraph>(&json).unwrap(), g);
        let dot = g.to_dot();
        assert!(
            dot.contains("  t1 [shape=box, label=\"p\\ntokio task 34\\nbusy "),
            "{dot}"
        );
        assert!(
            dot.contains("  t4 [shape=box, label=\"q\\\"x\\nbusy "),
            "{dot}"
        );
        let f = g.fold(Fold::Name);
        let ids: Vec<_> = f.tasks.iter().map(|t| (t.id, t.tokio_id)).collect();
        assert_eq!(ids, [(1, Some(34)), (2, None), (4, None)]);
    }

    /// A graph written before nodes had `tokio_id` still reads, as nodes of
    /// no tokio task.
    #[test]
    fn a_graph_written_without_tokio_ids_reads_back() {
        let mut old: serde_json::Value = serde_json::from_str(&graph().to_json()).unwrap();
        for t in old["tasks"].as_array_mut().unwrap() {
            t.as_object_mut().unwrap().remove("tokio_id").unwrap();
        }
        let text = old.to_string();
        assert!(!text.contains("tokio_id"));
        let back: WakeGraph = serde_json::from_str(&text).unwrap();
        assert_eq!(back, graph());
    }
}
