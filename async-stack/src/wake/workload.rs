//! Workload files: a program's task structure, reduced to producer/consumer
//! groups with busy and idle times, written as JSON and replayed on tokio.
//!
//! The idea comes from rt-app and `sched-time.py`: record who wakes whom
//! in a real program, reduce the wake graph to groups (one producer waking
//! a set of consumers) and independent tasks, and write down how long each
//! one runs per wake. Replaying the file reproduces the same structure
//! without the program, its data or its environment, so that a scheduling
//! or tracing problem can be studied on any machine. Recording the replay
//! gives back the same groups, with busy/idle ratios close to the
//! original's.
//!
//! This module owns the file format ([`Workload`] and its parts), its
//! checks ([`Workload::validate`], run by every way of reading one), and,
//! with the `tokio` feature, the replay (`replay` and `replay_until`).
//! It does not record anything, and imports nothing of the wake graph:
//! the graph and its reduction ([`super::Reduction::workload`]) only write
//! these files. It is reachable as `async_stack::workload` too.
//!
//! # The format
//!
//! A JSON object, version 1. Every object rejects fields it does not know,
//! and every field is required (an empty list is written `[]`). Times are
//! whole microseconds, except `duration_ms`. (The reader, serde's, also
//! takes an object written as an array of its field values in the order
//! below; [`Workload::to_json`] always writes objects.) A full example, with one group
//! of each kind and an independent task:
//!
//! ```
//! use async_stack::workload::Workload;
//!
//! let json = r#"{
//!   "version": 1,
//!   "duration_ms": 2000,
//!   "groups": [
//!     {
//!       "name": "ingest",
//!       "producer": {
//!         "name": "reader",
//!         "busy_us_per_cycle": 200,
//!         "sleep_us_per_cycle": 5000,
//!         "fan_out": 3,
//!         "waits_for_replies": false
//!       },
//!       "consumers": [
//!         { "name": "parser", "instances": 3, "busy_us_per_wake": 800 }
//!       ]
//!     },
//!     {
//!       "name": "rpc",
//!       "producer": {
//!         "name": "client",
//!         "busy_us_per_cycle": 100,
//!         "sleep_us_per_cycle": 0,
//!         "fan_out": 1,
//!         "waits_for_replies": true
//!       },
//!       "consumers": [
//!         { "name": "server", "instances": 1, "busy_us_per_wake": 300 }
//!       ]
//!     }
//!   ],
//!   "independent": [
//!     { "name": "heartbeat", "instances": 1, "busy_us_per_wake": 50, "period_us": 10000 }
//!   ]
//! }"#;
//!
//! let workload = Workload::from_json(json)?;
//! assert_eq!(workload.groups[0].consumers[0].instances, 3);
//! assert_eq!(Workload::from_json(&workload.to_json())?, workload);
//! # Ok::<(), async_stack::workload::WorkloadError>(())
//! ```
//!
//! ## Fields
//!
//! [`Workload`], the document:
//!
//! - `version`: the format version, 1.
//! - `duration_ms`: how long a replay runs by default, in milliseconds
//!   (the replay example's `--duration-ms` overrides it).
//! - `groups`: the producer/consumer groups ([`Group`]).
//! - `independent`: tasks woken only by their own timer ([`Independent`]).
//!
//! [`Group`]: one producer waking a set of consumers.
//!
//! - `name`: the group's name, for people (tasks are named by their own
//!   `name`s).
//! - `producer`: the task that wakes the consumers ([`Producer`]).
//! - `consumers`: the kinds of task it wakes ([`Consumer`]), at least one.
//!
//! [`Producer`]: one task that loops over **cycles**. Each cycle:
//!
//! 1. burns `busy_us_per_cycle` µs of CPU inside its poll;
//! 2. sends `fan_out` messages, round-robin over all consumer *instances*
//!    of its group (each instance has its own channel, so each message
//!    wakes exactly that instance; the round-robin position carries over
//!    from one cycle to the next);
//! 3. if `waits_for_replies`, awaits one reply per message sent: each
//!    consumer replies once its work for a message is done, which wakes the
//!    producer;
//! 4. if `sleep_us_per_cycle` > 0, sleeps that long on tokio's timer,
//!    which wakes it.
//!
//! A request/response pair is a group with one producer, one consumer of
//! one instance, `fan_out: 1` and `waits_for_replies: true`
//! (`sleep_us_per_cycle` may be 0: the replies pace the producer).
//!
//! [`Consumer`]: `instances` tasks of one kind, each looping: await a
//! message, burn `busy_us_per_wake` µs, reply if the producer waits for
//! replies.
//!
//! [`Independent`]: `instances` tasks, each looping: sleep `period_us` µs
//! on tokio's timer, then burn `busy_us_per_wake` µs. A loop therefore
//! lasts `period_us` + `busy_us_per_wake`.
//!
//! ## Names
//!
//! Every task of the replay is spawned with the `name` of its producer,
//! consumer or independent entry (all instances of an entry share it), so
//! that dumps, profiles and a wake-graph recording of the replay fold tasks
//! by the same names as the file. Names are therefore unique across the
//! whole workload: a producer, a consumer and an independent entry may not
//! share one. Group names are not task names and are not checked for
//! uniqueness.
//!
//! # Bounds
//!
//! A workload file is input: it may be truncated, edited by hand or
//! hostile. Replaying it must not allocate or spawn without bound, nor
//! flood channels, so every way of reading one ([`Workload::from_json`],
//! [`Workload::load`]) and of running one (`replay`) checks:
//!
//! | field | bound |
//! |---|---|
//! | `version` | 1 ([`Workload::VERSION`]) |
//! | `duration_ms` | 1 to [`Workload::MAX_DURATION_MS`] (one hour) |
//! | every `name` of a producer, consumer or independent entry | 1 to [`Workload::MAX_NAME_BYTES`] bytes, no control characters, unique across the workload |
//! | a group's `name` | 1 to [`Workload::MAX_NAME_BYTES`] bytes, no control characters |
//! | `instances` | 1 to [`Workload::MAX_INSTANCES`] |
//! | all tasks: one per producer plus every `instances` | at most [`Workload::MAX_TASKS`] |
//! | `busy_us_per_cycle`, `busy_us_per_wake`, `sleep_us_per_cycle` | 0 to [`Workload::MAX_TIME_US`] (60 s) |
//! | `period_us` | [`Workload::MIN_PERIOD_US`] (1 ms) to [`Workload::MAX_TIME_US`] |
//! | `fan_out` | 1 to [`Workload::MAX_FAN_OUT`] |
//! | `consumers` of a group | at least one |
//! | a producer | must pace itself: `sleep_us_per_cycle` > 0 or `waits_for_replies` |
//! | the workload | at least one group or independent entry |
//! | a file read by [`Workload::load`] | at most [`Workload::MAX_FILE_BYTES`] (4 MiB), UTF-8 |
//!
//! Reading a workload, valid or not, holds at most 16 times the text's
//! length in memory (`tests/tests/faults_decoders.rs` checks it on the
//! densest lists JSON can spell and on mutated files).
//!
//! A producer that neither sleeps nor waits for replies would run its
//! cycles back to back, as fast as the CPU allows: it is rejected rather
//! than replayed, since no recorded program has a task that is never idle
//! and yet wakes others. On top of that, each consumer instance's channel
//! holds at most [`Workload::CHANNEL_CAPACITY`] messages: a producer that
//! outpaces its consumers (a sleep shorter than their work) waits for room
//! in the channel, so memory stays bounded whatever the times. That wait is
//! a wake from consumer to producer that the original may not have had;
//! the replay report counts cycles, so a replay much slower than its
//! `sleep_us_per_cycle` implies shows it.
//!
//! # Errors
//!
//! Every error is a [`WorkloadError`] whose `Display` names the field by its
//! JSON path, then the reason:
//!
//! ```
//! use async_stack::workload::Workload;
//!
//! let json = r#"{"version": 1, "duration_ms": 100, "groups": [],
//!     "independent": [{"name": "tick", "instances": 0,
//!                      "busy_us_per_wake": 10, "period_us": 1000}]}"#;
//! let err = Workload::from_json(json).unwrap_err();
//! assert_eq!(err.path(), "independent[0].instances");
//! assert_eq!(err.to_string(), "independent[0].instances: must be between 1 and 10000, got 0");
//! ```
//!
//! # Accuracy of a replay
//!
//! The structure (which task wakes which, how many of each) is exact. The
//! times are not, and here is every way they drift:
//!
//! - **Busy time is wall time.** A task burns CPU by spinning until the
//!   requested wall time has passed. If the thread is preempted meanwhile
//!   (more runnable threads than cores), the task gets less CPU than asked.
//! - **A busy task holds its worker thread.** The spin happens inside a
//!   poll, as in the program recorded; with fewer worker threads than busy
//!   tasks, wakes queue up and idle times stretch.
//! - **Timer resolution.** tokio's timer has a 1 ms resolution: a
//!   `sleep_us_per_cycle` below 1 ms sleeps about 1 ms, and every sleep may
//!   last up to 1 ms longer than asked.
//! - **Backpressure.** A producer that outpaces its consumers waits for
//!   room in their channels (see Bounds), and is then woken by them.
//! - **Scheduling extras.** tokio's cooperative budget can make a task
//!   yield and wake itself; those self-wakes are not in the file.
//! - **The end.** When a replay stops, a task in the middle of its busy
//!   time stops spinning at once, so the last cycle of each task is short.
//!   The stop itself needs a free worker thread: if every worker is inside
//!   a busy time, it comes when the first of those ends.
//!
//! # Files
//!
//! - `workload.rs` (this file): the format, and reading and writing it;
//! - `workload/validate.rs`: the bounds and their checks;
//! - `workload/error.rs`: [`WorkloadError`];
//! - `workload/replay.rs`: the replay on tokio (feature `tokio`).

