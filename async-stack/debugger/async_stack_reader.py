"""Reads async-stack's data from a stopped process or a core file.

This module holds everything the debugger commands know about async-stack's
memory layout; it reads nothing but memory, through the descriptor that the
program exports as the symbol ``ASYNC_STACK_DEBUG`` (see
``async-stack/src/debug/mod.rs``), and makes no function call into the
inferior, so it works on core files too.

A debugger module (``async_stack_gdb.py``, ``async_stack_lldb.py``) adapts
its debugger to the small :class:`Target` interface (memory reads, symbol
lookup, threads, native frames) and registers the commands, which call
:func:`run_command`:

- ``async-bt``: the current thread's native frames with its async frames
  spliced in, as ``async_stack::backtrace()`` prints them (without debug
  info too: see :func:`body_frames`);
- ``async-bt all``: the same for every thread;
- ``async-bt task <id>``: one task's tree, as the text dump prints it
  (``<id>`` may name any root of a tokio task's entry), with what it waits
  for under the frame that awaits it (see :meth:`Reader.waits`);
- ``async-tasks``: one line per live task;
- ``async-deadlocks``: the deadlocks among the tasks that wait for
  async-stack's wrapped resources, in the text of
  ``async_stack::deadlocks()`` (see :func:`find_deadlocks`).

A task is what the dump calls one: the traced roots first polled inside
one tokio task are one task, with one branch per root (see
:func:`entries`); any other root is a task of its own.

Every problem (a corrupt chain, unreadable memory, a missing or unknown
descriptor) is an :class:`AsyncStackError`, printed as one line starting
with ``async-stack: ``.

Python 3, standard library only. When gdb auto-loads the scripts from the
binary, this file's text comes first and the gdb module's text follows in
one script, so nothing here may depend on being imported as a module.
"""

import collections
import re
import struct
import time

DESCRIPTOR_SYMBOL = "ASYNC_STACK_DEBUG"
MAGIC = int.from_bytes(b"ASYNCSTK", "little")
VERSION = 13
ERROR_PREFIX = "async-stack: "
#: A wait's ``awaiting`` word holds the id of the await site that polled
#: it in its low 32 bits and the birth of the frame suspended there in its
#: high 32 (0: not known). This one is a wait polled between two `.await`s
#: of its frame (`futures::poll!`, `now_or_never()`): no site has its id,
#: and the wait holds at none (the Rust side's `NOT_AT_AWAIT`).
NOT_AT_AWAIT = 0xFFFFFFFF


def awaited_site(awaiting):
    """The await site id of a wait's ``awaiting`` word (`awaited_site`)."""
    return awaiting & 0xFFFFFFFF

#: The longest async frame chain followed before it is reported as corrupt.
MAX_CHAIN_DEPTH = 1024

#: The most entries read of one resource's list of holds or waits; a longer
#: list is reported as corrupt memory.
MAX_LIST_LENGTH = 1 << 20

#: The most shared slots read of one resource (the process has 4); more
#: is reported as a corrupt descriptor.
MAX_SHARED_SLOTS = 64

#: The largest join slot read (the process's has 48 bytes); a larger
#: one is reported as a corrupt descriptor.
MAX_JOIN_SLOT_SIZE = 256

#: The most waits-for edges :func:`find_deadlocks` builds (a waiter has one
#: to the task queued directly ahead of it, and one per holder, past
#: :data:`HOLDERS_NAMED_BEHIND` holders only the first waiter); more is
#: reported as too large to search rather than searched slowly.
MAX_EDGES = 1 << 20

#: The `Layout` fields of the descriptor, in declaration order (version 11).
LAYOUT_FIELDS = (
    "pointer_size",
    "frame_size", "frame_parent", "frame_site", "site_await_bit",
    "call_site_id", "await_site_id", "await_site_call_site",
    "await_site_return_address", "call_site_body_address",
    "site_page_entries", "raw_str_ptr", "raw_str_len",
    "call_entry_size", "call_entry_function", "call_entry_file",
    "call_entry_line", "call_entry_column", "call_entry_task_name",
    "await_entry_size", "await_entry_call_id", "await_entry_file",
    "await_entry_line", "await_entry_column",
    "thread_root_size", "thread_root_tid", "thread_root_active",
    "thread_page_entries", "thread_pages", "active_current", "active_record",
    "current_slot_shift",
    "arena_page_entries", "record_size", "record_id", "record_state",
    "record_polls", "record_wakes", "record_current", "record_self_wakes",
    "record_parent", "record_spawn", "record_seq", "record_foreign",
    "record_meta",
    "record_chunk", "record_slots",
    "state_kind_bits", "state_time_shift", "state_idle", "state_scheduled",
    "state_running", "state_seen_shift", "state_seen_bits",
    "wakes_count_bits",
    "inline_slots", "head_slots", "chunk_slots", "dir_entries", "chunk_size",
    "no_slot",
    "slot_site_bits", "slot_await_flag", "slot_parent_shift",
    "slot_parent_bits", "slot_birth_shift", "slot_birth_bits",
    "slot_zombie_bit", "slot_retired_bit",
    "meta_hidden_bits", "meta_seen_hidden_retired_shift", "meta_top_shift",
    "foreign_hidden_retired_bits", "foreign_open_shift", "foreign_open_bits",
    "ext_size", "spawn_site_bits", "spawn_named_bit", "ext_name",
    "name_ptr", "name_len",
    "spawn_tokio_bit",
    "clock_shift", "clock_monotonic",
    "location_size", "location_probe_line", "location_probe_column",
    "location_probe_file_len",
    "resource_key", "resource_kind", "resource_created_at",
    "resource_exclusive", "resource_version", "resource_waits",
    "resource_waits_len", "resource_holds", "resource_holds_len",
    "hold_slot_generation", "hold_slot_task", "hold_slot_at",
    "hold_slot_since",
    "hold_size", "hold_task", "hold_at", "hold_since",
    "wait_size", "wait_task", "wait_at", "wait_since", "wait_generation",
    "wait_awaiting", "wait_path",
    "kind_mutex", "kind_rwlock", "kind_semaphore", "kind_join_handle",
    "resource_shared", "shared_slots", "shared_slot_size", "shared_slot_hold",
    "hold_slot_claimed",
    "join_slot_size", "join_slot_generation", "join_slot_task",
    "join_slot_target", "join_slot_since", "join_slot_spawned_at",
    "join_slot_awaiting", "join_slot_path",
)

#: The `Addresses` fields of the descriptor, in declaration order.
ADDRESS_FIELDS = (
    "record_pages", "record_page_count", "record_count", "record_capacity",
    "chunk_pages", "chunk_page_count", "ext_pages", "ext_page_count",
    "thread_pages", "thread_count",
    "call_site_pages", "call_site_count",
    "await_site_pages", "await_site_count",
    "clock",
    "listed_pages", "listed_page_count", "listed_count", "listed_capacity",
    "location_probe", "location_probe_file",
    "tokio_pages", "tokio_page_count",
    "join_pages", "join_page_count", "join_count", "join_capacity",
)

HEADER_WORDS = 3  # magic, version, size

#: A native frame as the debugger symbolises it (any field may be None):
#: ``function`` is the address of the machine function that holds its
#: code (inlined frames share their caller's), from the symbol table.
NativeFrame = collections.namedtuple(
    "NativeFrame", "name file line column function", defaults=(None,))

#: A thread: the debugger's number, the OS thread id, its name, and
#: whatever the debugger module needs to list its frames.
ThreadInfo = collections.namedtuple("ThreadInfo", "number tid name handle")

#: `file:line:column` of a site.
Location = collections.namedtuple("Location", "file line column")

#: A call-site table entry: the function's display name, where it is, and
#: the name of a task rooted there that has none of its own (or None).
CallSite = collections.namedtuple("CallSite", "function location task_name")

#: An await-site table entry: the call site of its function and the
#: `.await`'s location.
AwaitSite = collections.namedtuple("AwaitSite", "call location")

#: One frame of a thread's live chain: its address, where it is, and an
#: address in its body's code (0: none known; see `body_frames`).
ChainFrame = collections.namedtuple(
    "ChainFrame", "address call await_site body_address", defaults=(0,))

#: A shown frame of a task's tree, as the dump model has it.
TreeFrame = collections.namedtuple(
    "TreeFrame", "depth function defined_at awaiting_at running")

#: One live task, as the dump shows it: one entry, the record of a task
#: of its own or the records filed under one tokio task (its branches, by
#: id, in the order of their first poll; ``[id]`` for a task of its own).
#: ``tokio_id`` is that tokio task's id, or None. ``waits`` lists what
#: its roots wait for (:class:`Wait`, at most one a root, in branch order).
Task = collections.namedtuple(
    "Task",
    "id name state state_ms since_ms polls parent spawned_at frames hidden "
    "torn tokio_id branches waits")

#: What a root waits for, as the dump's `ResourceWait` has it: the root,
#: the resource's kind (`Mutex`, `RwLock`, `Semaphore`, `JoinHandle`), its
#: creation :class:`Location` (a `JoinHandle`'s spawn site), the acquire
#: call's (None for a `JoinHandle`), how long it has waited, its
#: :class:`Holder` list (exclusive first), for a `JoinHandle` the awaited
#: tokio task's id (else None), and the :class:`Location` of the `.await`
#: that polled the acquire future or the handle (None if not known), and
#: the wait's ``awaiting`` word (that `.await` and the birth of the frame
#: that was there, :data:`NOT_AT_AWAIT`; 0: not known) and ``path``, that
#: frame's ancestry (:func:`ancestry_in`; 0: not known): the wait holds
#: only while that frame is still suspended there, under the same frames
#: (:meth:`Wait.holds_in`).
class Wait(collections.namedtuple(
        "Wait",
        "task kind created_at waiting_at waiting_ms holders tokio_task "
        "awaiting frame path", defaults=(None, 0, 0))):
    __slots__ = ()

    def holds_in(self, copied, await_flag):
        """Whether the wait holds for a root whose shown frames are
        ``copied`` (:func:`build_tree`'s, `WaitingFor::holds_in`): one
        polled at a known `.await` while the frame that was there still
        is, under the same frames (not another frame at the same `.await`,
        nor one whose caller went on), and one polled at no known `.await`
        always. ``await_flag``: the await bit of a slot's site field."""
        return not self.frame or suspended_in(
            self.frame, self.path, copied, await_flag)


