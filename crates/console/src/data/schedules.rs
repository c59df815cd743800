//! A namespace's refine → brainstorm schedules, as the person reads them:
//! the barrier's phase, the running Job, the next tick and the current and
//! last cycles.

use kube::ResourceExt;
use kube::api::ListParams;

use super::errors::{Doing, ReadError};
use super::reads::{all, api};
use crate::model::{CycleRow, ScheduleRow, SchedulesPage, StepRow};
use handoff_bridge::auth::Caller;
use handoff_core::api::{BrainstormSchedule, Cycle, JobResult, StepRun};

/// Most schedules one page reads (one per project is expected).
const MAX_SCHEDULES: usize = 1_000;

fn result_name(result: JobResult) -> String {
    format!("{result:?}")
}

fn step(run: &StepRun) -> StepRow {
    StepRow {
        job: run.job.clone(),
        result: run.result.map(result_name),
    }
}

fn cycle(c: &Cycle) -> CycleRow {
    CycleRow {
        tick: c.tick.0,
        refine: step(&c.refine),
        brainstorm: c.brainstorm.as_ref().map(step),
        result: c.result.map(result_name),
    }
}

/// The row of schedule `s`: the current cycle first, then the last one.
pub(super) fn schedule_row(s: &BrainstormSchedule) -> ScheduleRow {
    let status = s.status.clone().unwrap_or_default();
    ScheduleRow {
        name: s.name_any(),
        project: s.spec.project.clone(),
        cron: s.spec.schedule.clone(),
        time_zone: s.spec.time_zone.clone(),
        suspended: s.spec.suspend.unwrap_or(false),
        phase: status.phase.map(|p| format!("{p:?}")),
        active_job: status.active_job.clone(),
        next: status.next_schedule_time.as_ref().map(|t| t.0),
        cycles: [&status.current_cycle, &status.last_cycle]
            .into_iter()
            .flatten()
            .map(cycle)
            .collect(),
    }
}

/// The schedules of the caller's namespace, by project then name.
pub async fn schedules(caller: &Caller) -> Result<SchedulesPage, ReadError> {
    let namespace = caller.store().namespace();
    let doing = Doing {
        action: "list schedules",
        namespace,
    };
    let (listed, _cut) = all(
        &api::<BrainstormSchedule>(caller),
        &ListParams::default(),
        MAX_SCHEDULES,
    )
    .await
    .map_err(|e| doing.kube(&e, "schedules"))?;
    let mut rows: Vec<ScheduleRow> = listed.iter().map(schedule_row).collect();
    rows.sort_by(|a, b| (&a.project, &a.name).cmp(&(&b.project, &b.name)));
    Ok(SchedulesPage {
        namespace: namespace.to_owned(),
        schedules: rows,
    })
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::batch::v1::JobTemplateSpec;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    use super::*;
    use crate::data::rows::fixture::at;
    use handoff_core::api::{
        BrainstormScheduleSpec, BrainstormScheduleStatus, BrainstormStep, RefineStep, SchedulePhase,
    };

    fn schedule(status: Option<BrainstormScheduleStatus>) -> BrainstormSchedule {
        let mut s = BrainstormSchedule::new(
            "nightly",
            BrainstormScheduleSpec {
                project: "shop".into(),
                schedule: "0 6 * * 1-5".into(),
                time_zone: Some("Europe/Berlin".into()),
                suspend: Some(true),
                starting_deadline_seconds: None,
                refine: RefineStep {
                    job_template: JobTemplateSpec::default(),
                },
                brainstorm: BrainstormStep {
                    job_template: JobTemplateSpec::default(),
                    max_open_proposals: None,
                },
                lookback_days: None,
                handoff_ttl: Some("14d".into()),
            },
        );
        s.status = status;
        s
    }

    fn run(job: &str, result: Option<JobResult>) -> StepRun {
        StepRun {
            job: job.into(),
            result,
        }
    }

    #[test]
    fn a_schedule_shows_its_barrier_its_next_tick_and_its_cycles() {
        let running = BrainstormScheduleStatus {
            phase: Some(SchedulePhase::Brainstorming),
            active_job: Some("b-2".into()),
            next_schedule_time: Some(Time(at(300))),
            current_cycle: Some(Cycle {
                tick: Time(at(200)),
                refine: run("r-2", Some(JobResult::Failed)),
                brainstorm: Some(run("b-2", None)),
                result: None,
            }),
            last_cycle: Some(Cycle {
                tick: Time(at(100)),
                refine: run("r-1", Some(JobResult::Succeeded)),
                brainstorm: Some(run("b-1", Some(JobResult::Succeeded))),
                result: Some(JobResult::Succeeded),
            }),
            ..BrainstormScheduleStatus::default()
        };
        // (status, phase, active job, next, [(tick, refine, brainstorm, result)])
        type Cycles = Vec<(i64, StepRow, Option<StepRow>, Option<String>)>;
        type Case<'a> = (
            Option<BrainstormScheduleStatus>,
            Option<&'a str>,
            Option<&'a str>,
            Option<i64>,
            Cycles,
        );
        let step_row = |job: &str, result: Option<&str>| StepRow {
            job: job.into(),
            result: result.map(Into::into),
        };
        let cases: [Case; 2] = [
            (None, None, None, None, Vec::new()),
            (
                Some(running),
                Some("Brainstorming"),
                Some("b-2"),
                Some(300),
                vec![
                    (
                        200,
                        step_row("r-2", Some("Failed")),
                        Some(step_row("b-2", None)),
                        None,
                    ),
                    (
                        100,
                        step_row("r-1", Some("Succeeded")),
                        Some(step_row("b-1", Some("Succeeded"))),
                        Some("Succeeded".into()),
                    ),
                ],
            ),
        ];
        for (status, phase, job, next, cycles) in cases {
            let row = schedule_row(&schedule(status));
            assert_eq!((row.cron.as_str(), row.suspended), ("0 6 * * 1-5", true));
            assert_eq!(row.time_zone.as_deref(), Some("Europe/Berlin"));
            assert_eq!(
                (
                    row.phase.as_deref(),
                    row.active_job.as_deref(),
                    row.next.map(|t| t.as_second())
                ),
                (phase, job, next)
            );
            let got: Cycles = row
                .cycles
                .into_iter()
                .map(|c| (c.tick.as_second(), c.refine, c.brainstorm, c.result))
                .collect();
            assert_eq!(got, cycles);
        }
    }
}
