//! Helpers of the debugger-script tests (`debugger_gdb.rs`,
//! `debugger_lldb.rs`): run gdb or lldb in batch mode on the `debuggee`
//! program stopped at its breakpoint (or on a core file), split what the
//! commands print into sections, and read the in-process outputs the
//! debuggee wrote, so that the tests compare the scripts with them.
//!
//! Included with `#[path = "common/debugger.rs"] mod debugger;`.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The longest one debugger run may take.
pub const TIMEOUT: Duration = Duration::from_secs(180);

/// The debugger a session runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tool {
    Gdb,
    Lldb,
}

/// One step of a session: a section marker, then the commands whose
/// output goes in that section.
#[derive(Clone, Debug)]
pub enum Step {
    Section(String),
    Command(String),
}

/// `Step::Section(name)` then `Step::Command(command)`.
pub fn section(name: &str, command: &str) -> [Step; 2] {
    [
        Step::Section(name.to_owned()),
        Step::Command(command.to_owned()),
    ]
}

/// The debuggee, built with the test's profile.
pub fn debuggee() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_debuggee"))
}

/// The folder of the debugger scripts.
pub fn scripts() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../async-stack/debugger")
        .canonicalize()
        .expect("the async-stack/debugger/ folder")
}

/// A fresh output folder for one debuggee run.
pub fn out_dir(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("debugger-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("create the output folder");
    dir
}

/// Panics, never skips, when `program` is not installed.
pub fn require(program: &str) {
    let found = Command::new(program)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        found,
        "`{program}` is not installed: run scripts/test.sh, which installs \
         gdb, lldb and python3-lldb"
    );
}

/// What one debugger run printed.
#[derive(Debug)]
pub struct Run {
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    /// The text of section `name` (up to the next section marker).
    #[track_caller]
    pub fn section(&self, name: &str) -> String {
        let marker = format!("=={name}==");
        let mut lines = self.stdout.lines().skip_while(|l| l.trim() != marker);
        assert!(lines.next().is_some(), "no section {name} in\n{self}");
        // lldb echoes each command after its prompt: not output.
        let body: Vec<&str> = lines
            .take_while(|l| !(l.starts_with("==") && l.trim_end().ends_with("==")))
            .filter(|l| !l.starts_with("(lldb) "))
            .collect();
        body.join("\n")
    }

    /// Asserts that nothing printed a Python traceback.
    #[track_caller]
    pub fn assert_no_traceback(&self) {
        assert!(
            !self.stdout.contains("Traceback") && !self.stderr.contains("Traceback"),
            "a Python traceback in\n{self}"
        );
    }
}

impl std::fmt::Display for Run {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "--- stdout\n{}\n--- stderr\n{}",
            self.stdout, self.stderr
        )
    }
}

/// Runs `command` to its end or [`TIMEOUT`], whichever comes first (then
/// it is killed and the test fails).
#[track_caller]
pub fn run_bounded(mut command: Command) -> Run {
    let out = std::env::temp_dir().join(format!(
        "async-stack-debugger-{}-{:?}",
        std::process::id(),
        std::thread::current().id()
    ));
    let (stdout_path, stderr_path) = (out.with_extension("out"), out.with_extension("err"));
    let mut child = command
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&stdout_path).expect("stdout file"))
        .stderr(std::fs::File::create(&stderr_path).expect("stderr file"))
        .spawn()
        .expect("start the debugger");
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for the debugger") {
            break Some(status);
        }
        if start.elapsed() > TIMEOUT {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let run = Run {
        stdout: std::fs::read_to_string(&stdout_path).unwrap_or_default(),
        stderr: std::fs::read_to_string(&stderr_path).unwrap_or_default(),
    };
    let _ = std::fs::remove_file(stdout_path);
    let _ = std::fs::remove_file(stderr_path);
    assert!(
        status.is_some(),
        "the debugger ran past {TIMEOUT:?}:\n{run}"
    );
    run
}

/// The folder of lldb's Python module (Debian's lldb needs it on
/// `PYTHONPATH`), found by globbing `/usr/lib/llvm-*/lib/python3*/dist-packages`.
pub fn lldb_python_path() -> Option<PathBuf> {
    let mut found = Vec::new();
    for llvm in std::fs::read_dir("/usr/lib").ok()?.flatten() {
        if !llvm.file_name().to_string_lossy().starts_with("llvm-") {
            continue;
        }
        let Ok(libs) = std::fs::read_dir(llvm.path().join("lib")) else {
            continue;
        };
        for python in libs.flatten() {
            let packages = python.path().join("dist-packages");
            if python.file_name().to_string_lossy().starts_with("python3")
                && packages.join("lldb").is_dir()
            {
                found.push(packages);
            }
        }
    }
    found.sort();
    found.pop()
}

