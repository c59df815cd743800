//! When a schedule's cycle is due: pure functions of the cron expression,
//! the time zone, the last tick acted on, and a clock reading.
//!
//! Semantics (close to CronJob with `concurrencyPolicy: Forbid`):
//! - only the *latest* tick since the last one acted on counts, so ticks
//!   missed while the controller was down are never replayed in a burst;
//! - a tick older than `startingDeadlineSeconds` is missed, not run;
//! - a tick that arrives while a cycle runs is skipped (and recorded once);
//! - `suspend` starts nothing and consumes nothing.
//!
//! Ticks are computed in the schedule's IANA time zone (croner, on jiff's
//! bundled tz database): a local time inside a daylight-saving gap runs at
//! the first instant after the gap (as Vixie cron does); in a fold the
//! earlier instant is used.

use std::str::FromStr;

use croner::Cron;
use croner::parser::{CronParser, Seconds, Year};
use jiff::tz::TimeZone;
use jiff::{SignedDuration, Timestamp};

/// A parsed schedule: cron expression and time zone.
#[derive(Debug, Clone)]
pub struct Timing {
    cron: Cron,
    tz: TimeZone,
}

impl Timing {
    /// Parses a 5-field cron expression and an IANA time zone (default UTC).
    /// The error names the field and the problem.
    pub fn parse(schedule: &str, time_zone: Option<&str>) -> Result<Self, String> {
        let fields = schedule.split_whitespace().count();
        if fields != 5 {
            return Err(format!(
                "spec.schedule {schedule:?} has {fields} fields; a 5-field cron expression \
                 (minute hour day-of-month month day-of-week) is expected"
            ));
        }
        let cron = CronParser::builder()
            .seconds(Seconds::Disallowed)
            .year(Year::Disallowed)
            .build()
            .parse(schedule)
            .map_err(|e| {
                format!("spec.schedule {schedule:?} is not a valid cron expression: {e}")
            })?;
        let zone = time_zone.unwrap_or("UTC");
        let tz = TimeZone::get(zone).map_err(|_| {
            format!(
                "spec.timeZone {zone:?} is not a known IANA time zone (e.g. UTC, Europe/Berlin)"
            )
        })?;
        Ok(Self { cron, tz })
    }

    /// The latest tick at or before `now`.
    pub(crate) fn latest_at_or_before(&self, now: Timestamp) -> Option<Timestamp> {
        let zoned = now.to_zoned(self.tz.clone());
        self.cron
            .find_previous_occurrence(&zoned, true)
            .ok()
            .map(|z| z.timestamp())
    }

    /// The first tick after `now`.
    pub fn next_after(&self, now: Timestamp) -> Option<Timestamp> {
        let zoned = now.to_zoned(self.tz.clone());
        self.cron
            .find_next_occurrence(&zoned, false)
            .ok()
            .map(|z| z.timestamp())
    }
}

impl FromStr for Timing {
    type Err = String;

    fn from_str(schedule: &str) -> Result<Self, Self::Err> {
        Self::parse(schedule, None)
    }
}

/// What to do about the latest tick.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Start a cycle for this tick.
    Start(Timestamp),
    /// The tick came while a cycle runs: skip it.
    SkipBusy(Timestamp),
    /// The tick is older than the starting deadline: miss it.
    Missed(Timestamp),
    /// No tick since the last one acted on (or suspended).
    Nothing,
}

/// The inputs of a decision.
#[derive(Debug, Clone, Copy)]
pub struct Situation {
    /// The last tick acted on, else the schedule's creation time.
    pub since: Timestamp,
    /// The clock reading.
    pub now: Timestamp,
    /// `startingDeadlineSeconds`.
    pub deadline: SignedDuration,
    /// A cycle is running.
    pub busy: bool,
    /// `spec.suspend`.
    pub suspended: bool,
}

