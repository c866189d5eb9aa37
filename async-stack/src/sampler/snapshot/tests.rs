//! Tests of the snapshot format: round trips (property-based too), every
//! error by field, truncation and corruption at every byte, and the limits.

use super::decode::*;
use super::encode::*;
use super::format::*;
use super::*;
use crate::read::verify::{MAX_MISMATCHES, Mismatch};
use crate::sampler::profile::{
    DEFAULT_BUDGET, Frame, FrameRef, Grouping, MAX_BUDGET, MIN_BUDGET, SampleState, SampledTask,
    Stats, Weights,
};
use crate::task::STACK_CAPACITY;
use proptest::prelude::*;

fn w(samples: u64) -> Weights {
    Weights {
        samples,
        wall_ns: samples * 10_101_010,
        cpu_ns: samples * 3,
    }
}

/// A profile that uses every kind of frame, multi-byte varints, empty
/// and non-ASCII strings, an empty stack, every counter, and a tokio id.
fn sample_profile() -> Profile {
    let mut p = Profile::new(DEFAULT_BUDGET);
    p.frequency_hz = 99;
    p.grouping = Grouping::SpawnSite;
    p.duration_ns = 12_345_678_901;
    p.start_unix_ns = 1_700_000_000_123_456_789;
    let root = FrameRef::Async {
        function: "app::main",
        file: "src/main.rs",
        line: 10,
        column: 5,
    };
    let leaf = FrameRef::Async {
        function: "app::serve::{{closure}}",
        file: "src/serve.rs",
        line: 420,
        column: 0,
    };
    let libc = FrameRef::Native {
        module: "/usr/lib/libc.so.6",
        build_id: &[0xde, 0xad, 0xbe, 0xef],
        offset: 0x1234,
        call: true,
    };
    let app = FrameRef::Native {
        module: "/bin/app",
        build_id: &[],
        offset: u64::MAX - 1,
        call: false,
    };
    let off = SampleState::OffCpu;
    let on = SampleState::OnCpu;
    p.add("server", 1, "server", off, &[root, leaf], w(3));
    p.add("server", 1, "server", on, &[root, leaf, libc, app], w(2));
    // A task filed under a tokio task (minor 1), with a tokio id of
    // several bytes.
    let filed = SampledTask {
        id: 7,
        tokio_id: 300,
        name: "",
    };
    p.add_task("src/main.rs:20", filed, off, &[root], w(1));
    p.add(
        "ünïcode ✓",
        u64::MAX,
        "名前",
        on,
        &[],
        w(u64::MAX / 10_101_010),
    );
    let mut s = Stats::default();
    let fields = [
        &mut s.ticks,
        &mut s.late_ticks,
        &mut s.attempted,
        &mut s.ok,
        &mut s.retried,
        &mut s.dropped_torn,
        &mut s.dropped_inconsistent,
        &mut s.truncated,
        &mut s.reservoir_skipped,
        &mut s.signals,
        &mut s.signals_lost,
        &mut s.mismatches,
        &mut s.sampler_cpu_ns,
        &mut s.handler_ns,
        &mut s.cleared_stacks,
        &mut s.dropped_groups,
        &mut s.dropped.samples,
        &mut s.dropped.wall_ns,
        &mut s.dropped.cpu_ns,
    ];
    for (i, f) in fields.into_iter().enumerate() {
        *f = (i as u64 + 1) << (3 * i);
    }
    p.stats = s;
    p.add_mismatch(Mismatch {
        task_id: 7,
        live: vec!["app::main @ src/main.rs:10:5".into(), String::new()],
        published: vec![],
    });
    p
}

/// [`sample_profile`] without its tokio id: a `1.0` snapshot, with no
/// extension record.
fn sample_profile_1_0() -> Profile {
    let mut p = sample_profile();
    for e in &mut p.entries {
        e.tokio_id = 0;
    }
    p
}

/// The stacks as a user reads them.
type View<'a> = Vec<(
    &'a str,
    (u64, Option<u64>),
    &'a str,
    SampleState,
    Weights,
    Vec<FrameRef<'a>>,
)>;

fn view(p: &Profile) -> View<'_> {
    p.stacks()
        .map(|s| {
            let frames = s.frames().collect();
            (
                s.group(),
                (s.task_id(), s.tokio_id()),
                s.task_name(),
                s.state(),
                s.weights(),
                frames,
            )
        })
        .collect()
}

