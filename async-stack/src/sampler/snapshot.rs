//! Saving and loading a [`Profile`]: a versioned, checksummed binary
//! snapshot, so that a profile survives a restart of the process that
//! samples (see [`SamplerBuilder::resume`](super::SamplerBuilder::resume)).
//!
//! This module is responsible for the byte format and nothing else: the
//! tables it writes are the profile's own interned tables, in the order
//! they are held, so that encoding is one linear pass and decoding
//! rebuilds exactly the profile that was saved.
//!
//! # Invariants
//!
//! - **Decoding never trusts a number before checking it.** The payload
//!   length is checked against [`MAX_SNAPSHOT_PAYLOAD`] before the payload
//!   is read; every count against the bytes left before anything is
//!   allocated for it (a table's distinct items take a few bytes each, so
//!   no table can claim more items than the bytes that remain can spell);
//!   every id against the table it points into; every tag, flag and bound
//!   against its range. Malformed input gives a [`SnapshotError`] naming
//!   the field, never a panic.
//! - **Decoding holds at most a small multiple of its input.** Whatever
//!   the bytes, decoding a snapshot of `n` bytes holds at most `16 n`
//!   bytes, plus a few kilobytes, at any instant (see *Limits*).
//! - **The format is canonical.** Varints must be in their shortest form
//!   and every table item must be unique, so a valid snapshot decodes to
//!   one profile and that profile encodes back to the same bytes (less any
//!   extension records, which this version skips).
//! - **A save never leaves a half-written file.** [`Profile::save`] writes
//!   a temporary file beside the target, syncs it to disk, and renames it
//!   over the target: readers see the old snapshot or the new one.
//!
//! # Format
//!
//! A snapshot is a fixed 24-byte header and a payload. Multi-byte header
//! fields are little-endian.
//!
//! | offset | size | field         | meaning |
//! |-------:|-----:|---------------|---------|
//! | 0      | 8    | `magic`       | `89 41 53 50 52 4F 46 0A` (`"\x89ASPROF\n"`) |
//! | 8      | 2    | `major`       | `u16`; `1`. A reader rejects any major it does not know |
//! | 10     | 2    | `minor`       | `u16`; `0`. A reader accepts any minor of its major (see *Extensions*) |
//! | 12     | 8    | `payload_len` | `u64`; bytes after the header: exactly the rest of the file, at most [`MAX_SNAPSHOT_PAYLOAD`] |
//! | 20     | 4    | `checksum`    | `u32`; CRC-32 (IEEE 802.3, as zlib's `crc32`) of header bytes 0..20, then of the payload |
//!
//! The checksum covers the header fields before it as well as the payload,
//! so a damaged `minor` (which a reader otherwise accepts whatever its
//! value) is caught too.
//!
//! In the payload, every integer is a **varint**: unsigned LEB128 (7 bits
//! per byte, least significant group first, high bit set on every byte
//! but the last), in its shortest form, at most 10 bytes, below 2^64. The
//! payload's types are:
//!
//! | type        | encoding |
//! |-------------|----------|
//! | `varint`    | as above |
//! | `u32`       | a varint at most `u32::MAX` |
//! | `bool`      | a varint, `0` or `1` |
//! | `bytes`     | a varint length `n`, then `n` bytes |
//! | `str`       | `bytes` holding UTF-8 |
//! | `id(table)` | a varint, below the number of items of `table` (ids are 0-based positions) |
//! | `list(T)`   | a varint count `n`, then `n` items of `T` |
//!
//! The payload is a length-prefixed **core**, then **extensions**:
//!
//! | field           | type | meaning |
//! |-----------------|------|---------|
//! | `core_len`      | `varint` | bytes of the core, which follows |
//! | `frequency_hz`  | `u32` | sampling frequency of the last run |
//! | `grouping`      | `varint` | `0` task name, `1` spawn site |
//! | `duration_ns`   | `varint` | duration sampled over every run |
//! | `start_unix_ns` | `varint` | start of the first run, ns since the Unix epoch |
//! | `budget`        | `varint` | memory budget, [`MIN_BUDGET`]`..=`[`MAX_BUDGET`] |
//! | `stats`         | 19 × `varint` | [`Stats`] in declaration order: `ticks`, `late_ticks`, `attempted`, `ok`, `retried`, `dropped_torn`, `dropped_inconsistent`, `truncated`, `reservoir_skipped`, `signals`, `signals_lost`, `mismatches`, `sampler_cpu_ns`, `handler_ns`, `cleared_stacks`, `dropped_groups`, then `dropped` as `samples`, `wall_ns`, `cpu_ns` |
//! | `strings`       | `list(str)` | at least one item; string `0` is `""` |
//! | `modules`       | `list(module)` | `module` = `path: id(strings)`, `build_id: bytes` |
//! | `frames`        | `list(frame)` | `frame` = a `varint` tag, then: `0` async: `function: id(strings)`, `file: id(strings)`, `line: u32`, `column: u32`; `1` native: `module: id(modules)`, `offset: varint`, `call: bool`; `2` cleared: nothing |
//! | `stacks`        | `list(list(id(frames)))` | frame ids, root first |
//! | `entries`       | `list(entry)` | `entry` = `group: id(strings)`, `task_id: varint`, `task_name: id(strings)`, `state: varint` (`0` on-CPU, `1` off-CPU), `stack: id(stacks)`, `samples`, `wall_ns`, `cpu_ns: varint` |
//! | `mismatches`    | `list(mismatch)` | at most [`MAX_MISMATCHES`] items; `mismatch` = `task_id: varint`, `live: list(str)`, `published: list(str)` |
//!
//! The core must take exactly `core_len` bytes. No two items of a table
//! are equal (entries are compared without their weights).
//!
//! # Versions and extensions
//!
//! A new **major** version is an incompatible change: this reader rejects
//! every major but [`SNAPSHOT_MAJOR`] with
//! [`SnapshotError::UnsupportedVersion`].
//!
//! A new **minor** version never changes the core: it adds data in
//! extension records after it, which older readers skip. The extensions
//! run to the end of the payload, each record being:
//!
//! | field   | type | meaning |
//! |---------|------|---------|
//! | `minor` | `varint` | the minor version that defined the record: `1..=` the header's `minor`, strictly increasing from record to record |
//! | `len`   | `varint` | bytes of the body |
//! | `body`  | `len` bytes | defined by that minor version |
//!
//! This version (`1.0`) defines no extension: it checks each record's
//! framing and skips its body, so it reads snapshots of any `1.x`. A
//! `1.0` snapshot has no extension records.
//!
//! # Limits
//!
//! These are the reader's limits, not part of the format. Profiles keep
//! their tables within [`MAX_BUDGET`] (20 MiB) of memory, and their
//! snapshots are smaller than that (about 4 MiB for a full one), so the
//! limits only stop a damaged or hostile snapshot:
//!
//! - a payload above [`MAX_SNAPSHOT_PAYLOAD`] (64 MiB) is refused before
//!   it is read;
//! - a count larger than the bytes left could hold is refused before
//!   anything is allocated for it ([`SnapshotError::CountTooLarge`]). The
//!   items of a table are distinct, so all but a few take more than a
//!   byte: `""` takes 1 byte and the 128 one-byte strings 2, every other
//!   string at least 3; modules and stacks likewise at least 3 (all but
//!   128 and 129 of them); frames at least 4 (all but `[cleared]`);
//!   entries at least 8; stack frame ids and mismatch strings 1;
//! - each list of a mismatch holds at most [`STACK_CAPACITY`] (63)
//!   strings, the most frames the sampler reads (else
//!   [`SnapshotError::TooManyItems`]);
//! - the profile's budget charges every interned item (string, module,
//!   frame, stack, entry) at least 32 bytes and every frame id of a stack
//!   8 bytes, so a profile holds at most `MAX_BUDGET / 32` items and
//!   `MAX_BUDGET / 8` stack frame ids. The reader allows twice that
//!   (1,310,720 items in all, mismatch strings included, and 5,242,880
//!   stack frame ids) and refuses more with
//!   [`SnapshotError::TooManyItems`].
//!
//! Together these bound what decoding holds: each table's items are
//! reserved once, for a count its bytes can spell, and indexed by id
//! without a second copy, so an item takes at most about 15 times the
//! bytes that spell it (a module, 32 bytes and its index slot, from 3
//! bytes), and the whole profile at most 16 times the snapshot's size.
//! `tests/tests/faults_decoders.rs` checks it with a counting allocator on
//! hostile snapshots: the densest tables, runs of duplicates, counts and
//! lengths far beyond the bytes that follow, mutated files.

use std::fmt;
use std::fs::File;
use std::io::{self, Read, Write};
use std::path::Path;

use super::profile::{Entry, Frame, Interner, Module};
use super::{
    Grouping, MAX_BUDGET, MAX_MISMATCHES, MIN_BUDGET, Mismatch, Profile, SampleState, Stats,
    Weights,
};
use crate::task::STACK_CAPACITY;

