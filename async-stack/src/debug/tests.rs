//! A reader that knows nothing but the descriptor, reading this
//! process's memory by address as a debugger script reads a core: what
//! it finds must be what the in-process API reports.

use std::future::Future;
use std::mem::{offset_of, size_of};
use std::panic::Location;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Waker};

use super::{ASYNC_STACK_DEBUG, VERSION};
use crate::record::site::SiteId;
use crate::record::threads::{THREAD_COUNT, THREAD_PAGES};
use crate::task::record::{TaskRecord, spawn};
use crate::task::registry::{MAX_TASKS, RECORD_COUNT, RECORD_PAGES};
use crate::task::traced::TracedExt;
use crate::waits::join::JoinSlot;
use crate::waits::join_wait::JoinWait;
use crate::waits::resource::{
    Ask, Hold, JOIN_CAPACITY, Kind, Registry, Resource, ResourceCopy, SHARED_SLOTS, Wait,
    WaitRecord,
};
use crate::waits::waiter::Waiter;

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

fn u8_at(addr: u64) -> u8 {
    // SAFETY: as in `word_at`.
    unsafe { std::ptr::read_volatile(addr as usize as *const u8) }
}

fn bytes_at(addr: u64, len: u64) -> Vec<u8> {
    // SAFETY: as in `word_at`: live bytes the descriptor names.
    unsafe { std::slice::from_raw_parts(addr as usize as *const u8, len as usize) }.to_vec()
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
    "await_site_return_address",
    "call_site_body_address",
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
    "spawn_tokio_bit",
    "clock_shift",
    "clock_monotonic",
    "location_size",
    "location_probe_line",
    "location_probe_column",
    "location_probe_file_len",
    "resource_key",
    "resource_kind",
    "resource_created_at",
    "resource_exclusive",
    "resource_version",
    "resource_waits",
    "resource_waits_len",
    "resource_holds",
    "resource_holds_len",
    "hold_slot_generation",
    "hold_slot_task",
    "hold_slot_at",
    "hold_slot_since",
    "hold_size",
    "hold_task",
    "hold_at",
    "hold_since",
    "wait_size",
    "wait_task",
    "wait_at",
    "wait_since",
    "wait_generation",
    "wait_awaiting",
    "wait_path",
    "kind_mutex",
    "kind_rwlock",
    "kind_semaphore",
    "kind_join_handle",
    "resource_shared",
    "shared_slots",
    "shared_slot_size",
    "shared_slot_hold",
    "hold_slot_claimed",
    "join_slot_size",
    "join_slot_generation",
    "join_slot_task",
    "join_slot_target",
    "join_slot_since",
    "join_slot_spawned_at",
    "join_slot_awaiting",
    "join_slot_path",
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
    "listed_pages",
    "listed_page_count",
    "listed_count",
    "listed_capacity",
    "location_probe",
    "location_probe_file",
    "tokio_pages",
    "tokio_page_count",
    "join_pages",
    "join_page_count",
    "join_count",
    "join_capacity",
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
    assert_eq!(l.get("slot_await_flag"), u64::from(SiteId::AWAIT));
    assert_eq!(1u32 << l.get("spawn_tokio_bit"), spawn::TOKIO);
    assert_eq!(l.get("location_size"), size_of::<Location<'_>>() as u64);
    assert_eq!(l.get("resource_key"), offset_of!(Resource, key) as u64);
    assert_eq!(l.get("wait_size"), size_of::<Wait>() as u64);
    assert_eq!(l.get("hold_at"), offset_of!(Hold, at) as u64);
    assert_eq!(l.get("kind_join_handle"), Kind::JoinHandle as u64);
    assert_eq!(l.get("shared_slots"), SHARED_SLOTS as u64);
    assert_eq!(l.get("hold_slot_claimed"), u64::MAX);
    assert_eq!(l.get("join_slot_size"), size_of::<JoinSlot>() as u64);
    for (name, offset) in [
        ("join_slot_generation", JoinSlot::GENERATION_OFFSET),
        ("join_slot_task", JoinSlot::TASK_OFFSET),
        ("join_slot_target", JoinSlot::TARGET_OFFSET),
        ("join_slot_since", JoinSlot::SINCE_OFFSET),
        ("join_slot_spawned_at", JoinSlot::SPAWNED_AT_OFFSET),
        ("join_slot_awaiting", JoinSlot::AWAITING_OFFSET),
        ("join_slot_path", JoinSlot::PATH_OFFSET),
    ] {
        assert_eq!(l.get(name), offset as u64, "{name}");
    }
}

/// The quoted names of the Python tuple `name = (...)` in the reader.
fn python_tuple(py: &str, name: &str) -> Vec<String> {
    let start = py
        .find(&format!("\n{name} = ("))
        .unwrap_or_else(|| panic!("the reader defines {name}"));
    let body = &py[start..];
    let body = &body[..body.find(')').expect("the tuple ends")];
    body.split('"')
        .skip(1)
        .step_by(2)
        .map(str::to_owned)
        .collect()
}

/// The Python reader (which gdb and lldb load, and which cannot import
/// these lists) reads the same version, and the same fields in the same
/// order.
#[test]
fn the_python_reader_reads_this_version_and_these_fields() {
    let py = include_str!("../../debugger/async_stack_reader.py");
    assert!(
        py.contains(&format!("\nVERSION = {VERSION}\n")),
        "the reader checks for version {VERSION}"
    );
    assert_eq!(python_tuple(py, "LAYOUT_FIELDS"), LAYOUT_FIELDS);
    assert_eq!(python_tuple(py, "ADDRESS_FIELDS"), ADDRESS_FIELDS);
}

/// The descriptor is whole from the start: every address is that of a
/// static, set at link time, so a core of a process that never ran a
/// task reads as one with no task instead of failing.
#[test]
fn every_address_is_set_from_the_start() {
    let a = address_words();
    for (name, address) in [
        ("record_pages", std::ptr::from_ref(&RECORD_PAGES).addr()),
        ("record_count", std::ptr::from_ref(&RECORD_COUNT).addr()),
        ("thread_pages", std::ptr::from_ref(&THREAD_PAGES).addr()),
        ("thread_count", std::ptr::from_ref(&THREAD_COUNT).addr()),
        (
            "listed_pages",
            std::ptr::from_ref(&crate::waits::resource::LISTED_PAGES).addr(),
        ),
        (
            "join_pages",
            std::ptr::from_ref(&crate::waits::resource::JOIN_PAGES).addr(),
        ),
        (
            "join_count",
            std::ptr::from_ref(&crate::waits::resource::JOIN_COUNT).addr(),
        ),
    ] {
        assert_eq!(a.get(name), address as u64, "{name}");
    }
    assert_eq!(a.get("record_capacity"), MAX_TASKS as u64);
    assert_eq!(a.get("join_capacity"), JOIN_CAPACITY as u64);
    assert_eq!(
        a.get("join_page_count") * layout_words().get("arena_page_entries"),
        JOIN_CAPACITY as u64,
        "the join pages hold the capacity"
    );
    for name in ADDRESS_FIELDS {
        assert_ne!(a.get(name), 0, "{name}");
    }
}

/// The address and index of task `id`'s record, found by scanning the
/// record pages.
fn record_and_index_of(id: u64) -> (u64, u64) {
    let (l, a) = (layout_words(), address_words());
    let pages = word_at(std::ptr::from_ref(&ASYNC_STACK_DEBUG.addresses.record_pages) as u64);
    assert_eq!(pages, a.get("record_pages"));
    let count = word_at(a.get("record_count")).min(a.get("record_capacity"));
    let per_page = l.get("arena_page_entries");
    // A page another test thread is adding may be counted before its
    // pointer is stored: a debugger skips a null page, and so does this.
    (0..count)
        .filter_map(|i| {
            let page = word_at(pages + 8 * (i / per_page));
            (page != 0).then(|| (page + (i % per_page) * l.get("record_size"), i))
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
    let tid = crate::record::threads::thread_id(me);
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

/// A root first polled inside a tokio task, read from memory alone: the
/// spawn word's `tokio` bit, in the tokio id page table the id that
/// `JoinHandle::id()` displays, and task ids that follow first polls. A
/// root polled outside tokio has the bit clear.
#[cfg(feature = "tokio")]
#[test]
fn a_root_filed_under_a_tokio_task_reads_its_id_and_order_from_memory_alone() {
    let (l, a) = (layout_words(), address_words());
    let spawn_word_of = |rec: u64| u64::from(u32_at(rec + l.get("record_spawn")));
    let tokio_bit = 1 << l.get("spawn_tokio_bit");
    let per = l.get("arena_page_entries");
    let tokio_id_of =
        |i: u64| word_at(word_at(a.get("tokio_pages") + 8 * (i / per)) + (i % per) * 8);
    let id_of = |rec: u64| word_at(rec + l.get("record_id"));
    // The ids of the roots of the entry named `name`, in branch order.
    let roots_of = |name: &str| {
        crate::read::dump::dump()
            .tasks
            .iter()
            .find(|t| t.name.as_deref() == Some(name))
            .unwrap()
            .branches
            .clone()
    };

    let rt = ::tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let (tx, rx) = ::tokio::sync::oneshot::channel::<()>();
    let (handle, shown) = rt.block_on(async {
        let handle = ::tokio::spawn(async move {
            let first = std::future::pending::<()>().traced_named("debug-tokio-first");
            let second = std::future::pending::<()>().traced_named("debug-tokio-second");
            ::tokio::select! {
                biased;
                _ = first => {}
                _ = second => {}
                _ = rx => {}
            }
        });
        let shown = handle.id().to_string();
        ::tokio::task::yield_now().await;
        (handle, shown)
    });
    let mut outside = Box::pin(std::future::pending::<()>().traced_named("debug-tokio-outside"));
    let mut cx = Context::from_waker(Waker::noop());
    assert!(outside.as_mut().poll(&mut cx).is_pending());

    // The dump shows the two roots as one entry, named by the first.
    let roots = roots_of("debug-tokio-first");
    assert_eq!(roots.len(), 2, "one entry of two roots");
    let (first, i) = record_and_index_of(roots[0]);
    let (second, j) = record_and_index_of(roots[1]);
    let (alone, _) = record_and_index_of(roots_of("debug-tokio-outside")[0]);
    assert_ne!(spawn_word_of(first) & tokio_bit, 0);
    assert_ne!(spawn_word_of(second) & tokio_bit, 0);
    assert_eq!(spawn_word_of(alone) & tokio_bit, 0, "polled outside tokio");
    assert_eq!(tokio_id_of(i).to_string(), shown);
    assert_eq!(tokio_id_of(j).to_string(), shown);
    assert!(id_of(first) < id_of(second), "the first root polled first");

    drop(tx);
    rt.block_on(handle).unwrap();
}

/// Where std's `Location` keeps its file's address and length, its line
/// and its column, found from the probe as the scripts find it: the word
/// equal to the probe's file length, the `u32`s equal to its line and
/// column, and the one word left, whose text is the probe's file.
struct LocationLayout {
    file: u64,
    file_len: u64,
    line: u64,
    column: u64,
}

impl LocationLayout {
    fn probe() -> Self {
        let (l, a) = (layout_words(), address_words());
        let (probe, size) = (a.get("location_probe"), l.get("location_size"));
        let len = l.get("location_probe_file_len");
        let only = |found: Vec<u64>, what: &str| {
            assert_eq!(found.len(), 1, "one place for the {what}: {found:?}");
            found[0]
        };
        let file_len = only(
            (0..size / 8)
                .map(|i| 8 * i)
                .filter(|&o| word_at(probe + o) == len)
                .collect(),
            "length",
        );
        let u32_equal = |value: u64| {
            (0..size / 4)
                .map(|i| 4 * i)
                .filter(|&o| o / 8 != file_len / 8 && u64::from(u32_at(probe + o)) == value)
                .collect::<Vec<u64>>()
        };
        let line = only(u32_equal(l.get("location_probe_line")), "line");
        let column = only(u32_equal(l.get("location_probe_column")), "column");
        let file = only(
            (0..size / 8)
                .map(|i| 8 * i)
                .filter(|&o| ![file_len / 8, line / 8, column / 8].contains(&(o / 8)))
                .collect(),
            "file",
        );
        assert_eq!(
            bytes_at(word_at(probe + file), len),
            bytes_at(a.get("location_probe_file"), len),
            "the probe's file"
        );
        LocationLayout {
            file,
            file_len,
            line,
            column,
        }
    }

    /// `(file, line, column)` of the `Location` at `at`.
    fn read(&self, at: u64) -> (String, u32, u32) {
        let text = bytes_at(word_at(at + self.file), word_at(at + self.file_len));
        (
            String::from_utf8(text).unwrap(),
            u32_at(at + self.line),
            u32_at(at + self.column),
        )
    }
}

fn location(l: &Location<'_>) -> (String, u32, u32) {
    (l.file().to_owned(), l.line(), l.column())
}

/// A hold or a wait as read from memory: task, where, since when.
type Record = (u64, Option<(String, u32, u32)>, u64);

/// A listed resource as read from memory alone.
#[derive(Debug, PartialEq)]
struct ReadResource {
    key: u64,
    kind: u64,
    created_at: (String, u32, u32),
    target: u64,
    exclusive: Option<Record>,
    holds: Vec<Record>,
    waits: Vec<Record>,
    version: u64,
    /// The await site ids of its waits, added up.
    awaiting: u64,
    /// The ancestries of its waits, added up (wrapping).
    path: u64,
}

/// The addresses of the entries handed out of the arena whose page
/// table, count and capacity the address part names `pages`, `count`
/// and `capacity`, `size` bytes each (those of pages not allocated left
/// out).
fn arena_from_memory(pages: &str, count: &str, capacity: &str, size: u64) -> Vec<u64> {
    let (l, a) = (layout_words(), address_words());
    let count = word_at(a.get(count)).min(a.get(capacity));
    let per = l.get("arena_page_entries");
    (0..count)
        .filter_map(|i| {
            let page = word_at(a.get(pages) + 8 * (i / per));
            (page != 0).then(|| page + (i % per) * size)
        })
        .collect()
}

/// The addresses in the waits registry's slots.
fn listed_from_memory() -> Vec<u64> {
    let size = layout_words().get("pointer_size");
    arena_from_memory("listed_pages", "listed_count", "listed_capacity", size)
        .into_iter()
        .map(word_at)
        .filter(|&r| r != 0)
        .collect()
}

/// The holds in the shared slots of the resource at `r`, in slot order.
fn shared_slots_from_memory(r: u64) -> Vec<Record> {
    let l = layout_words();
    let slots = word_at(r + l.get("resource_shared"));
    if slots == 0 {
        return Vec::new();
    }
    (0..l.get("shared_slots"))
        .filter_map(|i| {
            hold_slot_from_memory(slots + i * l.get("shared_slot_size") + l.get("shared_slot_hold"))
        })
        .collect()
}

/// The hold in the hold slot at `slot` (exclusive or shared), if any.
fn hold_slot_from_memory(slot: u64) -> Option<Record> {
    let l = layout_words();
    let generation = word_at(slot + l.get("hold_slot_generation"));
    assert_ne!(generation, l.get("hold_slot_claimed"), "caught mid-claim");
    let at = word_at(slot + l.get("hold_slot_at"));
    (generation != 0).then(|| {
        (
            word_at(slot + l.get("hold_slot_task")),
            (at != 0).then(|| LocationLayout::probe().read(at)),
            word_at(slot + l.get("hold_slot_since")),
        )
    })
}

fn read_resource(r: u64) -> ReadResource {
    let l = layout_words();
    let loc = LocationLayout::probe();
    let at = |p: u64| (p != 0).then(|| loc.read(p));
    let list = |ptr: &str, len: &str, size: &str, task: &str, at_: &str, since: &str| {
        let (base, n) = (word_at(r + l.get(ptr)), word_at(r + l.get(len)));
        (0..n)
            .map(|i| {
                let e = base + i * l.get(size);
                (
                    word_at(e + l.get(task)),
                    at(word_at(e + l.get(at_))),
                    word_at(e + l.get(since)),
                )
            })
            .collect()
    };
    ReadResource {
        key: word_at(r + l.get("resource_key")),
        kind: u64::from(u8_at(r + l.get("resource_kind"))),
        created_at: loc.read(word_at(r + l.get("resource_created_at"))),
        // Only a join wait has a target (`read_join`).
        target: 0,
        exclusive: hold_slot_from_memory(r + l.get("resource_exclusive")),
        holds: shared_slots_from_memory(r)
            .into_iter()
            .chain(list(
                "resource_holds",
                "resource_holds_len",
                "hold_size",
                "hold_task",
                "hold_at",
                "hold_since",
            ))
            .collect(),
        waits: list(
            "resource_waits",
            "resource_waits_len",
            "wait_size",
            "wait_task",
            "wait_at",
            "wait_since",
        ),
        version: word_at(r + l.get("resource_version")),
        // Words in each wait: the await site's id and the frame's birth,
        // and the frame's ancestry.
        awaiting: wait_words(r, "wait_awaiting"),
        path: wait_words(r, "wait_path"),
    }
}

/// The word at the layout's offset `field` in each wait of the resource
/// at `r`, added up (wrapping).
fn wait_words(r: u64, field: &str) -> u64 {
    let l = layout_words();
    let (base, n) = (
        word_at(r + l.get("resource_waits")),
        word_at(r + l.get("resource_waits_len")),
    );
    (0..n)
        .map(|i| word_at(base + i * l.get("wait_size") + l.get(field)))
        .fold(0, u64::wrapping_add)
}

/// The join slot at `slot` read as a live resource of kind `JoinHandle`
/// (see the module docs of `debug`), or `None` when it is free or
/// caught while written: its generation `hold_slot_claimed`, a null
/// spawn site, or (this process runs on while it is read, unlike a core)
/// a generation changed by the time its words were read.
fn read_join(slot: u64) -> Option<ReadResource> {
    let l = layout_words();
    let generation = word_at(slot + l.get("join_slot_generation"));
    if generation == 0 || generation == l.get("hold_slot_claimed") {
        return None;
    }
    let task = word_at(slot + l.get("join_slot_task"));
    let target = word_at(slot + l.get("join_slot_target"));
    let since = word_at(slot + l.get("join_slot_since"));
    let spawned_at = word_at(slot + l.get("join_slot_spawned_at"));
    let awaiting = word_at(slot + l.get("join_slot_awaiting"));
    let path = word_at(slot + l.get("join_slot_path"));
    if spawned_at == 0 || word_at(slot + l.get("join_slot_generation")) != generation {
        return None;
    }
    Some(ReadResource {
        key: generation,
        kind: l.get("kind_join_handle"),
        created_at: LocationLayout::probe().read(spawned_at),
        target,
        exclusive: None,
        holds: Vec::new(),
        waits: vec![(task, None, since)],
        version: 0,
        awaiting,
        path,
    })
}

/// The join waits in the join slots, read from memory alone, in slot
/// order (free slots, and those other test threads are writing, left
/// out).
fn joins_from_memory() -> Vec<ReadResource> {
    let size = layout_words().get("join_slot_size");
    arena_from_memory("join_pages", "join_count", "join_capacity", size)
        .into_iter()
        .filter_map(read_join)
        .collect()
}

/// What a resource copied in the process reads as from memory.
fn read_as(copy: &ResourceCopy) -> ReadResource {
    let record =
        |task, at: Option<&'static Location<'static>>, since| (task, at.map(location), since);
    ReadResource {
        key: copy.key,
        kind: copy.kind as u64,
        created_at: location(copy.created_at),
        target: copy.target.unwrap_or(0),
        exclusive: copy
            .exclusive
            .map(|h| record(h.task, Some(h.at), h.since_ms)),
        holds: copy
            .holds
            .iter()
            .map(|h| record(h.task, Some(h.at), h.since_ms))
            .collect(),
        waits: copy
            .waits
            .iter()
            .map(|w| record(w.task, w.at, w.since_ms))
            .collect(),
        version: copy.version,
        awaiting: copy.waits.iter().map(|w| w.awaiting).sum(),
        path: copy.waits.iter().map(|w| w.path).fold(0, u64::wrapping_add),
    }
}

/// Resources with waits, read from memory alone: the registry's slots
/// name them while they have waits, and each reads as the in-process copy
/// has it (kind, creation site, tokio task, exclusive hold, shared holds
/// and waits in order). An awaited `JoinHandle`'s wait is in a join slot
/// instead, and reads as the `JoinHandle` resource the process copies it
/// as.
#[test]
fn waits_read_from_memory_alone_are_what_the_process_records() {
    /// The awaited tokio task of the join wait, a number no tokio task of
    /// the other tests has, so that its slot is this test's.
    const TARGET: u64 = 0x0de6_0000_0042;
    let l = layout_words();
    let reg = Registry::global();
    let (created, acquired, waiting) = (Location::caller(), Location::caller(), Location::caller());
    let m = Arc::new(Resource::new(Kind::Mutex, created, reg));
    m.exclusive.acquire(7, acquired, 100);
    // The waits' await sites are numbers no site table checks here.
    let at_await = |task, awaiting: u64| Waiter {
        task,
        awaiting,
        path: awaiting.rotate_left(17) ^ 0x00a5_0000_0000_0001,
    };
    let m_wait = WaitRecord::start(
        &m,
        at_await(9, 0x0007_0000_5151),
        Some(waiting),
        Ask::Exclusive,
    );
    let s = Arc::new(Resource::new(Kind::Semaphore, created, reg));
    // Its shared slots, then its list.
    let holders = [0, 5, 6, 7, 8, 9];
    for (i, task) in holders.into_iter().enumerate() {
        s.hold_shared(task, [acquired, waiting][i % 2], 1 + i as u32);
    }
    let s_wait = WaitRecord::start(&s, Waiter::of(11), Some(waiting), Ask::Shared(1));
    let j_wait = JoinWait::start(reg, at_await(12, 0x0008_0000_5252), TARGET, created)
        .expect("a free join slot");

    let listed = listed_from_memory();
    let address = |r: &Arc<Resource>| Arc::as_ptr(r) as u64;
    for r in [&m, &s] {
        assert!(listed.contains(&address(r)), "listed in a slot");
        assert_eq!(read_resource(address(r)), read_as(&r.copy()));
    }
    // What each shows, by name.
    let read = read_resource(address(&m));
    assert_eq!(read.kind, l.get("kind_mutex"));
    assert_eq!(read.created_at, location(created));
    assert_eq!(read.exclusive, Some((7, Some(location(acquired)), 100)));
    assert_eq!(read.waits[0].0, 9);
    assert_eq!(read.awaiting, 0x0007_0000_5151);
    assert_eq!(
        read.path,
        0x0007_0000_5151u64.rotate_left(17) ^ 0x00a5_0000_0000_0001
    );
    assert_eq!(read.version % 2, 0, "no change under way");
    let read = read_resource(address(&s));
    assert_eq!(read.kind, l.get("kind_semaphore"));
    assert_eq!(read.exclusive, None);
    let read_holders: Vec<u64> = read.holds.iter().map(|h| h.0).collect();
    assert_eq!(read_holders, holders);
    assert!(holders.len() > SHARED_SLOTS, "both places are read");
    // Each wait's generation, which orders a task's waits in a report.
    for r in [&m, &s] {
        let waits = word_at(Arc::as_ptr(r) as u64 + l.get("resource_waits"));
        let read = word_at(waits + l.get("wait_generation"));
        assert_eq!(read, r.copy().waits[0].generation);
    }

    // The join wait: in one join slot, read as the process copies it
    // (`Registry::copies`, which the in-process readers go through), its
    // key the wait's generation.
    let joins: Vec<ReadResource> = joins_from_memory()
        .into_iter()
        .filter(|j| j.target == TARGET)
        .collect();
    assert_eq!(joins.len(), 1, "one join slot holds the wait: {joins:?}");
    let read = &joins[0];
    let copy = reg
        .copies()
        .into_iter()
        .map(|(_, copy)| copy)
        .find(|copy| copy.key == read.key)
        .expect("the process copies the wait under the slot's generation");
    assert_eq!(*read, read_as(&copy));
    assert_eq!(read.key, copy.waits[0].generation);
    assert_eq!(
        (read.kind, read.target),
        (l.get("kind_join_handle"), TARGET)
    );
    assert_eq!(read.created_at, location(created), "the spawn site");
    assert_eq!(read.waits, [(12, None, read.waits[0].2)]);
    assert_eq!(read.awaiting, 0x0008_0000_5252);
    assert!(read.key > m.copy().waits[0].generation, "started later");

    // Waits ended: out of the slots.
    drop((m_wait, s_wait, j_wait));
    let listed = listed_from_memory();
    for r in [&m, &s] {
        assert!(!listed.contains(&address(r)), "unlisted");
    }
    assert!(
        joins_from_memory().iter().all(|j| j.target != TARGET),
        "the join slot is free"
    );
}
