//! [`Profile`]: samples aggregated by interned stack, within a memory
//! budget.
//!
//! # Model
//!
//! - **Strings**, **modules** (a binary or shared library: path and build
//!   id), **frames** and **stacks** are interned tables; a stack is a list
//!   of frame ids, root first.
//! - An **entry** is one (group, task, state, stack) with its [`Weights`]:
//!   sample count, wall time and CPU time. Its group is the task's name,
//!   or its spawn site (see [`Grouping`]).
//! - Async frames are stored as text (function, file, line, column), and
//!   native frames as module and offset in it, so that a profile saved by
//!   one process symbolises in another while the binary is at hand.
//!
//! # Memory budget
//!
//! The profile counts the bytes its tables take (hash-map overhead
//! included, as an estimate). When an insertion takes it over its budget,
//! it sheds detail until it is back under three quarters of it:
//!
//! 1. entries are folded, lowest weight first, into one entry per group
//!    and state whose stack is the synthetic frame `[cleared]`, so that
//!    per-group and total weights stay exact ([`Stats::cleared_stacks`]);
//!    (a stack that other entries still use stays, so many tasks on one
//!    stack fold until enough entries are gone);
//! 2. only when every entry is folded and that is not enough, whole
//!    groups are dropped, lowest weight first, and their weights are
//!    counted in [`Stats::dropped_groups`] and [`Stats::dropped`].

use std::borrow::Borrow;
use std::collections::HashMap;
use std::hash::{BuildHasher, BuildHasherDefault, Hash, RandomState};

use hashbrown::HashTable;

use rustc_hash::FxHasher;

use serde::Serialize;

use crate::read::verify::{MAX_MISMATCHES, Mismatch};

/// The default memory budget of a profile: 4 MiB.
pub const DEFAULT_BUDGET: usize = 4 << 20;
/// The largest memory budget a profile accepts: 20 MiB.
pub const MAX_BUDGET: usize = 20 << 20;
/// The smallest memory budget a profile accepts: 64 KiB.
pub const MIN_BUDGET: usize = 64 << 10;

/// The weights of a stack: how many samples, and the wall and CPU time
/// they stand for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, serde::Deserialize)]
pub struct Weights {
    /// Samples, reweighted when the sampler sampled a subset of tasks in a
    /// tick (see [`SamplerBuilder::max_tasks_per_tick`](super::SamplerBuilder::max_tasks_per_tick)).
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
    fn rank(&self) -> (u64, u64) {
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

/// How samples are grouped: the first frame of every exported stack.
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
    /// Task stacks the sampler tried to read: `ok + dropped_torn +
    /// dropped_inconsistent`.
    pub attempted: u64,
    /// Samples recorded.
    pub ok: u64,
    /// Copies that raced with the task's thread and were retried.
    pub retried: u64,
    /// Samples dropped because every copy raced with a writer.
    pub dropped_torn: u64,
    /// Samples dropped because what was read did not form one stack (no
    /// root, or an on-CPU signal found a half-written stack).
    pub dropped_inconsistent: u64,
    /// Samples whose stack was cut at the depth limit, or that had frames
    /// the published stack could not hold.
    pub truncated: u64,
    /// Tasks skipped by the per-tick limit (their weight went to the
    /// sampled ones).
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

/// Where a native frame's code lives: a binary or shared library.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Module {
    /// Path of the file (string id).
    pub(crate) path: u32,
    /// The GNU build id, empty if the file has none.
    pub(crate) build_id: Vec<u8>,
}

/// One interned frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Frame {
    /// An async frame: function, and where it is (its `.await`, or its
    /// definition when it is at none). Strings are string ids.
    Async {
        function: u32,
        file: u32,
        line: u32,
        column: u32,
    },
    /// A native frame: an address as a module id and an offset from the
    /// module's load address. `call` is set for a return address (an
    /// address after a call): it symbolises as `offset - 1`.
    Native {
        module: u32,
        offset: u64,
        call: bool,
    },
    /// The synthetic frame standing for stacks cleared by the budget.
    Cleared,
}

