//! On-CPU sampling (Linux): per-thread CPU-time timers and their signal
//! handler.

use std::io;

/// The on-CPU timers of one sampler run.
#[derive(Debug)]
pub(crate) struct Session {}

impl Session {
    pub(crate) fn start(_hz: u32) -> io::Result<Session> {
        Err(io::Error::new(io::ErrorKind::Unsupported, "not yet"))
    }

    pub(crate) fn stop(self) {}
}

impl super::wall::Sampling {
    pub(crate) fn drain_on_cpu(&mut self) {}
    pub(crate) fn drain_on_cpu_final(&mut self) {}
}
