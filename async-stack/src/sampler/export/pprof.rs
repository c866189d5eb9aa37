//! The pprof export: a gzipped `profile.proto` message that `go tool
//! pprof` and other pprof readers open.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::io::{self, Write};

use super::hex;
use crate::sampler::profile::{Frame, Grouping, Profile, Stats};

impl Profile {
    /// Writes the profile as a gzipped pprof protocol buffer
    /// (`profile.proto` of github.com/google/pprof), for `go tool pprof`
    /// and the tools that read it.
    ///
    /// - **Sample types**: `samples/count`, `wall/nanoseconds` and
    ///   `cpu/nanoseconds` ([`Weights`](crate::sampler::Weights)); the default is `samples`. The
    ///   period is one tick, `1e9 / frequency_hz` nanoseconds of wall time.
    /// - **Samples**: one per aggregated stack ([`Profile::stacks`]), with
    ///   the labels `task_id` (a number; left out for `[cleared]` stacks),
    ///   `tokio_task_id` (a number, the tokio task's id, which
    ///   `JoinHandle::id()` displays, as in the debug endpoint's goroutine
    ///   profile: see
    ///   [`StackSample::tokio_id`](crate::sampler::StackSample::tokio_id);
    ///   left out outside tokio), `task_name` (left out when empty) and
    ///   `state` (`on-cpu` or `off-cpu`). Locations are leaf first, as pprof expects, and the
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
        write_gzipped(&self.pprof(), out)
    }

    /// The profile as a pprof message.
    fn pprof(&self) -> proto::Profile {
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
            let mapping = proto::Mapping {
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
        let mut keys = LabelKeys::new(&mut b);
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
            let task = TaskLabels {
                task_id: e.task_id,
                tokio_id: e.tokio_id,
                task_name: self.str(e.task_name),
                state: e.state.as_str(),
            };
            let label = keys.labels(&mut b, &task);
            let w = e.weights;
            samples.push(proto::Sample {
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
        b.into_profile(proto::Profile {
            sample_type,
            sample: samples,
            time_nanos: int64(self.start_unix_ns),
            duration_nanos: int64(self.duration_ns),
            period_type,
            period,
            comment,
            default_sample_type,
            ..Default::default()
        })
    }
}

/// The labels of a task's sample, the same in every pprof profile the
/// crate writes (the sampler's, and the debug endpoint's goroutine
/// profile: `CountPprof` in `count_pprof.rs`, feature `http`), so that
/// `go tool pprof -tagfocus` and `-tags` read both alike.
#[derive(Clone, Copy, Debug)]
pub(crate) struct TaskLabels<'a> {
    /// `task_id`, a number; left out when `0` (a `[cleared]` stack).
    pub(crate) task_id: u64,
    /// `tokio_task_id`, a number: the tokio task's id, which
    /// `JoinHandle::id()` displays; left out when `0` (not a tokio task).
    pub(crate) tokio_id: u64,
    /// `task_name`; left out when empty.
    pub(crate) task_name: &'a str,
    /// `state`: the sampler's `on-cpu` or `off-cpu`, or a dump's task
    /// state (`running`, `scheduled`, `idle`).
    pub(crate) state: &'a str,
}

/// The label keys of one profile's string table: `task_id`, `task_name`
/// and `state` interned when made, `tokio_task_id` at its first use (a
/// profile without tokio tasks has no such string).
pub(super) struct LabelKeys {
    task_id: i64,
    task_name: i64,
    state: i64,
    tokio_id: Option<i64>,
}

impl LabelKeys {
    pub(super) fn new(b: &mut PprofBuilder) -> Self {
        LabelKeys {
            task_id: b.string("task_id"),
            task_name: b.string("task_name"),
            state: b.string("state"),
            tokio_id: None,
        }
    }

    /// `task`'s labels, in the order `task_id`, `tokio_task_id`,
    /// `task_name`, `state`.
    pub(super) fn labels(
        &mut self,
        b: &mut PprofBuilder,
        task: &TaskLabels<'_>,
    ) -> Vec<proto::Label> {
        let mut label = Vec::with_capacity(4);
        if task.task_id != 0 {
            label.push(proto::Label {
                key: self.task_id,
                num: int64(task.task_id),
                ..Default::default()
            });
        }
        if task.tokio_id != 0 {
            label.push(proto::Label {
                key: *self
                    .tokio_id
                    .get_or_insert_with(|| b.string("tokio_task_id")),
                num: int64(task.tokio_id),
                ..Default::default()
            });
        }
        if !task.task_name.is_empty() {
            label.push(proto::Label {
                key: self.task_name,
                str: b.string(task.task_name),
                ..Default::default()
            });
        }
        label.push(proto::Label {
            key: self.state,
            str: b.string(task.state),
            ..Default::default()
        });
        label
    }
}

/// Writes `profile` encoded and gzipped, as pprof files are.
pub(super) fn write_gzipped(profile: &proto::Profile, out: &mut impl Write) -> io::Result<()> {
    use prost::Message as _;
    let bytes = profile.encode_to_vec();
    let mut gz = flate2::write::GzEncoder::new(out, flate2::Compression::default());
    gz.write_all(&bytes)?;
    gz.finish()?;
    Ok(())
}

/// A count as a protobuf `int64`, saturating.
pub(super) fn int64(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
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
pub(super) enum FunctionKind {
    Code,
    Group,
    Cleared,
}

/// The tables of a pprof message being built: strings, functions,
/// locations and mappings, each deduplicated where pprof wants it.
#[derive(Default)]
pub(super) struct PprofBuilder {
    strings: Vec<String>,
    string_ids: HashMap<String, i64>,
    functions: Vec<proto::Function>,
    function_ids: HashMap<(FunctionKind, i64, i64), u64>,
    locations: Vec<proto::Location>,
    mappings: Vec<proto::Mapping>,
}

impl PprofBuilder {
    pub(super) fn string(&mut self, s: &str) -> i64 {
        if let Some(&id) = self.string_ids.get(s) {
            return id;
        }
        let id = self.strings.len() as i64;
        self.strings.push(s.to_owned());
        self.string_ids.insert(s.to_owned(), id);
        id
    }

    pub(super) fn value_type(&mut self, ty: &str, unit: &str) -> proto::ValueType {
        proto::ValueType {
            r#type: self.string(ty),
            unit: self.string(unit),
        }
    }

    /// A line of `function` (interned with its file) at `line:column`.
    pub(super) fn line(
        &mut self,
        kind: FunctionKind,
        function: &str,
        file: &str,
        line: u32,
        column: u32,
    ) -> proto::Line {
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
            self.functions.push(proto::Function {
                id: function_id,
                name,
                system_name: 0,
                filename,
                start_line: 0,
            });
        }
        proto::Line {
            function_id,
            line: i64::from(line),
            column: i64::from(column),
        }
    }

    /// `profile` with these tables (strings, functions, locations,
    /// mappings) in place of its own: the last step of a message.
    pub(super) fn into_profile(self, profile: proto::Profile) -> proto::Profile {
        proto::Profile {
            mapping: self.mappings,
            location: self.locations,
            function: self.functions,
            string_table: self.strings,
            ..profile
        }
    }

    /// A new location (ids are 1-based); `mapping_id` 0 for none.
    pub(super) fn location(
        &mut self,
        mapping_id: u64,
        address: u64,
        line: Vec<proto::Line>,
    ) -> u64 {
        let id = self.locations.len() as u64 + 1;
        self.locations.push(proto::Location {
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
pub(super) mod proto {
    #[derive(Clone, PartialEq, prost::Message)]
    pub(in crate::sampler::export) struct Profile {
        #[prost(message, repeated, tag = "1")]
        pub(in crate::sampler::export) sample_type: Vec<ValueType>,
        #[prost(message, repeated, tag = "2")]
        pub(in crate::sampler::export) sample: Vec<Sample>,
        #[prost(message, repeated, tag = "3")]
        pub(in crate::sampler::export) mapping: Vec<Mapping>,
        #[prost(message, repeated, tag = "4")]
        pub(in crate::sampler::export) location: Vec<Location>,
        #[prost(message, repeated, tag = "5")]
        pub(in crate::sampler::export) function: Vec<Function>,
        #[prost(string, repeated, tag = "6")]
        pub(in crate::sampler::export) string_table: Vec<String>,
        #[prost(int64, tag = "7")]
        pub(in crate::sampler::export) drop_frames: i64,
        #[prost(int64, tag = "8")]
        pub(in crate::sampler::export) keep_frames: i64,
        #[prost(int64, tag = "9")]
        pub(in crate::sampler::export) time_nanos: i64,
        #[prost(int64, tag = "10")]
        pub(in crate::sampler::export) duration_nanos: i64,
        #[prost(message, optional, tag = "11")]
        pub(in crate::sampler::export) period_type: Option<ValueType>,
        #[prost(int64, tag = "12")]
        pub(in crate::sampler::export) period: i64,
        #[prost(int64, repeated, tag = "13")]
        pub(in crate::sampler::export) comment: Vec<i64>,
        #[prost(int64, tag = "14")]
        pub(in crate::sampler::export) default_sample_type: i64,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub(in crate::sampler::export) struct ValueType {
        #[prost(int64, tag = "1")]
        pub(in crate::sampler::export) r#type: i64,
        #[prost(int64, tag = "2")]
        pub(in crate::sampler::export) unit: i64,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub(in crate::sampler::export) struct Sample {
        /// Leaf first.
        #[prost(uint64, repeated, tag = "1")]
        pub(in crate::sampler::export) location_id: Vec<u64>,
        #[prost(int64, repeated, tag = "2")]
        pub(in crate::sampler::export) value: Vec<i64>,
        #[prost(message, repeated, tag = "3")]
        pub(in crate::sampler::export) label: Vec<Label>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub(in crate::sampler::export) struct Label {
        #[prost(int64, tag = "1")]
        pub(in crate::sampler::export) key: i64,
        /// At most one of `str` and `num`.
        #[prost(int64, tag = "2")]
        pub(in crate::sampler::export) str: i64,
        #[prost(int64, tag = "3")]
        pub(in crate::sampler::export) num: i64,
        #[prost(int64, tag = "4")]
        pub(in crate::sampler::export) num_unit: i64,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub(in crate::sampler::export) struct Mapping {
        #[prost(uint64, tag = "1")]
        pub(in crate::sampler::export) id: u64,
        #[prost(uint64, tag = "2")]
        pub(in crate::sampler::export) memory_start: u64,
        #[prost(uint64, tag = "3")]
        pub(in crate::sampler::export) memory_limit: u64,
        #[prost(uint64, tag = "4")]
        pub(in crate::sampler::export) file_offset: u64,
        #[prost(int64, tag = "5")]
        pub(in crate::sampler::export) filename: i64,
        #[prost(int64, tag = "6")]
        pub(in crate::sampler::export) build_id: i64,
        #[prost(bool, tag = "7")]
        pub(in crate::sampler::export) has_functions: bool,
        #[prost(bool, tag = "8")]
        pub(in crate::sampler::export) has_filenames: bool,
        #[prost(bool, tag = "9")]
        pub(in crate::sampler::export) has_line_numbers: bool,
        #[prost(bool, tag = "10")]
        pub(in crate::sampler::export) has_inline_frames: bool,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub(in crate::sampler::export) struct Location {
        #[prost(uint64, tag = "1")]
        pub(in crate::sampler::export) id: u64,
        #[prost(uint64, tag = "2")]
        pub(in crate::sampler::export) mapping_id: u64,
        #[prost(uint64, tag = "3")]
        pub(in crate::sampler::export) address: u64,
        /// Innermost inlined function first.
        #[prost(message, repeated, tag = "4")]
        pub(in crate::sampler::export) line: Vec<Line>,
        #[prost(bool, tag = "5")]
        pub(in crate::sampler::export) is_folded: bool,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub(in crate::sampler::export) struct Line {
        #[prost(uint64, tag = "1")]
        pub(in crate::sampler::export) function_id: u64,
        #[prost(int64, tag = "2")]
        pub(in crate::sampler::export) line: i64,
        #[prost(int64, tag = "3")]
        pub(in crate::sampler::export) column: i64,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub(in crate::sampler::export) struct Function {
        #[prost(uint64, tag = "1")]
        pub(in crate::sampler::export) id: u64,
        #[prost(int64, tag = "2")]
        pub(in crate::sampler::export) name: i64,
        #[prost(int64, tag = "3")]
        pub(in crate::sampler::export) system_name: i64,
        #[prost(int64, tag = "4")]
        pub(in crate::sampler::export) filename: i64,
        #[prost(int64, tag = "5")]
        pub(in crate::sampler::export) start_line: i64,
    }
}
