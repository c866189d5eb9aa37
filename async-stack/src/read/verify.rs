//! The live chain checked against the published stack: the live chain
//! (parent pointers, which the polling thread reads soundly) and the
//! published stack (what other threads read) must tell the same story.
//!
//! Both readers use it: the walker on every
//! [`backtrace()`](crate::read::walker::backtrace) capture in debug builds
//! of this crate or when `ASYNC_STACK_VERIFY=1`, and the sampler on every
//! on-CPU sample. It sits beneath both, and imports neither: a mismatch
//! is described with [`crate::read::sites`]. A mismatch is counted
//! ([`verify_mismatches`]), the first [`MAX_MISMATCHES`] are kept
//! ([`verify_reports`]), and when `ASYNC_STACK_VERIFY_LOG` names a file,
//! each is appended to it as one line (the test suite runs with it and
//! fails if the file is not empty at the end).

use std::io::Write;
// Process-wide report counters, not part of any protocol between a writer
// and its readers: loom need not see them (and its types cannot be
// `static`s).
use std::sync::atomic::AtomicU64;
use std::sync::{Mutex, OnceLock};

use serde::Serialize;

use crate::read::sites::{SiteLocation, call_site_of, location_of};
use crate::record::current::{Active, current_slot, untag};
use crate::record::frame::{AT_AWAIT, AsyncStackFrame};
use crate::record::site::{AwaitSite, CallSite, SiteId};
use crate::shim::{Ordering, lock_std};
use crate::task::STACK_CAPACITY;
use crate::task::record::TaskRecord;
use crate::task::stack::{SignalCopy, StackCopy};

/// A mismatch between the live frame chain and the published stack, kept
/// for the report (the first [`MAX_MISMATCHES`], while they fit in an
/// eighth of the profile's budget).
///
/// Each list holds at most [`STACK_CAPACITY`] frames: the live chain is
/// read that deep, and a published stack holds no more.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct Mismatch {
    /// The task.
    pub task_id: u64,
    /// The live chain, root first (function names and locations).
    pub live: Vec<String>,
    /// The published stack, root first.
    pub published: Vec<String>,
}

/// How many mismatches a profile keeps in full.
pub const MAX_MISMATCHES: usize = 8;

impl Mismatch {
    /// The bytes the mismatch takes, as the budget counts them: itself,
    /// and each string with its text.
    pub(crate) fn memory_bytes(&self) -> usize {
        let strings = self.live.iter().chain(&self.published);
        std::mem::size_of::<Mismatch>()
            + strings
                .map(|s| std::mem::size_of::<String>() + s.len())
                .sum::<usize>()
    }
}

static COUNT: AtomicU64 = AtomicU64::new(0);
static FIRST: Mutex<Vec<Mismatch>> = Mutex::new(Vec::new());

/// Mismatches found by `backtrace()` captures and on-CPU samples in this
/// process so far (see the sampler's "Verification").
pub fn verify_mismatches() -> u64 {
    COUNT.load(Ordering::Relaxed)
}

/// The first mismatches found in this process, with both stacks.
pub fn verify_reports() -> Vec<Mismatch> {
    lock_std(&FIRST).clone()
}

/// Whether captures verify: debug builds, or `ASYNC_STACK_VERIFY=1`.
pub(crate) fn enabled() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(|| {
        cfg!(debug_assertions) || std::env::var_os("ASYNC_STACK_VERIFY").is_some_and(|v| v == "1")
    })
}

/// Counts, keeps and logs a mismatch.
pub(crate) fn report(m: &Mismatch) {
    COUNT.fetch_add(1, Ordering::Relaxed);
    {
        let mut first = lock_std(&FIRST);
        if first.len() < MAX_MISMATCHES {
            first.push(m.clone());
        }
    }
    if let Some(path) = std::env::var_os("ASYNC_STACK_VERIFY_LOG")
        && let Ok(mut f) = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
    {
        let _ = writeln!(
            f,
            "async-stack mismatch: task {}: live [{}] published [{}]",
            m.task_id,
            m.live.join(" <- "),
            m.published.join(" <- ")
        );
    }
}

