//! The **layout part** of the descriptor: the sizes, offsets and bit
//! layouts of every structure a script reads, computed at compile time
//! from the real types (so they cannot drift from them; the tests check a
//! few against the types as well).

use std::mem::{offset_of, size_of};
use std::panic::Location;

use crate::pages::PAGE;
use crate::record::current::Active;
use crate::record::frame::AsyncStackFrame;
use crate::record::site::{
    AwaitSite, AwaitSiteEntry, CallSite, CallSiteEntry, RawStr, SITE_PAGE, SiteId,
};
use crate::record::threads::{MAX_THREADS, ThreadRoot};
use crate::task::record::{TaskExt, TaskName, TaskRecord, spawn, state, wakes};
use crate::task::stack::words::Chunk;
use crate::task::stack::{self, foreign, meta, word};
use crate::waits::join::JoinSlot;
use crate::waits::resource::{
    CLAIMED, Hold, HoldSlot, Kind, ListsView, Resource, SHARED_SLOTS, SharedSlot, Wait,
};

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
    /// The await site's cached return address (`usize`; `0`: unresolved,
    /// `1`: resolution failed).
    pub await_site_return_address: u64,
    /// The call site's body address (`usize`; `0`: none known).
    pub call_site_body_address: u64,
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
    // Tokio filing: the spawn word's `tokio` bit (the tokio task ids are
    // in their own page table, `tokio_pages` in the address part)
    pub spawn_tokio_bit: u64,
    // Clock word: `(ms << 1) | read`, `0` when no ticker runs
    pub clock_shift: u64,
    /// `1`: times are ms of Linux `CLOCK_MONOTONIC_COARSE`, so a script
    /// attached to a live process can read "now" from the same clock;
    /// `0`: ms since an origin in the process.
    pub clock_monotonic: u64,
    // std's `Location`, whose fields are private: its size, and the line,
    // column and file length of the probe location (address part), from
    // which a script finds where a `Location` keeps them
    pub location_size: u64,
    pub location_probe_line: u64,
    pub location_probe_column: u64,
    pub location_probe_file_len: u64,
    // A listed resource (waits): its key (creation order), kind (a `u8`),
    // creation site, exclusive hold, and the version, pointers and
    // lengths of its lists
    pub resource_key: u64,
    pub resource_kind: u64,
    pub resource_created_at: u64,
    pub resource_exclusive: u64,
    pub resource_version: u64,
    pub resource_waits: u64,
    pub resource_waits_len: u64,
    pub resource_holds: u64,
    pub resource_holds_len: u64,
    // The exclusive hold (generation `0`: none)
    pub hold_slot_generation: u64,
    pub hold_slot_task: u64,
    pub hold_slot_at: u64,
    pub hold_slot_since: u64,
    // A shared hold, an element of the `holds` list
    pub hold_size: u64,
    pub hold_task: u64,
    pub hold_at: u64,
    pub hold_since: u64,
    // A wait, an element of the `waits` list (`at`: null for none), its
    // generation (unique, in the order waits started), which orders a
    // task's waits in a deadlock report, and the id of the await site
    // its waiter polled the acquire at with the birth of the frame there
    // (`0`: none known), and that frame's ancestry (`0`: not known)
    pub wait_size: u64,
    pub wait_task: u64,
    pub wait_at: u64,
    pub wait_since: u64,
    pub wait_generation: u64,
    pub wait_awaiting: u64,
    pub wait_path: u64,
    // The values of `resource_kind`
    pub kind_mutex: u64,
    pub kind_rwlock: u64,
    pub kind_semaphore: u64,
    pub kind_join_handle: u64,
    // The shared holds kept in slots (`RwLock`, `Semaphore`): the
    // resource's pointer to its array of `shared_slots` slots of
    // `shared_slot_size` bytes (`0`: none), the hold slot within a slot
    // (read with the `hold_slot_*` offsets), and the generation of a slot
    // whose hold is being written
    pub resource_shared: u64,
    pub shared_slots: u64,
    pub shared_slot_size: u64,
    pub shared_slot_hold: u64,
    pub hold_slot_claimed: u64,
    // A join wait (an awaited `JoinHandle`), a slot of the join arena
    // (`join_pages` in the address part): its generation (`0`: free,
    // `hold_slot_claimed`: being written, else the wait's generation, its
    // key), the waiting task, the awaited tokio task, since when, the
    // spawn `Location` (null while free), the id of the await site the
    // waiter polled the handle at with the birth of the frame there (`0`:
    // none known), and that frame's ancestry (`0`: not known)
    pub join_slot_size: u64,
    pub join_slot_generation: u64,
    pub join_slot_task: u64,
    pub join_slot_target: u64,
    pub join_slot_since: u64,
    pub join_slot_spawned_at: u64,
    pub join_slot_awaiting: u64,
    pub join_slot_path: u64,
}

/// A `Location` whose line, column and file the descriptor states, so
/// that a script finds where any `Location` keeps them (its fields are
/// private to `std`, so `offset_of!` cannot name them).
pub(super) const LOCATION_PROBE: &Location<'static> = Location::caller();