/// One aggregated (group, task, state, stack).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Entry {
    pub(crate) group: u32,
    pub(crate) task_id: u64,
    /// The task's name (string id; `0` is the empty string).
    pub(crate) task_name: u32,
    pub(crate) state: SampleState,
    pub(crate) stack: u32,
    pub(crate) weights: Weights,
}

/// What an entry is aggregated by: ids of the profile's tables (of one
/// [`epoch`](Profile::epoch)) and the task id.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct EntryKey {
    pub(crate) group: u32,
    pub(crate) task_id: u64,
    pub(crate) task_name: u32,
    pub(crate) state: SampleState,
    pub(crate) stack: u32,
}

impl Entry {
    fn key(&self) -> EntryKey {
        EntryKey {
            group: self.group,
            task_id: self.task_id,
            task_name: self.task_name,
            state: self.state,
            stack: self.stack,
        }
    }
}

/// The hash of an entry's key, by which `Profile::entry_ids` finds it.
fn entry_hash(key: &EntryKey) -> u64 {
    Fx::default().hash_one(key)
}

/// The hasher of the tables keyed by integer ids (see `Cargo.toml`).
type Fx = BuildHasherDefault<FxHasher>;

/// An interning table: values by id, ids by value, hashed by `S`.
///
/// Each value is held once, in `items`; the index `ids` holds only ids,
/// hashed by the value they name, and compares values through `items`. So
/// a table of `n` values takes the values plus about 5 bytes per slot of
/// the index (a `u32` and a control byte), where a map from value to id
/// would hold a second copy of every value.
#[derive(Clone, Debug)]
pub(crate) struct Interner<T: Eq + Hash + Clone, S = RandomState> {
    pub(crate) items: Vec<T>,
    ids: HashTable<u32>,
    hasher: S,
}

impl<T: Eq + Hash + Clone, S: Default> Default for Interner<T, S> {
    fn default() -> Self {
        Interner {
            items: Vec::new(),
            ids: HashTable::new(),
            hasher: S::default(),
        }
    }
}

impl<T: Eq + Hash + Clone, S: BuildHasher + Default> Interner<T, S> {
    /// The id of the value equal to `value`, if there is one. `T` and `Q`
    /// hash alike (the contract of `Borrow`).
    fn find<Q: Eq + Hash + ?Sized>(&self, value: &Q) -> Option<u32>
    where
        T: Borrow<Q>,
    {
        let items = &self.items;
        self.ids
            .find(self.hasher.hash_one(value), |&id| {
                items[id as usize].borrow() == value
            })
            .copied()
    }

    /// Appends `value`, which no item equals, and returns its id.
    fn push_new(&mut self, value: T) -> u32 {
        let id = self.items.len() as u32;
        let hash = self.hasher.hash_one(&value);
        self.items.push(value);
        let (items, hasher) = (&self.items, &self.hasher);
        self.ids
            .insert_unique(hash, id, |&id| hasher.hash_one(&items[id as usize]));
        id
    }

    /// The id of `value`, and whether it is new.
    fn intern(&mut self, value: &T) -> (u32, bool) {
        match self.find(value) {
            Some(id) => (id, false),
            None => (self.push_new(value.clone()), true),
        }
    }

    /// Builds the table from its items (a loaded snapshot); `None` if two
    /// items are equal. The index is sized for the items once, and takes
    /// about 5 to 12 bytes per item.
    pub(crate) fn from_items(items: Vec<T>) -> Option<Self> {
        let hasher = S::default();
        let mut ids = HashTable::with_capacity(items.len());
        for (i, item) in items.iter().enumerate() {
            let hash = hasher.hash_one(item);
            if ids.find(hash, |&id| items[id as usize] == *item).is_some() {
                return None;
            }
            ids.insert_unique(hash, i as u32, |&id| hasher.hash_one(&items[id as usize]));
        }
        Some(Interner { items, ids, hasher })
    }

