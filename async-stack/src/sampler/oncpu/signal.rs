//! The real-time signal our timers raise, and our handler's hold on it
//! (see "The signal" in [`crate::sampler::oncpu`]): which signal is free,
//! installing the handler, and keeping it installed.

use std::io;
// Process-wide state of a platform loom does not model (on-CPU sampling
// is off under loom).
use std::sync::atomic::{AtomicI32, Ordering};

use super::handler::on_signal;

/// The signal our timers raise and our handler is installed for (`0`:
/// none yet).
static SIGNAL: AtomicI32 = AtomicI32::new(0);

/// Who handles a signal.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Disposition {
    Default,
    Ignored,
    Ours,
    Other,
}

fn disposition_of(sa: &libc::sigaction) -> Disposition {
    match sa.sa_sigaction {
        libc::SIG_DFL => Disposition::Default,
        libc::SIG_IGN => Disposition::Ignored,
        h if h == on_signal as *const () as usize => Disposition::Ours,
        _ => Disposition::Other,
    }
}

/// The current action for `sig`.
fn action(sig: libc::c_int) -> io::Result<libc::sigaction> {
    // SAFETY: a zeroed `sigaction` is a valid out-value; `sigaction` with
    // a null new action only reads.
    unsafe {
        let mut old: libc::sigaction = std::mem::zeroed();
        if libc::sigaction(sig, std::ptr::null(), &mut old) != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(old)
    }
}

/// Installs our handler for `sig`, if what held it was a default or
/// ignored disposition, or ours (else puts the other handler back):
/// whether our handler holds `sig` now.
fn install(sig: libc::c_int) -> io::Result<bool> {
    // SAFETY: `sigaction` with valid pointers; the handler has the
    // `SA_SIGINFO` signature. The exchange is atomic, so a handler
    // installed by another thread since we looked is put back whole.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = on_signal as *const () as usize;
        sa.sa_flags = libc::SA_SIGINFO | libc::SA_RESTART;
        libc::sigemptyset(&mut sa.sa_mask);
        let mut old: libc::sigaction = std::mem::zeroed();
        if libc::sigaction(sig, &sa, &mut old) != 0 {
            return Err(io::Error::last_os_error());
        }
        if disposition_of(&old) == Disposition::Other {
            libc::sigaction(sig, &old, std::ptr::null_mut());
            return Ok(false);
        }
    }
    Ok(true)
}

/// The signal for this session's timers, with our handler installed for
/// it (see the module docs).
pub(super) fn claim_signal() -> io::Result<libc::c_int> {
    let current = SIGNAL.load(Ordering::Acquire);
    if current != 0 {
        match disposition_of(&action(current)?) {
            Disposition::Ours => return Ok(current),
            Disposition::Default | Disposition::Ignored if install(current)? => {
                return Ok(current);
            }
            // Another handler took it: find another.
            _ => {}
        }
    }
    // Signals the starting thread blocks are someone's: a program that
    // waits for a signal (`sigwait`, `signalfd`) blocks it and leaves its
    // disposition at the default.
    // SAFETY: a zeroed `sigset_t` is a valid out-value; a null new set
    // only reads the mask.
    let blocked = unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::pthread_sigmask(libc::SIG_BLOCK, std::ptr::null(), &mut set);
        set
    };
    for sig in (libc::SIGRTMIN()..=libc::SIGRTMAX()).rev() {
        // SAFETY: a valid set and signal number.
        let is_blocked = unsafe { libc::sigismember(&blocked, sig) } == 1;
        if sig != current
            && !is_blocked
            && disposition_of(&action(sig)?) == Disposition::Default
            && install(sig)?
        {
            SIGNAL.store(sig, Ordering::Release);
            return Ok(sig);
        }
    }
    Err(io::Error::new(
        io::ErrorKind::AddrInUse,
        "on-CPU sampling needs a real-time signal with its default disposition, and every one \
         (SIGRTMIN to SIGRTMAX) has another handler or is ignored",
    ))
}

/// Reinstalls our handler for `sig` if something reset it to the default
/// or ignored disposition meanwhile (the default would end the process at
/// the next signal). Leaves another handler in place: its thread's
/// signals then count as stopped.
pub(super) fn keep_handler(sig: libc::c_int) {
    if let Ok(a) = action(sig)
        && matches!(
            disposition_of(&a),
            Disposition::Default | Disposition::Ignored
        )
    {
        let _ = install(sig);
    }
}
