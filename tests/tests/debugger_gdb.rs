//! The gdb commands of `async-stack/debugger/async_stack_gdb.py` (`async-bt`,
//! `async-tasks`) on the `debuggee` program stopped at its breakpoint, live
//! and from a core file, compared with what the in-process walker and dump
//! wrote at that point. Needs gdb (`scripts/test.sh` installs it).

mod common;
#[path = "common/debugger.rs"]
mod debugger;

use debugger::{Step, Tool, section};

const TOOL: Tool = Tool::Gdb;

/// The session every chain test shares: live commands, then a core of the
/// same stop, then the same commands on the core.
struct Chain {
    live: debugger::Run,
    core: debugger::Run,
    walker: String,
    dump: String,
}

fn steps(task_ids: &[u64]) -> Vec<Step> {
    let mut steps: Vec<Step> = [
        section("BT", "async-bt"),
        section("ALL", "async-bt all"),
        section("TASKS", "async-tasks"),
    ]
    .into_iter()
    .flatten()
    .collect();
    for id in task_ids {
        steps.push(Step::Section(format!("TASK{id}")));
        steps.push(Step::Command(format!("async-bt task {id}")));
    }
    steps
}

fn chain() -> Chain {
    let out = debugger::out_dir("gdb-chain");
    let core = out.join("core");
    let mut live_steps = steps(&[]);
    live_steps.extend(section("GCORE", &format!("gcore {}", core.display())));
    let live = TOOL.live_mode("chain", &out, &live_steps);
    live.assert_no_traceback();
    let files = debugger::outputs(&out);
    let dump = files.get("dump.txt").cloned().expect("dump.txt");
    let ids: Vec<u64> = debugger::dump_tasks(&dump).iter().map(|t| t.id).collect();
    assert!(core.is_file(), "gcore wrote no core:\n{live}");
    let core_run = TOOL.core(&debugger::debuggee(), &core, &steps(&ids));
    core_run.assert_no_traceback();
    let _ = std::fs::remove_file(&core);
    Chain {
        live,
        core: core_run,
        walker: files.get("walker.txt").cloned().expect("walker.txt"),
        dump,
    }
}

/// Tests 1, 3, 4 and 5 share one debuggee run (and its core): starting
/// gdb on the debuggee is the slow part.
#[test]
fn gdb_async_bt_and_tasks_match_the_process_live_and_on_a_core() {
    let c = chain();

    // 1. `async-bt` shows the walker's async frames.
    debugger::assert_same_async_frames(&c.live.section("BT"), &c.walker, true);

    // 3. The core shows what the live process showed (times masked).
    for name in ["BT", "ALL", "TASKS"] {
        assert_eq!(
            debugger::mask_times(&c.core.section(name), true),
            debugger::mask_times(&c.live.section(name), true),
            "section {name}: core and live differ:\nlive:\n{}\ncore:\n{}",
            c.live,
            c.core
        );
    }

    // 4 and 5. `async-tasks` on the core lists the dump's tasks, and
    // `async-bt task <id>` prints each as the dump does.
    debugger::assert_matches_dump(&c.core, &c.dump, 5);
}

/// Case 2: `async-bt all` shows each task's chain under its own thread.
#[test]
fn gdb_async_bt_all_shows_each_thread_chain() {
    debugger::check_bt_all(TOOL);
}

/// Case 6: corrupt chains and descriptors, and a program without
/// async-stack: one `async-stack: ` line naming the problem, no traceback.
#[test]
fn gdb_reports_corruption_in_one_line() {
    debugger::check_corruption(TOOL);
}

/// The script embedded in the binary (`.debug_gdb_scripts`) loads by itself
/// once the binary's path is one gdb trusts: no `source` needed.
#[test]
fn gdb_auto_loads_the_script_embedded_in_the_binary() {
    debugger::require("gdb");
    let binary = debugger::debuggee();
    let out = debugger::out_dir("gdb-autoload");
    let mut command = std::process::Command::new("gdb");
    command
        .args(["-batch", "-nx", "-iex"])
        .arg(format!("add-auto-load-safe-path {}", binary.display()))
        .args([
            "-ex",
            "set pagination off",
            "-ex",
            "break async_stack_debug_break",
        ])
        .arg("-ex")
        .arg(format!("run chain {}", out.display()))
        .args(["-ex", "info auto-load python-scripts async_stack"])
        .args([
            "-ex",
            "echo ==TASKS==\\n",
            "-ex",
            "async-tasks",
            "-ex",
            "echo ==END==\\n",
        ])
        .args(["-ex", "kill"])
        .arg(&binary);
    let run = debugger::run_bounded(command);
    run.assert_no_traceback();
    assert!(
        run.stdout
            .lines()
            .any(|l| l.starts_with("Yes") && l.trim_end().ends_with("async_stack_gdb.py")),
        "gdb did not auto-load the embedded script:\n{run}"
    );
    let dump = debugger::outputs(&out)["dump.txt"].clone();
    let want: Vec<_> = debugger::dump_tasks(&dump)
        .into_iter()
        .map(|t| (t.id, t.name, t.state, t.innermost))
        .collect();
    assert_eq!(want.len(), 5, "the dump:\n{dump}");
    let table = run.section("TASKS");
    assert_eq!(debugger::task_rows(&table), want, "async-tasks:\n{table}");
}

/// Arguments the commands do not take get a one-line error.
#[test]
fn gdb_rejects_bad_arguments_in_one_line() {
    debugger::check_bad_arguments(TOOL);
}

/// The roots of one plain `tokio::spawn` are one entry, under its tokio
/// id, live and on a core; a task outside tokio prints as before.
#[test]
fn gdb_shows_one_entry_per_tokio_task() {
    debugger::check_tokio_entries(TOOL);
}

/// A task waiting for a lock, a semaphore or a `JoinHandle` of
/// `async_stack` shows the wait under the frame that awaits it, as the
/// in-process dump does, live and on a core.
#[test]
fn gdb_shows_what_each_task_waits_for() {
    debugger::check_waits(TOOL);
}

/// A corrupt list of waits is one line, never a hang or garbage; lists
/// caught in the middle of a change are left out, and said to be.
#[test]
fn gdb_reports_corrupt_waits_in_one_line() {
    debugger::check_waits_corruption(TOOL);
}

/// Deadlocks among tasks waiting for `async_stack`'s locks, semaphores
/// and `JoinHandle`s: `async-deadlocks` prints exactly what
/// `async_stack::deadlocks()` reported in the process, live and on a
/// core; with waits but no deadlock, it says so in one line.
#[test]
fn gdb_finds_deadlocks_live_and_on_a_core() {
    debugger::check_deadlocks(TOOL);
}

/// `async-bt` keeps the native frames where they ran: the code the leaf
/// called above the async frames, the executor below, live and on a core,
/// with or without debug info.
#[test]
fn gdb_async_bt_keeps_native_frames_in_order() {
    debugger::require("gdb");
    debugger::check_native_order(TOOL);
}
