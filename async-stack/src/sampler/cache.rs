//! What the sampler thread remembers between samples, so that a sample
//! whose stack it has seen before costs no hashing and no allocation.
//!
//! The [`Profile`] aggregates by interned ids; interning a sample from its
//! text (function and file names, the group, the task name) hashes and
//! compares every string of it. The sampler reads ids already: the site
//! ids of the published stack (see [`crate::record::site`]) and the task
//! id. Two caches map those to the profile's ids:
//!
//! - [`SiteFrames`]: site id to frame id. A site is resolved to text and
//!   interned once per profile epoch.
//! - [`TaskCache`]: per record index, the task the record held when last
//!   sampled, the sources of its labels (group and name), the tokio task
//!   it is filed under (which the tick's scan reads: see
//!   [`crate::sampler::tokio_tasks`]), and its last sample: the *shape*
//!   (the state and the site path of every stack it gave) with the entry
//!   each stack was added to. A task sampled again with the same shape
//!   adds its weights to those entries directly.
//!   A tokio task of several roots, sampled as one task, keeps its last
//!   sample in its first root's slot, with the task ids of the roots its
//!   labels come from.
//!
//! # Invariants
//!
//! - Every profile id held here is of one [`Profile::epoch`], recorded
//!   beside it; ids of another epoch are never used (the budget's shedding
//!   renumbers every table and starts a new epoch).
//! - A record's entry holds for the task id it names only. Task ids are
//!   never reused, so a record that now holds another task (recycled)
//!   never inherits the previous task's labels or entries.
//! - A task's labels' sources (its name and spawn location) do not change
//!   while it lives (see [`TaskRecord::read_tries_with`]); its group may
//!   still depend on its root's site, which is part of the key of the
//!   cached label ids.
//! - A shape determines its entries: the entry key is (group, task, name,
//!   state, stack), the group and name are the task's (for its root site,
//!   the first site of every path), and the stack is the path's frames.
//!   For a tokio task of several roots, the group and name come from the
//!   roots its sources' key names (the first, the first named, the first
//!   with a spawn location), and from the first root's root site: a
//!   change of any of them drops its last sample.
//!
//! Weights are added exactly as an insertion by text would add them, and
//! new ids are interned in the same order, so the profile is the same
//! table for table.
//!
//! # Memory
//!
//! The per-record cache takes 184 bytes per slot (a 64-byte hot line, the
//! rest, the tokio task, and a pointer to a tokio task's last sample),
//! plus the shapes that do not fit the hot line and the last samples of
//! tokio tasks of several roots (168 bytes each, in their first root's
//! slot, so at most one per slot), and has at most
//! [`TaskCache::slots_for_budget`] slots: the profile's memory budget
//! divided by 184, rounded down to a power of two, and at least 1,024. So
//! it holds about as much as the budget whatever the number of tasks (a
//! million tasks would otherwise hold 184 MB). It grows with the highest
//! record index sampled, up to that bound; past it, record `i` takes slot
//! `i mod slots`. Slots are tagged with the task id (ids are never
//! reused), so a task whose slot another task took since is read as a new
//! task: slower, never wrong. With more live tasks than
//! [`SamplerBuilder::max_tasks_per_tick`] a tick samples a different subset
//! each time anyway, so a task seldom finds its last sample cached.
//!
//! [`SamplerBuilder::max_tasks_per_tick`]: super::SamplerBuilder::max_tasks_per_tick
//!
//! [`TaskRecord::read_tries_with`]: crate::task::record::TaskRecord::read_tries_with

use std::sync::Arc;

use super::MAX_DEPTH;
use super::labels::{Sources, group_of, resolve_site, site_frame};
use super::profile::{EntryKey, Profile, SampleState, Weights};
use crate::record::site::CallSite;
use crate::record::site::SiteId;
use crate::shim::Ordering;
use crate::task::TaskState;
use crate::task::record::{RawTask, TaskName, TaskRecord, spawn};
use crate::task::stack::StackCopy;
use crate::task::tokio_task::TokioTask;

/// Site ids from this one up are looked up every time rather than cached
/// (ids are handed out in order from 1, so programs stay far below it; the
/// bound keeps the tables small whatever a word holds).
const MAX_CACHED_SITE: usize = 1 << 20;

/// No frame id cached.
const NONE: u32 = u32::MAX;

