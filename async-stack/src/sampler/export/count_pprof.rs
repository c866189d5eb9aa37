//! A pprof profile of stacks counted once each, built one stack at a time:
//! what Go serves as its goroutine profile, for a reader that holds no
//! [`Profile`](crate::sampler::Profile) (the debug endpoint's task stacks).
//!
//! It shares the sampler's pprof tables ([`PprofBuilder`]), labels
//! ([`TaskLabels`]) and encoding, so that both read alike in
//! `go tool pprof`: the same function names and files, the same label keys
//! and rules. Each distinct frame (function, file, line, column) is one
//! location; each stack one sample of value 1.

use std::collections::HashMap;
use std::io::{self, Write};

/// The labels of a counted stack: those of every pprof profile.
pub(crate) use super::pprof::TaskLabels;
use super::pprof::{FunctionKind, LabelKeys, PprofBuilder, int64, proto, write_gzipped};

/// One frame of a counted stack: a function at a line of a file, the one
/// line of a pprof location. Its own type, not a
/// [`FrameRef`](crate::sampler::FrameRef): a counted stack has no native
/// frame to symbolise and no budget to clear it, and its reader (the
/// goroutine profile) picks which of a dump frame's locations it shows.
#[derive(Clone, Copy, Debug)]
pub(crate) struct CountFrame<'a> {
    pub(crate) function: &'a str,
    pub(crate) file: &'a str,
    pub(crate) line: u32,
    pub(crate) column: u32,
}

/// A count profile being built: one sample per [`CountPprof::add`].
pub(crate) struct CountPprof {
    b: PprofBuilder,
    sample_type: proto::ValueType,
    keys: LabelKeys,
    samples: Vec<proto::Sample>,
    /// Location ids by (function id, line, column).
    locations: HashMap<(u64, u32, u32), u64>,
}

impl CountPprof {
    /// An empty profile whose samples count `what` (`goroutine`).
    pub(crate) fn new(what: &str) -> Self {
        let mut b = PprofBuilder::default();
        b.string("");
        let sample_type = b.value_type(what, "count");
        let keys = LabelKeys::new(&mut b);
        CountPprof {
            b,
            sample_type,
            keys,
            samples: Vec::new(),
            locations: HashMap::new(),
        }
    }

    /// Adds one sample of value 1: `frames` leaf first, as pprof orders
    /// them, labelled as `task`.
    pub(crate) fn add<'a>(
        &mut self,
        frames: impl IntoIterator<Item = CountFrame<'a>>,
        task: &TaskLabels<'_>,
    ) {
        let location_id = frames
            .into_iter()
            .map(|f| {
                let line = self
                    .b
                    .line(FunctionKind::Code, f.function, f.file, f.line, f.column);
                let key = (line.function_id, f.line, f.column);
                match self.locations.get(&key) {
                    Some(&id) => id,
                    None => {
                        let id = self.b.location(0, 0, vec![line]);
                        self.locations.insert(key, id);
                        id
                    }
                }
            })
            .collect();
        let label = self.keys.labels(&mut self.b, task);
        self.samples.push(proto::Sample {
            location_id,
            value: vec![1],
            label,
        });
    }

    /// Writes the profile gzipped, as [`Profile::write_pprof`] does;
    /// `time_nanos` is `now_unix_ns`.
    ///
    /// [`Profile::write_pprof`]: crate::sampler::Profile::write_pprof
    pub(crate) fn write(self, now_unix_ns: u64, out: &mut impl Write) -> io::Result<()> {
        let CountPprof {
            mut b,
            sample_type,
            samples,
            ..
        } = self;
        let period_type = Some(sample_type.clone());
        let default_sample_type = sample_type.r#type;
        let comment = vec![b.string("async-stack: one sample per live task")];
        let profile = b.into_profile(proto::Profile {
            sample_type: vec![sample_type],
            sample: samples,
            time_nanos: int64(now_unix_ns),
            period_type,
            period: 1,
            comment,
            default_sample_type,
            ..Default::default()
        });
        write_gzipped(&profile, out)
    }
}
