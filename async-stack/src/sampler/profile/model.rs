//! The **profile** itself: its tables, how samples are added and
//! aggregated, and how a reader walks them ([`StackSample`],
//! [`FrameRef`]).

use std::collections::HashMap;

use hashbrown::HashTable;

use crate::read::verify::{MAX_MISMATCHES, Mismatch};
use crate::sampler::profile::interning::{
    Entry, EntryKey, Frame, Fx, INTERN_OVERHEAD, Interner, Module, SampledTask, entry_hash,
};
use crate::sampler::profile::stats::{Grouping, SampleState, Stats, Weights};

/// The default memory budget of a profile: 4 MiB.
pub const DEFAULT_BUDGET: usize = 4 << 20;
/// The largest memory budget a profile accepts: 20 MiB.
pub const MAX_BUDGET: usize = 20 << 20;
/// The smallest memory budget a profile accepts: 64 KiB.
pub const MIN_BUDGET: usize = 64 << 10;

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
    pub(super) entry_ids: HashTable<u32>,
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
    pub(super) bytes: usize,
    /// How many times the tables were rebuilt (see [`epoch`](Self::epoch)).
    pub(super) epoch: u64,
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

    /// The id of frame `f`, interned (with its strings) if new: a sampler
    /// hands frames over as [`frame_ref`](Self::frame_ref) hands them back.
    pub(crate) fn frame(&mut self, f: &FrameRef<'_>) -> u32 {
        let frame = match *f {
            FrameRef::Async {
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
            FrameRef::Native {
                module,
                build_id,
                offset,
                call,
            } => {
                let path = self.string(module);
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
            FrameRef::Cleared => Frame::Cleared,
        };
        self.intern_frame(frame)
    }

    pub(super) fn intern_frame(&mut self, frame: Frame) -> u32 {
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
    /// first, of a task filed under no tokio task (see
    /// [`add_task`](Self::add_task)).
    #[cfg(test)]
    pub(crate) fn add(
        &mut self,
        group: &str,
        task_id: u64,
        task_name: &str,
        state: SampleState,
        frames: &[FrameRef<'_>],
        weights: Weights,
    ) {
        let task = SampledTask {
            id: task_id,
            tokio_id: 0,
            name: task_name,
        };
        self.add_task(group, task, state, frames, weights);
    }

    /// Adds one sample (or one reweighted sample) of a stack, given root
    /// first, of `task`, and keeps the profile within its budget.
    // Only on-CPU samples (Linux, not under loom) and tests add by text.
    #[cfg_attr(any(async_stack_loom, not(target_os = "linux")), allow(dead_code))]
    pub(crate) fn add_task(
        &mut self,
        group: &str,
        task: SampledTask<'_>,
        state: SampleState,
        frames: &[FrameRef<'_>],
        weights: Weights,
    ) {
        let ids: Vec<u32> = frames.iter().map(|f| self.frame(f)).collect();
        let stack = self.stack(&ids);
        let key = EntryKey {
            group: self.string(group),
            task_id: task.id,
            task_name: self.string(task.name),
            state,
            stack,
        };
        self.add_interned(key, task.tokio_id, weights);
    }

    /// How many times the tables were rebuilt by the budget. Every id this
    /// profile handed out (strings, frames, stacks, entry indices) holds
    /// only within one epoch: a caller that keeps ids between insertions
    /// (the sampler's caches) drops them when the epoch moves.
    pub(crate) fn epoch(&self) -> u64 {
        self.epoch
    }

    /// [`add_task`](Self::add_task) with the strings and the stack
    /// already interned (ids of the current epoch), of a task filed under
    /// tokio task `tokio_id` (`0`: none). Returns the entry's index, for
    /// [`add_to_entry`](Self::add_to_entry), or `None` when the insertion
    /// took the profile over its budget and it shed (a new epoch).
    pub(crate) fn add_interned(
        &mut self,
        key: EntryKey,
        tokio_id: u64,
        weights: Weights,
    ) -> Option<u32> {
        let entry = self.add_entry(key, tokio_id, weights);
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

    pub(super) fn add_entry(&mut self, key: EntryKey, tokio_id: u64, weights: Weights) -> u32 {
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
                    tokio_id,
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

    /// Records a mismatch: counted always, and kept in full (counted in
    /// [`memory_bytes`](Self::memory_bytes)) for the first
    /// [`MAX_MISMATCHES`], as long as the kept ones together take at most
    /// an eighth of the budget, so that shedding, which never drops them,
    /// always has the rest to work with.
    #[cfg_attr(any(async_stack_loom, not(target_os = "linux")), allow(dead_code))]
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
    pub(super) profile: &'a Profile,
    pub(super) entry: Entry,
}

/// One frame of a [`StackSample`] (and, inside the crate, a frame as a
/// sampler hands it to the profile).
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

    /// The sampled task's id (`0` for a `[cleared]` stack): for the roots
    /// of one tokio task, the first root's (see "Tasks" in
    /// [`crate::sampler`]).
    pub fn task_id(&self) -> u64 {
        self.entry.task_id
    }

    /// The id of the tokio task the sampled task is filed under (feature
    /// `tokio`): the number `JoinHandle::id()` displays. Every traced root
    /// polled inside one plain `tokio::spawn` is one task of the profile
    /// (see "Tasks" in [`crate::sampler`]); `None` outside tokio, and for
    /// a `[cleared]` stack.
    pub fn tokio_id(&self) -> Option<u64> {
        (self.entry.tokio_id != 0).then_some(self.entry.tokio_id)
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