/// Site id to frame id, for one profile epoch.
#[derive(Debug, Default)]
pub(crate) struct SiteFrames {
    epoch: u64,
    /// By call-site id, and by await-site id.
    calls: Vec<u32>,
    awaits: Vec<u32>,
    /// Scratch: the frame ids of a path.
    path: Vec<u32>,
}

impl SiteFrames {
    /// The stack id of the site path `sites` (root first) in `profile`,
    /// interned (with its frames) if new.
    pub(crate) fn stack(&mut self, profile: &mut Profile, sites: &[u32]) -> u32 {
        let mut path = std::mem::take(&mut self.path);
        path.clear();
        path.extend(sites.iter().map(|&site| self.frame(profile, site)));
        let stack = profile.stack(&path);
        self.path = path;
        stack
    }

    /// The frame id of site field `site` (see [`crate::task::stack::word`])
    /// in `profile`, interned if new.
    #[inline]
    pub(crate) fn frame(&mut self, profile: &mut Profile, site: u32) -> u32 {
        if self.epoch != profile.epoch() {
            self.calls.clear();
            self.awaits.clear();
            self.epoch = profile.epoch();
        }
        let s = SiteId::from_raw(site);
        let id = s.id() as usize;
        let table = if s.is_await() {
            &mut self.awaits
        } else {
            &mut self.calls
        };
        if let Some(&f) = table.get(id)
            && f != NONE
        {
            return f;
        }
        self.resolve(profile, site, id)
    }

    #[cold]
    #[inline(never)]
    fn resolve(&mut self, profile: &mut Profile, site: u32, id: usize) -> u32 {
        // A site that names nothing (yet) is interned as `<unknown>`, and
        // not cached, so that a later lookup can still find it.
        let Some(raw) = resolve_site(site) else {
            return profile.frame(&site_frame(site));
        };
        let f = profile.frame(&raw);
        let table = if SiteId::from_raw(site).is_await() {
            &mut self.awaits
        } else {
            &mut self.calls
        };
        if id < MAX_CACHED_SITE {
            if table.len() <= id {
                table.resize(id + 1, NONE);
            }
            table[id] = f;
        }
        f
    }
}

/// The per-record cache (see the module docs), in two tables by slot
/// (the record index modulo the slots): what a hit reads, one cache line
/// per slot, and the rest.
#[derive(Debug)]
pub(crate) struct TaskCache {
    hot: Vec<Hot>,
    cold: Vec<Cold>,
    /// The tokio task of each slot's task, for the tick's scan; grown
    /// only when a task filed under one is sampled.
    filed: Vec<Filed>,
    /// The last sample of the tokio task of several roots whose first
    /// root last held the slot; grown only when one is sampled.
    several: Vec<Option<Box<TokioSample>>>,
    /// The most slots (a power of two).
    max_slots: usize,
}

/// Bytes of one slot of the per-record cache, shapes that spill aside.
pub(crate) const SLOT_BYTES: usize = std::mem::size_of::<Hot>()
    + std::mem::size_of::<Cold>()
    + std::mem::size_of::<Filed>()
    + std::mem::size_of::<Option<Box<TokioSample>>>();

/// The tokio task a slot's task is filed under (see
/// [`crate::sampler::tokio_tasks`]), tagged with that task's id (`0`:
/// none), which the scan reads instead of the record's extension.
#[derive(Clone, Copy, Debug)]
struct Filed {
    task_id: u64,
    tokio: TokioTask,
}

impl Default for Filed {
    fn default() -> Self {
        Filed {
            task_id: 0,
            tokio: TokioTask { id: 0, order: 0 },
        }
    }
}

/// Shape words a record's hot line holds: the state, the length and up to
/// 8 sites of a sample with one stack.
const INLINE_WORDS: usize = 10;

/// What a hit reads of a record: the task, and its last sample's shape and
/// entry when the sample was one stack of at most 8 frames (the usual
/// one); others are in [`Cold`].
#[derive(Clone, Copy, Debug, Default)]
#[repr(C, align(64))]
struct Hot {
    /// The task (`0`: none yet).
    task_id: u64,
    /// The epoch of the last sample's entries.
    epoch: u64,
    /// Words of the last sample's shape: `0` for none; a sample of one
    /// stack of up to [`INLINE_WORDS`] words is in `words` (with its entry
    /// in `entry`); any other is [`SPILLED`], in [`Cold`].
    len: u32,
    entry: u32,
    words: [u32; INLINE_WORDS],
}

const _: () = assert!(std::mem::size_of::<Hot>() == 64);
const _: () = assert!(std::mem::size_of::<Cold>() <= 96 || cfg!(async_stack_loom));