    pub(crate) fn get(&self, id: u32) -> Option<&T> {
        self.items.get(id as usize)
    }

    pub(crate) fn len(&self) -> usize {
        self.items.len()
    }
}

/// Per-item overhead of an interned value: the item, its index slot and
/// the index's spare capacity, estimated (generously: the estimate dates
/// from a map that held a second copy of every value).
const INTERN_OVERHEAD: usize = 32;

/// A frame as a sampler hands it to the profile, before interning.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) enum RawFrame<'a> {
    Async {
        function: &'a str,
        file: &'a str,
        line: u32,
        column: u32,
    },
    // Only on-CPU samples (not under loom) hold native frames.
    #[cfg_attr(async_stack_loom, allow(dead_code))]
    Native {
        module_path: &'a str,
        build_id: &'a [u8],
        offset: u64,
        call: bool,
    },
}

/// Samples aggregated by stack: the result of a sampler run.
///
/// Read it with [`stacks`](Self::stacks), [`totals`](Self::totals) and
/// [`stats`](Self::stats); export it with `write_folded`, `write_pprof`,
/// `write_json` (and `write_svg` with the `flamegraph` feature); keep it
/// across restarts with `save` and `load`.
#[derive(Clone, Debug)]
pub struct Profile {
    pub(crate) strings: Interner<Box<str>>,
    pub(crate) modules: Interner<Module>,
    pub(crate) frames: Interner<Frame, Fx>,
    pub(crate) stacks: Interner<Box<[u32]>, Fx>,
    pub(crate) entries: Vec<Entry>,
    /// Ids of `entries`, hashed by their key (see [`entry_hash`]).
    entry_ids: HashTable<u32>,
    pub(crate) stats: Stats,
    pub(crate) mismatches: Vec<Mismatch>,
    /// Sampling frequency of the run (of the last run, when resumed).
    pub(crate) frequency_hz: u32,
    pub(crate) grouping: Grouping,
    /// Duration sampled, over every run, in nanoseconds.
    pub(crate) duration_ns: u64,
    /// When the first run started, in nanoseconds since the Unix epoch.
    pub(crate) start_unix_ns: u64,
    pub(crate) budget: usize,
    /// Estimated bytes of the tables.
    bytes: usize,
    /// How many times the tables were rebuilt (see [`epoch`](Self::epoch)).
    epoch: u64,
}

impl Default for Profile {
    fn default() -> Self {
        Profile::new(DEFAULT_BUDGET)
    }
}

impl Profile {
    /// An empty profile with this memory budget (clamped to
    /// [`MIN_BUDGET`]..=[`MAX_BUDGET`]).
    pub(crate) fn new(budget: usize) -> Self {
        let mut p = Profile {
            strings: Interner::default(),
            modules: Interner::default(),
            frames: Interner::default(),
            stacks: Interner::default(),
            entries: Vec::new(),
            entry_ids: HashTable::new(),
            stats: Stats::default(),
            mismatches: Vec::new(),
            frequency_hz: 0,
            grouping: Grouping::default(),
            duration_ns: 0,
            start_unix_ns: 0,
            budget: budget.clamp(MIN_BUDGET, MAX_BUDGET),
            bytes: 0,
            epoch: 0,
        };
        p.string("");
        p
    }

