//! The controller's metrics (prefix `handoff_controller_`): reconciles,
//! revisions, grooming, the mirror (errors, lag and pending rows, which
//! report the Handoff loop's backlog, batch sizes, resync repairs, history
//! purges), leadership, each loop's progress (`/healthz`), the
//! Handoffs whose name is not derived from their key and the brainstorm
//! schedules' finished cycles.
//!
//! `noncanonical_handoffs` is a gauge, not a counter: an admin asks how
//! many such objects exist now (and whether deleting them worked), which a
//! counter of sightings cannot say across restarts and leaderships. It is
//! counted at each scrape from the Handoff loop's watch cache, which holds
//! every object, so it is exact for the leader and needs no bookkeeping of
//! creates and deletes (0 on a replica that does not lead).

use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use tokio_util::sync::CancellationToken;

use crate::backlog;
use handoff_core::liveness::{Health, Liveness};
use handoff_kube::loops::LoopMetrics;
use handoff_kube::telemetry::Listed;

/// The controller's metrics (prefix `handoff_controller_`).
pub struct ControllerMetrics {
    registry: Registry,
    reconciles: Family<ResultLabel, Counter>,
    reconcile_seconds: Histogram,
    pub(crate) leader: Gauge,
    revisions: Counter,
    groomed: Counter,
    mirror_errors: Counter,
    mirror_lag_seconds: Gauge<f64, std::sync::atomic::AtomicU64>,
    mirror_pending_rows: Gauge,
    pub(crate) mirror_batch_rows: Histogram,
    resync_repairs: Family<RepairLabel, Counter>,
    history_purged: Family<HistoryLabel, Counter>,
    backlog: Mutex<Option<Arc<backlog::Backlog>>>,
    noncanonical: Gauge,
    schedule_cycles: Family<ResultLabel, Counter>,
    noncanonical_count: Mutex<Option<NoncanonicalCount>>,
    pub(crate) ready: AtomicBool,
    resyncs: AtomicI64,
    loop_stalled_seconds: Family<LoopLabel, Gauge<f64, std::sync::atomic::AtomicU64>>,
    loop_pending: Family<LoopLabel, Gauge>,
    /// What every loop reports: errors by category, invalid objects.
    pub loops: Arc<LoopMetrics>,
    /// Each loop's progress, judged by `--wedged-after` (`/healthz`).
    pub liveness: Arc<Liveness>,
}

/// Counts the Handoffs whose name is not derived from their key (the
/// Handoff loop's watch cache).
pub(crate) type NoncanonicalCount = Box<dyn Fn() -> usize + Send + Sync>;

/// `loop` label.
#[derive(Clone, Debug, Hash, PartialEq, Eq, prometheus_client::encoding::EncodeLabelSet)]
pub(crate) struct LoopLabel {
    /// `handoff`, `resync`, `grooming`, `schedule` or `offers`.
    pub r#loop: String,
}

/// `result` label.
#[derive(Clone, Debug, Hash, PartialEq, Eq, prometheus_client::encoding::EncodeLabelSet)]
pub(crate) struct ResultLabel {
    /// `ok` or `error` (reconciles); `succeeded` or `failed` (schedule cycles).
    pub result: String,
}

/// `reason` label of history rows the controller deleted.
#[derive(Clone, Debug, Hash, PartialEq, Eq, prometheus_client::encoding::EncodeLabelSet)]
pub(crate) struct HistoryLabel {
    /// `deleted` (with the handoff's row), `cap` (beyond
    /// `--history-revisions`), `age` (older than `--history-max-age`) or
    /// `noncanonical` (of an object whose name is not derived from its key).
    pub reason: String,
}

/// `action` label of resync repairs.
#[derive(Clone, Debug, Hash, PartialEq, Eq, prometheus_client::encoding::EncodeLabelSet)]
pub(crate) struct RepairLabel {
    /// `written` (missing or stale row) or `deleted` (orphan row).
    pub action: String,
}

