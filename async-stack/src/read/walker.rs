//! The walker: captures the current thread's native stack and its async
//! frame chain in one go, and splices them into one backtrace.
//!
//! # Capture
//!
//! [`backtrace()`] records, without symbolising anything:
//! - every native frame's instruction pointer;
//! - the thread's active async chain, innermost first: for each frame its
//!   call site, its await site and its return address.
//!
//! # Splicing
//!
//! Once symbolised (inlined functions included, innermost first), the
//! native stack holds exactly one `Traced::poll` closure per async frame of
//! the chain, whether the poll was inlined into its parent or not: that
//! closure is where the level polls its inner future. These *levels* cut
//! the symbols into regions: the symbols inside the innermost level ran
//! inside the innermost poll (the synchronous code the leaf is executing,
//! and the leaf's body); those between two levels are poll and generator
//! plumbing between two async frames (the parent's body at its `.await`,
//! `join!`, `Shared`, a nested `block_on`); those below the outermost level
//! are the executor, below the task root.
//!
//! The default view shows the innermost region, then the async frames, then
//! the executor (trimmed at `__rust_begin_short_backtrace` like std's short
//! backtraces). The innermost async frame shows where it is running now;
//! every other async frame shows the `.await` it is suspended on. The
//! alternate view (`{:#}`, [`Backtrace::all_frames`]) shows every native
//! frame, plumbing included.
//!
//! When the levels cannot all be found (no debug info for inlined code),
//! each async frame goes just above the native frame that runs its body's
//! code instead: the function that holds the address its current `.await`
//! (or, for the innermost frame, the first `.await` of its function ever
//! reached) recorded, or else a native frame named as its body
//! (`app::leaf::{{closure}}`); see `body_frames`. When no body is found at
//! all, the async frames are placed together at the first level found, or
//! on top (see the crate's "Stack accuracy").
//!
//! Symbols are resolved on first display or inspection and cached per
//! address for the whole process ([`crate::read::symbolize`]).

use std::fmt;
// A backtrace's symbols, resolved once by whichever thread displays it
// first: not part of any protocol loom models.
use std::sync::{Arc, OnceLock};

use crate::read::plumbing;
use crate::read::sites::is_body_name;
use crate::read::symbolize::{self, Symbol};
use crate::record::frame::AsyncStackFrame;
use crate::record::site::{AwaitSite, CallSite};

/// Whether a backtrace frame is a native (machine) frame or an async frame
/// recorded by an instrumented future.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FrameKind {
    /// A native frame from the machine stack.
    Native,
    /// An async frame from the `AsyncStackFrame` chain.
    Async,
}

/// One frame of a resolved [`Backtrace`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BacktraceFrame {
    kind: FrameKind,
    function: Option<String>,
    file: Option<String>,
    line: Option<u32>,
    column: Option<u32>,
    address: usize,
    running: bool,
}

impl BacktraceFrame {
    /// Native or async.
    pub fn kind(&self) -> FrameKind {
        self.kind
    }

    /// The function name (demangled, without hash), if known.
    pub fn function(&self) -> Option<&str> {
        self.function.as_deref()
    }

    /// The source file: for a native frame, where it is executing; for an
    /// async frame, the `.await` it is suspended on (or, for the innermost
    /// async frame, where it is running).
    pub fn file(&self) -> Option<&str> {
        self.file.as_deref()
    }

    /// The line matching [`file`](Self::file).
    pub fn line(&self) -> Option<u32> {
        self.line
    }

    /// The column matching [`file`](Self::file).
    pub fn column(&self) -> Option<u32> {
        self.column
    }

    /// The instruction address (native) or the return address into the
    /// parent's code (async; `0` when unknown).
    pub fn address(&self) -> usize {
        self.address
    }

    /// For an async frame: `true` when this frame is executing (the
    /// innermost async frame of a capture), `false` when suspended at an
    /// `.await`.
    pub fn is_running(&self) -> bool {
        self.running
    }
}

