//! The reconcile loop of `BrainstormSchedule`s: the barrier.
//!
//! One reconcile, given the schedule, its Jobs and the clock:
//! 1. advances the running cycle: when the refine Job is terminal —
//!    Complete **or Failed**, a failed refine still releases the gate — the
//!    brainstorm Job is created (its goal inlines the project's open
//!    handoffs); when the brainstorm Job is terminal the cycle ends (`Idle`);
//! 2. acts on the latest tick ([`super::tick::decide`]): starts a cycle with
//!    the refine Job, or records a skipped or missed tick with an Event;
//! 3. writes the status and requeues at the next tick.
//!
//! Job names are derived from the schedule and the tick, so a restart or a
//! second replica adopts the existing Job (AlreadyExists) instead of making
//! another. Jobs owned by schedules are watched; a periodic requeue is the
//! safety net. Time comes from the controller's [`Clock`], so tests never wait for a minute
//! boundary.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::runtime::watcher;
use kube::{Client, Resource, ResourceExt};

use super::jobs::{Role, build_job, job_name, job_result};
use super::tick::{Decision, Situation, Timing, decide};
use crate::api::preview_line;
use crate::api::{
    BrainstormSchedule, BrainstormScheduleStatus, Cycle, DEFAULT_LOOKBACK_DAYS,
    DEFAULT_MAX_OPEN_PROPOSALS, DEFAULT_STARTING_DEADLINE_SECONDS, JobResult, SchedulePhase,
    StepRun,
};
use crate::goals::{OpenHandoff, brainstorm_goal, refine_goal};
use crate::names::{CONTROLLER_FIELD_MANAGER, SCHEDULE_LABEL};
use crate::store::{HandoffStore, ListQuery};
use crate::time::Clock;

/// Longest wait between reconciles of a schedule (safety net).
const MAX_REQUEUE: Duration = Duration::from_secs(300);
/// Requeue while a step runs, in case a Job event is missed.
const RUNNING_REQUEUE: Duration = Duration::from_secs(30);

/// What the loop needs.
pub struct Context {
    client: Client,
    clock: Arc<dyn Clock>,
    recorder: Recorder,
}

impl Context {
    /// A context acting with `client`, reading `clock`, reporting as `instance`.
    pub fn new(client: Client, clock: Arc<dyn Clock>, instance: &str) -> Self {
        let reporter = Reporter {
            controller: CONTROLLER_FIELD_MANAGER.into(),
            instance: Some(instance.into()),
        };
        Self {
            recorder: Recorder::new(client.clone(), reporter),
            client,
            clock,
        }
    }
}

/// Why a reconcile failed (retried with backoff).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An apiserver call failed.
    #[error("{action}: {source}")]
    Kube {
        /// What was attempted.
        action: String,
        /// The failure.
        #[source]
        source: kube::Error,
    },
}

fn kube_err(action: impl Into<String>) -> impl FnOnce(kube::Error) -> Error {
    let action = action.into();
    move |source| Error::Kube { action, source }
}

/// Runs the loop until `shutdown` resolves: schedules and the Jobs they own
/// are watched (in `namespace`, or all namespaces), at most `concurrency`
/// schedules reconcile at once.
pub async fn run(
    ctx: Arc<Context>,
    namespace: Option<&str>,
    concurrency: u16,
    shutdown: tokio_util::sync::CancellationToken,
) {
    let (schedules, jobs): (Api<BrainstormSchedule>, Api<Job>) = match namespace {
        Some(ns) => (
            Api::namespaced(ctx.client.clone(), ns),
            Api::namespaced(ctx.client.clone(), ns),
        ),
        None => (Api::all(ctx.client.clone()), Api::all(ctx.client.clone())),
    };
    let config = kube::runtime::controller::Config::default().concurrency(concurrency);
    Controller::new(schedules, watcher::Config::default())
        .owns(jobs, watcher::Config::default().labels(SCHEDULE_LABEL))
        .with_config(config)
        .graceful_shutdown_on(shutdown.cancelled_owned())
        .run(reconcile, error_policy, ctx)
        .for_each(|result| async move {
            if let Err(err) = result {
                tracing::debug!(error = %err, "schedule reconcile");
            }
        })
        .await;
}