/// [`Hot::len`] of a last sample kept in [`Cold`].
const SPILLED: u32 = u32::MAX;

/// The rest of a record's entry.
#[derive(Debug, Default)]
struct Cold {
    /// The sources of the task's labels.
    name: Option<Arc<TaskName>>,
    location: Option<&'static CallSite>,
    /// The label ids (group, name), for one epoch and root site.
    labels: Option<Labels>,
    /// A last sample that does not fit the hot line: its shape, and the
    /// entry of each of its stacks.
    shape: Vec<u32>,
    entries: Vec<u32>,
}

#[derive(Clone, Copy, Debug)]
struct Labels {
    epoch: u64,
    /// The root site the group was found from, when the group is the
    /// root's function (a task with neither a name nor a spawn site, or
    /// grouped by spawn site without one); `None` when the root does not
    /// matter.
    root_site: Option<u32>,
    group: u32,
    name: u32,
}

impl TaskCache {
    /// A cache of at most `max_slots` slots (rounded down to a power of
    /// two, at least 1).
    pub(crate) fn new(max_slots: usize) -> Self {
        TaskCache {
            hot: Vec::new(),
            cold: Vec::new(),
            filed: Vec::new(),
            several: Vec::new(),
            max_slots: 1 << max_slots.max(1).ilog2(),
        }
    }

    /// The most slots for a profile of `budget` bytes: the budget over
    /// [`SLOT_BYTES`], rounded down to a power of two, at least 1,024.
    pub(crate) fn slots_for_budget(budget: usize) -> usize {
        1 << (budget / SLOT_BYTES).max(1024).ilog2()
    }

    /// The slot of record `index`.
    #[inline(always)]
    fn slot(&self, index: u32) -> usize {
        index as usize & (self.max_slots - 1)
    }

    #[cold]
    #[inline(never)]
    fn grow(&mut self, i: usize) {
        // Records are handed out from index 0 up: room for some more.
        let n = (i + 1).next_power_of_two().min(self.max_slots);
        self.hot.resize(n, Hot::default());
        self.cold.resize_with(n, Cold::default);
    }

    /// Asks the processor for record `index`'s hot line, if it has one.
    #[inline]
    pub(crate) fn prefetch(&self, index: u32) {
        if let Some(h) = self.hot.get(self.slot(index)) {
            crate::shim::prefetch(std::ptr::from_ref(h).cast());
        }
    }

    /// Asks the processor for the last sample of the tokio task whose
    /// first root is in record `index`, if it has one.
    #[inline]
    pub(crate) fn prefetch_tokio(&self, index: u32) {
        if let Some(Some(t)) = self.several.get(self.slot(index)) {
            // The two lines a hit reads.
            let p = std::ptr::from_ref::<TokioSample>(t).cast::<u8>();
            crate::shim::prefetch(p);
            crate::shim::prefetch(p.wrapping_add(64));
        }
    }

    /// Whether a read of task `id` in record `index` must load what the
    /// task was spawned with (its name and spawn location): it is not the
    /// task last seen in its slot.
    #[inline]
    pub(crate) fn wants_ext(&self, index: u32, id: u64) -> bool {
        self.hot
            .get(self.slot(index))
            .is_none_or(|h| h.task_id != id)
    }

    /// The tokio task the task `id` that the scan found in record `index`
    /// (`record`) is filed under, if any: a load of the record's `spawn`
    /// word for a task filed under none, the cached tokio task for one
    /// sampled before, and otherwise the record's extension (not
    /// validated: the read that samples the task checks its id).
    #[inline]
    pub(crate) fn tokio_of(&self, index: u32, id: u64, record: &TaskRecord) -> Option<TokioTask> {
        if !spawn::in_tokio(record.spawn.load(Ordering::Relaxed)) {
            return None;
        }
        match self.filed.get(self.slot(index)) {
            Some(f) if f.task_id == id => Some(f.tokio),
            _ => record.tokio_task(index),
        }
    }

    /// Takes in a read of record `index`: a new task starts afresh, its
    /// labels' sources (and its tokio task) from `raw` (which then holds
    /// its spawn metadata: see [`wants_ext`](Self::wants_ext)). Every
    /// other method takes a record observed.
    #[inline]
    pub(crate) fn observe(&mut self, index: u32, raw: &RawTask) {
        let i = self.slot(index);
        if i >= self.hot.len() {
            self.grow(i);
        }
        if self.hot[i].task_id != raw.id {
            self.renew(i, raw);
        }
    }

