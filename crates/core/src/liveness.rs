//! Liveness from progress, a leaf module: each loop of the controller
//! records when it takes up work and when that work is done, and
//! [`health`] decides from that record alone whether a loop is wedged.
//!
//! - **Pending work**: an object (or a periodic pass) whose reconcile was
//!   started and has not yet finished well. It stays pending across
//!   retries: a reconcile that fails and is retried is *not* progress.
//! - **Progress**: a pending object finished well (successfully, or with
//!   an error about the object itself, which no retry or restart fixes),
//!   or went away; a loop with no pending work is making progress by
//!   definition (an idle loop is healthy forever).
//! - **Wedged**: a loop with pending work that made no progress for longer
//!   than its allowance (`--wedged-after`, plus the period of a periodic
//!   loop, which retries a failed pass only a period later), or one of
//!   whose reconciles has been running longer than `--wedged-after`
//!   (a call that hangs).
//!
//! The controller answers `/healthz` from [`Liveness::check`] and exports
//! [`LoopStatus`] as gauges; see docs/operate.md.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The default of `--wedged-after`.
pub const DEFAULT_WEDGED_AFTER: Duration = Duration::from_secs(300);

/// What one loop looks like at one instant (the input of [`health`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoopStatus {
    /// The loop's name (`handoff`, `resync`, …).
    pub name: &'static str,
    /// How long pending work may go without progress.
    pub allowance: Duration,
    /// How long one reconcile may run.
    pub max_running: Duration,
    /// When the loop last made progress.
    pub last_progress: Instant,
    /// Since when the oldest pending work is pending (`None`: no pending work).
    pub oldest_pending: Option<Instant>,
    /// Since when the oldest reconcile still running runs.
    pub oldest_running: Option<Instant>,
    /// How many objects (or passes) have pending work.
    pub pending: usize,
}

impl LoopStatus {
    /// How long pending work has waited for progress (zero without pending
    /// work): the time since the last progress, or since the oldest work
    /// became pending when that is later (the loop was idle until then).
    pub fn stalled(&self, now: Instant) -> Duration {
        match self.oldest_pending {
            None => Duration::ZERO,
            Some(pending) => now.saturating_duration_since(pending.max(self.last_progress)),
        }
    }
}

/// Why a loop is wedged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stall {
    /// Pending work, no progress.
    NoProgress,
    /// One reconcile has been running that long.
    Running,
}

/// The verdict of [`health`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Health {
    /// Every loop made progress within its allowance.
    Healthy,
    /// This loop did not (the one stalled longest, when several did).
    Wedged {
        /// The loop.
        name: &'static str,
        /// For how long.
        since: Duration,
        /// No progress, or one reconcile running too long.
        stall: Stall,
        /// The allowance it exceeded.
        limit: Duration,
    },
}

impl Health {
    /// The one-line answer of `/healthz`.
    pub fn reason(&self) -> String {
        match self {
            Self::Healthy => "ok".into(),
            Self::Wedged {
                name,
                since,
                stall: Stall::NoProgress,
                limit,
            } => format!(
                "wedged: loop {name} has pending work and made no progress for {}s (limit {}s)",
                since.as_secs(),
                limit.as_secs()
            ),
            Self::Wedged {
                name,
                since,
                stall: Stall::Running,
                limit,
            } => format!(
                "wedged: loop {name} has a reconcile running for {}s (limit {}s)",
                since.as_secs(),
                limit.as_secs()
            ),
        }
    }
}

/// Whether every loop made progress in time at `now` (see the module docs).
pub fn health(now: Instant, loops: &[LoopStatus]) -> Health {
    let mut worst = Health::Healthy;
    let mut worst_since = Duration::ZERO;
    for status in loops {
        let running = status
            .oldest_running
            .map_or(Duration::ZERO, |t| now.saturating_duration_since(t));
        let stalled = status.stalled(now);
        let candidates = [
            (running, status.max_running, Stall::Running),
            (stalled, status.allowance, Stall::NoProgress),
        ];
        for (since, limit, stall) in candidates {
            if since > limit && since > worst_since {
                worst_since = since;
                worst = Health::Wedged {
                    name: status.name,
                    since,
                    stall,
                    limit,
                };
            }
        }
    }
    worst
}

