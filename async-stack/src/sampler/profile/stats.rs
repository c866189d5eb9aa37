//! A profile's **weights, states and counters**: what each stack weighs
//! ([`Weights`]), the state a sample was taken in ([`SampleState`]), how
//! samples are grouped ([`Grouping`]), and the run's counters
//! ([`Stats`]).

use serde::Serialize;

/// The weights of a stack: how many samples, and the wall and CPU time
/// they stand for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, serde::Deserialize)]
pub struct Weights {
    /// Samples, reweighted when the sampler sampled a subset of tasks in a
    /// tick (see [`SamplerBuilder::max_tasks_per_tick`](crate::sampler::SamplerBuilder::max_tasks_per_tick)).
    pub samples: u64,
    /// Wall-clock time, in nanoseconds: one tick interval per sample.
    pub wall_ns: u64,
    /// CPU time, in nanoseconds, from on-CPU samples.
    pub cpu_ns: u64,
}

impl Weights {
    /// Adds `other` to these weights (saturating).
    pub fn add(&mut self, other: Weights) {
        self.samples = self.samples.saturating_add(other.samples);
        self.wall_ns = self.wall_ns.saturating_add(other.wall_ns);
        self.cpu_ns = self.cpu_ns.saturating_add(other.cpu_ns);
    }

    /// The order in which the budget sheds entries: samples, then time.
    pub(super) fn rank(&self) -> (u64, u64) {
        (self.samples, self.wall_ns.saturating_add(self.cpu_ns))
    }
}

/// Whether a sample caught its task inside a poll.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, serde::Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum SampleState {
    /// The task was being polled: its innermost frame is running.
    OnCpu,
    /// The task was suspended: its innermost frame is the `.await` it
    /// waits on.
    OffCpu,
}

impl SampleState {
    /// `on-cpu` or `off-cpu`, as exported.
    pub fn as_str(self) -> &'static str {
        match self {
            SampleState::OnCpu => "on-cpu",
            SampleState::OffCpu => "off-cpu",
        }
    }
}

/// How samples are grouped: the first frame of every exported stack. The
/// roots of one tokio task are one task, with the name and spawn site of
/// the first root that has one and the root function of the first (see
/// "Tasks" in [`crate::sampler`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Grouping {
    /// By task name; an unnamed task by its spawn site, or else by its
    /// root function.
    #[default]
    TaskName,
    /// By spawn site (`file:line`); a task without one by its root
    /// function.
    SpawnSite,
}

/// Counters of a sampler run, kept in the profile and written into every
/// export. Counters of a resumed profile continue from the loaded ones.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct Stats {
    /// Wall-clock ticks taken.
    pub ticks: u64,
    /// Ticks that started more than one interval late (the sampler thread
    /// was descheduled or a tick overran).
    pub late_ticks: u64,
    /// Tasks the sampler tried to read (the roots of one tokio task count
    /// as one: see "Tasks" in [`crate::sampler`]), and on-CPU samples
    /// taken: `ok + dropped_torn + dropped_inconsistent`.
    pub attempted: u64,
    /// Samples recorded.
    pub ok: u64,
    /// Copies that raced with the task's thread and were retried.
    pub retried: u64,
    /// Samples dropped because every copy raced with a writer (of any
    /// root, for a tokio task's).
    pub dropped_torn: u64,
    /// Samples dropped because what was read did not form one stack (no
    /// root, or an on-CPU signal found a half-written stack).
    pub dropped_inconsistent: u64,
    /// Samples whose stack was cut at the depth limit, or that had frames
    /// the published stack could not hold.
    pub truncated: u64,
    /// Tasks skipped by the per-tick limit (their weight went to the
    /// sampled ones), a tokio task's roots counting as one.
    pub reservoir_skipped: u64,
    /// On-CPU signals taken (Linux).
    pub signals: u64,
    /// On-CPU samples lost: the thread's buffer was full, or the thread
    /// ran with no signal arriving (it blocks the signal, or another
    /// handler took it), counted in periods of its CPU time.
    pub signals_lost: u64,
    /// Samples where the live frame chain and the published stack
    /// disagreed (see the sampler's "Verification").
    pub mismatches: u64,
    /// CPU time of the sampler thread, in nanoseconds.
    pub sampler_cpu_ns: u64,
    /// Time spent in the on-CPU signal handler, in nanoseconds.
    pub handler_ns: u64,
    /// Entries folded into a `[cleared]` stack by the memory budget.
    pub cleared_stacks: u64,
    /// Groups dropped by the memory budget.
    pub dropped_groups: u64,
    /// The weights of the dropped groups.
    pub dropped: Weights,
}

impl Stats {
    /// How many counters [`fields`](Self::fields) lists.
    pub const FIELDS: usize = 19;

    /// Every counter with its name, in declaration order, the dropped
    /// weights as `dropped_samples`, `dropped_wall_ns` and
    /// `dropped_cpu_ns`: what exports and snapshots write.
    pub fn fields(&self) -> [(&'static str, u64); Stats::FIELDS] {
        // Destructured in full, so that a new counter cannot be left out.
        let Stats {
            ticks,
            late_ticks,
            attempted,
            ok,
            retried,
            dropped_torn,
            dropped_inconsistent,
            truncated,
            reservoir_skipped,
            signals,
            signals_lost,
            mismatches,
            sampler_cpu_ns,
            handler_ns,
            cleared_stacks,
            dropped_groups,
            dropped:
                Weights {
                    samples: dropped_samples,
                    wall_ns: dropped_wall_ns,
                    cpu_ns: dropped_cpu_ns,
                },
        } = *self;
        [
            ("ticks", ticks),
            ("late_ticks", late_ticks),
            ("attempted", attempted),
            ("ok", ok),
            ("retried", retried),
            ("dropped_torn", dropped_torn),
            ("dropped_inconsistent", dropped_inconsistent),
            ("truncated", truncated),
            ("reservoir_skipped", reservoir_skipped),
            ("signals", signals),
            ("signals_lost", signals_lost),
            ("mismatches", mismatches),
            ("sampler_cpu_ns", sampler_cpu_ns),
            ("handler_ns", handler_ns),
            ("cleared_stacks", cleared_stacks),
            ("dropped_groups", dropped_groups),
            ("dropped_samples", dropped_samples),
            ("dropped_wall_ns", dropped_wall_ns),
            ("dropped_cpu_ns", dropped_cpu_ns),
        ]
    }

    /// The counters from the values of [`fields`](Self::fields), in its
    /// order.
    pub(crate) fn from_fields(v: [u64; Stats::FIELDS]) -> Stats {
        let [
            ticks,
            late_ticks,
            attempted,
            ok,
            retried,
            dropped_torn,
            dropped_inconsistent,
            truncated,
            reservoir_skipped,
            signals,
            signals_lost,
            mismatches,
            sampler_cpu_ns,
            handler_ns,
            cleared_stacks,
            dropped_groups,
            samples,
            wall_ns,
            cpu_ns,
        ] = v;
        Stats {
            ticks,
            late_ticks,
            attempted,
            ok,
            retried,
            dropped_torn,
            dropped_inconsistent,
            truncated,
            reservoir_skipped,
            signals,
            signals_lost,
            mismatches,
            sampler_cpu_ns,
            handler_ns,
            cleared_stacks,
            dropped_groups,
            dropped: Weights {
                samples,
                wall_ns,
                cpu_ns,
            },
        }
    }
}
