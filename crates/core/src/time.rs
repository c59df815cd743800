//! Time, a leaf module: the clock the loops read and the one duration
//! grammar every flag and field uses (`--default-handoff-ttl`,
//! `BrainstormSchedule.spec.handoffTTL`, `transcript sweep --older-than`, …).
//!
//! The loops never call `Timestamp::now()` themselves: they take a
//! [`Clock`], so tests move time with a [`ManualClock`] instead of sleeping.

use std::sync::Mutex;
use std::time::Duration;

use jiff::Timestamp;

/// The time source of the loops: `updatedAt` stamps, TTL expiry, cron
/// ticks, Event times.
pub trait Clock: Send + Sync {
    /// Now.
    fn now(&self) -> Timestamp;
}

/// The system's wall clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Timestamp {
        Timestamp::now()
    }
}

/// A clock that only moves when told to (tests).
#[derive(Debug)]
pub struct ManualClock(Mutex<Timestamp>);

impl ManualClock {
    /// A clock standing at `at`.
    pub fn new(at: Timestamp) -> Self {
        Self(Mutex::new(at))
    }

    /// Moves the clock to `at`.
    pub fn set(&self, at: Timestamp) {
        if let Ok(mut now) = self.0.lock() {
            *now = at;
        }
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Timestamp {
        self.0
            .lock()
            .map(|t| *t)
            .unwrap_or_else(|_| Timestamp::now())
    }
}

/// Parses a duration: one or more `<number><unit>` parts with the units
/// `ms`, `s`, `m`, `h` and `d`, such as `72h`, `90m`, `1h30m`, `15s`,
/// `500ms` or `7d`. Surrounding whitespace is ignored.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let invalid = || {
        format!(
            "invalid duration {text:?}: expected a number and a unit (ms, s, m, h, d), e.g. 30m, 24h, 7d or 1h30m"
        )
    };
    let mut rest = text.trim();
    if rest.is_empty() {
        return Err(invalid());
    }
    let mut total = Duration::ZERO;
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !c.is_ascii_digit())
            .ok_or_else(invalid)?;
        if digits == 0 {
            return Err(invalid());
        }
        let value: u32 = rest[..digits].parse().map_err(|_| invalid())?;
        rest = &rest[digits..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit())
            .unwrap_or(rest.len());
        let unit = match &rest[..unit_len] {
            "ms" => Duration::from_millis(1),
            "s" => Duration::from_secs(1),
            "m" => Duration::from_secs(60),
            "h" => Duration::from_secs(3600),
            "d" => Duration::from_secs(86_400),
            _ => return Err(invalid()),
        };
        total = unit
            .checked_mul(value)
            .and_then(|part| total.checked_add(part))
            .ok_or_else(invalid)?;
        rest = &rest[unit_len..];
    }
    Ok(total)
}

/// A [`parse_duration`] longer than zero: what a timeout or an interval
/// flag takes (zero would fail every call, or spin).
pub fn positive_duration(text: &str) -> Result<Duration, String> {
    match parse_duration(text)? {
        Duration::ZERO => Err(format!("{text:?}: must be longer than zero")),
        d => Ok(d),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        let cases = [
            ("72h", Some(72 * 3600)),
            ("90m", Some(5400)),
            ("1h30m", Some(5400)),
            ("15s", Some(15)),
            ("90s", Some(90)),
            ("2d", Some(172_800)),
            (" 7d ", Some(604_800)),
            ("0s", Some(0)),
            ("0h", Some(0)),
        ];
        for (text, secs) in cases {
            assert_eq!(
                parse_duration(text).ok().map(|d| d.as_secs()),
                secs,
                "{text}"
            );
        }
        assert_eq!(
            parse_duration("500ms").expect("ms"),
            Duration::from_millis(500)
        );
    }

    #[test]
    fn positive_durations_refuse_zero_and_what_does_not_parse() {
        // (text, the duration, or a part of the refusal)
        let cases: [(&str, Result<Duration, &str>); 5] = [
            ("10s", Ok(Duration::from_secs(10))),
            ("1ms", Ok(Duration::from_millis(1))),
            ("0s", Err("\"0s\": must be longer than zero")),
            ("0m0s", Err("must be longer than zero")),
            ("soon", Err("invalid duration")),
        ];
        for (text, want) in cases {
            match (positive_duration(text), want) {
                (Ok(got), Ok(want)) => assert_eq!(got, want, "{text}"),
                (Err(err), Err(part)) => assert!(err.contains(part), "{text}: {err}"),
                (got, want) => panic!("{text}: {got:?}, wanted {want:?}"),
            }
        }
    }

    #[test]
    fn bad_durations_say_what_is_expected() {
        let bad = [
            "",
            "h",
            "12",
            "3 hours",
            "1y",
            "-1h",
            "1h-",
            "1.5h",
            "24H",
            "soon",
            "99999999999999999999d",
        ];
        for text in bad {
            let err = parse_duration(text).expect_err(text);
            assert!(err.contains("invalid duration"), "{err}");
            assert!(err.contains("30m, 24h, 7d"), "{err}");
            assert!(err.contains(&format!("{text:?}")), "{err}");
        }
    }

    #[test]
    fn the_manual_clock_moves_only_when_set() {
        let t = Timestamp::from_second(1_000).expect("ts");
        let clock = ManualClock::new(t);
        assert_eq!(clock.now(), t);
        let later = Timestamp::from_second(2_000).expect("ts");
        clock.set(later);
        assert_eq!(clock.now(), later);
    }
}
