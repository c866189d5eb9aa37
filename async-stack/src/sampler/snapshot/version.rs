//! The snapshot format's identity: its magic bytes, its version, and the
//! largest payload a reader accepts. Both the framing and the errors name
//! them.

/// The first 8 bytes of every snapshot: `"\x89ASPROF\n"`. The high first
/// byte and the newline catch a snapshot mangled as text.
pub const SNAPSHOT_MAGIC: [u8; 8] = *b"\x89ASPROF\n";
/// The major format version this build writes and reads.
pub const SNAPSHOT_MAJOR: u16 = 1;
/// The newest minor format version this build writes (it reads every
/// minor): a snapshot declares the lowest minor whose extension records
/// it holds, so a profile with no tokio task is still written as `1.0`.
pub const SNAPSHOT_MINOR: u16 = 1;
/// The largest payload a snapshot may declare: 64 MiB.
pub const MAX_SNAPSHOT_PAYLOAD: u64 = 64 << 20;
