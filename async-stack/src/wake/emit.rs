//! The **workload** that reproduces a [`Reduction`]'s groups: rates, busy
//! and idle times per member, in the format of [`crate::wake::workload`],
//! with names made fit for the file.

use std::time::Duration;

use super::reduce::Reduction;

impl Reduction {
    /// The workload that reproduces these groups (see [`crate::wake::workload`]
    /// for the format and what a replay does), to run for `duration` by
    /// default.
    ///
    /// Per group, in whole microseconds:
    ///
    /// - `fan_out`: the consumers' instances (each cycle wakes each once);
    ///   **cycles**: the producer's wakes of its consumers over `fan_out`;
    /// - the producer's `busy_us_per_cycle`: its busy time over the cycles;
    ///   `waits_for_replies` as [`Group::waits_for_replies`](super::reduce::Group::waits_for_replies);
    ///   `sleep_us_per_cycle`: if anything outside the group wakes the
    ///   producer (a timer), its idle time per cycle less the longest
    ///   consumer's busy time per wake when it waits for replies; else 0
    ///   (the replies pace it; a producer that neither waits nor sleeps
    ///   gets 1 µs, which replays as tokio's shortest sleep);
    /// - each consumer's `busy_us_per_wake`: busy time over wakes.
    ///
    /// Each independent member that was woken becomes an independent entry
    /// (`busy_us_per_wake`: busy over wakes; `period_us`: idle over wakes,
    /// at least [`crate::wake::workload::Workload::MIN_PERIOD_US`]); members never
    /// woken are left out, as nothing paces them.
    ///
    /// Names are the labels, cut to the format's limit and made unique
    /// (a repeated one gets ` #2`, ` #3`, ...); counts and times are clamped
    /// into the format's bounds. The result is validated: a reduction with
    /// nothing to replay is an error.
    pub fn workload(
        &self,
        duration: Duration,
    ) -> Result<crate::wake::workload::Workload, crate::wake::workload::WorkloadError> {
        use crate::wake::workload::{Consumer, Group as WGroup, Independent, Producer, Workload};
        let us = |d: Duration| {
            u64::try_from(d.as_micros())
                .unwrap_or(u64::MAX)
                .min(Workload::MAX_TIME_US)
        };
        let instances = |n: u64| n.clamp(1, u64::from(Workload::MAX_INSTANCES)) as u32;
        let mut names = Names::default();
        let mut groups = Vec::new();
        for (i, g) in self.groups.iter().enumerate() {
            let fan_out: u64 = g
                .consumers
                .iter()
                .map(|c| c.instances)
                .fold(0u64, |a, b| a.saturating_add(b))
                .max(1);
            let cycles = (g.producer_wakes / fan_out).max(1);
            let p = &g.producer;
            let outside = p.wakes.saturating_sub(p.wakes_from_group);
            let reply_wait = if g.waits_for_replies {
                g.consumers
                    .iter()
                    .map(|c| c.busy_per_wake())
                    .max()
                    .unwrap_or_default()
            } else {
                Duration::ZERO
            };
            let mut sleep = if outside > 0 {
                us(Duration::from_nanos(p.idle_ns / cycles).saturating_sub(reply_wait))
            } else {
                0
            };
            if sleep == 0 && !g.waits_for_replies {
                sleep = 1;
            }
            groups.push(WGroup {
                name: names.unique(&format!("group {}: {}", i + 1, p.label)),
                producer: Producer {
                    name: names.unique(&p.label),
                    busy_us_per_cycle: us(Duration::from_nanos(p.busy_ns / cycles)),
                    sleep_us_per_cycle: sleep,
                    fan_out: fan_out.min(u64::from(Workload::MAX_FAN_OUT)) as u32,
                    waits_for_replies: g.waits_for_replies,
                },
                consumers: g
                    .consumers
                    .iter()
                    .map(|c| Consumer {
                        name: names.unique(&c.label),
                        instances: instances(c.instances),
                        busy_us_per_wake: us(c.busy_per_wake()),
                    })
                    .collect(),
            });
        }
        let independent = self
            .independent
            .iter()
            .filter(|m| m.wakes > 0)
            .map(|m| Independent {
                name: names.unique(&m.label),
                instances: instances(m.instances),
                busy_us_per_wake: us(m.busy_per_wake()),
                period_us: us(m.idle_per_wake()).max(Workload::MIN_PERIOD_US),
            })
            .collect();
        let workload = Workload {
            version: Workload::VERSION,
            duration_ms: u64::try_from(duration.as_millis())
                .unwrap_or(u64::MAX)
                .clamp(1, Workload::MAX_DURATION_MS),
            groups,
            independent,
        };
        workload.validate()?;
        Ok(workload)
    }
}

/// Names made fit for a workload file: short enough, no control
/// characters, unique.
#[derive(Default)]
struct Names {
    taken: std::collections::BTreeSet<String>,
}

impl Names {
    fn unique(&mut self, label: &str) -> String {
        let clean: String = label
            .chars()
            .map(|c| if c.is_control() { ' ' } else { c })
            .collect();
        let clean = if clean.trim().is_empty() {
            "task".to_owned()
        } else {
            clean
        };
        for n in 1u32.. {
            let suffix = if n == 1 {
                String::new()
            } else {
                format!(" #{n}")
            };
            let mut name = clean.clone();
            let limit = crate::wake::workload::Workload::MAX_NAME_BYTES - suffix.len();
            if name.len() > limit {
                let mut cut = limit;
                while !name.is_char_boundary(cut) {
                    cut -= 1;
                }
                name.truncate(cut);
            }
            name.push_str(&suffix);
            if self.taken.insert(name.clone()) {
                return name;
            }
        }
        unreachable!("some suffix is free")
    }
}

#[cfg(test)]
mod tests {
    use super::Names;
    use crate::wake::workload::Workload;

    #[test]
    fn names_are_cut_cleaned_and_made_unique() {
        let mut n = Names::default();
        assert_eq!(n.unique("a"), "a");
        assert_eq!(n.unique("a"), "a #2");
        assert_eq!(n.unique("a\nb"), "a b");
        assert_eq!(n.unique(" "), "task");
        let long = "é".repeat(100);
        let cut = n.unique(&long);
        assert!(cut.len() <= Workload::MAX_NAME_BYTES && cut.chars().all(|c| c == 'é'));
        let again = n.unique(&long);
        assert!(again.ends_with(" #2") && again.len() <= Workload::MAX_NAME_BYTES);
    }
}
