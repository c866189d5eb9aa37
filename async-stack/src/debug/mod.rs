//! The **debug descriptor**: one exported, versioned table that tells a
//! debugger script (gdb, lldb) how to find and read async-stack's data in
//! a live process or a core file, from memory alone, without calling into
//! the process and without Rust debug info for private types.
//!
//! # Finding it
//!
//! The descriptor is the `#[no_mangle]` static [`ASYNC_STACK_DEBUG`]: a
//! script looks the symbol up by that name. A binary that does not link
//! async-stack has no such symbol. The descriptor starts with
//! [`MAGIC`] (the bytes `ASYNCSTK`) and an ABI [`VERSION`]; a script checks
//! both before reading anything else, and refuses versions it does not
//! know. The version changes whenever a field is added or removed or
//! its meaning changes (a script reads the fields by index, and the
//! version fixes the indices); `size` says how many bytes the descriptor
//! has.
//!
//! # What it holds
//!
//! Every field is a little-endian `u64` (so a script reads the whole table
//! as an array of words, by index; the indices are fixed by the version):
//!
//! - a **layout** part: sizes and offsets, in bytes, of every structure a
//!   script reads (frame, call site, await site, site-table entries, thread
//!   root, thread state, task record, stack chunk, task extension, task
//!   name), and the bit layouts of the packed words (state, wakes, slot
//!   words, the record's `meta`, `foreign` and `spawn` words, the
//!   current-frame tag), and those of the waits-for graph (a listed
//!   resource, its exclusive hold, a shared hold, a wait, the values of a
//!   resource's kind, a join wait's slot). These are constants, computed
//!   from the real types at compile time; a test checks them against the
//!   real layout. std's
//!   `Location`, whose fields are private, is described by a probe
//!   instead (see **Waits** below);
//! - an **address** part: where the task records' page table is, how many
//!   records were handed out, the page tables of stack chunks and task
//!   extensions, the thread-root list, the two site tables, the ticking
//!   clock word, the slots of the waits registry, the probe
//!   `Location`, the tokio ids of roots and the slots of join waits. All
//!   are addresses of statics, fixed when the program is linked: the descriptor is whole from the start, so a core of a
//!   process that never ran a task reads as one with no task (every count
//!   `0`, every page `0`). The lower layers never write it: it *pulls*
//!   the addresses of their statics.
//!
//! # Reading the data
//!
//! - **Sites**: a frame's `site` word points to a `CallSite` (bit
//!   `site_await_bit` clear) or an `AwaitSite` (set). Each starts with its
//!   interned id (`u32` at `call_site_id` / `await_site_id`; `0` if never
//!   registered); an await site also points to its call site. Id `i + 1`
//!   is entry `i` of its table: page `i / site_page_entries`, entry
//!   `i % site_page_entries`, valid for `i < len`. Entries hold strings as
//!   pointer and length (UTF-8). The call-site entry's `function` is the
//!   name dumps and the walker print. An await site keeps, at
//!   `await_site_return_address`, an address in its function's code at
//!   that `.await` (`0` or `1`: none), and a call site, at
//!   `call_site_body_address`, one in its body's code (`0`: none): the
//!   walker's way to find the native frame running each async frame's body
//!   when there is no debug info to find `Traced::poll` by.
//! - **Thread roots**: entry `i` is entry `i % thread_page_entries` of
//!   page `i / thread_page_entries` (a page not allocated yet is `0`), for
//!   `i` below the smaller of the count and the capacity, with `tid` (the
//!   OS thread id on Linux, a number of async-stack's own elsewhere; `0`
//!   for a free entry) and the address of the thread's
//!   state, whose field at `active_current` points to the current-frame
//!   word (null when no task root is polling on that thread) and whose `record` field
//!   points to the record of the task being polled. The current-frame word
//!   holds the innermost frame being polled, its slot in the top bits
//!   (`current_slot_shift`, `0`: no tag on this target); frames link to
//!   their callers through `parent`.
//! - **Task records**: record `i` is entry `i % arena_page_entries` of
//!   page `i / arena_page_entries` of the record page table, for `i` below
//!   the smaller of the records handed out and the capacity; `id == 0` is
//!   a free record. The published stack is slots `0..top` (top from the
//!   `meta` word): the first `inline_slots` in the record, the next
//!   `head_slots` in the head chunk (`chunk` field, a handle: index + 1),
//!   then chunks of `chunk_slots` named by the head chunk's directory
//!   (`dir_entries` `u32` handles, two per word from word `head_slots`).
//!   A slot word packs the site (an await-site id when `slot_await_flag`
//!   is set, else a call-site id), the parent slot and the birth that
//!   orders siblings; zombie and retired slots are not shown, nor what
//!   hangs below them. The module docs of `task/stack/mod.rs` state the whole
//!   protocol. A stack whose `seq` is odd, or whose `foreign` word counts
//!   open sections, was stopped in the middle of a write: scripts show the
//!   task without its frames rather than guess.
//! - **Spawn metadata**: `record_parent` is the id of the task that spawned
//!   this one (`0`: unknown); the low `spawn_site_bits` of the `u32` at
//!   `record_spawn` are the call-site id of the spawn call (`0`: none).
//! - **Task names**: a task's own name is in its extension, when bit
//!   `spawn_named_bit` of the record's spawn word is set. Record `i`'s
//!   extension is entry `i % arena_page_entries` of page
//!   `i / arena_page_entries` of the extension page table (a page not
//!   allocated is `0`). A task without a name of its own is shown with its
//!   root call site's `task_name` (empty: none).
//! - **Tokio tasks**: when bit `spawn_tokio_bit` of the spawn word is
//!   set, the root was first polled inside a tokio task, whose id (the
//!   number `JoinHandle::id()` displays) is the `u64` of record `i` in the
//!   tokio id page table (`tokio_pages`: entry `i % arena_page_entries` of
//!   page `i / arena_page_entries`). Such roots take their task ids in the
//!   order of their first poll. The live records filed under one tokio id
//!   are one entry, as in a dump: its branches in the order of their ids,
//!   its id that of the first branch, its state and counts merged as the
//!   dump merges them.
//!
//! - **Waits** (feature `tokio`: the locks of `async_stack::sync` and
//!   awaited `async_stack::tokio::JoinHandle`s; see `waits/`). The
//!   waits of the locks are in resources, the waits of `JoinHandle`s in
//!   join slots (see **Join waits** below). The
//!   resources that have at least one wait are *listed* (and so may be
//!   those that had one, until their lock is dropped: their
//!   `waits_len` is `0` and they show nothing): slot `i` (a
//!   pointer, `pointer_size` bytes) is entry `i % arena_page_entries` of
//!   page `i / arena_page_entries` of the `listed_pages` table (a page not
//!   allocated is `0`), for `i` below the smaller of the `listed_count`
//!   word and `listed_capacity`; a slot holds the address of a listed
//!   resource, or `0`. A resource has a `key` (its creation order: the
//!   in-process reader goes through resources by key), a `kind` (a `u8`,
//!   one of the `kind_*` values) and the address of its creation
//!   `Location` (`created_at`). Its holders are its exclusive hold first,
//!   then its shared holds in list order: the exclusive hold is the hold slot at
//!   `resource_exclusive`, whose `generation` is `0` when nobody holds the
//!   resource, and otherwise names the holding task (`task`, `0`: code
//!   outside traced tasks), the `Location` of the acquire (`at`) and since
//!   when (`since`); the shared holds (`RwLock` readers, `Semaphore`
//!   permits) are first those in the resource's shared slots, then its
//!   list: `resource_shared` points to `shared_slots` slots of
//!   `shared_slot_size` bytes (`0`: the kind has none), each with a hold
//!   slot at `shared_slot_hold` read as the exclusive one is (a
//!   generation of `hold_slot_claimed`: a hold being written, so the
//!   holders are not to be read), then the list, an array of
//!   `holds_len` holds of `hold_size` bytes at `holds`. The waits, in queue order, are an array of `waits_len`
//!   waits of `wait_size` bytes at `waits`: the waiting task, the
//!   `Location` of the acquire call (`at`, `0` for a `JoinHandle`),
//!   since when, its `generation` (unique; later waits have larger
//!   ones), the `.await` the acquire future was polled at (`awaiting`)
//!   and the ancestry of the frame there (`path`), both read as the join
//!   waits' below. Times are ms on the clock of `clock_monotonic`. The
//!   lists' `version` is odd while the process was changing them: their
//!   pointers and lengths are then not to be read. A task waits for the
//!   first wait of its id met in key order that holds (see the join
//!   waits below), among the resources and the join waits (tasks `0` are
//!   not shown).
//! - **Join waits** (an awaited `JoinHandle`, see `waits/join.rs`): slot
//!   `i` (`join_slot_size` bytes) is entry `i % arena_page_entries` of
//!   page `i / arena_page_entries` of the `join_pages` table (a page not
//!   allocated is `0`), for `i` below the smaller of the `join_count`
//!   word and `join_capacity`. Its `join_slot_generation` word is `0` for
//!   a free slot and `hold_slot_claimed` while the wait is being written
//!   (as is a slot whose `join_slot_spawned_at` is null: the slot is then
//!   not to be read); otherwise the slot is a resource of kind
//!   `JoinHandle` with no holder, whose key is that generation, whose
//!   creation `Location` is the spawn site (`join_slot_spawned_at`) and
//!   whose target is the awaited tokio task (`join_slot_target`), with
//!   one wait: the waiting task (`join_slot_task`), no `at`, since when
//!   (`join_slot_since`) and that same generation. Such resources sort
//!   among the listed ones by key. A non-zero `join_slot_awaiting` names
//!   the `.await` at which the waiter polled the handle: the await
//!   site's id in its low 32 bits (`u32::MAX`: polled between two
//!   `.await`s, awaited nowhere) and the birth of the frame there in its
//!   high 32. The wait is the task's only while one of its shown frames
//!   is suspended at that `.await` (its slot word's site is that id with
//!   the await bit, its birth that birth) and, if `join_slot_path` is not
//!   `0`, has that ancestry: starting from `0xcbf29ce484222325`, for each
//!   of the frame's ancestors from its parent up to the root, xor the
//!   ancestor's site field with its birth shifted left by 32 into the
//!   digest and multiply it by `0x100000001b3` (modulo 2^64); a digest of
//!   `0` becomes `1`. Its line is that `.await`'s; with `0`, the wait
//!   always holds and
//!   takes the line of the frame it shows under.
//! - **Locations** are std's `Location`s, `location_size` bytes, whose
//!   fields are private. The probe (`location_probe`) is one whose line,
//!   column and file length the layout part gives
//!   (`location_probe_line`, ...) and whose file's text is at
//!   `location_probe_file`: the word equal to the length is where every
//!   `Location` keeps its file's length, the other word whose text is the
//!   probe's file is where it keeps the file's address, and the `u32`s
//!   equal to the line and the column are where it keeps them.
//!
//! A debugger reads a stopped process, so it needs none of the sequence
//! counters that in-process readers use; what it reads may still be
//! inconsistent if the process stopped inside a write (a core taken in the
//! middle of a poll), which the scripts report as a problem rather than
//! guess.
//!
//! # Files
//!
//! - `layout.rs`: the layout part, computed from the real types;
//! - `addresses.rs`: the address part, the addresses of the lower layers'
//!   statics;
//! - `gdb_autoload.rs`: the gdb scripts embedded in the binary;
//! - `testing.rs`: hooks that corrupt the descriptor, a chain and the
//!   waits (resources and join slots), for the debugger-script tests;
//!   `tests.rs`: a reader of this process's memory that knows nothing but the descriptor, and a check
//!   that the Python reader reads the same version and fields.