#: The ancestry digest (`task::stack::ancestry`): FNV-1a's offset basis
#: and prime, over one 64-bit value per ancestor.
ANCESTRY_START = 0xCBF29CE484222325
ANCESTRY_PRIME = 0x100000001B3


def ancestry_in(copied, i):
    """The ancestry of ``copied[i]`` (:func:`build_tree`'s frames, in
    pre-order; `waiter::ancestry_in`): each ancestor from its parent up to
    the root, the nearest frame before it one level up, folds its site
    field and birth into the digest; never 0."""
    digest, depth = ANCESTRY_START, copied[i][0]
    for frame in reversed(copied[:i]):
        if depth == 0:
            break
        if frame[0] + 1 == depth:
            value = frame[1] | (frame[4] << 32)
            digest = ((digest ^ value) * ANCESTRY_PRIME) & 0xFFFFFFFFFFFFFFFF
            depth = frame[0]
    return digest or 1


def suspended_in(awaiting, path, copied, await_flag):
    """Whether the frame that a wait's known ``awaiting`` word names is
    among ``copied`` (:func:`build_tree`'s frames) still suspended at the
    `.await` it names, with ancestry ``path`` unless that is 0
    (`waiter::suspended_in`): another frame at the same `.await` is not
    it, nor is one whose caller went on to another `.await`."""
    site = await_flag | awaited_site(awaiting)
    return any(not innermost and (s, birth) == (site, awaiting >> 32)
               and (not path or ancestry_in(copied, i) == path)
               for i, (_, s, _, innermost, birth) in enumerate(copied))

#: A holder of a resource: the task (0: code outside traced tasks), where
#: it acquired it, and for how long it has held it.
Holder = collections.namedtuple("Holder", "task acquired_at held_ms")

#: A resource with waits as read: its key (creation order), kind, creation
#: site, tokio task (0: none), holders ``(task, at, since)`` (exclusive
#: first) and waits ``(task, at, since, generation, awaiting, path)`` in
#: queue order (``awaiting``: the id of the await site that polled the
#: acquire future or the handle and the birth of the frame that was there,
#: see :data:`NOT_AT_AWAIT`; 0 if none is known; ``path``: that frame's
#: ancestry, 0 if not known). A join wait (an awaited
#: `JoinHandle`) reads as one of kind `JoinHandle`, without holders, with
#: its one wait (:meth:`Reader.joins`).
Resource = collections.namedtuple(
    "Resource", "key kind created_at target holders waits")

#: Where std's `Location` keeps its file's address and length, its line
#: and its column (byte offsets), and its size.
LocationLayout = collections.namedtuple(
    "LocationLayout", "file file_len line column size")

#: Where a record's root is filed: the tokio task id and the root's order
#: among the roots filed under tokio tasks (first poll first: such roots
#: take their task ids in that order, so the order is the record's id).
Filing = collections.namedtuple("Filing", "tokio_id order")


class AsyncStackError(Exception):
    """A problem that a command reports as one line, never a traceback."""


class Target:
    """What a debugger module provides. Every method is required.

    ``read(address, size)`` returns ``size`` bytes or raises any exception;
    ``symbol_address(name)`` returns the address of a data symbol or None;
    ``threads()`` lists :class:`ThreadInfo` and ``current_thread()`` returns
    the selected one; ``native_frames(thread)`` lists a thread's
    :class:`NativeFrame`, innermost first, inlined frames included, each
    with the address of the function that holds its code;
    ``function_start(address)`` returns the address of the function that
    holds the code just before ``address`` (a return address, as the
    walker looks it up), or None; ``is_live()`` tells a running process
    from a core file.
    """

    def read(self, address, size):
        raise NotImplementedError

    def symbol_address(self, name):
        raise NotImplementedError

    def threads(self):
        raise NotImplementedError

    def current_thread(self):
        raise NotImplementedError

    def native_frames(self, thread):
        raise NotImplementedError

    def function_start(self, address):
        raise NotImplementedError

    def is_live(self):
        raise NotImplementedError


# ---------------------------------------------------------------- memory


class Memory:
    """Typed reads through a :class:`Target`, failing with a clean error."""

    def __init__(self, target):
        self._target = target

    def bytes(self, address, size, what):
        """``size`` bytes at ``address``; ``what`` names them in errors."""
        if address == 0:
            raise AsyncStackError("null pointer to %s" % what)
        try:
            data = bytes(self._target.read(address, size))
        except Exception:  # the debuggers raise their own kinds
            data = b""
        if len(data) != size:
            raise AsyncStackError(
                "cannot read %s at %#x: unreadable memory (wild pointer?)"
                % (what, address))
        return data

    def u64(self, address, what):
        """A little-endian u64."""
        return struct.unpack("<Q", self.bytes(address, 8, what))[0]

    def u32(self, address, what):
        """A little-endian u32."""
        return struct.unpack("<I", self.bytes(address, 4, what))[0]

    def text(self, pointer, length, what):
        """A UTF-8 string given by address and length."""
        if length == 0:
            return ""
        if length > 1 << 20:
            raise AsyncStackError("%s: implausible length %d" % (what, length))
        return self.bytes(pointer, length, what).decode("utf-8", "replace")

    def raw_str(self, address, layout, what):
        """A `RawStr` (pointer and length) at ``address``."""
        pointer = self.u64(address + layout.raw_str_ptr, what)
        length = self.u64(address + layout.raw_str_len, what)
        return self.text(pointer, length, what)


# ------------------------------------------------------------ descriptor


class Descriptor:
    """The descriptor's fields, by name: ``layout.<field>`` and
    ``addresses.<field>``."""

    def __init__(self, layout, addresses):
        self.layout = layout
        self.addresses = addresses

    @classmethod
    def load(cls, target, memory):
        """Finds, checks and reads the descriptor."""
        base = target.symbol_address(DESCRIPTOR_SYMBOL)
        if not base:
            raise AsyncStackError(
                "symbol %s not found: this program does not link async-stack"
                % DESCRIPTOR_SYMBOL)
        magic = memory.u64(base, "the descriptor's magic")
        if magic != MAGIC:
            raise AsyncStackError(
                "bad descriptor magic %#x at %s (expected %r): corrupt memory"
                % (magic, DESCRIPTOR_SYMBOL, b"ASYNCSTK"))
        version = memory.u64(base + 8, "the descriptor's version")
        if version != VERSION:
            raise AsyncStackError(
                "unknown descriptor version %d (these scripts read version %d)"
                % (version, VERSION))
        count = HEADER_WORDS + len(LAYOUT_FIELDS) + len(ADDRESS_FIELDS)
        size = memory.u64(base + 16, "the descriptor's size")
        if size < 8 * count:
            raise AsyncStackError(
                "descriptor too small: %d bytes, version %d has %d"
                % (size, VERSION, 8 * count))
        data = memory.bytes(base, 8 * count, "the descriptor")
        words = struct.unpack("<%dQ" % count, data)[HEADER_WORDS:]
        layout = _Fields(LAYOUT_FIELDS, words[:len(LAYOUT_FIELDS)])
        addresses = _Fields(ADDRESS_FIELDS, words[len(LAYOUT_FIELDS):])
        return cls(layout, addresses)


class _Fields:
    """Named words, as attributes."""

    def __init__(self, names, values):
        self.__dict__.update(zip(names, values))


def _mask(bits):
    return (1 << bits) - 1


# ----------------------------------------------------------------- sites


