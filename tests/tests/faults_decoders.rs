//! Hostile files against every decoder of the crate: a profile snapshot
//! (`Profile::from_snapshot`), a workload file (`Workload::from_json`) and
//! a JSON dump (`TaskDump::from_json`). Each must decode or refuse any
//! input with a clear error, never a panic, and allocate at most
//! [`AMPLIFICATION`] times the input's length, plus [`SLACK`], at any
//! instant of the decode.
//!
//! A test binary of its own: it replaces the global allocator with one
//! that keeps, per thread, the bytes allocated now and the most allocated
//! at once (see [`Counting`]), and each decode runs on the test's own
//! thread, so tests running beside it do not disturb the count.
//!
//! The inputs, for each decoder: valid files, then mutated (bytes flipped,
//! set, inserted, removed), truncated, or (snapshots) resealed so that the
//! mutations reach the decoder past the checksum; and constructions made
//! to be as dense as the format allows: every table of a snapshot filled
//! with its shortest distinct items, runs of duplicates, counts and
//! lengths far beyond the bytes that follow, lists of minimal JSON items.
//! One of them is issue 20's: a snapshot of 8 mismatches of millions of
//! empty strings, which decoded "OK" into 23 times its size.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use async_stack::TaskDump;
use async_stack::sampler::Profile;
use async_stack::workload::Workload;
use proptest::prelude::*;

// ---------------------------------------------------------------------
// The counting allocator

/// At any instant of a decode, the decoder holds at most this many times
/// the input's length... (each decoder's module docs say where its
/// constant comes from: the size of its items in memory against the
/// fewest bytes that spell one, and a list's spare capacity).
const AMPLIFICATION: u64 = 16;
/// ... plus this much: fixed-size tables, buffers and an error message.
const SLACK: u64 = 64 * 1024;

/// [`System`], counting this thread's bytes: those allocated now, and the
/// most allocated at once since [`peak_of`] reset it.
///
/// A `realloc` is counted as if the old and the new block were both held
/// at its peak (as when it copies), so a list that doubles counts three
/// times its old size for an instant.
struct Counting;

thread_local! {
    static NOW: Cell<i64> = const { Cell::new(0) };
    static PEAK: Cell<i64> = const { Cell::new(0) };
}

/// Adds `bytes` to what this thread holds, after holding `transient`
/// more for an instant.
fn count(bytes: i64, transient: i64) {
    // `try_with`: nothing to count into while the thread is being torn
    // down.
    let _ = NOW.try_with(|now| {
        let before = now.get();
        let _ = PEAK.try_with(|peak| peak.set(peak.get().max(before + bytes + transient)));
        now.set(before + bytes);
    });
}

// SAFETY: every call goes to `System` unchanged; counting touches only
// const-initialised thread-local `Cell`s, which never allocate.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count(layout.size() as i64, 0);
        // SAFETY: the caller's obligations are `System::alloc`'s.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        count(layout.size() as i64, 0);
        // SAFETY: as for `alloc`.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        count(-(layout.size() as i64), 0);
        // SAFETY: `ptr` came from `System` with `layout` (every allocation
        // of this allocator does).
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count(new_size as i64 - layout.size() as i64, layout.size() as i64);
        // SAFETY: as for `dealloc`, and `new_size` is the caller's.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Runs `f` on this thread; the most bytes it held at once beyond what the
/// thread held before (what it returns included), and its result.
fn peak_of<T>(f: impl FnOnce() -> T) -> (u64, T) {
    let start = NOW.with(Cell::get);
    PEAK.with(|p| p.set(start));
    let out = f();
    let peak = PEAK.with(Cell::get) - start;
    (peak.max(0) as u64, out)
}

/// Decodes `input` with `decode`, and checks the bound on what it held at
/// once, and that an error says what is wrong. Returns the error's text,
/// if it failed, for tests that check which.
fn check_decode<E: std::fmt::Display>(
    what: &str,
    input_len: usize,
    decode: impl FnOnce() -> Result<(), E>,
) -> Result<Option<String>, TestCaseError> {
    let (peak, result) = peak_of(decode);
    let bound = AMPLIFICATION * input_len as u64 + SLACK;
    prop_assert!(
        peak <= bound,
        "{what}: {peak} bytes at once for {input_len} bytes of input \
         ({:.1} x; the bound is {AMPLIFICATION} x + {SLACK}); {}",
        peak as f64 / input_len.max(1) as f64,
        match &result {
            Ok(()) => "decoded".to_owned(),
            Err(e) => format!("refused: {e}"),
        }
    );
    match result {
        Ok(()) => Ok(None),
        Err(e) => {
            let text = e.to_string();
            prop_assert!(!text.is_empty(), "{what}: an error says what is wrong");
            Ok(Some(text))
        }
    }
}

