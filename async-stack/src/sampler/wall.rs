//! The wall-clock sampler thread.

use std::io;
use std::time::Duration;

use super::{Profile, SamplerBuilder, Stats};

#[derive(Debug)]
pub(crate) struct Running {
    pub(crate) interval: Duration,
    profile: Profile,
}

pub(crate) fn start(b: SamplerBuilder) -> io::Result<Running> {
    Ok(Running {
        interval: Duration::from_secs(1) / b.frequency_hz,
        profile: b.resume.unwrap_or_else(|| Profile::new(b.budget)),
    })
}

impl Running {
    pub(crate) fn stats(&self) -> Stats {
        self.profile.stats
    }

    pub(crate) fn stop(self) -> Profile {
        self.profile
    }
}
