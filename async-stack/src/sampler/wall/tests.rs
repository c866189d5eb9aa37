//! Tests of the wall-clock tick's aggregation: [`Sampling`] driven by
//! hand, tick by tick, through its caches ([`crate::sampler::cache`]),
//! checked against the profile interning by text gives.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use super::Sampling;
use crate::sampler::cache::TaskCache;
use crate::sampler::profile::{
    FrameRef, Grouping, MAX_BUDGET, MIN_BUDGET, Profile, SampleState, StackSample, Weights,
};
use crate::task::registry;
use crate::task::spawned;
use crate::task::traced::TracedExt;

const INTERVAL: Duration = Duration::from_millis(10);

/// A sampler state driven by hand, tick by tick, that never
/// reservoir-samples (other tests' tasks may be live too).
fn sampling(budget: usize) -> Sampling {
    Sampling::new(Profile::new(budget), INTERVAL, usize::MAX, 1)
}

/// Pending on its first poll, ready on the next.
struct YieldOnce(bool);

impl Future for YieldOnce {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<()> {
        if self.0 {
            return Poll::Ready(());
        }
        self.0 = true;
        Poll::Pending
    }
}

fn poll(f: Pin<&mut impl Future>) {
    let mut cx = Context::from_waker(Waker::noop());
    assert!(f.poll(&mut cx).is_pending());
}

/// A task named `name` suspended in `cache-parked` forever: every one
/// has the same stack.
fn parked(name: &str) -> Pin<Box<impl Future<Output = ()> + use<>>> {
    let mut task =
        Box::pin(spawned(std::future::pending::<()>().traced_named("cache-parked")).named(name));
    poll(task.as_mut());
    task
}

/// The stacks of the task named `name`: task id, group, function
/// names root first, state and weights.
fn stacks_named(p: &Profile, name: &str) -> Vec<(u64, String, Vec<String>, SampleState, Weights)> {
    p.stacks()
        .filter(|s| s.task_name() == name)
        .map(|s| {
            let frames = functions(&s);
            (
                s.task_id(),
                s.group().to_owned(),
                frames,
                s.state(),
                s.weights(),
            )
        })
        .collect()
}

/// The functions of a stack's frames, root first.
fn functions(s: &StackSample<'_>) -> Vec<String> {
    s.frames()
        .map(|f| match f {
            FrameRef::Async { function, .. } => function.to_owned(),
            other => format!("{other:?}"),
        })
        .collect()
}

fn off_cpu(samples: u64) -> Weights {
    Weights {
        samples,
        wall_ns: samples * INTERVAL.as_nanos() as u64,
        cpu_ns: 0,
    }
}

/// The record index of task `id`.
fn record_of(id: u64) -> Option<u32> {
    let mut found = None;
    registry::for_each_record(|index, r| {
        if r.id.load(crate::shim::Ordering::Acquire) == id {
            found = Some(index);
        }
    });
    found
}

#[test]
fn a_task_whose_stack_changed_gets_its_new_stack() {
    let mut task = Box::pin(
        spawned(
            async {
                YieldOnce(false).traced_named("cache-first").await;
                std::future::pending::<()>()
                    .traced_named("cache-second")
                    .await;
            }
            .traced_named("cache-root"),
        )
        .named("cache-step"),
    );
    poll(task.as_mut());
    let mut s = sampling(MIN_BUDGET * 4);
    s.tick();
    s.tick();
    // Now at its second `.await`, then sampled twice more (the second
    // time from the cache).
    poll(task.as_mut());
    s.tick();
    s.tick();
    let got = stacks_named(&s.profile, "cache-step");
    let id = got[0].0;
    let path = |leaf: &str| vec!["cache-root".to_owned(), leaf.to_owned()];
    let group = "cache-step".to_owned();
    assert_eq!(
        got,
        [
            (
                id,
                group.clone(),
                path("cache-first"),
                SampleState::OffCpu,
                off_cpu(2)
            ),
            (
                id,
                group,
                path("cache-second"),
                SampleState::OffCpu,
                off_cpu(2)
            ),
        ]
    );
}

