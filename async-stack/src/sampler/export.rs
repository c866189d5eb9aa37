//! Export of a [`Profile`]: folded stacks, pprof, JSON, and (feature
//! `flamegraph`) an SVG flamegraph.
//!
//! # One reading of a stack for every format
//!
//! Every format shows the same stacks, root first:
//!
//! 1. the **group** (task name or spawn site, see [`Grouping`]), as a
//!    synthetic outermost frame, so that a flamegraph splits by group
//!    first;
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
//! The [`Stats`] counters go into every format that can hold them (pprof
//! comments, JSON); the folded and SVG formats have no place for them.
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

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::io::{self, Write};

use serde::Serialize;

use super::native::elf::{NativeSymbol, Symbolizer, unsymbolized};
use super::profile::{Frame, RawFrame};
use super::{FrameRef, Grouping, Mismatch, Profile, SampleState, Stats, Weights};

impl Profile {
    /// Writes the profile as folded stacks, the text format of
    /// `flamegraph.pl` and inferno: one line per stack, its frames root
    /// first and separated by `;`, then a space and its sample count
    /// ([`Weights::samples`]).
    ///
    /// The frames of a line are:
    ///
    /// 1. the group (task name or spawn site, see [`Grouping`]);
    /// 2. the async frames, from the task root down, each as
    ///    `function at file:line:column` (`:column` left out when unknown),
    ///    so that two `.await`s of one function stay two frames;
    /// 3. for on-CPU samples, the native frames, symbolised now, each
    ///    expanded into its inlined functions, outermost first:
    ///    `function at file:line`, `function` without debug info, and
    ///    `<file name>+0x<offset>` when the module cannot be read;
    /// 4. or, instead of 2 and 3, `[cleared]`, for the stacks the memory
    ///    budget folded.
    ///
    /// So that every line parses, `;` in a name becomes `,`, control
    /// characters (newlines) become spaces, and an empty name becomes `?`.
    /// Stacks that read the same (several tasks, or on-CPU and off-CPU
    /// samples of one stack) are merged into one line, and lines are
    /// sorted, so the output is the same for the same profile:
    ///
    /// ```text
    /// api;tour::serve at src/tour.rs:12:9;tour::fetch_row at src/tour.rs:31:22 9
    /// worker;tour::crunch at src/tour.rs:60:1;tour::hash at src/hash.rs:8 7
    /// ```
    ///
    /// ```
    /// use async_stack::sampler::Sampler;
    ///
    /// # fn main() -> std::io::Result<()> {
    /// let profile = Sampler::builder().start()?.stop();
    /// let mut folded = Vec::new();
    /// profile.write_folded(&mut folded)?;
    /// for line in String::from_utf8(folded).unwrap().lines() {
    ///     let (stack, count) = line.rsplit_once(' ').unwrap();
    ///     assert!(count.parse::<u64>().is_ok() && !stack.is_empty());
    /// }
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    ///
    /// The errors of `out`.
    pub fn write_folded(&self, out: &mut impl Write) -> io::Result<()> {
        self.write_folded_by(out, |w| w.samples)
    }

    /// Writes folded stacks as [`write_folded`](Self::write_folded) does,
    /// counting each stack by `weight` of its [`Weights`] instead of its
    /// samples: for example `|w| w.wall_ns` for wall-clock time, or
    /// `|w| w.cpu_ns` for CPU time. Stacks whose count is 0 are left out.
    ///
    /// ```
    /// use async_stack::sampler::Sampler;
    ///
    /// # fn main() -> std::io::Result<()> {
    /// let profile = Sampler::builder().start()?.stop();
    /// let mut on_cpu = Vec::new();
    /// profile.write_folded_by(&mut on_cpu, |w| w.cpu_ns)?;
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    ///
    /// The errors of `out`.
    pub fn write_folded_by(
        &self,
        out: &mut impl Write,
        weight: impl Fn(&Weights) -> u64,
    ) -> io::Result<()> {
        let mut text = String::new();
        for (stack, count) in self.folded_lines(weight) {
            let _ = writeln!(text, "{stack} {count}");
        }
        out.write_all(text.as_bytes())
    }