/// Decides about the latest tick in `(since, now]`.
pub fn decide(timing: &Timing, s: Situation) -> Decision {
    if s.suspended {
        return Decision::Nothing;
    }
    match timing.latest_at_or_before(s.now) {
        Some(tick) if tick > s.since => {
            if s.now.duration_since(tick) > s.deadline {
                Decision::Missed(tick)
            } else if s.busy {
                Decision::SkipBusy(tick)
            } else {
                Decision::Start(tick)
            }
        }
        _ => Decision::Nothing,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ts(s: &str) -> Timestamp {
        s.parse().expect("timestamp")
    }

    fn situation(since: &str, now: &str) -> Situation {
        Situation {
            since: ts(since),
            now: ts(now),
            deadline: SignedDuration::from_secs(300),
            busy: false,
            suspended: false,
        }
    }

    #[test]
    fn parse_errors_name_the_field() {
        let cases = [
            ("* * * *", None, "spec.schedule", "4 fields"),
            ("* * * * * *", None, "spec.schedule", "6 fields"),
            ("61 * * * *", None, "spec.schedule", "not a valid cron"),
            ("0 6 * * *", Some("Mars/Olympus"), "spec.timeZone", "IANA"),
        ];
        for (schedule, tz, field, words) in cases {
            let err = Timing::parse(schedule, tz).expect_err(schedule);
            assert!(err.contains(field) && err.contains(words), "{err}");
        }
        assert!(Timing::parse("0 6 * * 1-5", Some("Europe/Berlin")).is_ok());
    }

    #[test]
    fn the_decision_table() {
        let hourly: Timing = "0 * * * *".parse().expect("cron");
        let cases = [
            // a tick 2 minutes ago, none acted on since → start it
            (
                situation("2026-01-01T09:30:00Z", "2026-01-01T10:02:00Z"),
                Decision::Start(ts("2026-01-01T10:00:00Z")),
            ),
            // that tick already acted on → nothing
            (
                situation("2026-01-01T10:00:00Z", "2026-01-01T10:02:00Z"),
                Decision::Nothing,
            ),
            // exactly at the tick
            (
                situation("2026-01-01T09:30:00Z", "2026-01-01T10:00:00Z"),
                Decision::Start(ts("2026-01-01T10:00:00Z")),
            ),
            // 20 minutes late, deadline 5 → missed
            (
                situation("2026-01-01T09:30:00Z", "2026-01-01T10:20:00Z"),
                Decision::Missed(ts("2026-01-01T10:00:00Z")),
            ),
            // down for 5 hours: only the latest tick counts, no burst
            (
                situation("2026-01-01T05:00:00Z", "2026-01-01T10:01:00Z"),
                Decision::Start(ts("2026-01-01T10:00:00Z")),
            ),
            (
                Situation {
                    busy: true,
                    ..situation("2026-01-01T09:30:00Z", "2026-01-01T10:02:00Z")
                },
                Decision::SkipBusy(ts("2026-01-01T10:00:00Z")),
            ),
            (
                Situation {
                    suspended: true,
                    ..situation("2026-01-01T09:30:00Z", "2026-01-01T10:02:00Z")
                },
                Decision::Nothing,
            ),
        ];
        for (s, expected) in cases {
            assert_eq!(decide(&hourly, s), expected, "{s:?}");
        }
    }

    #[test]
    fn ticks_follow_the_time_zone() {
        let berlin = Timing::parse("0 6 * * *", Some("Europe/Berlin")).expect("timing");
        // 06:00 in Berlin is 05:00 UTC in winter, 04:00 UTC in summer.
        assert_eq!(
            berlin.next_after(ts("2026-01-10T00:00:00Z")),
            Some(ts("2026-01-10T05:00:00Z"))
        );
        assert_eq!(
            berlin.next_after(ts("2026-07-10T00:00:00Z")),
            Some(ts("2026-07-10T04:00:00Z"))
        );
        let utc: Timing = "*/15 * * * *".parse().expect("cron");
        assert_eq!(
            utc.next_after(ts("2026-01-01T10:00:00Z")),
            Some(ts("2026-01-01T10:15:00Z"))
        );
        assert_eq!(
            utc.latest_at_or_before(ts("2026-01-01T10:14:59Z")),
            Some(ts("2026-01-01T10:00:00Z"))
        );
    }

    #[test]
    fn a_local_time_in_the_spring_gap_runs_right_after_it() {
        // 2026-03-29 02:30 does not exist in Berlin (clocks jump 02:00 → 03:00).
        let gap = Timing::parse("30 2 * * *", Some("Europe/Berlin")).expect("timing");
        let next = gap.next_after(ts("2026-03-28T12:00:00Z")).expect("next");
        assert_eq!(
            next,
            ts("2026-03-29T01:00:00Z"),
            "03:00 local, the first instant after the gap"
        );
        let day_after = gap.next_after(next).expect("next");
        assert_eq!(
            day_after,
            ts("2026-03-30T00:30:00Z"),
            "then 02:30 local (summer time) again"
        );
    }
}
