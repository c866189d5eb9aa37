//! Decoding a snapshot payload into a profile: every count bounded before
//! it is allocated for, every id checked against its table, and tables
//! checked for duplicates, so that a hostile file gives an error, never a
//! panic or an allocation out of proportion to its size.

use super::error::SnapshotError;
use super::format::*;
use crate::read::verify::{MAX_MISMATCHES, Mismatch};
use crate::sampler::profile::{
    Entry, Frame, Grouping, Interner, MAX_BUDGET, MIN_BUDGET, Module, Profile, SampleState, Stats,
    Weights,
};

/// A checked payload being read.
pub(super) struct Reader<'a> {
    pub(super) buf: &'a [u8],
    pub(super) pos: usize,
}

impl<'a> Reader<'a> {
    pub(super) fn new(buf: &'a [u8]) -> Self {
        Reader { buf, pos: 0 }
    }

    pub(super) fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    pub(super) fn take(&mut self, what: &'static str, n: u64) -> Result<&'a [u8], SnapshotError> {
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

    pub(super) fn varint(&mut self, what: &'static str) -> Result<u64, SnapshotError> {
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

    pub(super) fn u32(&mut self, what: &'static str) -> Result<u32, SnapshotError> {
        let v = self.varint(what)?;
        u32::try_from(v).map_err(|_| SnapshotError::InvalidValue { what, value: v })
    }

    pub(super) fn bool(&mut self, what: &'static str) -> Result<bool, SnapshotError> {
        match self.varint(what)? {
            0 => Ok(false),
            1 => Ok(true),
            value => Err(SnapshotError::InvalidValue { what, value }),
        }
    }

    /// A count of items of size `min` at least, checked against the bytes
    /// left, so that it can size an allocation.
    pub(super) fn count(
        &mut self,
        what: &'static str,
        min: MinSize,
    ) -> Result<usize, SnapshotError> {
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
    pub(super) fn id(&mut self, what: &'static str, len: usize) -> Result<u32, SnapshotError> {
        let index = self.varint(what)?;
        if index >= len as u64 {
            return Err(SnapshotError::IndexOutOfRange { what, index, len });
        }
        // Tables hold at most `MAX_ITEMS` items, so the id fits.
        Ok(index as u32)
    }

    pub(super) fn bytes(&mut self, what: &'static str) -> Result<&'a [u8], SnapshotError> {
        let n = self.varint(what)?;
        self.take(what, n)
    }

    pub(super) fn str(&mut self, what: &'static str) -> Result<&'a str, SnapshotError> {
        std::str::from_utf8(self.bytes(what)?).map_err(|_| SnapshotError::InvalidUtf8 { what })
    }
}

/// Decodes a payload whose header and checksum were checked.
pub(super) fn decode_payload(minor: u16, payload: &[u8]) -> Result<Profile, SnapshotError> {
    let mut r = Reader::new(payload);
    let core_len = r.varint("core_len")?;
    let core = r.take("core", core_len)?;
    let mut c = Reader::new(core);
    let mut profile = decode_core(&mut c)?;
    if c.remaining() != 0 {
        return Err(SnapshotError::LengthMismatch {
            what: "core",
            declared: core_len,
            actual: c.pos as u64,
        });
    }
    decode_extensions(minor, &mut r, &mut profile)?;
    Ok(profile)
}

/// Checks the framing of the extension records, reads those this version
/// defines into `profile` (minor 1: [`decode_tokio_ids`]) and skips the
/// others.
pub(super) fn decode_extensions(
    minor: u16,
    r: &mut Reader<'_>,
    profile: &mut Profile,
) -> Result<(), SnapshotError> {
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
        let body = r.bytes("extension body")?;
        if record == 1 {
            let mut b = Reader::new(body);
            decode_tokio_ids(&mut b, &mut profile.entries)?;
            if b.remaining() != 0 {
                return Err(SnapshotError::LengthMismatch {
                    what: "tokio ids",
                    declared: body.len() as u64,
                    actual: b.pos as u64,
                });
            }
        }
    }
    Ok(())
}

/// The record of minor 1: the tokio ids of entries, as
/// `list(entry: id(entries), tokio_id: varint)`, at least one, entries
/// strictly increasing, tokio ids at least 1.
pub(super) fn decode_tokio_ids(
    r: &mut Reader<'_>,
    entries: &mut [Entry],
) -> Result<(), SnapshotError> {
    let n = r.count("tokio ids", TOKIO_IDS)?;
    if n == 0 || n > entries.len() {
        return Err(SnapshotError::InvalidValue {
            what: "tokio ids count",
            value: n as u64,
        });
    }
    let mut next = 0;
    for _ in 0..n {
        let entry = r.id("tokio id entry", entries.len())?;
        if entry < next {
            return Err(SnapshotError::InvalidValue {
                what: "tokio id entry",
                value: entry.into(),
            });
        }
        next = entry + 1;
        let tokio_id = r.varint("tokio id")?;
        if tokio_id == 0 {
            return Err(SnapshotError::InvalidValue {
                what: "tokio id",
                value: 0,
            });
        }
        entries[entry as usize].tokio_id = tokio_id;
    }
    Ok(())
}

pub(super) fn decode_core(r: &mut Reader<'_>) -> Result<Profile, SnapshotError> {
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
            tokio_id: 0,
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
pub(super) fn within(
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
pub(super) fn unique<T: Eq + std::hash::Hash + Clone, S: std::hash::BuildHasher + Default>(
    what: &'static str,
    items: Vec<T>,
) -> Result<Interner<T, S>, SnapshotError> {
    Interner::from_items(items).ok_or(SnapshotError::Duplicate { what })
}

pub(super) fn decode_stats(r: &mut Reader<'_>) -> Result<Stats, SnapshotError> {
    let mut values = [0; Stats::FIELDS];
    for (v, (name, _)) in values.iter_mut().zip(Stats::default().fields()) {
        *v = r.varint(name)?;
    }
    Ok(Stats::from_fields(values))
}

/// The mismatches, whose strings count toward `items`.
pub(super) fn decode_mismatches(
    r: &mut Reader<'_>,
    items: &mut u64,
) -> Result<Vec<Mismatch>, SnapshotError> {
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