use std::fs::File;
use std::io::{Read, Write};
use std::path::Path;

use serde::{Deserialize, Serialize};

mod error;
#[cfg(feature = "tokio")]
mod replay;
#[cfg(test)]
mod tests;
mod validate;

pub use error::WorkloadError;
#[cfg(feature = "tokio")]
pub use replay::{ReplayReport, Role, TaskReport, replay, replay_until};

/// A workload file: producer/consumer groups and independent tasks, with
/// their busy and idle times. See the [module docs](self) for the format,
/// the meaning of each field and the bounds.
///
/// The fields are public, so a `Workload` built in code may break the
/// bounds; [`Workload::validate`] checks them, and every way in or out of
/// this type that depends on them ([`from_json`](Self::from_json),
/// [`load`](Self::load), [`save`](Self::save), `replay`) calls it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Workload {
    /// Format version: [`Workload::VERSION`].
    pub version: u32,
    /// How long a replay runs by default, in milliseconds.
    pub duration_ms: u64,
    /// Producer/consumer groups.
    pub groups: Vec<Group>,
    /// Tasks woken only by their own timer.
    pub independent: Vec<Independent>,
}

/// One producer and the consumers it wakes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Group {
    /// The group's name (not a task name).
    pub name: String,
    /// The task that wakes the consumers.
    pub producer: Producer,
    /// The kinds of task the producer wakes; at least one.
    pub consumers: Vec<Consumer>,
}