    /// Slot `i` now holds the task of `raw`.
    #[cold]
    #[inline(never)]
    fn renew(&mut self, i: usize, raw: &RawTask) {
        self.hot[i] = Hot {
            task_id: raw.id,
            ..Hot::default()
        };
        let cold = &mut self.cold[i];
        cold.name.clone_from(&raw.name);
        cold.location = raw.location;
        cold.labels = None;
        if let Some(tokio) = raw.tokio {
            if self.filed.len() <= i {
                self.filed.resize(self.hot.len(), Filed::default());
            }
            self.filed[i] = Filed {
                task_id: raw.id,
                tokio,
            };
        }
    }

    /// The name and spawn location of the task of record `index`
    /// (observed).
    pub(crate) fn sources(
        &self,
        index: u32,
    ) -> (Option<&Arc<TaskName>>, Option<&'static CallSite>) {
        let cold = &self.cold[self.slot(index)];
        (cold.name.as_ref(), cold.location)
    }

    /// The id of the tokio task the task of slot `i` is filed under (`0`:
    /// none).
    fn tokio_id(&self, i: usize) -> u64 {
        self.filed
            .get(i)
            .filter(|f| f.task_id == self.hot[i].task_id)
            .map_or(0, |f| f.tokio.id)
    }

    /// The entries of record `index`'s last sample, if it had this shape
    /// and its entries hold in `epoch`.
    #[inline]
    pub(crate) fn entries_for(&self, index: u32, shape: &Shape, epoch: u64) -> Option<&[u32]> {
        let i = self.slot(index);
        let hot = &self.hot[i];
        if hot.epoch != epoch || hot.len == 0 {
            return None;
        }
        if hot.len == SPILLED {
            let cold = &self.cold[i];
            return Shape::same(&cold.shape, &shape.words).then_some(&cold.entries[..]);
        }
        let len = (hot.len as usize).min(INLINE_WORDS);
        Shape::same(&hot.words[..len], &shape.words).then(|| std::slice::from_ref(&hot.entry))
    }

    /// Adds the stacks of `shape`, the `j`-th with `weights(j)`, to
    /// `profile` for the task of record `index` (observed), interning what
    /// is new, and remembers their entries.
    pub(crate) fn add(
        &mut self,
        index: u32,
        profile: &mut Profile,
        sites: &mut SiteFrames,
        shape: &Shape,
        weights: impl Fn(usize) -> Weights,
    ) {
        let i = self.slot(index);
        let task = (self.hot[i].task_id, self.tokio_id(i));
        let cold = &mut self.cold[i];
        let complete = add_paths(
            profile,
            sites,
            shape,
            task,
            |p, root_site| {
                let name = cold.name.as_deref();
                label_ids(&mut cold.labels, p, name, cold.location, root_site)
            },
            weights,
            &mut cold.entries,
        );
        let hot = &mut self.hot[i];
        hot.len = 0;
        if !complete {
            return;
        }
        hot.epoch = profile.epoch();
        let len = shape.words.len();
        if shape.paths == 1 && len <= INLINE_WORDS {
            hot.words[..len].copy_from_slice(&shape.words);
            hot.entry = cold.entries[0];
            hot.len = len as u32;
        } else {
            cold.shape.clone_from(&shape.words);
            hot.len = SPILLED;
        }
    }

    /// Adds the stacks of `shape`, the `j`-th with `weights(j)`, to
    /// `profile` for the roots of tokio task `tokio_id`, the first of which
    /// is in record `first` (observed), their labels from `sources`: to the
    /// entries of its last sample if it had this shape and these sources,
    /// else interned afresh (and remembered in the first root's slot).
    pub(crate) fn add_tokio(
        &mut self,
        (first, tokio_id): (u32, u64),
        sources: &Sources,
        profile: &mut Profile,
        sites: &mut SiteFrames,
        shape: &Shape,
        weights: impl Fn(usize) -> Weights,
    ) {
        let i = self.slot(first);
        if self.several.len() <= i {
            self.several.resize_with(self.hot.len(), || None);
        }
        let t = self.several[i].get_or_insert_with(Box::default);
        let key = sources.key();
        // Word by word: the key was just written, and a wide load of it
        // would wait for the stores.
        if (0..3).any(|w| t.sources[w] != key[w]) {
            t.sources = key;
            t.labels = None;
            t.len = 0;
        }
        let epoch = profile.epoch();
        if t.epoch == epoch && t.len > 0 {
            let (entries, words) = t.memo().split_at(t.stacks as usize);
            if Shape::same(words, &shape.words) {
                for (j, &entry) in entries.iter().enumerate() {
                    profile.add_to_entry(entry, weights(j));
                }
                return;
            }
        }
        let mut entries = std::mem::take(&mut t.spilled);
        let complete = add_paths(
            profile,
            sites,
            shape,
            (sources.task_id(), tokio_id),
            |p, _| {
                let (name, location) = (sources.name(), sources.location());
                label_ids(&mut t.labels, p, name, location, sources.root_site())
            },
            weights,
            &mut entries,
        );
        t.len = 0;
        if complete {
            t.epoch = profile.epoch();
            t.stacks = entries.len() as u32;
            entries.extend_from_slice(&shape.words);
            t.len = entries.len() as u32;
            if let Some(inline) = t.inline.get_mut(..entries.len()) {
                inline.copy_from_slice(&entries);
            }
        }
        t.spilled = entries;
    }
}

