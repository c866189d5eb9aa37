//! Reading, checking and writing workload files: round trips, every bound's
//! error text, malformed JSON, file errors, and mutations that must never
//! panic.

use proptest::prelude::*;

use super::{Consumer, Group, Independent, Producer, Workload, WorkloadError};

/// A workload with every kind of entry: a fan-out group, a request/response
/// pair and an independent task.
fn sample() -> Workload {
    Workload {
        version: 1,
        duration_ms: 2000,
        groups: vec![
            Group {
                name: "ingest".into(),
                producer: Producer {
                    name: "reader".into(),
                    busy_us_per_cycle: 200,
                    sleep_us_per_cycle: 5000,
                    fan_out: 3,
                    waits_for_replies: false,
                },
                consumers: vec![
                    Consumer {
                        name: "parser".into(),
                        instances: 3,
                        busy_us_per_wake: 800,
                    },
                    Consumer {
                        name: "indexer".into(),
                        instances: 2,
                        busy_us_per_wake: 100,
                    },
                ],
            },
            Group {
                name: "rpc".into(),
                producer: Producer {
                    name: "client".into(),
                    busy_us_per_cycle: 100,
                    sleep_us_per_cycle: 0,
                    fan_out: 1,
                    waits_for_replies: true,
                },
                consumers: vec![Consumer {
                    name: "server".into(),
                    instances: 1,
                    busy_us_per_wake: 300,
                }],
            },
        ],
        independent: vec![Independent {
            name: "heartbeat".into(),
            instances: 1,
            busy_us_per_wake: 50,
            period_us: 10_000,
        }],
    }
}

fn error_of(w: &Workload) -> String {
    // Through the text, so that `from_json` is shown to validate.
    match Workload::from_json(&w.to_json()) {
        Ok(_) => panic!("accepted: {}", w.to_json()),
        Err(e) => e.to_string(),
    }
}

fn json_error(json: &str) -> WorkloadError {
    match Workload::from_json(json) {
        Ok(w) => panic!("accepted: {w:?}"),
        Err(e) => e,
    }
}

#[test]
fn full_file_round_trips() {
    let w = sample();
    assert_eq!(w.validate().map_err(|e| e.to_string()), Ok(()));
    let json = w.to_json();
    assert_eq!(Workload::from_json(&json).unwrap(), w);
    // Pretty-printed, field order as declared.
    assert!(json.starts_with("{\n  \"version\": 1,\n  \"duration_ms\": 2000,\n  \"groups\": ["));
}

#[test]
fn save_then_load_round_trips() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("w.json");
    sample().save(&path).unwrap();
    assert_eq!(Workload::load(&path).unwrap(), sample());
    // Saving over an existing file replaces it whole.
    let mut other = sample();
    other.duration_ms = 7;
    other.save(&path).unwrap();
    assert_eq!(Workload::load(&path).unwrap(), other);
    // Only the file itself is left: the temporary file was renamed.
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
}

#[test]
fn save_refuses_an_invalid_workload_and_keeps_the_old_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("w.json");
    sample().save(&path).unwrap();
    let mut bad = sample();
    bad.version = 2;
    assert_eq!(
        bad.save(&path).unwrap_err().to_string(),
        "version: must be 1, got 2"
    );
    assert_eq!(Workload::load(&path).unwrap(), sample());
}

