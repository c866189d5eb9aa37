//! The JSON document of a profile (schema version 1, documented on
//! [`Profile::write_json`]).

use std::io::{self, Write};

use serde::Serialize;

use super::hex;
use crate::read::native::elf::NativeSymbol;
use crate::read::verify::Mismatch;
use crate::sampler::profile::{FrameRef, Grouping, Profile, SampleState, Stats, Weights};

impl Profile {
    /// Writes the profile as JSON, one object in this schema (version 1):
    ///
    /// ```text
    /// {
    ///   "format": "async-stack-profile",
    ///   "version": 1,
    ///   "frequency_hz": 99,             // sampling frequency of the (last) run
    ///   "duration_ns": 2000000000,      // time sampled, over every run
    ///   "start_unix_ns": 1700000000000000000, // when the first run started
    ///   "grouping": "task_name",        // or "spawn_site"
    ///   "stats": { "ticks": 198, "late_ticks": 0, ..., "dropped_groups": 0,
    ///              "dropped": { "samples": 0, "wall_ns": 0, "cpu_ns": 0 } },
    ///   "mismatches": [ { "task_id": 7, "live": ["..."], "published": ["..."] } ],
    ///   "stacks": [                     // in the profile's order (Profile::stacks)
    ///     {
    ///       "group": "api",
    ///       "task_id": 1,               // 0 for a [cleared] stack
    ///       "tokio_id": 34,             // the tokio task's id, null outside tokio
    ///       "task_name": "api",         // "" when unnamed
    ///       "state": "off_cpu",         // or "on_cpu"
    ///       "weights": { "samples": 5, "wall_ns": 50000000, "cpu_ns": 0 },
    ///       "frames": [                 // root first
    ///         { "kind": "async", "function": "tour::serve",
    ///           "file": "src/tour.rs", "line": 12, "column": 9 },
    ///         { "kind": "native", "module": "/usr/bin/tour",
    ///           "build_id": "abcd",     // hex, "" if none
    ///           "offset": 22136, "call": false,
    ///           "symbols": [            // innermost inlined function first
    ///             { "function": "tour::hash", "file": "src/hash.rs", "line": 8 } ] },
    ///         { "kind": "cleared" }     // alone: a stack folded by the budget
    ///       ]
    ///     }
    ///   ]
    /// }
    /// ```
    ///
    /// `stats` has one member per field of [`Stats`], `mismatches` one
    /// object per [`Mismatch`] kept, and `weights` the fields of
    /// [`Weights`]. In `frames`, `column` is 0 when unknown, a native
    /// frame's `offset` is from its module's load address and `call` tells
    /// a return address (symbolised as the call before it), and a symbol's
    /// `file` and `line` are `null` when the module has no debug info for
    /// them. Readers should ignore members they do not know: later versions
    /// of the same `version` may add some (`tokio_id` came so: see
    /// [`StackSample::tokio_id`](crate::sampler::StackSample::tokio_id)).
    ///
    /// ```
    /// use async_stack::sampler::Sampler;
    ///
    /// # fn main() -> std::io::Result<()> {
    /// let profile = Sampler::builder().start()?.stop();
    /// let mut json = Vec::new();
    /// profile.write_json(&mut json)?;
    /// let value: serde_json::Value = serde_json::from_slice(&json)?;
    /// assert_eq!(value["format"], "async-stack-profile");
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    ///
    /// The errors of `out`.
    pub fn write_json(&self, out: &mut impl Write) -> io::Result<()> {
        let symbols = self.symbolize_frames();
        let doc = JsonProfile {
            format: "async-stack-profile",
            version: 1,
            frequency_hz: self.frequency_hz,
            duration_ns: self.duration_ns,
            start_unix_ns: self.start_unix_ns,
            grouping: self.grouping,
            stats: &self.stats,
            mismatches: &self.mismatches,
            stacks: self
                .entries
                .iter()
                .map(|e| JsonStack {
                    group: self.str(e.group),
                    task_id: e.task_id,
                    tokio_id: (e.tokio_id != 0).then_some(e.tokio_id),
                    task_name: self.str(e.task_name),
                    state: e.state,
                    weights: e.weights,
                    frames: self
                        .stack_frames(e.stack)
                        .iter()
                        .map(|&f| self.json_frame(f, &symbols[f as usize]))
                        .collect(),
                })
                .collect(),
        };
        let mut bytes = serde_json::to_vec(&doc)?;
        bytes.push(b'\n');
        out.write_all(&bytes)
    }

    fn json_frame<'a>(&'a self, f: u32, symbols: &'a [NativeSymbol]) -> JsonFrame<'a> {
        match self.frame_ref(f) {
            FrameRef::Async {
                function,
                file,
                line,
                column,
            } => JsonFrame::Async {
                function,
                file,
                line,
                column,
            },
            FrameRef::Native {
                module,
                build_id,
                offset,
                call,
            } => JsonFrame::Native {
                module,
                build_id: hex(build_id),
                offset,
                call,
                symbols: symbols
                    .iter()
                    .map(|s| JsonSymbol {
                        function: &s.function,
                        file: s.file.as_deref(),
                        line: s.line,
                    })
                    .collect(),
            },
            FrameRef::Cleared => JsonFrame::Cleared,
        }
    }
}

#[derive(Serialize)]
struct JsonProfile<'a> {
    format: &'static str,
    version: u32,
    frequency_hz: u32,
    duration_ns: u64,
    start_unix_ns: u64,
    grouping: Grouping,
    stats: &'a Stats,
    mismatches: &'a [Mismatch],
    stacks: Vec<JsonStack<'a>>,
}

#[derive(Serialize)]
struct JsonStack<'a> {
    group: &'a str,
    task_id: u64,
    tokio_id: Option<u64>,
    task_name: &'a str,
    state: SampleState,
    weights: Weights,
    frames: Vec<JsonFrame<'a>>,
}

/// A frame as the schema above spells it: the output's shape, not a
/// model (a [`FrameRef`] tagged by `kind`, the build id in hex, and a
/// native frame's symbols).
#[derive(Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
enum JsonFrame<'a> {
    Async {
        function: &'a str,
        file: &'a str,
        line: u32,
        column: u32,
    },
    Native {
        module: &'a str,
        build_id: String,
        offset: u64,
        call: bool,
        symbols: Vec<JsonSymbol<'a>>,
    },
    Cleared,
}

#[derive(Serialize)]
struct JsonSymbol<'a> {
    function: &'a str,
    file: Option<&'a str>,
    line: Option<u32>,
}