fn assert_same(a: &Profile, b: &Profile) {
    assert_eq!(a.strings.items, b.strings.items);
    assert_eq!(a.modules.items, b.modules.items);
    assert_eq!(a.frames.items, b.frames.items);
    assert_eq!(a.stacks.items, b.stacks.items);
    assert_eq!(a.entries, b.entries);
    assert_eq!(a.stats, b.stats);
    assert_eq!(a.mismatches, b.mismatches);
    assert_eq!(a.frequency_hz, b.frequency_hz);
    assert_eq!(a.grouping, b.grouping);
    assert_eq!(a.duration_ns, b.duration_ns);
    assert_eq!(a.start_unix_ns, b.start_unix_ns);
    assert_eq!(a.budget, b.budget);
    assert_eq!(a.memory_bytes(), b.memory_bytes());
    assert_eq!(view(a), view(b));
}

/// The assumption behind `MAX_ITEMS` and `MAX_STACK_FRAMES`: the
/// budget charges at least 32 bytes per interned item and 8 per stack
/// frame id, so a profile within `MAX_BUDGET` holds at most half the
/// reader's limits.
fn assert_budget_covers_the_limits(p: &Profile) {
    let items =
        p.strings.len() + p.modules.len() + p.frames.len() + p.stacks.len() + p.entries.len();
    let ids: usize = p.stacks.items.iter().map(|s| s.len()).sum();
    assert!(
        p.memory_bytes() >= 32 * items + 8 * ids,
        "{} bytes for {items} items and {ids} ids",
        p.memory_bytes()
    );
    assert_eq!(MAX_ITEMS, 2 * (MAX_BUDGET / 32) as u64);
    assert_eq!(MAX_STACK_FRAMES, 2 * (MAX_BUDGET / 8) as u64);
}

fn payload(snapshot: &[u8]) -> &[u8] {
    &snapshot[HEADER_LEN..]
}

/// A snapshot of this core, with a correct length and checksum.
fn with_core(core: &[u8]) -> Vec<u8> {
    let mut p = Writer::default();
    p.varint(core.len() as u64);
    p.0.extend_from_slice(core);
    seal(SNAPSHOT_MAJOR, SNAPSHOT_MINOR, &p.0)
}

/// The core of an empty profile up to its tables, then `rest`.
fn crafted(rest: impl FnOnce(&mut Writer)) -> Vec<u8> {
    let p = Profile::default();
    let mut core = Writer::default();
    encode_meta(&p, &mut core);
    encode_stats(&p.stats, &mut core);
    rest(&mut core);
    with_core(&core.0)
}

fn err(bytes: &[u8]) -> SnapshotError {
    match Profile::from_snapshot(bytes) {
        Ok(_) => panic!("a bad snapshot was accepted"),
        Err(e) => e,
    }
}

/// A change to a profile that breaks one of its invariants.
type Damage = fn(&mut Profile);

/// The snapshot of `p` after `damage`, which may break invariants the
/// profile's own methods keep: the encoder writes the tables as they
/// are, with a valid length and checksum.
fn damaged(damage: impl FnOnce(&mut Profile)) -> SnapshotError {
    let mut p = sample_profile();
    damage(&mut p);
    err(&p.to_snapshot())
}

#[test]
fn round_trip_keeps_every_table() {
    let p = sample_profile();
    let bytes = p.to_snapshot();
    let q = Profile::from_snapshot(&bytes).unwrap();
    assert_same(&p, &q);
    assert_budget_covers_the_limits(&p);
    assert_eq!(view(&q)[1].5.len(), 4);
    assert!(matches!(
        view(&q)[1].5[2],
        FrameRef::Native {
            module: "/usr/lib/libc.so.6",
            build_id: &[0xde, 0xad, 0xbe, 0xef],
            offset: 0x1234,
            call: true
        }
    ));
    assert_eq!(q.to_snapshot(), bytes, "encoding is deterministic");
}

#[test]
fn loaded_profile_keeps_aggregating_into_its_entries() {
    let mut q = Profile::from_snapshot(&sample_profile().to_snapshot()).unwrap();
    let root = FrameRef::Async {
        function: "app::main",
        file: "src/main.rs",
        line: 10,
        column: 5,
    };
    q.add("src/main.rs:20", 7, "", SampleState::OffCpu, &[root], w(4));
    assert_eq!(
        q.entries.len(),
        4,
        "the loaded interning maps found the entry"
    );
    assert_eq!(view(&q)[2].4, w(5));
}

