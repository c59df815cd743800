//! The reconcile loop of `BrainstormSchedule`s: gather → [`plan`](handoff_core::schedule::plan) → apply.
//!
//! Every decision of the barrier (see [`handoff_core::schedule::plan`]) is a pure function,
//! tested as a table; this module only does the I/O around it, so the
//! apiserver tests here check wiring, not transitions. One reconcile:
//! 1. gather: reads the Job of the running step, if a cycle runs;
//! 2. plan: the new status, the effects, when to look again;
//! 3. apply: creates the planned Jobs (the brainstorm goal inlines the
//!    project's open handoffs, listed only when a brainstorm Job is to be
//!    created), writes the status, then records the Events.
//!
//! Job names are derived from the schedule and the tick, so a restart, a
//! second replica or a lost status write adopts the existing Job
//! (AlreadyExists) instead of making another. A failure before the status
//! is written is retried, and the retry plans the same Jobs again. The
//! status is replaced as a whole, guarded by the resourceVersion it was
//! planned from (a plan from an outdated schedule is not written). Jobs
//! owned by schedules are watched; while a step runs, a requeue (30 s by
//! default, [`ScheduleLoop::with_running_requeue`]) is the safety net. Time comes
//! from the controller's [`Clock`], so tests never wait for a minute
//! boundary. Each finished cycle is counted by result
//! (`handoff_controller_schedule_cycles_total{result}`) once its status is
//! written, so a retried reconcile does not count it twice.

use std::sync::Arc;
use std::time::Duration;

use std::future::Future;

use handoff_core::schedule::plan::EventType as PlannedType;
use jiff::Timestamp;
use k8s_openapi::api::batch::v1::Job;
use kube::api::{Api, PostParams};
use kube::core::DeserializeGuard;
use kube::runtime::controller::{Action, Controller};
use kube::runtime::events::{Event, EventType, Reporter};
use kube::runtime::watcher;
use kube::{Client, Resource, ResourceExt};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;

use handoff_core::api::preview_line;
use handoff_core::api::{
    BrainstormSchedule, BrainstormScheduleStatus, DEFAULT_LOOKBACK_DAYS,
    DEFAULT_MAX_OPEN_PROPOSALS, JobResult,
};
use handoff_core::goals::{MAX_INLINED_HANDOFFS, OpenHandoff, brainstorm_goal, refine_goal};
use handoff_core::liveness::LoopProgress;
use handoff_core::loops::{Categorized, Category};
use handoff_core::names::{CONTROLLER_FIELD_MANAGER, SCHEDULE_LABEL};
use handoff_core::schedule::jobs::{Role, build_job};
use handoff_core::schedule::plan::{Effect, JobState, Observed, Plan, Wake, plan, step_job};
use handoff_core::time::Clock;
use handoff_kube::cluster::scoped;
use handoff_kube::loops::KubeCategory;
use handoff_kube::runner::{self, LoopError, Plumbing, Reconcile};
use handoff_kube::store::{HandoffStore, ListQuery};

use crate::metrics::ResultLabel;

/// The default requeue while a step runs, in case a Job event is missed.
pub(crate) const RUNNING_REQUEUE: Duration = Duration::from_secs(30);

/// What the schedule loop holds besides the runner's [`Plumbing`]: the
/// client, the clock, the requeue while a step runs and the counter of
/// finished cycles.
pub struct ScheduleLoop {
    client: Client,
    clock: Arc<dyn Clock>,
    running_requeue: Duration,
    plumbing: Plumbing,
    cycles: Family<ResultLabel, Counter>,
}

impl ScheduleLoop {
    /// The loop acting with `client`, reading `clock`, reporting as `instance`.
    pub fn new(client: Client, clock: Arc<dyn Clock>, instance: &str) -> Self {
        let reporter = Reporter {
            controller: CONTROLLER_FIELD_MANAGER.into(),
            instance: Some(instance.into()),
        };
        Self {
            plumbing: Plumbing::new(
                client.clone(),
                reporter,
                LoopProgress::new("schedule", Duration::ZERO),
                Arc::default(),
            ),
            client,
            clock,
            running_requeue: RUNNING_REQUEUE,
            cycles: Family::default(),
        }
    }

    /// Counts finished cycles in `cycles` (the controller's metric).
    pub(crate) fn counting_cycles(mut self, cycles: Family<ResultLabel, Counter>) -> Self {
        self.cycles = cycles;
        self
    }

