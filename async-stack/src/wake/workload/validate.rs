//! The bounds of a workload, and their checks.
//!
//! A workload file is input. Replaying one spawns a task per instance,
//! allocates a channel per consumer instance and a reply per message, and
//! burns and sleeps for the times it gives: each of those is bounded here
//! (the table is in the [module docs](super#bounds)), so that a hostile file
//! can neither make a replay allocate or spawn without bound nor make it
//! run for days. [`Workload::validate`] checks all of them in document
//! order and reports the first that fails, naming the field by its JSON
//! path.
//!
//! The checks run on the parsed value, not while parsing: serde's types
//! already bound every number (`u32`, `u64`), and a parsed workload takes
//! memory proportional to the text that spelled it. The checks add little
//! to it: a table of the names seen, each with the position of its entry
//! (a few integers, spelled out as a path only in an error).

use std::collections::HashMap;
use std::fmt;

use super::{Workload, WorkloadError};

impl Workload {
    /// The only format version: 1.
    pub const VERSION: u32 = 1;

    /// The longest default replay, `duration_ms`: one hour.
    pub const MAX_DURATION_MS: u64 = 3_600_000;

    /// The longest name, in bytes (of UTF-8).
    pub const MAX_NAME_BYTES: usize = 128;

    /// The most instances of one consumer or independent entry.
    pub const MAX_INSTANCES: u32 = 10_000;

    /// The most tasks of a workload: one per producer, plus every entry's
    /// `instances`.
    pub const MAX_TASKS: u64 = 100_000;

    /// The longest busy, sleep or period time, in µs: 60 s.
    pub const MAX_TIME_US: u64 = 60_000_000;

    /// The shortest `period_us` of an independent task: 1 ms, tokio's
    /// timer resolution. Shorter periods would last 1 ms anyway.
    pub const MIN_PERIOD_US: u64 = 1_000;

    /// The most messages a producer sends per cycle.
    pub const MAX_FAN_OUT: u32 = 100_000;

    /// The largest file [`Workload::load`] reads: 4 MiB, hundreds of times
    /// a workload of the most tasks needs (an entry's `instances` stands for
    /// many tasks).
    pub const MAX_FILE_BYTES: u64 = 4 << 20;

    /// The most messages waiting in one consumer instance's channel during
    /// a replay: a producer that finds the channel full waits for room.
    pub const CHANNEL_CAPACITY: usize = 64;

    /// Checks every bound of the [module docs](super#bounds), and returns
    /// the first that fails, in document order, naming the field by its
    /// JSON path.
    ///
    /// ```
    /// use async_stack::workload::{Consumer, Group, Producer, Workload};
    ///
    /// let mut workload = Workload {
    ///     version: 1,
    ///     duration_ms: 1000,
    ///     groups: vec![Group {
    ///         name: "rpc".into(),
    ///         producer: Producer {
    ///             name: "client".into(),
    ///             busy_us_per_cycle: 100,
    ///             sleep_us_per_cycle: 0,
    ///             fan_out: 1,
    ///             waits_for_replies: true,
    ///         },
    ///         consumers: vec![Consumer {
    ///             name: "server".into(),
    ///             instances: 1,
    ///             busy_us_per_wake: 300,
    ///         }],
    ///     }],
    ///     independent: vec![],
    /// };
    /// assert!(workload.validate().is_ok());
    ///
    /// workload.groups[0].consumers[0].name = "client".into();
    /// assert_eq!(
    ///     workload.validate().unwrap_err().to_string(),
    ///     "groups[0].consumers[0].name: \"client\" is already the name of groups[0].producer"
    /// );
    /// ```
    pub fn validate(&self) -> Result<(), WorkloadError> {
        Checker::default().workload(self)
    }
}

/// The state of one validation: task names seen so far (with the entry
/// that took each) and tasks counted so far.
#[derive(Default)]
struct Checker<'a> {
    names: HashMap<&'a str, Entry>,
    tasks: u64,
}

/// An entry that names tasks, by its position in the workload.
#[derive(Clone, Copy, Debug)]
enum Entry {
    /// `groups[g].producer`
    Producer(usize),
    /// `groups[g].consumers[c]`
    Consumer(usize, usize),
    /// `independent[i]`
    Independent(usize),
}

impl fmt::Display for Entry {
    /// The entry's JSON path.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Entry::Producer(g) => write!(f, "groups[{g}].producer"),
            Entry::Consumer(g, c) => write!(f, "groups[{g}].consumers[{c}]"),
            Entry::Independent(i) => write!(f, "independent[{i}]"),
        }
    }
}

type Check = Result<(), WorkloadError>;

fn fail(path: impl Into<String>, reason: impl Into<String>) -> Check {
    Err(WorkloadError::invalid(path.into(), reason.into()))
}