class Sites:
    """The two interned site tables, and the site words that name them."""

    def __init__(self, memory, descriptor):
        self._memory = memory
        self._l = descriptor.layout
        self._a = descriptor.addresses
        self._calls = {}
        self._awaits = {}

    def _entry(self, pages, count, size, site_id, what):
        """The address of table entry ``site_id`` (id i + 1 is entry i)."""
        if site_id == 0 or pages == 0 or count == 0:
            return None
        length = self._memory.u64(count, what + " table length")
        index = site_id - 1
        if index >= length:
            return None
        per_page = self._l.site_page_entries
        page = self._memory.u64(pages + 8 * (index // per_page),
                                what + " table page")
        return page + (index % per_page) * size if page else None

    def call(self, site_id):
        """The :class:`CallSite` with interned id ``site_id``, or None."""
        if site_id not in self._calls:
            self._calls[site_id] = self._read_call(site_id)
        return self._calls[site_id]

    def _read_call(self, site_id):
        l, a, m = self._l, self._a, self._memory
        entry = self._entry(a.call_site_pages, a.call_site_count,
                            l.call_entry_size, site_id, "call-site")
        if entry is None:
            return None
        what = "call site %d" % site_id
        return CallSite(
            m.raw_str(entry + l.call_entry_function, l, what),
            Location(m.raw_str(entry + l.call_entry_file, l, what),
                     m.u32(entry + l.call_entry_line, what),
                     m.u32(entry + l.call_entry_column, what)),
            m.raw_str(entry + l.call_entry_task_name, l, what) or None)

    def await_site(self, site_id):
        """The :class:`AwaitSite` with interned id ``site_id``, or None."""
        if site_id not in self._awaits:
            self._awaits[site_id] = self._read_await(site_id)
        return self._awaits[site_id]

    def _read_await(self, site_id):
        l, a, m = self._l, self._a, self._memory
        entry = self._entry(a.await_site_pages, a.await_site_count,
                            l.await_entry_size, site_id, "await-site")
        if entry is None:
            return None
        what = "await site %d" % site_id
        call_id = m.u32(entry + l.await_entry_call_id, what)
        return AwaitSite(
            self.call(call_id),
            Location(m.raw_str(entry + l.await_entry_file, l, what),
                     m.u32(entry + l.await_entry_line, what),
                     m.u32(entry + l.await_entry_column, what)))

    def of_slot(self, field):
        """``(call, await)`` of a published slot word's site field."""
        flag = self._l.slot_await_flag
        if field & flag:
            at = self.await_site(field & ~flag)
            return (at.call if at else None), at
        return self.call(field), None

    def of_frame(self, site_word, frame):
        """``(call, await)`` of a live frame's ``site`` pointer word."""
        l, m = self._l, self._memory
        what = "the site of async frame %#x" % frame
        if site_word & l.site_await_bit:
            pointer = site_word & ~l.site_await_bit
            at = self.await_site(m.u32(pointer + l.await_site_id, what))
            if at is not None:
                return at.call, at
            call_pointer = m.u64(pointer + l.await_site_call_site, what)
            return self.call(m.u32(call_pointer + l.call_site_id, what)), None
        return self.call(m.u32(site_word + l.call_site_id, what)), None


# ---------------------------------------------------------------- reader


class Reader:
    """async-stack's data in one stopped process or core file."""

    def __init__(self, target):
        self.target = target
        self.memory = Memory(target)
        self.descriptor = Descriptor.load(target, self.memory)
        self.layout = self.descriptor.layout
        self.addresses = self.descriptor.addresses
        self.sites = Sites(self.memory, self.descriptor)
        self._location_layout = None
        self._locations = {}
        #: Listed resources and join waits the last :meth:`resources`
        #: skipped: caught in the middle of a change of their lists, or of
        #: the write of the wait.
        self.torn_resources = 0

    def _page_entry(self, pages, per_page, size, index, what):
        """Entry ``index`` of an arena: a page table of ``per_page`` items."""
        page = self.memory.u64(pages + 8 * (index // per_page), what + " page")
        return page + (index % per_page) * size if page else None

    # ---- threads and their chains

    def thread_active(self, tid):
        """The address of the thread state of OS thread ``tid``, or None."""
        l, a, m = self.layout, self.addresses, self.memory
        if not a.thread_pages or not a.thread_count:
            return None
        count = m.u64(a.thread_count, "the thread-root count")
        for index in range(min(count, l.thread_page_entries * l.thread_pages)):
            entry = self._page_entry(a.thread_pages, l.thread_page_entries,
                                     l.thread_root_size, index, "thread-root")
            if entry and m.u32(entry + l.thread_root_tid, "a thread root") == tid:
                return m.u64(entry + l.thread_root_active, "a thread root")
        return None

    def untag(self, current):
        """The frame address of a current-frame word."""
        shift = self.layout.current_slot_shift
        return current & _mask(shift) if shift else current

    def current_slot(self, current):
        """The slot carried by a current-frame word (`no_slot`: none)."""
        shift = self.layout.current_slot_shift
        if current == 0 or shift == 0:
            return self.layout.no_slot
        return current >> shift

    def chain(self, tid):
        """The async frames polled on OS thread ``tid``, innermost first."""
        l, m = self.layout, self.memory
        active = self.thread_active(tid)
        if not active:
            return []
        current_pointer = m.u64(active + l.active_current, "a thread's state")
        if current_pointer == 0:
            return []
        frame = self.untag(m.u64(current_pointer, "a current-frame word"))
        frames, seen = [], set()
        while frame:
            if frame in seen:
                raise AsyncStackError(
                    "cycle in the async frame chain of thread %d: frame %#x "
                    "is its own ancestor" % (tid, frame))
            if len(frames) >= MAX_CHAIN_DEPTH:
                raise AsyncStackError(
                    "async frame chain of thread %d deeper than %d frames "
                    "(corrupt parent links?)" % (tid, MAX_CHAIN_DEPTH))
            seen.add(frame)
            what = "async frame %#x" % frame
            site_word = m.u64(frame + l.frame_site, what)
            call, at = self.sites.of_frame(site_word, frame)
            body = self._body_address(site_word, what)
            frames.append(ChainFrame(frame, call, at, body))
            frame = m.u64(frame + l.frame_parent, what)
        return frames

    def _body_address(self, site_word, what):
        """An address in the body's code of the frame whose ``site`` word
        is ``site_word``, as the walker takes it: its current `.await`'s
        cached return address, else the one its call site keeps (0: none)."""
        l, m = self.layout, self.memory
        call_pointer = site_word
        if site_word & l.site_await_bit:
            pointer = site_word & ~l.site_await_bit
            address = m.u64(pointer + l.await_site_return_address, what)
            if address > 1:
                return address
            call_pointer = m.u64(pointer + l.await_site_call_site, what)
        return m.u64(call_pointer + l.call_site_body_address, what)

    # ---- tasks

    def _arena(self, pages, count, capacity, size, what):
        """``(index, address)`` of every entry of ``size`` bytes handed
        out of an arena (pages of `arena_page_entries` entries, the address
        of its `usize` count, its capacity), in index order; entries whose
        page is not allocated yet are left out."""
        l, m = self.layout, self.memory
        if not pages or not count:
            return []
        handed_out = min(m.u64(count, "the %s count" % what), capacity)
        found = []
        for index in range(handed_out):
            entry = self._page_entry(pages, l.arena_page_entries, size, index,
                                     what)
            if entry:
                found.append((index, entry))
        return found

    def records(self):
        """``(index, address)`` of every record handed out, in registry
        order."""
        l, a = self.layout, self.addresses
        return self._arena(a.record_pages, a.record_count, a.record_capacity,
                           l.record_size, "record")

    def tasks(self, with_waits=False):
        """Every live task, one entry per tokio task (see :func:`entries`),
        sorted by id as dumps are, with times measured against one
        "now"; with what each waits for when ``with_waits``."""
        raw = [r for r in (self._raw_task(index, rec)
                           for index, rec in self.records()) if r]
        raw.sort(key=lambda r: r["id"])
        now = self.now_ms(raw)
        waiting = self.waits(now) if with_waits else {}
        return entries([(self._task(r, now, waiting.get(r["id"])),
                         self._filing(r)) for r in raw])

    def _raw_task(self, index, record):
        """The words of a live record (record ``index``), or None for a
        free one."""
        l, m = self.layout, self.memory
        what = "task record %#x" % record
        task_id = m.u64(record + l.record_id, what)
        if task_id == 0:
            return None
        fields = {name: m.u64(record + getattr(l, "record_" + name), what)
                  for name in ("state", "polls", "wakes", "current",
                               "foreign", "meta", "parent")}
        fields["spawn"] = m.u32(record + l.record_spawn, what)
        fields["index"] = index
        fields["seq"] = m.u32(record + l.record_seq, what)
        fields["id"] = task_id
        fields["address"] = record
        return fields

    def now_ms(self, raw_tasks):
        """The time that times in state are measured against, in ms."""
        l = self.layout
        if self.target.is_live() and l.clock_monotonic == 1 and hasattr(
                time, "CLOCK_MONOTONIC_COARSE"):
            return int(time.clock_gettime(time.CLOCK_MONOTONIC_COARSE) * 1000)
        clock = self.addresses.clock
        ticked = self.memory.u64(clock, "the clock word") if clock else 0
        if ticked >> l.clock_shift:
            return ticked >> l.clock_shift
        stamps = [r["state"] >> l.state_time_shift for r in raw_tasks]
        return max(stamps, default=0)

    def _state(self, state, wakes, now):
        """``(name, since_ms)``: idle becomes scheduled once woken."""
        l = self.layout
        kind = state & _mask(l.state_kind_bits)
        seen = (state >> l.state_seen_shift) & _mask(l.state_seen_bits)
        since = state >> l.state_time_shift
        if kind == l.state_running:
            return "running", since
        if kind == l.state_scheduled:
            return "scheduled", since
        count = wakes & _mask(l.wakes_count_bits)
        if count & _mask(l.state_seen_bits) != seen:
            woken_mask = _mask(64 - l.wakes_count_bits)
            low = wakes >> l.wakes_count_bits
            woken = now - min((now - low) & woken_mask, now)
            return "scheduled", max(woken, since)
        return "idle", since

    def _copied(self, raw):
        """``(copied, hidden, torn, words)``: a record's shown frames as
        :func:`build_tree` gives them (none when torn), its count of hidden
        frames, whether its stack was caught in a change, and its slot
        words."""
        words = self._slot_words(raw)
        l = self.layout
        open_sections = (raw["foreign"] >> l.foreign_open_shift) & _mask(
            l.foreign_open_bits)
        torn = raw["seq"] % 2 == 1 or open_sections != 0
        if torn:
            return [], 0, True, words
        current_slot = self.current_slot(raw["current"])
        copied, hidden = build_tree(l, words, raw["meta"], current_slot,
                                    raw["foreign"])
        return copied, hidden, False, words

    def _task(self, raw, now, waits):
        """The :class:`Task` of one record; ``waits``: what it may wait
        for (:meth:`waits`), of which it shows the first that holds."""
        state, since = self._state(raw["state"], raw["wakes"], now)
        l = self.layout
        copied, hidden, torn, words = self._copied(raw)
        frames = [self._tree_frame(f) for f in copied]
        wait = next((w for w in waits or []
                     if w.holds_in(copied, l.slot_await_flag)), None)
        name = self._name(raw)
        parent = raw["parent"] or None
        site = self.sites.call(raw["spawn"] & _mask(l.spawn_site_bits))
        spawned_at = site.location if site else None
        if name is None and words:
            root, _ = self.sites.of_slot(words[0] & _mask(l.slot_site_bits))
            name = root.task_name if root is not None else None
        return Task(raw["id"], name, state, max(now - since, 0), since,
                    raw["polls"], parent, spawned_at, frames, hidden, torn,
                    None, [raw["id"]], [wait] if wait else [])

    def _tree_frame(self, copied):
        depth, site, running, innermost, _ = copied
        call, at = self.sites.of_slot(site)
        awaiting = at.location if at is not None and not innermost else None
        return TreeFrame(depth, call.function if call else "<unknown>",
                         call.location if call else None, awaiting, running)

    def _slot_words(self, raw):
        """The published slot words ``0..top`` of a record."""
        l = self.layout
        top = min(raw["meta"] >> l.meta_top_shift, l.no_slot)
        return [self._slot_word(raw, slot) for slot in range(top)]

    def _slot_word(self, raw, slot):
        """The word of one slot: inline, in the head chunk, or in a chunk
        named by the head chunk's directory (`locate()`, `dir_get()`)."""
        l, m = self.layout, self.memory
        what = "the stack of task %d" % raw["id"]
        if slot < l.inline_slots:
            return m.u64(raw["address"] + l.record_slots + 8 * slot, what)
        head = self._chunk(m.u32(raw["address"] + l.record_chunk, what), what)
        index = slot - l.inline_slots
        if index < l.head_slots:
            return m.u64(head + 8 * index, what)
        entry, index = divmod(index - l.head_slots, l.chunk_slots)
        if entry >= l.dir_entries:
            raise AsyncStackError("%s: slot %d past the directory" % (what, slot))
        directory = m.u64(head + 8 * (l.head_slots + entry // 2), what)
        handle = (directory >> (32 * (entry % 2))) & _mask(32)
        return m.u64(self._chunk(handle, what) + 8 * index, what)

    def _chunk(self, handle, what):
        """The address of chunk ``handle`` (index + 1)."""
        l = self.layout
        chunk = None
        if handle and self.addresses.chunk_pages:
            chunk = self._page_entry(self.addresses.chunk_pages,
                                     l.arena_page_entries, l.chunk_size,
                                     handle - 1, "chunk")
        if not chunk:
            raise AsyncStackError("%s: missing stack chunk %d" % (what, handle))
        return chunk

    def _side_entry(self, raw, bit, pages, size, what):
        """The address of the entry of a record's index in a side table
        indexed by record (page table ``pages``, entries of ``size``
        bytes) when bit ``bit`` of its spawn word says it holds
        something, or None."""
        if not (raw["spawn"] >> bit) & 1 or not pages:
            return None
        return self._page_entry(pages, self.layout.arena_page_entries, size,
                                raw["index"], what)

    def _extension(self, raw, bit):
        """The address of the extension of a record's index when bit
        ``bit`` of its spawn word says it holds something, or None."""
        return self._side_entry(raw, bit, self.addresses.ext_pages,
                                self.layout.ext_size, "extension")

    def _filing(self, raw):
        """The :class:`Filing` of a record whose root was first polled
        inside a tokio task, from the tokio id page table, or None."""
        l, m = self.layout, self.memory
        entry = self._side_entry(raw, l.spawn_tokio_bit,
                                 self.addresses.tokio_pages, 8, "tokio id")
        if not entry:
            return None
        what = "the tokio id of task %d" % raw["id"]
        return Filing(m.u64(entry, what), raw["id"])

    def _name(self, raw):
        """A task's own name, from the extension of its record's index
        (only when its spawn word says it has one), or None."""
        l, m = self.layout, self.memory
        ext = self._extension(raw, l.spawn_named_bit)
        if not ext:
            return None
        what = "task extension %d" % raw["index"]
        name_pointer = m.u64(ext + l.ext_name, what)
        if not name_pointer:
            return None
        return m.text(m.u64(name_pointer + l.name_ptr, what),
                      m.u64(name_pointer + l.name_len, what), "a task name")

    # ---- waits

    def location_layout(self):
        """Where std's `Location` keeps its fields, found from the probe
        the descriptor names: the word equal to the probe's file length,
        the `u32`s equal to its line and column, and the word left whose
        text is the probe's file."""
        if self._location_layout is None:
            self._location_layout = self._probe_location()
        return self._location_layout

    def _probe_location(self):
        l, a, m = self.layout, self.addresses, self.memory
        size, length = l.location_size, l.location_probe_file_len
        if not 8 <= size <= 256 or not a.location_probe:
            raise AsyncStackError("no probe Location in the descriptor")
        data = m.bytes(a.location_probe, size, "the probe Location")
        text = m.bytes(a.location_probe_file, length,
                       "the probe Location's file") if length else b""

        def one(found, what):
            if len(found) != 1:
                raise AsyncStackError(
                    "cannot tell where std's Location keeps its %s (%d "
                    "places match the probe): a std these scripts do not "
                    "know" % (what, len(found)))
            return found[0]

        words = range(0, size - 7, 8)
        word = lambda offset: struct.unpack_from("<Q", data, offset)[0]
        file_len = one([o for o in words if word(o) == length], "file length")
        u32s = lambda value: [
            o for o in range(0, size - 3, 4)
            if o // 8 != file_len // 8
            and struct.unpack_from("<I", data, o)[0] == value]
        line = one(u32s(l.location_probe_line), "line")
        column = one(u32s(l.location_probe_column), "column")
        taken = {file_len // 8, line // 8, column // 8}

        def is_file(offset):
            try:
                return m.bytes(word(offset), length, "a file") == text
            except AsyncStackError:
                return False

        file = one([o for o in words if o // 8 not in taken and is_file(o)],
                   "file")
        return LocationLayout(file, file_len, line, column, size)

    def location(self, address, what):
        """The :class:`Location` of the std `Location` at ``address``."""
        if address not in self._locations:
            layout = self.location_layout()
            data = self.memory.bytes(address, layout.size,
                                     "a Location of " + what)
            word = lambda offset: struct.unpack_from("<Q", data, offset)[0]
            u32 = lambda offset: struct.unpack_from("<I", data, offset)[0]
            file = self.memory.text(word(layout.file), word(layout.file_len),
                                    "the file of a Location of " + what)
            self._locations[address] = Location(
                file, u32(layout.line), u32(layout.column))
        return self._locations[address]

    def listed(self):
        """The addresses of the resources listed in the waits registry
        (those with at least one wait), in slot order."""
        l, a, m = self.layout, self.addresses, self.memory
        slots = self._arena(a.listed_pages, a.listed_count, a.listed_capacity,
                            l.pointer_size, "listed-resource")
        found = [m.u64(slot, "a listed-resource slot") for _, slot in slots]
        return [resource for resource in found if resource]

    def resource(self, address):
        """The :class:`Resource` at ``address``, or None when it was
        caught in the middle of a change: its lists' version odd, or a
        shared slot's hold being written."""
        l, m = self.layout, self.memory
        what = "resource %#x" % address
        if m.u64(address + l.resource_version, what) % 2:
            return None
        kinds = {l.kind_mutex: "Mutex", l.kind_rwlock: "RwLock",
                 l.kind_semaphore: "Semaphore",
                 l.kind_join_handle: "JoinHandle"}
        kind = m.bytes(address + l.resource_kind, 1, what)[0]
        if kind not in kinds:
            raise AsyncStackError("%s: unknown kind %d (corrupt memory?)"
                                  % (what, kind))
        holders = []
        slots = [address + l.resource_exclusive]
        shared = m.u64(address + l.resource_shared, what)
        if shared:
            if l.shared_slots > MAX_SHARED_SLOTS:
                raise AsyncStackError(
                    "the descriptor gives %d shared slots per resource, more "
                    "than %d (corrupt memory?)"
                    % (l.shared_slots, MAX_SHARED_SLOTS))
            slots += [shared + i * l.shared_slot_size + l.shared_slot_hold
                      for i in range(l.shared_slots)]
        for slot in slots:
            generation = m.u64(slot + l.hold_slot_generation, what)
            if generation == l.hold_slot_claimed:
                return None
            if generation:
                holders.append((
                    m.u64(slot + l.hold_slot_task, what),
                    self.location(m.u64(slot + l.hold_slot_at, what), what),
                    m.u64(slot + l.hold_slot_since, what)))
        holders += self._list(address, "holds", l.hold_size,
                              (l.hold_task, l.hold_at, l.hold_since), what)
        waits = self._list(
            address, "waits", l.wait_size,
            (l.wait_task, l.wait_at, l.wait_since, l.wait_generation,
             l.wait_awaiting, l.wait_path), what)
        return Resource(
            m.u64(address + l.resource_key, what), kinds[kind],
            self.location(m.u64(address + l.resource_created_at, what), what),
            0, holders, waits)

    def _list(self, address, name, size, offsets, what):
        """A resource's ``holds`` or ``waits`` list, as ``(task, at,
        since)`` entries (``at`` None for a null pointer), followed by the
        words at any further ``offsets``."""
        l, m = self.layout, self.memory
        length = m.u64(address + getattr(l, "resource_%s_len" % name), what)
        if length > MAX_LIST_LENGTH:
            raise AsyncStackError(
                "%s: implausible length %d of its %s list (corrupt memory?)"
                % (what, length, name))
        if length == 0:
            return []
        pointer = m.u64(address + getattr(l, "resource_" + name), what)
        data = m.bytes(pointer, length * size,
                       "the %s list of %s" % (name, what))
        task_at, at_at, since_at = offsets[:3]
        entries_ = []
        for start in range(0, length * size, size):
            word = lambda offset: struct.unpack_from("<Q", data, start + offset)[0]
            at = word(at_at)
            entries_.append((word(task_at),
                             self.location(at, what) if at else None,
                             word(since_at))
                            + tuple(word(o) for o in offsets[3:]))
        return entries_

    def joins(self):
        """``(resources, torn)``: the join waits (awaited `JoinHandle`s),
        each as the process copies it (`Registry::copies`), a
        :class:`Resource` of kind `JoinHandle` keyed by the wait's
        generation, without holders, with its one wait, in slot order; and
        how many slots were caught in the middle of the wait's write.

        A slot reads at once, as a debugger reads a stopped process: its
        generation `0` is a free slot, and `hold_slot_claimed` (or a null
        spawn site) one being written, left out and counted; the process
        itself would read the generation again, which here cannot change."""
        l, a, m = self.layout, self.addresses, self.memory
        fields = (l.join_slot_generation, l.join_slot_task,
                  l.join_slot_target, l.join_slot_since,
                  l.join_slot_spawned_at, l.join_slot_awaiting,
                  l.join_slot_path)
        if not max(fields) + 8 <= l.join_slot_size <= MAX_JOIN_SLOT_SIZE:
            raise AsyncStackError(
                "the descriptor gives join slots of %d bytes, implausible for "
                "their fields (corrupt memory?)" % l.join_slot_size)
        resources, torn = [], 0
        for _, slot in self._arena(a.join_pages, a.join_count,
                                   a.join_capacity, l.join_slot_size,
                                   "join-slot"):
            what = "join slot %#x" % slot
            data = m.bytes(slot, l.join_slot_size, what)
            generation, task, target, since, spawned_at, awaiting, path = (
                struct.unpack_from("<Q", data, offset)[0] for offset in fields)
            if generation == 0:
                continue
            if generation == l.hold_slot_claimed or spawned_at == 0:
                torn += 1
                continue
            resources.append(Resource(
                generation, "JoinHandle", self.location(spawned_at, what),
                target, [], [(task, None, since, generation, awaiting,
                              path)]))
        return resources, torn

    def resources(self):
        """The listed resources and the join waits read whole, in key
        order (as the in-process readers go through them,
        `Registry::copies`); those caught in the middle of a change are
        skipped and counted in :attr:`torn_resources`."""
        l, m = self.layout, self.memory
        resources, self.torn_resources = self.joins()
        for address in self.listed():
            # A listed resource with no wait (a lock contended once, whose
            # owner lives on) shows nothing, even caught in a change (a
            # wait being added is there only once the change ends): one
            # read skips it, as `Registry::waited` does in the process.
            if not m.u64(address + l.resource_waits_len, "resource %#x" % address):
                continue
            resource = self.resource(address)
            if resource is not None:
                resources.append(resource)
            else:
                self.torn_resources += 1
        resources.sort(key=lambda r: r.key)
        return resources

    def waits(self, now):
        """What each waiting root waits for, by task id, as the dump
        reads it (`waits_by_task`): the resources with waits (the listed
        ones and the join waits, :meth:`resources`) in key order, and for
        each task every :class:`Wait` met, in that order (a dump shows the
        first that holds, :meth:`Wait.holds_in`). A `JoinHandle` polled at
        a known `.await` waits at that `.await`'s line. Times are measured
        against ``now``; resources caught in the middle of a change are
        skipped (:meth:`resources`)."""
        since = lambda ms: max(now - ms, 0)
        waiting = {}
        for r in self.resources():
            holders = [Holder(task, at, since(ms)) for task, at, ms in r.holders]
            for task, at, ms, _, awaiting, path in r.waits:
                # Polled between two `.await`s: awaited at none of them.
                if task and awaiting != NOT_AT_AWAIT:
                    site = (self.sites.await_site(awaited_site(awaiting))
                            if awaiting else None)
                    site_at = site.location if site else None
                    waiting.setdefault(task, []).append(Wait(
                        task, r.kind, r.created_at, at or site_at, since(ms),
                        holders, r.target or None, site_at, awaiting, path))
        return waiting

    # ---- deadlocks

    def deadlocks(self):
        """``(reports, waiting)``: the text of each deadlock among the
        waiting roots (:func:`find_deadlocks`, :func:`format_deadlock`),
        in the order ``async_stack::deadlocks()`` returns them, and how
        many roots wait. Resources caught in the middle of a change are
        skipped (:meth:`resources`), so no edge of theirs is in a report.

        The detector's view of tasks, from the records: a task is stuck
        only if it is idle (not running, not woken since its last poll
        began); a `JoinHandle` waits for the live roots filed under the
        awaited tokio task; a name is the task's own (not its root's); a
        wait without a call site of its own (an awaited `JoinHandle`)
        takes the `.await` that polled it, or when that is not known the
        `.await` of the waiter's deepest shown frame; a wait polled at a
        known `.await` holds only while one of the waiter's shown frames is
        suspended there (`TaskView::awaits_at`), though a lock's still
        queues the waiters behind it."""
        raws = {}
        for index, record in self.records():
            raw = self._raw_task(index, record)
            if raw:
                raws[raw["id"]] = raw
        now = self.now_ms(list(raws.values()))
        roots = {}
        for raw in raws.values():
            filing = self._filing(raw)
            if filing is not None:
                roots.setdefault(filing.tokio_id, []).append(raw["id"])

        def idle(task):
            raw = raws.get(task)
            return raw is not None and self._state(
                raw["state"], raw["wakes"], now)[0] == "idle"

        def awaiting_at(edge):
            site = edge.wait[4] and self.sites.await_site(
                awaited_site(edge.wait[4]))
            if site:
                return site.location
            return deepest_await(self._task(raws[edge.waiter], now, None).frames)

        # Each waiter's shown frames, read once a task (a task may have
        # many waits).
        suspended = {}

        def holds(wait):
            task, awaiting, path = wait[0], wait[4], wait[5]
            if not awaiting or task not in raws:
                return True
            if task not in suspended:
                suspended[task] = self._copied(raws[task])[0]
            return suspended_in(awaiting, path, suspended[task],
                                l.slot_await_flag)

        l = self.layout
        resources = self.resources()
        found = find_deadlocks(resources, idle,
                               lambda tokio_id: sorted(roots.get(tokio_id, [])),
                               lambda w: not idle(w[0]) or holds(w))
        reports = [format_deadlock(edges, lambda t: self._name(raws[t]),
                                   awaiting_at) for edges in found]
        waiting = {w[0] for r in resources for w in r.waits
                   if w[0] and holds(w)}
        return reports, len(waiting)


# ------------------------------------------------------------ deadlocks

#: One edge of the waits-for graph, as `waits::detect::Edge` has it:
#: ``wait`` (an entry of ``resource.waits``) of task ``waiter`` is blocked
#: by task ``blocker`` (0: nobody known, or code outside traced tasks),
#: ``via`` "holds" (``by``: its entry of ``resource.holders``), "queued"
#: (queued directly ahead; ``by``: its entry of ``resource.waits``) or
#: "task" (a root of the awaited tokio task, or nobody; ``by``: None).
Edge = collections.namedtuple("Edge", "waiter wait resource blocker via by")

_RANK = {"holds": 0, "queued": 1, "task": 2}


#: The most holders a waiter behind the first has edges to (as
#: `waits::detect`'s constant of that name).
HOLDERS_NAMED_BEHIND = 8


def find_deadlocks(resources, idle, roots_of, holds=lambda wait: True):
    """The deadlocks among the waits of ``resources`` (in key order), as
    `waits::detect` finds them (a port: the same rules, the same order),
    each a list of :class:`Edge` in report order.

    A waiter is blocked by every holder of the resource and by the task
    queued directly ahead of it (tokio's queues are FIFO; it waits for
    the tasks further ahead through that one, and an edge to each would
    cost a queue of n waiters n * (n - 1) / 2 edges for the same answer:
    see the `Queues` section of `waits::detect`'s docs), or for a
    `JoinHandle` by the roots ``roots_of(tokio_id)``; a wait nobody blocks
    is free. Tasks that are not ``idle(task)`` are free, and so is every
    task with a free blocker, until none is left; the strongly connected
    components of what is left that no edge leaves are the deadlocks, in
    the order Tarjan's algorithm completes them (from the smallest id),
    each ordered by :func:`cycle_first`. A wait for which ``holds(wait)``
    is false (its waiter left the `.await` that polled it) has no edges of
    its own, but still queues the waiters behind it, the first of which
    then waits for every waiter ahead up to the nearest whose wait holds,
    and, when there is none, for the holders too. Raises past
    :data:`MAX_EDGES` edges."""
    edges, count = {}, 0
    for r in resources:
        left = [w[0] != 0 and not holds(w) for w in r.waits]
        for k, wait in enumerate(r.waits):
            task = wait[0]
            if task == 0 or left[k]:
                continue
            out = edges.setdefault(task, [])
            before = len(out)
            if r.kind == "JoinHandle":
                for root in roots_of(r.target) if r.target else []:
                    out.append(Edge(task, wait, r, root, "task", None))
            else:
                # The waiter directly ahead, or, past waits whose task
                # left them (no edges of their own), every waiter up to
                # the nearest one that did not. Behind that one, past
                # HOLDERS_NAMED_BEHIND holders, the chain alone reaches
                # them (as in Rust).
                nearest = next((j for j in range(k - 1, -1, -1)
                                if not left[j]), None)
                if (k == 0 or len(r.holders) <= HOLDERS_NAMED_BEHIND
                        or nearest is None):
                    out.extend(Edge(task, wait, r, h[0], "holds", h)
                               for h in r.holders)
                for j in range(k - 1, (nearest or 0) - 1, -1):
                    ahead = r.waits[j]
                    out.append(Edge(task, wait, r, ahead[0], "queued", ahead))
            if len(out) == before:
                out.append(Edge(task, wait, r, 0, "task", None))
            count += len(out) - before
            if count > MAX_EDGES:
                raise AsyncStackError(
                    "more than %d waits-for edges (a resource with %d "
                    "waits): too many to search" % (MAX_EDGES, len(r.waits)))

    # Freedom spreads backwards along the edges, each task once: a queue
    # (a chain, which frees one waiter per step) takes time in proportion
    # to its length.
    stuck = {task for task in edges if idle(task)}
    blocks = {}
    for t in stuck:
        for e in edges[t]:
            blocks.setdefault(e.blocker, []).append(t)
    freed = [b for b in blocks if b not in stuck]
    while freed:
        for t in blocks.pop(freed.pop(), []):
            if t in stuck:
                stuck.discard(t)
                freed.append(t)

    graph = {t: sorted({e.blocker for e in edges[t]}) for t in stuck}
    return [cycle_first(members, [e for t in sorted(members) for e in edges[t]])
            for members in sink_components(graph)]


def sink_components(graph):
    """The strongly connected components of ``graph`` (task: sorted
    blockers, every blocker a key) that no edge leaves, in the order
    Tarjan's algorithm completes them, started from each key in order (a
    port of the iterative `sink_components`)."""
    index, low, on_stack, stack, work, components = {}, {}, set(), [], [], []

    def visit(n):
        index[n] = low[n] = len(index)
        stack.append(n)
        on_stack.add(n)
        work.append([n, graph[n], 0])

    for start in sorted(graph):
        if start in index:
            continue
        visit(start)
        while work:
            n, successors, next_ = work[-1]
            if next_ < len(successors):
                m = successors[next_]
                work[-1][2] += 1
                if m not in index:
                    visit(m)
                elif m in on_stack:
                    low[n] = min(low[n], index[m])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[n])
            if low[n] == index[n]:
                component = set()
                while stack:
                    m = stack.pop()
                    on_stack.discard(m)
                    component.add(m)
                    if m == n:
                        break
                components.append(component)
    return [c for c in components
            if all(b in c for n in c for b in graph[n])]


def cycle_first(members, edges):
    """``edges`` (all among ``members``) in report order: sorted by
    waiter, wait generation, holds before queues before tasks, and
    blocker (stably), then the shortest cycle through the smallest member
    moved first, found breadth-first (a self-edge starts it only when it
    is the whole deadlock), as `cycle_first` does."""
    edges = sorted(edges, key=lambda e: (e.waiter, e.wait[3], _RANK[e.via],
                                         e.blocker))
    if not members:
        return edges
    start = min(members)
    loops = len(members) == 1
    by_waiter = {}
    for i, e in enumerate(edges):
        if loops or e.blocker != e.waiter:
            by_waiter.setdefault(e.waiter, []).append(i)
    came, queue, last = {}, collections.deque([start]), None
    while queue and last is None:
        for i in by_waiter.get(queue.popleft(), []):
            blocker = edges[i].blocker
            if blocker == start:
                last = i
                break
            if blocker not in came:
                came[blocker] = i
                queue.append(blocker)
    cycle, at = [], last
    while at is not None and len(cycle) <= len(edges):
        cycle.append(at)
        waiter = edges[at].waiter
        at = None if waiter == start else came.get(waiter)
    cycle.reverse()
    on_cycle = set(cycle)
    return ([edges[i] for i in cycle]
            + [e for i, e in enumerate(edges) if i not in on_cycle])


def deepest_await(frames):
    """The `.await` a task's deepest shown frame is suspended at (the
    last of the deepest in pre-order: the frame a dump shows a wait
    under), or None."""
    if not frames:
        return None
    deepest = max(range(len(frames)), key=lambda i: (frames[i].depth, i))
    return frames[deepest].awaiting_at


def format_edge(edge, name, awaiting_at):
    """One edge as `WaitEdge` displays itself: `task 7 "a" waits at
    src/bank.rs:41:9 for Mutex created at src/bank.rs:12:15, held by task
    9 (acquired at src/bank.rs:30:9)`. ``name`` is the waiter's (or None);
    ``awaiting_at`` the waiter's :func:`deepest_await`, called only for a
    wait without a call site of its own."""
    text = "task %d" % edge.waiter
    if name is not None:
        text += " " + _quoted(name)
    text += " waits"
    at = edge.wait[1]
    if at is None:
        at = awaiting_at()
    if at is not None:
        text += " at " + format_location(at)
    r = edge.resource
    if r.kind == "JoinHandle":
        return text + " for the end of task %d, spawned at %s" % (
            edge.blocker, format_location(r.created_at))
    text += " for %s created at %s, " % (r.kind, format_location(r.created_at))
    if edge.via == "queued" and edge.by[1] is not None:
        return text + "queued behind task %d (waiting at %s)" % (
            edge.blocker, format_location(edge.by[1]))
    if edge.via == "holds" and edge.by[1] is not None:
        return text + "held by task %d (acquired at %s)" % (
            edge.blocker, format_location(edge.by[1]))
    return text + "held by task %d" % edge.blocker


def format_deadlock(edges, name, awaiting_at):
    """A deadlock as `Deadlock` displays itself: a heading, then one
    paragraph per edge. ``name(task)`` and ``awaiting_at(task)`` as
    :func:`format_edge` takes them."""
    tasks = len({e.waiter for e in edges})
    if tasks == 1:
        heading = "deadlock: 1 task waits for itself"
    else:
        heading = "deadlock: %d tasks wait for each other" % tasks
    return "\n\n".join([heading] + [
        format_edge(e, name(e.waiter), lambda e=e: awaiting_at(e))
        for e in edges])


# ------------------------------------------------------------ entries


def entries(filed):
    """The entries of a dump, sorted by id, from ``(task, filing)`` pairs
    of single records: the records filed under one tokio id are one entry
    (:func:`merge_branches`, in the order of their first poll); a record
    filed under none is an entry of its own, unchanged."""
    alone, by_tokio = [], collections.OrderedDict()
    for task, filing in filed:
        if filing is None:
            alone.append(task)
        else:
            by_tokio.setdefault(filing.tokio_id, []).append((filing.order, task))
    merged = [merge_branches(tokio_id, [task for _, task in sorted(
        roots, key=lambda pair: (pair[0], pair[1].id))])
        for tokio_id, roots in by_tokio.items()]
    return sorted(alone + merged, key=lambda task: task.id)


def merge_branches(tokio_id, branches):
    """One entry of the records filed under tokio task ``tokio_id``,
    ``branches`` in order (the dump's rules, `TaskInfo::branches`): its id
    is the first branch's; it runs if a branch runs, else is scheduled if
    one is, with the longest time among those, else idle, with the
    shortest time (idle since the latest change); polls are the most of
    any branch; name, parent and spawn site are those of the first branch
    that has one; frames are each branch's in turn, hidden frames add up,
    and it is torn if a branch is; waits are each branch's in turn."""
    def first_of(field):
        return next((getattr(b, field) for b in branches
                     if getattr(b, field) is not None), None)

    running = [b for b in branches if b.state == "running"]
    scheduled = [b for b in branches if b.state == "scheduled"]
    if running or scheduled:
        timed = max(running or scheduled, key=lambda b: b.state_ms)
    else:
        timed = min(branches, key=lambda b: b.state_ms)
    return Task(branches[0].id, first_of("name"), timed.state, timed.state_ms,
                timed.since_ms, max(b.polls for b in branches),
                first_of("parent"), first_of("spawned_at"),
                [f for b in branches for f in b.frames],
                sum(b.hidden for b in branches), any(b.torn for b in branches),
                tokio_id, [b.id for b in branches],
                [w for b in branches for w in b.waits])


def build_tree(layout, words, meta, current_slot, foreign):
    """A port of `StackCopy::build`: the shown frames of a published stack
    as ``(depth, site, running, innermost, birth)`` in pre-order (siblings in
    birth order), and the count of hidden live frames. ``current_slot`` is
    the slot the task's current-frame word carries (`no_slot`: none)."""
    l = layout
    site_of = lambda w: w & _mask(l.slot_site_bits)
    parent_of = lambda w: (w >> l.slot_parent_shift) & _mask(l.slot_parent_bits)
    birth_of = lambda w: (w >> l.slot_birth_shift) & _mask(l.slot_birth_bits)
    unshown_bits = (1 << l.slot_zombie_bit) | (1 << l.slot_retired_bit)
    shown = lambda w: w != 0 and w & unshown_bits == 0

    count = len(words)
    live = sum(1 for w in words if shown(w))
    # Live frames without a slot: the meta word's count, less the hidden
    # frames that foreign sections retired since the writer last looked.
    retired_bits = l.foreign_hidden_retired_bits
    seen_hidden_retired = (meta >> l.meta_seen_hidden_retired_shift) & _mask(retired_bits)
    unseen = (foreign - seen_hidden_retired) & _mask(retired_bits)
    hidden = max((meta & _mask(l.meta_hidden_bits)) - unseen, 0)
    if not (words and shown(words[0]) and parent_of(words[0]) == l.no_slot):
        return [], hidden + live
    if all(shown(words[i]) and parent_of(words[i]) == i - 1
           for i in range(1, count)):
        running = current_slot < count
        return [(i, site_of(words[i]), running and i <= current_slot,
                 i == current_slot, birth_of(words[i]))
                for i in range(count)], hidden

    children = {}
    for slot in range(1, count):
        w, parent = words[slot], parent_of(words[slot])
        if w == 0 or parent >= count or parent == slot or words[parent] == 0:
            continue
        kids = children.setdefault(parent, [])
        position = 0
        while position < len(kids) and _born_before(
                birth_of(words[kids[position]]), birth_of(w), l.slot_birth_bits):
            position += 1
        kids.insert(position, slot)

    frames, slots, parents, visited = [], [], {}, set()
    stack = [(0, 0)]
    while stack:
        slot, depth = stack.pop()
        if slot in visited or not shown(words[slot]):
            continue
        visited.add(slot)
        slots.append(slot)
        frames.append([depth, site_of(words[slot]), False, slot == current_slot,
                       birth_of(words[slot])])
        for kid in reversed(children.get(slot, [])):
            parents[kid] = slot
            stack.append((kid, depth + 1))
    if current_slot < count and current_slot in visited:
        on_path, slot = set(), current_slot
        while True:
            on_path.add(slot)
            parent = parents.get(slot)
            if slot == 0 or parent is None or parent in on_path:
                break
            slot = parent
        for frame, slot in zip(frames, slots):
            frame[2] = slot in on_path
    return [tuple(f) for f in frames], hidden + live - len(visited)


def _born_before(a, b, bits):
    """Serial-number order of two births (`word::born_before`)."""
    d = (b - a) & _mask(bits)
    return d != 0 and d < 1 << (bits - 1)


# ------------------------------------------------------------ dump text


def format_duration(ms):
    """A time in state, as the dump writes it (`write_duration`)."""
    if ms < 1000:
        return "%dms" % ms
    if ms < 60000:
        return "%d.%ds" % (ms // 1000, (ms % 1000) // 100)
    if ms < 3600000:
        return "%dm%ds" % (ms // 60000, (ms % 60000) // 1000)
    return "%dh%dm" % (ms // 3600000, (ms % 3600000) // 60000)


def format_location(location):
    """`file:line:column`."""
    return "%s:%d:%d" % location


def _quoted(name):
    """A name as Rust's `{:?}` quotes it (exact for printable ASCII)."""
    out = []
    for ch in name:
        if ch in "\"\\":
            out.append("\\" + ch)
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\t":
            out.append("\\t")
        elif ch == "\r":
            out.append("\\r")
        elif ord(ch) < 0x20 or ord(ch) == 0x7f:
            out.append("\\u{%x}" % ord(ch))
        else:
            out.append(ch)
    return '"%s"' % "".join(out)


def _written_order(frames):
    """The indices of a task's tree frames in the order the dump writes
    them: post-order of the pre-order tree, so each branch's leaf comes
    first (`write_stack`)."""
    ordered, open_ = [], []
    for index, frame in enumerate(frames):
        while open_ and frames[open_[-1]].depth >= frame.depth:
            ordered.append(open_.pop())
        open_.append(index)
    while open_:
        ordered.append(open_.pop())
    return ordered


def innermost_first(frames):
    """A task's tree frames in the order the dump writes them."""
    return [frames[index] for index in _written_order(frames)]


def wait_frames(task):
    """``(frame index or None, wait)`` for each of a task's waits: in the
    wait's root (the branch it names, when every root has frames), the
    deepest frame awaiting at the wait's line, else the deepest frame;
    None when the root shows no frame (`wait_frames`)."""
    frames = task.frames
    starts = [i for i, f in enumerate(frames) if f.depth == 0]
    placed = []
    for wait in task.waits:
        low, high = 0, len(frames)
        if wait.task in task.branches and len(starts) == len(task.branches):
            k = task.branches.index(wait.task)
            low = starts[k]
            high = starts[k + 1] if k + 1 < len(starts) else len(frames)

        def same_line(i):
            at, want = frames[i].awaiting_at, wait.waiting_at
            return (at is not None and want is not None
                    and at.file == want.file and at.line == want.line)

        candidates = ([i for i in range(low, high) if same_line(i)]
                      or list(range(low, high)))
        frame = max(candidates, key=lambda i: (frames[i].depth, i),
                    default=None)
        placed.append((frame, wait))
    return placed


def format_wait(depth, wait):
    """`waiting for Mutex created at src/bank.rs:12:15, held by task 7
    (acquired at src/bank.rs:40:9, 3.2s ago), for 1.2s`, indented under a
    frame at ``depth`` (None: at the task's level), as `write_wait`."""
    pad = " " * (2 * (depth + 1) + 4 if depth is not None else 2)
    text = "waiting for " + wait.kind
    if wait.kind == "JoinHandle":
        if wait.tokio_task is not None:
            text += " of tokio task %d" % wait.tokio_task
        text += " spawned at " + format_location(wait.created_at)
    else:
        text += " created at " + format_location(wait.created_at)
        if not wait.holders:
            text += ", free (not taken yet)"
        for i, holder in enumerate(wait.holders):
            text += ", held by " if i == 0 else " and "
            text += ("code outside traced tasks" if holder.task == 0
                     else "task %d" % holder.task)
            # Code outside traced tasks is not timed.
            if holder.task == 0:
                text += " (acquired at %s)" % format_location(holder.acquired_at)
            else:
                text += " (acquired at %s, %s ago)" % (
                    format_location(holder.acquired_at),
                    format_duration(holder.held_ms))
    return pad + text + ", for " + format_duration(wait.waiting_ms)


def _frame_lines(frame):
    pad = " " * (2 * (frame.depth + 1))
    if frame.awaiting_at is not None:
        status = "awaiting at " + format_location(frame.awaiting_at)
    elif frame.running:
        status = "running"
    else:
        status = "not suspended at an instrumented .await"
    return [pad + frame.function + " [async]", pad + "    " + status]


def format_header(task):
    """`task 12 "name" (tokio task 34) [idle 2.3s, 4 polls]:`, the tokio
    part only for a task filed under one, with its roots when it has
    several: `task 12 (tokio task 34; roots 12, 15) [...]:`."""
    header = "task %d" % task.id
    if task.name is not None:
        header += " " + _quoted(task.name)
    if task.tokio_id is not None:
        roots = ""
        if len(task.branches) > 1:
            roots = "; roots " + ", ".join(str(b) for b in task.branches)
        header += " (tokio task %d%s)" % (task.tokio_id, roots)
    return "%s [%s %s, %d polls]:" % (header, task.state,
                                      format_duration(task.state_ms),
                                      task.polls)


def format_task(task, torn_resources=0):
    """One task, exactly as the in-process text dump writes it: each
    branch's frames in turn, innermost first (every root at depth 0), each
    wait under the frame that awaits it (:func:`wait_frames`). A note
    follows when ``torn_resources`` resources with waits could not be read
    (caught in the middle of a change)."""
    lines = [format_header(task)]
    placed = wait_frames(task)
    for index in _written_order(task.frames):
        frame = task.frames[index]
        lines.extend(_frame_lines(frame))
        lines.extend(format_wait(frame.depth, wait)
                     for at, wait in placed if at == index)
    lines.extend(format_wait(None, wait) for at, wait in placed if at is None)
    if torn_resources:
        lines.append("  " + torn_note(torn_resources))
    if task.torn:
        lines.append("  (stack caught in the middle of a write; not shown)")
    elif not task.frames and task.polls == 0:
        # Spawned through a helper, waiting for its first poll.
        lines.append("  (not polled yet)")
    if task.hidden:
        lines.append("  ... %d more frames not shown" % task.hidden)
    if task.spawned_at is not None:
        by = " by task %d" % task.parent if task.parent else ""
        lines.append("  spawned at %s%s" % (format_location(task.spawned_at), by))
    elif task.parent:
        lines.append("  spawned by task %d" % task.parent)
    elif task.frames and task.frames[0].defined_at is not None:
        lines.append("  root future defined at "
                     + format_location(task.frames[0].defined_at))
    return "\n".join(lines)


def torn_note(count):
    """The note for ``count`` resources skipped because they were caught
    in the middle of a change."""
    return ("(%d resource%s with waits caught in the middle of a change; "
            "%s waits not shown)" % (count, "" if count == 1 else "s",
                                     "its" if count == 1 else "their"))


def innermost_await(task):
    """What a task's innermost frame waits on: `function at file:l:c`,
    `function running`, or `-` for a task without frames."""
    frames = innermost_first(task.frames)
    if not frames:
        return "-"
    frame = frames[0]
    if frame.awaiting_at is not None:
        return "%s at %s" % (frame.function, format_location(frame.awaiting_at))
    if frame.running:
        return frame.function + " running"
    return frame.function + " (not at an instrumented .await)"


def format_task_table(tasks):
    """`async-tasks`: one aligned row per task."""
    rows = [("ID", "NAME", "STATE", "TIME", "INNERMOST .await")]
    rows += [(str(t.id), t.name if t.name else "-", t.state,
              format_duration(t.state_ms), innermost_await(t)) for t in tasks]
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    lines = []
    for row in rows:
        cells = [row[0].rjust(widths[0])]
        cells += [cell.ljust(width) for cell, width in zip(row[1:4], widths[1:])]
        lines.append("  ".join(cells + [row[4]]))
    if not tasks:
        lines.append("(no live task)")
    return "\n".join(lines)


# ------------------------------------------------------------ splicing

_OWN_SOURCE = re.compile(r"(^|/)async-stack(-[0-9][^/]*)?/src/")
_TRACED_SOURCE = re.compile(r"(^|/)async-stack(-[0-9][^/]*)?/src/task/traced\.rs$")


def is_level(frame):
    """Whether a native frame is `Traced::poll`, one per async level
    whether inlined or not (the walker's anchor, `is_level`)."""
    name = frame.name or ""
    if frame.file:
        return (bool(_TRACED_SOURCE.search(frame.file))
                and _last_segment(name) == "poll")
    return "async_stack::task::traced::" in name and "poll" in name


def _last_segment(name):
    """The last path segment of a symbol name, without generic arguments:
    `poll` for `a::Traced<F>::poll<G>`, `<T as Future>::poll` and `poll`."""
    if not name.startswith("<") and "<" in name:
        name = name[:name.index("<")]
    elif name.endswith(">") and "<" in name.rsplit("::", 1)[-1]:
        name = name[:name.rindex("<")]
    return name.rsplit("::", 1)[-1]


def is_own_plumbing(frame):
    """async-stack's own poll machinery, by name or source file."""
    name = frame.name or ""
    by_name = (name.startswith(("async_stack::", "<async_stack::"))
               or name.startswith("std::thread::local::LocalKey"))
    file = frame.file or ""
    by_file = ((bool(_OWN_SOURCE.search(file))
                and not file.endswith("/src/read/walker.rs"))
               or file.endswith("std/src/thread/local.rs"))
    return by_name or by_file


def _async_entry(index, chain, body):
    """The ``(function, verb, location)`` of async frame ``index``."""
    frame = chain[index]
    function = frame.call.function if frame.call else "<unknown>"
    if index == 0 or frame.await_site is None:
        if body is None or not body.file:
            return function, "at", None
        file = body.file
        if index == 0 and frame.call and file.endswith(frame.call.location.file):
            file = frame.call.location.file
        verb = "at" if index == 0 else "awaiting at"
        return function, verb, _native_location(file, body.line, body.column)
    return function, "awaiting at", format_location(frame.await_site.location)


def _native_location(file, line, column):
    if not file:
        return None
    text = file
    if line:
        text += ":%d" % line
        if column:
            text += ":%d" % column
    return text


#: The hash legacy Rust mangling ends a symbol with, which a debugger
#: reading the symbol table alone may keep in the demangled name.
SYMBOL_HASH = re.compile(r"::h[0-9a-f]{16}$")


def without_hash(name):
    """``name`` without a legacy mangling hash (``a::b::h0123456789abcdef``
    becomes ``a::b``), as the walker prints names."""
    return SYMBOL_HASH.sub("", name) if name else name


def is_short_name(name, file):
    """Whether a debug-info function ``name`` at ``file`` is the short form
    line-tables-only debug info gives Rust functions (a Rust source file,
    no ``::`` outside generic arguments), which the walker replaces by the
    symbol table's name for a function of its own (a port of
    `read/native/names.rs`)."""
    if not name or not file or not file.endswith(".rs"):
        return False
    depth, previous = 0, ""
    for i, c in enumerate(name):
        if c in "<([{":
            depth += 1
        elif c == ">" and previous == "-":
            pass
        elif c in ">)]}":
            depth = max(depth - 1, 0)
        elif c == ":" and depth == 0 and name[i + 1:i + 2] == ":":
            return False
        previous = c
    return True


def is_body_name(call, name):
    """Whether the symbol ``name`` is the body of the function of ``call``:
    its name followed by ``::{{closure}}`` once or more (the walker's
    `is_body_name`)."""
    if call is None or not name or not name.endswith("::{{closure}}"):
        return False
    while name.endswith("::{{closure}}"):
        name = name[:-len("::{{closure}}")]
    return name == call.function


def body_frames(natives, chain, function_start):
    """For each async frame, innermost first, the index of the native frame
    that runs its body's code, or None when no body is found (a port of
    the walker's `body_frames`): the first frame, from the one found for
    the frame inside onward (past it for recursion), of the function that
    holds the frame's body address (``function_start`` gives a function's
    address), else named as its body. A frame not found goes with the
    nearest found outside it, else inside it."""
    found, start_at = [], 0
    for i, frame in enumerate(chain):
        recursion = (i > 0 and found[i - 1] is not None
                     and frame.call is not None
                     and chain[i - 1].call == frame.call)
        first = start_at + 1 if recursion else start_at
        function = (function_start(frame.body_address)
                    if frame.body_address else None)
        at = None
        if function is not None:
            at = next((p for p in range(first, len(natives))
                       if natives[p].function == function), None)
        if at is None:
            at = next((p for p in range(first, len(natives))
                       if is_body_name(frame.call, natives[p].name)), None)
        if at is not None:
            start_at = at
        found.append(at)
    known = [p for p in found if p is not None]
    if not known:
        return None
    anchors, outer = [0] * len(chain), known[-1]
    for i in reversed(range(len(chain))):
        if found[i] is not None:
            outer = found[i]
        anchors[i] = outer
    return anchors


def splice(natives, chain, function_start=lambda address: None):
    """The spliced backtrace's entries, innermost first, as
    ``(kind, function, verb, location)``: native frames inside the
    innermost poll, the async frames, then the executor (a port of the
    walker's `splice`; plumbing between levels is folded away). Without
    the `Traced::poll` levels (no debug info), each async frame goes at
    the native frame running its body (`body_frames`)."""
    levels = [i for i, f in enumerate(natives) if is_level(f)]
    exact = len(levels) == len(chain)
    bodies_at = None if exact else body_frames(natives, chain, function_start)
    if exact:
        anchors = levels
    elif bodies_at is not None:
        anchors = bodies_at
    else:
        anchors = [levels[0] if levels else 0] * len(chain)
    bodies = []
    for i in range(len(chain)):
        body = anchors[i] - 1 if exact else -1
        inner_edge = anchors[i - 1] + 1 if i else 0
        ok = exact and body >= inner_edge and not is_own_plumbing(natives[body])
        bodies.append(body if ok else None)

    out, emitted, folding, wrapper = [], 0, True, True
    for index, native in enumerate(natives):
        while emitted < len(chain) and anchors[emitted] <= index:
            body = bodies[emitted]
            out.append(("async",) + _async_entry(
                emitted, chain, natives[body] if body is not None else None))
            emitted += 1
        if native.name and "__rust_begin_short_backtrace" in native.name:
            break
        outer = emitted == len(chain) and emitted > 0
        if outer and folding:
            if is_own_plumbing(native) or "{async_fn" in (native.name or ""):
                continue
            # The root's body, where it has a frame of its own below the
            # root's poll (no debug info), as the walker folds it.
            if wrapper and is_body_name(chain[-1].call, native.name):
                wrapper = False
                continue
            folding = False
        folded = (index in bodies or (0 < emitted < len(chain))
                  or (emitted == 0 and chain and is_own_plumbing(native)))
        if not folded:
            out.append(("native", native.name or "<unknown>", "at",
                        _native_location(native.file, native.line,
                                         native.column)))
    while emitted < len(chain):
        out.append(("async",) + _async_entry(emitted, chain, None))
        emitted += 1
    return out


def format_backtrace(entries):
    """Numbered lines, as `async_stack::Backtrace` displays itself."""
    lines = []
    for number, (kind, function, verb, location) in enumerate(entries):
        tag = "[async] " if kind == "async" else ""
        lines.append("%4d: %s%s" % (number, tag, function))
        if location:
            lines.append("             %s %s" % (verb, location))
    return "\n".join(lines)


# ------------------------------------------------------------ commands


def thread_backtrace(reader, thread):
    """One thread's spliced backtrace."""
    chain = reader.chain(thread.tid)
    natives = reader.target.native_frames(thread)
    return format_backtrace(splice(natives, chain, reader.target.function_start))


def thread_header(thread):
    """The line naming a thread in `async-bt all`: its OS thread id, the
    one thing a live process and its core agree on."""
    return "OS thread %d:" % thread.tid


def async_bt(target, argument):
    """`async-bt [all | task <id>]`."""
    words = argument.split()
    reader = Reader(target)
    if not words:
        return thread_backtrace(reader, target.current_thread())
    if words == ["all"]:
        parts = []
        for thread in sorted(target.threads(), key=lambda t: t.tid):
            parts.append(thread_header(thread) + "\n"
                         + thread_backtrace(reader, thread))
        return "\n\n".join(parts)
    if len(words) == 2 and words[0] == "task":
        try:
            wanted = int(words[1], 0)
        except ValueError:
            raise AsyncStackError("not a task id: %r" % words[1])
        for task in reader.tasks(with_waits=True):
            if wanted in task.branches:
                return format_task(task, reader.torn_resources)
        raise AsyncStackError("no live task with id %d" % wanted)
    raise AsyncStackError("usage: async-bt [all | task <id>]")


def async_tasks(target, argument):
    """`async-tasks`."""
    if argument.strip():
        raise AsyncStackError("usage: async-tasks")
    return format_task_table(Reader(target).tasks())


def async_deadlocks(target, argument):
    """`async-deadlocks`: each deadlock as `async_stack::deadlocks()`
    reports it, an empty line between two; `no deadlock among N waiting
    tasks` when there is none; then a note naming the resources skipped
    because they were caught in the middle of a change, if any."""
    if argument.strip():
        raise AsyncStackError("usage: async-deadlocks")
    reader = Reader(target)
    reports, waiting = reader.deadlocks()
    text = "\n\n".join(reports) or "no deadlock among %d waiting task%s" % (
        waiting, "" if waiting == 1 else "s")
    if reader.torn_resources:
        text += ("\n\n" if reports else "\n") + torn_note(reader.torn_resources)
    return text


COMMANDS = {"async-bt": async_bt, "async-tasks": async_tasks,
            "async-deadlocks": async_deadlocks}


def run_command(target, command, argument):
    """The text a command prints: its output, or one `async-stack: ...`
    line for any problem (never a traceback)."""
    try:
        return COMMANDS[command](target, argument or "")
    except AsyncStackError as error:
        return ERROR_PREFIX + str(error)
    except Exception as error:  # a bug here must still print one line
        return ERROR_PREFIX + "internal error: %s: %s" % (
            type(error).__name__, error)