    /// Runs with `plumbing` (the controller's progress, metrics and scope).
    pub(crate) fn with_plumbing(mut self, plumbing: Plumbing) -> Self {
        self.plumbing = plumbing;
        self
    }

    /// The requeue while a step runs (default [`RUNNING_REQUEUE`]); the Job
    /// watch is what normally wakes the loop.
    pub fn with_running_requeue(mut self, after: Duration) -> Self {
        self.running_requeue = after;
        self
    }
}

impl Reconcile for ScheduleLoop {
    type Object = BrainstormSchedule;
    type Error = Error;

    fn plumbing(&self) -> &Plumbing {
        &self.plumbing
    }

    fn reconcile(
        &self,
        schedule: &BrainstormSchedule,
    ) -> impl Future<Output = Result<Action, Error>> + Send {
        reconcile_schedule(schedule, self)
    }
}

/// Why a reconcile failed (retried with backoff): one variant per step,
/// each an apiserver call.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Reading the running step's Job (gather).
    #[error("get Job {job}: {source}")]
    GetJob {
        /// The Job's name.
        job: String,
        /// The failure.
        source: kube::Error,
    },
    /// Listing the project's open handoffs for the brainstorm goal.
    #[error("list the project's handoffs: {0}")]
    ListHandoffs(kube::Error),
    /// Creating a step's Job.
    #[error("create {role} Job {job}: {source}")]
    CreateJob {
        /// `refine` or `brainstorm`.
        role: &'static str,
        /// The Job's name.
        job: String,
        /// The failure.
        source: kube::Error,
    },
    /// Writing the status.
    #[error("write the status of {schedule}: {source}")]
    WriteStatus {
        /// The schedule's name.
        schedule: String,
        /// The failure.
        source: kube::Error,
    },
}

impl Categorized for Error {
    fn category(&self) -> Category {
        match self {
            Self::GetJob { source, .. }
            | Self::ListHandoffs(source)
            | Self::CreateJob { source, .. }
            | Self::WriteStatus { source, .. } => Category::of_kube(source),
        }
    }
}

impl LoopError for Error {
    fn step(&self) -> &'static str {
        match self {
            Self::GetJob { .. } => "get_job",
            Self::ListHandoffs(_) => "list_handoffs",
            Self::CreateJob { .. } => "create_job",
            Self::WriteStatus { .. } => "write_status",
        }
    }
}

/// Runs the loop until `shutdown` resolves: schedules and the Jobs they own
/// are watched (in `namespace`, or all namespaces), at most `concurrency`
/// schedules reconcile at once.
pub async fn run(
    ctx: Arc<ScheduleLoop>,
    namespace: Option<&str>,
    concurrency: u16,
    shutdown: tokio_util::sync::CancellationToken,
) {
    let schedules: Api<DeserializeGuard<BrainstormSchedule>> =
        scoped(ctx.client.clone(), namespace);
    let jobs: Api<Job> = scoped(ctx.client.clone(), namespace);
    let controller = Controller::new(schedules, watcher::Config::default())
        .owns(jobs, watcher::Config::default().labels(SCHEDULE_LABEL));
    runner::run(controller, ctx, concurrency, shutdown).await;
}

/// Reconciles one schedule: gather → plan → apply (see the module docs).
/// Public so tests can drive it step by step with a manual clock.
pub async fn reconcile_schedule(
    schedule: &BrainstormSchedule,
    ctx: &ScheduleLoop,
) -> Result<Action, Error> {
    let observed = gather(schedule, ctx).await?;
    let plan = plan(schedule, observed, ctx.clock.now());
    if !apply(schedule, ctx, &plan).await? {
        // Planned from an outdated schedule: its watch event brings the
        // new one, planned afresh (Jobs created here are then adopted).
        return Ok(Action::requeue(Duration::from_secs(1)));
    }
    if let Some(result) = finished_cycle(&plan) {
        ctx.cycles
            .get_or_create(&ResultLabel {
                result: result.into(),
            })
            .inc();
    }
    Ok(match plan.wake {
        Wake::OnChange => Action::await_change(),
        Wake::StepRunning => Action::requeue(ctx.running_requeue),
        Wake::After(after) => Action::requeue(after),
    })
}