/// Every bound, at the first value past it, with its exact message.
#[test]
fn each_bound_names_its_field() {
    type Edit = fn(&mut Workload);
    let cases: &[(Edit, &str)] = &[
        (|w| w.version = 0, "version: must be 1, got 0"),
        (
            |w| w.duration_ms = 0,
            "duration_ms: must be between 1 and 3600000, got 0",
        ),
        (
            |w| w.duration_ms = 3_600_001,
            "duration_ms: must be between 1 and 3600000, got 3600001",
        ),
        (
            |w| w.groups[1].name.clear(),
            "groups[1].name: must not be empty",
        ),
        (
            |w| w.groups[0].producer.name.clear(),
            "groups[0].producer.name: must not be empty",
        ),
        (
            |w| w.groups[0].producer.name = "x".repeat(129),
            "groups[0].producer.name: must be at most 128 bytes long, got 129",
        ),
        (
            |w| w.groups[0].consumers[1].name = "a\nb".into(),
            "groups[0].consumers[1].name: must not contain control characters, got \"a\\nb\"",
        ),
        (
            |w| w.groups[0].consumers[1].name = "reader".into(),
            "groups[0].consumers[1].name: \"reader\" is already the name of groups[0].producer",
        ),
        (
            |w| w.groups[1].producer.name = "parser".into(),
            "groups[1].producer.name: \"parser\" is already the name of groups[0].consumers[0]",
        ),
        (
            |w| w.independent[0].name = "server".into(),
            "independent[0].name: \"server\" is already the name of groups[1].consumers[0]",
        ),
        (
            |w| w.groups[0].consumers[1].instances = 0,
            "groups[0].consumers[1].instances: must be between 1 and 10000, got 0",
        ),
        (
            |w| w.independent[0].instances = 10_001,
            "independent[0].instances: must be between 1 and 10000, got 10001",
        ),
        (
            |w| w.groups[0].producer.busy_us_per_cycle = 60_000_001,
            "groups[0].producer.busy_us_per_cycle: must be at most 60000000 (60 s), got 60000001",
        ),
        (
            |w| w.groups[0].producer.sleep_us_per_cycle = u64::MAX,
            "groups[0].producer.sleep_us_per_cycle: must be at most 60000000 (60 s), \
             got 18446744073709551615",
        ),
        (
            |w| w.groups[1].consumers[0].busy_us_per_wake = 60_000_001,
            "groups[1].consumers[0].busy_us_per_wake: must be at most 60000000 (60 s), got 60000001",
        ),
        (
            |w| w.independent[0].busy_us_per_wake = 60_000_001,
            "independent[0].busy_us_per_wake: must be at most 60000000 (60 s), got 60000001",
        ),
        (
            |w| w.independent[0].period_us = 999,
            "independent[0].period_us: must be between 1000 and 60000000, got 999",
        ),
        (
            |w| w.independent[0].period_us = 60_000_001,
            "independent[0].period_us: must be between 1000 and 60000000, got 60000001",
        ),
        (
            |w| w.groups[0].producer.fan_out = 0,
            "groups[0].producer.fan_out: must be between 1 and 100000, got 0",
        ),
        (
            |w| w.groups[0].producer.fan_out = 100_001,
            "groups[0].producer.fan_out: must be between 1 and 100000, got 100001",
        ),
        (
            |w| w.groups[0].producer.sleep_us_per_cycle = 0,
            "groups[0].producer.sleep_us_per_cycle: must be above 0 when waits_for_replies \
             is false: a producer that neither sleeps nor waits for replies would run its \
             cycles back to back and flood its consumers",
        ),
        (
            |w| w.groups[1].consumers.clear(),
            "groups[1].consumers: a group needs at least one consumer",
        ),
        (
            |w| {
                w.groups.clear();
                w.independent.clear();
            },
            "groups: a workload needs at least one group or independent entry",
        ),
    ];
    for (i, (edit, expected)) in cases.iter().enumerate() {
        let mut w = sample();
        edit(&mut w);
        assert_eq!(&error_of(&w), expected, "case {i}");
        assert_eq!(
            w.validate().unwrap_err().path(),
            expected.split(':').next().unwrap(),
            "case {i}"
        );
    }
}

/// The bounds themselves are accepted.
#[test]
fn values_at_the_bounds_are_accepted() {
    let mut w = sample();
    w.duration_ms = 3_600_000;
    w.groups[0].producer.name = "é".repeat(64); // 128 bytes
    w.groups[0].producer.busy_us_per_cycle = 60_000_000;
    w.groups[0].producer.sleep_us_per_cycle = 60_000_000;
    w.groups[0].producer.fan_out = 100_000;
    w.groups[0].consumers[0].instances = 10_000;
    w.groups[0].consumers[0].busy_us_per_wake = 0;
    w.independent[0].period_us = 1_000;
    assert_eq!(Workload::from_json(&w.to_json()).unwrap(), w);
}