#[derive(Debug)]
struct State {
    pending: HashMap<String, Instant>,
    running: HashMap<String, Instant>,
    last_progress: Instant,
}

/// The key of a periodic loop's pass in its [`LoopProgress`] (grooming,
/// the mirror's resync): a failed pass stays pending until one succeeds.
pub const PASS: &str = "pass";

/// The progress record of one loop. Every loop's reconcile goes through
/// [`LoopProgress::start`]; a dropped [`Attempt`] (a reconcile abandoned
/// when leadership ends) stops counting as running.
#[derive(Debug)]
pub struct LoopProgress {
    name: &'static str,
    period: Duration,
    state: Mutex<State>,
}

impl LoopProgress {
    /// An event-driven loop (`period` zero) or a periodic one.
    pub fn new(name: &'static str, period: Duration) -> Arc<Self> {
        Arc::new(Self {
            name,
            period,
            state: Mutex::new(State {
                pending: HashMap::new(),
                running: HashMap::new(),
                last_progress: Instant::now(),
            }),
        })
    }

    /// A reconcile of `key` starts: it is pending (if it was not already)
    /// and running until the attempt ends.
    pub fn start(&self, key: String) -> Attempt<'_> {
        let now = Instant::now();
        if let Ok(mut state) = self.state.lock() {
            state.pending.entry(key.clone()).or_insert(now);
            state.running.insert(key.clone(), now);
        }
        Attempt {
            progress: self,
            key,
            ended: false,
        }
    }

    /// `key` has no work left (it went away): progress.
    pub fn forget(&self, key: &str) {
        if let Ok(mut state) = self.state.lock() {
            if state.pending.remove(key).is_some() {
                state.last_progress = Instant::now();
            }
            state.running.remove(key);
        }
    }

    /// Nothing is pending any more: the loop stopped (leadership ended) or
    /// starts afresh.
    pub fn reset(&self) {
        if let Ok(mut state) = self.state.lock() {
            state.pending.clear();
            state.running.clear();
            state.last_progress = Instant::now();
        }
    }

    /// The loop now, with `wedged_after` as its limits.
    pub fn status(&self, wedged_after: Duration) -> LoopStatus {
        let (last_progress, oldest_pending, oldest_running, pending) = match self.state.lock() {
            Ok(state) => (
                state.last_progress,
                state.pending.values().min().copied(),
                state.running.values().min().copied(),
                state.pending.len(),
            ),
            Err(_) => (Instant::now(), None, None, 0),
        };
        LoopStatus {
            name: self.name,
            allowance: wedged_after.saturating_add(self.period),
            max_running: wedged_after,
            last_progress,
            oldest_pending,
            oldest_running,
            pending,
        }
    }

    fn end(&self, key: &str, progressed: bool) {
        if let Ok(mut state) = self.state.lock() {
            state.running.remove(key);
            if progressed {
                state.pending.remove(key);
                state.last_progress = Instant::now();
            }
        }
    }
}

/// One reconcile of one key (see [`LoopProgress::start`]).
#[derive(Debug)]
pub struct Attempt<'a> {
    progress: &'a LoopProgress,
    key: String,
    ended: bool,
}

impl Attempt<'_> {
    /// The reconcile finished: `progressed` when its work is done (success,
    /// or an error no retry fixes); otherwise the work stays pending.
    pub fn end(mut self, progressed: bool) {
        self.ended = true;
        self.progress.end(&self.key, progressed);
    }
}

impl Drop for Attempt<'_> {
    fn drop(&mut self) {
        if !self.ended {
            self.progress.end(&self.key, false);
        }
    }
}

/// Every loop of a process and the threshold they are judged by.
#[derive(Debug)]
pub struct Liveness {
    wedged_after: Mutex<Duration>,
    loops: Mutex<Vec<Arc<LoopProgress>>>,
}