#[test]
fn round_trip_of_a_profile_shed_by_its_budget() {
    let mut p = Profile::new(MIN_BUDGET);
    for i in 0..3000u32 {
        let name = format!("function_number_{i}");
        let frame = FrameRef::Async {
            function: &name,
            file: "src/lib.rs",
            line: i,
            column: 1,
        };
        let group = format!("group{}", i % 5);
        p.add(&group, i.into(), "", SampleState::OffCpu, &[frame], w(1));
    }
    assert!(p.stats.cleared_stacks > 0);
    assert!(p.frames.items.contains(&Frame::Cleared));
    let q = Profile::from_snapshot(&p.to_snapshot()).unwrap();
    assert_same(&p, &q);
    assert_budget_covers_the_limits(&p);
    assert!(q.stacks().any(|s| s.frames().eq([FrameRef::Cleared])));
}

#[test]
fn save_and_load_through_a_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("app.asprof");
    let p = sample_profile();
    p.save(&path).unwrap();
    assert_same(&p, &Profile::load(&path).unwrap());
    // A second save replaces the first whole, and leaves no temporary
    // file behind.
    let empty = Profile::default();
    empty.save(&path).unwrap();
    assert_same(&empty, &Profile::load(&path).unwrap());
    let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
    assert_eq!(names.len(), 1);
    assert_eq!(std::fs::read(&path).unwrap(), empty.to_snapshot());
}

#[test]
fn a_failed_save_leaves_the_target_intact() {
    let dir = tempfile::tempdir().unwrap();
    // Into a missing directory: nothing is created.
    let missing = dir.path().join("missing").join("app.asprof");
    let e = sample_profile().save(&missing).unwrap_err();
    assert_eq!(e.kind(), io::ErrorKind::NotFound);
    assert!(!dir.path().join("missing").exists());
    // Over a target the rename cannot replace (a non-empty directory):
    // the target is untouched and the temporary file is removed.
    let target = dir.path().join("app.asprof");
    std::fs::create_dir(&target).unwrap();
    std::fs::write(target.join("keep"), b"kept").unwrap();
    assert!(sample_profile().save(&target).is_err());
    assert_eq!(std::fs::read(target.join("keep")).unwrap(), b"kept");
    let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
    assert_eq!(names.len(), 1, "no temporary file is left behind");
}

#[test]
fn load_reports_io_and_header_errors() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("app.asprof");
    assert!(matches!(
        Profile::load(&path),
        Err(SnapshotError::Io(e)) if e.kind() == io::ErrorKind::NotFound
    ));
    std::fs::write(&path, b"\x89ASPROF").unwrap();
    assert!(matches!(
        Profile::load(&path),
        Err(SnapshotError::Truncated {
            what: "header",
            needed: 24,
            available: 7
        })
    ));
    // A header declaring a huge payload is refused before reading it.
    let mut huge = Profile::default().to_snapshot();
    huge[12..20].copy_from_slice(&(1u64 << 40).to_le_bytes());
    std::fs::write(&path, &huge).unwrap();
    assert!(matches!(
        Profile::load(&path),
        Err(SnapshotError::PayloadTooLarge {
            length: 0x100_0000_0000,
            max: MAX_SNAPSHOT_PAYLOAD
        })
    ));
    let mut trailing = Profile::default().to_snapshot();
    trailing.extend_from_slice(b"abc");
    std::fs::write(&path, &trailing).unwrap();
    assert!(matches!(
        Profile::load(&path),
        Err(SnapshotError::TrailingBytes { count: 3 })
    ));
}

#[test]
fn rejects_bad_magic() {
    let mut bytes = sample_profile().to_snapshot();
    bytes[0] = b'A';
    assert!(matches!(err(&bytes), SnapshotError::BadMagic));
    assert!(matches!(err(&[0; 64]), SnapshotError::BadMagic));
}

