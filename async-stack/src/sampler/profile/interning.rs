//! A profile's **interned tables**: strings, modules, frames and stacks
//! by id ([`Interner`]), and the entries that aggregate samples
//! ([`Entry`]). A sampler hands frames over as the profile hands them
//! back, as [`FrameRef`](crate::sampler::FrameRef)s.

use std::borrow::Borrow;
use std::hash::{BuildHasher, BuildHasherDefault, Hash, RandomState};

use hashbrown::HashTable;
use rustc_hash::FxHasher;

use crate::sampler::profile::stats::{SampleState, Weights};

/// Where a native frame's code lives: a binary or shared library.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Module {
    /// Path of the file (string id).
    pub(crate) path: u32,
    /// The GNU build id, empty if the file has none.
    pub(crate) build_id: Vec<u8>,
}

/// One interned frame: a [`FrameRef`](crate::sampler::FrameRef) with its
/// text replaced by ids into the profile's tables.
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
    /// The tokio task the sampled task is filed under (`0`: none; tokio
    /// ids start at 1). Not part of the [key](EntryKey): the task id
    /// determines it, so the first sample's holds.
    pub(crate) tokio_id: u64,
    /// The task's name (string id; `0` is the empty string).
    pub(crate) task_name: u32,
    pub(crate) state: SampleState,
    pub(crate) stack: u32,
    pub(crate) weights: Weights,
}

/// The task a sample is of, as the profile records it: its id, the tokio
/// task it is filed under (`0`: none) and its name. (Only on-CPU samples,
/// on Linux, and tests make one.)
#[derive(Clone, Copy, Debug)]
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
pub(crate) struct SampledTask<'a> {
    pub(crate) id: u64,
    pub(crate) tokio_id: u64,
    pub(crate) name: &'a str,
}

/// What an entry is aggregated by: ids of the profile's tables (of one
/// [`epoch`](super::Profile::epoch)) and the task id.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct EntryKey {
    pub(crate) group: u32,
    pub(crate) task_id: u64,
    pub(crate) task_name: u32,
    pub(crate) state: SampleState,
    pub(crate) stack: u32,
}

impl Entry {
    pub(super) fn key(&self) -> EntryKey {
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
pub(super) fn entry_hash(key: &EntryKey) -> u64 {
    Fx::default().hash_one(key)
}

/// The hasher of the tables keyed by integer ids (see `Cargo.toml`).
pub(crate) type Fx = BuildHasherDefault<FxHasher>;

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
    pub(super) fn find<Q: Eq + Hash + ?Sized>(&self, value: &Q) -> Option<u32>
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
    pub(super) fn push_new(&mut self, value: T) -> u32 {
        let id = self.items.len() as u32;
        let hash = self.hasher.hash_one(&value);
        self.items.push(value);
        let (items, hasher) = (&self.items, &self.hasher);
        self.ids
            .insert_unique(hash, id, |&id| hasher.hash_one(&items[id as usize]));
        id
    }

    /// The id of `value`, and whether it is new.
    pub(super) fn intern(&mut self, value: &T) -> (u32, bool) {
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
pub(super) const INTERN_OVERHEAD: usize = 32;