/// The first 8 bytes of every snapshot: `"\x89ASPROF\n"`. The high first
/// byte and the newline catch a snapshot mangled as text.
pub const SNAPSHOT_MAGIC: [u8; 8] = *b"\x89ASPROF\n";
/// The major format version this build writes and reads.
pub const SNAPSHOT_MAJOR: u16 = 1;
/// The minor format version this build writes (it reads every minor).
pub const SNAPSHOT_MINOR: u16 = 0;
/// The largest payload a snapshot may declare: 64 MiB.
pub const MAX_SNAPSHOT_PAYLOAD: u64 = 64 << 20;

/// The most interned items (strings, modules, frames, stacks and entries
/// together) a snapshot may hold: twice what a profile within
/// [`MAX_BUDGET`] can, at 32 bytes of budget per item.
const MAX_ITEMS: u64 = (MAX_BUDGET / 16) as u64;
/// The most frame ids all stacks together may hold: twice what a profile
/// within [`MAX_BUDGET`] can, at 8 bytes of budget per id.
const MAX_STACK_FRAMES: u64 = (MAX_BUDGET / 4) as u64;

/// The most strings one list of a mismatch may hold: as many frames as a
/// published stack holds, the most the sampler writes.
const MAX_MISMATCH_FRAMES: usize = STACK_CAPACITY;

/// The fewest bytes the items of a list take: `each` bytes every item,
/// except at most `shorter` of them, which take one byte at least. Counts
/// are checked against it before anything is allocated for them, so that
/// an allocation is at most the items' size over `each` times the bytes
/// left (see the module docs' *Limits*).
#[derive(Clone, Copy, Debug)]
struct MinSize {
    each: usize,
    shorter: usize,
}

impl MinSize {
    /// The most items `bytes` can hold.
    fn most_items(self, bytes: usize) -> usize {
        let short = self.shorter.min(bytes);
        short + (bytes - short) / self.each
    }
}

/// Lists whose items take a byte at least: stack frame ids, mismatch
/// strings.
const ONE_BYTE_EACH: MinSize = MinSize {
    each: 1,
    shorter: 0,
};
/// Distinct strings: `""` takes 1 byte, the 128 one-byte strings (ASCII)
/// 2, and every other at least 3 (a length and two bytes).
const STRINGS: MinSize = MinSize {
    each: 3,
    shorter: 129,
};
/// Distinct modules: a path id and a build id of 2 bytes together only
/// for the 128 path ids below 128 with an empty build id, else 3 at least.
const MODULES: MinSize = MinSize {
    each: 3,
    shorter: 128,
};
/// Distinct frames: a tag and four fields (async, 5 bytes) or three
/// (native, 4), except the one `[cleared]` frame, a tag alone.
const FRAMES: MinSize = MinSize {
    each: 4,
    shorter: 1,
};
/// Distinct stacks: a count and its ids, 1 byte for the empty stack and 2
/// for the 128 stacks of one frame id below 128, else 3 at least.
const STACKS: MinSize = MinSize {
    each: 3,
    shorter: 129,
};
/// Entries: eight fields.
const ENTRIES: MinSize = MinSize {
    each: 8,
    shorter: 0,
};

/// The size of the fixed header.
const HEADER_LEN: usize = 24;
/// The header bytes the checksum covers (everything before the checksum).
const CHECKED_HEADER_LEN: usize = 20;

/// Why a snapshot could not be loaded. Every variant names the field at
/// fault; see the [module docs](self) for the format.
#[derive(Debug)]
#[non_exhaustive]
pub enum SnapshotError {
    /// Reading the file failed.
    Io(io::Error),
    /// The first 8 bytes are not [`SNAPSHOT_MAGIC`]: not a snapshot.
    BadMagic,
    /// The header's major version is not [`SNAPSHOT_MAJOR`].
    UnsupportedVersion {
        /// The header's major version.
        major: u16,
        /// The header's minor version.
        minor: u16,
    },
    /// The header declares a payload above [`MAX_SNAPSHOT_PAYLOAD`].
    PayloadTooLarge {
        /// The declared payload length.
        length: u64,
        /// The limit.
        max: u64,
    },
    /// The input ends inside `what`.
    Truncated {
        /// The header, the payload, or the field cut short.
        what: &'static str,
        /// Bytes `what` needs.
        needed: u64,
        /// Bytes there are.
        available: u64,
    },
    /// Bytes follow the payload the header declares.
    TrailingBytes {
        /// How many.
        count: u64,
    },
    /// The checksum does not match the header and payload.
    ChecksumMismatch {
        /// The checksum the header holds.
        expected: u32,
        /// The checksum of the bytes read.
        actual: u32,
    },
    /// A length-prefixed section's contents do not take the length it
    /// declares.
    LengthMismatch {
        /// The section.
        what: &'static str,
        /// Its declared length in bytes.
        declared: u64,
        /// The bytes its contents took.
        actual: u64,
    },
    /// A count that cannot fit in the bytes left (the distinct items of a
    /// table take at least one to eight bytes each: see the module docs'
    /// *Limits*): refused before anything is allocated for it.
    CountTooLarge {
        /// The table or list counted.
        what: &'static str,
        /// The declared count.
        count: u64,
        /// The bytes left for its items.
        remaining: usize,
    },
    /// More items than any profile holds (see the module docs'
    /// *Limits*).
    TooManyItems {
        /// The table that took the total over the limit.
        what: &'static str,
        /// The total so far.
        count: u64,
        /// The limit.
        max: u64,
    },
    /// An id past the end of the table it points into.
    IndexOutOfRange {
        /// The field holding the id.
        what: &'static str,
        /// The id.
        index: u64,
        /// The number of items in the table.
        len: usize,
    },
    /// A string that is not UTF-8.
    InvalidUtf8 {
        /// The field.
        what: &'static str,
    },
    /// A varint that is not in its shortest form or does not fit 64 bits.
    BadVarint {
        /// The field.
        what: &'static str,
    },
    /// A value out of its field's range: an unknown tag, a budget out of
    /// bounds, a non-empty string `0`...
    InvalidValue {
        /// The field.
        what: &'static str,
        /// The value found.
        value: u64,
    },
    /// Two equal items in one table.
    Duplicate {
        /// The table.
        what: &'static str,
    },
}

impl fmt::Display for SnapshotError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SnapshotError::Io(e) => write!(f, "profile snapshot: I/O error: {e}"),
            SnapshotError::BadMagic => {
                f.write_str("profile snapshot: bad magic (the first 8 bytes): not a snapshot")
            }
            SnapshotError::UnsupportedVersion { major, minor } => write!(
                f,
                "profile snapshot: format version {major}.{minor} is not supported \
                 (this build reads {SNAPSHOT_MAJOR}.x)"
            ),
            SnapshotError::PayloadTooLarge { length, max } => write!(
                f,
                "profile snapshot: payload_len {length} exceeds the maximum of {max} bytes"
            ),
            SnapshotError::Truncated {
                what,
                needed,
                available,
            } => write!(
                f,
                "profile snapshot: truncated in {what}: needs {needed} bytes, {available} left"
            ),
            SnapshotError::TrailingBytes { count } => write!(
                f,
                "profile snapshot: {count} trailing bytes after the payload_len the header declares"
            ),
            SnapshotError::ChecksumMismatch { expected, actual } => write!(
                f,
                "profile snapshot: checksum mismatch: the header holds {expected:#010x}, \
                 the contents give {actual:#010x}"
            ),
            SnapshotError::LengthMismatch {
                what,
                declared,
                actual,
            } => write!(
                f,
                "profile snapshot: {what} declares {declared} bytes but its contents take {actual}"
            ),
            SnapshotError::CountTooLarge {
                what,
                count,
                remaining,
            } => write!(
                f,
                "profile snapshot: {what} count {count} cannot fit in the {remaining} bytes left"
            ),
            SnapshotError::TooManyItems { what, count, max } => write!(
                f,
                "profile snapshot: {what} bring the total to {count}, \
                 above the {max} a profile can hold"
            ),
            SnapshotError::IndexOutOfRange { what, index, len } => write!(
                f,
                "profile snapshot: {what} {index} is out of range (the table holds {len})"
            ),
            SnapshotError::InvalidUtf8 { what } => {
                write!(f, "profile snapshot: {what} is not valid UTF-8")
            }
            SnapshotError::BadVarint { what } => write!(
                f,
                "profile snapshot: {what} is not a shortest-form LEB128 varint below 2^64"
            ),
            SnapshotError::InvalidValue { what, value } => {
                write!(f, "profile snapshot: {what} has the invalid value {value}")
            }
            SnapshotError::Duplicate { what } => {
                write!(
                    f,
                    "profile snapshot: the {what} table holds two equal items"
                )
            }
        }
    }
}

impl std::error::Error for SnapshotError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            SnapshotError::Io(e) => Some(e),
            _ => None,
        }
    }
}

impl From<io::Error> for SnapshotError {
    fn from(e: io::Error) -> Self {
        SnapshotError::Io(e)
    }
}