    /// Writes the profile as a gzipped pprof protocol buffer
    /// (`profile.proto` of github.com/google/pprof), for `go tool pprof`
    /// and the tools that read it.
    ///
    /// - **Sample types**: `samples/count`, `wall/nanoseconds` and
    ///   `cpu/nanoseconds` ([`Weights`]); the default is `samples`. The
    ///   period is one tick, `1e9 / frequency_hz` nanoseconds of wall time.
    /// - **Samples**: one per aggregated stack ([`Profile::stacks`]), with
    ///   the labels `task_id` (a number; left out for `[cleared]` stacks),
    ///   `task_name` (left out when empty) and `state` (`on-cpu` or
    ///   `off-cpu`). Locations are leaf first, as pprof expects, and the
    ///   outermost is the group: a synthetic function named after it.
    /// - **Locations**: one per distinct frame. An async frame is a
    ///   function (name and file) at a line (and column). A native frame is
    ///   one location with a line per inlined function, innermost first, in
    ///   the mapping of its module (file name, and build id in hex). Its
    ///   address is synthetic: the frame's offset in its module plus a base
    ///   that gives each module its own range (the mapping's
    ///   `memory_start`, with `file_offset` 0). Mappings are marked as
    ///   symbolised, so pprof does not symbolise them again.
    /// - **Comments**: the [`Stats`] counters, as
    ///   `async-stack stats: ticks=.. late_ticks=.. ...`, and the grouping,
    ///   as `async-stack grouping: task_name`.
    /// - `time_nanos` is when the first run started, and `duration_nanos`
    ///   the time sampled over every run.
    ///
    /// ```
    /// use async_stack::sampler::Sampler;
    ///
    /// # fn main() -> std::io::Result<()> {
    /// let profile = Sampler::builder().start()?.stop();
    /// let path = std::env::temp_dir().join("async-stack-doc.pb.gz");
    /// profile.write_pprof(&mut std::fs::File::create(&path)?)?;
    /// // go tool pprof -top profile.pb.gz
    /// # std::fs::remove_file(&path)?;
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    ///
    /// The errors of `out`.
    pub fn write_pprof(&self, out: &mut impl Write) -> io::Result<()> {
        use prost::Message as _;
        let bytes = self.pprof().encode_to_vec();
        let mut gz = flate2::write::GzEncoder::new(out, flate2::Compression::default());
        gz.write_all(&bytes)?;
        gz.finish()?;
        Ok(())
    }

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
    /// of the same `version` may add some.
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

    /// Writes the profile as an SVG flamegraph drawn by inferno, titled
    /// "async-stack profile", from the lines of
    /// [`write_folded`](Self::write_folded): groups at the bottom, each
    /// stack's width its samples.
    ///
    /// Needs the `flamegraph` feature, off by default because inferno is
    /// licensed CDDL-1.0.
    ///
    /// ```
    /// use async_stack::sampler::Sampler;
    ///
    /// # fn main() -> std::io::Result<()> {
    /// let profile = Sampler::builder().start()?.stop();
    /// let path = std::env::temp_dir().join("async-stack-doc.svg");
    /// // An empty profile has nothing to draw.
    /// if profile.totals().samples > 0 {
    ///     profile.write_svg(&mut std::fs::File::create(&path)?)?;
    /// #   std::fs::remove_file(&path)?;
    /// }
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    ///
    /// The errors of `out`, and [`io::ErrorKind::InvalidData`] from inferno
    /// for a profile with no sample (nothing to draw).
    #[cfg(feature = "flamegraph")]
    pub fn write_svg(&self, out: &mut impl Write) -> io::Result<()> {
        let lines: Vec<String> = self
            .folded_lines(|w| w.samples)
            .into_iter()
            .map(|(stack, count)| format!("{stack} {count}"))
            .collect();
        let mut options = inferno::flamegraph::Options::default();
        options.title = "async-stack profile".to_owned();
        options.count_name = "samples".to_owned();
        inferno::flamegraph::from_lines(&mut options, lines.iter().map(String::as_str), out)
    }

    /// A fixed, hand-made profile for tests of the export formats (here
    /// and in the workspace's integration tests), which cannot add samples
    /// themselves. Not part of the API: it may change at any time.
    ///
    /// Two groups: `api`, with two tasks off-CPU at the same `.await`, a
    /// `join!`-like pair of branches, and a function whose name holds a
    /// `;`; and `worker`, on-CPU with two native frames of `/usr/bin/tour`,
    /// and off-CPU. At 100 Hz for 2 s, 31 samples in all.
    #[doc(hidden)]
    pub fn __testing_profile() -> Profile {
        let at = |function, line, column| RawFrame::Async {
            function,
            file: "src/tour.rs",
            line,
            column,
        };
        let native = |offset, call| RawFrame::Native {
            module_path: "/usr/bin/tour",
            build_id: &[0xab, 0xcd, 0x01],
            offset,
            call,
        };
        // A tick at 100 Hz is 10 ms of wall time; an on-CPU sample is as
        // much CPU time.
        let off = |samples| Weights {
            samples,
            wall_ns: samples * 10_000_000,
            cpu_ns: 0,
        };
        let on = |samples| Weights {
            samples,
            wall_ns: samples * 10_000_000,
            cpu_ns: samples * 10_000_000,
        };
        let serve = at("tour::serve", 10, 5);
        let fetch_row = at("tour::fetch_row", 31, 22);
        let serve_join = at("tour::serve", 12, 9);
        let crunch = at("tour::crunch", 60, 1);
        let mut p = Profile::new(super::DEFAULT_BUDGET);
        p.frequency_hz = 100;
        p.duration_ns = 2_000_000_000;
        p.start_unix_ns = 1_700_000_000_000_000_000;
        let (api, worker, state) = ("api", "worker", SampleState::OffCpu);
        let at_fetch_row = [serve.clone(), fetch_row];
        p.add(api, 1, api, state, &at_fetch_row, off(5));
        p.add(api, 2, api, state, &at_fetch_row, off(4));
        let load_user = at("tour::load_user", 40, 9);
        let load_posts = at("tour::load_posts", 50, 9);
        p.add(api, 3, api, state, &[serve_join.clone(), load_user], off(3));
        p.add(api, 3, api, state, &[serve_join, load_posts], off(3));
        let decode = at("<[u8; 4] as tour::Codec>::decode", 70, 13);
        p.add(api, 1, api, state, &[serve, decode], off(2));
        let on_cpu = [crunch, native(0x1234, true), native(0x5678, false)];
        p.add(worker, 4, "", SampleState::OnCpu, &on_cpu, on(7));
        p.add(worker, 4, "", SampleState::OnCpu, &on_cpu[..2], on(1));
        let waiting = at("tour::crunch", 62, 13);
        p.add(worker, 4, "", state, &[waiting], off(6));
        p.stats = Stats {
            ticks: 200,
            attempted: 31,
            ok: 31,
            retried: 2,
            signals: 8,
            ..Stats::default()
        };
        p
    }
}

