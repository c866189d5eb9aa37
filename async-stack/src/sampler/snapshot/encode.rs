//! Encoding a profile into a snapshot payload: varints, strings and the
//! tables in the order the format's docs give.

use crate::read::verify::Mismatch;
use crate::sampler::profile::{Frame, Grouping, Profile, SampleState, Stats};

/// A payload being written.
#[derive(Debug, Default)]
pub(super) struct Writer(pub(super) Vec<u8>);

impl Writer {
    pub(super) fn varint(&mut self, mut v: u64) {
        while v >= 0x80 {
            self.0.push(v as u8 | 0x80);
            v >>= 7;
        }
        self.0.push(v as u8);
    }

    pub(super) fn bytes(&mut self, b: &[u8]) {
        self.varint(b.len() as u64);
        self.0.extend_from_slice(b);
    }
}

pub(super) fn encode_core(p: &Profile, w: &mut Writer) {
    encode_meta(p, w);
    encode_stats(&p.stats, w);
    encode_tables(p, w);
    encode_mismatches(&p.mismatches, w);
}

pub(super) fn encode_meta(p: &Profile, w: &mut Writer) {
    w.varint(p.frequency_hz.into());
    w.varint(match p.grouping {
        Grouping::TaskName => 0,
        Grouping::SpawnSite => 1,
    });
    w.varint(p.duration_ns);
    w.varint(p.start_unix_ns);
    w.varint(p.budget as u64);
}

pub(super) fn encode_stats(s: &Stats, w: &mut Writer) {
    // Every counter, in `Stats::fields` order: a new counter changes the
    // format, and needs an extension record and a minor version.
    for (_, v) in s.fields() {
        w.varint(v);
    }
}

/// Strings, modules, frames, stacks and entries.
pub(super) fn encode_tables(p: &Profile, w: &mut Writer) {
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

/// The extension records of `p`, after its core, and the minor version
/// that defines the last of them (`0`: none). Minor 1: the tokio ids of
/// the entries that have one, if any.
pub(super) fn encode_extensions(p: &Profile, w: &mut Writer) -> u16 {
    let filed = p.entries.iter().filter(|e| e.tokio_id != 0).count();
    if filed == 0 {
        return 0;
    }
    let mut body = Writer::default();
    body.varint(filed as u64);
    for (i, e) in p.entries.iter().enumerate() {
        if e.tokio_id != 0 {
            body.varint(i as u64);
            body.varint(e.tokio_id);
        }
    }
    w.varint(1);
    w.bytes(&body.0);
    1
}

pub(super) fn encode_mismatches(mismatches: &[Mismatch], w: &mut Writer) {
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