#[test]
fn total_tasks_are_bounded() {
    let mut w = sample();
    // 1 + 3 + 2 + 1 + 1 + 1 = 9 tasks in the sample; 9 more entries of
    // 10,000 bring it to 90,009; the tenth goes past 100,000.
    for i in 0..10 {
        w.independent.push(Independent {
            name: format!("bulk{i}"),
            instances: 10_000,
            busy_us_per_wake: 0,
            period_us: 1_000,
        });
    }
    assert_eq!(
        error_of(&w),
        "independent[10].instances: brings the workload to 100009 tasks, more than the \
         100000 allowed"
    );
    w.independent[10].instances = 9_991; // exactly 100,000
    assert!(w.validate().is_ok());
}

#[test]
fn unknown_fields_are_rejected() {
    let mut v: serde_json::Value = serde_json::from_str(&sample().to_json()).unwrap();
    v["groups"][0]["consumers"][1]["priority"] = 3.into();
    let e = json_error(&v.to_string());
    assert_eq!(e.path(), "groups[0].consumers[1].priority");
    assert!(
        e.to_string().starts_with(
            "groups[0].consumers[1].priority: unknown field `priority`, expected one of \
             `name`, `instances`, `busy_us_per_wake`"
        ),
        "{e}"
    );
    assert!(e.line_column().is_some());

    let e = json_error(&sample().to_json().replacen('{', "{\"extra\": 1,", 1));
    assert_eq!(e.path(), "extra");
}

#[test]
fn wrong_types_are_rejected() {
    let mut v: serde_json::Value = serde_json::from_str(&sample().to_json()).unwrap();
    v["groups"][1]["producer"]["waits_for_replies"] = "yes".into();
    let e = json_error(&v.to_string());
    assert_eq!(e.path(), "groups[1].producer.waits_for_replies");
    assert!(
        e.to_string().starts_with(
            "groups[1].producer.waits_for_replies: invalid type: string \"yes\", expected a boolean"
        ),
        "{e}"
    );

    let mut v: serde_json::Value = serde_json::from_str(&sample().to_json()).unwrap();
    v["independent"][0]["instances"] = (-1).into();
    let e = json_error(&v.to_string());
    assert_eq!(e.path(), "independent[0].instances");
    assert!(
        e.to_string()
            .contains("invalid value: integer `-1`, expected u32"),
        "{e}"
    );

    let e = json_error("\"x\"");
    assert_eq!(e.path(), "");
    assert!(
        e.to_string()
            .starts_with("invalid type: string \"x\", expected struct Workload"),
        "{e}"
    );
}