fn error_policy(schedule: Arc<BrainstormSchedule>, err: &Error, _ctx: Arc<Context>) -> Action {
    tracing::warn!(schedule = %schedule.name_any(), error = %err, "schedule reconcile failed; retrying");
    Action::requeue(Duration::from_secs(5))
}

/// Reconciles one schedule (see the module docs). Public so tests can
/// drive it step by step with a manual clock.
pub async fn reconcile(
    schedule: Arc<BrainstormSchedule>,
    ctx: Arc<Context>,
) -> Result<Action, Error> {
    let namespace = schedule.namespace().unwrap_or_default();
    let api: Api<BrainstormSchedule> = Api::namespaced(ctx.client.clone(), &namespace);
    let now = ctx.clock.now();
    let before = schedule.status.clone().unwrap_or_default();
    let mut status = before.clone();
    status.observed_generation = schedule.metadata.generation;

    let timing = match Timing::parse(&schedule.spec.schedule, schedule.spec.time_zone.as_deref()) {
        Ok(timing) => timing,
        Err(message) => {
            set_ready(&mut status, false, "InvalidSchedule", &message, now);
            status.next_schedule_time = None;
            write_status(&api, &schedule, &before, &status).await?;
            return Ok(Action::await_change());
        }
    };

    advance_cycle(&schedule, &ctx, &mut status, now).await?;
    act_on_tick(&schedule, &ctx, &timing, &mut status, now).await?;

    status.next_schedule_time = timing.next_after(now).map(Time);
    status.active_job = active_job(&status);
    set_ready(
        &mut status,
        true,
        "Scheduled",
        "the schedule and time zone are valid",
        now,
    );
    write_status(&api, &schedule, &before, &status).await?;
    Ok(Action::requeue(requeue_after(&status, now)))
}

/// How long until the next reconcile: the next tick, or the running-step
/// safety net, bounded by [`MAX_REQUEUE`].
fn requeue_after(status: &BrainstormScheduleStatus, now: Timestamp) -> Duration {
    if status.current_cycle.is_some() {
        return RUNNING_REQUEUE;
    }
    status
        .next_schedule_time
        .as_ref()
        .and_then(|next| Duration::try_from(next.0.duration_since(now)).ok())
        .map(|d| d.max(Duration::from_secs(1)))
        .unwrap_or(MAX_REQUEUE)
        .min(MAX_REQUEUE)
}

fn active_job(status: &BrainstormScheduleStatus) -> Option<String> {
    let cycle = status.current_cycle.as_ref()?;
    match status.phase? {
        SchedulePhase::Refining => Some(cycle.refine.job.clone()),
        SchedulePhase::Brainstorming => cycle.brainstorm.as_ref().map(|b| b.job.clone()),
        SchedulePhase::Idle => None,
    }
}