#[test]
fn a_recycled_record_does_not_inherit_the_old_task_entry() {
    let mut s = sampling(MIN_BUDGET * 4);
    let a = parked("cache-recycled-a");
    s.tick();
    s.tick();
    let a_id = stacks_named(&s.profile, "cache-recycled-a")[0].0;
    let index = record_of(a_id).expect("task a is live");
    drop(a);
    // The record goes back to this thread's free list, and the next
    // task registered here takes it: same record, same stack, another
    // task.
    let b = parked("cache-recycled-b");
    s.tick();
    let b_id = stacks_named(&s.profile, "cache-recycled-b")[0].0;
    assert_ne!(a_id, b_id);
    assert_eq!(record_of(b_id), Some(index), "the record was reused");
    s.tick();
    s.tick();
    let parked = vec!["cache-parked".to_owned()];
    assert_eq!(
        stacks_named(&s.profile, "cache-recycled-a"),
        [(
            a_id,
            "cache-recycled-a".to_owned(),
            parked.clone(),
            SampleState::OffCpu,
            off_cpu(2)
        )]
    );
    assert_eq!(
        stacks_named(&s.profile, "cache-recycled-b"),
        [(
            b_id,
            "cache-recycled-b".to_owned(),
            parked,
            SampleState::OffCpu,
            off_cpu(3)
        )]
    );
    drop(b);
}

/// The paths (root first) of a tree given as (depth, site) in
/// pre-order: to frame `end` if given, else to every leaf.
fn paths(frames: &[(u32, u32)], end: Option<usize>) -> Vec<Vec<u32>> {
    let path_to = |end: usize| {
        let mut path = vec![frames[end].1];
        let mut depth = frames[end].0;
        for &(d, site) in frames[..end].iter().rev() {
            if d + 1 == depth {
                path.insert(0, site);
                depth = d;
            }
        }
        path
    };
    match end {
        Some(end) => vec![path_to(end)],
        None => (0..frames.len())
            .filter(|&k| frames.get(k + 1).is_none_or(|next| next.0 <= frames[k].0))
            .map(path_to)
            .collect(),
    }
}

/// `Sampling::aggregate` (the caches) and the text path
/// (`Profile::add`, what every sample took before the caches) given
/// the same samples give the same profile, byte for byte: through
/// stacks and roots that change, recycled records, joins, running
/// samples, an unknown site, stacks too long for the hot line, with a
/// budget that sheds again and again and with one that never does.
#[test]
fn the_caches_give_the_profile_interning_by_text_gives() {
    same_profile_as_by_text(MIN_BUDGET, None);
    same_profile_as_by_text(MAX_BUDGET, None);
}

/// The same with fewer cache slots than records (400 records over 64
/// slots, and over one): records share slots and evict each other's
/// entries, and the profile is still the one interning by text gives.
#[test]
fn records_sharing_a_cache_slot_give_the_same_profile() {
    same_profile_as_by_text(MAX_BUDGET, Some(64));
    same_profile_as_by_text(MIN_BUDGET, Some(1));
}