fn check_snapshot(bytes: &[u8]) -> Result<Option<String>, TestCaseError> {
    check_decode("snapshot", bytes.len(), || {
        Profile::from_snapshot(bytes).map(drop)
    })
}

fn check_workload(json: &str) -> Result<Option<String>, TestCaseError> {
    check_decode("workload", json.len(), || {
        Workload::from_json(json).map(drop)
    })
}

fn check_dump(json: &str) -> Result<Option<String>, TestCaseError> {
    check_decode("dump", json.len(), || TaskDump::from_json(json).map(drop))
}

/// `check` as a plain test's assertion.
fn ok<T>(check: Result<T, TestCaseError>) -> T {
    check.unwrap_or_else(|e| panic!("{e}"))
}

// ---------------------------------------------------------------------
// Snapshots, written from the format in `sampler::snapshot`'s docs

fn varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn bytes(out: &mut Vec<u8>, b: &[u8]) {
    varint(out, b.len() as u64);
    out.extend_from_slice(b);
}

/// CRC-32 (IEEE 802.3, as zlib's `crc32`) of `parts` in order.
fn crc32(parts: &[&[u8]]) -> u32 {
    let mut crc = !0u32;
    for part in parts {
        for &b in *part {
            crc ^= u32::from(b);
            for _ in 0..8 {
                crc = (crc >> 1) ^ (0xedb8_8320 & (crc & 1).wrapping_neg());
            }
        }
    }
    !crc
}

/// A snapshot of this payload, version 1.0, with its length and checksum.
fn seal(payload: &[u8]) -> Vec<u8> {
    let mut out = b"\x89ASPROF\n".to_vec();
    out.extend_from_slice(&1u16.to_le_bytes());
    out.extend_from_slice(&0u16.to_le_bytes());
    out.extend_from_slice(&(payload.len() as u64).to_le_bytes());
    let sum = crc32(&[&out, payload]);
    out.extend_from_slice(&sum.to_le_bytes());
    out.extend_from_slice(payload);
    out
}

/// A payload of this core.
fn payload(core: &[u8]) -> Vec<u8> {
    let mut p = Vec::new();
    bytes(&mut p, core);
    p
}

/// One frame of a snapshot's frame table.
#[derive(Clone, Debug)]
enum Frame {
    Async(u64, u64, u64, u64),
    Native(u64, u64, bool),
    Cleared,
}

/// A snapshot's tables, as numbers, valid or not: ids are not checked,
/// nor duplicates, so that the decoder sees whatever a test makes.
#[derive(Clone, Debug, Default)]
struct Tables {
    strings: Vec<Vec<u8>>,
    modules: Vec<(u64, Vec<u8>)>,
    frames: Vec<Frame>,
    stacks: Vec<Vec<u64>>,
    /// group, task_id, task_name, state, stack, samples, wall_ns, cpu_ns
    entries: Vec<[u64; 8]>,
    mismatches: Vec<Mismatch>,
}

/// A mismatch: task id, live strings, published strings.
type Mismatch = (u64, Vec<Vec<u8>>, Vec<Vec<u8>>);

impl Tables {
    /// Tables with only the string `""`, which every snapshot has.
    fn empty() -> Self {
        Tables {
            strings: vec![Vec::new()],
            ..Tables::default()
        }
    }

