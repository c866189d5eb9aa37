//! Reduction of a wake graph to producer/consumer groups (the workload
//! that reproduces them is emitted by [`crate::wake::emit`]).
//!
//! # The rule
//!
//! Deterministic, on the graph as given (per task, or folded):
//!
//! 1. For each task, its **wakes in** are the sum of the edges into it,
//!    from any source. Its **main waker** is the task (not itself) with the
//!    most wakes into it; a tie goes to the smaller label, then the
//!    smaller id.
//! 2. A task **belongs** to its main waker if that waker accounts for at
//!    least [`ReduceOptions::min_share`] of its wakes in (0.5 by default).
//! 3. Tasks linked by "belongs to", in either direction, form a
//!    **group**; a task linked to none is **independent**.
//! 4. A group's **producer** is the member whose wakes come least from the
//!    rest of the group (the one driven from outside: a timer, I/O, another
//!    thread); a tie goes to the smaller label, then the smaller id. Every
//!    other member is a **consumer**. A group **waits for replies** when
//!    its consumers wake the producer at least half as often as it wakes
//!    them (request/response).
//! 5. Members with the same label are then merged into one [`Member`] with
//!    an instance count (four consumers named `consumer` are one member ×4).
//!
//! Edge weights are kept: each member says how often the rest of its group
//! woke it, and per wake, how long it was busy and idle.
//!
//! One level only, as in the seed this follows: in a chain `a → b → c`, `c`
//! belongs to `b` and `b` to `a`, so all three form one group with producer
//! `a` and consumers `b` and `c`.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::graph::{WakeGraph, WakeSource};
use super::node::TaskNode;

/// Settings of [`WakeGraph::reduce`].
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct ReduceOptions {
    /// The least share of a task's wakes that its main waker must account
    /// for, for the task to belong to it: `0.0..=1.0`, 0.5 by default.
    pub min_share: f64,
}

impl Default for ReduceOptions {
    fn default() -> Self {
        ReduceOptions { min_share: 0.5 }
    }
}

/// Tasks with one label in a group (or among the independent tasks).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Member {
    /// The tasks' label ([`TaskNode::label`]).
    pub label: String,
    /// How many tasks.
    pub instances: u64,
    /// Their ids, in order.
    pub task_ids: Vec<u64>,
    /// Wakes into them from any source.
    pub wakes: u64,
    /// Of those, wakes from the rest of their group (0 for independent
    /// tasks).
    pub wakes_from_group: u64,
    /// Polls.
    pub polls: u64,
    /// Time inside `poll`, in nanoseconds.
    pub busy_ns: u64,
    /// Time from `Pending` to a wake, in nanoseconds.
    pub idle_ns: u64,
}

impl Member {
    /// Busy time per wake (per poll if never woken).
    pub fn busy_per_wake(&self) -> Duration {
        Duration::from_nanos(self.busy_ns / self.wakes.max(1))
    }

    /// Idle time per wake (per poll if never woken).
    pub fn idle_per_wake(&self) -> Duration {
        Duration::from_nanos(self.idle_ns / self.wakes.max(1))
    }

    /// Busy time over idle time (`f64::INFINITY` if never idle).
    pub fn busy_idle_ratio(&self) -> f64 {
        if self.idle_ns == 0 {
            f64::INFINITY
        } else {
            self.busy_ns as f64 / self.idle_ns as f64
        }
    }
}

/// A producer and the consumers that belong to it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Group {
    /// The member driven from outside the group.
    pub producer: Member,
    /// The others, ordered by label.
    pub consumers: Vec<Member>,
    /// Wakes from the producer to its consumers.
    pub producer_wakes: u64,
    /// Wakes from the consumers back to the producer.
    pub reply_wakes: u64,
    /// Whether the consumers answer the producer (request/response).
    pub waits_for_replies: bool,
}

/// What [`WakeGraph::reduce`] found.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Reduction {
    /// The settings used.
    pub options: ReduceOptions,
    /// The groups, ordered by producer label.
    pub groups: Vec<Group>,
    /// Tasks in no group, ordered by label.
    pub independent: Vec<Member>,
}