impl ControllerMetrics {
    /// Registers every metric.
    pub fn new() -> Arc<Self> {
        let mut registry = Registry::with_prefix("handoff_controller");
        let reconciles = Family::<ResultLabel, Counter>::default();
        let reconcile_seconds = Histogram::new(exponential_buckets(0.001, 2.0, 14));
        let leader = Gauge::default();
        let revisions = Counter::default();
        let groomed = Counter::default();
        let mirror_errors = Counter::default();
        let mirror_lag_seconds = Gauge::<f64, std::sync::atomic::AtomicU64>::default();
        let mirror_pending_rows = Gauge::default();
        let mirror_batch_rows = Histogram::new(exponential_buckets(1.0, 2.0, 10));
        let resync_repairs = Family::<RepairLabel, Counter>::default();
        let history_purged = Family::<HistoryLabel, Counter>::default();
        let noncanonical = Gauge::default();
        let schedule_cycles = Family::<ResultLabel, Counter>::default();
        // Both results exist from the start at 0, so the first failed
        // cycle is an increase an alert's `increase()` sees.
        for result in ["succeeded", "failed"] {
            let _ = schedule_cycles.get_or_create(&ResultLabel {
                result: result.into(),
            });
        }
        let loops = Arc::new(LoopMetrics::default());
        loops.register(&mut registry);
        let loop_stalled_seconds =
            Family::<LoopLabel, Gauge<f64, std::sync::atomic::AtomicU64>>::default();
        let loop_pending = Family::<LoopLabel, Gauge>::default();
        registry.register(
            "loop_last_progress_seconds",
            "Seconds the loop's pending work has waited for progress (0 while it has none; /healthz fails past --wedged-after)",
            Listed(loop_stalled_seconds.clone()),
        );
        registry.register(
            "loop_pending",
            "Objects (or passes) whose work the loop started and has not finished well",
            Listed(loop_pending.clone()),
        );
        registry.register(
            "reconciles",
            "Handoff reconciles by result",
            Listed(reconciles.clone()),
        );
        registry.register(
            "reconcile_duration_seconds",
            "Handoff reconcile latency",
            reconcile_seconds.clone(),
        );
        registry.register(
            "leader",
            "1 while this replica holds the lease",
            leader.clone(),
        );
        registry.register("revisions", "Content revisions counted", revisions.clone());
        registry.register(
            "groomed_handoffs",
            "Handoffs deleted by TTL grooming",
            groomed.clone(),
        );
        registry.register(
            "mirror_errors",
            "Failed mirror writes (retried with backoff)",
            mirror_errors.clone(),
        );
        registry.register(
            "mirror_lag_seconds",
            "Age of the oldest change not yet in the mirror (0 when caught up)",
            mirror_lag_seconds.clone(),
        );
        registry.register(
            "mirror_pending_rows",
            "Handoffs whose mirror row is behind",
            mirror_pending_rows.clone(),
        );
        registry.register(
            "mirror_batch_rows",
            "Mirror writes (row upserts and history appends) per batch sent to PostgreSQL",
            mirror_batch_rows.clone(),
        );
        registry.register(
            "mirror_resync_repairs",
            "Rows repaired by resync",
            Listed(resync_repairs.clone()),
        );
        registry.register(
            "mirror_history_purged_rows",
            "History rows deleted by retention (with a deleted handoff, beyond the cap, by age)",
            Listed(history_purged.clone()),
        );
        registry.register(
            "noncanonical_handoffs",
            "Handoffs whose metadata.name is not the name derived from spec.handoffKey (condition KeyBound=False): never mirrored nor listed",
            noncanonical.clone(),
        );
        registry.register(
            "schedule_cycles",
            "BrainstormSchedule cycles (refine then brainstorm) finished, by result: failed when either step's Job failed",
            schedule_cycles.clone(),
        );
        Arc::new(Self {
            registry,
            reconciles,
            reconcile_seconds,
            leader,
            revisions,
            groomed,
            mirror_errors,
            mirror_lag_seconds,
            mirror_pending_rows,
            mirror_batch_rows,
            resync_repairs,
            history_purged,
            backlog: Mutex::new(None),
            noncanonical,
            schedule_cycles,
            noncanonical_count: Mutex::new(None),
            ready: AtomicBool::new(false),
            resyncs: AtomicI64::new(0),
            loop_stalled_seconds,
            loop_pending,
            loops,
            liveness: Arc::new(Liveness::default()),
        })
    }

