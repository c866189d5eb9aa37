//! The intake of on-CPU samples: what turns one captured [`Sample`] into
//! profile entries, on the sampler thread. It checks the live chain
//! against the published stack ([`crate::read::verify`]), keeps the native
//! frames above the innermost poll as (module, build id, offset) triples
//! ([`crate::read::native`]), finding that poll with the symboliser the
//! export names them with, and labels the task
//! ([`crate::sampler::labels`]): a root filed under a tokio task as the
//! roots of that tokio task, as the wall-clock tick does
//! ([`crate::sampler::tokio_tasks`]).

use std::sync::Arc;

use rustc_hash::FxHashMap;

use super::buffers::Sample;
use super::handler::on_signal;
use crate::read::native::elf::Symbolizer;
use crate::read::native::modules::Modules;
use crate::read::native::process;
use crate::read::sites;
use crate::read::verify;
use crate::record::site::CallSite;
use crate::sampler::MAX_DEPTH;
use crate::sampler::labels::{Sources, group_of, site_frame};
use crate::sampler::profile::{FrameRef, Grouping, Profile, SampleState, SampledTask, Weights};
use crate::sampler::tokio_tasks::TokioTasks;
use crate::task::record::RawTask;
use crate::task::registry;
use crate::task::stack::StackCopy;
use crate::task::tokio_task::TokioTask;

/// What the intake keeps between samples.
pub(super) struct Intake {
    /// The record page a sample's record was last found in (see
    /// [`crate::task::registry::index_of`]).
    record_page: usize,
    /// Where native addresses live.
    modules: Modules,
    /// Which native frame holds the innermost poll: the export's
    /// symboliser, with its bounded caches, for the session's life.
    symbolizer: Symbolizer,
    /// The function holding each address asked of
    /// [`Intake::function_start`].
    starts: FxHashMap<usize, Option<usize>>,
}

/// The most addresses [`Intake::function_start`] keeps the answer of: a
/// table of at most 8,192 buckets of 25 bytes, 200 KB. A miss costs a
/// binary search of the symbol table; the addresses a busy profile keeps
/// asking about are a few thousand at most.
const MAX_STARTS: usize = 1 << 12;

/// A native frame kept: module path, build id, offset, and whether the
/// address is a return address.
type Native = (Arc<str>, Arc<[u8]>, u64, bool);

impl Intake {
    /// An intake with a fresh snapshot of the loaded modules, and the
    /// symbols of this binary loaded: the first lookup reads its debug
    /// information, which is better done now than while the first samples
    /// wait in their buffers.
    pub(super) fn new() -> Self {
        let mut intake = Intake {
            record_page: 0,
            modules: Modules::new(),
            symbolizer: Symbolizer::new(),
            starts: FxHashMap::default(),
        };
        let _ = intake.natives(&[on_signal as *const () as usize], &[]);
        intake
    }

    /// Adds the sample `s`, from a timer of period `period_ns`, to
    /// `profile`; `tokio` is the last tick's tokio tasks.
    pub(super) fn take(
        &mut self,
        profile: &mut Profile,
        s: &Sample,
        period_ns: u64,
        tokio: &TokioTasks,
    ) {
        let stats = &mut profile.stats;
        stats.signals += 1;
        stats.attempted += 1;
        stats.ok += 1;
        stats.handler_ns = stats.handler_ns.saturating_add(s.handler_ns);
        let live = &s.live[..s.n_live as usize];
        if s.live_cut || live.len() > MAX_DEPTH {
            stats.truncated += 1;
        }
        // The async frames, root first.
        let mut frames: Vec<FrameRef<'_>> = live.iter().rev().map(|&id| site_frame(id)).collect();
        // Check the live chain against the published stack.
        if s.copied && s.record != 0 && !s.live_cut {
            Self::verify(profile, s, live);
        }
        // The native frames above the innermost poll.
        let natives = self.natives(&s.native[..s.n_native as usize], live);
        for n in natives.iter().rev() {
            frames.push(FrameRef::Native {
                module: &n.0,
                build_id: &n.1,
                offset: n.2,
                call: n.3,
            });
        }
        let (group, task_id, tokio_id, name) = if s.record == 0 || live.is_empty() {
            ("[outside tasks]".to_owned(), s.task_id, 0, String::new())
        } else {
            self.labels(profile.grouping, s, tokio)
        };
        let weights = Weights {
            samples: 1,
            wall_ns: 0,
            cpu_ns: period_ns,
        };
        let task = SampledTask {
            id: task_id,
            tokio_id,
            name: &name,
        };
        profile.add_task(&group, task, SampleState::OnCpu, &frames, weights);
    }

