//! Dump every task when the process receives a signal (Unix).
//!
//! The signal handler itself does only async-signal-safe work: it is
//! `signal-hook`'s handler, which writes one byte to a self-pipe. A
//! dedicated thread waiting on that pipe takes the dump and writes it, so
//! the dump runs in ordinary thread context, never inside the handler.
//!
//! The dump is streamed ([`crate::read::dump::write_text`]): each task is read
//! and written before the next, so a dump of many tasks needs memory for
//! one. Tasks therefore come in registry order, not sorted by id. The
//! output is a line `async-stack: task dump on signal N`, the text form of
//! every task, and an empty line.
//!
//! ```no_run
//! // Then `kill -USR1 <pid>` prints every task to stderr.
//! let _dumper = async_stack::signal::dump_on(signal_hook::consts::SIGUSR1).unwrap();
//! ```

use std::fs::OpenOptions;
use std::io::{self, Write};
use std::path::PathBuf;
use std::thread::JoinHandle;

use signal_hook::iterator::{Handle, Signals};

/// Where a signal dump is written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DumpTarget {
    /// Standard error.
    Stderr,
    /// Appended to this file (created if missing).
    File(PathBuf),
}

/// A running signal-dump thread. Dropping it (or [`SignalDumper::stop`])
/// unregisters the signal and ends the thread.
#[derive(Debug)]
pub struct SignalDumper {
    handle: Handle,
    thread: Option<JoinHandle<()>>,
}

/// Dumps every task to stderr each time `signal` arrives.
///
/// Errors (`InvalidInput`) if the signal cannot be handled: `SIGKILL`,
/// `SIGSTOP`, the synchronous fault signals (`SIGILL`, `SIGFPE`,
/// `SIGSEGV`), or a number the platform does not have.
pub fn dump_on(signal: i32) -> io::Result<SignalDumper> {
    dump_on_to(signal, DumpTarget::Stderr)
}

/// Dumps every task to `target` each time `signal` arrives.
pub fn dump_on_to(signal: i32, target: DumpTarget) -> io::Result<SignalDumper> {
    if signal <= 0 || signal > max_signal() || signal_hook::consts::FORBIDDEN.contains(&signal) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "signal {signal} cannot be handled (SIGKILL, SIGSTOP, SIGILL, SIGFPE and SIGSEGV are reserved)"
            ),
        ));
    }
    if let DumpTarget::File(path) = &target {
        // Fail now, not at the first signal, if the file cannot be written.
        OpenOptions::new().create(true).append(true).open(path)?;
    }
    let mut signals = Signals::new([signal])?;
    let handle = signals.handle();
    let thread = std::thread::Builder::new()
        .name("async-stack-signal-dump".into())
        .spawn(move || {
            for sig in signals.forever() {
                // Streamed: each task is read and written before the next,
                // never held all at once, neither as tasks nor as text.
                let _ = write_dump(&target, |w| {
                    writeln!(w, "async-stack: task dump on signal {sig}")?;
                    crate::read::dump::write_text(&mut *w)?;
                    writeln!(w)
                });
            }
        })?;
    Ok(SignalDumper {
        handle,
        thread: Some(thread),
    })
}

/// The highest signal number the platform has.
fn max_signal() -> i32 {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    {
        libc::SIGRTMAX()
    }
    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    {
        31
    }
}

/// Opens `target` and runs `write` on it. `write` buffers its own output
/// ([`crate::read::dump::write_text`] writes in chunks), so the target is not
/// buffered here.
fn write_dump(
    target: &DumpTarget,
    write: impl FnOnce(&mut dyn Write) -> io::Result<()>,
) -> io::Result<()> {
    let mut out: Box<dyn Write> = match target {
        DumpTarget::Stderr => Box::new(io::stderr().lock()),
        DumpTarget::File(path) => {
            Box::new(OpenOptions::new().create(true).append(true).open(path)?)
        }
    };
    write(&mut out)?;
    out.flush()
}

impl SignalDumper {
    /// Unregisters the signal and waits for the dump thread to end.
    pub fn stop(mut self) {
        self.shutdown();
    }

    fn shutdown(&mut self) {
        self.handle.close();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for SignalDumper {
    fn drop(&mut self) {
        self.shutdown();
    }
}