/// The last sample of a tokio task of several roots (see
/// [`crate::sampler::tokio_tasks`]), kept in its first root's slot: what
/// [`Hot`] and [`Cold`] keep of a task's. A hit reads its first two lines
/// only, when its entries and shape fit in `inline` (two roots each
/// waiting 7 frames deep do).
#[derive(Debug, Default)]
#[repr(C)]
struct TokioSample {
    /// The [key](Sources::key) of its labels' sources (its first root's
    /// task id first).
    sources: [u64; 3],
    /// The epoch of its entries.
    epoch: u64,
    /// Its *memo*: the entries of its stacks (`stacks` of them), then its
    /// shape, `len` words in all (`0`: none); in `inline` if they fit,
    /// else in `spilled`.
    stacks: u32,
    len: u32,
    inline: [u32; MEMO_WORDS],
    labels: Option<Labels>,
    spilled: Vec<u32>,
}

/// Words of a [`TokioSample`]'s memo kept inline.
const MEMO_WORDS: usize = 20;

impl TokioSample {
    /// Its memo (see [`TokioSample::stacks`]).
    fn memo(&self) -> &[u32] {
        self.inline
            .get(..self.len as usize)
            .unwrap_or(&self.spilled)
    }
}

/// Adds the stacks of `shape`, the `j`-th with `weights(j)`, to `profile`
/// as samples of `task` (task id, tokio id), each with the group and name
/// ids `labels(profile, root site of its path)` gives, interning what is
/// new; `entries` gets the entry of each stack. `false` if the budget
/// renumbered the tables on the way: the entries are then void (the paths
/// after it were added afresh).
fn add_paths(
    profile: &mut Profile,
    sites: &mut SiteFrames,
    shape: &Shape,
    (task_id, tokio_id): (u64, u64),
    mut labels: impl FnMut(&mut Profile, u32) -> (u32, u32),
    weights: impl Fn(usize) -> Weights,
    entries: &mut Vec<u32>,
) -> bool {
    entries.clear();
    let mut complete = true;
    for (j, path) in shape.paths().enumerate() {
        let stack = sites.stack(profile, path);
        let (group, task_name) = labels(profile, path.first().copied().unwrap_or(0));
        let key = EntryKey {
            group,
            task_id,
            task_name,
            state: shape.state(),
            stack,
        };
        match profile.add_interned(key, tokio_id, weights(j)) {
            Some(entry) => entries.push(entry),
            None => complete = false,
        }
    }
    complete
}

/// The group and name ids of a task with this name, spawn location and
/// root site in `profile`'s epoch, from `cached` if they were found for
/// them (the root site matters only to a group that is the root's
/// function); found, interned if new, and cached otherwise. A cache holds
/// the labels of one task (whose name and location do not change), or of
/// one tokio task's sources.
fn label_ids(
    cached: &mut Option<Labels>,
    profile: &mut Profile,
    name: Option<&TaskName>,
    location: Option<&'static CallSite>,
    root_site: u32,
) -> (u32, u32) {
    let epoch = profile.epoch();
    if let Some(l) = *cached
        && l.epoch == epoch
        && l.root_site.is_none_or(|r| r == root_site)
    {
        return (l.group, l.name);
    }
    let (group, of_root) = group_of(name, location, root_site, profile.grouping);
    let group = profile.string(&group);
    let name = profile.string(name.map_or("", TaskName::as_str));
    *cached = Some(Labels {
        epoch,
        root_site: of_root.then_some(root_site),
        group,
        name,
    });
    (group, name)
}

