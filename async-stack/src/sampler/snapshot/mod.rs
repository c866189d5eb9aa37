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
//!   extension records of a minor this version does not define, which it
//!   skips, and with the lowest minor version that holds its records).
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
//! | 10     | 2    | `minor`       | `u16`; the lowest minor whose extension records the snapshot holds: `1` if it has tokio ids, else `0`. A reader accepts any minor of its major (see *Extensions*) |
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
//! | `budget`        | `varint` | memory budget, [`MIN_BUDGET`](crate::sampler::MIN_BUDGET)`..=`[`MAX_BUDGET`](crate::sampler::MAX_BUDGET) |
//! | `stats`         | 19 × `varint` | [`Stats`](crate::sampler::Stats) in declaration order: `ticks`, `late_ticks`, `attempted`, `ok`, `retried`, `dropped_torn`, `dropped_inconsistent`, `truncated`, `reservoir_skipped`, `signals`, `signals_lost`, `mismatches`, `sampler_cpu_ns`, `handler_ns`, `cleared_stacks`, `dropped_groups`, then `dropped` as `samples`, `wall_ns`, `cpu_ns` |
//! | `strings`       | `list(str)` | at least one item; string `0` is `""` |
//! | `modules`       | `list(module)` | `module` = `path: id(strings)`, `build_id: bytes` |
//! | `frames`        | `list(frame)` | `frame` = a `varint` tag, then: `0` async: `function: id(strings)`, `file: id(strings)`, `line: u32`, `column: u32`; `1` native: `module: id(modules)`, `offset: varint`, `call: bool`; `2` cleared: nothing |
//! | `stacks`        | `list(list(id(frames)))` | frame ids, root first |
//! | `entries`       | `list(entry)` | `entry` = `group: id(strings)`, `task_id: varint`, `task_name: id(strings)`, `state: varint` (`0` on-CPU, `1` off-CPU), `stack: id(stacks)`, `samples`, `wall_ns`, `cpu_ns: varint` |
//! | `mismatches`    | `list(mismatch)` | at most [`MAX_MISMATCHES`](crate::sampler::MAX_MISMATCHES) items; `mismatch` = `task_id: varint`, `live: list(str)`, `published: list(str)` |
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
//! This version (`1.1`) defines the record of minor 1, and checks the
//! framing of every other record and skips its body, so it reads snapshots
//! of any `1.x`. A `1.0` snapshot has no extension records.
//!
//! **Minor 1: tokio ids.** The id of the tokio task each entry's task is
//! filed under (see [`StackSample::tokio_id`](crate::sampler::StackSample::tokio_id)),
//! for the entries that have one; a snapshot with none has no record of
//! minor 1. Its body is exactly:
//!
//! | field       | type | meaning |
//! |-------------|------|---------|
//! | `tokio_ids` | `list(pair)` | at least one item; `pair` = `entry: id(entries)`, strictly increasing from pair to pair, then `tokio_id: varint`, at least 1 |
//!
//! # Limits
//!
//! These are the reader's limits, not part of the format. Profiles keep
//! their tables within [`MAX_BUDGET`](crate::sampler::MAX_BUDGET) (20 MiB) of memory, and their
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
//!   entries at least 8; tokio ids 2; stack frame ids and mismatch strings 1;
//! - each list of a mismatch holds at most [`STACK_CAPACITY`](crate::task::STACK_CAPACITY) (63)
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
//!
//! # Files
//!
//! This file holds the public API ([`Profile::save`], [`Profile::load`],
//! [`Profile::to_snapshot`], [`Profile::from_snapshot`]) and the format's
//! public constants; `format.rs` the framing (header, checksum) and the
//! limits, `encode.rs` and `decode.rs` the payload, `error.rs` the errors,
//! `version.rs` the magic bytes and version.

mod decode;
mod encode;
mod error;
mod format;
#[cfg(all(test, not(async_stack_loom)))]
mod tests;
mod version;

use std::fs::File;
use std::io::{self, Read, Write};
use std::path::Path;

use decode::*;
use encode::*;
use format::*;

use crate::sampler::profile::Profile;

pub use error::SnapshotError;
pub use version::{MAX_SNAPSHOT_PAYLOAD, SNAPSHOT_MAGIC, SNAPSHOT_MAJOR, SNAPSHOT_MINOR};

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
        let minor = encode_extensions(self, &mut payload);
        debug_assert!(minor <= SNAPSHOT_MINOR);
        seal(SNAPSHOT_MAJOR, minor, &payload.0)
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