    /// The core: settings and counters, then the tables.
    fn core(&self) -> Vec<u8> {
        let mut c = Vec::new();
        // frequency, grouping, duration, start, budget (4 MiB)
        for v in [99, 0, 1_000_000, 1_700_000_000, 4 << 20] {
            varint(&mut c, v);
        }
        for i in 0..19 {
            varint(&mut c, i);
        }
        varint(&mut c, self.strings.len() as u64);
        for s in &self.strings {
            bytes(&mut c, s);
        }
        varint(&mut c, self.modules.len() as u64);
        for (path, build_id) in &self.modules {
            varint(&mut c, *path);
            bytes(&mut c, build_id);
        }
        varint(&mut c, self.frames.len() as u64);
        for f in &self.frames {
            match *f {
                Frame::Async(function, file, line, column) => {
                    for v in [0, function, file, line, column] {
                        varint(&mut c, v);
                    }
                }
                Frame::Native(module, offset, call) => {
                    for v in [1, module, offset, u64::from(call)] {
                        varint(&mut c, v);
                    }
                }
                Frame::Cleared => varint(&mut c, 2),
            }
        }
        varint(&mut c, self.stacks.len() as u64);
        for s in &self.stacks {
            varint(&mut c, s.len() as u64);
            for &f in s {
                varint(&mut c, f);
            }
        }
        varint(&mut c, self.entries.len() as u64);
        for e in &self.entries {
            for &v in e {
                varint(&mut c, v);
            }
        }
        varint(&mut c, self.mismatches.len() as u64);
        for (task, live, published) in &self.mismatches {
            varint(&mut c, *task);
            for list in [live, published] {
                varint(&mut c, list.len() as u64);
                for s in list {
                    bytes(&mut c, s);
                }
            }
        }
        c
    }

    fn snapshot(&self) -> Vec<u8> {
        seal(&payload(&self.core()))
    }
}

/// The `i`-th shortest distinct ASCII string (`""`, then every one-byte
/// string, then every two-byte one, ...).
fn short_string(mut i: u64) -> Vec<u8> {
    let mut len = 0;
    let mut of_len = 1u64;
    while i >= of_len {
        i -= of_len;
        len += 1;
        of_len *= 128;
    }
    (0..len)
        .map(|_| {
            let b = (i % 128) as u8;
            i /= 128;
            b
        })
        .collect()
}

/// A valid profile's tables: `n` of most things, every id in range, every
/// item distinct.
fn valid_tables(n: u64, seed: u64) -> Tables {
    let n = n.max(1);
    let mut t = Tables::empty();
    t.strings
        .extend((0..n).map(|i| format!("app::f{i} {seed}").into_bytes()));
    t.modules = (0..n)
        .map(|i| (i % 3, (i as u32).to_le_bytes().to_vec()))
        .collect();
    t.frames = (0..n)
        .map(|i| match i % 3 {
            0 => Frame::Async(i % n, (i + 1) % n, 10 + i, i % 80),
            1 => Frame::Native(i % n, seed.wrapping_mul(i), i % 2 == 0),
            _ => Frame::Async(i % n, 0, 1_000_000 + i, 1),
        })
        .collect();
    t.stacks = (0..n)
        .map(|i| (0..=i % 9).map(|k| (i + k) % n).collect())
        .collect();
    t.entries = (0..n)
        .map(|i| [i % n, i, 0, i % 2, i % n, 1 + i, 10_101_010 * i, 3 * i])
        .collect();
    t.mismatches = (0..n.min(8))
        .map(|i| {
            let live = (0..=i).map(|k| format!("f{k} at src/a.rs:{k}:1").into_bytes());
            (i, live.collect(), vec![b"f at src/a.rs:1:1".to_vec()])
        })
        .collect();
    t
}

/// The densest snapshots the format allows, each made to make the decoder
/// hold as much as it can per byte; `n` is the number of items.
#[derive(Clone, Copy, Debug)]
enum Dense {
    /// Issue 20's: 8 mismatches, each with a list of `n` empty strings.
    MismatchStrings,
    /// `n` distinct strings, shortest first.
    ShortStrings,
    /// 128 paths, and `n` distinct modules of them with build ids of a
    /// byte or two.
    Modules,
    /// `n` distinct async frames with the smallest fields.
    Frames,
    /// `n` distinct stacks of one frame id each.
    OneFrameStacks,
    /// `n` distinct entries with the smallest fields.
    Entries,
    /// `n` empty stacks: duplicates.
    EmptyStacks,
    /// `n` `[cleared]` frames: duplicates.
    ClearedFrames,
    /// `n` mismatch strings of one byte in 8 lists of 63.
    FullMismatches,
}

impl Dense {
    const ALL: [Dense; 9] = [
        Dense::MismatchStrings,
        Dense::ShortStrings,
        Dense::Modules,
        Dense::Frames,
        Dense::OneFrameStacks,
        Dense::Entries,
        Dense::EmptyStacks,
        Dense::ClearedFrames,
        Dense::FullMismatches,
    ];

