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
//! know. The version changes whenever the meaning of a field changes;
//! new fields are only appended, and `size` says how many bytes the
//! descriptor has.
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
//!   words, the record's `meta` and `foreign` words, the current-frame
//!   tag). These are constants, computed from the real types at compile
//!   time; a test checks them against the real layout;
//! - an **address** part: where the task records' page table is, how many
//!   records were handed out, the page tables of stack chunks and task
//!   extensions, the thread-root list, the two site tables, and the ticking
//!   clock word. All are addresses of statics, fixed when the program is
//!   linked: the descriptor is whole from the start, so a core of a
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
//!   name dumps and the walker print.
//! - **Thread roots**: entry `i` is entry `i % thread_page_entries` of
//!   page `i / thread_page_entries` (a page not allocated yet is `0`), for
//!   `i` below the smaller of the count and the capacity, with `tid` (the
//!   OS thread id, `0` for a free entry) and the address of the thread's
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
//!   hangs below them. The module docs of `task/stack.rs` state the whole
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
//!
//! A debugger reads a stopped process, so it needs none of the sequence
//! counters that in-process readers use; what it reads may still be
//! inconsistent if the process stopped inside a write (a core taken in the
//! middle of a poll), which the scripts report as a problem rather than
//! guess.

use std::mem::{offset_of, size_of};
// `std`'s, not `crate::sync`'s: the descriptor is constant data that a
// debugger reads from a stopped process; atomics only make it `Sync`, and
// the test hooks below are its only stores. Not built under loom.
use std::sync::atomic::{AtomicPtr, AtomicU64, Ordering};

use crate::record::current::Active;
use crate::record::frame::AsyncStackFrame;
use crate::record::site::{
    AWAIT_SITES, AwaitSite, AwaitSiteEntry, CALL_SITES, CallSite, CallSiteEntry, RawStr, SITE_PAGE,
};
use crate::record::threads::{MAX_THREADS, THREAD_COUNT, THREAD_PAGES, ThreadRoot};
use crate::task::record::{TaskExt, TaskName, TaskRecord, spawn, state, wakes};
use crate::task::registry::{
    CHUNK_PAGES, Chunk, EXT_PAGES, MAX_TASKS, PAGE, RECORD_COUNT, RECORD_PAGES,
};
use crate::task::stack::{self, foreign, meta, word};

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
pub const VERSION: u64 = 3;