/// A text-format label: `;` (the frame separator) becomes `,`, control
/// characters become spaces, and an empty label `?`.
fn folded_label(text: &str) -> String {
    let clean: String = text
        .chars()
        .map(|c| match c {
            ';' => ',',
            c if c.is_control() => ' ',
            c => c,
        })
        .collect();
    let clean = clean.trim();
    if clean.is_empty() {
        "?".to_owned()
    } else {
        clean.to_owned()
    }
}

/// The text label of a symbolised native frame: `function at file:line`.
fn symbol_label(s: &NativeSymbol) -> String {
    let function = folded_label(&s.function);
    match (s.file.as_deref().map(folded_label), s.line) {
        (Some(file), Some(line)) => format!("{function} at {file}:{line}"),
        (Some(file), None) => format!("{function} at {file}"),
        (None, _) => function,
    }
}

/// Hex digits of a build id.
fn hex(bytes: &[u8]) -> String {
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(s, "{b:02x}");
    }
    s
}

/// A count as a protobuf `int64`, saturating.
fn int64(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

impl Profile {
    /// The frame ids of stack `stack`, root first.
    fn stack_frames(&self, stack: u32) -> &[u32] {
        self.stacks.get(stack).map_or(&[][..], |s| s)
    }

    /// The symbols of every frame of the table, by frame id: the inlined
    /// functions of a native frame (innermost first, never none), none
    /// for others.
    fn symbolize_frames(&self) -> Vec<Vec<NativeSymbol>> {
        let mut symbolizer = Symbolizer::new();
        (0..self.frames.len() as u32)
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
            .collect()
    }

    /// The text labels of every frame of the table, by frame id, root
    /// first (a native frame has one per inlined function).
    fn frame_labels(&self) -> Vec<Vec<String>> {
        let symbols = self.symbolize_frames();
        (0..self.frames.len() as u32)
            .map(|f| match self.frame_ref(f) {
                FrameRef::Async {
                    function,
                    file,
                    line,
                    column,
                } => {
                    let (function, file) = (folded_label(function), folded_label(file));
                    vec![if column == 0 {
                        format!("{function} at {file}:{line}")
                    } else {
                        format!("{function} at {file}:{line}:{column}")
                    }]
                }
                FrameRef::Native { .. } => {
                    symbols[f as usize].iter().rev().map(symbol_label).collect()
                }
                FrameRef::Cleared => vec!["[cleared]".to_owned()],
            })
            .collect()
    }

    /// The folded lines, without their counts, merged and sorted, with
    /// their counts by `weight`; lines whose count is 0 are left out.
    fn folded_lines(&self, weight: impl Fn(&Weights) -> u64) -> BTreeMap<String, u64> {
        let labels = self.frame_labels();
        let mut lines: BTreeMap<String, u64> = BTreeMap::new();
        for e in &self.entries {
            let count = weight(&e.weights);
            if count == 0 {
                continue;
            }
            let mut line = folded_label(self.str(e.group));
            for &f in self.stack_frames(e.stack) {
                for label in &labels[f as usize] {
                    line.push(';');
                    line.push_str(label);
                }
            }
            let sum = lines.entry(line).or_default();
            *sum = sum.saturating_add(count);
        }
        lines
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

    /// The profile as a pprof message.
    fn pprof(&self) -> pprof::Profile {
        let mut b = PprofBuilder::default();
        b.string("");
        let sample_type = ["samples", "wall", "cpu"]
            .into_iter()
            .zip(["count", "nanoseconds", "nanoseconds"])
            .map(|(ty, unit)| b.value_type(ty, unit))
            .collect();
        let period_type = Some(b.value_type("wall", "nanoseconds"));
        let default_sample_type = b.string("samples");

        // Mappings: each module gets a synthetic range of addresses, above
        // the highest offset of its frames.
        let mut max_offset = vec![0u64; self.modules.len()];
        for frame in &self.frames.items {
            if let Frame::Native { module, offset, .. } = *frame
                && let Some(m) = max_offset.get_mut(module as usize)
            {
                *m = (*m).max(offset);
            }
        }
        let mut bases = Vec::with_capacity(self.modules.len());
        let mut next_base: u64 = 0x1000;
        for (i, module) in self.modules.items.iter().enumerate() {
            let start = next_base;
            let limit = start.saturating_add(max_offset[i]).saturating_add(0x1000) & !0xfff;
            next_base = limit;
            bases.push(start);
            let mapping = pprof::Mapping {
                id: i as u64 + 1,
                memory_start: start,
                memory_limit: limit,
                file_offset: 0,
                filename: b.string(self.str(module.path)),
                build_id: b.string(&hex(&module.build_id)),
                has_functions: true,
                has_filenames: true,
                has_line_numbers: true,
                has_inline_frames: true,
            };
            b.mappings.push(mapping);
        }

        // One location per frame of the table.
        let symbols = self.symbolize_frames();
        let frame_locations: Vec<u64> = (self.frames.items.iter().zip(&symbols))
            .map(|(frame, inlined)| match *frame {
                Frame::Async {
                    function,
                    file,
                    line,
                    column,
                } => {
                    let (function, file) = (self.str(function), self.str(file));
                    let line = b.line(FunctionKind::Code, function, file, line, column);
                    b.location(0, 0, vec![line])
                }
                Frame::Native { module, offset, .. } => {
                    let lines = inlined
                        .iter()
                        .map(|s| {
                            let file = s.file.as_deref().unwrap_or("");
                            let line = s.line.unwrap_or(0);
                            b.line(FunctionKind::Code, &s.function, file, line, 0)
                        })
                        .collect();
                    // Module ids are checked when a profile is built or
                    // loaded; still, an unknown one gets no mapping.
                    match bases.get(module as usize) {
                        Some(base) => {
                            let address = base.saturating_add(offset);
                            b.location(u64::from(module) + 1, address, lines)
                        }
                        None => b.location(0, 0, lines),
                    }
                }
                Frame::Cleared => {
                    let line = b.line(FunctionKind::Cleared, "[cleared]", "", 0, 0);
                    b.location(0, 0, vec![line])
                }
            })
            .collect();

        let mut group_locations: HashMap<u32, u64> = HashMap::new();
        let keys = [
            b.string("task_id"),
            b.string("task_name"),
            b.string("state"),
        ];
        let mut samples = Vec::with_capacity(self.entries.len());
        for e in &self.entries {
            let group = *group_locations.entry(e.group).or_insert_with(|| {
                let line = b.line(FunctionKind::Group, self.str(e.group), "", 0, 0);
                b.location(0, 0, vec![line])
            });
            let mut location_id: Vec<u64> = self
                .stack_frames(e.stack)
                .iter()
                .rev()
                .map(|&f| frame_locations[f as usize])
                .collect();
            location_id.push(group);
            let mut label = Vec::with_capacity(3);
            if e.task_id != 0 {
                label.push(pprof::Label {
                    key: keys[0],
                    num: int64(e.task_id),
                    ..Default::default()
                });
            }
            if !self.str(e.task_name).is_empty() {
                label.push(pprof::Label {
                    key: keys[1],
                    str: b.string(self.str(e.task_name)),
                    ..Default::default()
                });
            }
            label.push(pprof::Label {
                key: keys[2],
                str: b.string(e.state.as_str()),
                ..Default::default()
            });
            let w = e.weights;
            samples.push(pprof::Sample {
                location_id,
                value: vec![int64(w.samples), int64(w.wall_ns), int64(w.cpu_ns)],
                label,
            });
        }

        let comment = vec![
            b.string(&stats_comment(&self.stats)),
            b.string(&format!(
                "async-stack grouping: {}",
                match self.grouping {
                    Grouping::TaskName => "task_name",
                    Grouping::SpawnSite => "spawn_site",
                }
            )),
        ];
        let period = if self.frequency_hz == 0 {
            0
        } else {
            1_000_000_000 / i64::from(self.frequency_hz)
        };
        pprof::Profile {
            sample_type,
            sample: samples,
            mapping: b.mappings,
            location: b.locations,
            function: b.functions,
            string_table: b.strings,
            drop_frames: 0,
            keep_frames: 0,
            time_nanos: int64(self.start_unix_ns),
            duration_nanos: int64(self.duration_ns),
            period_type,
            period,
            comment,
            default_sample_type,
        }
    }
}

/// The [`Stats`] counters as one pprof comment:
/// `async-stack stats: ticks=.. late_ticks=.. ...`, in field order, the
/// dropped weights as `dropped_samples`, `dropped_wall_ns` and
/// `dropped_cpu_ns`.
fn stats_comment(stats: &Stats) -> String {
    let mut s = String::from("async-stack stats:");
    for (name, value) in stats.fields() {
        let _ = write!(s, " {name}={value}");
    }
    s
}

/// Which kind of pprof function a name is, so that a group, the
/// `[cleared]` frame and code of the same name stay distinct functions.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum FunctionKind {
    Code,
    Group,
    Cleared,
}

/// The tables of a pprof message being built: strings, functions,
/// locations and mappings, each deduplicated where pprof wants it.
#[derive(Default)]
struct PprofBuilder {
    strings: Vec<String>,
    string_ids: HashMap<String, i64>,
    functions: Vec<pprof::Function>,
    function_ids: HashMap<(FunctionKind, i64, i64), u64>,
    locations: Vec<pprof::Location>,
    mappings: Vec<pprof::Mapping>,
}

impl PprofBuilder {
    fn string(&mut self, s: &str) -> i64 {
        if let Some(&id) = self.string_ids.get(s) {
            return id;
        }
        let id = self.strings.len() as i64;
        self.strings.push(s.to_owned());
        self.string_ids.insert(s.to_owned(), id);
        id
    }

    fn value_type(&mut self, ty: &str, unit: &str) -> pprof::ValueType {
        pprof::ValueType {
            r#type: self.string(ty),
            unit: self.string(unit),
        }
    }

    /// A line of `function` (interned with its file) at `line:column`.
    fn line(
        &mut self,
        kind: FunctionKind,
        function: &str,
        file: &str,
        line: u32,
        column: u32,
    ) -> pprof::Line {
        let name = self.string(function);
        let filename = self.string(file);
        let next = self.functions.len() as u64 + 1;
        let function_id = *self
            .function_ids
            .entry((kind, name, filename))
            .or_insert(next);
        if function_id == next {
            // No `system_name`: pprof would take the name for a mangled
            // one and cut `<...>` out of names like `<T as Trait>::f`.
            self.functions.push(pprof::Function {
                id: function_id,
                name,
                system_name: 0,
                filename,
                start_line: 0,
            });
        }
        pprof::Line {
            function_id,
            line: i64::from(line),
            column: i64::from(column),
        }
    }

    /// A new location (ids are 1-based); `mapping_id` 0 for none.
    fn location(&mut self, mapping_id: u64, address: u64, line: Vec<pprof::Line>) -> u64 {
        let id = self.locations.len() as u64 + 1;
        self.locations.push(pprof::Location {
            id,
            mapping_id,
            address,
            line,
            is_folded: false,
        });
        id
    }
}

/// The messages of pprof's `profile.proto`
/// (github.com/google/pprof/proto/profile.proto), with its field tags.
/// String fields are indices into `Profile::string_table`, whose entry 0
/// is "".
mod pprof {
    #[derive(Clone, PartialEq, prost::Message)]
    pub(super) struct Profile {
        #[prost(message, repeated, tag = "1")]
        pub(super) sample_type: Vec<ValueType>,
        #[prost(message, repeated, tag = "2")]
        pub(super) sample: Vec<Sample>,
        #[prost(message, repeated, tag = "3")]
        pub(super) mapping: Vec<Mapping>,
        #[prost(message, repeated, tag = "4")]
        pub(super) location: Vec<Location>,
        #[prost(message, repeated, tag = "5")]
        pub(super) function: Vec<Function>,
        #[prost(string, repeated, tag = "6")]
        pub(super) string_table: Vec<String>,
        #[prost(int64, tag = "7")]
        pub(super) drop_frames: i64,
        #[prost(int64, tag = "8")]
        pub(super) keep_frames: i64,
        #[prost(int64, tag = "9")]
        pub(super) time_nanos: i64,
        #[prost(int64, tag = "10")]
        pub(super) duration_nanos: i64,
        #[prost(message, optional, tag = "11")]
        pub(super) period_type: Option<ValueType>,
        #[prost(int64, tag = "12")]
        pub(super) period: i64,
        #[prost(int64, repeated, tag = "13")]
        pub(super) comment: Vec<i64>,
        #[prost(int64, tag = "14")]
        pub(super) default_sample_type: i64,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub(super) struct ValueType {
        #[prost(int64, tag = "1")]
        pub(super) r#type: i64,
        #[prost(int64, tag = "2")]
        pub(super) unit: i64,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub(super) struct Sample {
        /// Leaf first.
        #[prost(uint64, repeated, tag = "1")]
        pub(super) location_id: Vec<u64>,
        #[prost(int64, repeated, tag = "2")]
        pub(super) value: Vec<i64>,
        #[prost(message, repeated, tag = "3")]
        pub(super) label: Vec<Label>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub(super) struct Label {
        #[prost(int64, tag = "1")]
        pub(super) key: i64,
        /// At most one of `str` and `num`.
        #[prost(int64, tag = "2")]
        pub(super) str: i64,
        #[prost(int64, tag = "3")]
        pub(super) num: i64,
        #[prost(int64, tag = "4")]
        pub(super) num_unit: i64,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub(super) struct Mapping {
        #[prost(uint64, tag = "1")]
        pub(super) id: u64,
        #[prost(uint64, tag = "2")]
        pub(super) memory_start: u64,
        #[prost(uint64, tag = "3")]
        pub(super) memory_limit: u64,
        #[prost(uint64, tag = "4")]
        pub(super) file_offset: u64,
        #[prost(int64, tag = "5")]
        pub(super) filename: i64,
        #[prost(int64, tag = "6")]
        pub(super) build_id: i64,
        #[prost(bool, tag = "7")]
        pub(super) has_functions: bool,
        #[prost(bool, tag = "8")]
        pub(super) has_filenames: bool,
        #[prost(bool, tag = "9")]
        pub(super) has_line_numbers: bool,
        #[prost(bool, tag = "10")]
        pub(super) has_inline_frames: bool,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub(super) struct Location {
        #[prost(uint64, tag = "1")]
        pub(super) id: u64,
        #[prost(uint64, tag = "2")]
        pub(super) mapping_id: u64,
        #[prost(uint64, tag = "3")]
        pub(super) address: u64,
        /// Innermost inlined function first.
        #[prost(message, repeated, tag = "4")]
        pub(super) line: Vec<Line>,
        #[prost(bool, tag = "5")]
        pub(super) is_folded: bool,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub(super) struct Line {
        #[prost(uint64, tag = "1")]
        pub(super) function_id: u64,
        #[prost(int64, tag = "2")]
        pub(super) line: i64,
        #[prost(int64, tag = "3")]
        pub(super) column: i64,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub(super) struct Function {
        #[prost(uint64, tag = "1")]
        pub(super) id: u64,
        #[prost(int64, tag = "2")]
        pub(super) name: i64,
        #[prost(int64, tag = "3")]
        pub(super) system_name: i64,
        #[prost(int64, tag = "4")]
        pub(super) filename: i64,
        #[prost(int64, tag = "5")]
        pub(super) start_line: i64,
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
    task_name: &'a str,
    state: SampleState,
    weights: Weights,
    frames: Vec<JsonFrame<'a>>,
}

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

#[cfg(all(test, not(async_stack_loom)))]
mod tests {
    use super::*;

    /// The folded text of the fixture, exactly.
    const FIXTURE_FOLDED: &str = "\
api;tour::serve at src/tour.rs:10:5;<[u8, 4] as tour::Codec>::decode at src/tour.rs:70:13 2
api;tour::serve at src/tour.rs:10:5;tour::fetch_row at src/tour.rs:31:22 9
api;tour::serve at src/tour.rs:12:9;tour::load_posts at src/tour.rs:50:9 3
api;tour::serve at src/tour.rs:12:9;tour::load_user at src/tour.rs:40:9 3
worker;tour::crunch at src/tour.rs:60:1;tour+0x1234 1
worker;tour::crunch at src/tour.rs:60:1;tour+0x1234;tour+0x5678 7
worker;tour::crunch at src/tour.rs:62:13 6
";

    fn folded(p: &Profile) -> String {
        let mut out = Vec::new();
        p.write_folded(&mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    fn pprof(p: &Profile) -> pprof::Profile {
        use prost::Message as _;
        let mut gz = Vec::new();
        p.write_pprof(&mut gz).unwrap();
        let mut bytes = Vec::new();
        std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(&gz[..]), &mut bytes).unwrap();
        pprof::Profile::decode(&bytes[..]).unwrap()
    }

    #[test]
    fn folded_lines_are_merged_sorted_and_escaped() {
        let p = Profile::__testing_profile();
        assert_eq!(folded(&p), FIXTURE_FOLDED);
        let total: u64 = FIXTURE_FOLDED
            .lines()
            .map(|l| l.rsplit_once(' ').unwrap().1.parse::<u64>().unwrap())
            .sum();
        assert_eq!(total, p.totals().samples);
    }

    #[test]
    fn folded_by_cpu_time_leaves_out_off_cpu_stacks() {
        let p = Profile::__testing_profile();
        let mut out = Vec::new();
        p.write_folded_by(&mut out, |w| w.cpu_ns).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "worker;tour::crunch at src/tour.rs:60:1;tour+0x1234 10000000\n\
             worker;tour::crunch at src/tour.rs:60:1;tour+0x1234;tour+0x5678 70000000\n"
        );
    }

    #[test]
    fn folded_labels_cannot_break_a_line() {
        let mut p = Profile::new(super::super::DEFAULT_BUDGET);
        let frames = [
            RawFrame::Async {
                function: "a;b\nc",
                file: "x.rs",
                line: 1,
                column: 0,
            },
            RawFrame::Async {
                function: "",
                file: "",
                line: 2,
                column: 0,
            },
        ];
        let w = Weights {
            samples: 1,
            ..Weights::default()
        };
        p.add("g\r\n", 1, "", SampleState::OffCpu, &frames, w);
        p.add(" ", 2, "", SampleState::OnCpu, &frames[1..], w);
        assert_eq!(folded(&p), "?;? at ?:2 1\ng;a,b c at x.rs:1;? at ?:2 1\n");
        p.add("", 3, "", SampleState::OnCpu, &[], w);
        assert_eq!(
            folded(&p),
            "? 1\n?;? at ?:2 1\ng;a,b c at x.rs:1;? at ?:2 1\n"
        );
    }

    #[test]
    fn empty_profile_exports_nothing_but_headers() {
        let p = Profile::default();
        assert_eq!(folded(&p), "");
        let decoded = pprof(&p);
        assert!(decoded.sample.is_empty());
        assert_eq!(decoded.string_table[0], "");
        assert_eq!(decoded.period, 0);
    }

    #[test]
    fn pprof_holds_every_sample_with_its_stack_and_labels() {
        let p = Profile::__testing_profile();
        let d = pprof(&p);
        let s = |i: i64| d.string_table[i as usize].as_str();
        assert_eq!(d.string_table[0], "");
        let types: Vec<(&str, &str)> = d
            .sample_type
            .iter()
            .map(|t| (s(t.r#type), s(t.unit)))
            .collect();
        assert_eq!(
            types,
            [
                ("samples", "count"),
                ("wall", "nanoseconds"),
                ("cpu", "nanoseconds")
            ]
        );
        assert_eq!(s(d.default_sample_type), "samples");
        let period = d.period_type.as_ref().unwrap();
        assert_eq!((s(period.r#type), s(period.unit)), ("wall", "nanoseconds"));
        assert_eq!(d.period, 10_000_000);
        assert_eq!(d.duration_nanos, 2_000_000_000);
        assert_eq!(d.time_nanos, 1_700_000_000_000_000_000);
        let comments: Vec<&str> = d.comment.iter().map(|&c| s(c)).collect();
        assert_eq!(
            comments,
            [
                "async-stack stats: ticks=200 late_ticks=0 attempted=31 ok=31 retried=2 \
                 dropped_torn=0 dropped_inconsistent=0 truncated=0 reservoir_skipped=0 \
                 signals=8 signals_lost=0 mismatches=0 sampler_cpu_ns=0 handler_ns=0 \
                 cleared_stacks=0 dropped_groups=0 dropped_samples=0 dropped_wall_ns=0 \
                 dropped_cpu_ns=0",
                "async-stack grouping: task_name",
            ]
        );

        // Every sample: its stack (leaf first, one name per line of each
        // location), values and labels.
        let function = |id: u64| &d.function[id as usize - 1];
        let location = |id: u64| &d.location[id as usize - 1];
        let describe = |sample: &pprof::Sample| {
            let mut frames = Vec::new();
            for &l in &sample.location_id {
                assert_eq!(location(l).id, l);
                for line in &location(l).line {
                    let f = function(line.function_id);
                    assert_eq!(f.id, line.function_id);
                    frames.push(format!("{}:{}", s(f.name), line.line));
                }
            }
            let labels: Vec<String> = sample
                .label
                .iter()
                .map(|l| {
                    if l.str != 0 {
                        format!("{}={}", s(l.key), s(l.str))
                    } else {
                        format!("{}={}", s(l.key), l.num)
                    }
                })
                .collect();
            (frames.join(" < "), sample.value.clone(), labels.join(","))
        };
        let got: Vec<_> = d.sample.iter().map(describe).collect();
        let ms = 1_000_000;
        let want = [
            (
                "tour::fetch_row:31 < tour::serve:10 < api:0",
                vec![5, 50 * ms, 0],
                "task_id=1,task_name=api,state=off-cpu",
            ),
            (
                "tour::fetch_row:31 < tour::serve:10 < api:0",
                vec![4, 40 * ms, 0],
                "task_id=2,task_name=api,state=off-cpu",
            ),
            (
                "tour::load_user:40 < tour::serve:12 < api:0",
                vec![3, 30 * ms, 0],
                "task_id=3,task_name=api,state=off-cpu",
            ),
            (
                "tour::load_posts:50 < tour::serve:12 < api:0",
                vec![3, 30 * ms, 0],
                "task_id=3,task_name=api,state=off-cpu",
            ),
            (
                "<[u8; 4] as tour::Codec>::decode:70 < tour::serve:10 < api:0",
                vec![2, 20 * ms, 0],
                "task_id=1,task_name=api,state=off-cpu",
            ),
            (
                "tour+0x5678:0 < tour+0x1234:0 < tour::crunch:60 < worker:0",
                vec![7, 70 * ms, 70 * ms],
                "task_id=4,state=on-cpu",
            ),
            (
                "tour+0x1234:0 < tour::crunch:60 < worker:0",
                vec![1, 10 * ms, 10 * ms],
                "task_id=4,state=on-cpu",
            ),
            (
                "tour::crunch:62 < worker:0",
                vec![6, 60 * ms, 0],
                "task_id=4,state=off-cpu",
            ),
        ];
        let want: Vec<_> = want
            .into_iter()
            .map(|(f, v, l)| (f.to_owned(), v, l.to_owned()))
            .collect();
        assert_eq!(got, want);
        let total: i64 = d.sample.iter().map(|s| s.value[0]).sum();
        assert_eq!(total as u64, p.totals().samples);

        // One location per distinct frame, plus one per group; functions
        // are shared by the locations of one function.
        assert_eq!(d.location.len(), 10 + 2);
        let names: Vec<&str> = d.function.iter().map(|f| s(f.name)).collect();
        assert_eq!(
            names,
            [
                "tour::serve",
                "tour::fetch_row",
                "tour::load_user",
                "tour::load_posts",
                "<[u8; 4] as tour::Codec>::decode",
                "tour::crunch",
                "tour+0x1234",
                "tour+0x5678",
                "api",
                "worker",
            ]
        );
        assert_eq!(s(d.function[0].filename), "src/tour.rs");

        // The native frames: in the module's mapping, at synthetic
        // addresses that keep their offsets.
        assert_eq!(d.mapping.len(), 1);
        let m = &d.mapping[0];
        assert_eq!((s(m.filename), s(m.build_id)), ("/usr/bin/tour", "abcd01"));
        assert!(m.has_functions && m.has_inline_frames);
        let native: Vec<u64> = d
            .location
            .iter()
            .filter(|l| l.mapping_id == m.id)
            .map(|l| l.address - m.memory_start)
            .collect();
        assert_eq!(native, [0x1234, 0x5678]);
        assert!(d.location.iter().all(|l| l.address < m.memory_limit));
    }

    #[test]
    fn pprof_native_frame_has_a_line_per_inlined_function_innermost_first() {
        let p = Profile::__testing_profile();
        let symbols = p.symbolize_frames();
        let d = pprof(&p);
        for (f, inlined) in symbols.iter().enumerate() {
            if inlined.is_empty() {
                continue;
            }
            // Locations of the frame table come first, in its order.
            let location = &d.location[f];
            let names: Vec<&str> = location
                .line
                .iter()
                .map(|l| {
                    d.string_table[d.function[l.function_id as usize - 1].name as usize].as_str()
                })
                .collect();
            let want: Vec<&str> = inlined.iter().map(|s| s.function.as_str()).collect();
            assert_eq!(names, want);
        }
    }

    #[test]
    fn json_follows_the_documented_schema() {
        let p = Profile::__testing_profile();
        let mut out = Vec::new();
        p.write_json(&mut out).unwrap();
        assert_eq!(out.last(), Some(&b'\n'));
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v["format"], "async-stack-profile");
        assert_eq!(v["version"], 1);
        assert_eq!(v["frequency_hz"], 100);
        assert_eq!(v["duration_ns"], 2_000_000_000u64);
        assert_eq!(v["start_unix_ns"], 1_700_000_000_000_000_000u64);
        assert_eq!(v["grouping"], "task_name");
        assert_eq!(v["stats"]["ticks"], 200);
        assert_eq!(v["stats"]["dropped"]["samples"], 0);
        assert_eq!(v["mismatches"], serde_json::json!([]));
        let stacks = v["stacks"].as_array().unwrap();
        assert_eq!(stacks.len(), 8);
        assert_eq!(
            stacks[0],
            serde_json::json!({
                "group": "api", "task_id": 1, "task_name": "api", "state": "off_cpu",
                "weights": {"samples": 5, "wall_ns": 50_000_000u64, "cpu_ns": 0},
                "frames": [
                    {"kind": "async", "function": "tour::serve", "file": "src/tour.rs",
                     "line": 10, "column": 5},
                    {"kind": "async", "function": "tour::fetch_row", "file": "src/tour.rs",
                     "line": 31, "column": 22},
                ],
            })
        );
        assert_eq!(stacks[5]["state"], "on_cpu");
        assert_eq!(stacks[5]["task_name"], "");
        assert_eq!(
            stacks[5]["frames"][2],
            serde_json::json!({
                "kind": "native", "module": "/usr/bin/tour", "build_id": "abcd01",
                "offset": 0x5678, "call": false,
                "symbols": [{"function": "tour+0x5678", "file": null, "line": null}],
            })
        );
        let total: u64 = stacks
            .iter()
            .map(|s| s["weights"]["samples"].as_u64().unwrap())
            .sum();
        assert_eq!(total, p.totals().samples);
    }

    #[test]
    fn cleared_stacks_export_as_one_frame() {
        // Enough distinct stacks for the smallest budget to clear some.
        let mut p = Profile::new(super::super::MIN_BUDGET);
        let names: Vec<String> = (0..4000).map(|i| format!("function_number_{i}")).collect();
        for (i, name) in names.iter().enumerate() {
            let frame = RawFrame::Async {
                function: name,
                file: "src/lib.rs",
                line: 1,
                column: 0,
            };
            let w = Weights {
                samples: 1 + i as u64 % 3,
                ..Weights::default()
            };
            p.add(
                ["g", "h"][i % 2],
                i as u64 + 1,
                "",
                SampleState::OffCpu,
                &[frame],
                w,
            );
        }
        assert!(p.stats().cleared_stacks > 0);
        let cleared = |group: &str| -> u64 {
            p.stacks()
                .filter(|s| s.group() == group && s.frames().eq([FrameRef::Cleared]))
                .map(|s| s.weights().samples)
                .sum()
        };
        let text = folded(&p);
        let count = |line: &str| text.lines().find_map(|l| l.strip_prefix(line));
        assert_eq!(count("g;[cleared] "), Some(&*cleared("g").to_string()));
        assert_eq!(count("h;[cleared] "), Some(&*cleared("h").to_string()));
        let total: u64 = text
            .lines()
            .map(|l| l.rsplit_once(' ').unwrap().1.parse::<u64>().unwrap())
            .sum();
        assert_eq!(total, p.totals().samples);

        let d = pprof(&p);
        let cleared_fn = d
            .function
            .iter()
            .find(|f| d.string_table[f.name as usize] == "[cleared]")
            .expect("a [cleared] function");
        let cleared_samples: i64 = d
            .sample
            .iter()
            .filter(|s| {
                let leaf = &d.location[s.location_id[0] as usize - 1];
                leaf.line[0].function_id == cleared_fn.id
            })
            .map(|s| s.value[0])
            .sum();
        assert_eq!(cleared_samples as u64, cleared("g") + cleared("h"));
    }

    #[cfg(feature = "flamegraph")]
    #[test]
    fn svg_shows_groups_and_frames() {
        let p = Profile::__testing_profile();
        let mut out = Vec::new();
        p.write_svg(&mut out).unwrap();
        let svg = String::from_utf8(out).unwrap();
        assert!(svg.starts_with("<?xml"), "{svg}");
        assert!(svg.contains("async-stack profile"));
        for title in [
            "all (31 samples, 100%)",
            "worker (14 samples, 45.16%)",
            "api (17 samples, 54.84%)",
            "tour::fetch_row at src/tour.rs:31:22 (9 samples, 29.03%)",
            "&lt;[u8, 4] as tour::Codec&gt;::decode at src/tour.rs:70:13 (2 samples, 6.45%)",
        ] {
            assert!(svg.contains(&format!("<title>{title}</title>")), "{title}");
        }
    }
}