// Two different numbers, so that a script cannot take one for the other.
const _: () = assert!(LOCATION_PROBE.line() != LOCATION_PROBE.column());

const fn o(offset: usize) -> u64 {
    offset as u64
}

pub(super) const LAYOUT: Layout = Layout {
    pointer_size: o(size_of::<usize>()),
    frame_size: o(size_of::<AsyncStackFrame>()),
    frame_parent: o(offset_of!(AsyncStackFrame, parent)),
    frame_site: o(offset_of!(AsyncStackFrame, site)),
    site_await_bit: o(crate::record::frame::AT_AWAIT),
    call_site_id: o(offset_of!(CallSite, id)),
    await_site_id: o(offset_of!(AwaitSite, id)),
    await_site_call_site: o(offset_of!(AwaitSite, call_site)),
    await_site_return_address: o(offset_of!(AwaitSite, return_address)),
    call_site_body_address: o(offset_of!(CallSite, body_address)),
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
    active_current: o(offset_of!(Active, current)),
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
    slot_await_flag: SiteId::AWAIT as u64,
    slot_parent_shift: word::PARENT_SHIFT as u64,
    slot_parent_bits: (word::BIRTH_SHIFT - word::PARENT_SHIFT) as u64,
    slot_birth_shift: word::BIRTH_SHIFT as u64,
    slot_birth_bits: word::BIRTH_MASK.count_ones() as u64,
    slot_zombie_bit: word::ZOMBIE.trailing_zeros() as u64,
    slot_retired_bit: word::RETIRED.trailing_zeros() as u64,
    meta_hidden_bits: meta::HIDDEN_MASK.count_ones() as u64,
    meta_seen_hidden_retired_shift: meta::SEEN_HIDDEN_RETIRED_SHIFT as u64,
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
    spawn_tokio_bit: spawn::TOKIO.trailing_zeros() as u64,
    clock_shift: 1,
    clock_monotonic: cfg!(target_os = "linux") as u64,
    location_size: o(size_of::<Location<'static>>()),
    location_probe_line: LOCATION_PROBE.line() as u64,
    location_probe_column: LOCATION_PROBE.column() as u64,
    location_probe_file_len: o(LOCATION_PROBE.file().len()),
    resource_key: o(offset_of!(Resource, key)),
    resource_kind: o(offset_of!(Resource, kind)),
    resource_created_at: o(offset_of!(Resource, created_at)),
    resource_exclusive: o(offset_of!(Resource, exclusive)),
    resource_version: o(offset_of!(Resource, view) + offset_of!(ListsView, version)),
    resource_waits: o(offset_of!(Resource, view) + offset_of!(ListsView, waits)),
    resource_waits_len: o(offset_of!(Resource, view) + offset_of!(ListsView, waits_len)),
    resource_holds: o(offset_of!(Resource, view) + offset_of!(ListsView, holds)),
    resource_holds_len: o(offset_of!(Resource, view) + offset_of!(ListsView, holds_len)),
    hold_slot_generation: o(HoldSlot::GENERATION_OFFSET),
    hold_slot_task: o(HoldSlot::TASK_OFFSET),
    hold_slot_at: o(HoldSlot::AT_OFFSET),
    hold_slot_since: o(HoldSlot::SINCE_OFFSET),
    hold_size: o(size_of::<Hold>()),
    hold_task: o(offset_of!(Hold, task)),
    hold_at: o(offset_of!(Hold, at)),
    hold_since: o(offset_of!(Hold, since_ms)),
    wait_size: o(size_of::<Wait>()),
    wait_task: o(offset_of!(Wait, task)),
    wait_at: o(offset_of!(Wait, at)),
    wait_since: o(offset_of!(Wait, since_ms)),
    wait_generation: o(offset_of!(Wait, generation)),
    wait_awaiting: o(offset_of!(Wait, awaiting)),
    wait_path: o(offset_of!(Wait, path)),
    kind_mutex: Kind::Mutex as u64,
    kind_rwlock: Kind::RwLock as u64,
    kind_semaphore: Kind::Semaphore as u64,
    kind_join_handle: Kind::JoinHandle as u64,
    resource_shared: o(offset_of!(Resource, shared)),
    shared_slots: o(SHARED_SLOTS),
    shared_slot_size: o(size_of::<SharedSlot>()),
    shared_slot_hold: o(SharedSlot::HOLD_OFFSET),
    hold_slot_claimed: CLAIMED,
    join_slot_size: o(size_of::<JoinSlot>()),
    join_slot_generation: o(JoinSlot::GENERATION_OFFSET),
    join_slot_task: o(JoinSlot::TASK_OFFSET),
    join_slot_target: o(JoinSlot::TARGET_OFFSET),
    join_slot_since: o(JoinSlot::SINCE_OFFSET),
    join_slot_spawned_at: o(JoinSlot::SPAWNED_AT_OFFSET),
    join_slot_awaiting: o(JoinSlot::AWAITING_OFFSET),
    join_slot_path: o(JoinSlot::PATH_OFFSET),
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
