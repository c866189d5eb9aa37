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
//!   sampled, the sources of its labels (group and name), and its last
//!   sample: the *shape* (the state and the site path of every stack it
//!   gave) with the entry each stack was added to. A task sampled again
//!   with the same shape adds its weights to those entries directly.
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
//!
//! Weights are added exactly as an insertion by text would add them, and
//! new ids are interned in the same order, so the profile is the same
//! table for table.
//!
//! [`TaskRecord::read_tries_with`]: crate::task::record::TaskRecord::read_tries_with

use std::sync::Arc;

use super::profile::{EntryKey, Profile, SampleState, Weights};
use super::wall::{group_of, resolve_site, site_frame};
use crate::record::site::CallSite;
use crate::task::record::{RawTask, TaskName};
use crate::task::stack::word;

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
}

impl SiteFrames {
    /// The frame id of site field `site` (see [`word`]) in `profile`,
    /// interned if new.
    #[inline]
    pub(crate) fn frame(&mut self, profile: &mut Profile, site: u32) -> u32 {
        if self.epoch != profile.epoch() {
            self.calls.clear();
            self.awaits.clear();
            self.epoch = profile.epoch();
        }
        let id = (site & !word::AWAIT) as usize;
        let table = if site & word::AWAIT != 0 {
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
        let table = if site & word::AWAIT != 0 {
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

/// The per-record cache (see the module docs).
#[derive(Debug, Default)]
pub(crate) struct TaskCache {
    records: Vec<Seen>,
}

impl TaskCache {
    /// The entry of record `index`.
    #[inline]
    pub(crate) fn record(&mut self, index: u32) -> &mut Seen {
        let i = index as usize;
        if i >= self.records.len() {
            self.records.resize_with(i + 1, Seen::default);
        }
        &mut self.records[i]
    }
}

/// What the sampler knows of the task a record held when last sampled.
#[derive(Debug, Default)]
pub(crate) struct Seen {
    /// The task (`0`: none yet).
    task_id: u64,
    /// The sources of its labels.
    name: Option<Arc<TaskName>>,
    location: Option<&'static CallSite>,
    /// The label ids (group, name), for this epoch and root site.
    labels: Option<Labels>,
    /// The last sample's shape (see [`Shape`]) and the entry of each of
    /// its stacks, for `entries_epoch`; empty when none holds.
    shape: Vec<u32>,
    entries: Vec<u32>,
    entries_epoch: u64,
}

#[derive(Clone, Copy, Debug)]
struct Labels {
    epoch: u64,
    root_site: u32,
    group: u32,
    name: u32,
}

impl Seen {
    /// Whether a read of task `id` must load the task's extension (its
    /// name and spawn location): it is not the task last seen here.
    #[inline]
    pub(crate) fn wants_ext(&self, id: u64) -> bool {
        self.task_id != id
    }

    /// Takes in a read of the record: a new task starts afresh (its labels
    /// from `raw`, which then holds its extension).
    #[inline]
    pub(crate) fn observe(&mut self, raw: &RawTask) {
        if self.task_id != raw.id {
            self.task_id = raw.id;
            self.name.clone_from(&raw.name);
            self.location = raw.location;
            self.labels = None;
            self.shape.clear();
            self.entries.clear();
        }
    }

    /// The entries of the last sample, if it had this shape and its
    /// entries hold in `epoch`.
    #[inline]
    pub(crate) fn entries_for(&self, shape: &Shape, epoch: u64) -> Option<&[u32]> {
        (self.entries_epoch == epoch && !self.entries.is_empty() && self.shape == shape.words)
            .then_some(&self.entries[..])
    }

    /// The group and name ids of this task with root site `root_site`, in
    /// `profile`'s epoch; interned if new.
    fn labels(&mut self, profile: &mut Profile, root_site: u32) -> (u32, u32) {
        let epoch = profile.epoch();
        if let Some(l) = self.labels
            && l.epoch == epoch
            && l.root_site == root_site
        {
            return (l.group, l.name);
        }
        let name = self.name.as_deref();
        let group = group_of(name, self.location, root_site, profile.grouping);
        let group = profile.string(&group);
        let name = profile.string(name.map_or("", TaskName::as_str));
        self.labels = Some(Labels {
            epoch,
            root_site,
            group,
            name,
        });
        (group, name)
    }

    /// Adds the stacks of `shape`, the `j`-th with `weights(j)`, to
    /// `profile`, interning what is new, and remembers their entries.
    pub(crate) fn add(
        &mut self,
        profile: &mut Profile,
        sites: &mut SiteFrames,
        shape: &Shape,
        frames: &mut Vec<u32>,
        weights: impl Fn(usize) -> Weights,
    ) {
        self.entries.clear();
        let mut complete = true;
        for (j, path) in shape.paths().enumerate() {
            frames.clear();
            for &site in path {
                frames.push(sites.frame(profile, site));
            }
            let stack = profile.stack(frames);
            let (group, task_name) = self.labels(profile, path.first().copied().unwrap_or(0));
            let key = EntryKey {
                group,
                task_id: self.task_id,
                task_name,
                state: shape.state(),
                stack,
            };
            match profile.add_interned(key, weights(j)) {
                Some(entry) => self.entries.push(entry),
                // The budget renumbered the tables: the entries so far are
                // void (the next paths resolve afresh).
                None => complete = false,
            }
        }
        if complete {
            self.shape.clone_from(&shape.words);
            self.entries_epoch = profile.epoch();
        } else {
            self.entries.clear();
        }
    }
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

    /// Appends a path, root first.
    #[inline]
    pub(crate) fn push_path(&mut self, sites: &[u32]) {
        self.words.push(sites.len() as u32);
        self.words.extend_from_slice(sites);
        self.paths += 1;
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