/// The sizes, offsets and bit layouts a script needs (see the module docs).
/// All in bytes or bits, one `u64` each.
#[repr(C)]
#[derive(Debug)]
#[allow(missing_docs)]
pub struct Layout {
    pub pointer_size: u64,
    // AsyncStackFrame
    pub frame_size: u64,
    pub frame_parent: u64,
    pub frame_site: u64,
    pub site_await_bit: u64,
    // CallSite, AwaitSite
    pub call_site_id: u64,
    pub await_site_id: u64,
    pub await_site_call_site: u64,
    // Site tables
    pub site_page_entries: u64,
    pub raw_str_ptr: u64,
    pub raw_str_len: u64,
    pub call_entry_size: u64,
    pub call_entry_function: u64,
    pub call_entry_file: u64,
    pub call_entry_line: u64,
    pub call_entry_column: u64,
    pub call_entry_task_name: u64,
    pub await_entry_size: u64,
    pub await_entry_call_id: u64,
    pub await_entry_file: u64,
    pub await_entry_line: u64,
    pub await_entry_column: u64,
    // Thread roots and thread state
    pub thread_root_size: u64,
    pub thread_root_tid: u64,
    pub thread_root_active: u64,
    pub thread_page_entries: u64,
    pub thread_pages: u64,
    /// The thread state's pointer to its current-frame word.
    pub active_current: u64,
    pub active_record: u64,
    pub current_slot_shift: u64,
    // Task record
    pub arena_page_entries: u64,
    pub record_size: u64,
    pub record_id: u64,
    pub record_state: u64,
    pub record_polls: u64,
    pub record_wakes: u64,
    pub record_current: u64,
    pub record_self_wakes: u64,
    pub record_parent: u64,
    pub record_spawn: u64,
    pub record_seq: u64,
    pub record_foreign: u64,
    pub record_meta: u64,
    pub record_chunk: u64,
    pub record_slots: u64,
    // State word: `[time][seen][kind]`
    pub state_kind_bits: u64,
    pub state_time_shift: u64,
    pub state_idle: u64,
    pub state_scheduled: u64,
    pub state_running: u64,
    pub state_seen_shift: u64,
    pub state_seen_bits: u64,
    // Wakes word: `[woken][count]`
    pub wakes_count_bits: u64,
    // Published stack geometry
    pub inline_slots: u64,
    pub head_slots: u64,
    pub chunk_slots: u64,
    pub dir_entries: u64,
    pub chunk_size: u64,
    pub no_slot: u64,
    // Slot word
    pub slot_site_bits: u64,
    pub slot_await_flag: u64,
    pub slot_parent_shift: u64,
    pub slot_parent_bits: u64,
    pub slot_birth_shift: u64,
    pub slot_birth_bits: u64,
    pub slot_zombie_bit: u64,
    pub slot_retired_bit: u64,
    // Meta word: `[top][seen version][seen hidden retired][hidden]`
    pub meta_hidden_bits: u64,
    /// The `foreign` word's hidden-retirement count when last collected.
    pub meta_seen_hidden_retired_shift: u64,
    pub meta_top_shift: u64,
    // Foreign word: hidden retirements in the low bits
    pub foreign_hidden_retired_bits: u64,
    pub foreign_open_shift: u64,
    pub foreign_open_bits: u64,
    // Task extension and name
    pub ext_size: u64,
    pub spawn_site_bits: u64,
    pub spawn_named_bit: u64,
    pub ext_name: u64,
    pub name_ptr: u64,
    pub name_len: u64,
    // Clock word: `(ms << 1) | read`, `0` when no ticker runs
    pub clock_shift: u64,
    /// `1`: times are ms of Linux `CLOCK_MONOTONIC_COARSE`, so a script
    /// attached to a live process can read "now" from the same clock;
    /// `0`: ms since an origin in the process.
    pub clock_monotonic: u64,
}

/// Where the data is (see the module docs): the addresses of statics, and
/// constants, all fixed at compile time.
#[repr(C)]
#[derive(Debug)]
#[allow(missing_docs)]
pub struct Addresses {
    /// The record page table: an array of page addresses.
    pub(crate) record_pages: AtomicPtr<()>,
    pub(crate) record_page_count: u64,
    /// A `usize`: records handed out so far (may briefly exceed the
    /// capacity, and the records this process was given, which
    /// `ASYNC_STACK_MAX_TASKS` may lower below `record_capacity`).
    pub(crate) record_count: AtomicPtr<()>,
    pub(crate) record_capacity: u64,
    pub(crate) chunk_pages: AtomicPtr<()>,
    pub(crate) chunk_page_count: u64,
    pub(crate) ext_pages: AtomicPtr<()>,
    pub(crate) ext_page_count: u64,
    /// The thread-root page table, then its `usize` count of entries handed
    /// out (may briefly exceed the capacity, `thread_page_entries` ×
    /// `thread_pages`).
    pub(crate) thread_pages: AtomicPtr<()>,
    pub(crate) thread_count: AtomicPtr<()>,
    pub(crate) call_site_pages: AtomicPtr<()>,
    pub(crate) call_site_count: AtomicPtr<()>,
    pub(crate) await_site_pages: AtomicPtr<()>,
    pub(crate) await_site_count: AtomicPtr<()>,
    /// The ticking clock word (a `u64`).
    pub(crate) clock: AtomicPtr<()>,
}

