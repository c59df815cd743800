//! What the controller's offer loops do, decided without I/O: given what a
//! reconcile observed ([`Observed`]: an agent Job and its slot's offers, a
//! pending offer and its slot's offers, or a finished offer and the
//! clock), [`plan`] returns the writes to make, in order, and when to look
//! again. The loops (`handoff_controller::offer_loops`) only read what
//! [`job_slot`] and [`reads`] ask for and carry the plan out.
//!
//! - An agent Job that runs: every offer of its slot still `Offered` is
//!   superseded (reason `AgentActivated`, by `job/<name>`), except the one
//!   its `handoff.dev/offer` annotation names, which becomes `Accepted`.
//! - That Job succeeded: the named offer, if `Offered` or `Accepted`,
//!   becomes `Completed`. A failed Job moves nothing.
//! - A pending offer: if its slot holds more than one `Offered` (a crashed
//!   or raced offerer), all but the highest-numbered are superseded
//!   (reason `NewOffer`, by the newest's name).
//! - A terminal offer (`Completed`, `Rejected`, `Superseded`) is deleted
//!   once the retention has passed since `status.finishedAt` (its creation
//!   when that is absent); until then the loop looks again at that moment.
//!
//! Rejected and finished offers are never moved again: only `Offered` (and,
//! for completion, `Accepted`) offers are written.

use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::batch::v1::Job;
use kube::ResourceExt;

use super::{seq_of, slot};
use crate::api::{HandoffOffer, JobResult, OfferPhase, SupersedeReason};
use crate::names::{AGENT_LABEL, OFFER_ANNOTATION, PROJECT_LABEL, SLOT_LABEL};
use crate::schedule::jobs::job_result;

/// What a reconcile observed.
#[derive(Debug, Clone, Copy)]
pub enum Observed<'a> {
    /// An agent Job and every offer of its slot ([`job_slot`]).
    Job {
        /// The Job.
        job: &'a Job,
        /// Its slot's offers, in any phase.
        offers: &'a [HandoffOffer],
    },
    /// A pending offer's slot ([`Reads::Slot`]) and every offer in it.
    Pending {
        /// The slot.
        slot: &'a str,
        /// Its offers, in any phase (the reconciled one among them).
        offers: &'a [HandoffOffer],
    },
    /// A terminal offer ([`Reads::Clock`]) and the clock reading.
    Finished {
        /// The offer.
        offer: &'a HandoffOffer,
        /// How long terminal offers are kept (`--offer-retention`).
        retention: Duration,
        /// Now.
        now: Timestamp,
    },
}

/// One write of a plan.
#[derive(Debug, Clone)]
pub enum Effect<'a> {
    /// Moves `offer` to `phase`, naming the agent Job `job`.
    SetPhase {
        /// The offer.
        offer: &'a HandoffOffer,
        /// `Accepted` or `Completed`.
        phase: OfferPhase,
        /// The Job's name.
        job: String,
    },
    /// Supersedes `offer` (if still pending) by `by`, with an Event.
    Supersede {
        /// The offer.
        offer: &'a HandoffOffer,
        /// `job/<name>` or the newest offer's name.
        by: String,
        /// Why.
        reason: SupersedeReason,
    },
    /// Deletes a terminal offer past its retention.
    Delete {
        /// The offer.
        offer: &'a HandoffOffer,
    },
}

/// When to look at the object again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wake {
    /// When it changes.
    OnChange,
    /// After this long (a retention still running).
    After(Duration),
}

/// What one reconcile does: the writes, in order (the first failure stops
/// the rest; the retry plans again), then when to look again.
#[derive(Debug, Clone)]
pub struct Plan<'a> {
    /// The writes.
    pub effects: Vec<Effect<'a>>,
    /// When to look again.
    pub wake: Wake,
}

impl Plan<'_> {
    fn idle() -> Self {
        Self {
            effects: Vec::new(),
            wake: Wake::OnChange,
        }
    }
}