/// The site id in a frame's site word, if that site was interned (`0`
/// otherwise: no registration, so that a signal handler can call it).
pub(crate) fn site_id(site: *mut u8) -> u32 {
    if site.addr() & AT_AWAIT != 0 {
        // SAFETY: with bit 0 set, `site` points to a `'static AwaitSite`
        // (see `AsyncStackFrame`).
        let a = unsafe { &*site.map_addr(|x| x & !AT_AWAIT).cast::<AwaitSite>() };
        match a.id.load(Ordering::Acquire) {
            0 => 0,
            id => SiteId::at_await(id).raw(),
        }
    } else {
        // SAFETY: with bit 0 clear, `site` points to a `'static CallSite`.
        let c = unsafe { &*site.cast::<CallSite>() };
        c.id.load(Ordering::Acquire)
    }
}

/// The live chain from the current-frame word `running`, innermost
/// first, into `out`: how many frames, and whether the chain went on.
///
/// # Safety
///
/// `running` is the current-frame word of the calling thread (or of the
/// thread a signal handler interrupted, called on that thread), read
/// while a task root's poll is on its stack: every frame reachable from
/// it is alive.
pub(crate) unsafe fn live_chain(
    running: *mut AsyncStackFrame,
    out: &mut [u32; STACK_CAPACITY],
) -> (usize, bool) {
    let mut f = untag(running);
    let mut k = 0;
    while !f.is_null() && k < out.len() {
        // SAFETY: the caller's contract: frames reachable from the current
        // one are alive (their polls are on this thread's stack).
        let frame: &AsyncStackFrame = unsafe { &*f };
        out[k] = site_id(frame.site.load(Ordering::Relaxed));
        k += 1;
        f = frame.parent.load(Ordering::Relaxed);
    }
    (k, !f.is_null())
}

/// Compares a live chain (innermost first) with a published stack copied
/// at the same instant with current-frame word `running`. `Some` with the
/// published path (root first) when they disagree.
pub(crate) fn compare(live: &[u32], copy: &SignalCopy, running: usize) -> Option<Vec<u32>> {
    let mut tree = StackCopy::default();
    tree.build_from_signal(
        copy,
        current_slot(std::ptr::without_provenance_mut(running)),
    );
    if tree.hidden > 0 {
        // Frames without a slot: the published stack cannot hold the
        // whole chain, so there is nothing to compare.
        return None;
    }
    let Some(end) = tree.frames.iter().position(|f| f.innermost) else {
        // Only x86-64 tags the current word with the running slot.
        return (cfg!(target_arch = "x86_64") && !live.is_empty()).then(Vec::new);
    };
    let mut published = Vec::new();
    tree.path_sites(end, &mut published);
    (!same_story(live, &published)).then_some(published)
}

/// A mismatch with both stacks written out.
pub(crate) fn describe(task_id: u64, live: &[u32], published: &[u32]) -> Mismatch {
    let show = |ids: &mut dyn Iterator<Item = u32>| -> Vec<String> {
        ids.map(|id| {
            let SiteLocation {
                function,
                file,
                line,
                column,
            } = location_of(id).unwrap_or(SiteLocation {
                function: "<unknown>",
                file: "",
                line: 0,
                column: 0,
            });
            format!("{function} at {file}:{line}:{column}")
        })
        .collect()
    };
    Mismatch {
        task_id,
        live: show(&mut live.iter().rev().copied()),
        published: show(&mut published.iter().copied()),
    }
}

/// Checks the calling thread's live chain against its task's published
/// stack (a `backtrace()` capture). Outside a tracked task, nothing.
pub(crate) fn check_current_thread() {
    let _ = crate::record::current::with(check_active);
}

fn check_active(a: &Active) {
    let Some(word) = a.current() else { return };
    let Some(record) = TaskRecord::running(a) else {
        return;
    };
    let running = word.load(Ordering::Relaxed);
    let mut live = [0u32; STACK_CAPACITY];
    // SAFETY: this thread's current-frame word, during its task's poll.
    let (n, cut) = unsafe { live_chain(running, &mut live) };
    if cut {
        return;
    }
    let mut copy = SignalCopy {
        words: [0; STACK_CAPACITY],
        len: 0,
        meta: 0,
        foreign: 0,
    };
    // This thread writes the table, and is here: the copy holds unless
    // another thread retires a frame meanwhile (then: no verdict).
    if record.copy_in_signal(&mut copy).is_err() {
        return;
    }
    if let Some(published) = compare(&live[..n], &copy, running.addr()) {
        let id = record.id.load(Ordering::Relaxed);
        report(&describe(id, &live[..n], &published));
    }
}

/// The call-site id of a site id.
fn function_of(site: u32) -> u32 {
    if SiteId::from_raw(site).is_await() {
        return call_site_of(site).map_or(0, CallSite::id);
    }
    site
}