impl Profile {
    /// Saves the profile to `path` as a snapshot (see
    /// [`to_snapshot`](Self::to_snapshot)), atomically: the bytes go to a
    /// temporary file in the same directory, which is synced to disk and
    /// then renamed over `path`. Whatever happens, `path` holds either its
    /// old contents or the whole new snapshot, and the temporary file is
    /// removed on failure.
    ///
    /// The file is created readable and writable by its owner only (mode
    /// `0600` on Unix), replacing an existing file's permissions, and a
    /// symbolic link at `path` is replaced rather than followed.
    ///
    /// # Errors
    ///
    /// The I/O error of creating, writing, syncing or renaming the file,
    /// for example when the directory does not exist or `path` is a
    /// directory.
    ///
    /// # Examples
    ///
    /// ```
    /// use async_stack::sampler::Profile;
    ///
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let dir = std::env::temp_dir().join(format!("asprof-doc-{}", std::process::id()));
    /// std::fs::create_dir_all(&dir)?;
    /// let path = dir.join("app.asprof");
    /// let profile = Profile::default();
    /// profile.save(&path)?;
    /// let loaded = Profile::load(&path)?;
    /// assert_eq!(loaded.stats(), profile.stats());
    /// # std::fs::remove_dir_all(&dir)?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn save(&self, path: impl AsRef<Path>) -> io::Result<()> {
        let path = path.as_ref();
        let bytes = self.to_snapshot();
        let dir = match path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => Path::new("."),
        };
        let mut tmp = tempfile::NamedTempFile::new_in(dir)?;
        tmp.write_all(&bytes)?;
        tmp.as_file().sync_all()?;
        // On failure the error hands the temporary file back, and dropping
        // it removes it.
        tmp.persist(path).map_err(|e| e.error)?;
        // Make the rename itself durable. The new snapshot is already in
        // place, so a failure here (some file systems cannot sync a
        // directory) must not report the save as failed.
        #[cfg(unix)]
        if let Ok(d) = File::open(dir) {
            let _ = d.sync_all();
        }
        Ok(())
    }

    /// Loads a profile saved with [`save`](Self::save). The header is read
    /// and checked first, so a file declaring a payload above
    /// [`MAX_SNAPSHOT_PAYLOAD`] is refused before its payload is read.
    ///
    /// # Errors
    ///
    /// [`SnapshotError::Io`] if the file cannot be read, and otherwise the
    /// errors of [`from_snapshot`](Self::from_snapshot).
    ///
    /// # Examples
    ///
    /// ```
    /// use async_stack::sampler::Profile;
    ///
    /// let missing = std::env::temp_dir().join("no-such-dir-asprof/none.asprof");
    /// let err = Profile::load(&missing).unwrap_err();
    /// assert!(err.to_string().contains("I/O error"));
    /// ```
    pub fn load(path: impl AsRef<Path>) -> Result<Profile, SnapshotError> {
        let mut file = File::open(path)?;
        let mut start = Vec::with_capacity(HEADER_LEN);
        (&mut file)
            .take(HEADER_LEN as u64)
            .read_to_end(&mut start)?;
        let (header, _) = split_header(&start)?;
        let h = Header::parse(header)?;
        // The payload length is within the limit, so the payload fits in
        // memory; one byte more is read to detect trailing bytes.
        let after_header = file.metadata()?.len().saturating_sub(HEADER_LEN as u64);
        let mut payload = Vec::with_capacity(after_header.min(h.payload_len) as usize);
        (&mut file)
            .take(h.payload_len + 1)
            .read_to_end(&mut payload)?;
        if payload.len() as u64 > h.payload_len {
            return Err(SnapshotError::TrailingBytes {
                count: after_header.saturating_sub(h.payload_len).max(1),
            });
        }
        h.check_payload(header, &payload)?;
        decode_payload(h.minor, &payload)
    }

    /// Encodes the profile as a snapshot: the whole profile (tables,
    /// counters, mismatches, and settings), in the format of the [module
    /// docs](self). Encoding is deterministic: it writes the tables in the
    /// order the profile holds them, so a decoded snapshot encodes back to
    /// the bytes it came from (less any extension records).
    ///
    /// # Examples
    ///
    /// ```
    /// use async_stack::sampler::Profile;
    ///
    /// let bytes = Profile::default().to_snapshot();
    /// assert_eq!(&bytes[..8], b"\x89ASPROF\n");
    /// ```
    pub fn to_snapshot(&self) -> Vec<u8> {
        let mut core = Writer::default();
        encode_core(self, &mut core);
        let mut payload = Writer(Vec::with_capacity(core.0.len() + 10));
        payload.varint(core.0.len() as u64);
        payload.0.extend_from_slice(&core.0);
        seal(SNAPSHOT_MAJOR, SNAPSHOT_MINOR, &payload.0)
    }

    /// Decodes a snapshot made by [`to_snapshot`](Self::to_snapshot) or
    /// [`save`](Self::save), checking every field (see the [module
    /// docs](self)). Extension records of a newer minor version are
    /// skipped.
    ///
    /// # Errors
    ///
    /// A [`SnapshotError`] naming the first field found at fault: the
    /// magic, the version, the payload length (too large, truncated, or
    /// followed by trailing bytes), the checksum, then any count, id,
    /// string, tag or bound of the payload, and duplicate table items.
    ///
    /// # Examples
    ///
    /// ```
    /// use async_stack::sampler::Profile;
    ///
    /// let bytes = Profile::default().to_snapshot();
    /// let profile = Profile::from_snapshot(&bytes).expect("a valid snapshot");
    /// assert_eq!(profile.stacks().count(), 0);
    ///
    /// // Any damage is reported, never a panic.
    /// assert!(Profile::from_snapshot(&bytes[..bytes.len() - 1]).is_err());
    /// ```
    pub fn from_snapshot(bytes: &[u8]) -> Result<Profile, SnapshotError> {
        let (header, payload) = split_header(bytes)?;
        let h = Header::parse(header)?;
        let available = payload.len() as u64;
        if available > h.payload_len {
            return Err(SnapshotError::TrailingBytes {
                count: available - h.payload_len,
            });
        }
        h.check_payload(header, payload)?;
        decode_payload(h.minor, payload)
    }
}

/// The header and the rest of `bytes`.
fn split_header(bytes: &[u8]) -> Result<(&[u8; HEADER_LEN], &[u8]), SnapshotError> {
    bytes
        .split_first_chunk::<HEADER_LEN>()
        .ok_or(SnapshotError::Truncated {
            what: "header",
            needed: HEADER_LEN as u64,
            available: bytes.len() as u64,
        })
}

/// The header fields, checked as far as they can be without the payload.
#[derive(Clone, Copy, Debug)]
struct Header {
    minor: u16,
    payload_len: u64,
    checksum: u32,
}

impl Header {
    /// Checks the magic, the major version and the payload limit.
    fn parse(h: &[u8; HEADER_LEN]) -> Result<Header, SnapshotError> {
        if h[0..8] != SNAPSHOT_MAGIC {
            return Err(SnapshotError::BadMagic);
        }
        let major = u16::from_le_bytes([h[8], h[9]]);
        let minor = u16::from_le_bytes([h[10], h[11]]);
        if major != SNAPSHOT_MAJOR {
            return Err(SnapshotError::UnsupportedVersion { major, minor });
        }
        let mut len = [0u8; 8];
        len.copy_from_slice(&h[12..20]);
        let payload_len = u64::from_le_bytes(len);
        if payload_len > MAX_SNAPSHOT_PAYLOAD {
            return Err(SnapshotError::PayloadTooLarge {
                length: payload_len,
                max: MAX_SNAPSHOT_PAYLOAD,
            });
        }
        let checksum = u32::from_le_bytes([h[20], h[21], h[22], h[23]]);
        Ok(Header {
            minor,
            payload_len,
            checksum,
        })
    }

    /// Checks that `payload` (at most `payload_len` bytes) is whole and
    /// matches the checksum.
    fn check_payload(
        &self,
        header: &[u8; HEADER_LEN],
        payload: &[u8],
    ) -> Result<(), SnapshotError> {
        if (payload.len() as u64) < self.payload_len {
            return Err(SnapshotError::Truncated {
                what: "payload",
                needed: self.payload_len,
                available: payload.len() as u64,
            });
        }
        let actual = checksum(&header[..CHECKED_HEADER_LEN], payload);
        if actual != self.checksum {
            return Err(SnapshotError::ChecksumMismatch {
                expected: self.checksum,
                actual,
            });
        }
        Ok(())
    }
}

fn checksum(header: &[u8], payload: &[u8]) -> u32 {
    let mut h = crc32fast::Hasher::new();
    h.update(header);
    h.update(payload);
    h.finalize()
}

/// A whole snapshot: the header for `payload`, then `payload`.
fn seal(major: u16, minor: u16, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER_LEN + payload.len());
    out.extend_from_slice(&SNAPSHOT_MAGIC);
    out.extend_from_slice(&major.to_le_bytes());
    out.extend_from_slice(&minor.to_le_bytes());
    out.extend_from_slice(&(payload.len() as u64).to_le_bytes());
    let sum = checksum(&out, payload);
    out.extend_from_slice(&sum.to_le_bytes());
    out.extend_from_slice(payload);
    out
}

// ---------------------------------------------------------------------
// Encoding

/// A payload being written.
#[derive(Debug, Default)]
struct Writer(Vec<u8>);

impl Writer {
    fn varint(&mut self, mut v: u64) {
        while v >= 0x80 {
            self.0.push(v as u8 | 0x80);
            v >>= 7;
        }
        self.0.push(v as u8);
    }