/// Tokio ids are the record of minor 1, written only when an entry has
/// one (a profile with none is still a `1.0` snapshot), and read back.
#[test]
fn tokio_ids_are_the_record_of_minor_1() {
    let p = sample_profile();
    let bytes = p.to_snapshot();
    assert_eq!(u16::from_le_bytes([bytes[10], bytes[11]]), 1);
    // Entry 2 of tokio task 300 (a two-byte varint).
    assert!(bytes.ends_with(&[1, 4, 1, 2, 0xac, 0x02]), "{bytes:?}");
    let loaded = Profile::from_snapshot(&bytes).unwrap();
    assert_same(&p, &loaded);
    let tokio: Vec<_> = loaded.stacks().map(|s| s.tokio_id()).collect();
    assert_eq!(tokio, [None, None, Some(300), None]);

    let bytes = sample_profile_1_0().to_snapshot();
    assert_eq!(u16::from_le_bytes([bytes[10], bytes[11]]), 0);
    assert_eq!(Profile::from_snapshot(&bytes).unwrap().to_snapshot(), bytes);
}

#[test]
fn malformed_tokio_ids_are_errors() {
    let p = sample_profile_1_0();
    let with_record = |body: &[u8]| {
        let mut pl = payload(&p.to_snapshot()).to_vec();
        pl.push(1);
        pl.push(body.len() as u8);
        pl.extend_from_slice(body);
        err(&seal(1, 1, &pl))
    };
    let invalid = |what, value| SnapshotError::InvalidValue { what, value };
    for (body, want) in [
        (&[0][..], invalid("tokio ids count", 0)),
        (
            &[5, 0, 1, 1, 1, 2, 1, 3, 1, 0, 1],
            invalid("tokio ids count", 5),
        ),
        (&[2, 1, 1, 1, 1], invalid("tokio id entry", 1)),
        (&[1, 0, 0], invalid("tokio id", 0)),
        (
            &[1, 9, 1],
            SnapshotError::IndexOutOfRange {
                what: "tokio id entry",
                index: 9,
                len: 4,
            },
        ),
        (
            &[1, 0, 1, 7],
            SnapshotError::LengthMismatch {
                what: "tokio ids",
                declared: 4,
                actual: 3,
            },
        ),
        (
            &[3, 0, 1],
            SnapshotError::CountTooLarge {
                what: "tokio ids",
                count: 3,
                remaining: 2,
            },
        ),
    ] {
        assert_eq!(with_record(body).to_string(), want.to_string(), "{body:?}");
    }
}

#[test]
fn rejects_unknown_major_versions() {
    for major in [0, 2, u16::MAX] {
        let bytes = seal(major, 0, payload(&Profile::default().to_snapshot()));
        match err(&bytes) {
            SnapshotError::UnsupportedVersion { major: m, minor: 0 } => assert_eq!(m, major),
            e => panic!("{e}"),
        }
    }
}

#[test]
fn reads_newer_minors_skipping_their_extensions() {
    let p = sample_profile();
    let mut ext = payload(&p.to_snapshot()).to_vec();
    ext.extend_from_slice(&[2, 2, 0xaa, 0xbb, 3, 0]);
    assert_same(&p, &Profile::from_snapshot(&seal(1, 3, &ext)).unwrap());
    let p = sample_profile_1_0();
    let rejected = |minor: u16, records: &[u8]| {
        let mut ext = payload(&p.to_snapshot()).to_vec();
        ext.extend_from_slice(records);
        err(&seal(1, minor, &ext))
    };
    // Records of a minor the header does not reach, out of order, or
    // of minor 0.
    for (minor, records) in [
        (0, &[1, 0][..]),
        (2, &[3, 0]),
        (3, &[2, 0, 1, 0]),
        (3, &[0, 0]),
    ] {
        assert!(
            matches!(
                rejected(minor, records),
                SnapshotError::InvalidValue {
                    what: "extension minor",
                    ..
                }
            ),
            "{minor} {records:?}"
        );
    }
    assert!(matches!(
        rejected(1, &[1, 5, 0]),
        SnapshotError::Truncated {
            what: "extension body",
            needed: 5,
            available: 1
        }
    ));
}

#[test]
fn truncation_at_every_length_is_an_error() {
    let bytes = sample_profile().to_snapshot();
    let payload_len = (bytes.len() - HEADER_LEN) as u64;
    for len in 0..bytes.len() {
        let expected = if len < HEADER_LEN {
            ("header", HEADER_LEN as u64, len as u64)
        } else {
            ("payload", payload_len, (len - HEADER_LEN) as u64)
        };
        match err(&bytes[..len]) {
            SnapshotError::Truncated {
                what,
                needed,
                available,
            } => assert_eq!((what, needed, available), expected),
            e => panic!("length {len}: {e}"),
        }
    }
}