#[derive(Clone, Copy, Debug)]
struct NativeFrame {
    ip: usize,
}

#[derive(Clone, Copy, Debug)]
struct ChainFrame {
    call_site: &'static CallSite,
    await_site: Option<&'static AwaitSite>,
    /// Into the parent's code, at the `.await` that polls this frame.
    return_address: usize,
    /// An address in this frame's own body's code (`0`: none known): at its
    /// current `.await`, or, for a frame running between two, at the first
    /// `.await` of its function ever resolved.
    body_address: usize,
}

struct Resolved {
    short: Vec<BacktraceFrame>,
    full: Vec<BacktraceFrame>,
}

/// A captured backtrace of the current thread, native and async frames
/// spliced. See [`backtrace()`] and the crate's "Stack accuracy"
/// section.
///
/// # How frames are spliced
///
/// Each level of the async chain polls its inner future from one closure
/// inside `Traced::poll`, which symbolisation finds on the native stack
/// whether the poll was inlined or not. Those closures cut the native stack
/// into regions: the frames inside the innermost one ran inside the
/// innermost poll (the synchronous code the leaf is executing, shown
/// first); the frames between two of them are poll and generator plumbing
/// (hidden, except with `{:#}`); the frames below the outermost are the
/// executor (shown last, trimmed like std's short backtraces).
pub struct Backtrace {
    natives: Vec<NativeFrame>,
    chain: Vec<ChainFrame>,
    resolved: OnceLock<Resolved>,
}

/// Captures the current thread's spliced backtrace.
///
/// Capture records addresses only; symbols are resolved when the backtrace
/// is displayed or its frames are inspected, and cached process-wide.
///
/// ```
/// use async_stack::{traced_async, FrameKind};
///
/// #[traced_async]
/// async fn leaf() -> async_stack::Backtrace {
///     async_stack::backtrace()
/// }
///
/// #[traced_async]
/// async fn parent() -> async_stack::Backtrace {
///     leaf().await
/// }
///
/// let bt = futures::executor::block_on(parent());
/// let asyncs: Vec<_> = bt
///     .frames()
///     .iter()
///     .filter(|f| f.kind() == FrameKind::Async)
///     .map(|f| f.function().unwrap().rsplit("::").next().unwrap().to_string())
///     .collect();
/// assert_eq!(asyncs, ["leaf", "parent"]);
/// ```
#[inline(never)]
pub fn backtrace() -> Backtrace {
    Backtrace::create(backtrace as *const () as usize)
}

impl Backtrace {
    /// Same as [`backtrace()`].
    #[inline(never)]
    pub fn capture() -> Backtrace {
        Backtrace::create(Backtrace::capture as *const () as usize)
    }

    #[inline(never)]
    fn create(entry: usize) -> Backtrace {
        if crate::read::verify::enabled() {
            crate::read::verify::check_current_thread();
        }
        let chain = capture_chain();
        let mut natives = Vec::with_capacity(64);
        let mut skip_until = None;
        backtrace::trace(|f| {
            if f.symbol_address() as usize == entry {
                skip_until = Some(natives.len());
            }
            natives.push(NativeFrame {
                ip: f.ip() as usize,
            });
            true
        });
        if let Some(n) = skip_until {
            natives.drain(..=n);
        }
        Backtrace {
            natives,
            chain,
            resolved: OnceLock::new(),
        }
    }

    /// The spliced frames, innermost first: the synchronous code inside the
    /// innermost poll, the async frames, then the executor's frames. Poll
    /// plumbing is folded away. Resolves symbols on first call.
    pub fn frames(&self) -> &[BacktraceFrame] {
        &self.resolve().short
    }

    /// Every frame, plumbing and runtime start-up included (what `{:#}`
    /// prints).
    pub fn all_frames(&self) -> &[BacktraceFrame] {
        &self.resolve().full
    }

    /// Only the async frames, innermost first.
    pub fn async_frames(&self) -> impl Iterator<Item = &BacktraceFrame> {
        self.frames().iter().filter(|f| f.kind == FrameKind::Async)
    }