/// The descriptor. See the module docs.
#[repr(C)]
#[derive(Debug)]
pub struct DebugDescriptor {
    /// [`MAGIC`].
    magic: AtomicU64,
    /// [`VERSION`].
    version: AtomicU64,
    /// The size of the descriptor in bytes.
    pub size: u64,
    /// Sizes, offsets and bit layouts.
    pub layout: Layout,
    /// Where the data is.
    pub addresses: Addresses,
}

const fn o(offset: usize) -> u64 {
    offset as u64
}

const LAYOUT: Layout = Layout {
    pointer_size: o(size_of::<usize>()),
    frame_size: o(size_of::<AsyncStackFrame>()),
    frame_parent: o(offset_of!(AsyncStackFrame, parent)),
    frame_site: o(offset_of!(AsyncStackFrame, site)),
    site_await_bit: o(crate::record::frame::AT_AWAIT),
    call_site_id: o(offset_of!(CallSite, id)),
    await_site_id: o(offset_of!(AwaitSite, id)),
    await_site_call_site: o(offset_of!(AwaitSite, call_site)),
    site_page_entries: o(SITE_PAGE),
    raw_str_ptr: o(offset_of!(RawStr, ptr)),
    raw_str_len: o(offset_of!(RawStr, len)),
    call_entry_size: o(size_of::<CallSiteEntry>()),
    call_entry_function: o(offset_of!(CallSiteEntry, function)),
    call_entry_file: o(offset_of!(CallSiteEntry, file)),
    call_entry_line: o(offset_of!(CallSiteEntry, line)),
    call_entry_column: o(offset_of!(CallSiteEntry, column)),
    call_entry_task_name: o(offset_of!(CallSiteEntry, task_name)),
    await_entry_size: o(size_of::<AwaitSiteEntry>()),
    await_entry_call_id: o(offset_of!(AwaitSiteEntry, call_id)),
    await_entry_file: o(offset_of!(AwaitSiteEntry, file)),
    await_entry_line: o(offset_of!(AwaitSiteEntry, line)),
    await_entry_column: o(offset_of!(AwaitSiteEntry, column)),
    thread_root_size: o(size_of::<ThreadRoot>()),
    thread_root_tid: o(offset_of!(ThreadRoot, tid)),
    thread_root_active: o(offset_of!(ThreadRoot, active)),
    thread_page_entries: o(PAGE),
    thread_pages: o(MAX_THREADS.div_ceil(PAGE)),
    active_current: o(offset_of!(Active, word)),
    active_record: o(offset_of!(Active, record)),
    current_slot_shift: current_slot_shift(),
    arena_page_entries: o(PAGE),
    record_size: o(size_of::<TaskRecord>()),
    record_id: o(offset_of!(TaskRecord, id)),
    record_state: o(offset_of!(TaskRecord, state)),
    record_polls: o(offset_of!(TaskRecord, polls)),
    record_wakes: o(offset_of!(TaskRecord, wakes)),
    record_current: o(offset_of!(TaskRecord, current)),
    record_self_wakes: o(offset_of!(TaskRecord, self_wakes)),
    record_parent: o(offset_of!(TaskRecord, parent)),
    record_spawn: o(offset_of!(TaskRecord, spawn)),
    record_seq: o(offset_of!(TaskRecord, seq)),
    record_foreign: o(offset_of!(TaskRecord, foreign)),
    record_meta: o(offset_of!(TaskRecord, meta)),
    record_chunk: o(offset_of!(TaskRecord, chunk)),
    record_slots: o(offset_of!(TaskRecord, slots)),
    state_kind_bits: 2,
    state_time_shift: state::TIME_SHIFT as u64,
    state_idle: state::IDLE,
    state_scheduled: state::SCHEDULED,
    state_running: state::RUNNING,
    state_seen_shift: state::SEEN_SHIFT as u64,
    state_seen_bits: state::SEEN_BITS as u64,
    wakes_count_bits: wakes::COUNT_BITS as u64,
    inline_slots: stack::INLINE_SLOTS as u64,
    head_slots: stack::HEAD_SLOTS as u64,
    chunk_slots: stack::CHUNK_SLOTS as u64,
    dir_entries: stack::DIR_ENTRIES as u64,
    chunk_size: o(size_of::<Chunk>()),
    no_slot: crate::task::place::NO_SLOT as u64,
    slot_site_bits: word::PARENT_SHIFT as u64,
    slot_await_flag: word::AWAIT as u64,
    slot_parent_shift: word::PARENT_SHIFT as u64,
    slot_parent_bits: (word::BIRTH_SHIFT - word::PARENT_SHIFT) as u64,
    slot_birth_shift: word::BIRTH_SHIFT as u64,
    slot_birth_bits: word::BIRTH_MASK.count_ones() as u64,
    slot_zombie_bit: word::ZOMBIE.trailing_zeros() as u64,
    slot_retired_bit: word::RETIRED.trailing_zeros() as u64,
    meta_hidden_bits: meta::HIDDEN_MASK.count_ones() as u64,
    meta_seen_hidden_retired_shift: meta::SEEN_HIDDEN_SHIFT as u64,
    meta_top_shift: meta::TOP_SHIFT as u64,
    foreign_hidden_retired_bits: foreign::HIDDEN_MASK.count_ones() as u64,
    foreign_open_shift: foreign::OPEN_SHIFT as u64,
    foreign_open_bits: foreign::MAX_OPEN.count_ones() as u64,
    ext_size: o(size_of::<TaskExt>()),
    spawn_site_bits: spawn::SITE_MASK.count_ones() as u64,
    spawn_named_bit: spawn::NAMED.trailing_zeros() as u64,
    ext_name: o(offset_of!(TaskExt, name)),
    name_ptr: o(TaskName::PTR_OFFSET),
    name_len: o(TaskName::LEN_OFFSET),
    clock_shift: 1,
    clock_monotonic: cfg!(target_os = "linux") as u64,
};