    /// Compares the live chain (innermost first) with the published stack
    /// the handler copied at the same instant.
    fn verify(profile: &mut Profile, s: &Sample, live: &[u32]) {
        if let Some(published) = verify::compare(live, &s.copy, s.running) {
            let m = verify::describe(s.task_id, live, &published);
            verify::report(&m);
            profile.add_mismatch(m);
        }
    }

    /// The group, task id, tokio id (`0`: none) and name of the task a
    /// sample caught: a root filed under a tokio task is labelled as the
    /// roots of that tokio task.
    fn labels(
        &mut self,
        grouping: Grouping,
        s: &Sample,
        tokio: &TokioTasks,
    ) -> (String, u64, u64, String) {
        let now = crate::clock::system_ms();
        let mut copy = StackCopy::default();
        // The record by its index, never by the address the handler took
        // (a number, not a pointer); `read` validates the task id.
        let read = registry::index_of(s.record, &mut self.record_page)
            .and_then(|index| registry::record(index)?.read(index, &mut copy, now));
        match read {
            Some(raw) if raw.id == s.task_id => {
                let tokio_id = raw.tokio.map_or(0, |t| t.id);
                let sources = match raw.tokio {
                    Some(t) => tokio_sources(raw, t, tokio, &mut copy, now),
                    None => {
                        let mut sources = Sources::default();
                        sources.add(raw.id, raw.root_site, raw.name.as_ref(), raw.location);
                        sources
                    }
                };
                let (name, location) = (sources.name(), sources.location());
                let group = group_of(name, location, sources.root_site(), grouping).0;
                let name = name.map_or(String::new(), |n| n.as_str().to_owned());
                (group.into_owned(), sources.task_id(), tokio_id, name)
            }
            // The task ended since: named after its root.
            _ => {
                let root = s.live[s.n_live as usize - 1];
                let group = match site_frame(root) {
                    FrameRef::Async { function, .. } => function.to_owned(),
                    FrameRef::Native { .. } | FrameRef::Cleared => String::new(),
                };
                (group, s.task_id, 0, String::new())
            }
        }
    }

    /// The native frames of `pcs` (innermost first, the interrupted
    /// address then return addresses) that belong above the async chain
    /// `live` (site ids, innermost first): up to the first physical frame
    /// that holds a `Traced::poll` (the innermost poll, whose inlined
    /// frames above the poll the export keeps). Addresses in no loaded
    /// module are left out.
    ///
    /// Without debug info no frame shows a `Traced::poll`: the frames kept
    /// are then those above the first one that runs an async frame's body
    /// ([`Self::classify`]), whose code the async frames stand for, if
    /// every frame between holds a code address of a known function (a
    /// walk without frame pointers reads stack words that are not return
    /// addresses). Otherwise, only the interrupted address, which needs no
    /// unwinding to be right, unless it runs a body itself (see
    /// [`end_without_levels`]).
    fn natives(&mut self, pcs: &[usize], live: &[u32]) -> Vec<Native> {
        let mut kept = Vec::new();
        for (i, &pc) in pcs.iter().enumerate() {
            let Some((path, build_id, offset)) = self.modules.resolve(pc) else {
                continue;
            };
            let call = i > 0;
            let level = self
                .symbolizer
                .in_traced_poll(&path, &build_id, offset, call);
            kept.push((i, (path, build_id, offset, call)));
            if level {
                return kept.into_iter().map(|(_, n)| n).collect();
            }
        }
        let mut bodies = Vec::with_capacity(live.len());
        for &site in live {
            let address = sites::body_address(site);
            if address != 0
                && let Some(start) = self.function_start(address)
                && !bodies.contains(&start)
            {
                bodies.push(start);
            }
        }
        let functions: Vec<&'static CallSite> = live
            .iter()
            .filter_map(|&s| sites::call_site_of(s))
            .collect();
        // Each address's module, as the loop above resolved it.
        let module = |i: usize| {
            kept.binary_search_by_key(&i, |&(j, _)| j)
                .ok()
                .map(|k| &kept[k].1)
        };
        let end = end_without_levels(
            (0..pcs.len()).map(|i| self.classify(pcs[i], i > 0, module(i), &bodies, &functions)),
        );
        kept.into_iter()
            .filter(|&(i, _)| i < end)
            .map(|(_, n)| n)
            .collect()
    }