    /// The OpenMetrics text exposition.
    pub fn encode(&self) -> String {
        self.refresh_lag();
        self.refresh_progress();
        self.refresh_noncanonical();
        let mut out = String::new();
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }

    /// What `/healthz` answers: ok, or which loop is wedged and for how long.
    pub fn live(&self) -> Result<(), String> {
        match self.liveness.check() {
            Health::Healthy => Ok(()),
            wedged => {
                let reason = wedged.reason();
                tracing::warn!(reason = %reason, "/healthz: a loop is wedged");
                Err(reason)
            }
        }
    }

    /// Serves `/metrics`, `/healthz` and `/readyz` from these metrics on
    /// `listener` until `shutdown`.
    pub fn serve(self: &Arc<Self>, listener: tokio::net::TcpListener, shutdown: CancellationToken) {
        let (served, ready, live) = (self.clone(), self.clone(), self.clone());
        tokio::spawn(handoff_kube::telemetry::serve_endpoints(
            listener,
            Arc::new(move || served.encode()),
            Arc::new(move || ready.is_ready()),
            Arc::new(move || live.live()),
            async move { shutdown.cancelled().await },
        ));
    }

    fn refresh_progress(&self) {
        let now = Instant::now();
        for status in self.liveness.statuses() {
            let label = LoopLabel {
                r#loop: status.name.into(),
            };
            self.loop_stalled_seconds
                .get_or_create(&label)
                .set(status.stalled(now).as_secs_f64());
            self.loop_pending
                .get_or_create(&label)
                .set(i64::try_from(status.pending).unwrap_or(i64::MAX));
        }
    }

    /// Whether `/readyz` answers ok.
    pub fn is_ready(&self) -> bool {
        self.ready.load(Ordering::Relaxed)
    }

    /// Whether this replica leads.
    pub fn is_leader(&self) -> bool {
        self.leader.get() == 1
    }

    /// Completed resync passes (tests wait on it).
    pub fn resyncs(&self) -> i64 {
        self.resyncs.load(Ordering::Relaxed)
    }

    /// Handoffs deleted by grooming.
    pub fn groomed(&self) -> u64 {
        self.groomed.get()
    }

    pub(crate) fn observe_reconcile(&self, ok: bool, elapsed: Duration) {
        self.reconcile_seconds.observe(elapsed.as_secs_f64());
        self.reconciles
            .get_or_create(&ResultLabel {
                result: if ok { "ok" } else { "error" }.into(),
            })
            .inc();
    }

    /// The counter of finished schedule cycles by result (the schedule
    /// loop counts in it).
    pub(crate) fn schedule_cycles(&self) -> Family<ResultLabel, Counter> {
        self.schedule_cycles.clone()
    }

    pub(crate) fn count_revision(&self) {
        self.revisions.inc();
    }

    pub(crate) fn count_groomed(&self) {
        self.groomed.inc();
    }

    pub(crate) fn count_mirror_error(&self) {
        self.mirror_errors.inc();
    }

    pub(crate) fn count_repair(&self, action: &str) {
        self.resync_repairs
            .get_or_create(&RepairLabel {
                action: action.into(),
            })
            .inc();
    }

    pub(crate) fn count_history_purged(&self, reason: &str, rows: u64) {
        if rows > 0 {
            self.history_purged
                .get_or_create(&HistoryLabel {
                    reason: reason.into(),
                })
                .inc_by(rows);
        }
    }

    pub(crate) fn count_resync(&self) {
        self.resyncs.fetch_add(1, Ordering::Relaxed);
    }

