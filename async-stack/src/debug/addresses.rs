//! The **address part** of the descriptor: where each structure a script
//! reads is, as the addresses of the lower layers' statics (the record,
//! chunk and extension page tables and the record count of
//! [`crate::task::registry`], the thread-root list of
//! [`crate::record::threads`], the site tables of [`crate::record::site`],
//! the clock word of [`crate::clock`], the page table of the resources
//! listed in the waits registry of [`crate::waits::resource`]), a probe
//! `Location`, and constants. Everything is
//! fixed when the program is linked: the descriptor *pulls* these
//! addresses, and no lower layer knows it exists.

// `std`'s: see the parent module.
use std::sync::atomic::AtomicPtr;

use crate::record::site::{AWAIT_SITES, CALL_SITES};
use crate::record::threads::{THREAD_COUNT, THREAD_PAGES};
use crate::task::registry::{
    CHUNK_PAGES, EXT_PAGES, MAX_TASKS, RECORD_COUNT, RECORD_PAGES, TOKIO_PAGES,
};
use crate::waits::resource::{
    JOIN_CAPACITY, JOIN_COUNT, JOIN_PAGES, LISTED_CAPACITY, LISTED_COUNT, LISTED_PAGES,
};

use super::layout::LOCATION_PROBE;

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
    /// The page table of the waits registry's slots (each the address of
    /// a listed resource, or null), its page count, its `usize` count of
    /// slots handed out (may briefly exceed the capacity), and the
    /// capacity.
    pub(crate) listed_pages: AtomicPtr<()>,
    pub(crate) listed_page_count: u64,
    pub(crate) listed_count: AtomicPtr<()>,
    pub(crate) listed_capacity: u64,
    /// A `Location` whose line, column and file length the layout part
    /// gives (`location_probe_*`), and the address of its file's text.
    pub(crate) location_probe: AtomicPtr<()>,
    pub(crate) location_probe_file: AtomicPtr<()>,
    /// The page table of the tokio task ids of roots (a `u64` per record
    /// index, `arena_page_entries` a page, as the extensions), and its
    /// page count.
    pub(crate) tokio_pages: AtomicPtr<()>,
    pub(crate) tokio_page_count: u64,
    /// The page table of the join waits' slots (`join_slot_size` bytes
    /// each, `arena_page_entries` a page), its page count, its `usize`
    /// count of slots handed out (may briefly exceed the capacity), and
    /// the capacity: as the listed resources' slots.
    pub(crate) join_pages: AtomicPtr<()>,
    pub(crate) join_page_count: u64,
    pub(crate) join_count: AtomicPtr<()>,
    pub(crate) join_capacity: u64,
}

/// The address part of [`super::ASYNC_STACK_DEBUG`].
#[allow(clippy::declare_interior_mutable_const)] // copied once, into the static
pub(super) const ADDRESSES: Addresses = Addresses {
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
    clock: address(&crate::clock::NOW),
    listed_pages: address(&LISTED_PAGES),
    listed_page_count: LISTED_PAGES.len() as u64,
    listed_count: address(&LISTED_COUNT),
    listed_capacity: LISTED_CAPACITY as u64,
    location_probe: address(LOCATION_PROBE),
    location_probe_file: address(LOCATION_PROBE.file()),
    tokio_pages: address(&TOKIO_PAGES),
    tokio_page_count: TOKIO_PAGES.len() as u64,
    join_pages: address(&JOIN_PAGES),
    join_page_count: JOIN_PAGES.len() as u64,
    join_count: address(&JOIN_COUNT),
    join_capacity: JOIN_CAPACITY as u64,
};

/// The address of a static, as the descriptor stores it.
const fn address<T: ?Sized>(item: &'static T) -> AtomicPtr<()> {
    AtomicPtr::new(std::ptr::from_ref(item).cast_mut().cast())
}