const fn current_slot_shift() -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        crate::record::current::SLOT_SHIFT as u64
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        0
    }
}

/// The descriptor debugger scripts look up by this symbol name.
#[unsafe(no_mangle)]
#[used]
pub static ASYNC_STACK_DEBUG: DebugDescriptor = DebugDescriptor {
    magic: AtomicU64::new(MAGIC),
    version: AtomicU64::new(VERSION),
    size: size_of::<DebugDescriptor>() as u64,
    layout: LAYOUT,
    addresses: Addresses {
        record_pages: address(&RECORD_PAGES),
        record_page_count: RECORD_PAGES.len() as u64,
        record_count: address(&RECORD_COUNT),
        record_capacity: MAX_TASKS as u64,
        chunk_pages: address(&CHUNK_PAGES),
        chunk_page_count: CHUNK_PAGES.len() as u64,
        ext_pages: address(&EXT_PAGES),
        ext_page_count: EXT_PAGES.len() as u64,
        thread_pages: address(&THREAD_PAGES),
        thread_count: address(&THREAD_COUNT),
        call_site_pages: address(&CALL_SITES.pages),
        call_site_count: address(&CALL_SITES.len),
        await_site_pages: address(&AWAIT_SITES.pages),
        await_site_count: address(&AWAIT_SITES.len),
        clock: address(&crate::record::clock::NOW),
    },
};

/// The address of a static, as the descriptor stores it.
const fn address<T: ?Sized>(item: &'static T) -> AtomicPtr<()> {
    AtomicPtr::new(std::ptr::from_ref(item).cast_mut().cast())
}

#[cfg(test)]
mod tests {
    //! A reader that knows nothing but the descriptor, reading this
    //! process's memory by address as a debugger script reads a core: what
    //! it finds must be what the in-process API reports.

    use super::*;
    use crate::record::traced::TracedExt;
    use std::future::Future;
    use std::pin::Pin;
    use std::task::{Context, Waker};

    /// The descriptor as the scripts see it: an array of words.
    struct Raw {
        words: Vec<u64>,
    }