#[test]
fn every_single_bit_flip_is_rejected() {
    let bytes = sample_profile().to_snapshot();
    for i in 0..bytes.len() {
        for bit in 0..8 {
            let mut b = bytes.clone();
            b[i] ^= 1 << bit;
            let e = err(&b);
            let expected = match i {
                0..8 => matches!(e, SnapshotError::BadMagic),
                8..10 => matches!(e, SnapshotError::UnsupportedVersion { .. }),
                12..20 => matches!(
                    e,
                    SnapshotError::PayloadTooLarge { .. }
                        | SnapshotError::Truncated {
                            what: "payload",
                            ..
                        }
                        | SnapshotError::TrailingBytes { .. }
                ),
                // The minor, the checksum itself, and the payload.
                _ => matches!(e, SnapshotError::ChecksumMismatch { .. }),
            };
            assert!(expected, "byte {i} bit {bit}: {e}");
        }
    }
}

#[test]
fn rejects_trailing_bytes() {
    let mut bytes = sample_profile().to_snapshot();
    bytes.extend_from_slice(&[0, 0, 0]);
    assert!(matches!(
        err(&bytes),
        SnapshotError::TrailingBytes { count: 3 }
    ));
}

#[test]
fn rejects_a_payload_above_the_limit_before_reading_it() {
    let mut bytes = Profile::default().to_snapshot();
    bytes[12..20].copy_from_slice(&(MAX_SNAPSHOT_PAYLOAD + 1).to_le_bytes());
    assert!(matches!(
        err(&bytes),
        SnapshotError::PayloadTooLarge { length, .. } if length == MAX_SNAPSHOT_PAYLOAD + 1
    ));
}

#[test]
fn huge_counts_with_a_tiny_body_are_refused_before_allocating() {
    for count in [u64::MAX, 1 << 40, 2] {
        let bytes = crafted(|c| {
            c.varint(count);
            c.varint(0);
        });
        assert!(
            matches!(
                err(&bytes),
                SnapshotError::CountTooLarge { what: "strings", count: c, remaining: 1 } if c == count
            ),
            "{count}"
        );
    }
    // Entries take at least 8 bytes each.
    let bytes = crafted(|c| {
        encode_tables(&Profile::default(), c);
        c.0.pop(); // the entry count
        c.varint(1);
        c.0.extend_from_slice(&[0; 7]);
    });
    assert!(matches!(
        err(&bytes),
        SnapshotError::CountTooLarge {
            what: "entries",
            count: 1,
            remaining: 7
        }
    ));
    // Distinct items: 200 strings need at least 129 + 3 * 71 = 342
    // bytes (only 129 strings are shorter than 3 bytes).
    let bytes = crafted(|c| {
        c.varint(200);
        c.0.resize(c.0.len() + 300, 0);
    });
    assert!(matches!(
        err(&bytes),
        SnapshotError::CountTooLarge {
            what: "strings",
            count: 200,
            remaining: 300
        }
    ));
    let bytes = crafted(|c| {
        c.varint(1);
        c.varint(1 << 40);
    });
    assert!(matches!(
        err(&bytes),
        SnapshotError::Truncated {
            what: "string",
            needed: 0x100_0000_0000,
            available: 0
        }
    ));
    let mut p = sample_profile_1_0();
    p.mismatches[0].live = vec![String::new(); 3];
    let mut bytes = p.to_snapshot();
    // The mismatch is last: `live` count 3, three empty strings, then
    // `published` count 0. Claim 100 strings instead.
    let tail = bytes.len() - 5;
    assert_eq!(bytes[tail..], [3, 0, 0, 0, 0]);
    bytes[tail] = 100;
    let bytes = seal(1, 0, payload(&bytes));
    assert!(matches!(
        err(&bytes),
        SnapshotError::CountTooLarge {
            what: "mismatch live",
            count: 100,
            remaining: 4
        }
    ));
}

