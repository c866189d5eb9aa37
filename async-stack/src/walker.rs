//! The walker: captures the current thread's native stack and its async
//! frame chain in one go, and splices them into one backtrace.
//!
//! # Capture
//!
//! [`backtrace()`] records, without symbolising anything:
//! - every native frame's instruction pointer and stack address (CFA);
//! - the thread's active async chain, innermost first: for each frame its
//!   call site, its await site, its return address and its *poll marker*,
//!   an address inside the physical frame of its never-inlined
//!   `Traced::poll`.
//!
//! # Splicing
//!
//! Stack addresses grow towards callers, so the poll markers cut the native
//! stack into regions: native frames below the innermost marker ran inside
//! the innermost poll (the synchronous code the leaf is executing); frames
//! between two markers are poll and generator plumbing between two async
//! frames (the parent's body, `join!`, `Shared`, a nested `block_on`);
//! frames above the outermost marker are the executor, below the task root.
//!
//! The default view shows the innermost region, then the async frames, then
//! the executor (trimmed at `__rust_begin_short_backtrace` like std's short
//! backtraces). The innermost async frame shows where it is running now;
//! every other async frame shows the `.await` it is suspended on. The
//! alternate view (`{:#}`, [`Backtrace::all_frames`]) shows every native
//! frame, plumbing included.
//!
//! Symbols are resolved on first display or inspection and cached per
//! address for the whole process ([`crate::symbolize`]).

use std::fmt;
use std::sync::{Arc, OnceLock};

use crate::frame::AsyncStackFrame;
use crate::site::{AwaitSite, CallSite};
use crate::symbolize::{self, Symbol};

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
    sp: usize,
}