    fn word_at(addr: u64) -> u64 {
        // SAFETY: the test reads addresses the descriptor and the
        // structures it names give, all of them alive (never freed) and
        // 8-byte aligned.
        unsafe { std::ptr::read_volatile(addr as usize as *const u64) }
    }

    fn u32_at(addr: u64) -> u32 {
        // SAFETY: as in `word_at`, 4-byte aligned.
        unsafe { std::ptr::read_volatile(addr as usize as *const u32) }
    }

    fn str_at(l: &Named, raw_str: u64) -> String {
        let ptr = word_at(raw_str + l.get("raw_str_ptr"));
        let len = word_at(raw_str + l.get("raw_str_len"));
        // SAFETY: a `RawStr` of a site entry or a task name describes
        // live UTF-8 bytes.
        let bytes = unsafe { std::slice::from_raw_parts(ptr as usize as *const u8, len as usize) };
        String::from_utf8(bytes.to_vec()).unwrap()
    }

    /// Field names in descriptor order, as the scripts list them.
    const LAYOUT_FIELDS: &[&str] = &[
        "pointer_size",
        "frame_size",
        "frame_parent",
        "frame_site",
        "site_await_bit",
        "call_site_id",
        "await_site_id",
        "await_site_call_site",
        "site_page_entries",
        "raw_str_ptr",
        "raw_str_len",
        "call_entry_size",
        "call_entry_function",
        "call_entry_file",
        "call_entry_line",
        "call_entry_column",
        "call_entry_task_name",
        "await_entry_size",
        "await_entry_call_id",
        "await_entry_file",
        "await_entry_line",
        "await_entry_column",
        "thread_root_size",
        "thread_root_tid",
        "thread_root_active",
        "thread_page_entries",
        "thread_pages",
        "active_current",
        "active_record",
        "current_slot_shift",
        "arena_page_entries",
        "record_size",
        "record_id",
        "record_state",
        "record_polls",
        "record_wakes",
        "record_current",
        "record_self_wakes",
        "record_parent",
        "record_spawn",
        "record_seq",
        "record_foreign",
        "record_meta",
        "record_chunk",
        "record_slots",
        "state_kind_bits",
        "state_time_shift",
        "state_idle",
        "state_scheduled",
        "state_running",
        "state_seen_shift",
        "state_seen_bits",
        "wakes_count_bits",
        "inline_slots",
        "head_slots",
        "chunk_slots",
        "dir_entries",
        "chunk_size",
        "no_slot",
        "slot_site_bits",
        "slot_await_flag",
        "slot_parent_shift",
        "slot_parent_bits",
        "slot_birth_shift",
        "slot_birth_bits",
        "slot_zombie_bit",
        "slot_retired_bit",
        "meta_hidden_bits",
        "meta_seen_hidden_retired_shift",
        "meta_top_shift",
        "foreign_hidden_retired_bits",
        "foreign_open_shift",
        "foreign_open_bits",
        "ext_size",
        "spawn_site_bits",
        "spawn_named_bit",
        "ext_name",
        "name_ptr",
        "name_len",
        "clock_shift",
        "clock_monotonic",
    ];

    const ADDRESS_FIELDS: &[&str] = &[
        "record_pages",
        "record_page_count",
        "record_count",
        "record_capacity",
        "chunk_pages",
        "chunk_page_count",
        "ext_pages",
        "ext_page_count",
        "thread_pages",
        "thread_count",
        "call_site_pages",
        "call_site_count",
        "await_site_pages",
        "await_site_count",
        "clock",
    ];

