//! The errors of reading a snapshot: one variant per way the bytes can be
//! wrong, each naming the field it was reading.

use super::version::SNAPSHOT_MAJOR;

use std::fmt;
use std::io;

/// Why a snapshot could not be loaded. Every variant names the field at
/// fault; see the [module docs](crate::sampler::snapshot) for the format.
#[derive(Debug)]
#[non_exhaustive]
pub enum SnapshotError {
    /// Reading the file failed.
    Io(io::Error),
    /// The first 8 bytes are not [`SNAPSHOT_MAGIC`](crate::sampler::snapshot::SNAPSHOT_MAGIC): not a snapshot.
    BadMagic,
    /// The header's major version is not [`SNAPSHOT_MAJOR`].
    UnsupportedVersion {
        /// The header's major version.
        major: u16,
        /// The header's minor version.
        minor: u16,
    },
    /// The header declares a payload above [`MAX_SNAPSHOT_PAYLOAD`](crate::sampler::snapshot::MAX_SNAPSHOT_PAYLOAD).
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
