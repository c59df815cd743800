//! What one reconcile of a schedule does, decided without I/O: given the
//! schedule (spec, metadata, status), what gather observed of the running
//! step's Job, and the clock reading, [`plan`] returns the new status, the
//! effects to apply (Jobs to create, Events to record) and when to look
//! again.
//!
//! The barrier:
//! - the running cycle advances when its step's Job is terminal: a refine
//!   Job that is Complete **or Failed** releases the brainstorm Job (a failed
//!   refine still opens the gate); a terminal brainstorm Job ends the cycle
//!   (`Idle`). A step Job that no longer exists counts as failed, so a
//!   deleted Job never blocks the schedule;
//! - then the latest tick is acted on ([`super::tick::decide`]): it starts
//!   a cycle with the refine Job, or is recorded as skipped (a cycle runs)
//!   or missed (past `startingDeadlineSeconds`); `suspend` starts nothing,
//!   but a running cycle still finishes;
//! - a schedule or time zone that does not parse sets `Ready=False` and
//!   nothing else happens until the schedule changes.

use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::ResourceExt;

use super::jobs::{Role, job_name, job_result};
use super::tick::{Decision, Situation, Timing, decide};
use crate::api::{
    BrainstormSchedule, BrainstormScheduleStatus, Cycle, DEFAULT_STARTING_DEADLINE_SECONDS,
    JobResult, SchedulePhase, StepRun, set_condition,
};

/// The type of an Event the plan records (the controller maps it onto
/// events.k8s.io's: this crate has no kube runtime).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    /// Something that went as it should.
    Normal,
    /// Something an operator may need to act on.
    Warning,
}

/// Longest wait between reconciles of an idle schedule (safety net).
pub(crate) const MAX_REQUEUE: Duration = Duration::from_secs(300);

/// The condition type of a schedule.
pub(crate) const READY: &str = "Ready";

/// A Job as gather saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JobState {
    /// No Job of that name.
    Absent,
    /// Not terminal yet.
    Running,
    /// `Complete` (or `SuccessCriteriaMet`).
    Complete,
    /// `Failed` (or `FailureTarget`).
    Failed,
}

impl JobState {
    /// The state of a Job, `None` when there is none.
    pub fn of(job: Option<&Job>) -> Self {
        match job.map(job_result) {
            None => Self::Absent,
            Some(None) => Self::Running,
            Some(Some(JobResult::Succeeded)) => Self::Complete,
            Some(Some(JobResult::Failed)) => Self::Failed,
        }
    }

    /// How the step ended, `None` while it runs; an absent Job has failed.
    fn result(self) -> Option<JobResult> {
        match self {
            Self::Running => None,
            Self::Complete => Some(JobResult::Succeeded),
            Self::Absent | Self::Failed => Some(JobResult::Failed),
        }
    }
}

/// What gather observed of the world.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Observed {
    /// The state of the running step's Job ([`step_job`]); not read when
    /// no cycle runs.
    pub step: JobState,
}

/// The Job of the running step (the one gather looks at): the brainstorm
/// Job once it was started, else the refine Job.
pub fn step_job(status: &BrainstormScheduleStatus) -> Option<&str> {
    let cycle = status.current_cycle.as_ref()?;
    Some(match &cycle.brainstorm {
        Some(brainstorm) => &brainstorm.job,
        None => &cycle.refine.job,
    })
}

/// An effect for apply to carry out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Effect {
    /// Create the Job of a step for a tick; an existing Job of that name (a
    /// restart, a second replica, a lost status write) is adopted.
    CreateJob {
        /// Which step.
        role: Role,
        /// The cycle's tick.
        tick: Timestamp,
        /// The Job's name ([`job_name`]).
        name: String,
    },
    /// Record an Event on the schedule.
    Event {
        /// Normal or Warning.
        type_: EventType,
        /// The reason (also the action).
        reason: &'static str,
        /// The note.
        note: String,
    },
}

/// When to reconcile again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wake {
    /// Only when the schedule changes (it does not parse).
    OnChange,
    /// A step's Job runs: its watch event wakes the loop, the loop's
    /// running requeue is the safety net.
    StepRunning,
    /// After this long: the next tick, at most [`MAX_REQUEUE`].
    After(Duration),
}