#[test]
fn rejects_more_items_than_a_profile_holds() {
    // Counts the bytes could hold (distinct strings and stacks take 3
    // bytes each), but more than any profile has.
    let too_many = |rest: &dyn Fn(&mut Writer)| match err(&crafted(rest)) {
        SnapshotError::TooManyItems { what, count, max } => (what, count, max),
        e => panic!("{e}"),
    };
    let n = MAX_ITEMS + 1;
    let strings = too_many(&|c| {
        c.varint(n);
        c.0.resize(c.0.len() + 3 * n as usize, 0);
    });
    assert_eq!(strings, ("strings", n, MAX_ITEMS));
    // The limit is on all tables together.
    let stacks = too_many(&|c| {
        c.0.extend_from_slice(&[1, 0, 0, 0]); // strings [""], no modules or frames
        c.varint(MAX_ITEMS);
        c.0.resize(c.0.len() + 3 * MAX_ITEMS as usize, 0);
    });
    assert_eq!(stacks, ("stacks", n, MAX_ITEMS));
    // Mismatch strings too: one list may hold as many frames as a
    // published stack, and no more.
    let mismatch = |live: u64| {
        crafted(|c| {
            c.0.extend_from_slice(&[1, 0, 0, 0, 0, 0]); // strings [""], empty tables
            c.0.extend_from_slice(&[1, 7]); // one mismatch, of task 7
            c.varint(live);
            c.0.resize(c.0.len() + live as usize, 0);
            c.varint(0);
        })
    };
    let cap = STACK_CAPACITY as u64;
    let p = Profile::from_snapshot(&mismatch(cap)).unwrap();
    assert_eq!(p.mismatches()[0].live.len(), STACK_CAPACITY);
    assert_eq!(p.memory_bytes(), p.measure());
    assert!(p.memory_bytes() >= STACK_CAPACITY * std::mem::size_of::<String>());
    assert!(matches!(
        err(&mismatch(cap + 1)),
        SnapshotError::TooManyItems {
            what: "mismatch live",
            count,
            max,
        } if count == cap + 1 && max == cap
    ));
    let n = MAX_STACK_FRAMES + 1;
    let frames = too_many(&|c| {
        c.0.extend_from_slice(&[1, 0, 0, 0, 1]); // one stack
        c.varint(n);
        c.0.resize(c.0.len() + n as usize, 0);
    });
    assert_eq!(frames, ("stack frames", n, MAX_STACK_FRAMES));
}

#[test]
fn rejects_out_of_range_ids() {
    let cases: [(&str, Damage); 8] = [
        ("entry group", |p| p.entries[0].group = 1000),
        ("entry task_name", |p| p.entries[0].task_name = 1000),
        ("entry stack", |p| p.entries[0].stack = 1000),
        ("stack frame", |p| p.stacks.items[0] = Box::new([0, 1000])),
        ("module path", |p| p.modules.items[0].path = 1000),
        ("async frame function", |p| {
            p.frames.items[0] = Frame::Async {
                function: 1000,
                file: 0,
                line: 1,
                column: 1,
            }
        }),
        ("async frame file", |p| {
            p.frames.items[0] = Frame::Async {
                function: 0,
                file: 1000,
                line: 1,
                column: 1,
            }
        }),
        ("native frame module", |p| {
            p.frames.items[0] = Frame::Native {
                module: 1000,
                offset: 0,
                call: false,
            }
        }),
    ];
    for (field, damage) in cases {
        match damaged(damage) {
            SnapshotError::IndexOutOfRange {
                what,
                index: 1000,
                len,
            } => {
                assert_eq!(what, field);
                assert!(len < 1000);
            }
            e => panic!("{field}: {e}"),
        }
    }
}

#[test]
fn rejects_duplicate_items() {
    let cases: [(&str, Damage); 5] = [
        ("strings", |p| p.strings.items.push("server".into())),
        ("modules", |p| {
            p.modules.items.push(p.modules.items[0].clone())
        }),
        ("frames", |p| p.frames.items.push(p.frames.items[0])),
        ("stacks", |p| p.stacks.items.push(p.stacks.items[0].clone())),
        ("entries", |p| {
            let mut e = p.entries[0];
            e.weights = w(1);
            p.entries.push(e);
        }),
    ];
    for (table, damage) in cases {
        match damaged(damage) {
            SnapshotError::Duplicate { what } => assert_eq!(what, table),
            e => panic!("{table}: {e}"),
        }
    }
}