    /// Descriptor words by field name.
    struct Named {
        names: &'static [&'static str],
        values: Vec<u64>,
    }

    impl Named {
        fn get(&self, name: &str) -> u64 {
            let i = self.names.iter().position(|n| *n == name).unwrap();
            self.values[i]
        }
    }

    fn raw() -> Raw {
        let base = std::ptr::from_ref(&ASYNC_STACK_DEBUG) as u64;
        let n = word_at(base + 16) / 8;
        Raw {
            words: (0..n).map(|i| word_at(base + 8 * i)).collect(),
        }
    }

    /// The layout part, read now.
    fn layout_words() -> Named {
        Named {
            names: LAYOUT_FIELDS,
            values: raw().words[3..3 + LAYOUT_FIELDS.len()].to_vec(),
        }
    }

    /// The address part, read now (some addresses are published late).
    fn address_words() -> Named {
        Named {
            names: ADDRESS_FIELDS,
            values: raw().words[3 + LAYOUT_FIELDS.len()..].to_vec(),
        }
    }

    #[test]
    fn the_descriptor_is_magic_version_and_every_field_in_order() {
        let r = raw();
        assert_eq!(&r.words[0].to_le_bytes(), b"ASYNCSTK");
        assert_eq!(r.words[1], VERSION);
        assert_eq!(
            r.words.len(),
            3 + LAYOUT_FIELDS.len() + ADDRESS_FIELDS.len(),
            "every field is a word, and the lists above name them all"
        );
        let l = layout_words();
        // A few fields against the in-process types, by name: the order of
        // the lists is the order of the struct.
        assert_eq!(l.get("frame_size"), 24);
        assert_eq!(l.get("record_size"), size_of::<TaskRecord>() as u64);
        assert_eq!(l.get("record_slots"), offset_of!(TaskRecord, slots) as u64);
        assert_eq!(
            l.get("clock_monotonic"),
            u64::from(cfg!(target_os = "linux"))
        );
        assert_eq!(l.get("slot_await_flag"), u64::from(word::AWAIT));
    }

    /// Finds the record of task `id` by scanning the record pages.
    /// The address and index of task `id`'s record.
    fn record_and_index_of(id: u64) -> (u64, u64) {
        let (l, a) = (layout_words(), address_words());
        let pages = word_at(std::ptr::from_ref(&ASYNC_STACK_DEBUG.addresses.record_pages) as u64);
        assert_eq!(pages, a.get("record_pages"));
        let count = word_at(a.get("record_count")).min(a.get("record_capacity"));
        let per_page = l.get("arena_page_entries");
        (0..count)
            .map(|i| {
                let rec =
                    word_at(pages + 8 * (i / per_page)) + (i % per_page) * l.get("record_size");
                (rec, i)
            })
            .find(|&(rec, _)| word_at(rec + l.get("record_id")) == id)
            .expect("the task's record is in the pages")
    }

    fn call_site_entry(id: u64) -> u64 {
        let (l, a) = (layout_words(), address_words());
        assert!(id >= 1 && id <= word_at(a.get("call_site_count")));
        let i = id - 1;
        let per = l.get("site_page_entries");
        word_at(a.get("call_site_pages") + 8 * (i / per)) + (i % per) * l.get("call_entry_size")
    }

    #[test]
    fn a_task_read_from_memory_alone_is_what_the_process_reports() {
        let l = layout_words();
        let mut cx = Context::from_waker(Waker::noop());
        let root = std::future::pending::<()>().traced_named("debug-layout");
        let root_line = line!() - 1;
        let spawned = crate::task::spawned(root);
        let spawn_line = line!() - 1;
        let mut task: Pin<Box<dyn Future<Output = ()>>> = Box::pin(spawned.named("raw-reader"));
        assert!(task.as_mut().poll(&mut cx).is_pending());
        let id = crate::read::dump::dump()
            .tasks
            .iter()
            .find(|t| t.name.as_deref() == Some("raw-reader"))
            .unwrap()
            .id;

        let (rec, i) = record_and_index_of(id);
        // Idle after its poll, polled once, never woken.
        let st = word_at(rec + l.get("record_state"));
        assert_eq!(st & 3, l.get("state_idle"));
        assert_eq!(word_at(rec + l.get("record_polls")), 1);
        assert_eq!(word_at(rec + l.get("record_self_wakes")), 0);
        // Slot 0: the root, at its call site.
        let meta = word_at(rec + l.get("record_meta"));
        assert_eq!(meta >> l.get("meta_top_shift"), 1, "one slot in use");
        let slot0 = word_at(rec + l.get("record_slots"));
        let site = slot0 & ((1 << l.get("slot_site_bits")) - 1);
        assert_eq!(site & l.get("slot_await_flag"), 0);
        let parent = (slot0 >> l.get("slot_parent_shift")) & ((1 << l.get("slot_parent_bits")) - 1);
        assert_eq!(parent, l.get("no_slot"));
        let entry = call_site_entry(site);
        assert_eq!(
            str_at(&l, entry + l.get("call_entry_function")),
            "debug-layout"
        );
        assert_eq!(str_at(&l, entry + l.get("call_entry_file")), file!());
        assert_eq!(u32_at(entry + l.get("call_entry_line")), root_line);
        // The spawn word: a name, and the spawn site.
        let spawn_word = u64::from(u32_at(rec + l.get("record_spawn")));
        assert_ne!(spawn_word & (1 << l.get("spawn_named_bit")), 0);
        let spawn_site = spawn_word & ((1 << l.get("spawn_site_bits")) - 1);
        // Spawned outside any task: no parent.
        assert_eq!(word_at(rec + l.get("record_parent")), 0);
        // The extension of the same index: the name.
        let a = address_words();
        let per = l.get("arena_page_entries");
        let ext = word_at(a.get("ext_pages") + 8 * (i / per)) + (i % per) * l.get("ext_size");
        let name = word_at(ext + l.get("ext_name"));
        assert_ne!(name, 0);
        let text = word_at(name + l.get("name_ptr"));
        let len = word_at(name + l.get("name_len"));
        // SAFETY: the name's text, alive while the task is.
        let bytes = unsafe { std::slice::from_raw_parts(text as usize as *const u8, len as usize) };
        assert_eq!(bytes, b"raw-reader");
        let spawn = call_site_entry(spawn_site);
        assert_eq!(str_at(&l, spawn + l.get("call_entry_file")), file!());
        assert_eq!(u32_at(spawn + l.get("call_entry_line")), spawn_line);
        drop(task);
        assert_eq!(word_at(rec + l.get("record_id")), 0, "a free record");
    }

    #[test]
    fn this_thread_is_listed_with_its_id_and_a_chain_while_it_polls() {
        let me = crate::record::current::current();
        let tid = me.thread_id();
        // After this thread registered: the first registration publishes
        // the list's addresses, and another test's thread may be that
        // first one.
        let (l, a) = (layout_words(), address_words());
        let listed = |tid: u32| {
            let n = word_at(a.get("thread_count"));
            let per = l.get("thread_page_entries");
            // An entry can be counted before its page is published
            // (module docs: a page not allocated yet is `0`).
            (0..n)
                .filter_map(|i| {
                    let page = word_at(a.get("thread_pages") + 8 * (i / per));
                    (page != 0).then(|| page + (i % per) * l.get("thread_root_size"))
                })
                .find(|&e| u32_at(e + l.get("thread_root_tid")) == tid)
                .map(|e| word_at(e + l.get("thread_root_active")))
        };
        // A poll on this thread: inside it, the thread's current frame,
        // read through the list, is the innermost frame, whose parent is
        // the root.
        let seen = std::cell::Cell::new((0, 0, 0));
        let inner = std::future::poll_fn(|_| {
            let active = listed(tid).expect("a polling thread is listed");
            assert_eq!(active, std::ptr::from_ref(me) as u64);
            let current = word_at(active + l.get("active_current"));
            let shift = l.get("current_slot_shift");
            let mut cur = word_at(current);
            if shift != 0 {
                cur &= (1 << shift) - 1;
            }
            let parent = word_at(cur + l.get("frame_parent"));
            seen.set((cur, parent, word_at(parent + l.get("frame_parent"))));
            std::task::Poll::Ready(())
        })
        .traced_named("debug-inner");
        futures::executor::block_on(
            async {
                inner.await;
            }
            .traced_named("debug-outer"),
        );
        let (cur, parent, grandparent) = seen.get();
        assert_ne!(cur, 0);
        assert_ne!(parent, 0, "the inner frame links to the root");
        assert_eq!(grandparent, 0, "the root has no parent");
        // Between polls the thread has no chain.
        let active = listed(tid).expect("still listed");
        assert_eq!(word_at(active + l.get("active_current")), 0);
    }
}