/// The outcome of [`plan`].
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// The status to write (unchanged when nothing happened).
    pub status: BrainstormScheduleStatus,
    /// What to do, in the order it was decided (apply creates the Jobs
    /// before it writes the status, and records the Events after).
    pub effects: Vec<Effect>,
    /// When to look again.
    pub wake: Wake,
}

/// Decides one reconcile of `schedule` (see the module docs).
pub fn plan(schedule: &BrainstormSchedule, observed: Observed, now: Timestamp) -> Plan {
    let spec = &schedule.spec;
    let mut status = schedule.status.clone().unwrap_or_default();
    status.observed_generation = schedule.metadata.generation;
    let timing = match Timing::parse(&spec.schedule, spec.time_zone.as_deref()) {
        Ok(timing) => timing,
        Err(message) => {
            let condition = ready(&status, false, "InvalidSchedule", message, now);
            set_condition(&mut status.conditions, condition);
            status.next_schedule_time = None;
            return Plan {
                status,
                effects: Vec::new(),
                wake: Wake::OnChange,
            };
        }
    };

    let mut effects = Vec::new();
    let name = schedule.name_any();
    advance_cycle(&name, &mut status, observed.step, now, &mut effects);
    let created = schedule
        .metadata
        .creation_timestamp
        .as_ref()
        .map_or(now, |t| t.0);
    let deadline_secs = spec
        .starting_deadline_seconds
        .unwrap_or(DEFAULT_STARTING_DEADLINE_SECONDS);
    let situation = Situation {
        since: status.last_schedule_time.as_ref().map_or(created, |t| t.0),
        now,
        deadline: SignedDuration::from_secs(deadline_secs),
        busy: status.current_cycle.is_some(),
        suspended: spec.suspend.unwrap_or(false),
    };
    act_on_tick(
        &name,
        decide(&timing, situation),
        deadline_secs,
        &mut status,
        &mut effects,
    );

    status.next_schedule_time = timing.next_after(now).map(Time);
    status.active_job = step_job(&status).map(str::to_owned);
    let condition = ready(
        &status,
        true,
        "Scheduled",
        "the schedule and time zone are valid".into(),
        now,
    );
    set_condition(&mut status.conditions, condition);
    let wake = if status.current_cycle.is_some() {
        Wake::StepRunning
    } else {
        Wake::After(until_next_tick(&status, now))
    };
    Plan {
        status,
        effects,
        wake,
    }
}

/// The wait for an idle schedule: until the next tick, at least a second,
/// at most [`MAX_REQUEUE`].
fn until_next_tick(status: &BrainstormScheduleStatus, now: Timestamp) -> Duration {
    status
        .next_schedule_time
        .as_ref()
        .and_then(|next| Duration::try_from(next.0.duration_since(now)).ok())
        .map_or(MAX_REQUEUE, |d| d.max(Duration::from_secs(1)))
        .min(MAX_REQUEUE)
}

fn ready(
    status: &BrainstormScheduleStatus,
    ok: bool,
    reason: &str,
    message: String,
    now: Timestamp,
) -> Condition {
    Condition {
        type_: READY.into(),
        status: if ok { "True" } else { "False" }.into(),
        reason: reason.into(),
        message,
        last_transition_time: Time(now),
        observed_generation: status.observed_generation,
    }
}

fn event(type_: EventType, reason: &'static str, note: String) -> Effect {
    Effect::Event {
        type_,
        reason,
        note,
    }
}