fn same_profile_as_by_text(budget: usize, slots: Option<usize>) {
    use std::panic::Location;
    use std::sync::Arc;

    use crate::record::site::{UNKNOWN_SITE, call_site_for_caller};
    use crate::sampler::labels::{group_of, site_frame};
    use crate::task::TaskState;
    use crate::task::record::{RawTask, TaskName};
    use crate::task::stack::CopiedFrame;

    let site = |name: &'static str| call_site_for_caller(Location::caller(), Some(name)).id();
    let names = ["eq-root", "eq-a", "eq-b", "eq-c", "eq-d", "eq-e"];
    let sites = names.map(site);
    let [root, a, b, c, d, e] = sites;
    let spawn_site = call_site_for_caller(Location::caller(), None);
    let task_names: Vec<Option<Arc<TaskName>>> = (0..7)
        .map(|k| (k > 0).then(|| Arc::new(TaskName::new(format!("eq-task-{k}")))))
        .collect();
    let mut s = sampling(budget);
    if let Some(slots) = slots {
        s.tasks = TaskCache::new(slots);
    }
    let mut reference = Profile::new(budget);
    for tick in 0..8u32 {
        for i in 0..400u32 {
            let recycled = tick >= 4 && i < 100;
            let id = u64::from(i) + if recycled { 10_000 } else { 1 };
            let name = task_names[((i + u32::from(recycled)) % 7) as usize].clone();
            let location = (i % 3 == 0).then_some(spawn_site);
            let frames: Vec<(u32, u32)> = match i % 5 {
                0 => vec![(0, root), (1, a), (2, b)],
                // The root moves too (the group of a task with neither
                // name nor spawn site is its root's function).
                1 => vec![
                    (0, if tick % 2 == 0 { root } else { e }),
                    (1, sites[1 + ((tick + i) % 5) as usize]),
                ],
                2 => vec![(0, root), (1, a), (1, c), (2, d)],
                3 => vec![(0, root), (1, UNKNOWN_SITE)],
                _ => (0..12).map(|k| (k, sites[k as usize % 6])).collect(),
            };
            let running = i % 5 == 0 && tick % 2 == 1;
            let times = 1 + u64::from(i % 3);

            // The caches.
            let last = frames.len() - 1;
            s.copy.frames = frames
                .iter()
                .enumerate()
                .map(|(k, &(depth, site))| CopiedFrame {
                    depth,
                    site,
                    birth: k as u32,
                    running,
                    innermost: running && k == last,
                })
                .collect();
            s.copy.hidden = 0;
            let raw = RawTask {
                id,
                parent: 0,
                location,
                root_site: frames[0].1,
                state: if running {
                    TaskState::Running
                } else {
                    TaskState::Idle
                },
                since_ms: 0,
                polls: 0,
                wakes: 0,
                name: name.clone(),
                tokio: None,
                stack_copied: true,
                torn: 0,
            };
            s.aggregate(i, &raw, times);

            // The text path.
            let (group, _) = group_of(name.as_deref(), location, frames[0].1, Grouping::TaskName);
            let task_name = name.as_deref().map_or("", TaskName::as_str);
            let (state, paths) = if running {
                (SampleState::OnCpu, paths(&frames, Some(last)))
            } else {
                (SampleState::OffCpu, paths(&frames, None))
            };
            let wall = INTERVAL.as_nanos() as u64 * times;
            let n = paths.len() as u64;
            for (j, path) in paths.iter().enumerate() {
                let frames: Vec<_> = path.iter().map(|&x| site_frame(x)).collect();
                let share = wall / n + if j == 0 { wall % n } else { 0 };
                let weights = Weights {
                    samples: times,
                    wall_ns: share,
                    cpu_ns: 0,
                };
                reference.add(&group, id, task_name, state, &frames, weights);
            }
        }
    }
    if budget == MIN_BUDGET {
        assert!(s.profile.epoch() > 2, "the budget shed several times");
    } else {
        assert_eq!(s.profile.epoch(), 0, "the budget never shed");
    }
    assert_eq!(s.profile.epoch(), reference.epoch());
    assert_eq!(s.profile.stats(), reference.stats());
    assert_eq!(s.profile.to_snapshot(), reference.to_snapshot());
}

/// The stacks of tokio task `tokio_id`: task id, group, task name,
/// function names root first, state and weights.
#[cfg(feature = "tokio")]
fn stacks_of_tokio_task(
    p: &Profile,
    tokio_id: u64,
) -> Vec<(u64, String, String, Vec<String>, SampleState, Weights)> {
    p.stacks()
        .filter(|s| s.tokio_id() == Some(tokio_id))
        .map(|s| {
            (
                s.task_id(),
                s.group().to_owned(),
                s.task_name().to_owned(),
                functions(&s),
                s.state(),
                s.weights(),
            )
        })
        .collect()
}