#[test]
fn rejects_invalid_values() {
    let cases: [(&str, u64, Damage); 5] = [
        ("budget", 1, |p| p.budget = 1),
        ("budget", (MAX_BUDGET + 1) as u64, |p| {
            p.budget = MAX_BUDGET + 1
        }),
        ("string 0 length", 1, |p| p.strings.items[0] = "x".into()),
        ("strings count", 0, |p| p.strings.items.clear()),
        ("mismatches count", 9, |p| {
            p.mismatches = vec![p.mismatches[0].clone(); MAX_MISMATCHES + 1]
        }),
    ];
    for (field, v, damage) in cases {
        match damaged(damage) {
            SnapshotError::InvalidValue { what, value } => {
                assert_eq!((what, value), (field, v))
            }
            e => panic!("{field}: {e}"),
        }
    }
    let invalid = |bytes: &[u8]| match err(bytes) {
        SnapshotError::InvalidValue { what, value } => (what, value),
        e => panic!("{e}"),
    };
    let mut meta = Writer::default();
    meta.varint(1 << 32);
    let frequency = with_core(&meta.0);
    assert_eq!(invalid(&frequency), ("frequency_hz", 1 << 32));
    let mut meta = Writer::default();
    meta.varint(99);
    meta.varint(2);
    assert_eq!(invalid(&with_core(&meta.0)), ("grouping", 2));
    // Tables: strings [""], one module, then `frame`, one empty stack,
    // one entry in `state`.
    let tables = |frame: &[u8], state: u8| {
        crafted(|c| {
            c.0.extend_from_slice(&[1, 0]);
            c.0.extend_from_slice(&[1, 0, 0]);
            c.varint(1);
            c.0.extend_from_slice(frame);
            c.0.extend_from_slice(&[1, 0]);
            c.0.extend_from_slice(&[1, 0, 0, 0, state, 0, 0, 0, 0]);
            encode_mismatches(&[], c);
        })
    };
    let one_frame = |frame: &[u8]| tables(frame, 0);
    let one_entry = |state: u8| tables(&[2], state);
    assert!(Profile::from_snapshot(&one_frame(&[1, 0, 7, 1])).is_ok());
    assert_eq!(invalid(&one_frame(&[3])), ("frame tag", 3));
    assert_eq!(invalid(&one_frame(&[1, 0, 0, 2])), ("native frame call", 2));
    assert!(Profile::from_snapshot(&one_entry(1)).is_ok());
    assert_eq!(invalid(&one_entry(2)), ("entry state", 2));
}

#[test]
fn rejects_invalid_utf8() {
    let mut p = sample_profile();
    p.add("MARKER", 1, "", SampleState::OnCpu, &[], w(1));
    let bytes = p.to_snapshot();
    let mut pl = payload(&bytes).to_vec();
    let at = pl.windows(6).position(|s| s == b"MARKER").unwrap();
    pl[at] = 0xff;
    assert!(matches!(
        err(&seal(1, 0, &pl)),
        SnapshotError::InvalidUtf8 { what: "string" }
    ));
}

#[test]
fn rejects_non_canonical_varints() {
    let bytes = Profile::default().to_snapshot();
    let pl = payload(&bytes);
    assert!(pl[0] < 0x80, "the empty core's length takes one byte");
    // The same core length, padded to two bytes.
    let mut padded = vec![pl[0] | 0x80, 0];
    padded.extend_from_slice(&pl[1..]);
    assert!(matches!(
        err(&seal(1, 0, &padded)),
        SnapshotError::BadVarint { what: "core_len" }
    ));
    let too_long = [0xff; 11];
    assert!(matches!(
        err(&seal(1, 0, &too_long)),
        SnapshotError::BadVarint { what: "core_len" }
    ));
    let mut max = Writer::default();
    max.varint(u64::MAX);
    assert_eq!(max.0.len(), 10);
    let mut r = Reader::new(&max.0);
    assert_eq!(r.varint("test").unwrap(), u64::MAX);
}

#[test]
fn core_length_must_match_its_contents() {
    let bytes = Profile::default().to_snapshot();
    let core = &payload(&bytes)[1..];
    let mut longer = Writer::default();
    longer.varint(core.len() as u64 + 1);
    longer.0.extend_from_slice(core);
    longer.0.push(0);
    match err(&seal(1, 0, &longer.0)) {
        SnapshotError::LengthMismatch {
            what: "core",
            declared,
            actual,
        } => assert_eq!(
            (declared, actual),
            (core.len() as u64 + 1, core.len() as u64)
        ),
        e => panic!("{e}"),
    }
    let mut shorter = Writer::default();
    shorter.varint(core.len() as u64 - 1);
    shorter.0.extend_from_slice(core);
    assert!(matches!(
        err(&seal(1, 0, &shorter.0)),
        SnapshotError::Truncated {
            what: "mismatches",
            ..
        }
    ));
}