    /// Number of async frames captured (no symbolisation needed).
    pub fn async_depth(&self) -> usize {
        self.chain.len()
    }

    fn resolve(&self) -> &Resolved {
        self.resolved
            .get_or_init(|| splice(&self.natives, &self.chain))
    }
}

/// Walks the thread's active chain, innermost first.
fn capture_chain() -> Vec<ChainFrame> {
    crate::record::current::with(|a| {
        let mut out: Vec<ChainFrame> = Vec::new();
        let mut cur = a.frame();
        // A bound against a corrupted chain; real chains are far shorter.
        while !cur.is_null() && out.len() < 100_000 {
            // SAFETY: the active frame and its parents are frames whose polls
            // are on this thread's stack (invariant of `active`), so alive.
            let f: &AsyncStackFrame = unsafe { &*cur };
            // This frame's current `.await` is where it polls the child
            // pushed last; its cached address beats the one the child took
            // when it was linked (the same, unless one parent polls the
            // child from two `.await`s).
            let child_ra = f.child_return_address();
            if let Some(child) = out.last_mut()
                && child_ra != 0
            {
                child.return_address = child_ra;
            }
            let call_site = f.call_site();
            out.push(ChainFrame {
                call_site,
                await_site: f.await_site(),
                // Set from the parent's `.await` at the next step.
                return_address: 0,
                body_address: match child_ra {
                    0 => call_site.body_address.load(crate::shim::Ordering::Relaxed),
                    ra => ra,
                },
            });
            cur = f.parent.load(crate::shim::Ordering::Relaxed);
        }
        out
    })
    .unwrap_or_default()
}

fn native_frame(ip: usize, s: &Symbol) -> BacktraceFrame {
    BacktraceFrame {
        kind: FrameKind::Native,
        function: s.name.clone(),
        file: s.file.clone(),
        line: s.line,
        column: s.column,
        address: ip,
        running: false,
    }
}

/// This crate's own poll machinery (see [`crate::read::plumbing`]).
fn is_own_plumbing(s: &Symbol) -> bool {
    plumbing::is_own_plumbing(s.name.as_deref(), s.file.as_deref())
}

fn is_short_backtrace_marker(name: Option<&str>) -> bool {
    name.is_some_and(|n| n.contains("__rust_begin_short_backtrace"))
}

/// Whether `s` is `Traced::poll`: one per instrumented level on the
/// stack, inlined or not (the walker's anchor for each async frame; see
/// [`crate::read::plumbing`]).
pub(crate) fn is_level(s: &Symbol) -> bool {
    s.name
        .as_deref()
        .is_some_and(|name| plumbing::is_traced_poll(name, s.file.as_deref()))
}

/// One symbol of the captured stack: physical frame `p`, inlined symbol `s`
/// (innermost first in both).
#[derive(Clone, Copy, PartialEq, Eq)]
struct At {
    p: usize,
    s: usize,
}