    /// Rebuilds a profile from decoded tables (a loaded snapshot). The
    /// caller has checked every id, and built each interned table with
    /// [`Interner::from_items`]; `None` if two entries have the same key.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn from_parts(
        strings: Interner<Box<str>>,
        modules: Interner<Module>,
        frames: Interner<Frame, Fx>,
        stacks: Interner<Box<[u32]>, Fx>,
        entries: Vec<Entry>,
        stats: Stats,
        mismatches: Vec<Mismatch>,
        meta: (u32, Grouping, u64, u64, usize),
    ) -> Option<Profile> {
        let (frequency_hz, grouping, duration_ns, start_unix_ns, budget) = meta;
        let mut entry_ids = HashTable::with_capacity(entries.len());
        for (i, e) in entries.iter().enumerate() {
            let key = e.key();
            let hash = entry_hash(&key);
            if entry_ids
                .find(hash, |&j: &u32| entries[j as usize].key() == key)
                .is_some()
            {
                return None;
            }
            entry_ids.insert_unique(hash, i as u32, |&j| entry_hash(&entries[j as usize].key()));
        }
        let mut p = Profile {
            strings,
            modules,
            frames,
            stacks,
            entries,
            entry_ids,
            stats,
            mismatches,
            frequency_hz,
            grouping,
            duration_ns,
            start_unix_ns,
            budget: budget.clamp(MIN_BUDGET, MAX_BUDGET),
            bytes: 0,
            epoch: 0,
        };
        p.bytes = p.measure();
        Some(p)
    }

    /// The counters of the run(s) that made this profile.
    pub fn stats(&self) -> &Stats {
        &self.stats
    }

    /// The sum of every stack's weights (dropped groups excluded: see
    /// [`Stats::dropped`]).
    pub fn totals(&self) -> Weights {
        let mut w = Weights::default();
        for e in &self.entries {
            w.add(e.weights);
        }
        w
    }

    /// The memory budget, in bytes.
    pub fn budget(&self) -> usize {
        self.budget
    }

    /// The estimated bytes the profile's tables and the
    /// [`mismatches`](Self::mismatches) it keeps take; at most
    /// [`budget`](Self::budget) after every insertion.
    pub fn memory_bytes(&self) -> usize {
        self.bytes
    }

    /// The sampling frequency of the (last) run, in Hz.
    pub fn frequency_hz(&self) -> u32 {
        self.frequency_hz
    }

    /// The total duration sampled, over every run resumed into this
    /// profile.
    pub fn duration(&self) -> std::time::Duration {
        std::time::Duration::from_nanos(self.duration_ns)
    }

    /// How the stacks are grouped.
    pub fn grouping(&self) -> Grouping {
        self.grouping
    }

    /// The first mismatches between live chains and published stacks.
    pub fn mismatches(&self) -> &[Mismatch] {
        &self.mismatches
    }

    /// Every aggregated stack, in insertion order.
    pub fn stacks(&self) -> impl Iterator<Item = StackSample<'_>> + '_ {
        self.entries.iter().map(move |e| StackSample {
            profile: self,
            entry: *e,
        })
    }

    /// Weights per group, heaviest first (ties by name).
    pub fn groups(&self) -> Vec<(String, Weights)> {
        let mut by: HashMap<u32, Weights> = HashMap::new();
        for e in &self.entries {
            by.entry(e.group).or_default().add(e.weights);
        }
        let mut v: Vec<(String, Weights)> = by
            .into_iter()
            .map(|(g, w)| (self.str(g).to_owned(), w))
            .collect();
        v.sort_by(|a, b| b.1.rank().cmp(&a.1.rank()).then_with(|| a.0.cmp(&b.0)));
        v
    }

    pub(crate) fn str(&self, id: u32) -> &str {
        self.strings.get(id).map_or("", |s| s)
    }

    /// The id of string `s`, interned if new.
    pub(crate) fn string(&mut self, s: &str) -> u32 {
        if let Some(id) = self.strings.find(s) {
            return id;
        }
        let id = self.strings.push_new(Box::from(s));
        self.bytes += s.len() * 2 + INTERN_OVERHEAD;
        id
    }

    /// The id of frame `f`, interned (with its strings) if new.
    pub(crate) fn frame(&mut self, f: &RawFrame<'_>) -> u32 {
        let frame = match *f {
            RawFrame::Async {
                function,
                file,
                line,
                column,
            } => Frame::Async {
                function: self.string(function),
                file: self.string(file),
                line,
                column,
            },
            RawFrame::Native {
                module_path,
                build_id,
                offset,
                call,
            } => {
                let path = self.string(module_path);
                let m = Module {
                    path,
                    build_id: build_id.to_vec(),
                };
                let (module, new) = self.modules.intern(&m);
                if new {
                    self.bytes += build_id.len() * 2 + INTERN_OVERHEAD;
                }
                Frame::Native {
                    module,
                    offset,
                    call,
                }
            }
        };
        self.intern_frame(frame)
    }

    fn intern_frame(&mut self, frame: Frame) -> u32 {
        let (id, new) = self.frames.intern(&frame);
        if new {
            self.bytes += 2 * std::mem::size_of::<Frame>() + INTERN_OVERHEAD;
        }
        id
    }

    /// The id of the stack of frame ids `frames`, root first, interned if
    /// new.
    pub(crate) fn stack(&mut self, frames: &[u32]) -> u32 {
        if let Some(id) = self.stacks.find(frames) {
            return id;
        }
        let id = self.stacks.push_new(Box::from(frames));
        self.bytes += frames.len() * 8 + INTERN_OVERHEAD;
        id
    }

    /// Adds one sample (or one reweighted sample) of a stack, given root
    /// first, and keeps the profile within its budget.
    // Only on-CPU samples (not under loom) and tests add by text.
    #[cfg_attr(async_stack_loom, allow(dead_code))]
    pub(crate) fn add(
        &mut self,
        group: &str,
        task_id: u64,
        task_name: &str,
        state: SampleState,
        frames: &[RawFrame<'_>],
        weights: Weights,
    ) {
        let ids: Vec<u32> = frames.iter().map(|f| self.frame(f)).collect();
        let stack = self.stack(&ids);
        let key = EntryKey {
            group: self.string(group),
            task_id,
            task_name: self.string(task_name),
            state,
            stack,
        };
        self.add_interned(key, weights);
    }

    /// How many times the tables were rebuilt by the budget. Every id this
    /// profile handed out (strings, frames, stacks, entry indices) holds
    /// only within one epoch: a caller that keeps ids between insertions
    /// (the sampler's caches) drops them when the epoch moves.
    pub(crate) fn epoch(&self) -> u64 {
        self.epoch
    }

    /// [`add`](Self::add) with the strings and the stack already interned
    /// (ids of the current epoch). Returns the entry's index, for
    /// [`add_to_entry`](Self::add_to_entry), or `None` when the insertion
    /// took the profile over its budget and it shed (a new epoch).
    pub(crate) fn add_interned(&mut self, key: EntryKey, weights: Weights) -> Option<u32> {
        let entry = self.add_entry(key, weights);
        if self.bytes > self.budget {
            self.shed();
            return None;
        }
        Some(entry)
    }

    /// Adds `weights` to entry `entry`, an index
    /// [`add_interned`](Self::add_interned) returned in the current epoch.
    /// The tables do not grow, so the budget holds.
    #[inline]
    pub(crate) fn add_to_entry(&mut self, entry: u32, weights: Weights) {
        self.entries[entry as usize].weights.add(weights);
    }

    fn add_entry(&mut self, key: EntryKey, weights: Weights) -> u32 {
        let hash = entry_hash(&key);
        let entries = &self.entries;
        match self
            .entry_ids
            .find(hash, |&i| entries[i as usize].key() == key)
            .copied()
        {
            Some(i) => {
                self.entries[i as usize].weights.add(weights);
                i
            }
            None => {
                let i = self.entries.len() as u32;
                self.entries.push(Entry {
                    group: key.group,
                    task_id: key.task_id,
                    task_name: key.task_name,
                    state: key.state,
                    stack: key.stack,
                    weights,
                });
                let entries = &self.entries;
                self.entry_ids
                    .insert_unique(hash, i, |&j| entry_hash(&entries[j as usize].key()));
                self.bytes += 2 * std::mem::size_of::<Entry>() + INTERN_OVERHEAD;
                i
            }
        }
    }

    /// The bytes of the tables, counted from scratch.
    pub(crate) fn measure(&self) -> usize {
        let strings: usize = self
            .strings
            .items
            .iter()
            .map(|s| s.len() * 2 + INTERN_OVERHEAD)
            .sum();
        let modules: usize = self
            .modules
            .items
            .iter()
            .map(|m| m.build_id.len() * 2 + INTERN_OVERHEAD)
            .sum();
        let frames = self.frames.len() * (2 * std::mem::size_of::<Frame>() + INTERN_OVERHEAD);
        let stacks: usize = self
            .stacks
            .items
            .iter()
            .map(|s| s.len() * 8 + INTERN_OVERHEAD)
            .sum();
        let entries = self.entries.len() * (2 * std::mem::size_of::<Entry>() + INTERN_OVERHEAD);
        let mismatches: usize = self.mismatches.iter().map(Mismatch::memory_bytes).sum();
        strings + modules + frames + stacks + entries + mismatches
    }

    /// Brings the profile back under three quarters of its budget (see
    /// the module docs): clears the lightest stacks, then drops the
    /// lightest groups.
    pub(crate) fn shed(&mut self) {
        let target = self.budget / 4 * 3;
        // 1. Fold the lightest entries into `[cleared]`, per group and
        // state, until the rebuilt tables fit; again if the estimate fell
        // short and entries are left to clear.
        while self.bytes > target && self.clear_lightest(target) > 0 {}
        // 2. Drop whole groups, lightest first.
        while self.bytes > target {
            let mut by: HashMap<u32, Weights> = HashMap::new();
            for e in &self.entries {
                by.entry(e.group).or_default().add(e.weights);
            }
            let Some((&lightest, &w)) = by
                .iter()
                .min_by(|a, b| a.1.rank().cmp(&b.1.rank()).then(a.0.cmp(b.0)))
            else {
                break;
            };
            self.stats.dropped_groups += 1;
            self.stats.dropped.add(w);
            self.entries.retain(|e| e.group != lightest);
            self.rebuild(|_, _| None);
        }
    }

    /// Folds the lightest entries into `[cleared]` (per group and state)
    /// until the rebuilt tables would fit in `target` bytes, and rebuilds
    /// them; returns how many entries were folded.
    ///
    /// The rebuilt size is estimated from what each folded entry takes
    /// with it: its own bytes, and its stack's (and the stack's frames')
    /// only when it was the last entry (stack) that used them, as many
    /// tasks often share one stack. The rebuild then measures it exactly.
    fn clear_lightest(&mut self, target: usize) -> u64 {
        let mut order: Vec<usize> = (0..self.entries.len())
            .filter(|&i| !self.is_cleared(&self.entries[i]))
            .collect();
        order.sort_by_key(|&i| (self.entries[i].weights.rank(), i));
        // Users of each stack (kept entries) and of each frame (stacks).
        let mut stack_users = vec![0u32; self.stacks.len()];
        for e in &self.entries {
            if let Some(n) = stack_users.get_mut(e.stack as usize) {
                *n += 1;
            }
        }
        let mut frame_users = vec![0u32; self.frames.len()];
        for (id, stack) in self.stacks.items.iter().enumerate() {
            if stack_users[id] > 0 {
                for &f in stack {
                    if let Some(n) = frame_users.get_mut(f as usize) {
                        *n += 1;
                    }
                }
            }
        }
        let entry_bytes = 2 * std::mem::size_of::<Entry>() + INTERN_OVERHEAD;
        let frame_bytes = 2 * std::mem::size_of::<Frame>() + INTERN_OVERHEAD;
        let mut clear = vec![false; self.entries.len()];
        let mut estimate = self.bytes;
        for &i in &order {
            if estimate <= target {
                break;
            }
            clear[i] = true;
            let mut freed = entry_bytes;
            let stack = self.entries[i].stack as usize;
            if let Some(users) = stack_users.get_mut(stack) {
                *users -= 1;
                if *users == 0 {
                    let frames = self.stacks.get(stack as u32).map_or(&[][..], |s| &s[..]);
                    freed += frames.len() * 8 + INTERN_OVERHEAD;
                    for &f in frames {
                        if let Some(n) = frame_users.get_mut(f as usize) {
                            *n -= 1;
                            if *n == 0 {
                                freed += frame_bytes;
                            }
                        }
                    }
                }
            }
            estimate = estimate.saturating_sub(freed);
        }
        let cleared = clear.iter().filter(|&&c| c).count() as u64;
        if cleared == 0 {
            return 0;
        }
        self.stats.cleared_stacks += cleared;
        self.rebuild(|p, e| {
            if clear[e] {
                Some(p.cleared_key(e))
            } else {
                None
            }
        });
        cleared
    }

    fn is_cleared(&self, e: &Entry) -> bool {
        self.stacks
            .get(e.stack)
            .is_some_and(|s| s.len() == 1 && self.frames.get(s[0]) == Some(&Frame::Cleared))
    }

    /// The `[cleared]` entry that entry `i` folds into, as a key into the
    /// old tables, with the stack id `u32::MAX` standing for `[cleared]`.
    fn cleared_key(&self, i: usize) -> EntryKey {
        let e = &self.entries[i];
        EntryKey {
            group: e.group,
            task_id: 0,
            task_name: 0,
            state: e.state,
            stack: u32::MAX,
        }
    }

    /// Rebuilds every table from the entries, keeping only what they use;
    /// `fold(profile, i)` names the key entry `i` is folded into, if any.
    fn rebuild(&mut self, fold: impl Fn(&Profile, usize) -> Option<EntryKey>) {
        let mut fresh = Profile::new(self.budget);
        fresh.stats = self.stats;
        fresh.mismatches = std::mem::take(&mut self.mismatches);
        fresh.bytes += fresh
            .mismatches
            .iter()
            .map(Mismatch::memory_bytes)
            .sum::<usize>();
        fresh.frequency_hz = self.frequency_hz;
        fresh.grouping = self.grouping;
        fresh.duration_ns = self.duration_ns;
        fresh.start_unix_ns = self.start_unix_ns;
        fresh.epoch = self.epoch + 1;
        let mut frames = Vec::new();
        for i in 0..self.entries.len() {
            let e = self.entries[i];
            let key = fold(self, i).unwrap_or_else(|| e.key());
            let stack = if key.stack == u32::MAX {
                let c = fresh.intern_frame(Frame::Cleared);
                fresh.stack(&[c])
            } else {
                frames.clear();
                for &f in self.stacks.get(key.stack).map_or(&[][..], |s| s) {
                    frames.push(self.copy_frame(&mut fresh, f));
                }
                fresh.stack(&frames)
            };
            let new_key = EntryKey {
                group: fresh.string(self.str(key.group)),
                task_id: key.task_id,
                task_name: fresh.string(self.str(key.task_name)),
                state: key.state,
                stack,
            };
            fresh.add_entry(new_key, e.weights);
        }
        *self = fresh;
    }

    /// Frame `f` of this profile, interned in `into`.
    fn copy_frame(&self, into: &mut Profile, f: u32) -> u32 {
        let frame = match self.frames.get(f) {
            Some(&Frame::Async {
                function,
                file,
                line,
                column,
            }) => Frame::Async {
                function: into.string(self.str(function)),
                file: into.string(self.str(file)),
                line,
                column,
            },
            Some(&Frame::Native {
                module,
                offset,
                call,
            }) => {
                let m = self.modules.get(module).cloned().unwrap_or(Module {
                    path: 0,
                    build_id: Vec::new(),
                });
                let path = into.string(self.str(m.path));
                let (module, new) = into.modules.intern(&Module {
                    path,
                    build_id: m.build_id.clone(),
                });
                if new {
                    into.bytes += m.build_id.len() * 2 + INTERN_OVERHEAD;
                }
                Frame::Native {
                    module,
                    offset,
                    call,
                }
            }
            Some(Frame::Cleared) | None => Frame::Cleared,
        };
        into.intern_frame(frame)
    }

    /// Records a mismatch: counted always, and kept in full (counted in
    /// [`memory_bytes`](Self::memory_bytes)) for the first
    /// [`MAX_MISMATCHES`], as long as the kept ones together take at most
    /// an eighth of the budget, so that shedding, which never drops them,
    /// always has the rest to work with.
    #[cfg_attr(async_stack_loom, allow(dead_code))]
    pub(crate) fn add_mismatch(&mut self, m: Mismatch) {
        self.stats.mismatches += 1;
        let kept: usize = self.mismatches.iter().map(Mismatch::memory_bytes).sum();
        let cost = m.memory_bytes();
        if self.mismatches.len() < MAX_MISMATCHES && kept + cost <= self.budget / 8 {
            self.bytes += cost;
            self.mismatches.push(m);
            if self.bytes > self.budget {
                self.shed();
            }
        }
    }
}