impl Tool {
    fn program(self) -> &'static str {
        match self {
            Tool::Gdb => "gdb",
            Tool::Lldb => "lldb",
        }
    }

    fn script(self) -> PathBuf {
        scripts().join(match self {
            Tool::Gdb => "async_stack_gdb.py",
            Tool::Lldb => "async_stack_lldb.py",
        })
    }

    fn command(self) -> Command {
        require(self.program());
        let mut command = Command::new(self.program());
        match self {
            Tool::Gdb => {
                command.args(["-batch", "-nx", "-ex", "set pagination off"]);
                command.args(["-ex", "set confirm off"]);
            }
            Tool::Lldb => {
                command.arg("--batch");
                if let Some(path) = lldb_python_path() {
                    command.env("PYTHONPATH", path);
                }
            }
        }
        command
    }

    fn push(self, command: &mut Command, line: &str) {
        let flag = match self {
            Tool::Gdb => "-ex",
            Tool::Lldb => "-o",
        };
        command.args([flag, line]);
    }

    fn load_script(self, command: &mut Command) {
        let script = self.script();
        let line = match self {
            Tool::Gdb => format!("source {}", script.display()),
            Tool::Lldb => format!("command script import {}", script.display()),
        };
        self.push(command, &line);
    }

    /// Pushes `steps`, then an `END` section marker that closes the last
    /// section.
    fn push_steps(self, command: &mut Command, steps: &[Step]) {
        for step in steps.iter().chain([&Step::Section("END".to_owned())]) {
            let line = match (step, self) {
                (Step::Section(name), Tool::Gdb) => format!("echo =={name}==\\n"),
                (Step::Section(name), Tool::Lldb) => format!("script print('=={name}==')"),
                (Step::Command(c), _) => c.clone(),
            };
            self.push(command, &line);
        }
    }

    /// The end of a session on a process `command` started: load the
    /// script, run `steps`, kill the process (gdb takes the binary last).
    #[track_caller]
    fn finish(self, mut command: Command, binary: &Path, steps: &[Step]) -> Run {
        self.load_script(&mut command);
        self.push_steps(&mut command, steps);
        self.push(&mut command, "kill");
        if self == Tool::Gdb {
            command.arg(binary);
        }
        run_bounded(command)
    }

    /// Runs `binary args...` to its breakpoint, loads the script, runs
    /// `steps`, then kills the process.
    #[track_caller]
    pub fn live(self, binary: &Path, args: &[&str], steps: &[Step]) -> Run {
        let mut command = self.command();
        match self {
            Tool::Gdb => {
                self.push(&mut command, "break async_stack_debug_break");
                self.push(&mut command, &format!("run {}", args.join(" ")));
            }
            Tool::Lldb => {
                command.arg(binary);
                self.push(&mut command, "breakpoint set -n async_stack_debug_break");
                self.push(
                    &mut command,
                    &format!("process launch -- {}", args.join(" ")),
                );
            }
        }
        self.finish(command, binary, steps)
    }

    /// Runs the debuggee in `mode`, its outputs in `out`, to its
    /// breakpoint, then `steps` (see [`Tool::live`]).
    #[track_caller]
    pub fn live_mode(self, mode: &str, out: &Path, steps: &[Step]) -> Run {
        let out_arg = out.display().to_string();
        self.live(&debuggee(), &[mode, &out_arg], steps)
    }

    /// Runs `binary` stopped at its first instruction, loads the script and
    /// runs `steps`.
    #[track_caller]
    pub fn at_entry(self, binary: &Path, steps: &[Step]) -> Run {
        let mut command = self.command();
        match self {
            Tool::Gdb => self.push(&mut command, "starti"),
            Tool::Lldb => {
                command.arg(binary);
                self.push(&mut command, "process launch --stop-at-entry");
            }
        }
        self.finish(command, binary, steps)
    }

    /// Loads `core` of `binary`, loads the script and runs `steps`.
    #[track_caller]
    pub fn core(self, binary: &Path, core: &Path, steps: &[Step]) -> Run {
        let mut command = self.command();
        if self == Tool::Lldb {
            command.arg("-c").arg(core).arg(binary);
        }
        self.load_script(&mut command);
        self.push_steps(&mut command, steps);
        if self == Tool::Gdb {
            command.arg(binary).arg(core);
        }
        run_bounded(command)
    }
}

/// Runs the debuggee in `mode` under gdb to its breakpoint and saves a
/// core with `gcore` (lldb cannot write cores on Linux). Returns the core.
#[track_caller]
pub fn gcore(mode: &str, out: &Path) -> PathBuf {
    let core = out.join("core");
    let run = Tool::Gdb.live_mode(
        mode,
        out,
        &[Step::Command(format!("gcore {}", core.display()))],
    );
    assert!(core.is_file(), "gcore wrote no core:\n{run}");
    core
}

/// One frame of a printed backtrace (the walker's files and `async-bt`):
/// whether it is async, its function, whether the line below says
/// `awaiting at` (else `at`), and that line's location text
/// (`file:line[:col]`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BtLine {
    pub is_async: bool,
    pub function: String,
    pub awaiting: bool,
    pub location: Option<String>,
}

/// The frames of a backtrace printed as `Backtrace` displays itself, in
/// order (innermost first).
pub fn bt_lines(text: &str) -> Vec<BtLine> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let Some((number, rest)) = line.trim_start().split_once(": ") else {
            continue;
        };
        if number.is_empty() || !number.bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        let (is_async, function) = match rest.strip_prefix("[async] ") {
            Some(f) => (true, f),
            None => (false, rest),
        };
        let next = lines.get(i + 1).map(|l| l.trim_start()).unwrap_or("");
        let (awaiting, location) = if let Some(at) = next.strip_prefix("awaiting at ") {
            (true, Some(at.to_owned()))
        } else if let Some(at) = next.strip_prefix("at ") {
            (false, Some(at.to_owned()))
        } else {
            (false, None)
        };
        out.push(BtLine {
            is_async,
            function: function.trim().to_owned(),
            awaiting,
            location,
        });
    }
    out
}

/// The `[async]` frames of a printed backtrace, innermost first.
pub fn async_lines(text: &str) -> Vec<BtLine> {
    bt_lines(text).into_iter().filter(|l| l.is_async).collect()
}

/// `file:line` of a `file:line[:col]` location, the file made absolute
/// and canonical (see `common::normalize`).
pub fn file_line(location: &str) -> (PathBuf, u32) {
    let numeric = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    let (rest, last) = location
        .rsplit_once(':')
        .unwrap_or_else(|| panic!("not a location: {location}"));
    // `file:line:col` or `file:line`.
    let (file, line) = match rest.rsplit_once(':') {
        Some((file, line)) if numeric(line) && numeric(last) => (file, line),
        _ => (rest, last),
    };
    let line = line
        .parse()
        .unwrap_or_else(|_| panic!("not a location: {location}"));
    (super::common::normalize(file), line)
}

/// Asserts that `script` shows the async frames of `walker` (innermost
/// first): same functions in order, the same `.await` locations, and for
/// the running frame the same file and line (a debugger gives no column).
/// `running_line` false skips the running frame's line (a thread that
/// moved on since the walker ran).
#[track_caller]
pub fn assert_same_async_frames(script: &str, walker: &str, running_line: bool) {
    let (got, want) = (async_lines(script), async_lines(walker));
    assert!(
        !want.is_empty(),
        "no async frames in the walker's\n{walker}"
    );
    let names = |v: &[BtLine]| v.iter().map(|l| l.function.clone()).collect::<Vec<_>>();
    assert_eq!(
        names(&got),
        names(&want),
        "async frames of\n{script}\nwalker:\n{walker}"
    );
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        assert_eq!(g.awaiting, w.awaiting, "frame {i} of\n{script}");
        if w.awaiting {
            assert_eq!(g.location, w.location, "frame {i} of\n{script}");
        } else if running_line {
            let g = g
                .location
                .as_deref()
                .unwrap_or_else(|| panic!("no location for the running frame in\n{script}"));
            assert_eq!(
                file_line(g),
                file_line(w.location.as_deref().expect("walker location")),
                "running frame of\n{script}"
            );
        }
    }
}