/// A group's producer: one task looping over cycles (busy, send, await
/// replies, sleep).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Producer {
    /// The task's name.
    pub name: String,
    /// CPU time burnt at the start of each cycle, in µs.
    pub busy_us_per_cycle: u64,
    /// Time slept at the end of each cycle, in µs; 0 for none.
    pub sleep_us_per_cycle: u64,
    /// Messages sent per cycle, round-robin over the group's consumer
    /// instances.
    pub fan_out: u32,
    /// Each cycle awaits one reply per message sent before sleeping.
    pub waits_for_replies: bool,
}

/// A kind of consumer: `instances` tasks, each woken by its own messages.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Consumer {
    /// The name of every instance's task.
    pub name: String,
    /// How many tasks of this kind.
    pub instances: u32,
    /// CPU time burnt per message, in µs.
    pub busy_us_per_wake: u64,
}

/// A kind of task woken only by its timer: `instances` tasks, each looping
/// (sleep `period_us`, burn `busy_us_per_wake`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Independent {
    /// The name of every instance's task.
    pub name: String,
    /// How many tasks of this kind.
    pub instances: u32,
    /// CPU time burnt per wake, in µs.
    pub busy_us_per_wake: u64,
    /// Time slept before each burn, in µs.
    pub period_us: u64,
}

