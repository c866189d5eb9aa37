//! The memory table, in markdown: printed by the `memory` bench from its
//! probes' reports, and by `summary` from criterion's estimates.
//!
//! One row per depth and variant: resident bytes per live task, bytes added
//! over the control, and `× control`; with the probes' details, also the
//! spread of the probes, the size of the future tokio stores, and the heap
//! bytes and blocks per task. Then, per depth, the ratios of what
//! async-stack adds to what each peer adds, and the target.

use std::fmt::Write as _;

use super::{DEPTHS, Variant};

/// Largest acceptable ratio of the bytes async-stack adds per task to the
/// bytes async-backtrace adds, at [`TARGET_DEPTH`]. Issue 9 asked for
/// 0.75; issue 20 accepted 0.96 (the never-freed, lock-free-readable
/// record is worth its bytes: see BENCHMARKS.md, "Why 0.75× is out of
/// reach at depth 3") and set the target to no more than the peer's.
pub const TARGET_RATIO_VS_ASYNC_BACKTRACE: f64 = 1.0;

/// The depth the target applies to.
pub const TARGET_DEPTH: usize = 3;

/// What the table shows of one variant at one depth.
#[derive(Debug, Clone, Copy, Default)]
pub struct Figures {
    /// Resident bytes per live task; `None` when not measured.
    pub bytes_per_task: Option<f64>,
    /// The probes' details, when the table is built from their reports.
    pub detail: Option<Detail>,
}

/// What only the probes' reports know.
#[derive(Debug, Clone, Copy)]
pub struct Detail {
    /// The lowest and highest resident bytes per task over the probes.
    pub min_max: (f64, f64),
    /// How many probes ran.
    pub probes: usize,
    /// `size_of` the future handed to `tokio::spawn`.
    pub future_bytes: usize,
    /// Heap bytes held per task (median).
    pub heap_bytes_per_task: f64,
    /// Heap blocks held per task (median).
    pub allocs_per_task: f64,
}

/// The bytes `variant` adds per task over the control at `depth`.
pub fn added(
    figures: &dyn Fn(Variant, usize) -> Figures,
    variant: Variant,
    depth: usize,
) -> Option<f64> {
    Some(figures(variant, depth).bytes_per_task? - figures(Variant::Control, depth).bytes_per_task?)
}

/// async-stack's added bytes / async-backtrace's at [`TARGET_DEPTH`]: the
/// figure the target applies to.
pub fn target_ratio(figures: &dyn Fn(Variant, usize) -> Figures) -> Option<f64> {
    let added = |v| added(figures, v, TARGET_DEPTH);
    Some(added(Variant::AsyncStack)? / added(Variant::AsyncBacktrace)?)
}