fn splice(natives: &[NativeFrame], chain: &[ChainFrame]) -> Resolved {
    let phys: Vec<(usize, Arc<[Symbol]>)> = natives
        .iter()
        .map(|n| {
            let mut symbols = symbolize::resolve(n.ip);
            if symbols.is_empty() {
                symbols = Arc::from(vec![Symbol {
                    name: None,
                    file: None,
                    line: None,
                    column: None,
                }]);
            }
            (n.ip, symbols)
        })
        .collect();
    let flat: Vec<At> = phys
        .iter()
        .enumerate()
        .flat_map(|(p, (_, syms))| (0..syms.len()).map(move |s| At { p, s }))
        .collect();
    let sym = |at: At| &phys[at.p].1[at.s];

    // Where each async frame sits in the native stack: its level symbol.
    // When they cannot all be found (no debug info for inlined code), at
    // the native frame that runs its body's code; failing that, the async
    // frames go together where the first level is (or on top).
    let levels: Vec<usize> = (0..flat.len())
        .filter(|&i| is_level(sym(flat[i])))
        .collect();
    let exact = levels.len() == chain.len();
    let anchors: Vec<usize> = if exact {
        levels
    } else if let Some(bodies) = body_frames(&phys, chain, symbolize::functions) {
        bodies
            .iter()
            .map(|&p| flat.iter().position(|at| at.p == p).unwrap_or(flat.len()))
            .collect()
    } else {
        let at = levels.first().copied().unwrap_or(0);
        vec![at; chain.len()]
    };
    // The body of async frame `i`: the symbol just inside its level, unless
    // that is ours too (a `Traced` directly inside another) or belongs to
    // the frame inside.
    let bodies: Vec<Option<usize>> = (0..chain.len())
        .map(|i| {
            if !exact {
                return None;
            }
            let b = anchors[i].checked_sub(1)?;
            let inner_edge = if i == 0 { 0 } else { anchors[i - 1] + 1 };
            (b >= inner_edge && !is_own_plumbing(sym(flat[b]))).then_some(b)
        })
        .collect();
    let body_sym = |i: usize| bodies[i].map(|b| sym(flat[b]));

    let async_frame = |i: usize| -> BacktraceFrame {
        let c = &chain[i];
        let body = body_sym(i);
        // An unnamed `.traced()` future has no name of its own: use the one
        // debug info gives its body when it is a path (inlined bodies only
        // have short names in line-tables-only builds), else its location.
        let function = match body.and_then(|b| b.name.clone()) {
            Some(name) if c.call_site.is_anonymous() && name.contains("::") => Some(name),
            _ => Some(c.call_site.function()),
        };
        let (file, line, column) = match (i, c.await_site, body) {
            (0, _, Some(b)) => (b.file.clone(), b.line, b.column),
            (0, _, None) => (None, None, None),
            (_, Some(site), _) => (
                Some(site.file().to_string()),
                Some(site.line()),
                Some(site.column()),
            ),
            (_, None, Some(b)) => (b.file.clone(), b.line, b.column),
            (_, None, None) => (None, None, None),
        };
        // The return address into the parent: the one cached for the
        // parent's `.await` (the same address whichever copy of the code
        // runs, and exact even when the parent is inlined into its
        // caller); otherwise (a parent without await sites, such as a
        // `.traced()` block) the parent's body on this very stack.
        let address = match c.return_address {
            0 => bodies
                .get(i + 1)
                .copied()
                .flatten()
                .map_or(0, |b| phys[flat[b].p].0),
            ra => ra,
        };
        // A location from debug info is absolute; show it as the call
        // site's `file!()` path when they name the same file, so every async
        // frame reads the same way.
        let cs = c.call_site;
        let file = match file {
            Some(f) if i == 0 && f.ends_with(cs.file()) => Some(cs.file().to_string()),
            f => f,
        };
        BacktraceFrame {
            kind: FrameKind::Async,
            function,
            file,
            line,
            column,
            address,
            running: i == 0,
        }
    };

    // The `#[traced_async]` form that keeps an `async fn` around the
    // `Traced` (see the macro) leaves that fn's generator just outside the
    // root's level: folded with the root.
    let root_wrapper = |s: &Symbol| {
        chain.last().is_some_and(|c| {
            let cs = c.call_site;
            let generator = s.name.as_deref().is_some_and(|n| {
                // Line-tables-only names, or the full name of the body.
                n.starts_with("{async_fn") || is_body_name(cs, n)
            });
            // Without debug info (no file), the name alone.
            !cs.module_path().is_empty()
                && generator
                && s.file.as_deref().is_none_or(|f| f.ends_with(cs.file()))
        })
    };

    let mut full = Vec::new();
    let mut short = Vec::new();
    let mut trimmed = false;
    let mut emitted = 0;
    let mut outer_folding = true;
    let mut wrapper_pending = true;
    for (fi, &at) in flat.iter().enumerate() {
        while emitted < chain.len() && anchors[emitted] <= fi {
            let f = async_frame(emitted);
            full.push(f.clone());
            short.push(f);
            emitted += 1;
        }
        let s = sym(at);
        full.push(native_frame(phys[at.p].0, s));
        let f = full.last().cloned().expect("just pushed");
        // How many async frames are inside this symbol: 0 for the code
        // running inside the innermost poll, the chain's length for the
        // executor below the root.
        let region = emitted;
        let is_body = bodies.contains(&Some(fi));
        let outer = region == chain.len() && region > 0;
        // Below the root: fold the root's poll machinery, its wrapper
        // generator and spawn wrappers, up to the executor's first frame.
        let outer_plumbing = outer
            && outer_folding
            && if is_own_plumbing(s) {
                true
            } else if wrapper_pending && root_wrapper(s) {
                wrapper_pending = false;
                true
            } else {
                outer_folding = false;
                false
            };
        let plumbing = is_body
            || outer_plumbing
            || (region > 0 && region < chain.len())
            || (region == 0 && !chain.is_empty() && is_own_plumbing(s));
        if is_short_backtrace_marker(s.name.as_deref()) {
            trimmed = true;
        }
        if !plumbing && !trimmed {
            short.push(f);
        }
    }
    while emitted < chain.len() {
        let f = async_frame(emitted);
        full.push(f.clone());
        short.push(f);
        emitted += 1;
    }
    // Like std's short backtraces, start after the panic machinery when the
    // capture happens inside a panic hook.
    if let Some(end) = short.iter().position(|f| {
        f.kind == FrameKind::Native
            && f.function
                .as_deref()
                .is_some_and(|n| n.contains("__rust_end_short_backtrace"))
    }) {
        short.drain(..=end);
    }
    Resolved { short, full }
}

