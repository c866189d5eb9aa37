//! What the slots of the waits records share (the hold slots of
//! `resource.rs`, the join slots of `join.rs`): each is a sequence lock
//! whose sequence is its generation word, `0` while free.

/// The generation word of a slot being written: a shared slot claimed
/// and not yet recorded or changing its permits, or a join slot whose
/// wait is being written.
pub(crate) const CLAIMED: u64 = u64::MAX;

/// How often a reader tries to read a slot whole before it gives up.
/// Fewer under loom, whose models explore every try.
pub(crate) const READ_TRIES: usize = if cfg!(async_stack_loom) { 2 } else { 16 };