/// The roots of one tokio task, sampled tick by tick while they move and
/// end, through the caches and afresh (a new cache every tick): one task,
/// the first root's id, the name of the root that has one, the tick's
/// interval shared among the roots' stacks; and the same profile either
/// way. When the named root ends, the other is a task of its own again,
/// in its own group.
#[cfg(feature = "tokio")]
#[test]
fn the_roots_of_a_tokio_task_are_one_task_through_the_caches() {
    use ::tokio::sync::oneshot;

    let rt = ::tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let (step_a, at_a) = oneshot::channel::<()>();
    let (end_b, at_b) = oneshot::channel::<()>();
    let a = async move {
        let _ = at_a.traced_named("tt-a1").await;
        std::future::pending::<()>().traced_named("tt-a2").await;
    }
    .traced_named("tt-root-a");
    let b = spawned(
        async move {
            let _ = at_b.traced_named("tt-b1").await;
        }
        .traced_named("tt-root-b"),
    )
    .named("tt-b");
    let h = rt.spawn(async move {
        ::tokio::join!(a, b);
    });
    let tokio_id: u64 = h.id().to_string().parse().unwrap();
    let drive = || {
        rt.block_on(async {
            for _ in 0..4 {
                ::tokio::task::yield_now().await;
            }
        })
    };
    drive();
    let mut cached = sampling(MIN_BUDGET * 4);
    let mut fresh = sampling(MIN_BUDGET * 4);
    let tick = |cached: &mut Sampling, fresh: &mut Sampling| {
        cached.tick();
        fresh.tasks = TaskCache::new(1024);
        fresh.tick();
    };
    tick(&mut cached, &mut fresh);
    tick(&mut cached, &mut fresh);
    step_a.send(()).unwrap();
    drive();
    tick(&mut cached, &mut fresh);
    end_b.send(()).unwrap();
    drive();
    tick(&mut cached, &mut fresh);
    tick(&mut cached, &mut fresh);

    let got = stacks_of_tokio_task(&cached.profile, tokio_id);
    let id = got[0].0;
    let s = |v: &[&str]| v.iter().map(|&f| f.to_owned()).collect::<Vec<_>>();
    let half = |samples: u64| Weights {
        samples,
        wall_ns: samples * INTERVAL.as_nanos() as u64 / 2,
        cpu_ns: 0,
    };
    let named = |frames: &[&str], w| {
        let (group, name) = ("tt-b".to_owned(), "tt-b".to_owned());
        (id, group, name, s(frames), SampleState::OffCpu, w)
    };
    assert_eq!(
        got,
        [
            named(&["tt-root-a", "tt-a1"], half(2)),
            named(&["tt-root-b", "tt-b1"], half(3)),
            named(&["tt-root-a", "tt-a2"], half(1)),
            (
                id,
                "tt-root-a".to_owned(),
                String::new(),
                s(&["tt-root-a", "tt-a2"]),
                SampleState::OffCpu,
                off_cpu(2)
            ),
        ]
    );
    assert_eq!(got, stacks_of_tokio_task(&fresh.profile, tokio_id));
    drop(rt);
}

/// A record that a task registered at its spawn takes between the tick's
/// scan and its read (the task the scan found has ended) has no stack: the
/// read leaves it out, as the scan would have, and counts nothing, neither
/// a sample nor an inconsistent copy.
#[test]
fn a_task_not_polled_yet_found_by_the_read_is_left_out() {
    let queued = spawned(std::future::pending::<()>().traced_named("wall-queued"))
        .named("wall-queued")
        .preregistered();
    let id = crate::read::dump::dump()
        .tasks
        .iter()
        .find(|t| t.name.as_deref() == Some("wall-queued"))
        .expect("the task is in dumps before its first poll")
        .id;
    let index = record_of(id).expect("its record");
    let record = registry::record(index).expect("a record");
    let mut s = sampling(MIN_BUDGET);
    s.sample(index, record, crate::clock::system_ms(), 1);
    let stats = *s.profile.stats();
    assert_eq!(
        (stats.attempted, stats.ok, stats.dropped_inconsistent),
        (0, 0, 0)
    );
    assert_eq!(s.profile.stacks().count(), 0);
    drop(queued);
}