/// For each async frame, innermost first, the physical native frame that
/// runs its body's code, found by the body address the frame recorded
/// (`functions` names the function holding each address) or, when the body
/// ran from another copy of its code, by the body's own symbol
/// (`module::fn::{{closure}}`, when it was not inlined): the walker's
/// anchors when the `Traced::poll` levels cannot be found. Bodies inlined
/// into their parent share its native frame.
///
/// Each frame is searched for from the one inside it outward, so the
/// answers never go back up the stack; a frame of the same function as the
/// one inside it is recursion (a function is never inlined into itself), so
/// its body is further out. A frame whose body is not found goes with the
/// nearest found one outside it (its body is somewhere below those inside
/// it), or, with none outside, with the nearest inside. `None` when no body
/// is found at all.
fn body_frames(
    phys: &[(usize, Arc<[Symbol]>)],
    chain: &[ChainFrame],
    functions: impl Fn(&[usize]) -> Vec<Option<usize>>,
) -> Option<Vec<usize>> {
    // Every address at once: the native frames', then the bodies'.
    let addrs: Vec<usize> = phys
        .iter()
        .map(|&(ip, _)| ip)
        .chain(chain.iter().map(|c| c.body_address))
        .collect();
    let mut starts = functions(&addrs);
    let bodies = starts.split_off(phys.len());
    let mut found: Vec<Option<usize>> = Vec::with_capacity(chain.len());
    let mut from = 0;
    for (i, c) in chain.iter().enumerate() {
        let recursion = i > 0 && std::ptr::eq(chain[i - 1].call_site, c.call_site);
        let start = (c.body_address != 0).then_some(bodies[i]).flatten();
        let first = if recursion && found[i - 1].is_some() {
            from + 1
        } else {
            from
        };
        let by_address =
            start.and_then(|start| (first..phys.len()).find(|&p| starts[p] == Some(start)));
        let at = by_address.or_else(|| {
            (first..phys.len()).find(|&p| {
                phys[p]
                    .1
                    .last()
                    .and_then(|s| s.name.as_deref())
                    .is_some_and(|n| is_body_name(c.call_site, n))
            })
        });
        if let Some(p) = at {
            from = p;
        }
        found.push(at);
    }
    let outermost = found.iter().rev().find_map(|&p| p)?;
    let mut outer = outermost;
    let mut anchors = vec![0; chain.len()];
    for i in (0..chain.len()).rev() {
        outer = found[i].unwrap_or(outer);
        anchors[i] = outer;
    }
    Some(anchors)
}

