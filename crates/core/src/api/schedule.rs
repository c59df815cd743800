//! The `BrainstormSchedule` custom resource: one schedule per project that
//! runs **refine, then brainstorm** on each cron tick (the barrier), plus
//! the handoff TTL used for deterministic grooming.
//!
//! The Job templates are kept as opaque objects in the schema
//! (`x-kubernetes-preserve-unknown-fields`): embedding two full PodSpec
//! schemas would make the CRD several hundred KiB (too large for
//! client-side apply and slow to publish). The apiserver still validates
//! each Job when the controller creates it, and a failure is reported in the
//! schedule's `Ready` condition.
#![allow(
    unreachable_pub,
    reason = "kube's KubeSchema derive copies each spec struct, `pub` and all, into a private scope"
)]

use k8s_openapi::api::batch::v1::JobTemplateSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::handoff::project_rule;

/// Default for `startingDeadlineSeconds`: a tick more than five minutes late
/// is missed, not run.
pub const DEFAULT_STARTING_DEADLINE_SECONDS: i64 = 300;
/// Default for `lookbackDays`.
pub const DEFAULT_LOOKBACK_DAYS: i32 = 7;
/// Default for `brainstorm.maxOpenProposals`.
pub const DEFAULT_MAX_OPEN_PROPOSALS: i32 = 5;

/// A project's refine → brainstorm cycle, on one cron schedule.
// clippy reads the repeated `type_ = ...` of separate printcolumns as
// duplicated attributes; they are arguments of different columns.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[kube(
    group = "handoff.dev",
    version = "v1alpha1",
    kind = "BrainstormSchedule",
    plural = "brainstormschedules",
    shortname = "bs",
    category = "agents",
    namespaced,
    status = "BrainstormScheduleStatus",
    doc = "One schedule per project: on each cron tick a refine Job grooms the project's handoffs and issues, then (the barrier: only once refine has finished, successfully or not) a brainstorm Job proposes work, open handoffs first.",
    printcolumn(name = "Project", type_ = "string", json_path = ".spec.project"),
    printcolumn(name = "Schedule", type_ = "string", json_path = ".spec.schedule"),
    printcolumn(name = "Suspend", type_ = "boolean", json_path = ".spec.suspend"),
    printcolumn(
        name = "Phase",
        type_ = "string",
        json_path = ".status.phase",
        description = "Idle, Refining or Brainstorming"
    ),
    printcolumn(
        name = "Job",
        type_ = "string",
        json_path = ".status.activeJob",
        description = "The Job of the running step"
    ),
    printcolumn(name = "Last", type_ = "date", json_path = ".status.lastScheduleTime"),
    printcolumn(
        name = "Next",
        type_ = "string",
        json_path = ".status.nextScheduleTime",
        description = "The next tick (RFC 3339; a date column would show a future time as <invalid>)"
    ),
    printcolumn(
        name = "Last Result",
        type_ = "string",
        json_path = ".status.lastCycle.result",
        priority = 1
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    ),
    selectable = ".spec.project"
)]
#[serde(rename_all = "camelCase")]
pub struct BrainstormScheduleSpec {
    /// The project whose handoffs and issues the cycle grooms and extends.
    /// A valid label value; at most one schedule per project is expected.
    #[x_kube(validation = project_rule())]
    #[schemars(length(min = 1, max = 63))]
    pub project: String,

    /// When cycles start: a 5-field cron expression (minute hour day-of-month
    /// month day-of-week), e.g. `0 6 * * 1-5`.
    #[x_kube(validation = Rule::new(r"self.trim().matches('^\\S+(\\s+\\S+){4}$')").message("schedule must be a 5-field cron expression: minute hour day-of-month month day-of-week, e.g. '0 6 * * 1-5'"))]
    #[schemars(length(min = 9, max = 128))]
    pub schedule: String,

    /// IANA time zone the schedule is read in (default `UTC`), e.g. `Europe/Berlin`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 64))]
    pub time_zone: Option<String>,

    /// Stop starting new cycles (a running one finishes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suspend: Option<bool>,

    /// A tick not started within this many seconds is missed, not run
    /// (default 300). Missed ticks are never replayed in a burst.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub starting_deadline_seconds: Option<i64>,

    /// The refine step: grooms the project's handoffs and issues.
    pub refine: RefineStep,

    /// The brainstorm step: proposes work, continuing open handoffs first.
    pub brainstorm: BrainstormStep,

    /// How many days back refine looks when grooming issues (default 7).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 365))]
    pub lookback_days: Option<i32>,

    /// Handoffs of this project not updated within this duration are deleted
    /// by the controller's grooming (e.g. `72h`, `14d`; unset: no TTL).
    #[serde(
        default,
        rename = "handoffTTL",
        skip_serializing_if = "Option::is_none"
    )]
    #[x_kube(validation = Rule::new(r"self.matches('^[0-9]+(s|m|h|d)$')").message("handoffTTL must be a whole number followed by s, m, h or d, e.g. 72h or 14d"))]
    pub handoff_ttl: Option<String>,
}

/// The refine step of a cycle.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RefineStep {
    /// The Job to run (a batch/v1 JobTemplateSpec). The controller adds the
    /// goal and `CONVERSATION_OBJECT_KEY` to every container's environment.
    #[schemars(schema_with = "job_template_schema")]
    pub job_template: JobTemplateSpec,
}

/// The brainstorm step of a cycle.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BrainstormStep {
    /// The Job to run (a batch/v1 JobTemplateSpec). The controller adds the
    /// goal and `CONVERSATION_OBJECT_KEY` to every container's environment.
    #[schemars(schema_with = "job_template_schema")]
    pub job_template: JobTemplateSpec,
    /// Most proposals the brainstorm agent may leave open (default 5).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 100))]
    pub max_open_proposals: Option<i32>,
}

fn job_template_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": "object",
        "description": "A batch/v1 JobTemplateSpec (metadata and spec of the Job to create).",
        "x-kubernetes-preserve-unknown-fields": true,
    })
}

/// Where a schedule's cycle is.
#[derive(Deserialize, Serialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema, Default)]
pub enum SchedulePhase {
    /// No cycle running.
    #[default]
    Idle,
    /// The refine Job runs; brainstorm waits for it.
    Refining,
    /// The brainstorm Job runs.
    Brainstorming,
}

/// How a Job ended.
#[derive(Deserialize, Serialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum JobResult {
    /// The Job's `Complete` condition is true.
    Succeeded,
    /// The Job's `Failed` condition is true.
    Failed,
}

/// One step's Job in a cycle.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StepRun {
    /// The Job's name.
    pub job: String,
    /// How it ended, once it has.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<JobResult>,
}

/// One refine → brainstorm cycle.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Cycle {
    /// The tick that started it.
    pub tick: Time,
    /// The refine step.
    pub refine: StepRun,
    /// The brainstorm step, once started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub brainstorm: Option<StepRun>,
    /// `Succeeded` when both steps succeeded, else `Failed` (set when the cycle ends).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<JobResult>,
}

/// What the controller observed about a schedule.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BrainstormScheduleStatus {
    /// `Idle`, `Refining` or `Brainstorming`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<SchedulePhase>,
    /// The Job of the running step, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub active_job: Option<String>,
    /// The last tick the controller acted on (started, skipped or missed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_schedule_time: Option<Time>,
    /// The next tick.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_schedule_time: Option<Time>,
    /// The running cycle.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current_cycle: Option<Cycle>,
    /// The last finished cycle.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_cycle: Option<Cycle>,
    /// The `metadata.generation` this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// `Ready`: the schedule and time zone parse and Jobs can be created.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
}