    fn bytes(&mut self, b: &[u8]) {
        self.varint(b.len() as u64);
        self.0.extend_from_slice(b);
    }
}

fn encode_core(p: &Profile, w: &mut Writer) {
    encode_meta(p, w);
    encode_stats(&p.stats, w);
    encode_tables(p, w);
    encode_mismatches(&p.mismatches, w);
}

fn encode_meta(p: &Profile, w: &mut Writer) {
    w.varint(p.frequency_hz.into());
    w.varint(match p.grouping {
        Grouping::TaskName => 0,
        Grouping::SpawnSite => 1,
    });
    w.varint(p.duration_ns);
    w.varint(p.start_unix_ns);
    w.varint(p.budget as u64);
}

fn encode_stats(s: &Stats, w: &mut Writer) {
    // Every counter, in `Stats::fields` order: a new counter changes the
    // format, and needs an extension record and a minor version.
    for (_, v) in s.fields() {
        w.varint(v);
    }
}

/// Strings, modules, frames, stacks and entries.
fn encode_tables(p: &Profile, w: &mut Writer) {
    w.varint(p.strings.items.len() as u64);
    for s in &p.strings.items {
        w.bytes(s.as_bytes());
    }
    w.varint(p.modules.items.len() as u64);
    for m in &p.modules.items {
        w.varint(m.path.into());
        w.bytes(&m.build_id);
    }
    w.varint(p.frames.items.len() as u64);
    for f in &p.frames.items {
        match *f {
            Frame::Async {
                function,
                file,
                line,
                column,
            } => {
                w.varint(0);
                w.varint(function.into());
                w.varint(file.into());
                w.varint(line.into());
                w.varint(column.into());
            }
            Frame::Native {
                module,
                offset,
                call,
            } => {
                w.varint(1);
                w.varint(module.into());
                w.varint(offset);
                w.varint(call.into());
            }
            Frame::Cleared => w.varint(2),
        }
    }
    w.varint(p.stacks.items.len() as u64);
    for s in &p.stacks.items {
        w.varint(s.len() as u64);
        for &f in s.iter() {
            w.varint(f.into());
        }
    }
    w.varint(p.entries.len() as u64);
    for e in &p.entries {
        w.varint(e.group.into());
        w.varint(e.task_id);
        w.varint(e.task_name.into());
        w.varint(match e.state {
            SampleState::OnCpu => 0,
            SampleState::OffCpu => 1,
        });
        w.varint(e.stack.into());
        w.varint(e.weights.samples);
        w.varint(e.weights.wall_ns);
        w.varint(e.weights.cpu_ns);
    }
}

fn encode_mismatches(mismatches: &[Mismatch], w: &mut Writer) {
    w.varint(mismatches.len() as u64);
    for m in mismatches {
        w.varint(m.task_id);
        for list in [&m.live, &m.published] {
            w.varint(list.len() as u64);
            for s in list {
                w.bytes(s.as_bytes());
            }
        }
    }
}

// ---------------------------------------------------------------------
// Decoding