/// Moves the running cycle on when its step's Job is terminal.
fn advance_cycle(
    schedule: &str,
    status: &mut BrainstormScheduleStatus,
    step: JobState,
    now: Timestamp,
    effects: &mut Vec<Effect>,
) {
    let Some(mut cycle) = status.current_cycle.take() else {
        status.phase = Some(SchedulePhase::Idle);
        return;
    };
    let Some(result) = step.result() else {
        status.phase = Some(if cycle.brainstorm.is_some() {
            SchedulePhase::Brainstorming
        } else {
            SchedulePhase::Refining
        });
        status.current_cycle = Some(cycle);
        return;
    };
    match cycle.brainstorm.as_mut() {
        None => {
            cycle.refine.result = Some(result);
            let tick = cycle.tick.0;
            let name = job_name(schedule, Role::Brainstorm, tick);
            let note = format!(
                "refine Job {} {}; brainstorm Job {name} started",
                cycle.refine.job,
                if result == JobResult::Succeeded {
                    "succeeded"
                } else {
                    "failed (the gate opens anyway)"
                }
            );
            effects.push(Effect::CreateJob {
                role: Role::Brainstorm,
                tick,
                name: name.clone(),
            });
            effects.push(event(EventType::Normal, "BrainstormStarted", note));
            cycle.brainstorm = Some(StepRun {
                job: name,
                result: None,
            });
            status.phase = Some(SchedulePhase::Brainstorming);
            status.current_cycle = Some(cycle);
        }
        Some(brainstorm) => {
            brainstorm.result = Some(result);
            let both_ok =
                cycle.refine.result == Some(JobResult::Succeeded) && result == JobResult::Succeeded;
            cycle.result = Some(if both_ok {
                JobResult::Succeeded
            } else {
                JobResult::Failed
            });
            let note = format!(
                "cycle of tick {} finished: {:?} (at {now})",
                cycle.tick.0, cycle.result
            );
            effects.push(event(EventType::Normal, "CycleFinished", note));
            status.last_cycle = Some(cycle);
            status.phase = Some(SchedulePhase::Idle);
        }
    }
}