/// The gdb commands, embedded in every ELF binary that links async-stack
/// so that gdb loads them by itself (`.debug_gdb_scripts`, the section
/// `#![debugger_visualizer]` writes, which takes one file only): the text
/// of `async-stack/debugger/async_stack_reader.py` followed by that of
/// `async-stack/debugger/async_stack_gdb.py`, as one inline Python script. gdb runs it
/// only from a path it trusts: `add-auto-load-safe-path /path/to/binary`
/// (or a folder above it) in `~/.gdbinit`, or `-iex` on the command line.
#[cfg(target_os = "linux")]
mod gdb_autoload {
    /// Section entry: kind 4 (inline Python), the script's name on the
    /// first line, its text, then a NUL.
    const SCRIPT: &str = concat!(
        "\x04",
        "async_stack_gdb.py\n",
        include_str!("../debugger/async_stack_reader.py"),
        include_str!("../debugger/async_stack_gdb.py"),
        "\0"
    );

    #[unsafe(link_section = ".debug_gdb_scripts")]
    #[used]
    static EMBEDDED: [u8; SCRIPT.len()] = {
        let mut out = [0u8; SCRIPT.len()];
        let bytes = SCRIPT.as_bytes();
        let mut i = 0;
        while i < bytes.len() {
            out[i] = bytes[i];
            i += 1;
        }
        out
    };
}

