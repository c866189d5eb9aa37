//! Tests of every export format on a fixed, hand-made profile
//! ([`testing_profile`]), and on profiles the budget cleared.

use super::pprof::proto;
use crate::sampler::profile::{
    DEFAULT_BUDGET, FrameRef, MIN_BUDGET, Profile, SampleState, SampledTask, Stats, Weights,
};

/// The folded text of the fixture, exactly.
const FIXTURE_FOLDED: &str = "\
api;tour::serve at src/tour.rs:10:5;<[u8, 4] as tour::Codec>::decode at src/tour.rs:70:13 2
api;tour::serve at src/tour.rs:10:5;tour::fetch_row at src/tour.rs:31:22 9
api;tour::serve at src/tour.rs:12:9;tour::load_posts at src/tour.rs:50:9 3
api;tour::serve at src/tour.rs:12:9;tour::load_user at src/tour.rs:40:9 3
worker;tour::crunch at src/tour.rs:60:1;tour+0x1234 1
worker;tour::crunch at src/tour.rs:60:1;tour+0x1234;tour+0x5678 7
worker;tour::crunch at src/tour.rs:62:13 6
";

fn folded(p: &Profile) -> String {
    let mut out = Vec::new();
    p.write_folded(&mut out).unwrap();
    String::from_utf8(out).unwrap()
}

fn pprof(p: &Profile) -> proto::Profile {
    use prost::Message as _;
    let mut gz = Vec::new();
    p.write_pprof(&mut gz).unwrap();
    let mut bytes = Vec::new();
    std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(&gz[..]), &mut bytes).unwrap();
    proto::Profile::decode(&bytes[..]).unwrap()
}

#[test]
fn folded_lines_are_merged_sorted_and_escaped() {
    let p = testing_profile();
    assert_eq!(folded(&p), FIXTURE_FOLDED);
    let total: u64 = FIXTURE_FOLDED
        .lines()
        .map(|l| l.rsplit_once(' ').unwrap().1.parse::<u64>().unwrap())
        .sum();
    assert_eq!(total, p.totals().samples);
}

#[test]
fn folded_by_cpu_time_leaves_out_off_cpu_stacks() {
    let p = testing_profile();
    let mut out = Vec::new();
    p.write_folded_by(&mut out, |w| w.cpu_ns).unwrap();
    assert_eq!(
        String::from_utf8(out).unwrap(),
        "worker;tour::crunch at src/tour.rs:60:1;tour+0x1234 10000000\n\
         worker;tour::crunch at src/tour.rs:60:1;tour+0x1234;tour+0x5678 70000000\n"
    );
}

#[test]
fn folded_labels_cannot_break_a_line() {
    let mut p = Profile::new(DEFAULT_BUDGET);
    let frames = [
        FrameRef::Async {
            function: "a;b\nc",
            file: "x.rs",
            line: 1,
            column: 0,
        },
        FrameRef::Async {
            function: "",
            file: "",
            line: 2,
            column: 0,
        },
    ];
    let w = Weights {
        samples: 1,
        ..Weights::default()
    };
    p.add("g\r\n", 1, "", SampleState::OffCpu, &frames, w);
    p.add(" ", 2, "", SampleState::OnCpu, &frames[1..], w);
    assert_eq!(folded(&p), "?;? at ?:2 1\ng;a,b c at x.rs:1;? at ?:2 1\n");
    p.add("", 3, "", SampleState::OnCpu, &[], w);
    assert_eq!(
        folded(&p),
        "? 1\n?;? at ?:2 1\ng;a,b c at x.rs:1;? at ?:2 1\n"
    );
}

#[test]
fn empty_profile_exports_nothing_but_headers() {
    let p = Profile::default();
    assert_eq!(folded(&p), "");
    let decoded = pprof(&p);
    assert!(decoded.sample.is_empty());
    assert_eq!(decoded.string_table[0], "");
    assert_eq!(decoded.period, 0);
}

