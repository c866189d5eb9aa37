//! A panic hook that reports the async stack of the panicking task.
//!
//! [`install`] chains to the hook that was set before it: a hook set by
//! the program (or another library) still runs, after this report. When the
//! previous hook is std's default one it is not called, because this report
//! already says everything it would print (the message, and a backtrace when
//! `RUST_BACKTRACE` asks for one), so nothing is printed twice.
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

use std::io::Write;
use std::panic::PanicHookInfo;
use std::sync::Arc;

type Hook = Box<dyn Fn(&PanicHookInfo<'_>) + Sync + Send + 'static>;

/// Options for [`install_with`].
#[derive(Clone, Copy, Debug, Default)]
#[non_exhaustive]
pub struct PanicOptions {
    /// Also print a dump of every live task after the report.
    pub dump_tasks: bool,
}

impl PanicOptions {
    /// Default options: no task dump.
    pub fn new() -> Self {
        Self::default()
    }

    /// Also print a dump of all live tasks, streamed (see
    /// [`crate::dump::write_text`]): tasks in registry order, and no
    /// memory taken for them all at once while the program panics.
    pub fn dump_tasks(mut self, yes: bool) -> Self {
        self.dump_tasks = yes;
        self
    }
}

/// Installs the async-aware panic hook with default options.
///
/// ```no_run
/// async_stack::panic::install();
/// ```
pub fn install() {
    install_with(PanicOptions::default());
}

/// Installs the async-aware panic hook.
pub fn install_with(options: PanicOptions) {
    let previous = std::panic::take_hook();
    // `take_hook` leaves std's default hook installed; taking it again gives
    // a boxed default hook to compare with. Both boxes hold the same
    // zero-sized function item, so the wide pointers (data and vtable) are
    // equal exactly when `previous` is the default hook.
    let default = std::panic::take_hook();
    let previous_is_default = std::ptr::eq(
        &*previous as *const (dyn Fn(&PanicHookInfo<'_>) + Sync + Send),
        &*default as *const (dyn Fn(&PanicHookInfo<'_>) + Sync + Send),
    );
    let chained: Option<Arc<Hook>> = (!previous_is_default).then(|| Arc::new(previous));
    std::panic::set_hook(Box::new(move |info| {
        {
            let mut err = std::io::stderr().lock();
            let _ = err.write_all(report(info).as_bytes());
            if options.dump_tasks {
                let _ = write_live_tasks(&mut err);
            }
        }
        if let Some(prev) = &chained {
            prev(info);
        }
    }));
}

/// `live tasks:`, every live task streamed, and an empty line.
fn write_live_tasks(out: &mut impl Write) -> std::io::Result<()> {
    out.write_all(b"live tasks:\n")?;
    crate::dump::write_text(&mut *out)?;
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
    if let Some(id) = crate::current_task_id() {
        // Every other task costs two loads; this one is read in full.
        let mut task_name = None;
        crate::dump::live_tasks()
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
            let bt = crate::backtrace();
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
