//! TTL grooming's decision: which handoff the grooming pass deletes
//! ([`expiry`]: not updated within its project's TTL, by the injected
//! clock's `now`) and the note of its `Groomed` Event
//! ([`Expiry::note`]). The pass that lists, deletes (with uid and
//! resourceVersion preconditions) and records is
//! `handoff_controller::grooming`; the TTL it passes in comes from the
//! project's `BrainstormSchedule` or the controller's default.

use std::time::Duration;

use k8s_openapi::jiff::Timestamp;

use crate::api::Handoff;
use crate::handoff::NOTE_KEY_CHARS;
use crate::handoff::view::updated_at;
use crate::loops::quoted;

/// Whether a handoff last updated at `updated_at` has outlived `ttl` at `now`.
/// Without a TTL or a known update time nothing expires.
fn expired(updated_at: Option<Timestamp>, ttl: Option<Duration>, now: Timestamp) -> bool {
    let (Some(updated_at), Some(ttl)) = (updated_at, ttl) else {
        return false;
    };
    let Ok(age) = Duration::try_from(now.duration_since(updated_at)) else {
        return false;
    };
    age > ttl
}

/// Why a handoff is groomed: its TTL, and when it was last updated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Expiry {
    /// The TTL it outlived.
    pub ttl: Duration,
    /// When it was last updated (the time it shows, [`updated_at`]).
    pub updated: Timestamp,
}

/// Whether the grooming pass deletes `h`, whose project's TTL is `ttl`, at
/// `now`: only when it was not updated within the TTL (without a TTL or a
/// known update time nothing expires) and is not already being deleted.
pub fn expiry(h: &Handoff, ttl: Option<Duration>, now: Timestamp) -> Option<Expiry> {
    if h.metadata.deletion_timestamp.is_some() {
        return None;
    }
    let updated = updated_at(h).map(|t| t.0);
    if !expired(updated, ttl, now) {
        return None;
    }
    Some(Expiry {
        ttl: ttl?,
        updated: updated?,
    })
}

impl Expiry {
    /// The note of the `Groomed` Event about `h`.
    pub fn note(&self, h: &Handoff) -> String {
        format!(
            "Handoff {} of project {} deleted by TTL grooming: not updated since {} (TTL {}s)",
            quoted(&h.spec.handoff_key, NOTE_KEY_CHARS),
            h.spec.project,
            self.updated,
            self.ttl.as_secs()
        )
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    use super::*;
    use crate::api::HandoffSpec;

    fn at(s: i64) -> Timestamp {
        Timestamp::from_second(s).expect("ts")
    }

    #[test]
    fn expiry_by_age() {
        let hour = Duration::from_secs(3600);
        let cases = [
            (
                Some(at(0)),
                Some(hour),
                at(3600),
                false,
                "exactly the TTL old",
            ),
            (
                Some(at(0)),
                Some(hour),
                at(3601),
                true,
                "older than the TTL",
            ),
            (Some(at(0)), None, at(1_000_000), false, "no TTL"),
            (
                None,
                Some(hour),
                at(1_000_000),
                false,
                "unknown update time",
            ),
            (
                Some(at(100)),
                Some(hour),
                at(0),
                false,
                "updated in the future (skew)",
            ),
        ];
        for (updated, ttl, now, expected, why) in cases {
            assert_eq!(expired(updated, ttl, now), expected, "{why}");
        }
    }

    /// Key `k` of project `p`, created at `created` (its update time while
    /// nothing is counted), being deleted when `deleting`.
    fn handoff(created: Option<i64>, deleting: bool) -> Handoff {
        let mut h = Handoff::new("obj", HandoffSpec::new("k", "p", "b"));
        h.metadata.creation_timestamp = created.map(|s| Time(at(s)));
        h.metadata.deletion_timestamp = deleting.then(|| Time(at(0)));
        h
    }

    #[test]
    fn which_handoff_the_pass_deletes() {
        let hour = Duration::from_secs(3600);
        let groomed = Some(Expiry {
            ttl: hour,
            updated: at(0),
        });
        let cases = [
            (handoff(Some(0), false), Some(hour), groomed, "expired"),
            (handoff(Some(0), true), Some(hour), None, "already deleting"),
            (
                handoff(Some(10), false),
                Some(hour),
                None,
                "not yet expired",
            ),
            (handoff(Some(0), false), None, None, "no TTL"),
            (handoff(None, false), Some(hour), None, "no update time"),
        ];
        for (h, ttl, expected, why) in cases {
            assert_eq!(expiry(&h, ttl, at(3601)), expected, "{why}");
        }
    }

    #[test]
    fn the_note_names_the_key_the_project_the_update_and_the_ttl() {
        let expiry = Expiry {
            ttl: Duration::from_secs(3600),
            updated: at(0),
        };
        assert_eq!(
            expiry.note(&handoff(Some(0), false)),
            "Handoff \"k\" of project p deleted by TTL grooming: not updated since 1970-01-01T00:00:00Z (TTL 3600s)"
        );
    }
}