impl WakeGraph {
    /// Reduces the graph to producer/consumer groups (the rule is in the
    /// module docs of [`crate::wake`]'s `reduce`: see [`Reduction`]).
    /// `min_share` outside `0.0..=1.0` (or NaN) is clamped into it (NaN:
    /// the default).
    pub fn reduce(&self, options: ReduceOptions) -> Reduction {
        let min_share = if options.min_share.is_nan() {
            ReduceOptions::default().min_share
        } else {
            options.min_share.clamp(0.0, 1.0)
        };
        let options = ReduceOptions { min_share };
        let n = self.tasks.len();
        let index: BTreeMap<u64, usize> = self
            .tasks
            .iter()
            .enumerate()
            .map(|(i, t)| (t.id, i))
            .collect();
        // Wakes in, and per task source, for each task.
        let mut wakes_in = vec![0u64; n];
        let mut by_task: Vec<BTreeMap<usize, u64>> = vec![BTreeMap::new(); n];
        for e in &self.edges {
            let Some(&to) = index.get(&e.to) else {
                continue;
            };
            wakes_in[to] = wakes_in[to].saturating_add(e.wakes);
            if let WakeSource::Task(from) = e.from
                && let Some(&from) = index.get(&from)
            {
                let c = by_task[to].entry(from).or_insert(0);
                *c = c.saturating_add(e.wakes);
            }
        }
        let order = |i: usize| (&self.tasks[i].label, self.tasks[i].id);
        // Belongs-to links, joined into groups.
        let mut sets = UnionFind::new(n);
        for to in 0..n {
            let best = by_task[to]
                .iter()
                .filter(|&(&from, _)| from != to)
                .max_by(|a, b| a.1.cmp(b.1).then_with(|| order(*b.0).cmp(&order(*a.0))));
            if let Some((&from, &count)) = best
                && wakes_in[to] > 0
                && count as f64 >= min_share * wakes_in[to] as f64
            {
                sets.join(from, to);
            }
        }
        let mut components: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
        for i in 0..n {
            components.entry(sets.find(i)).or_default().push(i);
        }
        let mut groups = Vec::new();
        let mut independent = Vec::new();
        for members in components.into_values() {
            if members.len() < 2 {
                independent.extend(members);
                continue;
            }
            let in_group: std::collections::BTreeSet<usize> = members.iter().copied().collect();
            let from_group = |i: usize| -> u64 {
                by_task[i]
                    .iter()
                    .filter(|&(&from, _)| from != i && in_group.contains(&from))
                    .map(|(_, &c)| c)
                    .fold(0, u64::saturating_add)
            };
            let share = |i: usize| {
                if wakes_in[i] == 0 {
                    0.0
                } else {
                    from_group(i) as f64 / wakes_in[i] as f64
                }
            };
            let producer = *members
                .iter()
                .min_by(|&&a, &&b| {
                    share(a)
                        .total_cmp(&share(b))
                        .then_with(|| order(a).cmp(&order(b)))
                })
                .expect("a group has members");
            let consumers: Vec<usize> =
                members.iter().copied().filter(|&i| i != producer).collect();
            let producer_wakes: u64 = consumers
                .iter()
                .map(|&c| by_task[c].get(&producer).copied().unwrap_or(0))
                .fold(0, u64::saturating_add);
            let reply_wakes: u64 = consumers
                .iter()
                .map(|&c| by_task[producer].get(&c).copied().unwrap_or(0))
                .fold(0, u64::saturating_add);
            let member =
                |ids: &[usize]| merge(ids.iter().map(|&i| (&self.tasks[i], from_group(i))));
            groups.push(Group {
                producer: member(&[producer]),
                consumers: by_label(&consumers, &self.tasks)
                    .into_values()
                    .map(|ids| member(&ids))
                    .collect(),
                producer_wakes,
                reply_wakes,
                waits_for_replies: producer_wakes > 0
                    && reply_wakes.saturating_mul(2) >= producer_wakes,
            });
        }
        groups.sort_by(|a, b| {
            a.producer
                .label
                .cmp(&b.producer.label)
                .then(a.producer.task_ids.cmp(&b.producer.task_ids))
        });
        let independent = by_label(&independent, &self.tasks)
            .into_values()
            .map(|ids| merge(ids.iter().map(|&i| (&self.tasks[i], 0))))
            .collect();
        Reduction {
            options,
            groups,
            independent,
        }
    }
}

/// Task indices grouped by label (ordered), each list in id order.
fn by_label(indices: &[usize], tasks: &[TaskNode]) -> BTreeMap<String, Vec<usize>> {
    let mut out: BTreeMap<String, Vec<usize>> = BTreeMap::new();
    for &i in indices {
        out.entry(tasks[i].label.clone()).or_default().push(i);
    }
    for ids in out.values_mut() {
        ids.sort_by_key(|&i| tasks[i].id);
    }
    out
}