    fn tables(self, n: u64) -> Tables {
        let mut t = Tables::empty();
        match self {
            Dense::MismatchStrings => {
                t.mismatches = (0..8)
                    .map(|i| (i, vec![Vec::new(); n as usize], Vec::new()))
                    .collect();
            }
            Dense::ShortStrings => t.strings = (0..n.max(1)).map(short_string).collect(),
            Dense::Modules => {
                t.strings = (0..128).map(short_string).collect();
                t.modules = (0..n)
                    .map(|i| (i % 128, short_string(1 + i / 128)))
                    .collect();
            }
            Dense::Frames => {
                t.frames = (0..n)
                    .map(|i| Frame::Async(0, 0, i / 128, i % 128))
                    .collect();
            }
            Dense::OneFrameStacks => {
                let frames = n.min(16_384);
                t.frames = (0..frames)
                    .map(|i| Frame::Async(0, 0, i / 128, i % 128))
                    .collect();
                t.stacks = (0..n)
                    .map(|i| {
                        if i < frames {
                            vec![i]
                        } else {
                            vec![i % frames, i / frames]
                        }
                    })
                    .collect();
            }
            Dense::Entries => {
                t.frames = vec![Frame::Cleared];
                t.stacks = vec![vec![0]];
                t.entries = (0..n).map(|i| [0, i, 0, 0, 0, 0, 0, 0]).collect();
            }
            Dense::EmptyStacks => t.stacks = vec![Vec::new(); n as usize],
            Dense::ClearedFrames => t.frames = vec![Frame::Cleared; n as usize],
            Dense::FullMismatches => {
                let list = |k: u64| (0..k.min(63)).map(|j| vec![j as u8]).collect();
                t.mismatches = (0..8)
                    .map(|i| {
                        (
                            i,
                            list(n.saturating_sub(126 * i)),
                            list(n.saturating_sub(126 * i + 63)),
                        )
                    })
                    .collect();
            }
        }
        t
    }
}

/// Where a count or a length can be inflated in a snapshot's core.
#[derive(Clone, Copy, Debug)]
enum Inflate {
    Strings,
    StringLength,
    Modules,
    BuildIdLength,
    Frames,
    Stacks,
    StackFrames,
    Entries,
    Mismatches,
    MismatchLive,
    MismatchString,
}

impl Inflate {
    const ALL: [Inflate; 11] = [
        Inflate::Strings,
        Inflate::StringLength,
        Inflate::Modules,
        Inflate::BuildIdLength,
        Inflate::Frames,
        Inflate::Stacks,
        Inflate::StackFrames,
        Inflate::Entries,
        Inflate::Mismatches,
        Inflate::MismatchLive,
        Inflate::MismatchString,
    ];

    /// A core that declares `count` at this place, followed by `body`
    /// zero bytes.
    fn core(self, count: u64, body: usize) -> Vec<u8> {
        let t = Tables::empty();
        let mut c = t.core();
        // The empty tables end `1 [""] 0 0 0 0 0` (strings with `""`,
        // then empty modules, frames, stacks, entries, mismatches): cut
        // at the place, declare the count there.
        let tail = 7;
        let mut cut = c.len() - tail;
        let mut prefix: Vec<u8> = Vec::new();
        match self {
            Inflate::Strings => {}
            Inflate::StringLength => prefix = vec![2, 0],
            Inflate::Modules => cut += 2,
            Inflate::BuildIdLength => {
                cut += 2;
                prefix = vec![1, 0];
            }
            Inflate::Frames => cut += 3,
            Inflate::Stacks => cut += 4,
            Inflate::StackFrames => {
                cut += 4;
                prefix = vec![1];
            }
            Inflate::Entries => cut += 5,
            Inflate::Mismatches => cut += 6,
            Inflate::MismatchLive => {
                cut += 6;
                prefix = vec![1, 7];
            }
            Inflate::MismatchString => {
                cut += 6;
                prefix = vec![1, 7, 1];
            }
        }
        c.truncate(cut);
        c.extend_from_slice(&prefix);
        varint(&mut c, count);
        c.resize(c.len() + body, 0);
        c
    }
}