#[test]
fn missing_fields_are_rejected() {
    let mut v: serde_json::Value = serde_json::from_str(&sample().to_json()).unwrap();
    v["groups"][0]["producer"]
        .as_object_mut()
        .unwrap()
        .remove("fan_out");
    let e = json_error(&v.to_string());
    assert_eq!(e.path(), "groups[0].producer");
    assert!(
        e.to_string()
            .starts_with("groups[0].producer: missing field `fan_out`"),
        "{e}"
    );

    let e = json_error(r#"{"version": 1, "duration_ms": 10, "groups": []}"#);
    assert_eq!(e.path(), "");
    assert!(
        e.to_string().starts_with("missing field `independent`"),
        "{e}"
    );
}

#[test]
fn truncated_json_is_rejected_with_a_position() {
    let json = sample().to_json();
    for len in [1, json.len() / 3, json.len() / 2, json.len() - 1] {
        let e = json_error(&json[..len]);
        let (line, column) = e.line_column().expect("a position");
        assert!(line >= 1, "{e}");
        assert!(
            e.to_string()
                .contains(&format!("line {line} column {column}")),
            "{e}"
        );
    }
    let e = json_error(&json[..json.len() / 2]);
    assert!(e.path().starts_with("groups["), "{e}");
}

#[test]
fn huge_numbers_are_rejected() {
    let mut v: serde_json::Value = serde_json::from_str(&sample().to_json()).unwrap();
    v["groups"][0]["producer"]["fan_out"] = 4_294_967_296u64.into();
    let e = json_error(&v.to_string());
    assert_eq!(e.path(), "groups[0].producer.fan_out");
    assert!(
        e.to_string()
            .contains("invalid value: integer `4294967296`, expected u32"),
        "{e}"
    );

    let json = sample().to_json().replace(
        "\"duration_ms\": 2000",
        "\"duration_ms\": 123456789012345678901234567890",
    );
    let e = json_error(&json);
    assert_eq!(e.path(), "duration_ms");
    assert!(e.to_string().contains("expected u64"), "{e}");

    let json = sample()
        .to_json()
        .replace("\"duration_ms\": 2000", "\"duration_ms\": 1e400");
    let e = json_error(&json);
    assert_eq!(e.path(), "duration_ms");
}

#[test]
fn empty_and_trailing_input_are_rejected() {
    let e = json_error("");
    assert_eq!(e.path(), "");
    assert_eq!(
        e.to_string(),
        "EOF while parsing a value at line 1 column 0"
    );
    assert_eq!(e.line_column(), Some((1, 0)));

    let e = json_error(&format!("{} x", sample().to_json()));
    assert_eq!(e.path(), "");
    assert!(
        e.to_string().starts_with("trailing characters at line"),
        "{e}"
    );
}

#[test]
fn deep_nesting_is_rejected_without_overflowing_the_stack() {
    let json = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
    let e = json_error(&json);
    assert!(!e.to_string().is_empty());
}

#[test]
fn load_refuses_non_utf8() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("w.json");
    let mut bytes = sample().to_json().into_bytes();
    bytes[20] = 0xff;
    std::fs::write(&path, &bytes).unwrap();
    let e = Workload::load(&path).unwrap_err();
    assert_eq!(e.path(), "");
    assert_eq!(
        e.to_string(),
        format!("{}: not UTF-8 (invalid byte at offset 20)", path.display())
    );
}

#[test]
fn load_refuses_oversized_files_before_reading_them() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("w.json");
    let f = std::fs::File::create(&path).unwrap();
    // A sparse file: its length is past the limit, its content all zeros
    // (which would be a parse error if it were read).
    f.set_len(Workload::MAX_FILE_BYTES + 1).unwrap();
    let e = Workload::load(&path).unwrap_err();
    assert_eq!(
        e.to_string(),
        format!(
            "{}: 4194305 bytes, more than the 4194304 a workload file may have",
            path.display()
        )
    );
    // At the limit, the file is read (and rejected for its content).
    f.set_len(Workload::MAX_FILE_BYTES).unwrap();
    let e = Workload::load(&path).unwrap_err();
    assert!(e.line_column().is_some(), "{e}");
}

#[cfg(unix)]
#[test]
fn load_stops_reading_files_of_unknown_length_past_the_limit() {
    // `/dev/zero` reports a length of 0 and never ends.
    let e = Workload::load("/dev/zero").unwrap_err();
    assert_eq!(
        e.to_string(),
        "/dev/zero: 4194305 bytes, more than the 4194304 a workload file may have"
    );
}

#[test]
fn load_names_a_missing_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("absent.json");
    let e = Workload::load(&path).unwrap_err();
    assert!(
        e.to_string()
            .starts_with(&format!("cannot open {}: ", path.display())),
        "{e}"
    );
    assert!(std::error::Error::source(&e).is_some());
}

#[test]
fn load_reports_content_errors_by_field() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("w.json");
    let mut w = sample();
    w.groups[0].consumers[1].instances = 0;
    std::fs::write(&path, w.to_json()).unwrap();
    assert_eq!(
        Workload::load(&path).unwrap_err().to_string(),
        "groups[0].consumers[1].instances: must be between 1 and 10000, got 0"
    );
}

