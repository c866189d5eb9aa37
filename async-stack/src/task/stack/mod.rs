//! A task's **published stack**: the tree of its live frames, kept in its
//! record for other threads to copy.
//!
//! Walking the live frame chain from another thread would read a linked
//! list while its owner mutates it, and report stacks that never existed
//! (see the py-spy `--nonblocking` seed). Instead the thread polling a task
//! keeps this table of atomic words up to date, and readers copy it whole
//! under a sequence counter.
//!
//! # Slots
//!
//! Every frame of the task holds a **slot** from the first poll it gets in
//! the task until it completes, is dropped, or is polled in another task
//! (its *place*, see [`crate::task::place`]). Slot 0 is the task root's.
//! A slot's word ([`word`]) holds the frame's current site (its call site,
//! or the `.await` it last reached), its parent's slot, and its *birth*, a
//! number that orders siblings (the branches of a `join!` in source order,
//! even when the combinator polls them in rotation). Slots 0 to 2 live in
//! the record; slots 3 to 6 in a head chunk, which also holds the indices
//! of up to seven more chunks of eight slots, up to [`STACK_CAPACITY`]
//! slots. Chunks come from a pool that is never freed, and go back to it
//! when the task ends. A frame that finds every slot taken, or whose parent
//! holds none, holds no slot: it is counted in the task's hidden frames.
//!
//! A frame that gives its slot back while frames below it still name it as
//! their parent leaves a **zombie**: the slot stays taken, and neither it
//! nor anything below it is shown, until its last child is gone. So a slot
//! is never taken again while a word still names it as a parent, and a
//! reader never hangs a frame under a stranger.
//!
//! In the steady state a poll writes nothing here: the running frame is in
//! the record's `current` word (see [`crate::record::current`]).
//!
//! # Protocol
//!
//! - **One writer**, the thread polling the task. It takes no lock and does
//!   no read-modify-write. Words, `meta`, `births`, `chunk` and the chunks'
//!   directories change only inside a *section*: `seq` to odd, a release
//!   fence, the stores, `seq` to even, a release fence. Sections are rare:
//!   a frame taking or giving back its slot, moving to another `.await`,
//!   changing parent, and foreign retirements being collected.
//! - **Foreign retirements**: a frame of the task that is dropped, or
//!   polled by another task, on another thread than the task's poll, must
//!   leave the tree at once (a `Shared` future polled by two tasks shows in
//!   the second only), but cannot write a section. It enters the record's
//!   [`foreign`] word by compare-and-swap, which succeeds only while the
//!   word still holds the frame's incarnation, so a frame that outlives its
//!   task never touches the next one; it then sets the `RETIRED` bit of its
//!   word by compare-and-swap (or, holding no slot, counts itself in the
//!   word's hidden-retirement count), and leaves the word, bumping its
//!   version. The writer frees retired slots at its next poll. Ending a
//!   task waits for the foreign section count to be zero, then moves the
//!   word to the next incarnation, so no foreign section ever straddles
//!   two tasks.
//! - **Readers** copy the slots between two loads of `seq` and of
//!   `foreign`, and retry (a bounded number of times, counted) when `seq`
//!   was odd, a foreign section was open, or either moved. The copy is
//!   therefore one instant of the table, foreign retirements included.
//!   Readers then build the tree: pre-order from slot 0, siblings in birth
//!   order, without the retired and zombie slots and what hangs below them
//!   (those live frames are counted as hidden).
//! - Words are interned ids ([`crate::record::site`]), never pointers.
//!
//! # Files
//!
//! - `words.rs`: where slots live, and the slot, `foreign` and `meta`
//!   word layouts;
//! - `writer.rs`: the polling thread's sections and slots, and foreign
//!   threads' retirements;
//! - `reader.rs`: copies, and the tree built from one.

pub(crate) mod reader;
pub(crate) mod words;
pub(crate) mod writer;

pub(crate) use reader::{CopiedFrame, SignalCopy, StackCopy};
pub use words::STACK_CAPACITY;
#[cfg_attr(async_stack_loom, allow(unused_imports))]
pub(crate) use words::{
    CHUNK_SLOTS, DIR_ENTRIES, HEAD_SLOTS, INLINE_SLOTS, ancestry, foreign, meta, word,
};
