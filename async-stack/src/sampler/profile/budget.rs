//! The profile's **memory budget**: counting the tables' bytes, and
//! shedding detail when an insertion goes over (see the module docs of
//! [`crate::sampler::profile`]).

use std::collections::HashMap;

use crate::read::verify::Mismatch;
use crate::sampler::profile::interning::{Entry, EntryKey, Frame, INTERN_OVERHEAD, Module};
use crate::sampler::profile::model::Profile;
use crate::sampler::profile::stats::Weights;

impl Profile {
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
    pub(super) fn clear_lightest(&mut self, target: usize) -> u64 {
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

    pub(super) fn is_cleared(&self, e: &Entry) -> bool {
        self.stacks
            .get(e.stack)
            .is_some_and(|s| s.len() == 1 && self.frames.get(s[0]) == Some(&Frame::Cleared))
    }

    /// The `[cleared]` entry that entry `i` folds into, as a key into the
    /// old tables, with the stack id `u32::MAX` standing for `[cleared]`.
    pub(super) fn cleared_key(&self, i: usize) -> EntryKey {
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
    pub(super) fn rebuild(&mut self, fold: impl Fn(&Profile, usize) -> Option<EntryKey>) {
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
            // A folded entry stands for several tasks: no tokio task.
            let (key, tokio_id) = match fold(self, i) {
                Some(key) => (key, 0),
                None => (e.key(), e.tokio_id),
            };
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
            fresh.add_entry(new_key, tokio_id, e.weights);
        }
        *self = fresh;
    }

    /// Frame `f` of this profile, interned in `into`.
    pub(super) fn copy_frame(&self, into: &mut Profile, f: u32) -> u32 {
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
}