/// What plan needs to know of the world: the state of the running step's Job.
async fn gather(schedule: &BrainstormSchedule, ctx: &ScheduleLoop) -> Result<Observed, Error> {
    let Some(name) = schedule.status.as_ref().and_then(step_job) else {
        return Ok(Observed {
            step: JobState::Absent,
        });
    };
    let job = jobs_api(schedule, ctx)
        .get_opt(name)
        .await
        .map_err(|source| Error::GetJob {
            job: name.to_owned(),
            source,
        })?;
    Ok(Observed {
        step: JobState::of(job.as_ref()),
    })
}

/// Carries out a plan: the Jobs first (so the status never names a Job that
/// was not created), then the status, then the Events (so a retried
/// reconcile does not record them twice). `false` when the status was not
/// written because the schedule changed since it was read.
async fn apply(
    schedule: &BrainstormSchedule,
    ctx: &ScheduleLoop,
    plan: &Plan,
) -> Result<bool, Error> {
    for effect in &plan.effects {
        if let Effect::CreateJob { role, tick, name } = effect {
            create_job(schedule, ctx, *role, *tick, name).await?;
        }
    }
    let api: Api<BrainstormSchedule> = Api::namespaced(
        ctx.client.clone(),
        &schedule.namespace().unwrap_or_default(),
    );
    if !write_status(&api, schedule, &plan.status).await? {
        return Ok(false);
    }
    for effect in &plan.effects {
        if let Effect::Event {
            type_,
            reason,
            note,
        } = effect
        {
            publish(ctx, schedule, event_type(*type_), reason, note).await;
        }
    }
    Ok(true)
}

fn jobs_api(schedule: &BrainstormSchedule, ctx: &ScheduleLoop) -> Api<Job> {
    Api::namespaced(
        ctx.client.clone(),
        &schedule.namespace().unwrap_or_default(),
    )
}

/// The goal of a step's Job; the brainstorm goal inlines the project's
/// open handoffs, listed now.
async fn goal(
    schedule: &BrainstormSchedule,
    ctx: &ScheduleLoop,
    role: Role,
) -> Result<String, Error> {
    let spec = &schedule.spec;
    if role == Role::Refine {
        let lookback = spec.lookback_days.unwrap_or(DEFAULT_LOOKBACK_DAYS);
        return Ok(refine_goal(&spec.project, lookback));
    }
    let store = HandoffStore::new(
        ctx.client.clone(),
        &schedule.namespace().unwrap_or_default(),
    );
    let query = ListQuery {
        project: spec.project.clone(),
        repo: None,
        kind: None,
    };
    let first = store
        .list_first(&query, None, MAX_INLINED_HANDOFFS)
        .await
        .map_err(Error::ListHandoffs)?;
    let open: Vec<OpenHandoff> = first
        .items
        .iter()
        .map(|h| OpenHandoff {
            key: h.spec.handoff_key.clone(),
            preview: preview_line(&h.spec.body),
            author: h.spec.created_by.clone(),
            revision: h.status.as_ref().and_then(|s| s.revision),
        })
        .collect();
    let max = spec
        .brainstorm
        .max_open_proposals
        .unwrap_or(DEFAULT_MAX_OPEN_PROPOSALS);
    Ok(brainstorm_goal(&spec.project, max, &open, first.total))
}

/// Creates a step's Job; an existing Job of the same name (a restart, a
/// second replica, a lost status write) is adopted.
async fn create_job(
    schedule: &BrainstormSchedule,
    ctx: &ScheduleLoop,
    role: Role,
    tick: Timestamp,
    name: &str,
) -> Result<(), Error> {
    let job = build_job(schedule, role, tick, &goal(schedule, ctx, role).await?);
    let params = PostParams {
        field_manager: Some(CONTROLLER_FIELD_MANAGER.into()),
        ..Default::default()
    };
    match jobs_api(schedule, ctx).create(&params, &job).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.code == 409 => {
            tracing::debug!(schedule = %schedule.name_any(), job = name, "adopted the existing Job");
            Ok(())
        }
        Err(source) => Err(Error::CreateJob {
            role: role.as_str(),
            job: name.to_owned(),
            source,
        }),
    }
}

async fn publish(
    ctx: &ScheduleLoop,
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
        .plumbing
        .recorder()
        .publish(&event, &schedule.object_ref(&()))
        .await
    {
        tracing::warn!(schedule = %schedule.name_any(), reason, error = %err, "cannot record an Event");
    }
}