/// Whether `word` is a time as the dump writes it (`24ms`, `1.2s`,
/// `3m4s`, `5h6m`).
fn is_duration(word: &str) -> bool {
    let digits_then = |s: &str, unit: &str| {
        s.strip_suffix(unit)
            .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
    };
    let split2 = |s: &str, a: char, b: &str| {
        s.strip_suffix(b)
            .and_then(|s| s.split_once(a))
            .is_some_and(|(x, y)| {
                !x.is_empty()
                    && !y.is_empty()
                    && x.bytes().all(|c| c.is_ascii_digit())
                    && y.bytes().all(|c| c.is_ascii_digit())
            })
    };
    digits_then(word, "ms")
        || split2(word, '.', "s")
        || split2(word, 'm', "s")
        || split2(word, 'h', "m")
}

/// `text` with every time replaced by `<T>`, and runs of spaces inside a
/// line after its indentation collapsed when `collapse` (table columns
/// move with the times' widths).
pub fn mask_times(text: &str, collapse: bool) -> String {
    text.lines()
        .map(|line| {
            let masked: Vec<String> = line
                .split(' ')
                .map(|w| {
                    let core = w.trim_end_matches(',');
                    if is_duration(core) {
                        format!("<T>{}", &w[core.len()..])
                    } else {
                        w.to_owned()
                    }
                })
                .collect();
            let masked = masked.join(" ");
            if collapse {
                masked.split_whitespace().collect::<Vec<_>>().join(" ")
            } else {
                masked
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// One task of the in-process text dump.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DumpTask {
    pub id: u64,
    pub name: String,
    pub state: String,
    /// What the first (innermost) frame shows: `function at file:l:c` or
    /// `function running`; `-` without frames.
    pub innermost: String,
    /// The task's whole text.
    pub text: String,
}

/// The tasks of a text dump (`dump.txt`).
pub fn dump_tasks(dump: &str) -> Vec<DumpTask> {
    dump.split("\n\n")
        .filter(|block| block.starts_with("task "))
        .map(|block| {
            let lines: Vec<&str> = block.lines().collect();
            let header = lines[0].strip_prefix("task ").expect("a task header");
            let (id, rest) = header.split_once(' ').expect("id");
            let (name, rest) = match rest.strip_prefix('"') {
                Some(r) => {
                    let (name, rest) = r.split_once("\" ").expect("a quoted name");
                    (name.to_owned(), rest)
                }
                None => ("-".to_owned(), rest),
            };
            // `(tokio task 34)` or `(tokio task 34; roots 12, 15)`.
            let rest = match rest.strip_prefix("(tokio task ") {
                Some(r) => r.split_once(") ").expect("a closed tokio part").1,
                None => rest,
            };
            let state = rest
                .trim_start_matches('[')
                .split(' ')
                .next()
                .expect("state")
                .to_owned();
            // A task without frames (spawned, not polled yet): `-`, as
            // `async-tasks` shows it.
            let innermost = match lines.get(1).and_then(|l| l.strip_suffix(" [async]")) {
                Some(function) => {
                    let function = function.trim();
                    let status = lines[2].trim();
                    match status.strip_prefix("awaiting at ") {
                        Some(at) => format!("{function} at {at}"),
                        None => format!("{function} {status}"),
                    }
                }
                None => "-".to_owned(),
            };
            DumpTask {
                id: id.parse().expect("a task id"),
                name,
                state,
                innermost,
                text: block.trim_end().to_owned(),
            }
        })
        .collect()
}

/// The rows of `async-tasks`, as `(id, name, state, innermost)`; the
/// header row left out.
pub fn task_rows(table: &str) -> Vec<(u64, String, String, String)> {
    table
        .lines()
        .skip(1)
        .filter(|l| !l.trim().is_empty() && !l.starts_with('('))
        .map(|l| {
            let mut words = l.split_whitespace();
            let id = words.next().expect("id").parse().expect("a task id");
            let name = words.next().expect("name").to_owned();
            let state = words.next().expect("state").to_owned();
            let _time = words.next().expect("time");
            let innermost = words.collect::<Vec<_>>().join(" ");
            (id, name, state, innermost)
        })
        .collect()
}

/// Asserts that `run` printed exactly one `async-stack: ` error line
/// (per section) mentioning `problem`, and no traceback.
#[track_caller]
pub fn assert_one_line_error(run: &Run, sections: &[&str], problem: &str) {
    run.assert_no_traceback();
    for name in sections {
        let text = run.section(name);
        let errors: Vec<&str> = text
            .lines()
            .filter(|l| l.starts_with("async-stack: "))
            .collect();
        assert_eq!(errors.len(), 1, "section {name}: one error line in\n{run}");
        assert!(
            errors[0].contains(problem),
            "section {name}: the error names {problem:?}:\n{run}"
        );
        assert_eq!(
            text.trim(),
            errors[0],
            "section {name}: nothing but the error line:\n{run}"
        );
    }
}

/// The in-process outputs of one debuggee run, by file name.
pub fn outputs(out: &Path) -> BTreeMap<String, String> {
    std::fs::read_dir(out)
        .expect("the output folder")
        .flatten()
        .filter(|e| e.path().extension().is_some_and(|x| x == "txt"))
        .map(|e| {
            (
                e.file_name().to_string_lossy().into_owned(),
                std::fs::read_to_string(e.path()).expect("an output"),
            )
        })
        .collect()
}

/// `async-bt all` on the debuggee in mode `two`: each task's chain is shown
/// under its own thread, as that thread's in-process walker showed it.
#[track_caller]
pub fn check_bt_all(tool: Tool) {
    let out = out_dir(&format!("{}-two", tool.program()));
    let run = tool.live_mode("two", &out, &section("ALL", "async-bt all"));
    run.assert_no_traceback();
    let files = outputs(&out);
    let all = run.section("ALL");
    for (side, running_line) in [("left", true), ("right", false)] {
        let tid = files[&format!("tid-{side}.txt")].trim().to_owned();
        let header = format!("OS thread {tid}:");
        let block = all
            .split("\n\n")
            .find(|b| b.lines().next().is_some_and(|h| h.contains(&header)))
            .unwrap_or_else(|| panic!("no block for {header} in\n{all}"));
        assert_same_async_frames(block, &files[&format!("walker-{side}.txt")], running_line);
    }
}

/// Corrupt chains and descriptors (debuggee modes `cycle`, `wild`,
/// `deep`, `magic`, `version`), and a program without async-stack: one `async-stack: ` line
/// naming the problem, no traceback.
#[track_caller]
pub fn check_corruption(tool: Tool) {
    let steps: Vec<Step> = [section("BT", "async-bt"), section("TASKS", "async-tasks")]
        .into_iter()
        .flatten()
        .collect();
    for (mode, problem, sections) in [
        ("cycle", "cycle", &["BT"][..]),
        ("wild", "unreadable memory", &["BT"][..]),
        ("deep", "deeper than 1024 frames", &["BT"][..]),
        ("magic", "bad descriptor magic", &["BT", "TASKS"][..]),
        (
            "version",
            "unknown descriptor version",
            &["BT", "TASKS"][..],
        ),
    ] {
        let out = out_dir(&format!("{}-{mode}", tool.program()));
        let run = tool.live_mode(mode, &out, &steps);
        assert_one_line_error(&run, sections, problem);
    }
    let run = tool.at_entry(Path::new("/bin/true"), &steps);
    assert_one_line_error(&run, &["BT", "TASKS"], "ASYNC_STACK_DEBUG not found");
}

/// On a core: `async-tasks` lists the tasks of `dump` (the in-process dump
/// written just before the stop: ids, names, states, innermost `.await`),
/// and `async-bt task <id>` prints each one's text as the dump does (times
/// masked). `run` has a section `TASKS` and one `TASK<id>` per task.
#[track_caller]
pub fn assert_matches_dump(run: &Run, dump: &str, tasks: usize) {
    let dumped = dump_tasks(dump);
    let want: Vec<_> = dumped
        .iter()
        .map(|t| (t.id, t.name.clone(), t.state.clone(), t.innermost.clone()))
        .collect();
    assert_eq!(want.len(), tasks, "the dump:\n{dump}");
    let table = run.section("TASKS");
    assert_eq!(task_rows(&table), want, "async-tasks:\n{table}");
    for task in &dumped {
        let got = run.section(&format!("TASK{}", task.id));
        assert_eq!(
            mask_times(got.trim_end(), false),
            mask_times(&task.text, false),
            "task {}",
            task.id
        );
    }
}

/// Arguments the commands do not take: one `async-stack: ` line saying
/// what is wrong, and no traceback.
#[track_caller]
pub fn check_bad_arguments(tool: Tool) {
    let cases = [
        ("NOTID", "async-bt task nope", "not a task id: 'nope'"),
        ("NOID", "async-bt task", "usage: async-bt [all | task <id>]"),
        (
            "NOTASK",
            "async-bt task 999999",
            "no live task with id 999999",
        ),
        (
            "WORD",
            "async-bt sideways",
            "usage: async-bt [all | task <id>]",
        ),
        ("EXTRA", "async-tasks everything", "usage: async-tasks"),
        ("DEADLOCKS", "async-deadlocks now", "usage: async-deadlocks"),
    ];
    let steps: Vec<Step> = cases
        .iter()
        .flat_map(|(name, command, _)| section(name, command))
        .collect();
    let out = out_dir(&format!("{}-arguments", tool.program()));
    let run = tool.live_mode("chain", &out, &steps);
    for (name, _, problem) in cases {
        assert_one_line_error(&run, &[name], problem);
    }
}

/// A step that runs `async-bt task <id>` for every `<label> <id>` line of
/// the file `ids`, each in a section `TASK-<label>`. A live session's
/// commands are fixed before the debuggee starts, and only the debuggee
/// knows its task ids: it writes them, and this step reads them once it
/// has stopped (through a Python file written in `out`).
pub fn each_task_step(tool: Tool, ids: &Path, out: &Path) -> Step {
    let script = out.join(format!("each_task_{}.py", tool.program()));
    let body = match tool {
        Tool::Gdb => {
            "import gdb\n\
             for line in open(IDS):\n\
             \x20   label, task = line.split()\n\
             \x20   gdb.write('==TASK-%s==\\n' % label)\n\
             \x20   gdb.execute('async-bt task ' + task)\n"
        }
        Tool::Lldb => {
            "import lldb\n\
             for line in open(IDS):\n\
             \x20   label, task = line.split()\n\
             \x20   result = lldb.SBCommandReturnObject()\n\
             \x20   lldb.debugger.GetCommandInterpreter().HandleCommand(\n\
             \x20       'async-bt task ' + task, result)\n\
             \x20   print('==TASK-%s==\\n%s' % (label, result.GetOutput()), end='')\n"
        }
    };
    let text = format!("IDS = {:?}\n{body}", ids.display().to_string());
    std::fs::write(&script, text).expect("write the step's script");
    Step::Command(match tool {
        Tool::Gdb => format!("source {}", script.display()),
        Tool::Lldb => format!(
            "script exec(open({:?}).read())",
            script.display().to_string()
        ),
    })
}

/// `label id` lines (the debuggee's `task-ids.txt`, `tokio-ids.txt`), by
/// label.
pub fn labelled_ids(text: &str) -> BTreeMap<String, u64> {
    text.lines()
        .map(|line| {
            let (label, id) = line.split_once(' ').expect("`label id`");
            (label.to_owned(), id.trim().parse().expect("an id"))
        })
        .collect()
}

/// `tests/src/bin/debuggee.rs:line:column` of the first `at` at or after
/// `snippet`, in the one line of the debuggee's code (comment lines left
/// out) that contains `snippet`. The column of an `.await` is that of
/// `await`.
pub fn debuggee_location(snippet: &str, at: &str) -> String {
    const FILE: &str = "tests/src/bin/debuggee.rs";
    let source = std::fs::read_to_string(super::common::normalize(FILE)).expect("the source");
    let found: Vec<(usize, &str)> = source
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim_start().starts_with("//") && l.contains(snippet))
        .collect();
    assert_eq!(found.len(), 1, "one line of {FILE} holds {snippet:?}");
    let (index, line) = found[0];
    let start = line.find(snippet).expect("the snippet");
    let column = start + line[start..].find(at).expect("`at` in the snippet");
    format!("{FILE}:{}:{}", index + 1, column + 1)
}

/// Steps that run `async-tasks` (section `TASKS`), then `async-bt task
/// <id>` for each task the debuggee noted in `task-ids.txt` in `out` (see
/// [`each_task_step`]).
fn table_and_each_task(tool: Tool, out: &Path) -> Vec<Step> {
    let mut steps: Vec<Step> = section("TASKS", "async-tasks").into();
    steps.push(each_task_step(tool, &out.join("task-ids.txt"), out));
    steps
}

/// What one session of [`live_and_core`] printed, and what the
/// debuggee's run wrote: its outputs by file name, and its task and tokio
/// ids by label (`task-ids.txt`, `tokio-ids.txt` if written).
struct Session {
    run: Run,
    files: BTreeMap<String, String>,
    task: BTreeMap<String, u64>,
    tokio: BTreeMap<String, u64>,
    /// `live` or `core`.
    what: &'static str,
}

/// The steps of [`table_and_each_task`], then `extra`, on the debuggee
/// in `mode`, live, and on a core of another run (written by gdb): the
/// two sessions, each without a Python traceback.
#[track_caller]
fn live_and_core(tool: Tool, mode: &str, extra: &[Step]) -> [Session; 2] {
    let live_out = out_dir(&format!("{}-{mode}-live", tool.program()));
    let core_out = out_dir(&format!("{}-{mode}-core", tool.program()));
    let core = gcore(mode, &core_out);
    let steps = |out: &Path| [table_and_each_task(tool, out), extra.to_vec()].concat();
    let live = tool.live_mode(mode, &live_out, &steps(&live_out));
    let on_core = tool.core(&debuggee(), &core, &steps(&core_out));
    let _ = std::fs::remove_file(&core);
    [(live, live_out, "live"), (on_core, core_out, "core")].map(|(run, out, what)| {
        run.assert_no_traceback();
        let files = outputs(&out);
        let task = labelled_ids(&files["task-ids.txt"]);
        let tokio = files
            .get("tokio-ids.txt")
            .map(|ids| labelled_ids(ids))
            .unwrap_or_default();
        Session {
            run,
            files,
            task,
            tokio,
            what,
        }
    })
}

/// The entries of the debuggee in mode `tokio`, as the dump's text shows
/// them (times as `<T>`, see [`mask_times`]): the plain `tokio::spawn` that
/// joins two roots is one entry, the id of its first root (`left`), both
/// roots' frames in the order of their first poll, each innermost first;
/// the task spawned by name shows its tokio task; the task polled outside
/// tokio shows as it always did.
fn tokio_entries(task: &BTreeMap<String, u64>, tokio: &BTreeMap<String, u64>) -> [String; 4] {
    let at = debuggee_location;
    let (left, right, solo, alone) = (task["left"], task["right"], task["solo"], task["alone"]);
    let join = format!(
        "task {left} (tokio task {}; roots {left}, {right}) [idle <T>, 1 polls]:\n\
         \x20   debuggee::tokio_left_inner [async]\n\
         \x20       awaiting at {}\n\
         \x20 debuggee::tokio_left [async]\n\
         \x20     awaiting at {}\n\
         \x20 debuggee::tokio_right [async]\n\
         \x20     awaiting at {}\n\
         \x20 root future defined at {}",
        tokio["join"],
        at("let _ = rx.await; // left", "await"),
        at("tokio_left_inner(rx).await;", "await"),
        at("std::future::pending::<()>().await; // right", "await"),
        at("async fn tokio_left(", "tokio_left"),
    );
    let solo = format!(
        "task {solo} \"solo\" (tokio task {}) [idle <T>, 1 polls]:\n\
         \x20 debuggee::tokio_solo [async]\n\
         \x20     awaiting at {}\n\
         \x20 spawned at {}",
        tokio["solo"],
        at("let _ = rx.await; // solo", "await"),
        at("async_stack::tokio::spawn_named(\"solo\"", "async_stack"),
    );
    let alone = format!(
        "task {alone} [idle <T>, 1 polls]:\n\
         \x20 debuggee::tokio_alone [async]\n\
         \x20     awaiting at {}\n\
         \x20 root future defined at {}",
        at("std::future::pending::<()>().await; // alone", "await"),
        at("async fn tokio_alone(", "tokio_alone"),
    );
    // Spawned through the helper and never polled: in the dump from its
    // spawn, without frames.
    let unpolled = format!(
        "task {} \"unpolled\" [scheduled <T>, 0 polls]:\n\
         \x20 (not polled yet)\n\
         \x20 spawned at {}",
        task["unpolled"],
        at(
            "async_stack::tokio::spawn_named(\"unpolled\"",
            "async_stack"
        ),
    );
    [join, solo, alone, unpolled]
}

/// Mode `tokio`, live and on a core of another run (written by gdb): the
/// roots of one plain `tokio::spawn` are one entry, under the tokio id
/// `JoinHandle::id()` displays, in `async-bt task <id>` (for either root's
/// id) and in `async-tasks`; a task outside tokio prints as the
/// in-process dump prints it.
#[track_caller]
pub fn check_tokio_entries(tool: Tool) {
    for Session {
        run,
        files,
        task,
        tokio,
        what,
    } in live_and_core(tool, "tokio", &[])
    {
        let [join, solo, alone, unpolled] = tokio_entries(&task, &tokio);
        for (label, want) in [
            ("left", &join),
            ("right", &join),
            ("solo", &solo),
            ("alone", &alone),
            ("unpolled", &unpolled),
        ] {
            let got = run.section(&format!("TASK-{label}"));
            assert_eq!(
                mask_times(got.trim_end(), false),
                *want,
                "{what}: async-bt task {} ({label}):\n{run}",
                task[label]
            );
        }
        // The task outside tokio: as the in-process dump prints it.
        let dumped = dump_tasks(&files["dump.txt"]);
        let dumped_alone = dumped
            .iter()
            .find(|t| t.id == task["alone"])
            .expect("alone");
        assert_eq!(
            mask_times(&dumped_alone.text, false),
            alone,
            "{what}: the dump"
        );
        // One row per entry: `right` is part of `left`'s.
        let first_await = |function: &str, snippet: &str| {
            format!(
                "debuggee::{function} at {}",
                debuggee_location(snippet, "await")
            )
        };
        let rows = task_rows(&run.section("TASKS"));
        // By id, as the table lists them.
        let mut want = vec![
            (
                task["left"],
                "-".to_owned(),
                "idle".to_owned(),
                first_await("tokio_left_inner", "let _ = rx.await; // left"),
            ),
            (
                task["solo"],
                "solo".to_owned(),
                "idle".to_owned(),
                first_await("tokio_solo", "let _ = rx.await; // solo"),
            ),
            (
                task["alone"],
                "-".to_owned(),
                "idle".to_owned(),
                first_await(
                    "tokio_alone",
                    "std::future::pending::<()>().await; // alone",
                ),
            ),
            (
                task["unpolled"],
                "unpolled".to_owned(),
                "scheduled".to_owned(),
                "-".to_owned(),
            ),
        ];
        want.sort();
        assert_eq!(rows, want, "{what}: async-tasks:\n{run}");
        // Last, the whole in-process dump written at the stop: the same
        // four entries, the same text.
        let dumped: Vec<(u64, String)> = dumped
            .iter()
            .map(|t| (t.id, mask_times(&t.text, false)))
            .collect();
        let mut shown: Vec<(u64, String)> = ["left", "solo", "alone", "unpolled"]
            .iter()
            .map(|label| {
                let text = run.section(&format!("TASK-{label}"));
                (task[*label], mask_times(text.trim_end(), false))
            })
            .collect();
        shown.sort();
        assert_eq!(
            dumped, shown,
            "{what}: the in-process dump and the debugger disagree"
        );
    }
}

/// The entries of the debuggee in mode `waits`, by label, as the dump's
/// text shows them (times as `<T>`, see [`mask_times`]): each waiting
/// task's wait under the frame that awaits it, with the resource's
/// creation site and its holders (the exclusive holder or the readers,
/// then the holders of permits in the order they took them, the main
/// thread as code outside traced tasks), or the tokio task and spawn site
/// of an awaited `JoinHandle`.
fn waits_entries(
    task: &BTreeMap<String, u64>,
    tokio: &BTreeMap<String, u64>,
) -> BTreeMap<&'static str, String> {
    let at = debuggee_location;
    let header = |label: &str| {
        let name = if label == "awaited" {
            String::new()
        } else {
            format!(" \"{label}\"")
        };
        format!(
            "task {}{name} (tokio task {}) [idle <T>, 1 polls]:",
            task[label], tokio[label]
        )
    };
    let spawned = |label: &str| {
        let site = if label == "awaited" {
            at("async_stack::tokio::spawn(waits_awaited())", "async_stack")
        } else {
            at(&format!("spawn_named(\"{label}\""), "spawn_named")
        };
        format!("  spawned at {site}")
    };
    // A task of one frame, suspended at the `.await` of `snippet`, with
    // the wait line `wait` under it.
    let one = |label: &str, function: &str, snippet: &str, wait: Option<String>| {
        let mut lines = vec![
            header(label),
            format!("  debuggee::{function} [async]"),
            format!("      awaiting at {}", at(snippet, "await")),
        ];
        lines.extend(wait.map(|w| format!("      {w}")));
        lines.push(spawned(label));
        lines.join("\n")
    };
    let held = |label: &str, snippet: &str, call: &str| {
        format!(
            "task {} (acquired at {}, <T> ago)",
            task[label],
            at(snippet, call)
        )
    };
    let mutex = at("async_stack::sync::Mutex::new(0)", "async_stack");
    let rwlock = at("async_stack::sync::RwLock::new(0)", "async_stack");
    let semaphore = at("async_stack::sync::Semaphore::new(2)", "async_stack");
    let empty = at("async_stack::sync::Semaphore::new(0)", "async_stack");
    let read_held = held("reader", "l.read().await; // reader reads", "read");
    let locker = [
        header("locker"),
        "    debuggee::waits_lock_inner [async]".to_owned(),
        format!(
            "        awaiting at {}",
            at("m.lock().await; // locker waits", "await")
        ),
        format!(
            "        waiting for Mutex created at {mutex}, held by {}, for <T>",
            held("holder", "m.lock().await; // holder locks", "lock")
        ),
        "  debuggee::waits_locker [async]".to_owned(),
        format!(
            "      awaiting at {}",
            at("waits_lock_inner(m).await;", "await")
        ),
        spawned("locker"),
    ]
    .join("\n");
    let selector = [
        header("selector"),
        "    debuggee::waits_never [async]".to_owned(),
        format!(
            "        awaiting at {}",
            at("await; // never parks", "await")
        ),
        "  debuggee::waits_selector [async]".to_owned(),
        format!(
            "      awaiting at {}",
            at("tokio::select! { // selector waits", "select")
        ),
        format!(
            "      waiting for JoinHandle of tokio task {} spawned at {}, for <T>",
            tokio["selected"],
            at("spawn_named(\"selected\"", "spawn_named"),
        ),
        spawned("selector"),
    ]
    .join("\n");
    let hracer = [
        header("hracer"),
        "    debuggee::waits_run [async]".to_owned(),
        format!("        awaiting at {}", at("await // run awaits", "await")),
        "  debuggee::waits_helper_racer [async]".to_owned(),
        format!(
            "      awaiting at {}",
            at("await; // hracer parks", "await")
        ),
        spawned("hracer"),
    ]
    .join("\n");
    let fracer = [
        header("fracer"),
        "    debuggee::waits_fn_lock [async]".to_owned(),
        format!(
            "        awaiting at {}",
            at("m.lock().await; // fracer's fn waits", "await")
        ),
        "  debuggee::waits_fn_racer [async]".to_owned(),
        format!(
            "      awaiting at {}",
            at("await; // fracer parks", "await")
        ),
        spawned("fracer"),
    ]
    .join("\n");
    BTreeMap::from([
        (
            "holder",
            one("holder", "waits_holder", "await; // holder parks", None),
        ),
        ("locker", locker),
        (
            "reader",
            one("reader", "waits_reader", "await; // reader parks", None),
        ),
        (
            "writer",
            one(
                "writer",
                "waits_writer",
                "l.write().await; // writer waits",
                Some(format!(
                    "waiting for RwLock created at {rwlock}, held by {read_held}, for <T>"
                )),
            ),
        ),
        (
            "queued",
            one(
                "queued",
                "waits_queued",
                "l.read().await; // queued waits",
                Some(format!(
                    "waiting for RwLock created at {rwlock}, held by {read_held}, for <T>"
                )),
            ),
        ),
        (
            "permit",
            one("permit", "waits_permit", "await; // permit parks", None),
        ),
        (
            "acquirer",
            one(
                "acquirer",
                "waits_acquirer",
                "s.acquire().await; // acquirer waits",
                Some(format!(
                    "waiting for Semaphore created at {semaphore}, held by code outside \
                     traced tasks (acquired at {}) and {}, for <T>",
                    at(
                        "acquire_owned().await; // outside acquires",
                        "acquire_owned"
                    ),
                    held("permit", "s.acquire().await; // permit acquires", "acquire"),
                )),
            ),
        ),
        (
            "starved",
            one(
                "starved",
                "waits_starved",
                "s.acquire().await; // starved waits",
                Some(format!(
                    "waiting for Semaphore created at {empty}, free (not taken yet), for <T>"
                )),
            ),
        ),
        (
            "awaited",
            one("awaited", "waits_awaited", "await; // awaited parks", None),
        ),
        (
            "joiner",
            one(
                "joiner",
                "waits_joiner",
                ".await; // joiner waits",
                Some(format!(
                    "waiting for JoinHandle of tokio task {} spawned at {}, for <T>",
                    tokio["awaited"],
                    at("async_stack::tokio::spawn(waits_awaited())", "async_stack"),
                )),
            ),
        ),
        (
            "raced",
            one("raced", "waits_raced", "await; // raced parks", None),
        ),
        // Its handle of `raced` waits no more: it went on to park.
        (
            "racer",
            one("racer", "waits_racer", "await; // racer parks", None),
        ),
        // Its acquire stays queued, but it waits for nothing either.
        (
            "lracer",
            one("lracer", "waits_lock_racer", "await; // lracer parks", None),
        ),
        // Nor does the acquire it raced in another frame of the helper it
        // now parks in, at the same line.
        ("hracer", hracer),
        // Nor does the traced fn it kept, still suspended at its lock's
        // `.await` under a caller that went on.
        ("fracer", fracer),
        (
            "selected",
            one(
                "selected",
                "waits_selected",
                "await; // selected parks",
                None,
            ),
        ),
        // The wait under the frame at the `select!` that polls the handle,
        // not under the deeper frame of its other branch.
        ("selector", selector),
    ])
}

/// Mode `waits`, live and on a core of another run (written by gdb):
/// `async-bt task <id>` shows each task's wait under the frame that
/// awaits it, exactly as the in-process dump of that run shows it.
#[track_caller]
pub fn check_waits(tool: Tool) {
    for Session {
        run,
        files,
        task,
        tokio,
        what,
    } in live_and_core(tool, "waits", &section("DEADLOCKS", "async-deadlocks"))
    {
        let want = waits_entries(&task, &tokio);
        assert_eq!(want.len(), task.len(), "every task noted");
        let dumped = dump_tasks(&files["dump.txt"]);
        for (label, want) in &want {
            let got = run.section(&format!("TASK-{label}"));
            assert_eq!(
                mask_times(got.trim_end(), false),
                *want,
                "{what}: async-bt task {} ({label}):\n{run}",
                task[*label]
            );
            // The in-process dump of the same stop shows the same text.
            let dumped = dumped
                .iter()
                .find(|t| t.id == task[*label])
                .unwrap_or_else(|| panic!("{what}: {label} in the dump"));
            assert_eq!(mask_times(&dumped.text, false), *want, "{what}: the dump");
        }
        // `async-tasks` lists them all, and no wait.
        let table = run.section("TASKS");
        assert_eq!(task_rows(&table).len(), want.len(), "{what}:\n{table}");
        assert!(!table.contains("waiting for"), "{what}:\n{table}");
        // Seven tasks wait (`locker`, `writer`, `queued`, `acquirer`,
        // `starved`, `joiner`, `selector`), each for a task free to go on;
        // `racer`, `lracer`, `hracer` and `fracer` do not.
        assert_eq!(
            run.section("DEADLOCKS"),
            "no deadlock among 7 waiting tasks",
            "{what}: async-deadlocks:\n{run}"
        );
    }
}

/// The report of the debuggee in mode `deadlock`, one text per deadlock
/// in the order `async_stack::deadlocks()` gives them, as
/// `Deadlock` displays itself: each deadlock's edges from its smallest
/// task id round the cycle, each with the line where the task waits and
/// the line where the other acquired what it waits for (or, for a
/// `JoinHandle`, the `.await` and the spawn site).
fn deadlock_reports(task: &BTreeMap<String, u64>) -> [String; 3] {
    let at = debuggee_location;
    // Where a resource was created: the line that ends with `snippet`.
    let created = |snippet: &str| at(snippet, "async_stack");
    let edge = |waiter: &str,
                named: bool,
                waits: String,
                kind: &str,
                made: String,
                holder: &str,
                acquired: String| {
        let name = if named {
            format!(" \"{waiter}\"")
        } else {
            String::new()
        };
        format!(
            "task {}{name} waits at {waits} for {kind} created at {made}, held by task {} \
             (acquired at {acquired})",
            task[waiter], task[holder]
        )
    };
    let pair_waits = || at("theirs.lock().await; // pair waits", "lock");
    let pair_holds = || at("mine.lock().await; // pair holds", "lock");
    let inversion = [
        "deadlock: 2 tasks wait for each other".to_owned(),
        edge(
            "alpha",
            true,
            pair_waits(),
            "Mutex",
            created("async_stack::sync::Mutex::new(2)); // deadlock: second"),
            "beta",
            pair_holds(),
        ),
        edge(
            "beta",
            true,
            pair_waits(),
            "Mutex",
            created("async_stack::sync::Mutex::new(1)); // deadlock: first"),
            "alpha",
            pair_holds(),
        ),
    ];
    let three = [
        "deadlock: 3 tasks wait for each other".to_owned(),
        edge(
            "gamma",
            true,
            at("rw.write().await; // gamma waits", "write"),
            "RwLock",
            created("async_stack::sync::RwLock::new(5)); // deadlock: rw"),
            "delta",
            at("rw.read().await; // delta holds", "read"),
        ),
        edge(
            "delta",
            true,
            at("m.lock().await; // delta waits", "lock"),
            "Mutex",
            created("async_stack::sync::Mutex::new(3)); // deadlock: third"),
            "epsilon",
            at("m.lock().await; // epsilon holds", "lock"),
        ),
        edge(
            "epsilon",
            true,
            at("permit.acquire().await; // epsilon waits", "acquire"),
            "Semaphore",
            created("async_stack::sync::Semaphore::new(1)); // deadlock: permit"),
            "gamma",
            at("permit.acquire().await; // gamma holds", "acquire"),
        ),
    ];
    let join = [
        "deadlock: 2 tasks wait for each other".to_owned(),
        format!(
            "task {} \"parent\" waits at {} for the end of task {}, spawned at {}",
            task["parent"],
            at("let _ = child.await; // parent waits", "await"),
            task["child"],
            at("async_stack::tokio::spawn(deadlock_child", "async_stack"),
        ),
        edge(
            "child",
            false,
            at("m.lock().await; // child waits", "lock"),
            "Mutex",
            created("async_stack::sync::Mutex::new(4)); // deadlock: fourth"),
            "parent",
            at("m.lock().await; // parent holds", "lock"),
        ),
    ];
    [
        inversion.join("\n\n"),
        three.join("\n\n"),
        join.join("\n\n"),
    ]
}

/// Mode `deadlock`, live and on a core of another run (written by gdb):
/// `async-deadlocks` prints exactly what `async_stack::deadlocks()`
/// reported in the process at that stop (`deadlocks.txt`): the three
/// deadlocks, with both tasks' ids and both `.await` lines of each wait,
/// and not `bystander`, which waits for a deadlock without being in one.
#[track_caller]
pub fn check_deadlocks(tool: Tool) {
    for Session {
        run,
        files,
        task,
        what,
        ..
    } in live_and_core(tool, "deadlock", &section("DEADLOCKS", "async-deadlocks"))
    {
        let got = run.section("DEADLOCKS");
        assert_eq!(
            got, files["deadlocks.txt"],
            "{what}: async-deadlocks and the in-process report differ:\n{run}"
        );
        assert_eq!(
            got,
            deadlock_reports(&task).join("\n\n"),
            "{what}: async-deadlocks:\n{run}"
        );
        assert!(
            !got.contains(&format!("task {} ", task["bystander"])),
            "{what}:\n{got}"
        );
    }
}

/// Modes `waits-len`, `waits-torn`, `deadlock-torn` and
/// `deadlock-claimed`, live: an absurd length of a resource's `waits` list
/// is one `async-stack: ` line for `async-bt task` (which reads the
/// waits), while `async-tasks` (which does not) still lists every task;
/// resources caught in the middle of a change (their lists, or a shared
/// slot) are not read, and each task and `async-deadlocks` say how many
/// were left out.
#[track_caller]
pub fn check_waits_corruption(tool: Tool) {
    let with_deadlocks = |out: &Path| {
        let mut steps = table_and_each_task(tool, out);
        steps.extend(section("DEADLOCKS", "async-deadlocks"));
        steps
    };
    let out = out_dir(&format!("{}-waits-len", tool.program()));
    let run = tool.live_mode("waits-len", &out, &with_deadlocks(&out));
    let task = labelled_ids(&outputs(&out)["task-ids.txt"]);
    let mut sections: Vec<String> = task.keys().map(|label| format!("TASK-{label}")).collect();
    sections.push("DEADLOCKS".to_owned());
    let sections: Vec<&str> = sections.iter().map(String::as_str).collect();
    assert_one_line_error(
        &run,
        &sections,
        "implausible length 1099511627776 of its waits list",
    );
    let table = run.section("TASKS");
    assert_eq!(task_rows(&table).len(), task.len(), "async-tasks:\n{run}");

    let out = out_dir(&format!("{}-waits-torn", tool.program()));
    let run = tool.live_mode("waits-torn", &out, &with_deadlocks(&out));
    run.assert_no_traceback();
    let files = outputs(&out);
    let task = labelled_ids(&files["task-ids.txt"]);
    let tokio = labelled_ids(&files["tokio-ids.txt"]);
    for (label, want) in waits_entries(&task, &tokio) {
        // The lines of the untouched stop, without the wait, and a note
        // for the seven resources with waits (four locks, three join
        // waits: `racer`'s too, which a reader can tell from no other
        // until it reads it).
        let mut lines: Vec<&str> = want
            .lines()
            .filter(|l| !l.trim_start().starts_with("waiting for "))
            .collect();
        let note = "  (7 resources with waits caught in the middle of a change; \
                    their waits not shown)";
        lines.insert(lines.len() - 1, note);
        let got = run.section(&format!("TASK-{label}"));
        assert_eq!(
            mask_times(got.trim_end(), false),
            lines.join("\n"),
            "async-bt task {} ({label}):\n{run}",
            task[label]
        );
    }
    // No wait read, and the seven resources named as skipped.
    assert_eq!(
        run.section("DEADLOCKS"),
        "no deadlock among 0 waiting tasks\n\
         (7 resources with waits caught in the middle of a change; their waits not shown)",
        "async-deadlocks:\n{run}"
    );

    // A deadlock through a resource caught in the middle of a change is
    // not reported (one of its edges was not read); the others are, and
    // the skipped resources are counted: `alpha`'s `Mutex` (the
    // inversion's); or, a shared slot caught between its claim and its
    // hold's writes, the `Semaphore` and the `RwLock` of the three-party
    // deadlock.
    check_deadlocks_skipping(
        tool,
        "deadlock-torn",
        [false, true, true],
        "1 resource with waits caught in the middle of a change; its waits not shown",
    );
    check_deadlocks_skipping(
        tool,
        "deadlock-claimed",
        [true, false, true],
        "2 resources with waits caught in the middle of a change; their waits not shown",
    );
}

/// Debuggee mode `mode` (a `deadlock` mode whose resources are partly
/// caught in a change), live: `async-deadlocks` reports the deadlocks
/// that `kept` keeps (the inversion, the three parties, the join), then
/// `(note)`.
#[track_caller]
fn check_deadlocks_skipping(tool: Tool, mode: &str, kept: [bool; 3], note: &str) {
    let out = out_dir(&format!("{}-{mode}", tool.program()));
    let run = tool.live_mode(mode, &out, &section("DEADLOCKS", "async-deadlocks"));
    run.assert_no_traceback();
    let task = labelled_ids(&outputs(&out)["task-ids.txt"]);
    let mut want: Vec<String> = deadlock_reports(&task)
        .into_iter()
        .zip(kept)
        .filter_map(|(report, kept)| kept.then_some(report))
        .collect();
    want.push(format!("({note})"));
    assert_eq!(
        run.section("DEADLOCKS"),
        want.join("\n\n"),
        "async-deadlocks ({mode}):\n{run}"
    );
}

/// `async-bt` in the debuggee's mode `chain`, live and on a core, read as
/// a user reads it, in every build (stage 3 of `scripts/test.sh` runs it
/// without debug info, where the script finds no `Traced::poll` frames):
/// the synchronous code the leaf called (`stop_here`, then the breakpoint
/// function) first, then the three async frames, then tokio.
#[track_caller]
pub fn check_native_order(tool: Tool) {
    let out = out_dir(&format!("{}-order", tool.program()));
    let live = tool.live_mode("chain", &out, &section("BT", "async-bt"));
    live.assert_no_traceback();
    assert_native_order(&live.section("BT"));
    let core = gcore("chain", &out);
    let on_core = tool.core(&debuggee(), &core, &section("BT", "async-bt"));
    on_core.assert_no_traceback();
    let _ = std::fs::remove_file(&core);
    assert_native_order(&on_core.section("BT"));
}

#[track_caller]
fn assert_native_order(bt: &str) {
    let frames = bt_lines(bt);
    // The breakpoint function is unmangled: debug info puts it in its
    // module, the symbol table does not.
    let names: Vec<(bool, &str)> = frames
        .iter()
        .take(5)
        .map(|f| match f.function.as_str() {
            "debuggee::async_stack_debug_break" => (f.is_async, "async_stack_debug_break"),
            name => (f.is_async, name),
        })
        .collect();
    assert_eq!(
        names,
        [
            (false, "async_stack_debug_break"),
            (false, "debuggee::stop_here"),
            (true, "debuggee::chain_inner"),
            (true, "debuggee::chain_middle"),
            (true, "debuggee::chain_outer"),
        ],
        "{bt}"
    );
    // The executor: tokio's frames, by name or (for inlined frames that
    // line tables name short) by source file.
    let below = frames
        .get(5)
        .unwrap_or_else(|| panic!("nothing below the root:\n{bt}"));
    assert!(
        !below.is_async
            && (below.function.starts_with("tokio::")
                || below
                    .location
                    .as_deref()
                    .is_some_and(|l| l.contains("/tokio-"))),
        "tokio below the root:\n{bt}"
    );
    assert_eq!(frames.iter().filter(|f| f.is_async).count(), 3, "{bt}");
}
