//! Fault injection: code that runs on a stack other than its thread's own
//! while the on-CPU sampler interrupts it (a coroutine or `stacker`
//! segment, a signal handler on a `sigaltstack`), with a frame pointer
//! that points at nothing.
//!
//! The handler must never fault: it walks frames only inside the
//! interrupted thread's own stack, and off it keeps just the interrupted
//! address. Each scenario runs in a child process, which must live and
//! count its samples.

#![cfg(all(target_os = "linux", target_arch = "x86_64"))]

mod faults_oncpu_common;

use std::time::Duration;

use async_stack::sampler::{Profile, Sampler};
use async_stack::traced_async;
use faults_oncpu_common::{in_child, thread_cpu, wait_until_sampled};

const PAGE: usize = 4096;
/// The foreign stack's size: room for the kernel's signal frame and the
/// handler.
const SEGMENT: usize = 1 << 20;

/// The calling thread's stack, as its lowest address and one past its
/// highest.
fn stack_bounds() -> (usize, usize) {
    // SAFETY: `attr` is initialised by `pthread_getattr_np` before it is
    // read, and destroyed once.
    unsafe {
        let mut attr = std::mem::MaybeUninit::<libc::pthread_attr_t>::uninit();
        assert_eq!(
            libc::pthread_getattr_np(libc::pthread_self(), attr.as_mut_ptr()),
            0
        );
        let mut addr = std::ptr::null_mut();
        let mut size = 0;
        assert_eq!(
            libc::pthread_attr_getstack(attr.as_ptr(), &mut addr, &mut size),
            0
        );
        libc::pthread_attr_destroy(attr.as_mut_ptr());
        (addr as usize, addr as usize + size)
    }
}