/// Whether a live chain (innermost first) and a published path (root
/// first) tell the same story: the same functions, and the same `.await`
/// for every frame the live chain shows at an `.await`. A frame between
/// two `.await`s (the innermost, or one polling a child outside any
/// `.await`) is matched by function: its slot keeps the last `.await` it
/// reached.
fn same_story(live: &[u32], published: &[u32]) -> bool {
    if live.len() != published.len() {
        return false;
    }
    let n = live.len();
    live.iter()
        .rev()
        .zip(published)
        .enumerate()
        .all(|(i, (&l, &p))| {
            if l == 0 {
                // Never interned: the frame holds no slot (and then the
                // copy has hidden frames), or it never published.
                true
            } else if i + 1 == n || !SiteId::from_raw(l).is_await() {
                // The innermost frame, or a frame between two `.await`s
                // (polling a child outside one: `block_on`, a manual
                // `poll`): its slot keeps the last `.await` it reached.
                function_of(l) == function_of(p)
            } else {
                l == p
            }
        })
}

#[cfg(all(test, not(async_stack_loom), target_arch = "x86_64"))]
mod tests {
    use super::*;
    use crate::task::place::NO_SLOT;

    static ROOT: CallSite = CallSite::new("root", "m", "src/m.rs", 1, 1, false);
    static CHILD: CallSite = CallSite::new("child", "m", "src/m.rs", 5, 1, false);
    static OTHER: CallSite = CallSite::new("other", "m", "src/m.rs", 9, 1, false);
    static ROOT_AWAIT: AwaitSite = AwaitSite::new(&ROOT, "src/m.rs", 2, 9);

    /// A published chain of `sites` (root first), the last one running.
    fn published(sites: &[u32]) -> (SignalCopy, usize) {
        let mut c = SignalCopy {
            words: [0; STACK_CAPACITY],
            len: sites.len() as u32,
            meta: 0,
            foreign: 0,
        };
        for (i, &s) in sites.iter().enumerate() {
            let parent = if i == 0 { NO_SLOT } else { i as u32 - 1 };
            c.words[i] = crate::task::stack::word::pack(SiteId::from_raw(s), parent, i as u32 + 1);
        }
        let mut m = crate::task::stack::meta::unpack(0);
        m.top = sites.len() as u32;
        c.meta = crate::task::stack::meta::pack(m);
        let running = (sites.len() - 1) << crate::record::current::SLOT_SHIFT | 0x1000;
        (c, running)
    }

    #[test]
    fn the_same_chain_agrees_and_another_is_a_mismatch() {
        let root_at = SiteId::at_await(ROOT_AWAIT.id()).raw();
        let (copy, running) = published(&[root_at, CHILD.id()]);
        // Live chains are innermost first.
        assert_eq!(compare(&[CHILD.id(), root_at], &copy, running), None);
        // The innermost frame may have left the `.await` its slot keeps.
        static CHILD_AWAIT: AwaitSite = AwaitSite::new(&CHILD, "src/m.rs", 6, 5);
        let child_at = SiteId::at_await(CHILD_AWAIT.id()).raw();
        let (copy2, running2) = published(&[root_at, child_at]);
        assert_eq!(compare(&[CHILD.id(), root_at], &copy2, running2), None);
        // Another function, a missing frame, an ancestor at another place.
        assert!(compare(&[OTHER.id(), root_at], &copy, running).is_some());
        assert!(compare(&[root_at], &copy, running).is_some());
        // An ancestor polling its child outside any `.await` (`block_on`)
        // keeps its last `.await` in its slot: the same story.
        assert_eq!(compare(&[CHILD.id(), ROOT.id()], &copy, running), None);
        // At another `.await` of the same function: not the same story.
        static ROOT_AWAIT_2: AwaitSite = AwaitSite::new(&ROOT, "src/m.rs", 3, 9);
        let root_at_2 = SiteId::at_await(ROOT_AWAIT_2.id()).raw();
        assert!(compare(&[CHILD.id(), root_at_2], &copy, running).is_some());
        let m = describe(7, &[OTHER.id(), root_at], &[root_at, CHILD.id()]);
        assert_eq!(m.task_id, 7);
        assert_eq!(
            m.live,
            ["m::root at src/m.rs:2:9", "m::other at src/m.rs:9:1"]
        );
        assert_eq!(
            m.published,
            ["m::root at src/m.rs:2:9", "m::child at src/m.rs:5:1"]
        );
    }
}