/// Moves the running cycle on when its current step's Job is terminal.
async fn advance_cycle(
    schedule: &BrainstormSchedule,
    ctx: &Context,
    status: &mut BrainstormScheduleStatus,
    now: Timestamp,
) -> Result<(), Error> {
    let Some(mut cycle) = status.current_cycle.clone() else {
        status.phase = Some(SchedulePhase::Idle);
        return Ok(());
    };
    let jobs: Api<Job> = Api::namespaced(
        ctx.client.clone(),
        &schedule.namespace().unwrap_or_default(),
    );
    match &cycle.brainstorm {
        None => {
            let Some(result) = step_result(&jobs, &cycle.refine.job).await? else {
                status.phase = Some(SchedulePhase::Refining);
                return Ok(());
            };
            cycle.refine.result = Some(result);
            let goal = brainstorm_goal_for(schedule, ctx).await?;
            let job = create_job(schedule, ctx, Role::Brainstorm, cycle.tick.0, &goal).await?;
            let note = format!(
                "refine Job {} {}; brainstorm Job {job} started",
                cycle.refine.job,
                if result == JobResult::Succeeded {
                    "succeeded"
                } else {
                    "failed (the gate opens anyway)"
                }
            );
            publish(ctx, schedule, EventType::Normal, "BrainstormStarted", &note).await;
            cycle.brainstorm = Some(StepRun { job, result: None });
            status.phase = Some(SchedulePhase::Brainstorming);
            status.current_cycle = Some(cycle);
        }
        Some(brainstorm) => {
            let Some(result) = step_result(&jobs, &brainstorm.job).await? else {
                status.phase = Some(SchedulePhase::Brainstorming);
                return Ok(());
            };
            let both_ok =
                cycle.refine.result == Some(JobResult::Succeeded) && result == JobResult::Succeeded;
            cycle.brainstorm = Some(StepRun {
                job: brainstorm.job.clone(),
                result: Some(result),
            });
            cycle.result = Some(if both_ok {
                JobResult::Succeeded
            } else {
                JobResult::Failed
            });
            let note = format!(
                "cycle of tick {} finished: {:?} (at {now})",
                cycle.tick.0, cycle.result
            );
            publish(ctx, schedule, EventType::Normal, "CycleFinished", &note).await;
            status.last_cycle = Some(cycle);
            status.current_cycle = None;
            status.phase = Some(SchedulePhase::Idle);
        }
    }
    Ok(())
}

/// A step's result; a Job that no longer exists counts as failed (so a
/// deleted Job never blocks the schedule forever).
async fn step_result(jobs: &Api<Job>, name: &str) -> Result<Option<JobResult>, Error> {
    let job = jobs
        .get_opt(name)
        .await
        .map_err(kube_err(format!("get Job {name}")))?;
    Ok(match job {
        Some(job) => job_result(&job),
        None => Some(JobResult::Failed),
    })
}