/// What a reconcile of an offer reads before its plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reads<'a> {
    /// Nothing: there is nothing to do (an `Accepted` offer, or a pending
    /// one without a slot label).
    Nothing,
    /// The offers of this slot ([`Observed::Pending`]).
    Slot(&'a str),
    /// The clock ([`Observed::Finished`]).
    Clock,
}

/// What a reconcile of `offer` must read.
pub fn reads(offer: &HandoffOffer) -> Reads<'_> {
    match offer.phase() {
        phase if phase.is_terminal() => Reads::Clock,
        OfferPhase::Offered => offer
            .labels()
            .get(SLOT_LABEL)
            .map_or(Reads::Nothing, |slot| Reads::Slot(slot)),
        _ => Reads::Nothing,
    }
}

/// The slot whose offers an agent Job moves (its project and agent
/// labels); `None` for a Job without both, which moves nothing.
pub fn job_slot(job: &Job) -> Option<String> {
    let labels = job.labels();
    Some(slot(labels.get(PROJECT_LABEL)?, labels.get(AGENT_LABEL)?))
}

/// The writes for what was observed (see the module docs).
pub fn plan<'a>(observed: &Observed<'a>) -> Plan<'a> {
    match *observed {
        Observed::Job { job, offers } => for_job(job, offers),
        Observed::Pending { slot, offers } => converge(slot, offers),
        Observed::Finished {
            offer,
            retention,
            now,
        } => retain(offer, retention, now),
    }
}

/// An agent Job's start or success, applied to its slot's offers.
fn for_job<'a>(job: &Job, offers: &'a [HandoffOffer]) -> Plan<'a> {
    let named = job.annotations().get(OFFER_ANNOTATION);
    let is_named = |o: &HandoffOffer| named.is_some_and(|n| *n == o.name_any());
    let job_name = job.name_any();
    let effects = match job_result(job) {
        None => offers
            .iter()
            .filter(|o| o.phase() == OfferPhase::Offered)
            .map(|offer| {
                if is_named(offer) {
                    Effect::SetPhase {
                        offer,
                        phase: OfferPhase::Accepted,
                        job: job_name.clone(),
                    }
                } else {
                    Effect::Supersede {
                        offer,
                        by: format!("job/{job_name}"),
                        reason: SupersedeReason::AgentActivated,
                    }
                }
            })
            .collect(),
        Some(JobResult::Succeeded) => offers
            .iter()
            .filter(|o| is_named(o))
            .filter(|o| matches!(o.phase(), OfferPhase::Offered | OfferPhase::Accepted))
            .map(|offer| Effect::SetPhase {
                offer,
                phase: OfferPhase::Completed,
                job: job_name.clone(),
            })
            .collect(),
        Some(JobResult::Failed) => Vec::new(),
    };
    Plan {
        effects,
        wake: Wake::OnChange,
    }
}

/// A slot converged to at most one `Offered`, the highest-numbered.
fn converge<'a>(slot: &str, offers: &'a [HandoffOffer]) -> Plan<'a> {
    let pending: Vec<&HandoffOffer> = offers
        .iter()
        .filter(|o| o.phase() == OfferPhase::Offered)
        .collect();
    let Some(newest) = pending
        .iter()
        .max_by_key(|o| seq_of(&o.name_any(), slot))
        .map(|o| o.name_any())
    else {
        return Plan::idle();
    };
    let effects = pending
        .into_iter()
        .filter(|o| o.name_any() != newest)
        .map(|offer| Effect::Supersede {
            offer,
            by: newest.clone(),
            reason: SupersedeReason::NewOffer,
        })
        .collect();
    Plan {
        effects,
        wake: Wake::OnChange,
    }
}

/// A terminal offer deleted past its retention, else looked at again then.
fn retain(offer: &HandoffOffer, retention: Duration, now: Timestamp) -> Plan<'_> {
    let Some(deadline) = retention_deadline(offer, retention) else {
        return Plan::idle();
    };
    if now < deadline {
        return Plan {
            effects: Vec::new(),
            wake: Wake::After(now.duration_until(deadline).unsigned_abs()),
        };
    }
    Plan {
        effects: vec![Effect::Delete { offer }],
        wake: Wake::OnChange,
    }
}