/// A change to an input's bytes.
#[derive(Clone, Debug)]
enum Mutation {
    Flip(prop::sample::Index, u8),
    Set(prop::sample::Index, u8),
    Insert(prop::sample::Index, Vec<u8>),
    Remove(prop::sample::Index, usize),
    Truncate(prop::sample::Index),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        (any::<prop::sample::Index>(), 0u8..8).prop_map(|(i, b)| Mutation::Flip(i, b)),
        (any::<prop::sample::Index>(), any::<u8>()).prop_map(|(i, b)| Mutation::Set(i, b)),
        (
            any::<prop::sample::Index>(),
            prop_oneof![
                prop::collection::vec(any::<u8>(), 1..4),
                // A varint of a large count or length.
                Just(vec![0xff, 0xff, 0xff, 0x7f]),
                Just(b"[[[[[[[[".to_vec()),
                Just(b"\"\",".to_vec()),
            ]
        )
            .prop_map(|(i, b)| Mutation::Insert(i, b)),
        (any::<prop::sample::Index>(), 1usize..8).prop_map(|(i, n)| Mutation::Remove(i, n)),
        any::<prop::sample::Index>().prop_map(Mutation::Truncate),
    ]
}

fn mutate(input: &mut Vec<u8>, mutations: &[Mutation]) {
    for m in mutations {
        let len = input.len();
        match m {
            Mutation::Insert(i, b) => {
                let at = i.index(len + 1);
                input.splice(at..at, b.iter().copied());
            }
            _ if len == 0 => {}
            Mutation::Flip(i, bit) => input[i.index(len)] ^= 1 << bit,
            Mutation::Set(i, b) => input[i.index(len)] = *b,
            Mutation::Remove(i, n) => {
                let at = i.index(len);
                input.drain(at..(at + n).min(len));
            }
            Mutation::Truncate(i) => input.truncate(i.index(len)),
        }
    }
}

// ---------------------------------------------------------------------
// JSON inputs

/// A valid workload of `n` groups (each with `n` consumers) and `n`
/// independent entries.
fn valid_workload(n: usize, seed: u64) -> String {
    let groups: Vec<String> = (0..n)
        .map(|g| {
            let consumers: Vec<String> = (0..n)
                .map(|c| {
                    format!(
                        r#"{{"name": "c{g}.{c}", "instances": {}, "busy_us_per_wake": {}}}"#,
                        1 + c % 3,
                        seed % 1000
                    )
                })
                .collect();
            format!(
                r#"{{"name": "g{g}", "producer": {{"name": "p{g}", "busy_us_per_cycle": 100,
                "sleep_us_per_cycle": {}, "fan_out": 2, "waits_for_replies": {}}},
                "consumers": [{}]}}"#,
                1 + seed % 5000,
                g % 2 == 0,
                consumers.join(", ")
            )
        })
        .collect();
    let independent: Vec<String> = (0..n)
        .map(|i| {
            format!(
                r#"{{"name": "i{i}", "instances": 2, "busy_us_per_wake": 5, "period_us": {}}}"#,
                1000 + i
            )
        })
        .collect();
    format!(
        r#"{{"version": 1, "duration_ms": 1000, "groups": [{}], "independent": [{}]}}"#,
        groups.join(", "),
        independent.join(", ")
    )
}

/// A valid dump of `n` tasks, each with up to 9 frames.
fn valid_dump(n: usize, seed: u64) -> String {
    let tasks: Vec<String> = (0..n)
        .map(|i| {
            let frames: Vec<String> = (0..(i + seed as usize) % 10)
                .map(|d| {
                    format!(
                        r#"{{"depth": {d}, "function": "app::l{d}", "defined_at": {{"file": "src/app.rs", "line": {}, "column": 1}},
                        "awaiting_at": null, "running": false}}"#,
                        10 + d
                    )
                })
                .collect();
            format!(
                r#"{{"id": {i}, "name": "t{i}", "state": "idle", "state_ms": {seed}, "polls": 2, "wakes": 1,
                "parent": null, "spawned_at": null, "root": "app::l0", "frames": [{}],
                "hidden_frames": 0, "stack_unavailable": false}}"#,
                frames.join(", ")
            )
        })
        .collect();
    format!(
        r#"{{"version": 2, "tasks": [{}], "torn_copies": 0, "untracked_roots": 0}}"#,
        tasks.join(", ")
    )
}