/// Starts, skips or misses the latest tick.
async fn act_on_tick(
    schedule: &BrainstormSchedule,
    ctx: &Context,
    timing: &Timing,
    status: &mut BrainstormScheduleStatus,
    now: Timestamp,
) -> Result<(), Error> {
    let created = schedule
        .metadata
        .creation_timestamp
        .as_ref()
        .map(|t| t.0)
        .unwrap_or(now);
    let deadline_secs = schedule
        .spec
        .starting_deadline_seconds
        .unwrap_or(DEFAULT_STARTING_DEADLINE_SECONDS);
    let situation = Situation {
        since: status
            .last_schedule_time
            .as_ref()
            .map(|t| t.0)
            .unwrap_or(created),
        now,
        deadline: SignedDuration::from_secs(deadline_secs),
        busy: status.current_cycle.is_some(),
        suspended: schedule.spec.suspend.unwrap_or(false),
    };
    match decide(timing, situation) {
        Decision::Nothing => {}
        Decision::Start(tick) => {
            let lookback = schedule.spec.lookback_days.unwrap_or(DEFAULT_LOOKBACK_DAYS);
            let job = create_job(
                schedule,
                ctx,
                Role::Refine,
                tick,
                &refine_goal(&schedule.spec.project, lookback),
            )
            .await?;
            publish(
                ctx,
                schedule,
                EventType::Normal,
                "RefineStarted",
                &format!("tick {tick}: refine Job {job} started"),
            )
            .await;
            status.current_cycle = Some(Cycle {
                tick: Time(tick),
                refine: StepRun { job, result: None },
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
            publish(ctx, schedule, EventType::Warning, "TickSkipped", &note).await;
            status.last_schedule_time = Some(Time(tick));
        }
        Decision::Missed(tick) => {
            let note = format!(
                "tick {tick} missed: more than {deadline_secs}s late (startingDeadlineSeconds); not replayed"
            );
            publish(ctx, schedule, EventType::Warning, "MissedSchedule", &note).await;
            status.last_schedule_time = Some(Time(tick));
        }
    }
    Ok(())
}

/// The brainstorm goal with the project's open handoffs inlined.
async fn brainstorm_goal_for(
    schedule: &BrainstormSchedule,
    ctx: &Context,
) -> Result<String, Error> {
    let store = HandoffStore::new(
        ctx.client.clone(),
        &schedule.namespace().unwrap_or_default(),
    );
    let query = ListQuery {
        project: schedule.spec.project.clone(),
        repo: None,
    };
    let open: Vec<OpenHandoff> = store
        .list_sorted(&query)
        .await
        .map_err(kube_err("list the project's handoffs"))?
        .iter()
        .map(|h| OpenHandoff {
            key: h.spec.handoff_key.clone(),
            preview: preview_line(&h.spec.body),
        })
        .collect();
    let max = schedule
        .spec
        .brainstorm
        .max_open_proposals
        .unwrap_or(DEFAULT_MAX_OPEN_PROPOSALS);
    Ok(brainstorm_goal(&schedule.spec.project, max, &open))
}

/// Creates a step's Job; an existing Job of the same name (a restart, a
/// second replica) is adopted.
async fn create_job(
    schedule: &BrainstormSchedule,
    ctx: &Context,
    role: Role,
    tick: Timestamp,
    goal: &str,
) -> Result<String, Error> {
    let jobs: Api<Job> = Api::namespaced(
        ctx.client.clone(),
        &schedule.namespace().unwrap_or_default(),
    );
    let name = job_name(&schedule.name_any(), role, tick);
    let job = build_job(schedule, role, tick, goal);
    match jobs
        .create(
            &PostParams {
                field_manager: Some(CONTROLLER_FIELD_MANAGER.into()),
                ..Default::default()
            },
            &job,
        )
        .await
    {
        Ok(_) => Ok(name),
        Err(kube::Error::Api(status)) if status.code == 409 => Ok(name),
        Err(source) => Err(Error::Kube {
            action: format!("create {} Job {name}", role.as_str()),
            source,
        }),
    }
}

async fn publish(
    ctx: &Context,
    schedule: &BrainstormSchedule,
    type_: EventType,
    reason: &str,
    note: &str,
) {
    let event = Event {
        type_,
        reason: reason.into(),
        note: Some(note.into()),
        action: reason.into(),
        secondary: None,
    };
    if let Err(err) = ctx
        .recorder
        .publish(&event, &schedule.object_ref(&()))
        .await
    {
        tracing::warn!(schedule = %schedule.name_any(), reason, error = %err, "cannot record an Event");
    }
}

fn set_ready(
    status: &mut BrainstormScheduleStatus,
    ready: bool,
    reason: &str,
    message: &str,
    now: Timestamp,
) {
    let value = if ready { "True" } else { "False" };
    let unchanged = status
        .conditions
        .iter()
        .any(|c| c.type_ == "Ready" && c.status == value && c.message == message);
    if unchanged {
        return;
    }
    status.conditions.retain(|c| c.type_ != "Ready");
    status.conditions.push(Condition {
        type_: "Ready".into(),
        status: value.into(),
        reason: reason.into(),
        message: message.into(),
        last_transition_time: Time(now),
        observed_generation: status.observed_generation,
    });
}

async fn write_status(
    api: &Api<BrainstormSchedule>,
    schedule: &BrainstormSchedule,
    before: &BrainstormScheduleStatus,
    status: &BrainstormScheduleStatus,
) -> Result<(), Error> {
    if before == status {
        return Ok(());
    }
    let patch = serde_json::json!({"status": status});
    api.patch_status(
        &schedule.name_any(),
        &PatchParams::default(),
        &Patch::Merge(&patch),
    )
    .await
    .map_err(kube_err(format!(
        "write the status of {}",
        schedule.name_any()
    )))?;
    Ok(())
}
