//! `mem_probe`, run as the `memory` bench runs it, on a small population:
//! every variant and depth succeeds and reports what its population holds.
//!
//! The probe itself fails unless the population passed its check (every
//! task parked; async-stack, async-backtrace and await-tree each see every
//! task, with one frame or node per level), so a success here means the
//! instrumentation really took hold in every variant.

use std::process::Command;

use benches::memory::{DEPTHS, ProbeReport, Variant};

/// Enough tasks for several batches, few enough for a debug build.
const TASKS: usize = 3000;

fn probe(variant: Variant, depth: usize) -> ProbeReport {
    let exe = std::path::Path::new(env!("CARGO_BIN_EXE_mem_probe"));
    ProbeReport::run(exe, variant, depth, TASKS).unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn every_variant_and_depth_reports_its_population() {
    for depth in DEPTHS {
        let reports = Variant::ALL.map(|v| (v, probe(v, depth)));
        let control = &reports[0].1;
        // One tokio task cell per task, and nothing else per task.
        assert!(
            (1.0..1.01).contains(&control.allocs_per_task),
            "{control:?}"
        );
        assert!(control.heap_bytes_per_task >= 128.0, "{control:?}");
        for (variant, report) in &reports {
            assert_eq!(
                (report.variant.as_str(), report.depth, report.tasks),
                (variant.name(), depth, TASKS)
            );
            assert!(report.rss_after > report.rss_before, "{report:?}");
            let expected = (report.rss_after - report.rss_before) as f64 / TASKS as f64;
            assert_eq!(report.bytes_per_task, expected);
            if *variant != Variant::Control {
                // Every library makes the future larger and holds more heap.
                assert!(report.future_bytes > control.future_bytes, "{report:?}");
                assert!(
                    report.heap_bytes_per_task > control.heap_bytes_per_task,
                    "{report:?}"
                );
            }
        }
    }
}

#[test]
fn bad_arguments_are_refused_with_usage() {
    for args in [
        &["nope", "3"][..],
        &["control", "4"],
        &["control", "3", "0"],
        &[],
    ] {
        let output = Command::new(env!("CARGO_BIN_EXE_mem_probe"))
            .args(args)
            .output()
            .expect("cannot run mem_probe");
        assert!(!output.status.success(), "{args:?}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains("usage: mem_probe"), "{args:?}: {stderr}");
        assert!(output.stdout.is_empty(), "{args:?}");
    }
}