/// One member from its tasks and their wakes from the rest of the group.
fn merge<'a>(tasks: impl Iterator<Item = (&'a TaskNode, u64)>) -> Member {
    let mut m = Member {
        label: String::new(),
        instances: 0,
        task_ids: Vec::new(),
        wakes: 0,
        wakes_from_group: 0,
        polls: 0,
        busy_ns: 0,
        idle_ns: 0,
    };
    for (t, from_group) in tasks {
        if m.label.is_empty() {
            m.label = t.label.clone();
        }
        m.instances = m.instances.saturating_add(t.instances);
        m.task_ids.push(t.id);
        m.wakes = m.wakes.saturating_add(t.wakes);
        m.wakes_from_group = m.wakes_from_group.saturating_add(from_group);
        m.polls = m.polls.saturating_add(t.total_poll_count);
        m.busy_ns = m.busy_ns.saturating_add(t.total_poll_duration_ns);
        m.idle_ns = m.idle_ns.saturating_add(t.total_idle_duration_ns);
    }
    m
}

struct UnionFind {
    parent: Vec<usize>,
}

impl UnionFind {
    fn new(n: usize) -> Self {
        UnionFind {
            parent: (0..n).collect(),
        }
    }

    fn find(&mut self, mut i: usize) -> usize {
        while self.parent[i] != i {
            self.parent[i] = self.parent[self.parent[i]];
            i = self.parent[i];
        }
        i
    }

    /// Joins two sets; the smaller root index stays the root, so the result
    /// does not depend on the order of joins.
    fn join(&mut self, a: usize, b: usize) {
        let (a, b) = (self.find(a), self.find(b));
        let (keep, other) = (a.min(b), a.max(b));
        self.parent[other] = keep;
    }
}

impl Reduction {
    /// The structure alone, one line per group
    /// (`producer -> [consumer×4] replies=false`), then one per
    /// independent label (`independent ticker×1`): what two reductions
    /// must share to have found the same groups, whatever their times.
    pub fn structure(&self) -> Vec<String> {
        let groups = self.groups.iter().map(|g| {
            let consumers: Vec<String> = g
                .consumers
                .iter()
                .map(|c| format!("{}×{}", c.label, c.instances))
                .collect();
            format!(
                "{} -> [{}] replies={}",
                g.producer.label,
                consumers.join(", "),
                g.waits_for_replies
            )
        });
        let independent = self
            .independent
            .iter()
            .map(|m| format!("independent {}×{}", m.label, m.instances));
        groups.chain(independent).collect()
    }

    /// Every member (producers, consumers, independent tasks), sorted by
    /// label: what a replay is compared with its recording by, member by
    /// member.
    pub fn members(&self) -> Vec<&Member> {
        let mut out: Vec<&Member> = self
            .groups
            .iter()
            .flat_map(|g| std::iter::once(&g.producer).chain(&g.consumers))
            .chain(&self.independent)
            .collect();
        out.sort_by(|a, b| a.label.cmp(&b.label));
        out
    }