// `std`'s, not `crate::shim`'s: the descriptor is constant data that a
// debugger reads from a stopped process; atomics only make it `Sync`, and
// the test hooks are its only stores. Not built under loom.
use std::sync::atomic::AtomicU64;

mod addresses;
#[cfg(target_os = "linux")]
mod gdb_autoload;
mod layout;
mod testing;
#[cfg(test)]
mod tests;

pub use addresses::Addresses;
pub use layout::Layout;

/// The first word of the descriptor: the bytes `ASYNCSTK`, little-endian.
pub const MAGIC: u64 = u64::from_le_bytes(*b"ASYNCSTK");

/// The ABI version of the descriptor.
///
/// Version 2: the parent and spawn site moved from the extension into the
/// record (`record_parent`, `record_spawn`), extensions are found by record
/// index, and the record's unused `thread` field gave its place to
/// `record_self_wakes` (a running task's thread is its thread root's).
///
/// Version 3: one name per concept. `active_word` is `active_current` (the
/// thread state's pointer to its current-frame word), and the counts of
/// hidden frames retired by foreign sections are named as such:
/// `meta_seen_hidden_shift` is `meta_seen_hidden_retired_shift`,
/// `foreign_hidden_bits` is `foreign_hidden_retired_bits`. The layout and
/// the values are those of version 2; every address is set from the start.
///
/// Version 4: roots filed under a tokio task. `spawn_tokio_bit`,
/// `ext_tokio_id` and `ext_tokio_order` follow `name_len` (so every later
/// field moved by three words).
///
/// Version 5: waits. The layout part gains, after `clock_monotonic`, the
/// probe of std's `Location` and the layouts of a listed resource, its
/// holds and waits, and its kinds (`location_size` to
/// `kind_join_handle`); the address part gains, after `clock`, the slots
/// of the waits registry and the probe `Location` (`listed_pages` to
/// `location_probe_file`).
///
/// Version 6: deadlocks. The layout part gains `wait_generation` after
/// `wait_since` (so every later field moved by one word): a wait's
/// generation, which orders one task's waits in a deadlock report as
/// `async_stack::deadlocks()` orders them.
///
/// Version 7: shared holds in slots. The layout part gains, after
/// `kind_join_handle`, the resource's pointer to its shared slots and
/// their count, size and hold (`resource_shared` to `shared_slot_hold`),
/// and `hold_slot_claimed`, the generation of a slot caught while its
/// hold was being written (so the address part moved by five words).
///
/// Version 8: the tokio task ids of roots leave the extension for a page
/// table of their own (8 bytes a root where the extension took 32), and
/// the ids of those roots order them. The layout part loses
/// `ext_tokio_id` and `ext_tokio_order` (every later field moves back by
/// two words); the address part gains `tokio_pages` and
/// `tokio_page_count` at its end.
///
/// Version 9: join waits leave the listed resources for slots of an
/// arena of their own (no resource, and so no allocation, per awaited
/// `JoinHandle`), and a resource loses its `resource_target` (only a
/// `JoinHandle` had one). The layout part gains, after
/// `hold_slot_claimed`, the size and offsets of a join slot
/// (`join_slot_size` to `join_slot_spawned_at`; with `resource_target`
/// gone, the address part moved by five words); the
/// address part gains `join_pages`, `join_page_count`, `join_count` and
/// `join_capacity` at its end.
///
/// Version 10: the layout part gains, after `await_site_call_site`,
/// `await_site_return_address` and `call_site_body_address` (every later
/// field moves by two words): where an await site keeps its cached return
/// address and a call site an address in its body's code, so that the
/// scripts place async frames among native frames without debug info as
/// the walker does.
///
/// Version 11: the layout part gains `wait_awaiting` after
/// `wait_generation` (every later field moves by one word) and
/// `join_slot_awaiting` after `join_slot_spawned_at` (the address part
/// moves by two words): the `.await` at which an acquire future or a
/// `JoinHandle` was polled, so that the scripts, like the process, drop
/// a wait whose waiter is no longer suspended there.
///
/// Version 12: no field moves; `wait_awaiting` and `join_slot_awaiting`
/// are whole words: the await site's id in the low 32 bits (`u32::MAX`:
/// polled between two `.await`s, awaited nowhere) and the birth of the
/// frame suspended there in the high 32, so that the scripts, like the
/// process, do not take another frame at the same `.await` for it.
///
/// Version 13: the layout part gains `wait_path` after `wait_awaiting`
/// and `join_slot_path` after `join_slot_awaiting` (every later field
/// moves by one or two words): the ancestry of the frame a wait was
/// polled in (a digest of its ancestors' slot words, see the module docs),
/// so that the scripts, like the process, drop the wait of a frame kept
/// while its caller went on to another `.await`.
pub const VERSION: u64 = 13;