    /// What the native frame at `pc` (`call`: a return address; `native`:
    /// its module and offset, if it is in one) runs:
    /// the body of one of the async frames of `functions` if the function
    /// holding it is one of `bodies` (the functions that hold the bodies'
    /// code, found from an address each frame recorded there, see
    /// [`sites::body_address`]) or, when the body ran from another copy of
    /// its code, if it is named as the body (`module::fn::{{closure}}`).
    /// Bodies inlined into an outer function share its frame. The walker
    /// places async frames in builds without debug info by the same two
    /// tests.
    fn classify(
        &mut self,
        pc: usize,
        call: bool,
        native: Option<&Native>,
        bodies: &[usize],
        functions: &[&'static CallSite],
    ) -> Runs {
        // An interrupted address is no return address: one byte on, it is
        // looked up where it is.
        let probe = if call { pc } else { pc.wrapping_add(1) };
        let Some(start) = self.function_start(probe) else {
            return Runs::Unknown;
        };
        if bodies.contains(&start) {
            return Runs::Body;
        }
        let named = native.is_some_and(|(path, build_id, offset, _)| {
            let symbols = self.symbolizer.symbolize(path, build_id, *offset, call);
            symbols.last().is_some_and(|s| {
                functions
                    .iter()
                    .any(|c| sites::is_body_name(c, &s.function))
            })
        });
        if named { Runs::Body } else { Runs::Function }
    }

    /// The start of the function holding the return address `address`,
    /// cached (the cache is emptied when it reaches [`MAX_STARTS`]).
    fn function_start(&mut self, address: usize) -> Option<usize> {
        if let Some(&start) = self.starts.get(&address) {
            return start;
        }
        let start = process::function_start(address);
        if self.starts.len() >= MAX_STARTS {
            self.starts.clear();
        }
        self.starts.insert(address, start);
        start
    }
}

/// What a native frame of a sample runs, as [`Intake::classify`] finds it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Runs {
    /// The body of one of the sample's async frames.
    Body,
    /// Another function the symbol tables know.
    Function,
    /// No known function: not a code address.
    Unknown,
}

/// How many of a sample's native frames (innermost first, classified by
/// `frames`) to keep when none holds a `Traced::poll`: those above the
/// first that runs an async frame's body, if each of them but the
/// interrupted one is a known function (a walk that went astray reads
/// words that are not); else the interrupted frame alone, the one frame
/// that needs no walk.
fn end_without_levels(frames: impl Iterator<Item = Runs>) -> usize {
    let mut vouched = true;
    for (i, runs) in frames.enumerate() {
        match runs {
            Runs::Body => return if vouched { i } else { 1 },
            Runs::Function => {}
            Runs::Unknown => vouched &= i == 0,
        }
    }
    1
}

/// The labels' sources of the roots of tokio task `t`, whose root `raw`
/// a sample caught: the roots the last tick found under it that still
/// live, and `raw`, in the order of their first poll.
fn tokio_sources(
    raw: RawTask,
    t: TokioTask,
    tokio: &TokioTasks,
    copy: &mut StackCopy,
    now_ms: u64,
) -> Sources {
    let mut roots = vec![(t.order, raw)];
    for root in tokio.roots_of(t.id) {
        if root.id == roots[0].1.id {
            continue;
        }
        if let Some(other) = root.record.read(root.index, copy, now_ms)
            && other.id == root.id
            && let Some(order) = other.tokio.map(|o| o.order)
        {
            roots.push((order, other));
        }
    }
    roots.sort_by_key(|&(order, _)| order);
    let mut sources = Sources::default();
    for (_, r) in &roots {
        sources.add(r.id, r.root_site, r.name.as_ref(), r.location);
    }
    sources
}

#[cfg(all(test, feature = "tokio"))]
mod tests {
    use super::*;
    use crate::sampler::profile::Profile;
    use crate::sampler::wall::Sampling;
    use crate::task::spawned;
    use crate::task::traced::TracedExt;

