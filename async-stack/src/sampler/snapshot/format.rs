//! The snapshot's framing and limits: the header (magic, version, payload
//! length, checksum) around the payload, and the bounds every count read
//! from untrusted bytes is checked against before anything is allocated
//! (see the format's docs in [`crate::sampler::snapshot`]).

use super::error::SnapshotError;
use super::version::{MAX_SNAPSHOT_PAYLOAD, SNAPSHOT_MAGIC, SNAPSHOT_MAJOR};
use crate::sampler::profile::MAX_BUDGET;
use crate::task::STACK_CAPACITY;

/// The most interned items (strings, modules, frames, stacks and entries
/// together) a snapshot may hold: twice what a profile within
/// [`MAX_BUDGET`] can, at 32 bytes of budget per item.
pub(super) const MAX_ITEMS: u64 = (MAX_BUDGET / 16) as u64;
/// The most frame ids all stacks together may hold: twice what a profile
/// within [`MAX_BUDGET`] can, at 8 bytes of budget per id.
pub(super) const MAX_STACK_FRAMES: u64 = (MAX_BUDGET / 4) as u64;

/// The most strings one list of a mismatch may hold: as many frames as a
/// published stack holds, the most the sampler writes.
pub(super) const MAX_MISMATCH_FRAMES: usize = STACK_CAPACITY;

/// The fewest bytes the items of a list take: `each` bytes every item,
/// except at most `shorter` of them, which take one byte at least. Counts
/// are checked against it before anything is allocated for them, so that
/// an allocation is at most the items' size over `each` times the bytes
/// left (see the module docs' *Limits*).
#[derive(Clone, Copy, Debug)]
pub(super) struct MinSize {
    pub(super) each: usize,
    pub(super) shorter: usize,
}

impl MinSize {
    /// The most items `bytes` can hold.
    pub(super) fn most_items(self, bytes: usize) -> usize {
        let short = self.shorter.min(bytes);
        short + (bytes - short) / self.each
    }
}

/// Lists whose items take a byte at least: stack frame ids, mismatch
/// strings.
pub(super) const ONE_BYTE_EACH: MinSize = MinSize {
    each: 1,
    shorter: 0,
};
/// Distinct strings: `""` takes 1 byte, the 128 one-byte strings (ASCII)
/// 2, and every other at least 3 (a length and two bytes).
pub(super) const STRINGS: MinSize = MinSize {
    each: 3,
    shorter: 129,
};
/// Distinct modules: a path id and a build id of 2 bytes together only
/// for the 128 path ids below 128 with an empty build id, else 3 at least.
pub(super) const MODULES: MinSize = MinSize {
    each: 3,
    shorter: 128,
};
/// Distinct frames: a tag and four fields (async, 5 bytes) or three
/// (native, 4), except the one `[cleared]` frame, a tag alone.
pub(super) const FRAMES: MinSize = MinSize {
    each: 4,
    shorter: 1,
};
/// Distinct stacks: a count and its ids, 1 byte for the empty stack and 2
/// for the 128 stacks of one frame id below 128, else 3 at least.
pub(super) const STACKS: MinSize = MinSize {
    each: 3,
    shorter: 129,
};
/// Entries: eight fields.
pub(super) const ENTRIES: MinSize = MinSize {
    each: 8,
    shorter: 0,
};
/// The tokio ids of entries (minor 1): an entry id and a tokio id.
pub(super) const TOKIO_IDS: MinSize = MinSize {
    each: 2,
    shorter: 0,
};

/// The size of the fixed header.
pub(super) const HEADER_LEN: usize = 24;
/// The header bytes the checksum covers (everything before the checksum).
pub(super) const CHECKED_HEADER_LEN: usize = 20;

/// The header and the rest of `bytes`.
pub(super) fn split_header(bytes: &[u8]) -> Result<(&[u8; HEADER_LEN], &[u8]), SnapshotError> {
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
pub(super) struct Header {
    pub(super) minor: u16,
    pub(super) payload_len: u64,
    pub(super) checksum: u32,
}

impl Header {
    /// Checks the magic, the major version and the payload limit.
    pub(super) fn parse(h: &[u8; HEADER_LEN]) -> Result<Header, SnapshotError> {
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
    pub(super) fn check_payload(
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

pub(super) fn checksum(header: &[u8], payload: &[u8]) -> u32 {
    let mut h = crc32fast::Hasher::new();
    h.update(header);
    h.update(payload);
    h.finalize()
}

/// A whole snapshot: the header for `payload`, then `payload`.
pub(super) fn seal(major: u16, minor: u16, payload: &[u8]) -> Vec<u8> {
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