/// A mutation of a valid file's text.
#[derive(Clone, Debug)]
enum Mutation {
    /// XOR a byte (at a position taken modulo the length) with a value.
    Flip(usize, u8),
    /// Cut the text at a position.
    Truncate(usize),
    /// Replace the n-th number (modulo how many there are) with this text.
    Number(usize, &'static str),
    /// Delete a range of bytes.
    Delete(usize, usize),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    let numbers = prop::sample::select(vec![
        "0",
        "1",
        "-1",
        "999",
        "1000",
        "10001",
        "4294967295",
        "4294967296",
        "18446744073709551615",
        "18446744073709551616",
        "99999999999999999999999999999",
        "1e400",
        "-0",
        "1.5",
        "null",
        "true",
        "\"7\"",
        "[]",
        "{}",
    ]);
    prop_oneof![
        (any::<usize>(), 1u8..=255).prop_map(|(i, x)| Mutation::Flip(i, x)),
        any::<usize>().prop_map(Mutation::Truncate),
        (any::<usize>(), numbers).prop_map(|(i, n)| Mutation::Number(i, n)),
        (any::<usize>(), 1usize..16).prop_map(|(i, n)| Mutation::Delete(i, n)),
    ]
}

fn apply(bytes: &mut Vec<u8>, m: &Mutation) {
    if bytes.is_empty() {
        return;
    }
    match *m {
        Mutation::Flip(i, x) => {
            let i = i % bytes.len();
            bytes[i] ^= x;
        }
        Mutation::Truncate(i) => bytes.truncate(i % bytes.len()),
        Mutation::Number(n, text) => {
            let mut spans = Vec::new();
            let mut i = 0;
            while i < bytes.len() {
                if bytes[i].is_ascii_digit() {
                    let start = i;
                    while i < bytes.len() && bytes[i].is_ascii_digit() {
                        i += 1;
                    }
                    spans.push(start..i);
                } else {
                    i += 1;
                }
            }
            if !spans.is_empty() {
                let span = spans[n % spans.len()].clone();
                bytes.splice(span, text.bytes());
            }
        }
        Mutation::Delete(i, n) => {
            let start = i % bytes.len();
            let end = (start + n).min(bytes.len());
            bytes.drain(start..end);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// Mutated files never panic, and every error says where it is: a
    /// field's path, or the parser's position.
    #[test]
    fn mutated_files_never_panic(mutations in prop::collection::vec(mutation(), 1..4)) {
        let mut bytes = sample().to_json().into_bytes();
        for m in &mutations {
            apply(&mut bytes, m);
        }
        let Ok(text) = String::from_utf8(bytes) else {
            return Ok(());
        };
        if let Err(e) = Workload::from_json(&text) {
            let shown = e.to_string();
            prop_assert!(!shown.is_empty());
            prop_assert!(
                !e.path().is_empty() || e.line_column().is_some(),
                "neither a path nor a position: {}", shown
            );
            if !e.path().is_empty() {
                prop_assert!(shown.starts_with(&format!("{}: ", e.path())), "{}", shown);
            }
        }
    }

    /// The same, through `load` (so non-UTF-8 mutations are covered too):
    /// an error never panics and is never empty.
    #[test]
    fn mutated_files_never_panic_through_load(mutations in prop::collection::vec(mutation(), 1..3)) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("w.json");
        let mut bytes = sample().to_json().into_bytes();
        for m in &mutations {
            apply(&mut bytes, m);
        }
        std::fs::write(&path, &bytes).unwrap();
        if let Err(e) = Workload::load(&path) {
            prop_assert!(!e.to_string().is_empty());
        }
    }
}

#[test]
fn load_refuses_an_empty_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("w.json");
    std::fs::write(&path, "").unwrap();
    let e = Workload::load(&path).unwrap_err();
    assert_eq!(
        e.to_string(),
        "EOF while parsing a value at line 1 column 0"
    );
    assert_eq!(e.line_column(), Some((1, 0)));
}

/// The sample the README and the replay example cite is valid, and holds
/// one entry of each kind.
#[test]
fn the_sample_workload_file_is_valid() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../examples/workloads/pairs.json"
    );
    let w = Workload::load(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    assert!(w.groups.iter().any(|g| !g.producer.waits_for_replies));
    assert!(w.groups.iter().any(|g| g.producer.waits_for_replies));
    assert!(!w.independent.is_empty());
}