fn range<T: PartialOrd + std::fmt::Display>(path: &str, value: T, min: T, max: T) -> Check {
    if value < min || value > max {
        return fail(
            path,
            format!("must be between {min} and {max}, got {value}"),
        );
    }
    Ok(())
}

fn time_us(path: &str, value: u64) -> Check {
    if value > Workload::MAX_TIME_US {
        return fail(
            path,
            format!(
                "must be at most {} (60 s), got {value}",
                Workload::MAX_TIME_US
            ),
        );
    }
    Ok(())
}

fn name(path: &str, name: &str) -> Check {
    if name.is_empty() {
        return fail(path, "must not be empty");
    }
    if name.len() > Workload::MAX_NAME_BYTES {
        return fail(
            path,
            format!(
                "must be at most {} bytes long, got {}",
                Workload::MAX_NAME_BYTES,
                name.len()
            ),
        );
    }
    if name.chars().any(char::is_control) {
        return fail(
            path,
            format!("must not contain control characters, got {name:?}"),
        );
    }
    Ok(())
}

impl<'a> Checker<'a> {
    fn workload(mut self, w: &'a Workload) -> Check {
        if w.version != Workload::VERSION {
            return fail(
                "version",
                format!("must be {}, got {}", Workload::VERSION, w.version),
            );
        }
        range("duration_ms", w.duration_ms, 1, Workload::MAX_DURATION_MS)?;
        for (g, group) in w.groups.iter().enumerate() {
            let at = format!("groups[{g}]");
            name(&format!("{at}.name"), &group.name)?;
            let p = &group.producer;
            let at_p = format!("{at}.producer");
            self.task_name(Entry::Producer(g), &p.name)?;
            self.count(&format!("{at_p}.name"), 1)?;
            time_us(&format!("{at_p}.busy_us_per_cycle"), p.busy_us_per_cycle)?;
            time_us(&format!("{at_p}.sleep_us_per_cycle"), p.sleep_us_per_cycle)?;
            range(
                &format!("{at_p}.fan_out"),
                p.fan_out,
                1,
                Workload::MAX_FAN_OUT,
            )?;
            if p.sleep_us_per_cycle == 0 && !p.waits_for_replies {
                return fail(
                    format!("{at_p}.sleep_us_per_cycle"),
                    "must be above 0 when waits_for_replies is false: a producer that \
                     neither sleeps nor waits for replies would run its cycles back to back \
                     and flood its consumers",
                );
            }
            if group.consumers.is_empty() {
                return fail(
                    format!("{at}.consumers"),
                    "a group needs at least one consumer",
                );
            }
            for (c, consumer) in group.consumers.iter().enumerate() {
                let at_c = format!("{at}.consumers[{c}]");
                self.task_name(Entry::Consumer(g, c), &consumer.name)?;
                self.instances(&at_c, consumer.instances)?;
                time_us(
                    &format!("{at_c}.busy_us_per_wake"),
                    consumer.busy_us_per_wake,
                )?;
            }
        }
        for (i, entry) in w.independent.iter().enumerate() {
            let at = format!("independent[{i}]");
            self.task_name(Entry::Independent(i), &entry.name)?;
            self.instances(&at, entry.instances)?;
            time_us(&format!("{at}.busy_us_per_wake"), entry.busy_us_per_wake)?;
            range(
                &format!("{at}.period_us"),
                entry.period_us,
                Workload::MIN_PERIOD_US,
                Workload::MAX_TIME_US,
            )?;
        }
        if w.groups.is_empty() && w.independent.is_empty() {
            return fail(
                "groups",
                "a workload needs at least one group or independent entry",
            );
        }
        Ok(())
    }

    /// Checks the name of entry `at`, and that no entry before it took
    /// it.
    fn task_name(&mut self, at: Entry, task: &'a str) -> Check {
        let path = format!("{at}.name");
        name(&path, task)?;
        if let Some(first) = self.names.get(task) {
            return fail(path, format!("{task:?} is already the name of {first}"));
        }
        self.names.insert(task, at);
        Ok(())
    }

    fn instances(&mut self, at: &str, instances: u32) -> Check {
        let path = format!("{at}.instances");
        range(&path, instances, 1, Workload::MAX_INSTANCES)?;
        self.count(&path, u64::from(instances))
    }

    /// Adds `tasks` to the count, failing at the field that takes it past
    /// [`Workload::MAX_TASKS`].
    fn count(&mut self, path: &str, tasks: u64) -> Check {
        self.tasks += tasks;
        if self.tasks > Workload::MAX_TASKS {
            return fail(
                path,
                format!(
                    "brings the workload to {} tasks, more than the {} allowed",
                    self.tasks,
                    Workload::MAX_TASKS
                ),
            );
        }
        Ok(())
    }
}