fn display_path(file: &str) -> String {
    if let Ok(cwd) = std::env::current_dir()
        && let Ok(rel) = std::path::Path::new(file).strip_prefix(&cwd)
    {
        return format!("./{}", rel.display());
    }
    file.to_string()
}

fn write_frames(f: &mut fmt::Formatter<'_>, frames: &[BacktraceFrame]) -> fmt::Result {
    for (i, fr) in frames.iter().enumerate() {
        let name = fr.function.as_deref().unwrap_or("<unknown>");
        match fr.kind {
            FrameKind::Native => writeln!(f, "{i:>4}: {name}")?,
            FrameKind::Async => writeln!(f, "{i:>4}: [async] {name}")?,
        }
        if let Some(file) = &fr.file {
            let verb = match (fr.kind, fr.running) {
                (FrameKind::Async, false) => "awaiting at",
                _ => "at",
            };
            write!(f, "             {verb} {}", display_path(file))?;
            if let Some(line) = fr.line {
                write!(f, ":{line}")?;
                if let Some(col) = fr.column {
                    write!(f, ":{col}")?;
                }
            }
            writeln!(f)?;
        }
    }
    Ok(())
}

impl fmt::Display for Backtrace {
    /// Like `std::backtrace::Backtrace`: numbered frames, innermost first,
    /// each with its location. `{:#}` shows every frame.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if f.alternate() {
            write_frames(f, self.all_frames())
        } else {
            write_frames(f, self.frames())
        }
    }
}

impl fmt::Debug for Backtrace {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let frames = if f.alternate() {
            self.all_frames()
        } else {
            self.frames()
        };
        f.write_str("Backtrace ")?;
        f.debug_list()
            .entries(frames.iter().map(DebugFrame))
            .finish()
    }
}

struct DebugFrame<'a>(&'a BacktraceFrame);

impl fmt::Debug for DebugFrame<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let fr = self.0;
        let mut s = f.debug_map();
        s.entry(&"fn", &fr.function.as_deref().unwrap_or("<unknown>"));
        if fr.kind == FrameKind::Async {
            s.entry(&"async", &true);
        }
        if let Some(file) = &fr.file {
            s.entry(&"file", file);
        }
        if let Some(line) = fr.line {
            s.entry(&"line", &line);
        }
        s.finish()
    }
}

#[cfg(all(test, not(async_stack_loom)))]
mod tests {
    use super::*;

    static LEAF: CallSite = CallSite::new("leaf", "m", "src/m.rs", 1, 1, false);
    static MIDDLE: CallSite = CallSite::new("middle", "m", "src/m.rs", 5, 1, false);
    static TOP: CallSite = CallSite::new("top", "m", "src/m.rs", 9, 1, false);

    /// Native frames at `ips`, each named as given.
    fn stack(frames: &[(usize, &str)]) -> Vec<(usize, Arc<[Symbol]>)> {
        frames
            .iter()
            .map(|&(ip, name)| {
                let symbol = Symbol {
                    name: Some(name.to_string()),
                    file: None,
                    line: None,
                    column: None,
                };
                (ip, Arc::from(vec![symbol]))
            })
            .collect()
    }

