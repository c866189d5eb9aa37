//! A panic hook that reports the async stack of the panicking task.
//!
//! Output, on stderr:
//!
//! ```text
//! thread 'tokio-runtime-worker' panicked at examples/panicky.rs:12:5:
//! row 7 is corrupt
//! in task 3 "loader"
//! async backtrace:
//!    0: [async] panicky::parse_row
//!              at ./examples/panicky.rs:12:5
//!    1: [async] panicky::load
//!              awaiting at examples/panicky.rs:20:23
//!    ...
//! ```
//!
//! `RUST_BACKTRACE` is honoured like std does: unset or `0` prints no
//! backtrace (only a note), `full` prints every frame (`{:#}`), any other
//! value prints the folded backtrace.
//!
//! # The hook before
//!
//! [`install`] **replaces** the hook that was set before it. The report
//! holds what std's default hook prints (the thread's name, the location,
//! the message, and a backtrace when `RUST_BACKTRACE` asks for one, here
//! the spliced async one; not the OS thread id recent versions of std add
//! after the name), so by default each panic is reported once. To keep
//! a hook set earlier (by the program or another library) running too, ask
//! for it with [`PanicOptions::call_previous_hook`]: that hook then runs
//! after the report, whatever it is. If it is std's default hook, the panic
//! is then reported twice, once by each.
//!
//! The hook does not try to tell std's default hook from another one: a
//! hook is a boxed closure, and Rust gives no way to recognise one (two
//! boxes of the same closure need not share a vtable, nor do two different
//! ones necessarily have different vtables), so a guess could print every
//! report twice or silently drop a user's hook.
//!
//! Installing twice replaces the first hook by default too; with
//! `call_previous_hook(true)`, both report.
//!
//! ```no_run
//! use async_stack::panic::{PanicOptions, install_with};
//!
//! // A hook of the program's own, set first: it runs after the report.
//! std::panic::set_hook(Box::new(|_| { /* e.g. count panics in a metric */ }));
//! install_with(PanicOptions::new().call_previous_hook(true));
//! ```

use std::io::Write;
use std::panic::PanicHookInfo;

/// Options for [`install_with`].
#[derive(Clone, Copy, Debug, Default)]
#[non_exhaustive]
pub struct PanicOptions {
    /// Also print a dump of every live task after the report.
    pub dump_tasks: bool,
    /// Call the hook that was installed before, after the report (see the
    /// [module docs](self)). Default: `false`, the previous hook is
    /// replaced.
    pub call_previous_hook: bool,
}

impl PanicOptions {
    /// Default options: no task dump, the previous hook replaced.
    pub fn new() -> Self {
        Self::default()
    }

    /// Also print a dump of all live tasks, streamed (see
    /// [`crate::read::dump::write_text`]): tasks in registry order, and no
    /// memory taken for them all at once while the program panics.
    pub fn dump_tasks(mut self, yes: bool) -> Self {
        self.dump_tasks = yes;
        self
    }

    /// Call the hook that was installed before this one, after the report
    /// (default: `false`, it is replaced). Ask for it when the program or
    /// another library set a hook of its own that should still run; if
    /// the previous hook is std's default one, the panic is then reported
    /// twice.
    pub fn call_previous_hook(mut self, yes: bool) -> Self {
        self.call_previous_hook = yes;
        self
    }
}

/// Installs the async-aware panic hook with default options, replacing
/// the hook set before.
///
/// ```no_run
/// async_stack::panic::install();
/// ```
pub fn install() {
    install_with(PanicOptions::default());
}

/// Installs the async-aware panic hook. The hook set before is replaced,
/// or, with [`PanicOptions::call_previous_hook`], called after each
/// report.
///
/// ```no_run
/// use async_stack::panic::{PanicOptions, install_with};
///
/// install_with(PanicOptions::new().dump_tasks(true));
/// ```
pub fn install_with(options: PanicOptions) {
    let previous = std::panic::take_hook();
    // Replaced unless asked for: dropped now, never called.
    let previous = options.call_previous_hook.then_some(previous);
    std::panic::set_hook(Box::new(move |info| {
        {
            let mut err = std::io::stderr().lock();
            // A closed stderr must not turn a panic into an abort.
            let _ = err.write_all(report(info).as_bytes());
            if options.dump_tasks {
                let _ = write_live_tasks(&mut err);
            }
        }
        if let Some(previous) = &previous {
            previous(info);
        }
    }));
}

/// `live tasks:`, every live task streamed, and an empty line.
fn write_live_tasks(out: &mut impl Write) -> std::io::Result<()> {
    out.write_all(b"live tasks:\n")?;
    crate::read::dump::write_text(&mut *out)?;
    out.write_all(b"\n")
}

fn payload_message<'a>(info: &'a PanicHookInfo<'_>) -> &'a str {
    if let Some(s) = info.payload().downcast_ref::<&str>() {
        s
    } else if let Some(s) = info.payload().downcast_ref::<String>() {
        s
    } else {
        "Box<dyn Any>"
    }
}

/// What `RUST_BACKTRACE` asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum BacktraceStyle {
    Off,
    Short,
    Full,
}

fn backtrace_style() -> BacktraceStyle {
    match std::env::var("RUST_BACKTRACE") {
        Err(_) => BacktraceStyle::Off,
        Ok(v) if v == "0" || v.is_empty() => BacktraceStyle::Off,
        Ok(v) if v == "full" => BacktraceStyle::Full,
        Ok(_) => BacktraceStyle::Short,
    }
}

/// Builds the report for one panic (without the dump of all tasks).
fn report(info: &PanicHookInfo<'_>) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    let thread = std::thread::current();
    let name = thread.name().unwrap_or("<unnamed>");
    let _ = match info.location() {
        Some(l) => writeln!(out, "thread '{name}' panicked at {l}:"),
        None => writeln!(out, "thread '{name}' panicked:"),
    };
    let _ = writeln!(out, "{}", payload_message(info));
    if let Some(id) = crate::task::record::layout::current_task_id() {
        // Every other task costs two loads; this one is read in full.
        let mut task_name = None;
        crate::read::dump::live_tasks()
            .filter(|status| status.id == id)
            .for_each(|task| task_name.clone_from(&task.name));
        let _ = match task_name {
            Some(n) => writeln!(out, "in task {id} {n:?}"),
            None => writeln!(out, "in task {id}"),
        };
    }
    match backtrace_style() {
        BacktraceStyle::Off => {
            let _ = writeln!(
                out,
                "note: run with `RUST_BACKTRACE=1` environment variable to display the async backtrace"
            );
        }
        style => {
            let bt = crate::read::walker::backtrace();
            let _ = writeln!(out, "async backtrace:");
            let _ = if style == BacktraceStyle::Full {
                write!(out, "{bt:#}")
            } else {
                write!(out, "{bt}")
            };
        }
    }
    out
}