/// The descriptor. See the module docs.
#[repr(C)]
#[derive(Debug)]
pub struct DebugDescriptor {
    /// [`MAGIC`].
    pub(crate) magic: AtomicU64,
    /// [`VERSION`].
    pub(crate) version: AtomicU64,
    /// The size of the descriptor in bytes.
    pub size: u64,
    /// Sizes, offsets and bit layouts.
    pub layout: Layout,
    /// Where the data is.
    pub addresses: Addresses,
}

/// The descriptor debugger scripts look up by this symbol name.
#[unsafe(no_mangle)]
#[used]
pub static ASYNC_STACK_DEBUG: DebugDescriptor = DebugDescriptor {
    magic: AtomicU64::new(MAGIC),
    version: AtomicU64::new(VERSION),
    size: std::mem::size_of::<DebugDescriptor>() as u64,
    layout: layout::LAYOUT,
    addresses: addresses::ADDRESSES,
};

/// Hooks for the debugger-script tests, which must corrupt a live chain,
/// the descriptor and the waits to check that the scripts report it cleanly. Not
/// part of the API.
#[doc(hidden)]
pub mod __testing {
    pub use crate::debug::testing::{
        claim_free_shared_slots, corrupt_descriptor_magic, corrupt_descriptor_version,
        corrupt_waits_len, join_slots_handed_out, leaked_chain, mark_oldest_waits_changing,
        mark_waits_changing, set_current_parent, side_pages_allocated,
    };
}