/// JSON lists of `n` of the shortest items each decoder takes (serde also
/// reads a struct from an array of its fields, which is shorter than an
/// object), and other constructions that make a decoder hold much.
#[derive(Clone, Copy, Debug)]
enum DenseJson {
    /// Workload groups with empty names and no consumers.
    Groups,
    /// Consumers with empty names.
    Consumers,
    /// Valid independent entries, distinct names.
    Independents,
    /// Dump tasks with nothing but zeros and nulls.
    Tasks,
    /// Dump tasks, each with 63 minimal frames.
    Frames,
    /// One string of `n` escapes, each a character of one byte.
    Escapes,
    /// Arrays nested `n` deep.
    Nested,
}

impl DenseJson {
    const ALL: [DenseJson; 7] = [
        DenseJson::Groups,
        DenseJson::Consumers,
        DenseJson::Independents,
        DenseJson::Tasks,
        DenseJson::Frames,
        DenseJson::Escapes,
        DenseJson::Nested,
    ];

    fn json(self, n: usize) -> String {
        let list = |item: &str, n: usize| vec![item; n].join(",");
        match self {
            DenseJson::Groups => {
                format!(r#"[1,1,[{}],[]]"#, list(r#"["",["",0,0,0,false],[]]"#, n))
            }
            DenseJson::Consumers => format!(
                r#"[1,1,[["g",["p",0,1,1,true],[{}]]],[]]"#,
                list(r#"["",1,0]"#, n)
            ),
            DenseJson::Independents => {
                let items: Vec<String> = (0..n).map(|i| format!(r#"["{i}",1,0,1000]"#)).collect();
                format!(r#"[1,1,[],[{}]]"#, items.join(","))
            }
            DenseJson::Tasks => format!(
                r#"[2,[{}],0,0]"#,
                list(r#"[0,null,"idle",0,0,0,null,null,null,[],0,false]"#, n)
            ),
            DenseJson::Frames => {
                let frames = list(r#"[0,"",null,null,false]"#, 63);
                let task = format!(r#"[0,null,"idle",0,0,0,null,null,null,[{frames}],0,false]"#);
                format!(r#"[2,[{}],0,0]"#, list(&task, n / 63 + 1))
            }
            DenseJson::Escapes => format!(
                r#"[2,[[0,"{}","idle",0,0,0,null,null,null,[],0,false]],0,0]"#,
                "\\u0041".repeat(n)
            ),
            DenseJson::Nested => format!("{}{}", "[".repeat(n), "]".repeat(n)),
        }
    }
}

// ---------------------------------------------------------------------
// Deterministic cases

/// Issue 20's snapshot, scaled down from 67 MB: 8 mismatches, each with a
/// list of 131,072 empty strings, one byte each in the file, 24 bytes
/// each in memory. It was decoded, into 24 times its size; it is refused,
/// since no list of a mismatch holds more frames than a published stack.
#[test]
fn a_snapshot_of_many_empty_mismatch_strings_is_refused_within_the_bound() {
    let bytes = Dense::MismatchStrings.tables(1 << 17).snapshot();
    assert!(bytes.len() > 1 << 20);
    let error = ok(check_snapshot(&bytes));
    assert_eq!(
        error.as_deref(),
        Some(
            "profile snapshot: mismatch live bring the total to 131072, \
             above the 63 a profile can hold"
        )
    );
}

/// Every dense construction, at sizes where each table holds items of
/// every length its shortest distinct items have, decodes (or is refused)
/// within the bound. Runs of duplicates are refused.
#[test]
fn the_densest_snapshots_decode_within_the_bound() {
    for dense in Dense::ALL {
        for n in [0, 1, 200, 20_000, 70_000] {
            let bytes = dense.tables(n).snapshot();
            let error = ok(check_snapshot(&bytes));
            match dense {
                // A few duplicates are found as they are, more cannot be
                // distinct items in the bytes that follow.
                Dense::EmptyStacks | Dense::ClearedFrames if n > 1 => assert!(
                    error.as_deref().is_some_and(
                        |e| e.contains("two equal items") || e.contains("cannot fit in the")
                    ),
                    "{dense:?} {n}: {error:?}"
                ),
                Dense::MismatchStrings if n > 63 => assert!(error.is_some()),
                _ => assert_eq!(error, None, "{dense:?} {n}"),
            }
        }
    }
}

/// A count or length of each place, from the largest the bytes left can
/// hold to far more, with a body of zeros: refused (or decoded) within the
/// bound, before anything is allocated for what is not there.
#[test]
fn inflated_counts_and_lengths_are_refused_within_the_bound() {
    let body = 100_000;
    for place in Inflate::ALL {
        for count in [body as u64 / 4, body as u64, 1 << 20, 1 << 40, u64::MAX] {
            let bytes = seal(&payload(&place.core(count, body)));
            let error = ok(check_snapshot(&bytes));
            assert!(error.is_some(), "{place:?} {count}: decoded");
        }
    }
}

#[test]
fn valid_snapshots_round_trip_within_the_bound() {
    for n in [1, 10, 1_000, 10_000] {
        let bytes = valid_tables(n, 7).snapshot();
        let (peak, profile) = peak_of(|| Profile::from_snapshot(&bytes));
        let profile = profile.unwrap_or_else(|e| panic!("{n}: {e}"));
        assert!(
            peak <= AMPLIFICATION * bytes.len() as u64 + SLACK,
            "{n}: {peak}"
        );
        assert_eq!(profile.to_snapshot(), bytes);
    }
}

#[test]
fn the_densest_json_decodes_within_the_bound() {
    for dense in DenseJson::ALL {
        for n in [0, 1, 1_000, 30_000, 100_000] {
            let json = dense.json(n);
            ok(check_workload(&json));
            ok(check_dump(&json));
        }
    }
}

// ---------------------------------------------------------------------
// Properties

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 64,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    /// Valid snapshots, mutated: checked by the checksum, or (resealed)
    /// by the decoder.
    #[test]
    fn mutated_snapshots_decode_within_the_bound(
        n in 1u64..300,
        seed in any::<u64>(),
        reseal in any::<bool>(),
        mutations in prop::collection::vec(mutation(), 1..6),
    ) {
        let bytes = valid_tables(n, seed).snapshot();
        let bytes = if reseal {
            let mut p = bytes[24..].to_vec();
            mutate(&mut p, &mutations);
            seal(&p)
        } else {
            let mut b = bytes;
            mutate(&mut b, &mutations);
            b
        };
        check_snapshot(&bytes)?;
    }

    /// The densest snapshots, of any size, mutated and resealed.
    #[test]
    fn dense_snapshots_decode_within_the_bound(
        dense in prop::sample::select(&Dense::ALL[..]),
        n in 0u64..40_000,
        mutations in prop::collection::vec(mutation(), 0..4),
    ) {
        let mut core = dense.tables(n).core();
        mutate(&mut core, &mutations);
        check_snapshot(&seal(&payload(&core)))?;
    }

    /// Counts and lengths inflated at every place, over bodies of any
    /// length and content.
    #[test]
    fn inflated_snapshots_decode_within_the_bound(
        place in prop::sample::select(&Inflate::ALL[..]),
        count in prop_oneof![0u64..100_000, any::<u64>()],
        body in 0usize..50_000,
        fill in any::<u8>(),
    ) {
        let mut core = place.core(count, body);
        let len = core.len();
        core[len - body..].fill(fill);
        check_snapshot(&seal(&payload(&core)))?;
    }

    /// Valid workloads and dumps, mutated, and each decoder fed the
    /// other's files too.
    #[test]
    fn mutated_json_decodes_within_the_bound(
        n in 0usize..12,
        seed in any::<u64>(),
        workload in any::<bool>(),
        mutations in prop::collection::vec(mutation(), 0..6),
    ) {
        let json = if workload { valid_workload(n, seed) } else { valid_dump(n * 8, seed) };
        let mut json = json.into_bytes();
        mutate(&mut json, &mutations);
        let json = String::from_utf8_lossy(&json);
        check_workload(&json)?;
        check_dump(&json)?;
    }

    /// The densest JSON, of any size, mutated.
    #[test]
    fn dense_json_decodes_within_the_bound(
        dense in prop::sample::select(&DenseJson::ALL[..]),
        n in 0usize..60_000,
        mutations in prop::collection::vec(mutation(), 0..4),
    ) {
        let mut json = dense.json(n).into_bytes();
        mutate(&mut json, &mutations);
        let json = String::from_utf8_lossy(&json);
        check_workload(&json)?;
        check_dump(&json)?;
    }
}