/// A checked payload being read.
struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn new(buf: &'a [u8]) -> Self {
        Reader { buf, pos: 0 }
    }

    fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    fn take(&mut self, what: &'static str, n: u64) -> Result<&'a [u8], SnapshotError> {
        let available = self.remaining();
        if n > available as u64 {
            return Err(SnapshotError::Truncated {
                what,
                needed: n,
                available: available as u64,
            });
        }
        let s = &self.buf[self.pos..self.pos + n as usize];
        self.pos += n as usize;
        Ok(s)
    }

    fn varint(&mut self, what: &'static str) -> Result<u64, SnapshotError> {
        let mut v: u64 = 0;
        for i in 0..10 {
            let Some(&b) = self.buf.get(self.pos) else {
                return Err(SnapshotError::Truncated {
                    what,
                    needed: i as u64 + 1,
                    available: i as u64,
                });
            };
            self.pos += 1;
            let bits = u64::from(b & 0x7f);
            // The tenth byte holds bit 63 only.
            if i == 9 && b > 1 {
                return Err(SnapshotError::BadVarint { what });
            }
            v |= bits << (7 * i);
            if b & 0x80 == 0 {
                // Shortest form: a last byte of 0 is only for 0 itself.
                if b == 0 && i > 0 {
                    return Err(SnapshotError::BadVarint { what });
                }
                return Ok(v);
            }
        }
        Err(SnapshotError::BadVarint { what })
    }

    fn u32(&mut self, what: &'static str) -> Result<u32, SnapshotError> {
        let v = self.varint(what)?;
        u32::try_from(v).map_err(|_| SnapshotError::InvalidValue { what, value: v })
    }

    fn bool(&mut self, what: &'static str) -> Result<bool, SnapshotError> {
        match self.varint(what)? {
            0 => Ok(false),
            1 => Ok(true),
            value => Err(SnapshotError::InvalidValue { what, value }),
        }
    }

    /// A count of items of size `min` at least, checked against the bytes
    /// left, so that it can size an allocation.
    fn count(&mut self, what: &'static str, min: MinSize) -> Result<usize, SnapshotError> {
        let count = self.varint(what)?;
        let remaining = self.remaining();
        if count > min.most_items(remaining) as u64 {
            return Err(SnapshotError::CountTooLarge {
                what,
                count,
                remaining,
            });
        }
        Ok(count as usize)
    }

    /// An id into a table of `len` items.
    fn id(&mut self, what: &'static str, len: usize) -> Result<u32, SnapshotError> {
        let index = self.varint(what)?;
        if index >= len as u64 {
            return Err(SnapshotError::IndexOutOfRange { what, index, len });
        }
        // Tables hold at most `MAX_ITEMS` items, so the id fits.
        Ok(index as u32)
    }

    fn bytes(&mut self, what: &'static str) -> Result<&'a [u8], SnapshotError> {
        let n = self.varint(what)?;
        self.take(what, n)
    }

    fn str(&mut self, what: &'static str) -> Result<&'a str, SnapshotError> {
        std::str::from_utf8(self.bytes(what)?).map_err(|_| SnapshotError::InvalidUtf8 { what })
    }
}

/// Decodes a payload whose header and checksum were checked.
fn decode_payload(minor: u16, payload: &[u8]) -> Result<Profile, SnapshotError> {
    let mut r = Reader::new(payload);
    let core_len = r.varint("core_len")?;
    let core = r.take("core", core_len)?;
    let mut c = Reader::new(core);
    let profile = decode_core(&mut c)?;
    if c.remaining() != 0 {
        return Err(SnapshotError::LengthMismatch {
            what: "core",
            declared: core_len,
            actual: c.pos as u64,
        });
    }
    skip_extensions(minor, &mut r)?;
    Ok(profile)
}

/// Checks the framing of the extension records and skips them: this
/// version defines none.
fn skip_extensions(minor: u16, r: &mut Reader<'_>) -> Result<(), SnapshotError> {
    let mut last = 0;
    while r.remaining() > 0 {
        let record = r.varint("extension minor")?;
        if record <= last || record > minor.into() {
            return Err(SnapshotError::InvalidValue {
                what: "extension minor",
                value: record,
            });
        }
        last = record;
        r.bytes("extension body")?;
    }
    Ok(())
}

fn decode_core(r: &mut Reader<'_>) -> Result<Profile, SnapshotError> {
    let frequency_hz = r.u32("frequency_hz")?;
    let grouping = match r.varint("grouping")? {
        0 => Grouping::TaskName,
        1 => Grouping::SpawnSite,
        value => {
            return Err(SnapshotError::InvalidValue {
                what: "grouping",
                value,
            });
        }
    };
    let duration_ns = r.varint("duration_ns")?;
    let start_unix_ns = r.varint("start_unix_ns")?;
    let budget = r.varint("budget")?;
    let budget = match usize::try_from(budget) {
        Ok(b) if (MIN_BUDGET..=MAX_BUDGET).contains(&b) => b,
        _ => {
            return Err(SnapshotError::InvalidValue {
                what: "budget",
                value: budget,
            });
        }
    };
    let stats = decode_stats(r)?;
    let mut items = 0;
    let mut stack_frames = 0;

    let n = r.count("strings", STRINGS)?;
    within("strings", &mut items, n, MAX_ITEMS)?;
    let mut strings: Vec<Box<str>> = Vec::with_capacity(n);
    for _ in 0..n {
        strings.push(r.str("string")?.into());
    }
    match strings.first() {
        None => {
            return Err(SnapshotError::InvalidValue {
                what: "strings count",
                value: 0,
            });
        }
        Some(s) if !s.is_empty() => {
            return Err(SnapshotError::InvalidValue {
                what: "string 0 length",
                value: s.len() as u64,
            });
        }
        Some(_) => {}
    }
    let strings = unique("strings", strings)?;

    let n = r.count("modules", MODULES)?;
    within("modules", &mut items, n, MAX_ITEMS)?;
    let mut modules = Vec::with_capacity(n);
    for _ in 0..n {
        let path = r.id("module path", strings.len())?;
        let build_id = r.bytes("module build_id")?.to_vec();
        modules.push(Module { path, build_id });
    }
    let modules = unique("modules", modules)?;

    let n = r.count("frames", FRAMES)?;
    within("frames", &mut items, n, MAX_ITEMS)?;
    let mut frames = Vec::with_capacity(n);
    for _ in 0..n {
        let frame = match r.varint("frame tag")? {
            0 => Frame::Async {
                function: r.id("async frame function", strings.len())?,
                file: r.id("async frame file", strings.len())?,
                line: r.u32("async frame line")?,
                column: r.u32("async frame column")?,
            },
            1 => Frame::Native {
                module: r.id("native frame module", modules.len())?,
                offset: r.varint("native frame offset")?,
                call: r.bool("native frame call")?,
            },
            2 => Frame::Cleared,
            value => {
                return Err(SnapshotError::InvalidValue {
                    what: "frame tag",
                    value,
                });
            }
        };
        frames.push(frame);
    }
    let frames = unique("frames", frames)?;

    let n = r.count("stacks", STACKS)?;
    within("stacks", &mut items, n, MAX_ITEMS)?;
    let mut stacks: Vec<Box<[u32]>> = Vec::with_capacity(n);
    for _ in 0..n {
        let len = r.count("stack frames", ONE_BYTE_EACH)?;
        within("stack frames", &mut stack_frames, len, MAX_STACK_FRAMES)?;
        let mut stack = Vec::with_capacity(len);
        for _ in 0..len {
            stack.push(r.id("stack frame", frames.len())?);
        }
        stacks.push(stack.into());
    }
    let stacks = unique("stacks", stacks)?;

    let n = r.count("entries", ENTRIES)?;
    within("entries", &mut items, n, MAX_ITEMS)?;
    let mut entries = Vec::with_capacity(n);
    for _ in 0..n {
        let group = r.id("entry group", strings.len())?;
        let task_id = r.varint("entry task_id")?;
        let task_name = r.id("entry task_name", strings.len())?;
        let state = match r.varint("entry state")? {
            0 => SampleState::OnCpu,
            1 => SampleState::OffCpu,
            value => {
                return Err(SnapshotError::InvalidValue {
                    what: "entry state",
                    value,
                });
            }
        };
        let stack = r.id("entry stack", stacks.len())?;
        let weights = Weights {
            samples: r.varint("entry samples")?,
            wall_ns: r.varint("entry wall_ns")?,
            cpu_ns: r.varint("entry cpu_ns")?,
        };
        entries.push(Entry {
            group,
            task_id,
            task_name,
            state,
            stack,
            weights,
        });
    }

    let mismatches = decode_mismatches(r, &mut items)?;

    // Only two entries with one key make `from_parts` fail: every other
    // table was found free of duplicates as it was read.
    Profile::from_parts(
        strings,
        modules,
        frames,
        stacks,
        entries,
        stats,
        mismatches,
        (frequency_hz, grouping, duration_ns, start_unix_ns, budget),
    )
    .ok_or(SnapshotError::Duplicate { what: "entries" })
}

/// Adds `count` to `total`, and fails if that takes it over `max`.
fn within(
    what: &'static str,
    total: &mut u64,
    count: usize,
    max: u64,
) -> Result<(), SnapshotError> {
    *total += count as u64;
    if *total > max {
        return Err(SnapshotError::TooManyItems {
            what,
            count: *total,
            max,
        });
    }
    Ok(())
}

/// The interned table of `items`, which fails if two items are equal.
fn unique<T: Eq + std::hash::Hash + Clone, S: std::hash::BuildHasher + Default>(
    what: &'static str,
    items: Vec<T>,
) -> Result<Interner<T, S>, SnapshotError> {
    Interner::from_items(items).ok_or(SnapshotError::Duplicate { what })
}

fn decode_stats(r: &mut Reader<'_>) -> Result<Stats, SnapshotError> {
    let mut values = [0; Stats::FIELDS];
    for (v, (name, _)) in values.iter_mut().zip(Stats::default().fields()) {
        *v = r.varint(name)?;
    }
    Ok(Stats::from_fields(values))
}

/// The mismatches, whose strings count toward `items`.
fn decode_mismatches(r: &mut Reader<'_>, items: &mut u64) -> Result<Vec<Mismatch>, SnapshotError> {
    let n = r.varint("mismatches")?;
    if n > MAX_MISMATCHES as u64 {
        return Err(SnapshotError::InvalidValue {
            what: "mismatches count",
            value: n,
        });
    }
    let mut out = Vec::with_capacity(n as usize);
    for _ in 0..n {
        let task_id = r.varint("mismatch task_id")?;
        let mut lists = [Vec::new(), Vec::new()];
        for (list, what) in lists
            .iter_mut()
            .zip(["mismatch live", "mismatch published"])
        {
            let len = r.count(what, ONE_BYTE_EACH)?;
            if len > MAX_MISMATCH_FRAMES {
                return Err(SnapshotError::TooManyItems {
                    what,
                    count: len as u64,
                    max: MAX_MISMATCH_FRAMES as u64,
                });
            }
            within(what, items, len, MAX_ITEMS)?;
            list.reserve_exact(len);
            for _ in 0..len {
                list.push(r.str(what)?.to_owned());
            }
        }
        let [live, published] = lists;
        out.push(Mismatch {
            task_id,
            live,
            published,
        });
    }
    Ok(out)
}

#[cfg(all(test, not(async_stack_loom)))]
mod tests {
    use super::*;
    use crate::sampler::profile::RawFrame;
    use crate::sampler::{DEFAULT_BUDGET, FrameRef};
    use proptest::prelude::*;

    fn w(samples: u64) -> Weights {
        Weights {
            samples,
            wall_ns: samples * 10_101_010,
            cpu_ns: samples * 3,
        }
    }

    /// A profile that uses every kind of frame, multi-byte varints, empty
    /// and non-ASCII strings, an empty stack, and every counter.
    fn sample_profile() -> Profile {
        let mut p = Profile::new(DEFAULT_BUDGET);
        p.frequency_hz = 99;
        p.grouping = Grouping::SpawnSite;
        p.duration_ns = 12_345_678_901;
        p.start_unix_ns = 1_700_000_000_123_456_789;
        let root = RawFrame::Async {
            function: "app::main",
            file: "src/main.rs",
            line: 10,
            column: 5,
        };
        let leaf = RawFrame::Async {
            function: "app::serve::{{closure}}",
            file: "src/serve.rs",
            line: 420,
            column: 0,
        };
        let libc = RawFrame::Native {
            module_path: "/usr/lib/libc.so.6",
            build_id: &[0xde, 0xad, 0xbe, 0xef],
            offset: 0x1234,
            call: true,
        };
        let app = RawFrame::Native {
            module_path: "/bin/app",
            build_id: &[],
            offset: u64::MAX - 1,
            call: false,
        };
        let off = SampleState::OffCpu;
        let on = SampleState::OnCpu;
        p.add(
            "server",
            1,
            "server",
            off,
            &[root.clone(), leaf.clone()],
            w(3),
        );
        p.add(
            "server",
            1,
            "server",
            on,
            &[root.clone(), leaf, libc, app],
            w(2),
        );
        p.add("src/main.rs:20", 7, "", off, &[root], w(1));
        p.add(
            "ünïcode ✓",
            u64::MAX,
            "名前",
            on,
            &[],
            w(u64::MAX / 10_101_010),
        );
        let mut s = Stats::default();
        let fields = [
            &mut s.ticks,
            &mut s.late_ticks,
            &mut s.attempted,
            &mut s.ok,
            &mut s.retried,
            &mut s.dropped_torn,
            &mut s.dropped_inconsistent,
            &mut s.truncated,
            &mut s.reservoir_skipped,
            &mut s.signals,
            &mut s.signals_lost,
            &mut s.mismatches,
            &mut s.sampler_cpu_ns,
            &mut s.handler_ns,
            &mut s.cleared_stacks,
            &mut s.dropped_groups,
            &mut s.dropped.samples,
            &mut s.dropped.wall_ns,
            &mut s.dropped.cpu_ns,
        ];
        for (i, f) in fields.into_iter().enumerate() {
            *f = (i as u64 + 1) << (3 * i);
        }
        p.stats = s;
        p.add_mismatch(Mismatch {
            task_id: 7,
            live: vec!["app::main @ src/main.rs:10:5".into(), String::new()],
            published: vec![],
        });
        p
    }

    /// The stacks as a user reads them.
    type View<'a> = Vec<(
        &'a str,
        u64,
        &'a str,
        SampleState,
        Weights,
        Vec<FrameRef<'a>>,
    )>;

    fn view(p: &Profile) -> View<'_> {
        p.stacks()
            .map(|s| {
                let frames = s.frames().collect();
                (
                    s.group(),
                    s.task_id(),
                    s.task_name(),
                    s.state(),
                    s.weights(),
                    frames,
                )
            })
            .collect()
    }

    fn assert_same(a: &Profile, b: &Profile) {
        assert_eq!(a.strings.items, b.strings.items);
        assert_eq!(a.modules.items, b.modules.items);
        assert_eq!(a.frames.items, b.frames.items);
        assert_eq!(a.stacks.items, b.stacks.items);
        assert_eq!(a.entries, b.entries);
        assert_eq!(a.stats, b.stats);
        assert_eq!(a.mismatches, b.mismatches);
        assert_eq!(a.frequency_hz, b.frequency_hz);
        assert_eq!(a.grouping, b.grouping);
        assert_eq!(a.duration_ns, b.duration_ns);
        assert_eq!(a.start_unix_ns, b.start_unix_ns);
        assert_eq!(a.budget, b.budget);
        assert_eq!(a.memory_bytes(), b.memory_bytes());
        assert_eq!(view(a), view(b));
    }

    /// The assumption behind `MAX_ITEMS` and `MAX_STACK_FRAMES`: the
    /// budget charges at least 32 bytes per interned item and 8 per stack
    /// frame id, so a profile within `MAX_BUDGET` holds at most half the
    /// reader's limits.
    fn assert_budget_covers_the_limits(p: &Profile) {
        let items =
            p.strings.len() + p.modules.len() + p.frames.len() + p.stacks.len() + p.entries.len();
        let ids: usize = p.stacks.items.iter().map(|s| s.len()).sum();
        assert!(
            p.memory_bytes() >= 32 * items + 8 * ids,
            "{} bytes for {items} items and {ids} ids",
            p.memory_bytes()
        );
        assert_eq!(MAX_ITEMS, 2 * (MAX_BUDGET / 32) as u64);
        assert_eq!(MAX_STACK_FRAMES, 2 * (MAX_BUDGET / 8) as u64);
    }

    fn payload(snapshot: &[u8]) -> &[u8] {
        &snapshot[HEADER_LEN..]
    }

    /// A snapshot of this core, with a correct length and checksum.
    fn with_core(core: &[u8]) -> Vec<u8> {
        let mut p = Writer::default();
        p.varint(core.len() as u64);
        p.0.extend_from_slice(core);
        seal(SNAPSHOT_MAJOR, SNAPSHOT_MINOR, &p.0)
    }

    /// The core of an empty profile up to its tables, then `rest`.
    fn crafted(rest: impl FnOnce(&mut Writer)) -> Vec<u8> {
        let p = Profile::default();
        let mut core = Writer::default();
        encode_meta(&p, &mut core);
        encode_stats(&p.stats, &mut core);
        rest(&mut core);
        with_core(&core.0)
    }

    fn err(bytes: &[u8]) -> SnapshotError {
        match Profile::from_snapshot(bytes) {
            Ok(_) => panic!("a bad snapshot was accepted"),
            Err(e) => e,
        }
    }

    /// A change to a profile that breaks one of its invariants.
    type Damage = fn(&mut Profile);

    /// The snapshot of `p` after `damage`, which may break invariants the
    /// profile's own methods keep: the encoder writes the tables as they
    /// are, with a valid length and checksum.
    fn damaged(damage: impl FnOnce(&mut Profile)) -> SnapshotError {
        let mut p = sample_profile();
        damage(&mut p);
        err(&p.to_snapshot())
    }

    #[test]
    fn round_trip_keeps_every_table() {
        let p = sample_profile();
        let bytes = p.to_snapshot();
        let q = Profile::from_snapshot(&bytes).unwrap();
        assert_same(&p, &q);
        assert_budget_covers_the_limits(&p);
        assert_eq!(view(&q)[1].5.len(), 4);
        assert!(matches!(
            view(&q)[1].5[2],
            FrameRef::Native {
                module: "/usr/lib/libc.so.6",
                build_id: &[0xde, 0xad, 0xbe, 0xef],
                offset: 0x1234,
                call: true
            }
        ));
        assert_eq!(q.to_snapshot(), bytes, "encoding is deterministic");
    }

    #[test]
    fn loaded_profile_keeps_aggregating_into_its_entries() {
        let mut q = Profile::from_snapshot(&sample_profile().to_snapshot()).unwrap();
        let root = RawFrame::Async {
            function: "app::main",
            file: "src/main.rs",
            line: 10,
            column: 5,
        };
        q.add("src/main.rs:20", 7, "", SampleState::OffCpu, &[root], w(4));
        assert_eq!(
            q.entries.len(),
            4,
            "the loaded interning maps found the entry"
        );
        assert_eq!(view(&q)[2].4, w(5));
    }

    #[test]
    fn round_trip_of_a_profile_shed_by_its_budget() {
        let mut p = Profile::new(MIN_BUDGET);
        for i in 0..3000u32 {
            let name = format!("function_number_{i}");
            let frame = RawFrame::Async {
                function: &name,
                file: "src/lib.rs",
                line: i,
                column: 1,
            };
            let group = format!("group{}", i % 5);
            p.add(&group, i.into(), "", SampleState::OffCpu, &[frame], w(1));
        }
        assert!(p.stats.cleared_stacks > 0);
        assert!(p.frames.items.contains(&Frame::Cleared));
        let q = Profile::from_snapshot(&p.to_snapshot()).unwrap();
        assert_same(&p, &q);
        assert_budget_covers_the_limits(&p);
        assert!(q.stacks().any(|s| s.frames().eq([FrameRef::Cleared])));
    }

    #[test]
    fn save_and_load_through_a_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("app.asprof");
        let p = sample_profile();
        p.save(&path).unwrap();
        assert_same(&p, &Profile::load(&path).unwrap());
        // A second save replaces the first whole, and leaves no temporary
        // file behind.
        let empty = Profile::default();
        empty.save(&path).unwrap();
        assert_same(&empty, &Profile::load(&path).unwrap());
        let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(names.len(), 1);
        assert_eq!(std::fs::read(&path).unwrap(), empty.to_snapshot());
    }

    #[test]
    fn a_failed_save_leaves_the_target_intact() {
        let dir = tempfile::tempdir().unwrap();
        // Into a missing directory: nothing is created.
        let missing = dir.path().join("missing").join("app.asprof");
        let e = sample_profile().save(&missing).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::NotFound);
        assert!(!dir.path().join("missing").exists());
        // Over a target the rename cannot replace (a non-empty directory):
        // the target is untouched and the temporary file is removed.
        let target = dir.path().join("app.asprof");
        std::fs::create_dir(&target).unwrap();
        std::fs::write(target.join("keep"), b"kept").unwrap();
        assert!(sample_profile().save(&target).is_err());
        assert_eq!(std::fs::read(target.join("keep")).unwrap(), b"kept");
        let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(names.len(), 1, "no temporary file is left behind");
    }

    #[test]
    fn load_reports_io_and_header_errors() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("app.asprof");
        assert!(matches!(
            Profile::load(&path),
            Err(SnapshotError::Io(e)) if e.kind() == io::ErrorKind::NotFound
        ));
        std::fs::write(&path, b"\x89ASPROF").unwrap();
        assert!(matches!(
            Profile::load(&path),
            Err(SnapshotError::Truncated {
                what: "header",
                needed: 24,
                available: 7
            })
        ));
        // A header declaring a huge payload is refused before reading it.
        let mut huge = Profile::default().to_snapshot();
        huge[12..20].copy_from_slice(&(1u64 << 40).to_le_bytes());
        std::fs::write(&path, &huge).unwrap();
        assert!(matches!(
            Profile::load(&path),
            Err(SnapshotError::PayloadTooLarge {
                length: 0x100_0000_0000,
                max: MAX_SNAPSHOT_PAYLOAD
            })
        ));
        let mut trailing = Profile::default().to_snapshot();
        trailing.extend_from_slice(b"abc");
        std::fs::write(&path, &trailing).unwrap();
        assert!(matches!(
            Profile::load(&path),
            Err(SnapshotError::TrailingBytes { count: 3 })
        ));
    }

    #[test]
    fn rejects_bad_magic() {
        let mut bytes = sample_profile().to_snapshot();
        bytes[0] = b'A';
        assert!(matches!(err(&bytes), SnapshotError::BadMagic));
        assert!(matches!(err(&[0; 64]), SnapshotError::BadMagic));
    }

    #[test]
    fn rejects_unknown_major_versions() {
        for major in [0, 2, u16::MAX] {
            let bytes = seal(major, 0, payload(&Profile::default().to_snapshot()));
            match err(&bytes) {
                SnapshotError::UnsupportedVersion { major: m, minor: 0 } => assert_eq!(m, major),
                e => panic!("{e}"),
            }
        }
    }

    #[test]
    fn reads_newer_minors_skipping_their_extensions() {
        let p = sample_profile();
        let mut ext = payload(&p.to_snapshot()).to_vec();
        ext.extend_from_slice(&[1, 2, 0xaa, 0xbb, 3, 0]);
        assert_same(&p, &Profile::from_snapshot(&seal(1, 3, &ext)).unwrap());
        let rejected = |minor: u16, records: &[u8]| {
            let mut ext = payload(&p.to_snapshot()).to_vec();
            ext.extend_from_slice(records);
            err(&seal(1, minor, &ext))
        };
        // Records of a minor the header does not reach, out of order, or
        // of minor 0.
        for (minor, records) in [
            (0, &[1, 0][..]),
            (2, &[3, 0]),
            (3, &[2, 0, 1, 0]),
            (3, &[0, 0]),
        ] {
            assert!(
                matches!(
                    rejected(minor, records),
                    SnapshotError::InvalidValue {
                        what: "extension minor",
                        ..
                    }
                ),
                "{minor} {records:?}"
            );
        }
        assert!(matches!(
            rejected(1, &[1, 5, 0]),
            SnapshotError::Truncated {
                what: "extension body",
                needed: 5,
                available: 1
            }
        ));
    }

    #[test]
    fn truncation_at_every_length_is_an_error() {
        let bytes = sample_profile().to_snapshot();
        let payload_len = (bytes.len() - HEADER_LEN) as u64;
        for len in 0..bytes.len() {
            let expected = if len < HEADER_LEN {
                ("header", HEADER_LEN as u64, len as u64)
            } else {
                ("payload", payload_len, (len - HEADER_LEN) as u64)
            };
            match err(&bytes[..len]) {
                SnapshotError::Truncated {
                    what,
                    needed,
                    available,
                } => assert_eq!((what, needed, available), expected),
                e => panic!("length {len}: {e}"),
            }
        }
    }

    #[test]
    fn every_single_bit_flip_is_rejected() {
        let bytes = sample_profile().to_snapshot();
        for i in 0..bytes.len() {
            for bit in 0..8 {
                let mut b = bytes.clone();
                b[i] ^= 1 << bit;
                let e = err(&b);
                let expected = match i {
                    0..8 => matches!(e, SnapshotError::BadMagic),
                    8..10 => matches!(e, SnapshotError::UnsupportedVersion { .. }),
                    12..20 => matches!(
                        e,
                        SnapshotError::PayloadTooLarge { .. }
                            | SnapshotError::Truncated {
                                what: "payload",
                                ..
                            }
                            | SnapshotError::TrailingBytes { .. }
                    ),
                    // The minor, the checksum itself, and the payload.
                    _ => matches!(e, SnapshotError::ChecksumMismatch { .. }),
                };
                assert!(expected, "byte {i} bit {bit}: {e}");
            }
        }
    }

    #[test]
    fn rejects_trailing_bytes() {
        let mut bytes = sample_profile().to_snapshot();
        bytes.extend_from_slice(&[0, 0, 0]);
        assert!(matches!(
            err(&bytes),
            SnapshotError::TrailingBytes { count: 3 }
        ));
    }

    #[test]
    fn rejects_a_payload_above_the_limit_before_reading_it() {
        let mut bytes = Profile::default().to_snapshot();
        bytes[12..20].copy_from_slice(&(MAX_SNAPSHOT_PAYLOAD + 1).to_le_bytes());
        assert!(matches!(
            err(&bytes),
            SnapshotError::PayloadTooLarge { length, .. } if length == MAX_SNAPSHOT_PAYLOAD + 1
        ));
    }

    #[test]
    fn huge_counts_with_a_tiny_body_are_refused_before_allocating() {
        for count in [u64::MAX, 1 << 40, 2] {
            let bytes = crafted(|c| {
                c.varint(count);
                c.varint(0);
            });
            assert!(
                matches!(
                    err(&bytes),
                    SnapshotError::CountTooLarge { what: "strings", count: c, remaining: 1 } if c == count
                ),
                "{count}"
            );
        }
        // Entries take at least 8 bytes each.
        let bytes = crafted(|c| {
            encode_tables(&Profile::default(), c);
            c.0.pop(); // the entry count
            c.varint(1);
            c.0.extend_from_slice(&[0; 7]);
        });
        assert!(matches!(
            err(&bytes),
            SnapshotError::CountTooLarge {
                what: "entries",
                count: 1,
                remaining: 7
            }
        ));
        // Distinct items: 200 strings need at least 129 + 3 * 71 = 342
        // bytes (only 129 strings are shorter than 3 bytes).
        let bytes = crafted(|c| {
            c.varint(200);
            c.0.resize(c.0.len() + 300, 0);
        });
        assert!(matches!(
            err(&bytes),
            SnapshotError::CountTooLarge {
                what: "strings",
                count: 200,
                remaining: 300
            }
        ));
        let bytes = crafted(|c| {
            c.varint(1);
            c.varint(1 << 40);
        });
        assert!(matches!(
            err(&bytes),
            SnapshotError::Truncated {
                what: "string",
                needed: 0x100_0000_0000,
                available: 0
            }
        ));
        let mut p = sample_profile();
        p.mismatches[0].live = vec![String::new(); 3];
        let mut bytes = p.to_snapshot();
        // The mismatch is last: `live` count 3, three empty strings, then
        // `published` count 0. Claim 100 strings instead.
        let tail = bytes.len() - 5;
        assert_eq!(bytes[tail..], [3, 0, 0, 0, 0]);
        bytes[tail] = 100;
        let bytes = seal(1, 0, payload(&bytes));
        assert!(matches!(
            err(&bytes),
            SnapshotError::CountTooLarge {
                what: "mismatch live",
                count: 100,
                remaining: 4
            }
        ));
    }

    #[test]
    fn rejects_more_items_than_a_profile_holds() {
        // Counts the bytes could hold (distinct strings and stacks take 3
        // bytes each), but more than any profile has.
        let too_many = |rest: &dyn Fn(&mut Writer)| match err(&crafted(rest)) {
            SnapshotError::TooManyItems { what, count, max } => (what, count, max),
            e => panic!("{e}"),
        };
        let n = MAX_ITEMS + 1;
        let strings = too_many(&|c| {
            c.varint(n);
            c.0.resize(c.0.len() + 3 * n as usize, 0);
        });
        assert_eq!(strings, ("strings", n, MAX_ITEMS));
        // The limit is on all tables together.
        let stacks = too_many(&|c| {
            c.0.extend_from_slice(&[1, 0, 0, 0]); // strings [""], no modules or frames
            c.varint(MAX_ITEMS);
            c.0.resize(c.0.len() + 3 * MAX_ITEMS as usize, 0);
        });
        assert_eq!(stacks, ("stacks", n, MAX_ITEMS));
        // Mismatch strings too: one list may hold as many frames as a
        // published stack, and no more.
        let mismatch = |live: u64| {
            crafted(|c| {
                c.0.extend_from_slice(&[1, 0, 0, 0, 0, 0]); // strings [""], empty tables
                c.0.extend_from_slice(&[1, 7]); // one mismatch, of task 7
                c.varint(live);
                c.0.resize(c.0.len() + live as usize, 0);
                c.varint(0);
            })
        };
        let cap = STACK_CAPACITY as u64;
        let p = Profile::from_snapshot(&mismatch(cap)).unwrap();
        assert_eq!(p.mismatches()[0].live.len(), STACK_CAPACITY);
        assert_eq!(p.memory_bytes(), p.measure());
        assert!(p.memory_bytes() >= STACK_CAPACITY * std::mem::size_of::<String>());
        assert!(matches!(
            err(&mismatch(cap + 1)),
            SnapshotError::TooManyItems {
                what: "mismatch live",
                count,
                max,
            } if count == cap + 1 && max == cap
        ));
        let n = MAX_STACK_FRAMES + 1;
        let frames = too_many(&|c| {
            c.0.extend_from_slice(&[1, 0, 0, 0, 1]); // one stack
            c.varint(n);
            c.0.resize(c.0.len() + n as usize, 0);
        });
        assert_eq!(frames, ("stack frames", n, MAX_STACK_FRAMES));
    }

    #[test]
    fn rejects_out_of_range_ids() {
        let cases: [(&str, Damage); 8] = [
            ("entry group", |p| p.entries[0].group = 1000),
            ("entry task_name", |p| p.entries[0].task_name = 1000),
            ("entry stack", |p| p.entries[0].stack = 1000),
            ("stack frame", |p| p.stacks.items[0] = Box::new([0, 1000])),
            ("module path", |p| p.modules.items[0].path = 1000),
            ("async frame function", |p| {
                p.frames.items[0] = Frame::Async {
                    function: 1000,
                    file: 0,
                    line: 1,
                    column: 1,
                }
            }),
            ("async frame file", |p| {
                p.frames.items[0] = Frame::Async {
                    function: 0,
                    file: 1000,
                    line: 1,
                    column: 1,
                }
            }),
            ("native frame module", |p| {
                p.frames.items[0] = Frame::Native {
                    module: 1000,
                    offset: 0,
                    call: false,
                }
            }),
        ];
        for (field, damage) in cases {
            match damaged(damage) {
                SnapshotError::IndexOutOfRange {
                    what,
                    index: 1000,
                    len,
                } => {
                    assert_eq!(what, field);
                    assert!(len < 1000);
                }
                e => panic!("{field}: {e}"),
            }
        }
    }

    #[test]
    fn rejects_duplicate_items() {
        let cases: [(&str, Damage); 5] = [
            ("strings", |p| p.strings.items.push("server".into())),
            ("modules", |p| {
                p.modules.items.push(p.modules.items[0].clone())
            }),
            ("frames", |p| p.frames.items.push(p.frames.items[0])),
            ("stacks", |p| p.stacks.items.push(p.stacks.items[0].clone())),
            ("entries", |p| {
                let mut e = p.entries[0];
                e.weights = w(1);
                p.entries.push(e);
            }),
        ];
        for (table, damage) in cases {
            match damaged(damage) {
                SnapshotError::Duplicate { what } => assert_eq!(what, table),
                e => panic!("{table}: {e}"),
            }
        }
    }

    #[test]
    fn rejects_invalid_values() {
        let cases: [(&str, u64, Damage); 5] = [
            ("budget", 1, |p| p.budget = 1),
            ("budget", (MAX_BUDGET + 1) as u64, |p| {
                p.budget = MAX_BUDGET + 1
            }),
            ("string 0 length", 1, |p| p.strings.items[0] = "x".into()),
            ("strings count", 0, |p| p.strings.items.clear()),
            ("mismatches count", 9, |p| {
                p.mismatches = vec![p.mismatches[0].clone(); MAX_MISMATCHES + 1]
            }),
        ];
        for (field, v, damage) in cases {
            match damaged(damage) {
                SnapshotError::InvalidValue { what, value } => {
                    assert_eq!((what, value), (field, v))
                }
                e => panic!("{field}: {e}"),
            }
        }
        let invalid = |bytes: &[u8]| match err(bytes) {
            SnapshotError::InvalidValue { what, value } => (what, value),
            e => panic!("{e}"),
        };
        let mut meta = Writer::default();
        meta.varint(1 << 32);
        let frequency = with_core(&meta.0);
        assert_eq!(invalid(&frequency), ("frequency_hz", 1 << 32));
        let mut meta = Writer::default();
        meta.varint(99);
        meta.varint(2);
        assert_eq!(invalid(&with_core(&meta.0)), ("grouping", 2));
        // Tables: strings [""], one module, then `frame`, one empty stack,
        // one entry in `state`.
        let tables = |frame: &[u8], state: u8| {
            crafted(|c| {
                c.0.extend_from_slice(&[1, 0]);
                c.0.extend_from_slice(&[1, 0, 0]);
                c.varint(1);
                c.0.extend_from_slice(frame);
                c.0.extend_from_slice(&[1, 0]);
                c.0.extend_from_slice(&[1, 0, 0, 0, state, 0, 0, 0, 0]);
                encode_mismatches(&[], c);
            })
        };
        let one_frame = |frame: &[u8]| tables(frame, 0);
        let one_entry = |state: u8| tables(&[2], state);
        assert!(Profile::from_snapshot(&one_frame(&[1, 0, 7, 1])).is_ok());
        assert_eq!(invalid(&one_frame(&[3])), ("frame tag", 3));
        assert_eq!(invalid(&one_frame(&[1, 0, 0, 2])), ("native frame call", 2));
        assert!(Profile::from_snapshot(&one_entry(1)).is_ok());
        assert_eq!(invalid(&one_entry(2)), ("entry state", 2));
    }

    #[test]
    fn rejects_invalid_utf8() {
        let mut p = sample_profile();
        p.add("MARKER", 1, "", SampleState::OnCpu, &[], w(1));
        let bytes = p.to_snapshot();
        let mut pl = payload(&bytes).to_vec();
        let at = pl.windows(6).position(|s| s == b"MARKER").unwrap();
        pl[at] = 0xff;
        assert!(matches!(
            err(&seal(1, 0, &pl)),
            SnapshotError::InvalidUtf8 { what: "string" }
        ));
    }

    #[test]
    fn rejects_non_canonical_varints() {
        let bytes = Profile::default().to_snapshot();
        let pl = payload(&bytes);
        assert!(pl[0] < 0x80, "the empty core's length takes one byte");
        // The same core length, padded to two bytes.
        let mut padded = vec![pl[0] | 0x80, 0];
        padded.extend_from_slice(&pl[1..]);
        assert!(matches!(
            err(&seal(1, 0, &padded)),
            SnapshotError::BadVarint { what: "core_len" }
        ));
        let too_long = [0xff; 11];
        assert!(matches!(
            err(&seal(1, 0, &too_long)),
            SnapshotError::BadVarint { what: "core_len" }
        ));
        let mut max = Writer::default();
        max.varint(u64::MAX);
        assert_eq!(max.0.len(), 10);
        let mut r = Reader::new(&max.0);
        assert_eq!(r.varint("test").unwrap(), u64::MAX);
    }

    #[test]
    fn core_length_must_match_its_contents() {
        let bytes = Profile::default().to_snapshot();
        let core = &payload(&bytes)[1..];
        let mut longer = Writer::default();
        longer.varint(core.len() as u64 + 1);
        longer.0.extend_from_slice(core);
        longer.0.push(0);
        match err(&seal(1, 0, &longer.0)) {
            SnapshotError::LengthMismatch {
                what: "core",
                declared,
                actual,
            } => assert_eq!(
                (declared, actual),
                (core.len() as u64 + 1, core.len() as u64)
            ),
            e => panic!("{e}"),
        }
        let mut shorter = Writer::default();
        shorter.varint(core.len() as u64 - 1);
        shorter.0.extend_from_slice(core);
        assert!(matches!(
            err(&seal(1, 0, &shorter.0)),
            SnapshotError::Truncated {
                what: "mismatches",
                ..
            }
        ));
    }

    #[test]
    fn every_error_names_its_field() {
        let e = damaged(|p| p.entries[0].stack = 1000);
        assert_eq!(
            e.to_string(),
            "profile snapshot: entry stack 1000 is out of range (the table holds 4)"
        );
        let e = err(&[]);
        assert_eq!(
            e.to_string(),
            "profile snapshot: truncated in header: needs 24 bytes, 0 left"
        );
    }

    /// A profile of about 4 MiB (the default budget) saves and loads in
    /// linear time: well under a second in an optimised build.
    #[test]
    fn a_full_default_budget_profile_round_trips_quickly() {
        let mut p = Profile::new(DEFAULT_BUDGET);
        let mut i = 0u32;
        while p.memory_bytes() < DEFAULT_BUDGET - 4096 && p.stats.cleared_stacks == 0 {
            let name = format!("crate::module::function_{i}::{{{{closure}}}}");
            let frames = [
                RawFrame::Async {
                    function: "crate::main",
                    file: "src/main.rs",
                    line: 1,
                    column: 1,
                },
                RawFrame::Async {
                    function: &name,
                    file: "src/module.rs",
                    line: i,
                    column: 9,
                },
            ];
            let group = format!("task{}", i % 64);
            p.add(&group, i.into(), &group, SampleState::OffCpu, &frames, w(1));
            i += 1;
        }
        assert!(
            p.memory_bytes() > DEFAULT_BUDGET / 4 * 3,
            "{}",
            p.memory_bytes()
        );
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("big.asprof");
        p.save(&path).unwrap();
        let q = Profile::load(&path).unwrap();
        assert_same(&p, &q);
        assert_budget_covers_the_limits(&p);
    }

    fn check_decodes_consistently(bytes: &[u8]) {
        if let Ok(p) = Profile::from_snapshot(bytes) {
            let again = p.to_snapshot();
            let q = Profile::from_snapshot(&again).expect("a re-encoded profile decodes");
            assert_eq!(q.to_snapshot(), again);
            assert_same(&p, &q);
        }
    }

    #[derive(Clone, Debug)]
    enum Mutation {
        Flip(usize, u8),
        Set(usize, u8),
        Insert(usize, u8),
        Remove(usize),
        Truncate(usize),
    }

    fn mutation() -> impl Strategy<Value = Mutation> {
        prop_oneof![
            (any::<usize>(), 0u8..8).prop_map(|(i, b)| Mutation::Flip(i, b)),
            (any::<usize>(), any::<u8>()).prop_map(|(i, b)| Mutation::Set(i, b)),
            (any::<usize>(), any::<u8>()).prop_map(|(i, b)| Mutation::Insert(i, b)),
            any::<usize>().prop_map(Mutation::Remove),
            any::<usize>().prop_map(Mutation::Truncate),
        ]
    }

    fn mutate(bytes: &mut Vec<u8>, mutations: &[Mutation]) {
        for m in mutations {
            let len = bytes.len();
            match *m {
                Mutation::Insert(i, b) => bytes.insert(i % (len + 1), b),
                _ if len == 0 => {}
                Mutation::Flip(i, bit) => bytes[i % len] ^= 1 << bit,
                Mutation::Set(i, b) => bytes[i % len] = b,
                Mutation::Remove(i) => {
                    bytes.remove(i % len);
                }
                Mutation::Truncate(i) => bytes.truncate(i % len),
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
            check_decodes_consistently(&bytes);
        }

        /// Arbitrary payloads behind a valid header reach the decoder.
        #[test]
        fn arbitrary_payloads_never_panic(
            minor in 0u16..3,
            pl in proptest::collection::vec(any::<u8>(), 0..512),
        ) {
            check_decodes_consistently(&seal(SNAPSHOT_MAJOR, minor, &pl));
        }

        #[test]
        fn mutated_snapshots_never_panic(
            mutations in proptest::collection::vec(mutation(), 1..4),
        ) {
            let mut bytes = sample_profile().to_snapshot();
            mutate(&mut bytes, &mutations);
            check_decodes_consistently(&bytes);
        }

        /// Mutated payloads under a fixed-up length and checksum, so that
        /// the mutations reach the decoder rather than the checksum.
        #[test]
        fn resealed_mutations_never_panic(
            minor in 0u16..3,
            mutations in proptest::collection::vec(mutation(), 1..4),
        ) {
            let bytes = sample_profile().to_snapshot();
            let mut pl = payload(&bytes).to_vec();
            mutate(&mut pl, &mutations);
            check_decodes_consistently(&seal(SNAPSHOT_MAJOR, minor, &pl));
        }
    }
}
