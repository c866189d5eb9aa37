//! Unit tests of the profile: interning, aggregation and the budget.

use std::collections::HashMap;

use super::model::*;
use super::stats::*;

fn f(function: &str, line: u32) -> FrameRef<'_> {
    FrameRef::Async {
        function,
        file: "src/lib.rs",
        line,
        column: 5,
    }
}

fn w(samples: u64) -> Weights {
    Weights {
        samples,
        wall_ns: samples * 10,
        cpu_ns: samples,
    }
}

#[test]
fn samples_of_one_stack_add_up() {
    let mut p = Profile::default();
    let s = [f("root", 1), f("leaf", 2)];
    p.add("g", 1, "t", SampleState::OffCpu, &s, w(1));
    p.add("g", 1, "t", SampleState::OffCpu, &s, w(2));
    p.add("g", 1, "t", SampleState::OnCpu, &s, w(4));
    assert_eq!(p.entries.len(), 2);
    assert_eq!(p.totals(), w(7));
    let first = p.stacks().next().unwrap();
    assert_eq!(first.weights(), w(3));
    let frames: Vec<_> = first.frames().collect();
    assert_eq!(
        frames[1],
        FrameRef::Async {
            function: "leaf",
            file: "src/lib.rs",
            line: 2,
            column: 5
        }
    );
}

#[test]
fn clearing_keeps_group_and_total_weights_exact() {
    let mut p = Profile::new(MIN_BUDGET);
    let mut want: HashMap<String, Weights> = HashMap::new();
    let mut total = Weights::default();
    let names: Vec<String> = (0..4000).map(|i| format!("function_number_{i}")).collect();
    for (i, name) in names.iter().enumerate() {
        let group = format!("group{}", i % 3);
        let weights = w(1 + (i as u64 % 7));
        p.add(
            &group,
            i as u64,
            "",
            SampleState::OffCpu,
            &[f("root", 1), f(name, i as u32)],
            weights,
        );
        want.entry(group).or_default().add(weights);
        total.add(weights);
        assert!(p.memory_bytes() <= p.budget(), "over budget at {i}");
    }
    assert!(p.stats().cleared_stacks > 0);
    assert_eq!(p.stats().dropped_groups, 0);
    assert_eq!(p.totals(), total);
    let got: HashMap<String, Weights> = p.groups().into_iter().collect();
    assert_eq!(got, want);
    assert!(p.stacks().any(|s| s.frames().eq([FrameRef::Cleared])));
    assert_eq!(p.memory_bytes(), p.measure());
}

/// Many tasks on one stack: clearing one of their entries frees the
/// entry, not the stack, which the others still use. Shedding counts
/// it so, clears enough, and drops no group.
#[test]
fn tasks_sharing_one_stack_are_cleared_without_dropping_a_group() {
    let mut p = Profile::new(MIN_BUDGET);
    let frames: Vec<_> = (1..=8).map(|line| f("shared", line)).collect();
    let mut by_group = [Weights::default(), Weights::default()];
    for i in 0..5_000u64 {
        let weights = w(1 + i % 7);
        let (g, group) = if i % 2 == 0 { (0, "even") } else { (1, "odd") };
        p.add(group, i, "", SampleState::OffCpu, &frames, weights);
        by_group[g].add(weights);
        assert!(p.memory_bytes() <= p.budget());
    }
    let s = *p.stats();
    assert!(s.cleared_stacks > 0, "the budget was reached");
    assert_eq!(s.dropped_groups, 0);
    assert_eq!(s.dropped, Weights::default());
    let mut groups = p.groups();
    groups.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(
        groups,
        [
            ("even".to_owned(), by_group[0]),
            ("odd".to_owned(), by_group[1])
        ]
    );
}

#[test]
fn groups_are_dropped_lightest_first_and_counted() {
    let mut p = Profile::new(MIN_BUDGET);
    let mut total = Weights::default();
    // Each group alone costs little, but there are too many of them
    // for the budget even once every stack is cleared.
    for i in 0..20_000u64 {
        let weights = w(1 + i / 1000);
        let group = format!("a_rather_long_group_name_{i:08}");
        p.add(&group, i, "", SampleState::OffCpu, &[f("x", 1)], weights);
        total.add(weights);
        assert!(p.memory_bytes() <= p.budget());
    }
    let s = *p.stats();
    assert!(s.dropped_groups > 0);
    let mut sum = p.totals();
    sum.add(s.dropped);
    assert_eq!(sum, total);
    // The lightest went first: every kept group outweighs every
    // dropped one, so the last groups (heaviest) all remain.
    let kept: Vec<_> = p.groups();
    assert!(kept.iter().any(|(g, _)| g.ends_with("00019999")));
    let min_kept = kept.iter().map(|(_, w)| w.samples).min().unwrap();
    assert!(min_kept >= s.dropped.samples / s.dropped_groups);
}