    /// Reports what `count` counts in `noncanonical_handoffs` (the leader's
    /// Handoff loop cache); `None` when leadership ends.
    pub(crate) fn report_noncanonical(&self, count: Option<NoncanonicalCount>) {
        if let Ok(mut reported) = self.noncanonical_count.lock() {
            *reported = count;
        }
    }

    fn refresh_noncanonical(&self) {
        let Ok(reported) = self.noncanonical_count.lock() else {
            return;
        };
        let n = reported.as_ref().map_or(0, |count| count());
        self.noncanonical.set(i64::try_from(n).unwrap_or(i64::MAX));
    }

    /// Reports `backlog` (the Handoff loop's) in the mirror gauges.
    pub(crate) fn report_backlog(&self, backlog: Arc<backlog::Backlog>) {
        if let Ok(mut reported) = self.backlog.lock() {
            *reported = Some(backlog);
        }
    }

    fn refresh_lag(&self) {
        let Ok(reported) = self.backlog.lock() else {
            return;
        };
        let (rows, oldest) = reported.as_ref().map_or_else(Default::default, |b| b.lag());
        self.mirror_lag_seconds.set(oldest.as_secs_f64());
        self.mirror_pending_rows
            .set(i64::try_from(rows).unwrap_or(i64::MAX));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loop_gauges_follow_the_progress_record() {
        let m = ControllerMetrics::new();
        let progress = m.liveness.track("handoff", Duration::ZERO);
        progress.start("Handoff ns/a".into()).end(false);
        let text = m.encode();
        assert!(
            text.contains("handoff_controller_loop_pending{loop=\"handoff\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("handoff_controller_loop_last_progress_seconds{loop=\"handoff\"}"),
            "{text}"
        );
        assert_eq!(m.live(), Ok(()), "pending for less than 5 minutes");
        progress.forget("Handoff ns/a");
        let text = m.encode();
        assert!(
            text.contains("handoff_controller_loop_pending{loop=\"handoff\"} 0"),
            "{text}"
        );
    }

    #[test]
    fn schedule_cycles_start_at_zero_for_both_results() {
        let m = ControllerMetrics::new();
        m.schedule_cycles()
            .get_or_create(&ResultLabel {
                result: "failed".into(),
            })
            .inc();
        let text = m.encode();
        for line in [
            "handoff_controller_schedule_cycles_total{result=\"succeeded\"} 0",
            "handoff_controller_schedule_cycles_total{result=\"failed\"} 1",
        ] {
            assert!(text.contains(line), "{line} not in {text}");
        }
    }

    #[test]
    fn the_noncanonical_gauge_counts_at_each_scrape() {
        let m = ControllerMetrics::new();
        let gauge = "handoff_controller_noncanonical_handoffs ";
        let text = m.encode();
        assert!(text.contains(&format!("{gauge}0")), "not leading: {text}");
        let seen = Arc::new(AtomicI64::new(2));
        let source = seen.clone();
        m.report_noncanonical(Some(Box::new(move || {
            usize::try_from(source.load(Ordering::Relaxed)).unwrap_or_default()
        })));
        assert!(m.encode().contains(&format!("{gauge}2")));
        seen.store(1, Ordering::Relaxed);
        assert!(m.encode().contains(&format!("{gauge}1")), "one deleted");
        m.report_noncanonical(None);
        assert!(
            m.encode().contains(&format!("{gauge}0")),
            "leadership ended"
        );
    }

    #[test]
    fn the_mirror_gauges_report_the_loops_backlog() {
        let m = ControllerMetrics::new();
        let backlog = Arc::new(backlog::Backlog::default());
        m.report_backlog(backlog.clone());
        let key = ("ns".to_owned(), "k".to_owned());
        backlog.behind(&key);
        assert!(
            m.encode()
                .contains("handoff_controller_mirror_pending_rows 1")
        );
        backlog.caught_up(&key);
        let text = m.encode();
        assert!(
            text.contains("handoff_controller_mirror_pending_rows 0"),
            "{text}"
        );
        assert!(
            text.contains("handoff_controller_mirror_lag_seconds 0"),
            "{text}"
        );
    }
}