impl Default for Liveness {
    fn default() -> Self {
        Self {
            wedged_after: Mutex::new(DEFAULT_WEDGED_AFTER),
            loops: Mutex::new(Vec::new()),
        }
    }
}

impl Liveness {
    /// Sets `--wedged-after`.
    pub fn set_wedged_after(&self, after: Duration) {
        if let Ok(mut w) = self.wedged_after.lock() {
            *w = after;
        }
    }

    /// A loop to watch, registered once per name: a second call with the
    /// same name returns the first record.
    pub fn track(&self, name: &'static str, period: Duration) -> Arc<LoopProgress> {
        let Ok(mut loops) = self.loops.lock() else {
            return LoopProgress::new(name, period);
        };
        if let Some(existing) = loops.iter().find(|l| l.name == name) {
            return existing.clone();
        }
        let progress = LoopProgress::new(name, period);
        loops.push(progress.clone());
        progress
    }

    /// Nothing is pending in any loop: leadership starts or ends.
    pub fn reset(&self) {
        if let Ok(loops) = self.loops.lock() {
            for progress in loops.iter() {
                progress.reset();
            }
        }
    }

    /// Every loop now.
    pub fn statuses(&self) -> Vec<LoopStatus> {
        let after = self
            .wedged_after
            .lock()
            .map_or(DEFAULT_WEDGED_AFTER, |w| *w);
        self.loops
            .lock()
            .map(|loops| loops.iter().map(|l| l.status(after)).collect())
            .unwrap_or_default()
    }

