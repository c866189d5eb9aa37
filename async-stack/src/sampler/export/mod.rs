//! Export of a [`Profile`]: folded stacks, pprof, JSON, and (feature
//! `flamegraph`) an SVG flamegraph.
//!
//! # One reading of a stack for every format
//!
//! Every format shows the same stacks, root first:
//!
//! 1. the **group** (task name or spawn site, see
//!    [`Grouping`](super::profile::Grouping)), as a synthetic outermost
//!    frame, so that a flamegraph splits by group first;
//! 2. the **async frames**, from the task root down, each at the `.await`
//!    it was suspended on (or the line it was running);
//! 3. the **native frames** of on-CPU samples, each symbolised at export
//!    into its inlined frames: one native address can stand for several
//!    functions, which the text formats show outermost first, like the rest
//!    of the stack;
//! 4. or, instead of 2 and 3, the single frame `[cleared]`, for the stacks
//!    the memory budget folded (see [`Profile`]).
//!
//! Native frames are symbolised when exported, not when sampled, so a
//! profile saved by one process exports in another while the binaries are
//! at hand; a frame that does not symbolise shows as
//! `<file name>+0x<offset>`.
//!
//! # Labels
//!
//! The text formats (folded, SVG) name an async frame
//! `function at file:line:column` (`:column` left out when unknown), so
//! that two `.await`s of one function stay two frames; a symbolised native
//! frame is `function at file:line`, or `function` without debug info.
//! Those formats are line based and split frames at `;`: in a label, `;`
//! becomes `,` and control characters (newlines) become spaces, and an
//! empty label becomes `?`. pprof and JSON keep names as they are.
//!
//! The [`Stats`](super::profile::Stats) counters go into every format
//! that can hold them (pprof comments, JSON); the folded and SVG formats
//! have no place for them.
//!
//! # Invariants
//!
//! - The output of each format depends only on the profile (and the
//!   binaries its native frames symbolise in): folded lines are merged and
//!   sorted, and pprof and JSON follow the profile's insertion order.
//! - The folded counts, the pprof `samples/count` values and the JSON
//!   `weights.samples` of a profile add up to the same total,
//!   [`Profile::totals`]`().samples` (the folded format leaves out stacks
//!   whose count is 0).
//!
//! # Files
//!
//! - this file: what every format shares (the frames of a stack, native
//!   frames symbolised once per export);
//! - [`folded`]: folded stacks and the SVG flamegraph drawn from them;
//! - [`pprof`]: the pprof protocol buffer;
//! - `count_pprof.rs` (feature `http`): a pprof profile of stacks counted once each (the
//!   debug endpoint's goroutine profile), with the same tables;
//! - [`json`]: the JSON document.

#[cfg(feature = "http")]
pub(crate) mod count_pprof;
mod folded;
mod json;
mod pprof;
#[cfg(all(test, not(async_stack_loom)))]
mod tests;

use std::fmt::Write as _;

use super::profile::{FrameRef, Profile};
use crate::read::native::elf::{NativeSymbol, Symbolizer, unsymbolized};

impl Profile {
    /// The frame ids of stack `stack`, root first.
    pub(super) fn stack_frames(&self, stack: u32) -> &[u32] {
        self.stacks.get(stack).map_or(&[][..], |s| s)
    }

    /// The symbols of every frame of the table, by frame id: the inlined
    /// functions of a native frame (innermost first, never none), none
    /// for others. A body that line tables name short takes its full name
    /// (see [`name_body`]).
    pub(super) fn symbolize_frames(&self) -> Vec<Vec<NativeSymbol>> {
        let mut symbolizer = Symbolizer::new();
        let mut table: Vec<Vec<NativeSymbol>> = (0..self.frames.len() as u32)
            .map(|f| match self.frame_ref(f) {
                FrameRef::Native {
                    module,
                    build_id,
                    offset,
                    call,
                } => {
                    let mut symbols = symbolizer.symbolize(module, build_id, offset, call);
                    if symbols.is_empty() {
                        symbols.push(unsymbolized(module, offset, ""));
                    }
                    symbols
                }
                FrameRef::Async { .. } | FrameRef::Cleared => Vec::new(),
            })
            .collect();
        // The native frame right above an async one holds that fn's poll.
        for stack in 0..self.stacks.len() as u32 {
            for pair in self.stack_frames(stack).windows(2) {
                if let FrameRef::Async { function, .. } = self.frame_ref(pair[0])
                    && let Some(symbols) = table.get_mut(pair[1] as usize)
                {
                    name_body(function, symbols);
                }
            }
        }
        table
    }
}

/// Names the body of the async fn `function` in the symbols of the native
/// frame that holds its poll (innermost first), as full debug info names
/// it: `module::fn::{{closure}}`.
///
/// Line-tables-only debug info names a `#[traced_async]` body, inlined
/// into its poll (the symbols are cut there), `{async_block#0}`, with no
/// path, so every on-CPU sample in a fn's own code showed that name above
/// the fn. A body that is a function of its own has its full name from the
/// symbol table already. Frames not named by a path (an anonymous
/// `.traced()` future) leave the name as it is.
fn name_body(function: &str, symbols: &mut [NativeSymbol]) {
    let Some(outermost) = symbols.last_mut() else {
        return;
    };
    if outermost.function.starts_with("{async_block#")
        && outermost.file.is_some()
        && function.contains("::")
        && !function.starts_with("<future at ")
    {
        outermost.function = format!("{function}::{{{{closure}}}}");
    }
}

/// Hex digits of a build id.
pub(super) fn hex(bytes: &[u8]) -> String {
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(s, "{b:02x}");
    }
    s
}