impl Workload {
    /// Parses and validates a workload.
    ///
    /// Fails with an error naming the field (by its JSON path) for
    /// malformed JSON, an unknown or missing field, a value of the wrong
    /// type, and any bound of the [module docs](self#bounds). Never
    /// panics; memory use is proportional to the input's length: at most
    /// 16 times it, whatever the input (the shortest JSON of a consumer,
    /// 9 bytes, becomes 40, and a list grows by doubling).
    pub fn from_json(json: &str) -> Result<Workload, WorkloadError> {
        let workload: Workload = crate::read::dump::json::parse_at_path(json)
            .map_err(|(path, e)| WorkloadError::json(path, e))?;
        workload.validate()?;
        Ok(workload)
    }

    /// The JSON form, pretty-printed. Does not validate: a workload that
    /// breaks the bounds is written as it is (and rejected when read).
    pub fn to_json(&self) -> String {
        match serde_json::to_string_pretty(self) {
            Ok(json) => json,
            // Unreachable: every field is a string, a number, a bool or a
            // list of structs, which serde_json always writes.
            Err(e) => format!("{{\"error\": {:?}}}", e.to_string()),
        }
    }

    /// Reads, parses and validates a workload file.
    ///
    /// A file larger than [`Workload::MAX_FILE_BYTES`] is refused before
    /// it is read whole (its length is checked first, and reading stops one
    /// byte past the limit for files whose length is not known in
    /// advance); a file that is not UTF-8 is refused with the offset of
    /// the first bad byte.
    pub fn load(path: impl AsRef<Path>) -> Result<Workload, WorkloadError> {
        let path = path.as_ref();
        let file = File::open(path).map_err(|e| WorkloadError::io("cannot open", path, e))?;
        let len = file
            .metadata()
            .map_err(|e| WorkloadError::io("cannot read", path, e))?
            .len();
        if len > Self::MAX_FILE_BYTES {
            return Err(WorkloadError::too_large(path, len));
        }
        let mut bytes = Vec::with_capacity(len as usize);
        file.take(Self::MAX_FILE_BYTES + 1)
            .read_to_end(&mut bytes)
            .map_err(|e| WorkloadError::io("cannot read", path, e))?;
        if bytes.len() as u64 > Self::MAX_FILE_BYTES {
            return Err(WorkloadError::too_large(path, bytes.len() as u64));
        }
        let json =
            String::from_utf8(bytes).map_err(|e| WorkloadError::not_utf8(path, e.utf8_error()))?;
        Self::from_json(&json)
    }

    /// Validates the workload, then writes its JSON form to `path`
    /// atomically: into a temporary file in the same directory, synced,
    /// then renamed over `path`. A reader of `path` sees the old file or
    /// the new one, never a part of it.
    pub fn save(&self, path: impl AsRef<Path>) -> Result<(), WorkloadError> {
        self.validate()?;
        let path = path.as_ref();
        let dir = match path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => Path::new("."),
        };
        let write = || -> std::io::Result<()> {
            let mut tmp = tempfile::NamedTempFile::new_in(dir)?;
            tmp.write_all(self.to_json().as_bytes())?;
            tmp.write_all(b"\n")?;
            tmp.as_file().sync_all()?;
            // On failure the error hands the temporary file back, and
            // dropping it removes it.
            tmp.persist(path).map_err(|e| e.error)?;
            Ok(())
        };
        write().map_err(|e| WorkloadError::io("cannot write", path, e))
    }
}