/// One aggregated stack of a [`Profile`].
#[derive(Clone, Copy, Debug)]
pub struct StackSample<'a> {
    profile: &'a Profile,
    entry: Entry,
}

/// One frame of a [`StackSample`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FrameRef<'a> {
    /// An async frame: the function and where it is (the `.await` it is
    /// at, or its definition).
    Async {
        /// The function's path.
        function: &'a str,
        /// Source file.
        file: &'a str,
        /// Line (1-based).
        line: u32,
        /// Column (1-based; `0` if unknown).
        column: u32,
    },
    /// A native frame, unsymbolised: the module (binary or shared library)
    /// and the offset of the address from the module's load address.
    Native {
        /// Path of the module.
        module: &'a str,
        /// The module's GNU build id (empty if none).
        build_id: &'a [u8],
        /// Offset in the module.
        offset: u64,
        /// Whether the address is a return address (symbolised as the
        /// call before it).
        call: bool,
    },
    /// The synthetic frame of stacks cleared by the memory budget.
    Cleared,
}

impl<'a> StackSample<'a> {
    /// The group (task name or spawn site): the first frame of exports.
    pub fn group(&self) -> &'a str {
        self.profile.str(self.entry.group)
    }

    /// The sampled task's id (`0` for a `[cleared]` stack).
    pub fn task_id(&self) -> u64 {
        self.entry.task_id
    }

    /// The sampled task's name (empty when unnamed or cleared).
    pub fn task_name(&self) -> &'a str {
        self.profile.str(self.entry.task_name)
    }

    /// On-CPU or off-CPU.
    pub fn state(&self) -> SampleState {
        self.entry.state
    }

    /// The weights of this stack.
    pub fn weights(&self) -> Weights {
        self.entry.weights
    }

    /// The frames, root first: async frames from the task root down, then
    /// (on-CPU samples with native frames) the synchronous frames above
    /// the innermost poll, the leaf last.
    pub fn frames(&self) -> impl ExactSizeIterator<Item = FrameRef<'a>> + 'a {
        let p = self.profile;
        let ids: &'a [u32] = p.stacks.get(self.entry.stack).map_or(&[][..], |s| s);
        ids.iter().map(move |&f| p.frame_ref(f))
    }
}

impl Profile {
    pub(crate) fn frame_ref(&self, f: u32) -> FrameRef<'_> {
        match self.frames.get(f) {
            Some(&Frame::Async {
                function,
                file,
                line,
                column,
            }) => FrameRef::Async {
                function: self.str(function),
                file: self.str(file),
                line,
                column,
            },
            Some(&Frame::Native {
                module,
                offset,
                call,
            }) => {
                let (path, build_id) = self
                    .modules
                    .get(module)
                    .map_or(("", &[][..]), |m| (self.str(m.path), &m.build_id[..]));
                FrameRef::Native {
                    module: path,
                    build_id,
                    offset,
                    call,
                }
            }
            Some(Frame::Cleared) | None => FrameRef::Cleared,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(function: &str, line: u32) -> RawFrame<'_> {
        RawFrame::Async {
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
}