/// Starts, skips or misses the latest tick.
fn act_on_tick(
    schedule: &str,
    decision: Decision,
    deadline_secs: i64,
    status: &mut BrainstormScheduleStatus,
    effects: &mut Vec<Effect>,
) {
    match decision {
        Decision::Nothing => {}
        Decision::Start(tick) => {
            let name = job_name(schedule, Role::Refine, tick);
            effects.push(Effect::CreateJob {
                role: Role::Refine,
                tick,
                name: name.clone(),
            });
            effects.push(event(
                EventType::Normal,
                "RefineStarted",
                format!("tick {tick}: refine Job {name} started"),
            ));
            status.current_cycle = Some(Cycle {
                tick: Time(tick),
                refine: StepRun {
                    job: name,
                    result: None,
                },
                brainstorm: None,
                result: None,
            });
            status.phase = Some(SchedulePhase::Refining);
            status.last_schedule_time = Some(Time(tick));
        }
        Decision::SkipBusy(tick) => {
            let running = status
                .current_cycle
                .as_ref()
                .map(|c| c.tick.0.to_string())
                .unwrap_or_default();
            let note = format!("tick {tick} skipped: the cycle of tick {running} is still running");
            effects.push(event(EventType::Warning, "TickSkipped", note));
            status.last_schedule_time = Some(Time(tick));
        }
        Decision::Missed(tick) => {
            let note = format!(
                "tick {tick} missed: more than {deadline_secs}s late (startingDeadlineSeconds); not replayed"
            );
            effects.push(event(EventType::Warning, "MissedSchedule", note));
            status.last_schedule_time = Some(Time(tick));
        }
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::batch::v1::JobTemplateSpec;

    use super::*;
    use crate::api::{BrainstormScheduleSpec, BrainstormStep, RefineStep};

    const T10: &str = "2026-01-01T10:00:00Z";
    const T11: &str = "2026-01-01T11:00:00Z";
    const T12: &str = "2026-01-01T12:00:00Z";

    fn ts(s: &str) -> Timestamp {
        s.parse().expect("timestamp")
    }

    /// Hourly, in UTC, created at 09:30.
    fn spec() -> BrainstormScheduleSpec {
        BrainstormScheduleSpec {
            project: "shop".into(),
            schedule: "0 * * * *".into(),
            time_zone: None,
            suspend: None,
            starting_deadline_seconds: None,
            refine: RefineStep {
                job_template: JobTemplateSpec::default(),
            },
            brainstorm: BrainstormStep {
                job_template: JobTemplateSpec::default(),
                max_open_proposals: None,
            },
            lookback_days: None,
            handoff_ttl: None,
        }
    }

    fn schedule(
        spec: BrainstormScheduleSpec,
        status: BrainstormScheduleStatus,
    ) -> BrainstormSchedule {
        let mut s = BrainstormSchedule::new("daily", spec);
        s.metadata.namespace = Some("agents".into());
        s.metadata.generation = Some(1);
        s.metadata.creation_timestamp = Some(Time(ts("2026-01-01T09:30:00Z")));
        s.status = Some(status);
        s
    }

    fn refine_job(tick: &str) -> String {
        job_name("daily", Role::Refine, ts(tick))
    }

    fn brainstorm_job(tick: &str) -> String {
        job_name("daily", Role::Brainstorm, ts(tick))
    }

    /// A cycle of `tick`: the refine result, the brainstorm step (`None`:
    /// not started; `Some(result)`: started), the cycle's result.
    fn cycle(
        tick: &str,
        refine: Option<JobResult>,
        brainstorm: Option<Option<JobResult>>,
        result: Option<JobResult>,
    ) -> Cycle {
        Cycle {
            tick: Time(ts(tick)),
            refine: StepRun {
                job: refine_job(tick),
                result: refine,
            },
            brainstorm: brainstorm.map(|result| StepRun {
                job: brainstorm_job(tick),
                result,
            }),
            result,
        }
    }

    fn status(
        phase: SchedulePhase,
        active_job: Option<String>,
        last_tick: Option<&str>,
        current: Option<Cycle>,
        last: Option<Cycle>,
    ) -> BrainstormScheduleStatus {
        BrainstormScheduleStatus {
            phase: Some(phase),
            active_job,
            last_schedule_time: last_tick.map(|t| Time(ts(t))),
            current_cycle: current,
            last_cycle: last,
            ..Default::default()
        }
    }

    fn idle(last_tick: Option<&str>, last: Option<Cycle>) -> BrainstormScheduleStatus {
        status(SchedulePhase::Idle, None, last_tick, None, last)
    }

    /// Refining the cycle of `tick`, started at `tick`.
    fn refining(tick: &str) -> BrainstormScheduleStatus {
        status(
            SchedulePhase::Refining,
            Some(refine_job(tick)),
            Some(tick),
            Some(cycle(tick, None, None, None)),
            None,
        )
    }

    /// Brainstorming the cycle of `tick` after a refine that ended with `refine`.
    fn brainstorming(tick: &str, refine: JobResult) -> BrainstormScheduleStatus {
        status(
            SchedulePhase::Brainstorming,
            Some(brainstorm_job(tick)),
            Some(tick),
            Some(cycle(tick, Some(refine), Some(None), None)),
            None,
        )
    }

    fn create(role: Role, tick: &str) -> Effect {
        Effect::CreateJob {
            role,
            tick: ts(tick),
            name: job_name("daily", role, ts(tick)),
        }
    }

    fn normal(reason: &'static str, note: String) -> Effect {
        event(EventType::Normal, reason, note)
    }

    fn warning(reason: &'static str, note: String) -> Effect {
        event(EventType::Warning, reason, note)
    }

    fn refine_started(tick: &str) -> Effect {
        normal(
            "RefineStarted",
            format!("tick {tick}: refine Job {} started", refine_job(tick)),
        )
    }

    fn brainstorm_started(tick: &str, refine: &str) -> Effect {
        normal(
            "BrainstormStarted",
            format!(
                "refine Job {} {refine}; brainstorm Job {} started",
                refine_job(tick),
                brainstorm_job(tick)
            ),
        )
    }

    fn cycle_finished(tick: &str, result: JobResult, now: &str) -> Effect {
        normal(
            "CycleFinished",
            format!("cycle of tick {tick} finished: Some({result:?}) (at {now})"),
        )
    }

    /// The refine Job of `tick` starts.
    fn refine_starts(tick: &str) -> Vec<Effect> {
        vec![create(Role::Refine, tick), refine_started(tick)]
    }

    /// The brainstorm Job of `tick` starts after a refine that `refine`
    /// (the words of its Event).
    fn brainstorm_starts(tick: &str, refine: &str) -> Vec<Effect> {
        vec![
            create(Role::Brainstorm, tick),
            brainstorm_started(tick, refine),
        ]
    }

    /// Tick `tick` is skipped while the cycle of `running` runs.
    fn tick_skipped(tick: &str, running: &str) -> Effect {
        warning(
            "TickSkipped",
            format!("tick {tick} skipped: the cycle of tick {running} is still running"),
        )
    }

    /// `status` once tick `tick` is consumed (skipped: the cycle stays).
    fn ticked(tick: &str, status: BrainstormScheduleStatus) -> BrainstormScheduleStatus {
        BrainstormScheduleStatus {
            last_schedule_time: Some(Time(ts(tick))),
            ..status
        }
    }

    /// The cycle of `tick` that ran both steps, with these results.
    fn done(tick: &str, refine: JobResult, brainstorm: JobResult, result: JobResult) -> Cycle {
        cycle(tick, Some(refine), Some(Some(brainstorm)), Some(result))
    }

    const OK: JobResult = JobResult::Succeeded;
    const FAILED: JobResult = JobResult::Failed;
    const GATE_OPEN: &str = "failed (the gate opens anyway)";
    const IDLE_WAKE: Wake = Wake::After(MAX_REQUEUE);

    struct Case {
        name: &'static str,
        spec: BrainstormScheduleSpec,
        given: BrainstormScheduleStatus,
        step: JobState,
        now: &'static str,
        /// The expected status, without `observedGeneration`, the next tick
        /// and the conditions (checked from the fields below).
        want: BrainstormScheduleStatus,
        next: Option<&'static str>,
        ready: (&'static str, &'static str),
        effects: Vec<Effect>,
        wake: Wake,
    }

    impl Case {
        /// A row: `name` plans the schedule of the default spec with status
        /// `given` at `now`, its step Job `step`; valid, with no effect
        /// unless said below.
        fn row(
            name: &'static str,
            given: BrainstormScheduleStatus,
            step: JobState,
            now: &'static str,
        ) -> Self {
            Case {
                name,
                spec: spec(),
                given,
                step,
                now,
                want: BrainstormScheduleStatus::default(),
                next: None,
                ready: ("True", "Scheduled"),
                effects: vec![],
                wake: Wake::OnChange,
            }
        }

        fn spec(self, spec: BrainstormScheduleSpec) -> Self {
            Case { spec, ..self }
        }

        /// What the row plans: the status, the next tick and the wake.
        fn plans(
            self,
            want: BrainstormScheduleStatus,
            next: Option<&'static str>,
            wake: Wake,
        ) -> Self {
            Case {
                want,
                next,
                wake,
                ..self
            }
        }

        fn effects(self, effects: Vec<Effect>) -> Self {
            Case { effects, ..self }
        }

        /// The cycle of T10 ends at the row's `now` with these results:
        /// idle until T11, one `CycleFinished` Event.
        fn finishes(self, refine: JobResult, brainstorm: JobResult, result: JobResult) -> Self {
            let now = self.now;
            self.plans(
                idle(Some(T10), Some(done(T10, refine, brainstorm, result))),
                Some(T11),
                IDLE_WAKE,
            )
            .effects(vec![cycle_finished(T10, result, now)])
        }

        /// The spec is invalid: Ready=False.
        fn invalid(self) -> Self {
            Case {
                ready: ("False", "InvalidSchedule"),
                ..self
            }
        }
    }

    #[test]
    fn the_transition_table() {
        use JobState::*;
        let cases =
            vec![
            Case::row(
                "tick: none due yet (09:00 is older than the schedule)",
                BrainstormScheduleStatus::default(),
                Absent,
                "2026-01-01T09:59:30Z",
            )
            .plans(
                idle(None, None),
                Some(T10),
                Wake::After(Duration::from_secs(30)),
            ),
            Case::row(
                "tick: due, the refine Job starts",
                BrainstormScheduleStatus::default(),
                Absent,
                "2026-01-01T10:02:00Z",
            )
            .plans(refining(T10), Some(T11), Wake::StepRunning)
            .effects(refine_starts(T10)),
            Case::row(
                "tick: already acted on, nothing",
                idle(
                    Some(T10),
                    Some(done(T10, OK, OK, OK)),
                ),
                Absent,
                "2026-01-01T10:50:00Z",
            )
            .plans(
                idle(
                    Some(T10),
                    Some(done(T10, OK, OK, OK)),
                ),
                Some(T11),
                IDLE_WAKE,
            ),
            Case::row(
                "tick: missed, 20 minutes late with the default deadline of 300s",
                BrainstormScheduleStatus::default(),
                Absent,
                "2026-01-01T10:20:00Z",
            )
            .plans(idle(Some(T10), None), Some(T11), IDLE_WAKE)
            .effects(vec![warning(
                "MissedSchedule",
                format!(
                    "tick {T10} missed: more than 300s late (startingDeadlineSeconds); not replayed"
                ),
            )]),
            Case::row(
                "tick: 20 minutes late within startingDeadlineSeconds 1800, runs",
                BrainstormScheduleStatus::default(),
                Absent,
                "2026-01-01T10:20:00Z",
            )
            .spec(BrainstormScheduleSpec {
                starting_deadline_seconds: Some(1800),
                ..spec()
            })
            .plans(refining(T10), Some(T11), Wake::StepRunning)
            .effects(refine_starts(T10)),
            Case::row(
                "tick: down for hours, only the latest tick counts (no burst)",
                idle(Some(T10), None),
                Absent,
                "2026-01-01T12:01:00Z",
            )
            .plans(
                refining(T12),
                Some("2026-01-01T13:00:00Z"),
                Wake::StepRunning,
            )
            .effects(refine_starts(T12)),
            Case::row(
                "tick: skipped while refine runs",
                refining(T10),
                Running,
                "2026-01-01T11:02:00Z",
            )
            .plans(ticked(T11, refining(T10)), Some(T12), Wake::StepRunning)
            .effects(vec![tick_skipped(T11, T10)]),
            Case::row(
                "tick: skipped while brainstorm runs",
                brainstorming(T10, OK),
                Running,
                "2026-01-01T11:02:00Z",
            )
            .plans(ticked(T11, brainstorming(T10, OK)), Some(T12), Wake::StepRunning)
            .effects(vec![tick_skipped(T11, T10)]),
            Case::row(
                "tick: the time zone places it (11:00 in Berlin is 10:00 UTC in winter)",
                BrainstormScheduleStatus::default(),
                Absent,
                "2026-01-01T10:02:00Z",
            )
            .spec(BrainstormScheduleSpec {
                schedule: "0 11 * * *".into(),
                time_zone: Some("Europe/Berlin".into()),
                ..spec()
            })
            .plans(
                refining(T10),
                Some("2026-01-02T10:00:00Z"),
                Wake::StepRunning,
            )
            .effects(refine_starts(T10)),
            Case::row(
                "refine: running, nothing moves",
                refining(T10),
                Running,
                "2026-01-01T10:30:00Z",
            )
            .plans(refining(T10), Some(T11), Wake::StepRunning),
            Case::row(
                "refine: Complete releases the brainstorm Job",
                refining(T10),
                Complete,
                "2026-01-01T10:30:00Z",
            )
            .plans(brainstorming(T10, OK), Some(T11), Wake::StepRunning)
            .effects(brainstorm_starts(T10, "succeeded")),
            Case::row(
                "refine: Failed still releases the brainstorm Job",
                refining(T10),
                Failed,
                "2026-01-01T10:30:00Z",
            )
            .plans(brainstorming(T10, FAILED), Some(T11), Wake::StepRunning)
            .effects(brainstorm_starts(T10, GATE_OPEN)),
            Case::row(
                "refine: a deleted Job counts as failed (never blocks)",
                refining(T10),
                Absent,
                "2026-01-01T10:30:00Z",
            )
            .plans(brainstorming(T10, FAILED), Some(T11), Wake::StepRunning)
            .effects(brainstorm_starts(T10, GATE_OPEN)),
            Case::row(
                "refine: ends as the next tick is due, brainstorm starts and the tick is skipped",
                refining(T10),
                Complete,
                "2026-01-01T11:01:00Z",
            )
            .plans(
                ticked(T11, brainstorming(T10, OK)),
                Some(T12),
                Wake::StepRunning,
            )
            .effects([brainstorm_starts(T10, "succeeded"), vec![tick_skipped(T11, T10)]].concat()),
            Case::row(
                "brainstorm: running, nothing moves",
                brainstorming(T10, OK),
                Running,
                "2026-01-01T10:40:00Z",
            )
            .plans(brainstorming(T10, OK), Some(T11), Wake::StepRunning),
            Case::row(
                "brainstorm: Complete after a Complete refine, the cycle succeeded",
                brainstorming(T10, OK),
                Complete,
                "2026-01-01T10:45:00Z",
            )
            .finishes(OK, OK, OK),
            Case::row(
                "brainstorm: Failed, the cycle failed",
                brainstorming(T10, OK),
                Failed,
                "2026-01-01T10:45:00Z",
            )
            .finishes(OK, FAILED, FAILED),
            Case::row(
                "brainstorm: Complete after a failed refine, the cycle failed",
                brainstorming(T10, FAILED),
                Complete,
                "2026-01-01T10:45:00Z",
            )
            .finishes(FAILED, OK, FAILED),
            Case::row(
                "brainstorm: a deleted Job counts as failed",
                brainstorming(T10, OK),
                Absent,
                "2026-01-01T10:45:00Z",
            )
            .finishes(OK, FAILED, FAILED),
            Case::row(
                "brainstorm: ends as the next tick is due, the next cycle starts at once",
                brainstorming(T10, OK),
                Complete,
                "2026-01-01T11:01:00Z",
            )
            .plans(
                BrainstormScheduleStatus {
                    last_cycle: Some(done(T10, OK, OK, OK)),
                    ..refining(T11)
                },
                Some(T12),
                Wake::StepRunning,
            )
            .effects(
                [
                    vec![cycle_finished(T10, OK, "2026-01-01T11:01:00Z")],
                    refine_starts(T11),
                ]
                .concat(),
            ),
            Case::row(
                "suspend: a due tick starts nothing and is not consumed",
                idle(None, None),
                Absent,
                "2026-01-01T10:02:00Z",
            )
            .spec(BrainstormScheduleSpec {
                suspend: Some(true),
                ..spec()
            })
            .plans(idle(None, None), Some(T11), IDLE_WAKE),
            Case::row(
                "suspend: the running cycle still finishes",
                refining(T10),
                Complete,
                "2026-01-01T10:30:00Z",
            )
            .spec(BrainstormScheduleSpec {
                suspend: Some(true),
                ..spec()
            })
            .plans(brainstorming(T10, OK), Some(T11), Wake::StepRunning)
            .effects(brainstorm_starts(T10, "succeeded")),
            Case::row(
                "unknown time zone: Ready=False, nothing else",
                idle(None, None),
                Absent,
                "2026-01-01T10:02:00Z",
            )
            .spec(BrainstormScheduleSpec {
                time_zone: Some("Mars/Olympus_Mons".into()),
                ..spec()
            })
            .plans(idle(None, None), None, Wake::OnChange)
            .invalid(),
            Case::row(
                "invalid cron: Ready=False, nothing else",
                BrainstormScheduleStatus {
                    next_schedule_time: Some(Time(ts(T11))),
                    ..idle(Some(T10), None)
                },
                Absent,
                "2026-01-01T10:02:00Z",
            )
            .spec(BrainstormScheduleSpec {
                schedule: "61 * * * *".into(),
                ..spec()
            })
            .plans(idle(Some(T10), None), None, Wake::OnChange)
            .invalid(),
            Case::row(
                "adopted Job: replayed after a lost status write (or by a second \
                       replica), the tick plans the same Job name, which apply adopts",
                BrainstormScheduleStatus::default(),
                Absent,
                "2026-01-01T10:04:59Z",
            )
            .plans(refining(T10), Some(T11), Wake::StepRunning)
            .effects(vec![
                Effect::CreateJob {
                    role: Role::Refine,
                    tick: ts(T10),
                    name: "daily-refine-29454360".into(),
                },
                refine_started(T10),
            ]),
            Case::row(
                "adopted Job: a cycle whose refine Job another instance created is \
                       followed like one's own",
                refining(T10),
                Failed,
                "2026-01-01T10:06:00Z",
            )
            .plans(brainstorming(T10, FAILED), Some(T11), Wake::StepRunning)
            .effects(brainstorm_starts(T10, GATE_OPEN)),
        ];
        for case in cases {
            let name = case.name;
            let got = plan(
                &schedule(case.spec, case.given),
                Observed { step: case.step },
                ts(case.now),
            );
            let mut status = got.status.clone();
            let conditions = std::mem::take(&mut status.conditions);
            let want = BrainstormScheduleStatus {
                observed_generation: Some(1),
                next_schedule_time: case.next.map(|t| Time(ts(t))),
                ..case.want
            };
            assert_eq!(status, want, "{name}: status");
            let ready: Vec<_> = conditions
                .iter()
                .map(|c| (c.type_.as_str(), c.status.as_str(), c.reason.as_str()))
                .collect();
            assert_eq!(
                ready,
                [(READY, case.ready.0, case.ready.1)],
                "{name}: conditions"
            );
            assert_eq!(got.effects, case.effects, "{name}: effects");
            assert_eq!(got.wake, case.wake, "{name}: wake");
        }
    }

    #[test]
    fn ready_moves_its_transition_time_only_when_it_flips() {
        let earlier = "2026-01-01T09:31:00Z";
        let now = "2026-01-01T09:40:00Z";
        let with_ready = |ok: bool, reason: &str| BrainstormScheduleStatus {
            observed_generation: Some(1),
            conditions: vec![ready(
                &BrainstormScheduleStatus::default(),
                ok,
                reason,
                "before".into(),
                ts(earlier),
            )],
            ..idle(None, None)
        };
        let berlin = BrainstormScheduleSpec {
            time_zone: Some("Europe/Berlin".into()),
            ..spec()
        };
        let mars = BrainstormScheduleSpec {
            time_zone: Some("Mars/Olympus_Mons".into()),
            ..spec()
        };
        let cases = [
            // (spec, given, Ready status, reason, lastTransitionTime, message has)
            (
                spec(),
                BrainstormScheduleStatus::default(),
                "True",
                "Scheduled",
                now,
                "valid",
            ),
            (
                spec(),
                with_ready(true, "Scheduled"),
                "True",
                "Scheduled",
                earlier,
                "valid",
            ),
            (
                berlin,
                with_ready(false, "InvalidSchedule"),
                "True",
                "Scheduled",
                now,
                "valid",
            ),
            (
                mars.clone(),
                with_ready(true, "Scheduled"),
                "False",
                "InvalidSchedule",
                now,
                "Mars/Olympus_Mons",
            ),
            (
                mars,
                with_ready(false, "InvalidSchedule"),
                "False",
                "InvalidSchedule",
                earlier,
                "spec.timeZone",
            ),
        ];
        for (spec, given, status, reason, at, words) in cases {
            let label = format!("{:?} from {:?}", spec.time_zone, given.conditions);
            let got = plan(
                &schedule(spec, given),
                Observed {
                    step: JobState::Absent,
                },
                ts(now),
            );
            let [condition] = got.status.conditions.as_slice() else {
                panic!(
                    "{label}: one condition expected, got {:?}",
                    got.status.conditions
                );
            };
            assert_eq!(
                (condition.status.as_str(), condition.reason.as_str()),
                (status, reason),
                "{label}"
            );
            assert_eq!(condition.last_transition_time, Time(ts(at)), "{label}");
            assert_eq!(condition.observed_generation, Some(1), "{label}");
            assert!(
                condition.message.contains(words),
                "{label}: {}",
                condition.message
            );
        }
    }

    #[test]
    fn job_states_from_conditions() {
        use k8s_openapi::api::batch::v1::{JobCondition, JobStatus};
        let with = |kind: &str| Job {
            status: Some(JobStatus {
                conditions: Some(vec![JobCondition {
                    type_: kind.into(),
                    status: "True".into(),
                    ..Default::default()
                }]),
                ..Default::default()
            }),
            ..Default::default()
        };
        let cases = [
            (None, JobState::Absent),
            (Some(Job::default()), JobState::Running),
            (Some(with("Complete")), JobState::Complete),
            (Some(with("SuccessCriteriaMet")), JobState::Complete),
            (Some(with("Failed")), JobState::Failed),
            (Some(with("FailureTarget")), JobState::Failed),
        ];
        for (job, state) in cases {
            assert_eq!(JobState::of(job.as_ref()), state, "{job:?}");
        }
    }

    #[test]
    fn the_step_job_is_the_one_gather_reads() {
        assert_eq!(step_job(&idle(Some(T10), None)), None);
        assert_eq!(step_job(&refining(T10)), Some(refine_job(T10).as_str()));
        assert_eq!(
            step_job(&brainstorming(T10, OK)),
            Some(brainstorm_job(T10).as_str())
        );
    }
}