#[test]
fn pprof_holds_every_sample_with_its_stack_and_labels() {
    let p = testing_profile();
    let d = pprof(&p);
    let s = |i: i64| d.string_table[i as usize].as_str();
    assert_eq!(d.string_table[0], "");
    let types: Vec<(&str, &str)> = d
        .sample_type
        .iter()
        .map(|t| (s(t.r#type), s(t.unit)))
        .collect();
    assert_eq!(
        types,
        [
            ("samples", "count"),
            ("wall", "nanoseconds"),
            ("cpu", "nanoseconds")
        ]
    );
    assert_eq!(s(d.default_sample_type), "samples");
    let period = d.period_type.as_ref().unwrap();
    assert_eq!((s(period.r#type), s(period.unit)), ("wall", "nanoseconds"));
    assert_eq!(d.period, 10_000_000);
    assert_eq!(d.duration_nanos, 2_000_000_000);
    assert_eq!(d.time_nanos, 1_700_000_000_000_000_000);
    let comments: Vec<&str> = d.comment.iter().map(|&c| s(c)).collect();
    assert_eq!(
        comments,
        [
            "async-stack stats: ticks=200 late_ticks=0 attempted=31 ok=31 retried=2 \
             dropped_torn=0 dropped_inconsistent=0 truncated=0 reservoir_skipped=0 \
             signals=8 signals_lost=0 mismatches=0 sampler_cpu_ns=0 handler_ns=0 \
             cleared_stacks=0 dropped_groups=0 dropped_samples=0 dropped_wall_ns=0 \
             dropped_cpu_ns=0",
            "async-stack grouping: task_name",
        ]
    );

    // Every sample: its stack (leaf first, one name per line of each
    // location), values and labels.
    let function = |id: u64| &d.function[id as usize - 1];
    let location = |id: u64| &d.location[id as usize - 1];
    let describe = |sample: &proto::Sample| {
        let mut frames = Vec::new();
        for &l in &sample.location_id {
            assert_eq!(location(l).id, l);
            for line in &location(l).line {
                let f = function(line.function_id);
                assert_eq!(f.id, line.function_id);
                frames.push(format!("{}:{}", s(f.name), line.line));
            }
        }
        let labels: Vec<String> = sample
            .label
            .iter()
            .map(|l| {
                if l.str != 0 {
                    format!("{}={}", s(l.key), s(l.str))
                } else {
                    format!("{}={}", s(l.key), l.num)
                }
            })
            .collect();
        (frames.join(" < "), sample.value.clone(), labels.join(","))
    };
    let got: Vec<_> = d.sample.iter().map(describe).collect();
    let ms = 1_000_000;
    let want = [
        (
            "tour::fetch_row:31 < tour::serve:10 < api:0",
            vec![5, 50 * ms, 0],
            "task_id=1,task_name=api,state=off-cpu",
        ),
        (
            "tour::fetch_row:31 < tour::serve:10 < api:0",
            vec![4, 40 * ms, 0],
            "task_id=2,task_name=api,state=off-cpu",
        ),
        (
            "tour::load_user:40 < tour::serve:12 < api:0",
            vec![3, 30 * ms, 0],
            "task_id=3,task_name=api,state=off-cpu",
        ),
        (
            "tour::load_posts:50 < tour::serve:12 < api:0",
            vec![3, 30 * ms, 0],
            "task_id=3,task_name=api,state=off-cpu",
        ),
        (
            "<[u8; 4] as tour::Codec>::decode:70 < tour::serve:10 < api:0",
            vec![2, 20 * ms, 0],
            "task_id=1,task_name=api,state=off-cpu",
        ),
        (
            "tour+0x5678:0 < tour+0x1234:0 < tour::crunch:60 < worker:0",
            vec![7, 70 * ms, 70 * ms],
            "task_id=4,tokio_task_id=34,state=on-cpu",
        ),
        (
            "tour+0x1234:0 < tour::crunch:60 < worker:0",
            vec![1, 10 * ms, 10 * ms],
            "task_id=4,tokio_task_id=34,state=on-cpu",
        ),
        (
            "tour::crunch:62 < worker:0",
            vec![6, 60 * ms, 0],
            "task_id=4,tokio_task_id=34,state=off-cpu",
        ),
    ];
    let want: Vec<_> = want
        .into_iter()
        .map(|(f, v, l)| (f.to_owned(), v, l.to_owned()))
        .collect();
    assert_eq!(got, want);
    let total: i64 = d.sample.iter().map(|s| s.value[0]).sum();
    assert_eq!(total as u64, p.totals().samples);

    // One location per distinct frame, plus one per group; functions
    // are shared by the locations of one function.
    assert_eq!(d.location.len(), 10 + 2);
    let names: Vec<&str> = d.function.iter().map(|f| s(f.name)).collect();
    assert_eq!(
        names,
        [
            "tour::serve",
            "tour::fetch_row",
            "tour::load_user",
            "tour::load_posts",
            "<[u8; 4] as tour::Codec>::decode",
            "tour::crunch",
            "tour+0x1234",
            "tour+0x5678",
            "api",
            "worker",
        ]
    );
    assert_eq!(s(d.function[0].filename), "src/tour.rs");

    // The native frames: in the module's mapping, at synthetic
    // addresses that keep their offsets.
    assert_eq!(d.mapping.len(), 1);
    let m = &d.mapping[0];
    assert_eq!((s(m.filename), s(m.build_id)), ("/usr/bin/tour", "abcd01"));
    assert!(m.has_functions && m.has_inline_frames);
    let native: Vec<u64> = d
        .location
        .iter()
        .filter(|l| l.mapping_id == m.id)
        .map(|l| l.address - m.memory_start)
        .collect();
    assert_eq!(native, [0x1234, 0x5678]);
    assert!(d.location.iter().all(|l| l.address < m.memory_limit));
}

#[test]
fn pprof_native_frame_has_a_line_per_inlined_function_innermost_first() {
    let p = testing_profile();
    let symbols = p.symbolize_frames();
    let d = pprof(&p);
    for (f, inlined) in symbols.iter().enumerate() {
        if inlined.is_empty() {
            continue;
        }
        // Locations of the frame table come first, in its order.
        let location = &d.location[f];
        let names: Vec<&str> = location
            .line
            .iter()
            .map(|l| d.string_table[d.function[l.function_id as usize - 1].name as usize].as_str())
            .collect();
        let want: Vec<&str> = inlined.iter().map(|s| s.function.as_str()).collect();
        assert_eq!(names, want);
    }
}

#[test]
fn json_follows_the_documented_schema() {
    let p = testing_profile();
    let mut out = Vec::new();
    p.write_json(&mut out).unwrap();
    assert_eq!(out.last(), Some(&b'\n'));
    let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(v["format"], "async-stack-profile");
    assert_eq!(v["version"], 1);
    assert_eq!(v["frequency_hz"], 100);
    assert_eq!(v["duration_ns"], 2_000_000_000u64);
    assert_eq!(v["start_unix_ns"], 1_700_000_000_000_000_000u64);
    assert_eq!(v["grouping"], "task_name");
    assert_eq!(v["stats"]["ticks"], 200);
    assert_eq!(v["stats"]["dropped"]["samples"], 0);
    assert_eq!(v["mismatches"], serde_json::json!([]));
    let stacks = v["stacks"].as_array().unwrap();
    assert_eq!(stacks.len(), 8);
    assert_eq!(
        stacks[0],
        serde_json::json!({
            "group": "api", "task_id": 1, "tokio_id": null, "task_name": "api",
            "state": "off_cpu",
            "weights": {"samples": 5, "wall_ns": 50_000_000u64, "cpu_ns": 0},
            "frames": [
                {"kind": "async", "function": "tour::serve", "file": "src/tour.rs",
                 "line": 10, "column": 5},
                {"kind": "async", "function": "tour::fetch_row", "file": "src/tour.rs",
                 "line": 31, "column": 22},
            ],
        })
    );
    assert_eq!(stacks[5]["state"], "on_cpu");
    assert_eq!(stacks[5]["task_name"], "");
    assert_eq!(stacks[5]["tokio_id"], 34);
    assert_eq!(
        stacks[5]["frames"][2],
        serde_json::json!({
            "kind": "native", "module": "/usr/bin/tour", "build_id": "abcd01",
            "offset": 0x5678, "call": false,
            "symbols": [{"function": "tour+0x5678", "file": null, "line": null}],
        })
    );
    let total: u64 = stacks
        .iter()
        .map(|s| s["weights"]["samples"].as_u64().unwrap())
        .sum();
    assert_eq!(total, p.totals().samples);
}

#[test]
fn cleared_stacks_export_as_one_frame() {
    // Enough distinct stacks for the smallest budget to clear some.
    let mut p = Profile::new(MIN_BUDGET);
    let names: Vec<String> = (0..4000).map(|i| format!("function_number_{i}")).collect();
    for (i, name) in names.iter().enumerate() {
        let frame = FrameRef::Async {
            function: name,
            file: "src/lib.rs",
            line: 1,
            column: 0,
        };
        let w = Weights {
            samples: 1 + i as u64 % 3,
            ..Weights::default()
        };
        p.add(
            ["g", "h"][i % 2],
            i as u64 + 1,
            "",
            SampleState::OffCpu,
            &[frame],
            w,
        );
    }
    assert!(p.stats().cleared_stacks > 0);
    let cleared = |group: &str| -> u64 {
        p.stacks()
            .filter(|s| s.group() == group && s.frames().eq([FrameRef::Cleared]))
            .map(|s| s.weights().samples)
            .sum()
    };
    let text = folded(&p);
    let count = |line: &str| text.lines().find_map(|l| l.strip_prefix(line));
    assert_eq!(count("g;[cleared] "), Some(&*cleared("g").to_string()));
    assert_eq!(count("h;[cleared] "), Some(&*cleared("h").to_string()));
    let total: u64 = text
        .lines()
        .map(|l| l.rsplit_once(' ').unwrap().1.parse::<u64>().unwrap())
        .sum();
    assert_eq!(total, p.totals().samples);

    let d = pprof(&p);
    let cleared_fn = d
        .function
        .iter()
        .find(|f| d.string_table[f.name as usize] == "[cleared]")
        .expect("a [cleared] function");
    let cleared_samples: i64 = d
        .sample
        .iter()
        .filter(|s| {
            let leaf = &d.location[s.location_id[0] as usize - 1];
            leaf.line[0].function_id == cleared_fn.id
        })
        .map(|s| s.value[0])
        .sum();
    assert_eq!(cleared_samples as u64, cleared("g") + cleared("h"));
}

#[cfg(feature = "flamegraph")]
#[test]
fn svg_shows_groups_and_frames() {
    let p = testing_profile();
    let mut out = Vec::new();
    p.write_svg(&mut out).unwrap();
    let svg = String::from_utf8(out).unwrap();
    assert!(svg.starts_with("<?xml"), "{svg}");
    assert!(svg.contains("async-stack profile"));
    for title in [
        "all (31 samples, 100%)",
        "worker (14 samples, 45.16%)",
        "api (17 samples, 54.84%)",
        "tour::fetch_row at src/tour.rs:31:22 (9 samples, 29.03%)",
        "&lt;[u8, 4] as tour::Codec&gt;::decode at src/tour.rs:70:13 (2 samples, 6.45%)",
    ] {
        assert!(svg.contains(&format!("<title>{title}</title>")), "{title}");
    }
}

/// A fixed, hand-made profile for tests of the export formats, which
/// cannot add samples themselves (the workspace's integration tests load
/// it saved, see [`the_fixture_file_is_the_fixture`]).
///
/// Two groups: `api`, with two tasks off-CPU at the same `.await`, a
/// `join!`-like pair of branches, and a function whose name holds a
/// `;`; and `worker`, a task filed under tokio task 34, on-CPU with two
/// native frames of `/usr/bin/tour`, and off-CPU. At 100 Hz for 2 s, 31
/// samples in all.
pub(super) fn testing_profile() -> Profile {
    let at = |function, line, column| FrameRef::Async {
        function,
        file: "src/tour.rs",
        line,
        column,
    };
    let native = |offset, call| FrameRef::Native {
        module: "/usr/bin/tour",
        build_id: &[0xab, 0xcd, 0x01],
        offset,
        call,
    };
    // A tick at 100 Hz is 10 ms of wall time; an on-CPU sample is as
    // much CPU time.
    let off = |samples| Weights {
        samples,
        wall_ns: samples * 10_000_000,
        cpu_ns: 0,
    };
    let on = |samples| Weights {
        samples,
        wall_ns: samples * 10_000_000,
        cpu_ns: samples * 10_000_000,
    };
    let serve = at("tour::serve", 10, 5);
    let fetch_row = at("tour::fetch_row", 31, 22);
    let serve_join = at("tour::serve", 12, 9);
    let crunch = at("tour::crunch", 60, 1);
    let mut p = Profile::new(DEFAULT_BUDGET);
    p.frequency_hz = 100;
    p.duration_ns = 2_000_000_000;
    p.start_unix_ns = 1_700_000_000_000_000_000;
    let (api, worker, state) = ("api", "worker", SampleState::OffCpu);
    let at_fetch_row = [serve, fetch_row];
    p.add(api, 1, api, state, &at_fetch_row, off(5));
    p.add(api, 2, api, state, &at_fetch_row, off(4));
    let load_user = at("tour::load_user", 40, 9);
    let load_posts = at("tour::load_posts", 50, 9);
    p.add(api, 3, api, state, &[serve_join, load_user], off(3));
    p.add(api, 3, api, state, &[serve_join, load_posts], off(3));
    let decode = at("<[u8; 4] as tour::Codec>::decode", 70, 13);
    p.add(api, 1, api, state, &[serve, decode], off(2));
    let on_cpu = [crunch, native(0x1234, true), native(0x5678, false)];
    let task = SampledTask {
        id: 4,
        tokio_id: 34,
        name: "",
    };
    p.add_task(worker, task, SampleState::OnCpu, &on_cpu, on(7));
    p.add_task(worker, task, SampleState::OnCpu, &on_cpu[..2], on(1));
    let waiting = at("tour::crunch", 62, 13);
    p.add_task(worker, task, state, &[waiting], off(6));
    p.stats = Stats {
        ticks: 200,
        attempted: 31,
        ok: 31,
        retried: 2,
        signals: 8,
        ..Stats::default()
    };
    p
}

/// The saved fixture the workspace's integration tests load
/// (`tests/tests/sampler_export.rs`, through the public API): the fixture
/// profile, byte for byte. Rewrite it after changing the fixture with
/// `ASYNC_STACK_BLESS=1`.
#[test]
fn the_fixture_file_is_the_fixture() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/src/sampler/export/fixture.asprof"
    );
    let bytes = testing_profile().to_snapshot();
    if std::env::var_os("ASYNC_STACK_BLESS").is_some() {
        std::fs::write(path, &bytes).unwrap();
    }
    assert_eq!(std::fs::read(path).unwrap(), bytes, "{path}");
    let loaded = Profile::load(path).unwrap();
    assert_eq!(loaded.to_snapshot(), bytes);
    assert_eq!(folded(&loaded), FIXTURE_FOLDED);
}

/// A body that line tables name short, right above its fn's async frame,
/// takes the name full debug info gives it; other names stay.
#[test]
fn a_short_named_body_takes_its_full_name() {
    use crate::read::native::elf::NativeSymbol;
    let symbol = |function: &str, file: Option<&str>| NativeSymbol {
        function: function.to_owned(),
        file: file.map(str::to_owned),
        line: Some(20),
    };
    let names = |function: &str, symbols: &[NativeSymbol]| {
        let mut symbols = symbols.to_vec();
        super::name_body(function, &mut symbols);
        symbols.into_iter().map(|s| s.function).collect::<Vec<_>>()
    };
    let inlined = [
        symbol("black_box<u64>", Some("/rustc/core/src/hint.rs")),
        symbol("{async_block#0}", Some("src/app.rs")),
    ];
    assert_eq!(
        names("app::leaf", &inlined),
        ["black_box<u64>", "app::leaf::{{closure}}"]
    );
    assert_eq!(
        names("<app::X as app::T>::run", &inlined[1..]),
        ["<app::X as app::T>::run::{{closure}}"]
    );
    // Full debug info, or the symbol table, named it already.
    let named = [symbol("app::leaf::{{closure}}", Some("src/app.rs"))];
    assert_eq!(names("app::leaf", &named), ["app::leaf::{{closure}}"]);
    // The body's own code is not the outermost function: the leaf calls it.
    let helper = [
        symbol("{async_block#0}", Some("src/app.rs")),
        symbol("app::helper", None),
    ];
    assert_eq!(
        names("app::leaf", &helper),
        ["{async_block#0}", "app::helper"]
    );
    // No path to name it by.
    for function in ["<future at src/app.rs:3:9>", "adder"] {
        assert_eq!(names(function, &inlined[1..]), ["{async_block#0}"]);
    }
    // Not from debug info.
    assert_eq!(
        names("app::leaf", &[symbol("{async_block#0}", None)]),
        ["{async_block#0}"]
    );
}