#[test]
fn every_error_names_its_field() {
    let e = damaged(|p| p.entries[0].stack = 1000);
    assert_eq!(
        e.to_string(),
        "profile snapshot: entry stack 1000 is out of range (the table holds 4)"
    );
    let e = err(&[]);
    assert_eq!(
        e.to_string(),
        "profile snapshot: truncated in header: needs 24 bytes, 0 left"
    );
}

/// A profile of about 4 MiB (the default budget) saves and loads in
/// linear time: well under a second in an optimised build.
#[test]
fn a_full_default_budget_profile_round_trips_quickly() {
    let mut p = Profile::new(DEFAULT_BUDGET);
    let mut i = 0u32;
    while p.memory_bytes() < DEFAULT_BUDGET - 4096 && p.stats.cleared_stacks == 0 {
        let name = format!("myapp::module::function_{i}::{{{{closure}}}}");
        let frames = [
            FrameRef::Async {
                function: "app::main",
                file: "src/main.rs",
                line: 1,
                column: 1,
            },
            FrameRef::Async {
                function: &name,
                file: "src/module.rs",
                line: i,
                column: 9,
            },
        ];
        let group = format!("task{}", i % 64);
        p.add(&group, i.into(), &group, SampleState::OffCpu, &frames, w(1));
        i += 1;
    }
    assert!(
        p.memory_bytes() > DEFAULT_BUDGET / 4 * 3,
        "{}",
        p.memory_bytes()
    );
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("big.asprof");
    p.save(&path).unwrap();
    let q = Profile::load(&path).unwrap();
    assert_same(&p, &q);
    assert_budget_covers_the_limits(&p);
}

fn check_decodes_consistently(bytes: &[u8]) {
    if let Ok(p) = Profile::from_snapshot(bytes) {
        let again = p.to_snapshot();
        let q = Profile::from_snapshot(&again).expect("a re-encoded profile decodes");
        assert_eq!(q.to_snapshot(), again);
        assert_same(&p, &q);
    }
}

#[derive(Clone, Debug)]
enum Mutation {
    Flip(usize, u8),
    Set(usize, u8),
    Insert(usize, u8),
    Remove(usize),
    Truncate(usize),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        (any::<usize>(), 0u8..8).prop_map(|(i, b)| Mutation::Flip(i, b)),
        (any::<usize>(), any::<u8>()).prop_map(|(i, b)| Mutation::Set(i, b)),
        (any::<usize>(), any::<u8>()).prop_map(|(i, b)| Mutation::Insert(i, b)),
        any::<usize>().prop_map(Mutation::Remove),
        any::<usize>().prop_map(Mutation::Truncate),
    ]
}

fn mutate(bytes: &mut Vec<u8>, mutations: &[Mutation]) {
    for m in mutations {
        let len = bytes.len();
        match *m {
            Mutation::Insert(i, b) => bytes.insert(i % (len + 1), b),
            _ if len == 0 => {}
            Mutation::Flip(i, bit) => bytes[i % len] ^= 1 << bit,
            Mutation::Set(i, b) => bytes[i % len] = b,
            Mutation::Remove(i) => {
                bytes.remove(i % len);
            }
            Mutation::Truncate(i) => bytes.truncate(i % len),
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        check_decodes_consistently(&bytes);
    }

    /// Arbitrary payloads behind a valid header reach the decoder.
    #[test]
    fn arbitrary_payloads_never_panic(
        minor in 0u16..3,
        pl in proptest::collection::vec(any::<u8>(), 0..512),
    ) {
        check_decodes_consistently(&seal(SNAPSHOT_MAJOR, minor, &pl));
    }

    #[test]
    fn mutated_snapshots_never_panic(
        mutations in proptest::collection::vec(mutation(), 1..4),
    ) {
        let mut bytes = sample_profile().to_snapshot();
        mutate(&mut bytes, &mutations);
        check_decodes_consistently(&bytes);
    }

    /// Mutated payloads under a fixed-up length and checksum, so that
    /// the mutations reach the decoder rather than the checksum.
    #[test]
    fn resealed_mutations_never_panic(
        minor in 0u16..3,
        mutations in proptest::collection::vec(mutation(), 1..4),
    ) {
        let bytes = sample_profile().to_snapshot();
        let mut pl = payload(&bytes).to_vec();
        mutate(&mut pl, &mutations);
        check_decodes_consistently(&seal(SNAPSHOT_MAJOR, minor, &pl));
    }
}
