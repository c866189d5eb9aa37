//! A pprof profile of stacks counted once each, built one stack at a time:
//! what Go serves as its goroutine profile, for a reader that holds no
//! [`Profile`](crate::sampler::Profile) (the debug endpoint's task stacks).
//!
//! It shares the sampler's pprof tables ([`PprofBuilder`]) and encoding, so
//! that both read alike in `go tool pprof`: the same function names and
//! files, the same label keys (`task_id`, `task_name`, `tokio_task_id`,
//! `state`). Each distinct frame (function, file, line, column) is one
//! location; each stack one sample of value 1.

use std::collections::HashMap;
use std::io::{self, Write};

use super::pprof::{FunctionKind, PprofBuilder, int64, proto, write_gzipped};

/// One frame of a counted stack: a function at a line of a file.
#[derive(Clone, Copy, Debug)]
pub(crate) struct CountFrame<'a> {
    pub(crate) function: &'a str,
    pub(crate) file: &'a str,
    pub(crate) line: u32,
    pub(crate) column: u32,
}

/// The value of a sample's label.
#[derive(Clone, Copy, Debug)]
pub(crate) enum LabelValue<'a> {
    Str(&'a str),
    Num(u64),
}

/// A count profile being built: one sample per [`CountPprof::add`].
pub(crate) struct CountPprof {
    b: PprofBuilder,
    sample_type: proto::ValueType,
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
        CountPprof {
            b,
            sample_type,
            samples: Vec::new(),
            locations: HashMap::new(),
        }
    }

    /// Adds one sample of value 1: `frames` leaf first, as pprof orders
    /// them, and `labels` as (key, value).
    pub(crate) fn add<'a>(
        &mut self,
        frames: impl IntoIterator<Item = CountFrame<'a>>,
        labels: &[(&str, LabelValue<'_>)],
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
        let label = labels
            .iter()
            .map(|&(key, value)| {
                let key = self.b.string(key);
                match value {
                    LabelValue::Str(s) => proto::Label {
                        key,
                        str: self.b.string(s),
                        ..Default::default()
                    },
                    LabelValue::Num(n) => proto::Label {
                        key,
                        num: int64(n),
                        ..Default::default()
                    },
                }
            })
            .collect();
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