    /// The verdict of [`health`] now.
    pub fn check(&self) -> Health {
        health(Instant::now(), &self.statuses())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMIT: Duration = Duration::from_secs(10);

    fn s(secs: u64) -> Duration {
        Duration::from_secs(secs)
    }

    /// A loop at `t0 + …` offsets: last progress, oldest pending, oldest running.
    fn at(
        t0: Instant,
        name: &'static str,
        progress: u64,
        pending: Option<u64>,
        running: Option<u64>,
    ) -> LoopStatus {
        LoopStatus {
            name,
            allowance: LIMIT,
            max_running: LIMIT,
            last_progress: t0 + s(progress),
            oldest_pending: pending.map(|p| t0 + s(p)),
            oldest_running: running.map(|r| t0 + s(r)),
            pending: usize::from(pending.is_some()),
        }
    }

    #[test]
    fn a_loop_is_wedged_only_when_pending_work_waits_past_its_allowance() {
        let t0 = Instant::now();
        let wedged = |name, since, stall| Health::Wedged {
            name,
            since: s(since),
            stall,
            limit: LIMIT,
        };
        let cases = [
            (
                "idle for an hour: healthy",
                vec![at(t0, "a", 0, None, None)],
                3600,
                Health::Healthy,
            ),
            (
                "work pending since just now after a long idle time",
                vec![at(t0, "a", 0, Some(3595), None)],
                3600,
                Health::Healthy,
            ),
            (
                "pending exactly the allowance: not yet",
                vec![at(t0, "a", 0, Some(0), None)],
                10,
                Health::Healthy,
            ),
            (
                "pending past the allowance without progress",
                vec![at(t0, "a", 0, Some(0), None)],
                11,
                wedged("a", 11, Stall::NoProgress),
            ),
            (
                "failing retries are no progress (nothing running now)",
                vec![at(t0, "a", 0, Some(1), None)],
                30,
                wedged("a", 29, Stall::NoProgress),
            ),
            (
                "other work finished recently: progress resets the wait",
                vec![at(t0, "a", 25, Some(0), None)],
                30,
                Health::Healthy,
            ),
            (
                "progress long ago, still pending",
                vec![at(t0, "a", 5, Some(0), None)],
                30,
                wedged("a", 25, Stall::NoProgress),
            ),
            (
                "a reconcile running past the limit, although others progress",
                vec![at(t0, "a", 29, Some(0), Some(0))],
                30,
                wedged("a", 30, Stall::Running),
            ),
            (
                "a reconcile running within the limit",
                vec![at(t0, "a", 0, Some(25), Some(25))],
                30,
                Health::Healthy,
            ),
            (
                "the loop stalled longest is named",
                vec![
                    at(t0, "a", 0, Some(10), None),
                    at(t0, "b", 0, Some(2), None),
                    at(t0, "c", 0, None, None),
                ],
                30,
                wedged("b", 28, Stall::NoProgress),
            ),
        ];
        for (why, loops, now, expected) in cases {
            assert_eq!(health(t0 + s(now), &loops), expected, "{why}");
        }
    }

    #[test]
    fn a_periodic_loop_is_allowed_its_period_more() {
        let progress = LoopProgress::new("resync", s(60));
        let status = progress.status(LIMIT);
        assert_eq!(status.allowance, s(70));
        assert_eq!(status.max_running, LIMIT);
    }

    #[test]
    fn reasons_name_the_loop_and_how_long() {
        let reason = Health::Wedged {
            name: "handoff",
            since: Duration::from_millis(12_400),
            stall: Stall::NoProgress,
            limit: LIMIT,
        }
        .reason();
        assert_eq!(
            reason,
            "wedged: loop handoff has pending work and made no progress for 12s (limit 10s)"
        );
        let running = Health::Wedged {
            name: "resync",
            since: s(61),
            stall: Stall::Running,
            limit: LIMIT,
        }
        .reason();
        assert_eq!(
            running,
            "wedged: loop resync has a reconcile running for 61s (limit 10s)"
        );
        assert_eq!(Health::Healthy.reason(), "ok");
    }

    #[test]
    fn the_record_keeps_failed_work_pending_and_clears_it_on_success() {
        let progress = LoopProgress::new("handoff", Duration::ZERO);
        let idle = progress.status(LIMIT);
        assert_eq!((idle.pending, idle.oldest_pending), (0, None));

        let attempt = progress.start("Handoff ns/a".into());
        let running = progress.status(LIMIT);
        assert_eq!(running.pending, 1);
        // First started now: running and pending since the same instant.
        assert!(running.oldest_pending.is_some());
        assert_eq!(running.oldest_running, running.oldest_pending);
        attempt.end(false);
        let failed = progress.status(LIMIT);
        assert_eq!(failed.pending, 1, "a failed attempt stays pending");
        assert_eq!(failed.oldest_running, None);
        assert_eq!(failed.oldest_pending, running.oldest_pending);

        // A retry keeps the time the work first became pending.
        let retry = progress.start("Handoff ns/a".into());
        assert_eq!(
            progress.status(LIMIT).oldest_pending,
            running.oldest_pending
        );
        drop(retry);
        assert_eq!(progress.status(LIMIT).oldest_running, None, "abandoned");

        progress.start("Handoff ns/a".into()).end(true);
        let done = progress.status(LIMIT);
        assert_eq!((done.pending, done.oldest_pending), (0, None));
        assert!(Some(done.last_progress) >= failed.oldest_pending);

        progress.start("Handoff ns/b".into()).end(false);
        progress.forget("Handoff ns/b");
        assert_eq!(progress.status(LIMIT).pending, 0, "gone is done");
        progress.start("Handoff ns/c".into()).end(false);
        progress.reset();
        assert_eq!(progress.status(LIMIT).pending, 0);
    }

    #[test]
    fn loops_are_registered_once_and_judged_by_the_flag() {
        let liveness = Liveness::default();
        let a = liveness.track("handoff", Duration::ZERO);
        let again = liveness.track("handoff", Duration::ZERO);
        assert!(Arc::ptr_eq(&a, &again));
        liveness.track("grooming", s(60));
        liveness.set_wedged_after(s(30));
        let statuses = liveness.statuses();
        let limits: Vec<(&str, Duration)> =
            statuses.iter().map(|l| (l.name, l.allowance)).collect();
        assert_eq!(limits, [("handoff", s(30)), ("grooming", s(90))]);
        assert_eq!(liveness.check(), Health::Healthy);
    }
}
