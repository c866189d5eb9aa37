//! The lldb commands of `async-stack/debugger/async_stack_lldb.py` (`async-bt`,
//! `async-tasks`) on the `debuggee` program stopped at its breakpoint, live
//! and from a core file, compared with what the in-process walker and dump
//! wrote at that point. Needs lldb with its Python module, and gdb to write
//! the core (lldb 14 cannot on Linux); `scripts/test.sh` installs them.
//!
//! The core comes from another run of the debuggee than the live session,
//! so task ids and thread ids differ between the two: the core's output is
//! checked against its own run's walker and dump, and against the live
//! output where ids do not show (the backtrace, and tasks by name).

mod common;
#[path = "common/debugger.rs"]
mod debugger;

use debugger::{Step, Tool, section};

const TOOL: Tool = Tool::Lldb;

fn steps(task_ids: &[u64]) -> Vec<Step> {
    let mut steps: Vec<Step> = [section("BT", "async-bt"), section("TASKS", "async-tasks")]
        .into_iter()
        .flatten()
        .collect();
    for id in task_ids {
        steps.push(Step::Section(format!("TASK{id}")));
        steps.push(Step::Command(format!("async-bt task {id}")));
    }
    steps
}

/// `async-tasks` rows without ids, sorted by name (ids differ from run to
/// run).
fn rows_by_name(table: &str) -> Vec<(String, String, String)> {
    let mut rows: Vec<_> = debugger::task_rows(table)
        .into_iter()
        .map(|(_, name, state, innermost)| (name, state, innermost))
        .collect();
    rows.sort();
    rows
}

#[test]
fn lldb_async_bt_and_tasks_match_the_process_live_and_on_a_core() {
    debugger::require("gdb");
    // Live.
    let out = debugger::out_dir("lldb-chain");
    let live = TOOL.live_mode("chain", &out, &steps(&[]));
    live.assert_no_traceback();
    let files = debugger::outputs(&out);
    // 1. `async-bt` shows the walker's async frames.
    debugger::assert_same_async_frames(&live.section("BT"), &files["walker.txt"], true);

    // A core of another run, written by gdb.
    let core_out = debugger::out_dir("lldb-core");
    let core = debugger::gcore("chain", &core_out);
    let core_files = debugger::outputs(&core_out);
    let dump_tasks = debugger::dump_tasks(&core_files["dump.txt"]);
    let ids: Vec<u64> = dump_tasks.iter().map(|t| t.id).collect();
    let on_core = TOOL.core(&debugger::debuggee(), &core, &steps(&ids));
    on_core.assert_no_traceback();
    let _ = std::fs::remove_file(&core);

    // 3. The core shows what the live process showed.
    debugger::assert_same_async_frames(&on_core.section("BT"), &core_files["walker.txt"], true);
    assert_eq!(
        on_core.section("BT"),
        live.section("BT"),
        "async-bt: core and live differ"
    );
    assert_eq!(
        rows_by_name(&on_core.section("TASKS")),
        rows_by_name(&live.section("TASKS")),
        "async-tasks: core and live differ"
    );

    // 4 and 5. `async-tasks` on the core lists the dump's tasks, and
    // `async-bt task <id>` prints each as the dump does.
    debugger::assert_matches_dump(&on_core, &core_files["dump.txt"], 5);
}

/// Case 2: `async-bt all` shows each task's chain under its own thread.
#[test]
fn lldb_async_bt_all_shows_each_thread_chain() {
    debugger::check_bt_all(TOOL);
}

/// Case 6: corrupt chains and descriptors, and a program without
/// async-stack: one `async-stack: ` line naming the problem, no traceback.
#[test]
fn lldb_reports_corruption_in_one_line() {
    debugger::check_corruption(TOOL);
}

/// Arguments the commands do not take get a one-line error.
#[test]
fn lldb_rejects_bad_arguments_in_one_line() {
    debugger::check_bad_arguments(TOOL);
}

/// The roots of one plain `tokio::spawn` are one entry, under its tokio
/// id, live and on a core; a task outside tokio prints as before.
#[test]
fn lldb_shows_one_entry_per_tokio_task() {
    debugger::check_tokio_entries(TOOL);
}

/// A task waiting for a lock, a semaphore or a `JoinHandle` of
/// `async_stack` shows the wait under the frame that awaits it, as the
/// in-process dump does, live and on a core.
#[test]
fn lldb_shows_what_each_task_waits_for() {
    debugger::check_waits(TOOL);
}

/// A corrupt list of waits is one line, never a hang or garbage; lists
/// caught in the middle of a change are left out, and said to be.
#[test]
fn lldb_reports_corrupt_waits_in_one_line() {
    debugger::check_waits_corruption(TOOL);
}

/// Deadlocks among tasks waiting for `async_stack`'s locks, semaphores
/// and `JoinHandle`s: `async-deadlocks` prints exactly what
/// `async_stack::deadlocks()` reported in the process, live and on a
/// core; with waits but no deadlock, it says so in one line.
#[test]
fn lldb_finds_deadlocks_live_and_on_a_core() {
    debugger::check_deadlocks(TOOL);
}

/// `async-bt` keeps the native frames where they ran: the code the leaf
/// called above the async frames, the executor below, live and on a core,
/// with or without debug info.
#[test]
fn lldb_async_bt_keeps_native_frames_in_order() {
    debugger::require("gdb");
    debugger::check_native_order(TOOL);
}