    /// A one-screen summary: each group with its producer and consumers
    /// (instances, wakes from the group, busy and idle per wake), then the
    /// independent tasks.
    pub fn summary(&self) -> String {
        use std::fmt::Write as _;
        let line = |out: &mut String, role: &str, m: &Member| {
            let _ = writeln!(
                out,
                "  {role:<9} {:<24} ×{:<3} wakes {:>6} ({:>5.1}% from group)  busy/wake {:>9.3?}  idle/wake {:>9.3?}",
                m.label,
                m.instances,
                m.wakes,
                if m.wakes == 0 {
                    0.0
                } else {
                    100.0 * m.wakes_from_group as f64 / m.wakes as f64
                },
                m.busy_per_wake(),
                m.idle_per_wake(),
            );
        };
        let mut out = String::new();
        for (i, g) in self.groups.iter().enumerate() {
            let _ = writeln!(
                out,
                "group {} ({} wakes to consumers{}):",
                i + 1,
                g.producer_wakes,
                if g.waits_for_replies {
                    format!(", {} replies", g.reply_wakes)
                } else {
                    String::new()
                }
            );
            line(&mut out, "producer", &g.producer);
            for c in &g.consumers {
                line(&mut out, "consumer", c);
            }
        }
        if !self.independent.is_empty() {
            let _ = writeln!(out, "independent:");
            for m in &self.independent {
                line(&mut out, "task", m);
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn structure(r: &Reduction) -> Vec<String> {
        r.structure()
    }
    use crate::task::probe::{Counters, TaskDetails};
    use crate::wake::WakeEdge;
    use crate::wake::workload::Workload;

    fn node(id: u64, label: &str, wakes: u64) -> TaskNode {
        let meta = TaskDetails {
            name: Some(label.to_owned()),
            ..TaskDetails::default()
        };
        let c = Counters {
            wakes,
            polls: wakes + 1,
            busy_ns: 1000 * wakes,
            idle_ns: 4000 * wakes,
            ..Counters::default()
        };
        crate::wake::node::tests_support::node(id, &meta, c)
    }

    fn edge(from: WakeSource, to: u64, wakes: u64) -> WakeEdge {
        WakeEdge { from, to, wakes }
    }

    use WakeSource::{Runtime, Task};

    /// 1 producer → 4 consumers, two request/response pairs whose clients
    /// also sleep, one timer task, and a task nobody wakes.
    fn known() -> WakeGraph {
        WakeGraph {
            tasks: vec![
                node(1, "producer", 100),
                node(2, "consumer", 100),
                node(3, "consumer", 100),
                node(4, "consumer", 98),
                node(5, "consumer", 100),
                node(6, "client-1", 100),
                node(7, "server-1", 50),
                node(8, "client-2", 100),
                node(9, "server-2", 50),
                node(10, "ticker", 40),
                node(11, "main", 0),
            ],
            edges: vec![
                edge(Runtime, 1, 100),
                edge(Task(1), 2, 100),
                edge(Task(1), 3, 100),
                edge(Task(1), 4, 98),
                edge(Task(1), 5, 100),
                edge(Runtime, 6, 50),
                edge(Task(7), 6, 50),
                edge(Task(6), 7, 50),
                edge(Runtime, 8, 51),
                edge(Task(9), 8, 49),
                edge(Task(8), 9, 50),
                edge(Runtime, 10, 40),
            ],
            dropped_tasks: 0,
            folded: None,
        }
    }

    #[test]
    fn finds_the_groups_of_a_known_graph() {
        let r = known().reduce(ReduceOptions::default());
        assert_eq!(
            structure(&r),
            [
                "client-1 -> [server-1×1] replies=true",
                "client-2 -> [server-2×1] replies=true",
                "producer -> [consumer×4] replies=false",
                "independent main×1",
                "independent ticker×1",
            ]
        );
        let g = &r.groups[2];
        assert_eq!(g.producer_wakes, 398);
        assert_eq!(g.consumers[0].task_ids, [2, 3, 4, 5]);
        assert_eq!(g.consumers[0].wakes_from_group, 398);
        assert_eq!(g.consumers[0].busy_per_wake(), Duration::from_nanos(1000));
        assert_eq!(r.groups[1].reply_wakes, 49);
    }

    #[test]
    fn a_folded_graph_reduces_to_the_same_groups() {
        let g = known();
        assert_eq!(
            structure(
                &g.fold(crate::wake::Fold::Name)
                    .reduce(ReduceOptions::default())
            ),
            structure(&g.reduce(ReduceOptions::default()))
        );
    }

    #[test]
    fn a_consumer_woken_mostly_elsewhere_stays_independent() {
        let mut g = known();
        // Consumer 5 now gets most of its wakes from the runtime.
        g.edges.push(edge(Runtime, 5, 101));
        g.edges.sort_by_key(|e| (e.to, e.from));
        let r = g.reduce(ReduceOptions::default());
        assert_eq!(r.groups[2].consumers[0].instances, 3);
        assert!(structure(&r).contains(&"independent consumer×1".to_owned()));
        // With a lower threshold it belongs again.
        let r = g.reduce(ReduceOptions { min_share: 0.4 });
        assert_eq!(r.groups[2].consumers[0].instances, 4);
    }

    #[test]
    fn the_result_does_not_depend_on_edge_order_and_bad_shares_are_clamped() {
        let g = known();
        let mut reversed = g.clone();
        reversed.edges.reverse();
        reversed.tasks.reverse();
        reversed.tasks.sort_by_key(|t| t.id);
        assert_eq!(
            g.reduce(ReduceOptions::default()),
            reversed.reduce(ReduceOptions::default())
        );
        assert_eq!(
            g.reduce(ReduceOptions {
                min_share: f64::NAN
            })
            .options
            .min_share,
            0.5
        );
        assert_eq!(
            g.reduce(ReduceOptions { min_share: 7.0 }).options.min_share,
            1.0
        );
        // An empty graph has nothing.
        let empty = WakeGraph {
            tasks: vec![],
            edges: vec![],
            dropped_tasks: 0,
            folded: None,
        };
        assert_eq!(
            structure(&empty.reduce(ReduceOptions::default())),
            Vec::<String>::new()
        );
    }

    #[test]
    fn the_workload_of_a_known_graph_has_its_groups_and_rates() {
        let r = known().reduce(ReduceOptions::default());
        let w = r.workload(Duration::from_secs(2)).unwrap();
        assert_eq!(w.duration_ms, 2000);
        let names: Vec<_> = w.groups.iter().map(|g| g.producer.name.as_str()).collect();
        assert_eq!(names, ["client-1", "client-2", "producer"]);
        let p = &w.groups[2];
        assert_eq!(p.name, "group 3: producer");
        // 398 wakes of 4 consumers: 99 cycles. The producer was busy
        // 100 µs and idle 400 µs in all: 1 µs and 4 µs per cycle.
        assert_eq!(p.producer.fan_out, 4);
        assert!(!p.producer.waits_for_replies);
        assert_eq!(p.producer.busy_us_per_cycle, 1);
        assert_eq!(p.producer.sleep_us_per_cycle, 4);
        assert_eq!(p.consumers.len(), 1);
        assert_eq!(
            (p.consumers[0].name.as_str(), p.consumers[0].instances),
            ("consumer", 4)
        );
        let pair = &w.groups[0];
        assert!(pair.producer.waits_for_replies);
        assert_eq!(pair.producer.fan_out, 1);
        // The ticker was woken; `main` never was, so it is left out.
        let independent: Vec<_> = w
            .independent
            .iter()
            .map(|i| (i.name.as_str(), i.period_us))
            .collect();
        assert_eq!(independent, [("ticker", Workload::MIN_PERIOD_US)]);
        // And it reads back.
        assert_eq!(Workload::from_json(&w.to_json()).unwrap(), w);
    }

    #[test]
    fn nothing_to_replay_is_an_error() {
        let empty = WakeGraph {
            tasks: vec![],
            edges: vec![],
            dropped_tasks: 0,
            folded: None,
        };
        let err = empty
            .reduce(ReduceOptions::default())
            .workload(Duration::from_secs(1))
            .unwrap_err();
        assert!(!err.to_string().is_empty());
    }

    proptest::proptest! {
        /// Any graph (as a user could deserialise one): reducing, folding
        /// and emitting never panic, every task lands in exactly one
        /// place, and the result does not depend on edge order.
        #[test]
        fn any_graph_reduces_without_panic(
            tasks in proptest::collection::vec((0u64..12, 0u8..4, proptest::num::u64::ANY), 0..12),
            edges in proptest::collection::vec((0u64..14, 0u64..12, proptest::num::u64::ANY), 0..30),
            share in proptest::num::f64::ANY,
        ) {
            let mut g = WakeGraph { tasks: vec![], edges: vec![], dropped_tasks: 0, folded: None };
            for (id, label, big) in tasks {
                if g.task(id).is_none() {
                    let mut t = node(id, &format!("l{label}"), 3);
                    t.total_poll_duration_ns = big;
                    t.total_idle_duration_ns = big;
                    t.wakes = big;
                    t.instances = big;
                    g.tasks.push(t);
                    g.tasks.sort_by_key(|t| t.id);
                }
            }
            for (from, to, wakes) in edges {
                let from = match from {
                    12 => WakeSource::Runtime,
                    13 => WakeSource::Thread,
                    id => WakeSource::Task(id),
                };
                g.edges.push(WakeEdge { from, to, wakes });
            }
            let opts = ReduceOptions { min_share: share };
            let r = g.reduce(opts);
            let placed: u64 = r
                .groups
                .iter()
                .flat_map(|g| std::iter::once(&g.producer).chain(&g.consumers))
                .chain(&r.independent)
                .map(|m| m.task_ids.len() as u64)
                .sum();
            proptest::prop_assert_eq!(placed, g.tasks.len() as u64);
            let mut reversed = g.clone();
            reversed.edges.reverse();
            proptest::prop_assert_eq!(&reversed.reduce(opts), &r);
            let _ = g.fold(crate::wake::Fold::Name).reduce(opts);
            let _ = g.fold(crate::wake::Fold::SpawnSite).to_dot();
            let _ = r.summary();
            if let Ok(w) = r.workload(Duration::from_millis(5)) {
                proptest::prop_assert!(w.validate().is_ok());
            }
        }
    }
}