#[derive(Clone, Copy, Debug)]
struct ChainFrame {
    call_site: &'static CallSite,
    await_site: Option<&'static AwaitSite>,
    marker: usize,
    return_address: usize,
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
/// Each async frame records, while it is polled, an address on the native
/// stack inside its own poll. Native stack addresses grow towards callers,
/// so those addresses cut the native stack into regions: the frames below
/// the innermost one ran inside the innermost poll (the synchronous code the
/// leaf is executing, shown first); the frames between two of them are poll
/// and generator plumbing (hidden, except with `{:#}`); the frames above the
/// outermost are the executor (shown last, trimmed like std's short
/// backtraces).
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
        let chain = capture_chain();
        let mut natives = Vec::with_capacity(64);
        let mut skip_until = None;
        backtrace::trace(|f| {
            if f.symbol_address() as usize == entry {
                skip_until = Some(natives.len());
            }
            natives.push(NativeFrame {
                ip: f.ip() as usize,
                sp: f.sp() as usize,
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
    crate::active::with(|a| {
        let mut out = Vec::new();
        let mut cur = a.frame.get();
        // A bound against a corrupted chain; real chains are far shorter.
        while !cur.is_null() && out.len() < 100_000 {
            // SAFETY: the active frame and its parents are frames whose polls
            // are on this thread's stack (invariant of `active`), so alive.
            let f: &AsyncStackFrame = unsafe { &*cur };
            out.push(ChainFrame {
                call_site: f.call_site(),
                await_site: f.await_site(),
                marker: f.poll_marker.load(crate::sync::Ordering::Relaxed),
                return_address: f.return_address(),
            });
            cur = f.parent.load(crate::sync::Ordering::Relaxed);
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

/// This crate's own poll machinery (and the thread-local access it
/// inlines), which never belongs in a user's view. Recognised by name, or
/// by source file when line-tables-only debug info gives inlined frames
/// short names.
fn is_own_plumbing(s: &Symbol) -> bool {
    const OWN_SRC: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/src/");
    let by_name = s.name.as_deref().is_some_and(|n| {
        n.starts_with("async_stack::")
            || n.starts_with("<async_stack::")
            || n.starts_with("std::thread::local::LocalKey")
    });
    let by_file = s.file.as_deref().is_some_and(|f| {
        (f.starts_with(OWN_SRC) && !f.ends_with("/src/walker.rs"))
            || f.ends_with("std/src/thread/local.rs")
    });
    by_name || by_file
}

fn is_short_backtrace_marker(name: Option<&str>) -> bool {
    name.is_some_and(|n| n.contains("__rust_begin_short_backtrace"))
}

/// One physical native frame with its symbols (innermost inlined first).
struct Phys {
    ip: usize,
    region: usize,
    symbols: Arc<[Symbol]>,
}

fn splice(natives: &[NativeFrame], chain: &[ChainFrame]) -> Resolved {
    let phys: Vec<Phys> = natives
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
            Phys {
                ip: n.ip,
                // Region r: above the markers of chain[..r]. A frame at or
                // below a marker ran inside that poll.
                region: chain
                    .iter()
                    .take_while(|c| n.sp != 0 && c.marker != 0 && n.sp > c.marker)
                    .count(),
                symbols,
            }
        })
        .collect();

    // For each async frame, its body: inlined into its marker frame
    // (`call_body`, the outermost frame of its region), as the outermost
    // symbol there that is not ours; or else the physical frame just inside
    // the marker frame, as that frame's outermost symbol.
    let body_of = |i: usize| -> Option<(usize, usize)> {
        let marker_frame = phys.iter().rposition(|p| p.region == i)?;
        if let Some(si) = phys[marker_frame]
            .symbols
            .iter()
            .rposition(|s| !is_own_plumbing(s))
        {
            return Some((marker_frame, si));
        }
        let body = marker_frame.checked_sub(1)?;
        (phys[body].region == i).then(|| (body, phys[body].symbols.len() - 1))
    };
    // `#[traced_async]` wraps the root's body in a generator of its own (the
    // `async fn` itself), just outside the root's `Traced::poll`;
    // `.traced()` futures have none.
    let root_has_wrapper = chain
        .last()
        .is_some_and(|c| !c.call_site.module_path().is_empty());
    let mut outer_folding = true;
    let mut wrapper_pending = root_has_wrapper;
    let bodies: Vec<Option<(usize, usize)>> = (0..chain.len()).map(body_of).collect();

    let async_frame = |i: usize| -> BacktraceFrame {
        let c = &chain[i];
        let body = bodies[i].map(|(p, s)| &phys[p].symbols[s]);
        // An unnamed `.traced()` future has no name of its own: prefer the
        // one debug info gives its body.
        let function = match body.and_then(|b| b.name.clone()) {
            Some(name) if c.call_site.is_anonymous() => Some(name),
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
        // The return address into the parent, read off this very stack
        // (the parent's body frame) when the capture has it; otherwise the
        // one the frame cached.
        let address = bodies
            .get(i + 1)
            .copied()
            .flatten()
            .map_or(c.return_address, |(p, _)| phys[p].ip);
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

    let mut full = Vec::new();
    let mut short = Vec::new();
    let mut trimmed = false;
    let mut emitted_async = 0;
    for (pi, p) in phys.iter().enumerate() {
        while emitted_async < chain.len() && emitted_async < p.region {
            let f = async_frame(emitted_async);
            full.push(f.clone());
            short.push(f);
            emitted_async += 1;
        }
        for (si, s) in p.symbols.iter().enumerate() {
            let f = native_frame(p.ip, s);
            full.push(f.clone());
            let is_body = bodies.contains(&Some((pi, si)));
            let outer = p.region == chain.len() && p.region > 0;
            // Below the root: fold the root's poll machinery, its wrapper
            // generator and spawn wrappers, up to the executor's first frame.
            let outer_plumbing = outer && outer_folding && {
                if is_own_plumbing(s) {
                    true
                } else if wrapper_pending {
                    wrapper_pending = false;
                    true
                } else {
                    outer_folding = false;
                    false
                }
            };
            let plumbing = is_body
                || outer_plumbing
                || (p.region > 0 && p.region < chain.len())
                || (p.region == 0 && !chain.is_empty() && is_own_plumbing(s));
            if is_short_backtrace_marker(s.name.as_deref()) {
                trimmed = true;
            }
            if !plumbing && !trimmed {
                short.push(f);
            }
        }
    }
    while emitted_async < chain.len() {
        let f = async_frame(emitted_async);
        full.push(f.clone());
        short.push(f);
        emitted_async += 1;
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