    fn chain(frames: &[(&'static CallSite, usize)]) -> Vec<ChainFrame> {
        frames
            .iter()
            .map(|&(call_site, body_address)| ChainFrame {
                call_site,
                await_site: None,
                return_address: 0,
                body_address,
            })
            .collect()
    }

    /// Functions of 0x100 bytes each, at every multiple of 0x100.
    fn function(addrs: &[usize]) -> Vec<Option<usize>> {
        addrs.iter().map(|a| Some(a & !0xff)).collect()
    }

    #[test]
    fn bodies_inlined_into_one_native_frame_share_it() {
        let phys = stack(&[
            (0x150, "m::helper"),
            (0x350, "exec::run"),
            (0x450, "exec::main"),
        ]);
        let c = chain(&[(&LEAF, 0x310), (&MIDDLE, 0x320), (&TOP, 0x330)]);
        assert_eq!(body_frames(&phys, &c, function), Some(vec![1, 1, 1]));
    }

    #[test]
    fn bodies_of_their_own_are_each_at_theirs() {
        let phys = stack(&[
            (0x150, "m::helper"),
            (0x250, "m::leaf::{{closure}}"),
            (0x350, "m::middle::{{closure}}"),
            (0x450, "m::top::{{closure}}"),
            (0x550, "exec::run"),
        ]);
        let c = chain(&[(&LEAF, 0x210), (&MIDDLE, 0x310), (&TOP, 0x410)]);
        assert_eq!(body_frames(&phys, &c, function), Some(vec![1, 2, 3]));
    }

    #[test]
    fn a_recursive_frame_is_further_out_than_the_one_inside_it() {
        let phys = stack(&[
            (0x150, "m::helper"),
            (0x250, "m::leaf::{{closure}}"),
            (0x260, "m::leaf::{{closure}}"),
            (0x270, "m::leaf::{{closure}}"),
            (0x550, "exec::run"),
        ]);
        let c = chain(&[(&LEAF, 0x210), (&LEAF, 0x210), (&LEAF, 0x210)]);
        assert_eq!(body_frames(&phys, &c, function), Some(vec![1, 2, 3]));
    }

    #[test]
    fn a_frame_not_found_goes_with_the_nearest_found_outside_else_inside() {
        let phys = stack(&[
            (0x150, "m::helper"),
            (0x250, "m::helper_of_helper"),
            (0x350, "m::middle::{{closure}}"),
            (0x450, "exec::run"),
        ]);
        // The leaf has reached no `.await` yet and its body was inlined;
        // the top is a `.traced()` block, which has none.
        let c = chain(&[(&LEAF, 0), (&MIDDLE, 0x310), (&TOP, 0)]);
        assert_eq!(body_frames(&phys, &c, function), Some(vec![2, 2, 2]));
    }

    #[test]
    fn a_body_run_from_another_copy_of_its_code_is_found_by_name() {
        // The addresses the bodies recorded are in copies of their code
        // that are not on this stack.
        let phys = stack(&[
            (0x150, "m::helper"),
            (0x250, "m::top::{{closure}}::{{closure}}"),
            (0x350, "exec::run"),
        ]);
        let c = chain(&[(&LEAF, 0x910), (&MIDDLE, 0x920), (&TOP, 0x930)]);
        assert_eq!(body_frames(&phys, &c, function), Some(vec![1, 1, 1]));
    }

    #[test]
    fn without_any_body_found_there_is_no_answer() {
        let phys = stack(&[(0x150, "m::helper"), (0x250, "exec::run")]);
        let c = chain(&[(&LEAF, 0), (&TOP, 0x930)]);
        assert_eq!(body_frames(&phys, &c, function), None);
        assert_eq!(body_frames(&phys, &[], function), None);
        assert_eq!(body_frames(&phys, &c, |a| vec![None; a.len()]), None);
    }

    #[test]
    fn a_body_is_named_by_its_function_and_closures() {
        assert!(is_body_name(&TOP, "m::top::{{closure}}"));
        assert!(is_body_name(&TOP, "m::top::{{closure}}::{{closure}}"));
        assert!(!is_body_name(&TOP, "m::top"));
        assert!(!is_body_name(&TOP, "m::topper::{{closure}}"));
        assert!(!is_body_name(&TOP, "n::top::{{closure}}"));
        assert!(!is_body_name(&TOP, "m::inner::top::{{closure}}"));
    }
}
