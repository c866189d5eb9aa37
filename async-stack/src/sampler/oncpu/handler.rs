//! The signal handler: on the interrupted thread, captures from one
//! instant its native frames, its live async chain and its task's
//! published stack into the thread's buffer (see "The handler" and "What
//! the handler reads" in [`crate::sampler::oncpu`]).
//!
//! It allocates nothing, takes no lock, and calls only `gettid` and
//! `clock_gettime`, both async-signal-safe.

// The `std` atomics of a handler on a platform loom does not model
// (on-CPU sampling is off under loom).
use std::sync::atomic::Ordering;

use super::buffers::{MAX_NATIVE, Sample, ThreadBuf, is_buf};
use crate::read::verify::live_chain;
use crate::task::record::TaskRecord;

fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid timespec; `clock_gettime` is async-signal-safe.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    (ts.tv_sec as u64) * 1_000_000_000 + ts.tv_nsec as u64
}

pub(super) extern "C" fn on_signal(
    _: libc::c_int,
    info: *mut libc::siginfo_t,
    ctx: *mut libc::c_void,
) {
    // SAFETY: the errno location of this thread, read and restored.
    let errno = unsafe { *libc::__errno_location() };
    // SAFETY: the kernel passes a valid siginfo and context to an
    // `SA_SIGINFO` handler.
    unsafe { handle(&*info, ctx.cast::<libc::ucontext_t>()) };
    // SAFETY: as above.
    unsafe { *libc::__errno_location() = errno };
}

/// # Safety
///
/// `info` and `ctx` are what the kernel passed to the handler, which runs
/// on the interrupted thread.
unsafe fn handle(info: &libc::siginfo_t, ctx: *const libc::ucontext_t) {
    let t0 = monotonic_ns();
    if info.si_code != libc::SI_TIMER {
        return;
    }
    // SAFETY: a `SI_TIMER` siginfo carries the timer's `sigval`.
    let p = unsafe { info.si_value().sival_ptr }
        .cast::<ThreadBuf>()
        .cast_const();
    if !is_buf(p) {
        return;
    }
    // SAFETY: `p` is one of our buffers, which are never freed.
    let buf = unsafe { &*p };
    // SAFETY: `gettid` takes no argument and cannot fail.
    let me = unsafe { libc::gettid() } as u32;
    // SAFETY: one handler runs at a time on a thread, the only producer
    // for its id; `capture` fills the whole sample. It runs only if the
    // buffer is this thread's, held by us: then `buf.active` is this
    // thread's state, alive while it runs, and the stack bounds are this
    // thread's stack, and neither changes meanwhile. `ctx` is the
    // interrupted context. A full ring, or one changing hands while still
    // ours, counts the sample lost.
    unsafe {
        buf.ring.push_as(me, |slot| {
            capture(slot, ctx, buf);
            (*slot).handler_ns = monotonic_ns().saturating_sub(t0);
        })
    };
}

/// The interrupted program counter, frame pointer and stack pointer.
///
/// # Safety
///
/// `ctx` is a valid `ucontext_t`.
unsafe fn registers(ctx: *const libc::ucontext_t) -> (usize, usize, usize) {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: the caller's contract.
        let g = unsafe { &(*ctx).uc_mcontext.gregs };
        (
            g[libc::REG_RIP as usize] as usize,
            g[libc::REG_RBP as usize] as usize,
            g[libc::REG_RSP as usize] as usize,
        )
    }
    #[cfg(target_arch = "aarch64")]
    {
        // SAFETY: the caller's contract.
        let m = unsafe { &(*ctx).uc_mcontext };
        (m.pc as usize, m.regs[29] as usize, m.sp as usize)
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    {
        let _ = ctx;
        (0, 0, 0)
    }
}

/// One word of this thread's stack.
///
/// # Safety
///
/// `addr` is 8-aligned and lies in this thread's mapped stack.
#[inline(always)]
unsafe fn stack_word(addr: usize) -> usize {
    let v: usize;
    // A load outside the Rust abstract machine: the stack words between
    // frames are not values Rust may assume initialised.
    #[cfg(target_arch = "x86_64")]
    // SAFETY: the caller's contract: a mapped, aligned address.
    unsafe {
        std::arch::asm!("mov {v}, qword ptr [{a}]", v = out(reg) v, a = in(reg) addr,
            options(nostack, readonly, preserves_flags))
    };
    #[cfg(target_arch = "aarch64")]
    // SAFETY: the caller's contract: a mapped, aligned address.
    unsafe {
        std::arch::asm!("ldr {v}, [{a}]", v = out(reg) v, a = in(reg) addr,
            options(nostack, readonly, preserves_flags))
    };
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    {
        let _ = addr;
        v = 0;
    }
    v
}

/// Fills `s` from the interrupted context.
///
/// # Safety
///
/// As for [`handle`]'s slot write: `s` is owned by the caller, `buf` is
/// the calling thread's, held (`busy`) by the caller.
unsafe fn capture(s: *mut Sample, ctx: *const libc::ucontext_t, buf: &ThreadBuf) {
    // SAFETY: the caller's contract for every access below; see each.
    unsafe {
        // The slot may never have held a sample: make it a valid one
        // (all zeros: integers, arrays of them and `false`s) before taking
        // a reference to it.
        std::ptr::write_bytes(s, 0, 1);
        let s = &mut *s;
        // Native frames: the interrupted address, then, only if the
        // interrupted stack pointer lies in this thread's stack, frame
        // pointers, followed while each frame lies above the last and
        // below the stack's top. Code on another stack (a coroutine, a
        // `sigaltstack` handler) keeps its interrupted address only: its
        // frame pointer may point anywhere.
        let (pc, mut fp, sp) = registers(ctx);
        s.native[0] = pc;
        let mut n = 1;
        let lo = buf.stack_lo.load(Ordering::Relaxed);
        let hi = buf.stack_hi.load(Ordering::Relaxed);
        if lo <= sp && sp < hi {
            while n < MAX_NATIVE && fp >= sp && fp % 8 == 0 && fp.saturating_add(16) <= hi {
                // Between the stack pointer and the top of this thread's
                // stack, aligned: mapped memory.
                let next = stack_word(fp);
                let ret = stack_word(fp + 8);
                if ret == 0 {
                    break;
                }
                s.native[n] = ret;
                n += 1;
                if next <= fp {
                    break;
                }
                fp = next;
            }
        }
        s.n_native = n as u32;
        // The async chain and the published stack (the rest of the sample
        // is zero).
        let Some(a) = buf.active.load(Ordering::Relaxed).as_ref() else {
            return;
        };
        let cur = a.current.load(Ordering::Relaxed);
        if cur.is_null() {
            return;
        }
        std::sync::atomic::compiler_fence(Ordering::Acquire);
        // `word` points to a record's `current` (never freed) or to the
        // thread's own untracked word.
        let running = (*cur).load(Ordering::Relaxed);
        s.running = running.addr();
        // Frames reachable from the current one are alive: their polls
        // are on this thread's stack, below the interrupted instruction
        // (invariant of `current`).
        let (k, cut) = live_chain(running, &mut s.live);
        s.n_live = k as u32;
        s.live_cut = cut;
        if let Some(r) = TaskRecord::running(a) {
            s.record = std::ptr::from_ref(r).addr();
            s.task_id = r.id.load(Ordering::Relaxed);
            s.copied = r.copy_in_signal(&mut s.copy).is_ok();
        }
    }
}