/// A sample's shape: its state, then the site path (root first) of each
/// of its stacks, each prefixed by its length.
#[derive(Debug, Default)]
pub(crate) struct Shape {
    words: Vec<u32>,
    paths: usize,
}

impl Shape {
    /// Starts a shape of state `state`.
    #[inline]
    pub(crate) fn start(&mut self, state: SampleState) {
        self.words.clear();
        self.words.push(match state {
            SampleState::OnCpu => 0,
            SampleState::OffCpu => 1,
        });
        self.paths = 0;
    }

    /// Appends the paths of a task read with stack `copy` (not empty) in
    /// state `state`: running, the path to the frame it polls; suspended,
    /// the path to each pending branch (each leaf of the tree).
    #[inline]
    pub(crate) fn push_sample(&mut self, copy: &StackCopy, state: TaskState) {
        let frames = &copy.frames;
        if state == TaskState::Running {
            // The path to the polled frame; without one (the polled frame
            // holds no slot, or the platform does not tag the current
            // word), the running path as far as it is known.
            let end = frames
                .iter()
                .position(|f| f.innermost)
                .or_else(|| frames.iter().rposition(|f| f.running))
                .unwrap_or(0);
            self.push_path(copy, end);
        } else {
            for i in 0..frames.len() {
                let next_depth = frames.get(i + 1).map(|f| f.depth);
                if next_depth.is_none_or(|d| d <= frames[i].depth) {
                    self.push_path(copy, i);
                }
            }
        }
    }

    /// Appends the path from the root to `copy.frames[end]`, cut at
    /// [`MAX_DEPTH`] frames.
    #[inline]
    pub(crate) fn push_path(&mut self, copy: &StackCopy, end: usize) {
        let at = self.words.len();
        self.words.push(0);
        copy.path_sites(end, &mut self.words);
        let len = (self.words.len() - at - 1).min(MAX_DEPTH);
        self.words.truncate(at + 1 + len);
        self.words[at] = len as u32;
        self.paths += 1;
    }

    /// Whether `a` and `b` are the same shape words (a plain loop: shapes
    /// are a few words, shorter than a call to `memcmp` is worth).
    #[inline]
    fn same(a: &[u32], b: &[u32]) -> bool {
        a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x == y)
    }

    pub(crate) fn state(&self) -> SampleState {
        if self.words.first() == Some(&0) {
            SampleState::OnCpu
        } else {
            SampleState::OffCpu
        }
    }

    /// How many paths.
    pub(crate) fn len(&self) -> usize {
        self.paths
    }

    fn paths(&self) -> impl Iterator<Item = &[u32]> {
        let mut rest = self.words.get(1..).unwrap_or(&[]);
        std::iter::from_fn(move || {
            let (&n, tail) = rest.split_first()?;
            let (path, tail) = tail.split_at((n as usize).min(tail.len()));
            rest = tail;
            Some(path)
        })
    }
}

#[cfg(all(test, not(async_stack_loom)))]
mod tests {
    #[test]
    fn the_cache_holds_about_as_much_as_the_budget() {
        use super::{SLOT_BYTES, TaskCache};
        use crate::sampler::profile::{DEFAULT_BUDGET, MAX_BUDGET, MIN_BUDGET};

        assert_eq!(SLOT_BYTES, 184);
        assert_eq!(std::mem::size_of::<super::TokioSample>(), 168);
        assert_eq!(TaskCache::slots_for_budget(MIN_BUDGET), 1024);
        assert_eq!(TaskCache::slots_for_budget(DEFAULT_BUDGET), 16_384);
        assert_eq!(TaskCache::slots_for_budget(MAX_BUDGET), 65_536);
        for budget in [DEFAULT_BUDGET, MAX_BUDGET] {
            let bytes = TaskCache::slots_for_budget(budget) * SLOT_BYTES;
            assert!(
                bytes <= budget,
                "{bytes} bytes of slots for a budget of {budget}"
            );
        }
        // A cache grows with the records it sees, up to its slots.
        let mut c = TaskCache::new(1000);
        assert_eq!(c.max_slots, 512, "rounded down to a power of two");
        c.grow(5);
        assert_eq!(c.hot.len(), 8);
        c.grow(100_000);
        assert_eq!((c.hot.len(), c.cold.len()), (512, 512));
        assert_eq!((c.slot(511), c.slot(512), c.slot(1025)), (511, 0, 1));
    }
}