/// When a terminal offer is due for deletion: `retention` after it became
/// terminal (`finishedAt`, else its creation). `None` for offers still in
/// play, and for those without either time.
pub fn retention_deadline(offer: &HandoffOffer, retention: Duration) -> Option<Timestamp> {
    if !offer.phase().is_terminal() {
        return None;
    }
    let finished = offer
        .status
        .as_ref()
        .and_then(|s| s.finished_at.as_ref())
        .or(offer.metadata.creation_timestamp.as_ref())?
        .0;
    let retention = jiff::SignedDuration::try_from(retention).ok()?;
    finished.checked_add(retention).ok()
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use k8s_openapi::api::batch::v1::JobStatus;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    use super::*;
    use crate::api::{HandoffOfferSpec, HandoffOfferStatus};
    use crate::offers::offer_name;

    const DAY: Duration = Duration::from_secs(86_400);

    fn at(t: &str) -> Timestamp {
        t.parse().expect("timestamp")
    }

    fn slot_of() -> String {
        slot("shop", "dev-lead")
    }

    /// The `seq`-th offer of the slot, in `phase` (`None`: not set yet).
    fn offer(seq: u64, phase: Option<OfferPhase>) -> HandoffOffer {
        let mut offer = HandoffOffer::new(
            &offer_name(&slot_of(), seq),
            HandoffOfferSpec::new("shop", "dev-lead", "k"),
        );
        offer.metadata.labels = Some(BTreeMap::from([(SLOT_LABEL.to_owned(), slot_of())]));
        offer.metadata.creation_timestamp = Some(Time(at("2026-01-01T00:00:00Z")));
        offer.status = Some(HandoffOfferStatus {
            phase,
            ..Default::default()
        });
        offer
    }

    fn finished(phase: Option<OfferPhase>, finished: Option<&str>) -> HandoffOffer {
        let mut offer = offer(1, phase);
        if let Some(status) = offer.status.as_mut() {
            status.finished_at = finished.map(|t| Time(at(t)));
        }
        offer
    }

    /// An agent Job of the slot naming offer `named`, in the given result.
    fn job(named: Option<u64>, result: Option<JobResult>) -> Job {
        let mut job = Job::default();
        job.metadata.name = Some("dev-lead-run".into());
        job.metadata.labels = Some(BTreeMap::from([
            (PROJECT_LABEL.to_owned(), "shop".to_owned()),
            (AGENT_LABEL.to_owned(), "dev-lead".to_owned()),
        ]));
        job.metadata.annotations = named.map(|seq| {
            BTreeMap::from([(OFFER_ANNOTATION.to_owned(), offer_name(&slot_of(), seq))])
        });
        let condition = |type_: &str| k8s_openapi::api::batch::v1::JobCondition {
            type_: type_.into(),
            status: "True".into(),
            ..Default::default()
        };
        job.status = Some(JobStatus {
            conditions: Some(match result {
                None => Vec::new(),
                Some(JobResult::Succeeded) => vec![condition("Complete")],
                Some(JobResult::Failed) => vec![condition("Failed")],
            }),
            ..Default::default()
        });
        job
    }

    /// A plan's writes as `(seq, what)` pairs, `what` as the store is asked.
    type Writes = Vec<(u64, String)>;

    /// [`Writes`] of `plan`.
    fn writes(plan: &Plan<'_>) -> Writes {
        let seq = |o: &HandoffOffer| seq_of(&o.name_any(), &slot_of()).unwrap_or_default();
        plan.effects
            .iter()
            .map(|effect| match effect {
                Effect::SetPhase { offer, phase, job } => (seq(offer), format!("{phase:?} {job}")),
                Effect::Supersede { offer, by, reason } => {
                    (seq(offer), format!("Superseded by {by} ({reason:?})"))
                }
                Effect::Delete { offer } => (seq(offer), "delete".to_owned()),
            })
            .collect()
    }

    #[test]
    fn agent_jobs_accept_supersede_and_complete() {
        use OfferPhase::*;
        let activated = |seq: u64| {
            (
                seq,
                "Superseded by job/dev-lead-run (AgentActivated)".into(),
            )
        };
        let accepted = |seq: u64| (seq, "Accepted dev-lead-run".to_owned());
        let completed = |seq: u64| (seq, "Completed dev-lead-run".to_owned());
        // (why, the Job: named offer and result, the slot's offers) → writes
        let cases: Vec<(&str, Job, Vec<HandoffOffer>, Writes)> = vec![
            (
                "a running Job accepts the offer it names",
                job(Some(1), None),
                vec![offer(1, Some(Offered))],
                vec![accepted(1)],
            ),
            (
                "an offer with no phase yet is pending",
                job(Some(1), None),
                vec![offer(1, None)],
                vec![accepted(1)],
            ),
            (
                "the agent activated: every other pending offer is superseded",
                job(Some(2), None),
                vec![
                    offer(1, Some(Offered)),
                    offer(2, Some(Offered)),
                    offer(3, None),
                ],
                vec![activated(1), accepted(2), activated(3)],
            ),
            (
                "a Job that names no offer supersedes them all",
                job(None, None),
                vec![offer(1, Some(Offered))],
                vec![activated(1)],
            ),
            (
                "rejected, accepted and finished offers are left alone",
                job(None, None),
                vec![
                    offer(1, Some(Rejected)),
                    offer(2, Some(Accepted)),
                    offer(3, Some(Completed)),
                    offer(4, Some(Superseded)),
                ],
                vec![],
            ),
            (
                "a succeeded Job completes its accepted offer",
                job(Some(1), Some(JobResult::Succeeded)),
                vec![offer(1, Some(Accepted)), offer(2, Some(Offered))],
                vec![completed(1)],
            ),
            (
                "or its offer still pending (the Job ran between two reconciles)",
                job(Some(1), Some(JobResult::Succeeded)),
                vec![offer(1, Some(Offered))],
                vec![completed(1)],
            ),
            (
                "a rejected offer is not completed",
                job(Some(1), Some(JobResult::Succeeded)),
                vec![offer(1, Some(Rejected))],
                vec![],
            ),
            (
                "a failed Job moves nothing",
                job(Some(1), Some(JobResult::Failed)),
                vec![offer(1, Some(Accepted)), offer(2, Some(Offered))],
                vec![],
            ),
        ];
        for (why, job, offers, want) in cases {
            let plan = plan(&Observed::Job {
                job: &job,
                offers: &offers,
            });
            assert_eq!(writes(&plan), want, "{why}");
            assert_eq!(plan.wake, Wake::OnChange, "{why}");
        }
    }

    #[test]
    fn a_slot_keeps_only_its_newest_pending_offer() {
        use OfferPhase::*;
        let by = |seq: u64, newest: u64| {
            (
                seq,
                format!(
                    "Superseded by {} (NewOffer)",
                    offer_name(&slot_of(), newest)
                ),
            )
        };
        // (why, the slot's offers) → writes
        let cases: Vec<(&str, Vec<HandoffOffer>, Writes)> = vec![
            (
                "one pending offer stays",
                vec![offer(1, Some(Offered))],
                vec![],
            ),
            (
                "superseded by a new offer: the older pending ones go",
                vec![
                    offer(3, Some(Offered)),
                    offer(1, None),
                    offer(2, Some(Offered)),
                ],
                vec![by(1, 3), by(2, 3)],
            ),
            (
                "numbers, not names, order them",
                vec![offer(9, Some(Offered)), offer(10, Some(Offered))],
                vec![by(9, 10)],
            ),
            (
                "offers no longer pending do not count",
                vec![
                    offer(5, Some(Accepted)),
                    offer(6, Some(Rejected)),
                    offer(2, Some(Offered)),
                ],
                vec![],
            ),
            ("an empty slot (deleted meanwhile)", vec![], vec![]),
        ];
        let slot = slot_of();
        for (why, offers, want) in cases {
            let plan = plan(&Observed::Pending {
                slot: &slot,
                offers: &offers,
            });
            assert_eq!(writes(&plan), want, "{why}");
            assert_eq!(plan.wake, Wake::OnChange, "{why}");
        }
    }

    #[test]
    fn what_an_offer_reconcile_reads() {
        use OfferPhase::*;
        let slot = slot_of();
        let mut unlabelled = offer(1, Some(Offered));
        unlabelled.metadata.labels = None;
        let cases = [
            (offer(1, Some(Offered)), Reads::Slot(&slot)),
            (offer(1, None), Reads::Slot(&slot)),
            (unlabelled, Reads::Nothing),
            (offer(1, Some(Accepted)), Reads::Nothing),
            (offer(1, Some(Completed)), Reads::Clock),
            (offer(1, Some(Rejected)), Reads::Clock),
            (offer(1, Some(Superseded)), Reads::Clock),
        ];
        for (offer, want) in cases {
            assert_eq!(reads(&offer), want, "{:?}", offer.status);
        }
        assert_eq!(job_slot(&job(None, None)), Some(slot));
        assert_eq!(job_slot(&Job::default()), None, "not an agent Job");
    }

    #[test]
    fn retention_deletes_after_the_deadline_and_waits_before() {
        use OfferPhase::*;
        // (phase, finishedAt, now) → writes, wake
        let cases = [
            (
                Some(Rejected),
                Some("2026-01-03T00:00:00Z"),
                "2026-01-03T12:00:00Z",
                vec![],
                Wake::After(DAY / 2),
            ),
            (
                Some(Rejected),
                Some("2026-01-03T00:00:00Z"),
                "2026-01-04T00:00:00Z",
                vec![(1, "delete".to_owned())],
                Wake::OnChange,
            ),
            (
                Some(Completed),
                Some("2026-01-01T12:00:00Z"),
                "2026-01-05T00:00:00Z",
                vec![(1, "delete".to_owned())],
                Wake::OnChange,
            ),
            (
                Some(Superseded),
                None,
                "2026-01-01T18:00:00Z",
                vec![],
                Wake::After(DAY / 4),
            ),
            (
                Some(Offered),
                None,
                "2027-01-01T00:00:00Z",
                vec![],
                Wake::OnChange,
            ),
            (
                Some(Accepted),
                None,
                "2027-01-01T00:00:00Z",
                vec![],
                Wake::OnChange,
            ),
        ];
        for (phase, finished_at, now, want, wake) in cases {
            let offer = finished(phase, finished_at);
            let plan = plan(&Observed::Finished {
                offer: &offer,
                retention: DAY,
                now: at(now),
            });
            assert_eq!(writes(&plan), want, "{phase:?} {finished_at:?} {now}");
            assert_eq!(plan.wake, wake, "{phase:?} {finished_at:?} {now}");
        }
    }

    #[test]
    fn retention_counts_from_the_end_else_from_the_creation() {
        let t = |s: &str| Some(at(s));
        // (phase, finishedAt) → deadline; created 2026-01-01
        let cases = [
            (
                Some(OfferPhase::Rejected),
                Some("2026-01-03T00:00:00Z"),
                t("2026-01-04T00:00:00Z"),
            ),
            (
                Some(OfferPhase::Superseded),
                None,
                t("2026-01-02T00:00:00Z"),
            ),
            (
                Some(OfferPhase::Completed),
                Some("2026-01-01T12:00:00Z"),
                t("2026-01-02T12:00:00Z"),
            ),
            (Some(OfferPhase::Offered), None, None),
            (Some(OfferPhase::Accepted), None, None),
            (None, None, None),
        ];
        for (phase, finished_at, want) in cases {
            assert_eq!(
                retention_deadline(&finished(phase, finished_at), DAY),
                want,
                "{phase:?} {finished_at:?}"
            );
        }
    }
}