/// Maps `len` bytes at exactly `at`, if nothing is mapped there.
fn map_at(at: usize, len: usize, prot: libc::c_int) -> bool {
    // SAFETY: `MAP_FIXED_NOREPLACE` never replaces an existing mapping.
    let p = unsafe {
        libc::mmap(
            at as *mut libc::c_void,
            len,
            prot,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED_NOREPLACE,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return false;
    }
    if p as usize != at {
        // A kernel without `MAP_FIXED_NOREPLACE` took it as a hint.
        // SAFETY: the mapping just made, unused.
        unsafe { libc::munmap(p, len) };
        return false;
    }
    true
}

/// Whether nothing is mapped at page `at`.
fn unmapped(at: usize) -> bool {
    if !map_at(at, PAGE, libc::PROT_NONE) {
        return false;
    }
    // SAFETY: the page just mapped, unused.
    unsafe { libc::munmap(at as *mut libc::c_void, PAGE) };
    true
}

/// A read-write segment of [`SEGMENT`] bytes below the calling thread's
/// stack, whose next page up is unmapped: its base, and that page.
fn segment_below_stack() -> (usize, usize) {
    let (lo, _) = stack_bounds();
    for k in 1..4096 {
        let base = (lo - k * (SEGMENT + 2 * PAGE)) & !(PAGE - 1);
        let hole = base + SEGMENT;
        if unmapped(hole)
            && map_at(base, SEGMENT, libc::PROT_READ | libc::PROT_WRITE)
            && unmapped(hole)
        {
            return (base, hole);
        }
    }
    panic!("no room for a segment below the thread's stack at {lo:#x}");
}

/// Spins `iters` times with the stack pointer at `sp` (unless `0`) and
/// the frame pointer holding `rbp`, then restores both. A signal that
/// interrupts the loop runs its handler on that stack, with that frame
/// pointer.
#[inline(never)]
fn spin_with(sp: usize, rbp: usize, iters: u64) {
    // SAFETY: the block restores the stack and frame pointers it changes;
    // nothing but a signal handler runs on the other stack, which is
    // mapped, writable and large enough for one.
    unsafe {
        std::arch::asm!(
            "push rbp",
            "mov {saved}, rsp",
            "test {sp}, {sp}",
            "jz 2f",
            "mov rsp, {sp}",
            "2:",
            "mov rbp, {rbp}",
            "3:",
            "dec {n}",
            "jnz 3b",
            "mov rsp, {saved}",
            "pop rbp",
            sp = in(reg) sp,
            rbp = in(reg) rbp,
            n = inout(reg) iters => _,
            saved = out(reg) _,
        );
    }
}

/// Spins on stack `sp` (the thread's own when `0`) with frame pointer
/// `rbp` until the thread has used `cpu` more CPU time.
fn spin_for(sp: usize, rbp: usize, cpu: Duration) {
    let end = thread_cpu() + cpu;
    while thread_cpu() < end {
        spin_with(sp, rbp, 5_000_000);
    }
}

#[traced_async]
async fn spin_on_segment(sp: usize, rbp: usize, cpu: Duration) {
    spin_for(sp, rbp, cpu);
}

/// Checks what a user sees of a run that sampled `spin_with`: the
/// process lived (we got here), signals arrived and were counted, and at
/// least one sample caught the spin on the foreign stack and kept only
/// the interrupted address above the task's async frame.
fn check(profile: &Profile, task: &str) {
    let s = profile.stats();
    println!("{s:?}");
    assert!(s.signals > 0, "on-CPU signals arrived: {s:?}");
    assert_eq!(s.attempted, s.ok + s.dropped_torn + s.dropped_inconsistent);
    let mut folded = Vec::new();
    profile.write_folded(&mut folded).unwrap();
    let folded = String::from_utf8(folded).unwrap();
    println!("{folded}");
    let pc_only = folded.lines().any(|l| {
        let frames: Vec<&str> = l.rsplit_once(' ').unwrap().0.split(';').collect();
        let n = frames.len();
        n >= 2 && frames[n - 1].contains("spin_with") && frames[n - 2].contains(task)
    });
    assert!(
        pc_only,
        "a sample of the spin on the foreign stack, with the interrupted address only"
    );
}

/// A task moves its stack pointer onto a segment mapped below its
/// thread's stack, points its frame pointer at the unmapped page just
/// above the segment, and spins, sampled at 1000 Hz. Before the fix the
/// handler followed that frame pointer and the process died of SIGSEGV.
#[test]
fn a_task_spinning_on_a_segment_with_a_bad_frame_pointer_is_sampled_safely() {
    in_child(
        "a_task_spinning_on_a_segment_with_a_bad_frame_pointer_is_sampled_safely",
        || {
            let sampler = Sampler::builder()
                .frequency_hz(1000)
                .on_cpu(true)
                .start()
                .expect("on-CPU sampling starts");
            wait_until_sampled(Duration::from_secs(10));
            let (base, hole) = segment_below_stack();
            futures::executor::block_on(spin_on_segment(
                base + SEGMENT,
                hole,
                Duration::from_millis(300),
            ));
            let profile = sampler.stop();
            check(&profile, "spin_on_segment");
        },
    );
}

/// The frame pointer the `SIGUSR1` handler spins with.
static ALT_RBP: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

extern "C" fn burn_on_altstack(_: libc::c_int) {
    use std::sync::atomic::Ordering;
    // Stay on the alternate stack the kernel put us on; spoil the frame
    // pointer.
    spin_for(
        0,
        ALT_RBP.load(Ordering::Relaxed),
        Duration::from_millis(300),
    );
}

#[traced_async]
async fn raise_on_altstack() {
    // SAFETY: raising a signal whose handler is installed.
    unsafe { libc::raise(libc::SIGUSR1) };
}

/// A thread runs a `SIGUSR1` handler on a `sigaltstack` mapped below its
/// stack; the handler burns CPU with a frame pointer that points at the
/// unmapped page above the alternate stack. The on-CPU handler, which
/// then runs on the alternate stack too, must keep the interrupted
/// address only.
#[test]
fn a_signal_handler_burning_cpu_on_an_alternate_stack_is_sampled_safely() {
    in_child(
        "a_signal_handler_burning_cpu_on_an_alternate_stack_is_sampled_safely",
        || {
            let sampler = Sampler::builder()
                .frequency_hz(1000)
                .on_cpu(true)
                .start()
                .expect("on-CPU sampling starts");
            wait_until_sampled(Duration::from_secs(10));
            let (base, hole) = segment_below_stack();
            ALT_RBP.store(hole, std::sync::atomic::Ordering::Relaxed);
            // SAFETY: a valid `stack_t` naming the mapped segment, and a
            // valid `sigaction` whose handler has the plain signature.
            unsafe {
                let ss = libc::stack_t {
                    ss_sp: base as *mut libc::c_void,
                    ss_flags: 0,
                    ss_size: SEGMENT,
                };
                let mut old = std::mem::zeroed::<libc::stack_t>();
                assert_eq!(libc::sigaltstack(&ss, &mut old), 0);
                let mut sa: libc::sigaction = std::mem::zeroed();
                sa.sa_sigaction = burn_on_altstack as *const () as usize;
                sa.sa_flags = libc::SA_ONSTACK;
                libc::sigemptyset(&mut sa.sa_mask);
                assert_eq!(libc::sigaction(libc::SIGUSR1, &sa, std::ptr::null_mut()), 0);
            }
            futures::executor::block_on(raise_on_altstack());
            let profile = sampler.stop();
            check(&profile, "raise_on_altstack");
        },
    );
}
