//! Leader election's pure part: the lease settings and their order
//! ([`LeaseConfig`]) and what a candidate does with the lease it read
//! ([`decide`]). The elector that reads and writes the Lease is
//! `handoff_controller::leader`; the decision compares only durations on
//! the candidate's own monotonic clock, never another replica's
//! timestamps (see there for why).

use std::time::Duration;

/// Where the lease is and how it is held.
#[derive(Debug, Clone)]
pub struct LeaseConfig {
    /// Lease name.
    pub name: String,
    /// Lease namespace.
    pub namespace: String,
    /// This replica's identity (pod name or hostname).
    pub identity: String,
    /// How long a lease stays valid without renewal.
    pub lease_duration: Duration,
    /// How long the holder keeps leading without a successful renewal.
    pub renew_deadline: Duration,
    /// Pause between attempts to acquire or renew.
    pub retry_period: Duration,
}

impl LeaseConfig {
    /// Checks that `retry_period < renew_deadline < lease_duration`, the
    /// order that keeps two leaders from overlapping; the error names the
    /// rule broken first.
    pub fn validate(&self) -> Result<(), String> {
        if self.lease_duration.as_secs() < 1 {
            return Err("--lease-duration must be at least 1s".into());
        }
        let order = format!(
            "retry period ({:?}) < renew deadline ({:?}) < lease duration ({:?})",
            self.retry_period, self.renew_deadline, self.lease_duration
        );
        if self.renew_deadline >= self.lease_duration {
            return Err(format!(
                "lease timings must satisfy {order}: the renew deadline is not below the lease duration"
            ));
        }
        if self.retry_period >= self.renew_deadline {
            return Err(format!(
                "lease timings must satisfy {order}: the retry period is not below the renew deadline"
            ));
        }
        Ok(())
    }
}

/// What a candidate does with the lease it read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// We hold it: write a new renewTime.
    Renew,
    /// Free or expired: take it.
    Take,
    /// Someone else holds a live lease.
    Wait,
}

/// Pure decision: `holder` of the lease read, and how long (on our own
/// monotonic clock) its record has been unchanged.
pub fn decide(
    holder: Option<&str>,
    me: &str,
    unchanged_for: Duration,
    lease_duration: Duration,
) -> Decision {
    match holder.filter(|h| !h.is_empty()) {
        Some(h) if h == me => Decision::Renew,
        None => Decision::Take,
        Some(_) if unchanged_for >= lease_duration => Decision::Take,
        Some(_) => Decision::Wait,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decisions() {
        let d = Duration::from_secs(15);
        let s = Duration::from_secs;
        let cases = [
            (None, s(0), Decision::Take, "no holder"),
            (Some(""), s(0), Decision::Take, "released"),
            (Some("me"), s(100), Decision::Renew, "ours, even if old"),
            (Some("other"), s(0), Decision::Wait, "just observed"),
            (Some("other"), s(14), Decision::Wait, "not yet expired"),
            (
                Some("other"),
                s(15),
                Decision::Take,
                "unchanged for a lease duration",
            ),
        ];
        for (holder, unchanged, expected, why) in cases {
            assert_eq!(decide(holder, "me", unchanged, d), expected, "{why}");
        }
    }

    #[test]
    fn timings_are_ordered() {
        let config = |lease, renew, retry| LeaseConfig {
            name: "l".into(),
            namespace: "n".into(),
            identity: "i".into(),
            lease_duration: Duration::from_secs(lease),
            renew_deadline: Duration::from_secs(renew),
            retry_period: Duration::from_secs(retry),
        };
        const RENEW: &str = "the renew deadline is not below the lease duration";
        const RETRY: &str = "the retry period is not below the renew deadline";
        // (lease, renew, retry) in seconds, and the rule it breaks (none: valid).
        let cases = [
            ((15, 10, 2), None),
            ((15, 15, 2), Some(RENEW)),
            ((15, 20, 2), Some(RENEW)),
            ((15, 10, 10), Some(RETRY)),
            ((15, 16, 20), Some(RENEW)),
        ];
        for ((lease, renew, retry), broken) in cases {
            let want = broken.map_or(Ok(()), |rule| {
                Err(format!(
                    "lease timings must satisfy retry period ({retry}s) < renew deadline ({renew}s) < lease duration ({lease}s): {rule}"
                ))
            });
            assert_eq!(
                config(lease, renew, retry).validate(),
                want,
                "{lease} {renew} {retry}"
            );
        }
        assert_eq!(
            config(0, 0, 0).validate(),
            Err("--lease-duration must be at least 1s".into())
        );
    }
}