/// Hooks for the debugger-script tests, which must corrupt a live chain
/// and the descriptor to check that the scripts report it cleanly. Not
/// part of the API.
#[doc(hidden)]
pub mod __testing {
    use super::*;

    /// Overwrites the descriptor's magic number (the scripts must then
    /// refuse it).
    pub fn corrupt_descriptor_magic() {
        ASYNC_STACK_DEBUG
            .magic
            .store(0x0bad_0bad, Ordering::Relaxed);
    }

    /// Overwrites the descriptor's version with one no script knows.
    pub fn corrupt_descriptor_version() {
        ASYNC_STACK_DEBUG
            .version
            .store(VERSION + 1000, Ordering::Relaxed);
    }

    /// A chain of `n` frames, each the parent of the one before, all at one
    /// call site, leaked: a parent for a chain deeper than a script's limit.
    pub fn leaked_chain(n: usize) -> *const AsyncStackFrame {
        static SITE: CallSite = CallSite::new("leaked_chain", "", file!(), line!(), 1, true);
        let frames: &'static [AsyncStackFrame] =
            Vec::leak((0..n).map(|_| AsyncStackFrame::new(&SITE)).collect());
        for pair in frames.windows(2) {
            pair[0]
                .parent
                .store(std::ptr::from_ref(&pair[1]).cast_mut(), Ordering::Relaxed);
        }
        frames.first().map_or(std::ptr::null(), std::ptr::from_ref)
    }

    /// Sets the parent link of the frame being polled on this thread to
    /// `parent` (null: no frame is polled). Returns the frame.
    pub fn set_current_parent(parent: *const AsyncStackFrame) -> *const AsyncStackFrame {
        let frame = crate::record::current::current().frame();
        // SAFETY: a non-null current frame is one whose poll is on this
        // thread's stack, hence alive (invariant of `current`).
        if let Some(f) = unsafe { frame.as_ref() } {
            f.parent.store(parent.cast_mut(), Ordering::Relaxed);
        }
        frame
    }
}