    /// A root a signal caught is labelled as the roots of its tokio task:
    /// those the last tick found, in order, with it among them; with no
    /// tick yet, as itself.
    #[test]
    fn a_caught_root_takes_the_labels_of_its_tokio_task() {
        let rt = ::tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let a = std::future::pending::<()>().traced_named("intake-root-a");
        let b =
            spawned(std::future::pending::<()>().traced_named("intake-root-b")).named("intake-b");
        let h = rt.spawn(async move {
            ::tokio::join!(a, b);
        });
        let tokio_id: u64 = h.id().to_string().parse().unwrap();
        rt.block_on(::tokio::task::yield_now());
        let now = crate::clock::system_ms();
        let mut roots = Vec::new();
        let mut copy = StackCopy::default();
        registry::for_each_record(|index, r| {
            if let Some(raw) = r.read(index, &mut copy, now)
                && raw.tokio.is_some_and(|t| t.id == tokio_id)
            {
                roots.push(raw);
            }
        });
        roots.sort_by_key(|r| r.tokio.map(|t| t.order));
        let [a, b] = &roots[..] else {
            panic!("two roots under tokio task {tokio_id}: {roots:?}");
        };
        let mut labels = |raw: &RawTask, tokio: &TokioTasks| {
            let s = tokio_sources(raw.clone(), raw.tokio.unwrap(), tokio, &mut copy, now);
            let name = s.name().map(|n| n.as_str().to_owned());
            (s.task_id(), name, s.root_site())
        };
        let b_alone = labels(b, &TokioTasks::default());
        assert_eq!(b_alone, (b.id, Some("intake-b".to_owned()), b.root_site));
        let mut s = Sampling::new(
            Profile::default(),
            std::time::Duration::from_millis(10),
            usize::MAX,
            1,
        );
        s.tick();
        let want = (a.id, Some("intake-b".to_owned()), a.root_site);
        assert_eq!(labels(a, &s.tokio_tasks), want);
        assert_eq!(labels(b, &s.tokio_tasks), want);
        drop(rt);
    }
}

#[cfg(test)]
mod boundary_tests {
    use super::*;
    use crate::read::symbolize;
    use crate::read::walker::is_level;
    use crate::task::traced::TracedExt;
    use futures_util::FutureExt;
    use std::future::Future;
    use std::pin::Pin;

    /// The physical frames of the stack, innermost first, from the
    /// unwinder (DWARF call frame information: no frame pointers needed).
    #[inline(never)]
    fn capture() -> Vec<usize> {
        let mut ips = Vec::new();
        backtrace::trace(|f| {
            ips.push(f.ip() as usize);
            true
        });
        ips
    }

    /// Without a `Traced::poll` among them (no debug info), the native
    /// frames kept end at the first that runs an async body, when the walk
    /// up to it is vouched for.
    #[test]
    fn without_levels_the_frames_kept_end_at_the_first_body() {
        use Runs::{Body, Function, Unknown};
        let end = |frames: &[Runs]| end_without_levels(frames.iter().copied());
        // The interrupted address runs a body: no native frame above it.
        assert_eq!(end(&[Body, Function]), 0);
        // Two functions the leaf calls, then its body, then the executor.
        assert_eq!(end(&[Function, Function, Body, Function]), 2);
        // An interrupted address in no known function needs no vouching.
        assert_eq!(end(&[Unknown, Function, Body]), 2);
        // A word that is no code address on the way: the walk went astray.
        assert_eq!(end(&[Function, Unknown, Body]), 1);
        // No body found: the interrupted address alone.
        assert_eq!(end(&[Function, Function]), 1);
        assert_eq!(end(&[]), 1);
    }

    /// The native frames an intake keeps end at the physical frame that
    /// holds the innermost `Traced::poll`: the one the walker, through
    /// `backtrace`'s symboliser, finds the innermost level in. Here the
    /// poll is called through a vtable, so it is a physical frame of its
    /// own, which a build with no debug info names from its symbol table
    /// (`scripts/test.sh` runs this file's tests in such a build too).
    #[test]
    fn the_native_frames_kept_end_where_the_walker_finds_the_innermost_poll() {
        let traced: Pin<Box<dyn Future<Output = Vec<usize>>>> =
            Box::pin(async { capture() }.traced());
        let ips = std::hint::black_box(traced)
            .now_or_never()
            .expect("ready at once");
        let walker = ips
            .iter()
            .position(|&ip| symbolize::resolve(ip).iter().any(is_level))
            .expect("the walker finds Traced::poll, by debug info or symbol table");
        let mut intake = Intake::new();
        let kept = intake.natives(&ips, &[]);
        assert_eq!(kept.len(), walker + 1);
        // The export names the frames kept: the capture among them.
        let mut symbolizer = Symbolizer::new();
        let names: Vec<String> = kept
            .iter()
            .flat_map(|(path, build_id, offset, call)| {
                symbolizer.symbolize(path, build_id, *offset, *call)
            })
            .map(|s| s.function)
            .collect();
        assert!(
            names.iter().any(|n| n.ends_with("boundary_tests::capture")),
            "{names:?}"
        );
    }
}