/// Writes the status if it changed. The whole status is replaced: a merge
/// patch cannot remove a field (a finished cycle would stay current) and
/// would merge a new cycle into the previous one. The write is guarded by
/// the resourceVersion the plan was made from; `false` when the schedule
/// changed meanwhile (409), so the plan was stale.
async fn write_status(
    api: &Api<BrainstormSchedule>,
    schedule: &BrainstormSchedule,
    status: &BrainstormScheduleStatus,
) -> Result<bool, Error> {
    if schedule.status.clone().unwrap_or_default() == *status {
        return Ok(true);
    }
    let mut object = schedule.clone();
    object.metadata.managed_fields = None;
    object.status = Some(status.clone());
    let params = PostParams {
        field_manager: Some(CONTROLLER_FIELD_MANAGER.into()),
        ..Default::default()
    };
    match api
        .replace_status(&schedule.name_any(), &params, &object)
        .await
    {
        Ok(_) => Ok(true),
        Err(kube::Error::Api(status)) if status.code == 409 => Ok(false),
        Err(source) => Err(Error::WriteStatus {
            schedule: schedule.name_any(),
            source,
        }),
    }
}

/// The result of the cycle `plan` finishes (it records `CycleFinished`),
/// as the metric's label: `succeeded` or `failed`.
fn finished_cycle(plan: &Plan) -> Option<&'static str> {
    let finishes = plan.effects.iter().any(|effect| {
        matches!(
            effect,
            Effect::Event {
                reason: "CycleFinished",
                ..
            }
        )
    });
    let result = plan.status.last_cycle.as_ref()?.result?;
    finishes.then_some(match result {
        JobResult::Succeeded => "succeeded",
        JobResult::Failed => "failed",
    })
}

/// events.k8s.io's type of a planned Event.
fn event_type(planned: PlannedType) -> EventType {
    match planned {
        PlannedType::Normal => EventType::Normal,
        PlannedType::Warning => EventType::Warning,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_finished_cycle_is_counted_by_its_result_once() {
        let cycle = |result| handoff_core::api::Cycle {
            tick: k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(Timestamp::UNIX_EPOCH),
            refine: handoff_core::api::StepRun {
                job: "r".into(),
                result: Some(JobResult::Succeeded),
            },
            brainstorm: None,
            result,
        };
        let finished = Effect::Event {
            type_: PlannedType::Normal,
            reason: "CycleFinished",
            note: String::new(),
        };
        let started = Effect::Event {
            type_: PlannedType::Normal,
            reason: "RefineStarted",
            note: String::new(),
        };
        // (the last cycle's result, the plan's effects, what is counted)
        let cases = [
            (
                Some(JobResult::Failed),
                vec![finished.clone()],
                Some("failed"),
            ),
            (
                Some(JobResult::Succeeded),
                vec![finished.clone()],
                Some("succeeded"),
            ),
            // A later reconcile keeps last_cycle but finishes nothing.
            (Some(JobResult::Failed), vec![started], None),
            (Some(JobResult::Failed), vec![], None),
            (None, vec![finished], None),
        ];
        for (result, effects, counted) in cases {
            let plan = Plan {
                status: BrainstormScheduleStatus {
                    last_cycle: Some(cycle(result)),
                    ..Default::default()
                },
                effects,
                wake: Wake::OnChange,
            };
            assert_eq!(finished_cycle(&plan), counted, "{plan:?}");
        }
    }

    #[test]
    fn each_step_names_itself() {
        let kube = crate::test_support::api_error;
        // (error, step, message)
        let cases = [
            (
                Error::GetJob {
                    job: "j".into(),
                    source: kube(500),
                },
                "get_job",
                "get Job j: ",
            ),
            (
                Error::ListHandoffs(kube(500)),
                "list_handoffs",
                "list the project's handoffs: ",
            ),
            (
                Error::CreateJob {
                    role: Role::Refine.as_str(),
                    job: "j".into(),
                    source: kube(500),
                },
                "create_job",
                "create refine Job j: ",
            ),
            (
                Error::WriteStatus {
                    schedule: "daily".into(),
                    source: kube(500),
                },
                "write_status",
                "write the status of daily: ",
            ),
        ];
        for (err, step, message) in cases {
            assert_eq!(err.step(), step, "{err}");
            assert!(err.to_string().starts_with(message), "{err}");
        }
    }
}