/// The whole table, from `figures(variant, depth)`.
pub fn table(figures: &dyn Fn(Variant, usize) -> Figures) -> String {
    let detailed = DEPTHS
        .iter()
        .any(|&d| Variant::ALL.iter().any(|&v| figures(v, d).detail.is_some()));
    let fmt = |v: Option<f64>, decimals: usize| {
        v.map_or_else(|| "n/a".to_owned(), |v| format!("{v:.decimals$}"))
    };
    let mut out = String::new();
    let w = &mut out;
    // Writing to a `String` cannot fail.
    let _ = writeln!(w, "## memory\n");
    let _ = writeln!(
        w,
        "Resident bytes per live, suspended tokio task ({} tasks per process, one process per \
         probe); added = variant − control:\n",
        super::TASKS
    );
    if detailed {
        let _ = writeln!(
            w,
            "| depth | variant | bytes per task (median) | min–max | added | × control | \
             future bytes | heap bytes per task | heap blocks per task | probes |"
        );
        let _ = writeln!(w, "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|");
    } else {
        let _ = writeln!(
            w,
            "| depth | variant | bytes per task | added | × control |"
        );
        let _ = writeln!(w, "|---:|---|---:|---:|---:|");
    }
    for depth in DEPTHS {
        let control = figures(Variant::Control, depth).bytes_per_task;
        for variant in Variant::ALL {
            let f = figures(variant, depth);
            let added = match variant {
                Variant::Control => "—".to_owned(),
                _ => fmt(added(figures, variant, depth), 1),
            };
            let times = f.bytes_per_task.zip(control).map(|(b, c)| b / c);
            let _ = write!(
                w,
                "| {depth} | {} | {} | ",
                variant.name(),
                fmt(f.bytes_per_task, 1)
            );
            match (detailed, f.detail) {
                (false, _) => {
                    let _ = writeln!(w, "{added} | {} |", fmt(times, 2));
                }
                (true, None) => {
                    let _ = writeln!(
                        w,
                        "n/a | {added} | {} | n/a | n/a | n/a | 0 |",
                        fmt(times, 2)
                    );
                }
                (true, Some(d)) => {
                    let _ = writeln!(
                        w,
                        "{:.1}–{:.1} | {added} | {} | {} | {:.1} | {:.2} | {} |",
                        d.min_max.0,
                        d.min_max.1,
                        fmt(times, 2),
                        d.future_bytes,
                        d.heap_bytes_per_task,
                        d.allocs_per_task,
                        d.probes
                    );
                }
            }
        }
    }

    let _ = writeln!(
        w,
        "\nWhat async-stack adds per task, over what each peer adds:\n"
    );
    let _ = writeln!(
        w,
        "| depth | async-stack / async-backtrace | async-stack / await-tree |"
    );
    let _ = writeln!(w, "|---:|---:|---:|");
    for depth in DEPTHS {
        let over =
            |peer| Some(added(figures, Variant::AsyncStack, depth)? / added(figures, peer, depth)?);
        let _ = writeln!(
            w,
            "| {depth} | {} | {} |",
            fmt(over(Variant::AsyncBacktrace), 2),
            fmt(over(Variant::AwaitTree), 2)
        );
    }
    let verdict = match target_ratio(figures) {
        None => "n/a (not run)".to_owned(),
        Some(r) if r <= TARGET_RATIO_VS_ASYNC_BACKTRACE => format!("{r:.2}×, met"),
        Some(r) => format!("{r:.2}×, **missed**"),
    };
    let _ = writeln!(
        w,
        "\n- target ≤ {TARGET_RATIO_VS_ASYNC_BACKTRACE} × async-backtrace's added bytes per task at \
         depth {TARGET_DEPTH}: {verdict}\n"
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Resident bytes per task: control 300; at depth 3 async-stack adds
    /// 150, async-backtrace 200, await-tree 600; depth 16 not measured.
    fn figures(variant: Variant, depth: usize) -> Figures {
        let bytes = match (variant, depth) {
            (_, 16) => None,
            (Variant::Control, _) => Some(300.0),
            (Variant::AsyncStack, _) => Some(450.0),
            (Variant::AsyncBacktrace, _) => Some(500.0),
            (Variant::AwaitTree, _) => Some(900.0),
        };
        Figures {
            bytes_per_task: bytes,
            detail: None,
        }
    }

    #[test]
    fn ratios_are_of_added_bytes_not_of_totals() {
        assert_eq!(added(&figures, Variant::AsyncStack, 3), Some(150.0));
        assert_eq!(added(&figures, Variant::AsyncStack, 16), None);
        assert_eq!(target_ratio(&figures), Some(0.75));
        let text = table(&figures);
        assert!(
            text.contains("| 3 | async-stack | 450.0 | 150.0 | 1.50 |"),
            "{text}"
        );
        assert!(text.contains("| 3 | 0.75 | 0.25 |"), "{text}");
        assert!(text.contains("| 16 | n/a | n/a |"), "{text}");
        assert!(text.contains("depth 3: 0.75×, met"), "{text}");
    }
}
