//! The Jobs of a cycle: deterministic names, how they are built from the
//! schedule's templates, and how their end is read. Pure.

use std::collections::BTreeMap;

use jiff::Timestamp;
use k8s_openapi::api::batch::v1::{Job, JobSpec};
use k8s_openapi::api::core::v1::EnvVar;
use kube::{Resource, ResourceExt};
use sha2::{Digest, Sha256};

use crate::api::{BrainstormSchedule, JobResult};
use crate::goals::KEY_ENV;
use crate::names::{ROLE_LABEL, SCHEDULE_LABEL, TICK_ANNOTATION};

/// Label: the project (as on Handoffs).
pub const PROJECT_LABEL: &str = "project";
/// Environment variable carrying the goal.
pub(crate) const GOAL_ENV: &str = "HANDOFF_GOAL";
/// Environment variable carrying the agent profile.
pub(crate) const PROFILE_ENV: &str = "HANDOFF_PROFILE";
/// Environment variable carrying the project.
pub(crate) const PROJECT_ENV: &str = "HANDOFF_PROJECT";

/// The two steps of a cycle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Grooming first.
    Refine,
    /// Then proposals.
    Brainstorm,
}

impl Role {
    /// The label value and profile name.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Refine => "refine",
            Role::Brainstorm => "brainstorm",
        }
    }
}

/// The Job name for a schedule, step and tick: the same inputs always give
/// the same name, so a restarted controller or a second replica can never
/// create a second Job for one tick (the apiserver answers AlreadyExists).
/// At most 63 characters (Job names become label values).
pub fn job_name(schedule: &str, role: Role, tick: Timestamp) -> String {
    let suffix = format!("-{}-{}", role.as_str(), tick.as_second() / 60);
    let room = 63 - suffix.len();
    if schedule.len() <= room {
        return format!("{schedule}{suffix}");
    }
    let hash: String = Sha256::digest(schedule.as_bytes())
        .iter()
        .take(3)
        .map(|b| format!("{b:02x}"))
        .collect();
    let keep = schedule[..room - 7].trim_end_matches(['-', '.']);
    format!("{keep}-{hash}{suffix}")
}

/// The conversation key of a schedule's step: stable across cycles, so
/// each refine (or brainstorm) agent continues from the previous one's handoff.
pub(crate) fn conversation_key(namespace: &str, schedule: &str, role: Role) -> String {
    format!("{namespace}/{schedule}/{}", role.as_str())
}

/// The Job for one step of a cycle: the template, owned by the schedule,
/// labelled, with the goal, the continuation key, the profile and the
/// project in every container's environment.
pub fn build_job(schedule: &BrainstormSchedule, role: Role, tick: Timestamp, goal: &str) -> Job {
    let namespace = schedule.namespace().unwrap_or_default();
    let template = match role {
        Role::Refine => &schedule.spec.refine.job_template,
        Role::Brainstorm => &schedule.spec.brainstorm.job_template,
    };
    let mut labels: BTreeMap<String, String> = template
        .metadata
        .as_ref()
        .and_then(|m| m.labels.clone())
        .unwrap_or_default();
    labels.insert(PROJECT_LABEL.into(), schedule.spec.project.clone());
    labels.insert(SCHEDULE_LABEL.into(), schedule.name_any());
    labels.insert(ROLE_LABEL.into(), role.as_str().into());

    let mut spec: JobSpec = template.spec.clone().unwrap_or_default();
    let pod_meta = spec.template.metadata.get_or_insert_with(Default::default);
    pod_meta
        .labels
        .get_or_insert_with(BTreeMap::new)
        .extend(labels.clone());
    let env = [
        (GOAL_ENV, goal.to_owned()),
        (
            KEY_ENV,
            conversation_key(&namespace, &schedule.name_any(), role),
        ),
        (PROFILE_ENV, role.as_str().to_owned()),
        (PROJECT_ENV, schedule.spec.project.clone()),
    ];
    if let Some(pod) = spec.template.spec.as_mut() {
        for container in pod.containers.iter_mut() {
            let vars = container.env.get_or_insert_with(Vec::new);
            vars.retain(|v| !env.iter().any(|(name, _)| v.name == *name));
            vars.extend(env.iter().map(|(name, value)| EnvVar {
                name: (*name).to_owned(),
                value: Some(value.clone()),
                ..Default::default()
            }));
        }
    }
    let mut job = Job {
        metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
            name: Some(job_name(&schedule.name_any(), role, tick)),
            namespace: Some(namespace),
            labels: Some(labels),
            annotations: template
                .metadata
                .as_ref()
                .and_then(|m| m.annotations.clone()),
            owner_references: schedule.controller_owner_ref(&()).map(|o| vec![o]),
            ..Default::default()
        },
        spec: Some(spec),
        status: None,
    };
    job.metadata
        .annotations
        .get_or_insert_with(BTreeMap::new)
        .insert(TICK_ANNOTATION.into(), tick.to_string());
    job
}

/// How a Job ended: `Complete`/`SuccessCriteriaMet` → succeeded,
/// `Failed`/`FailureTarget` → failed; `None` while it runs.
pub fn job_result(job: &Job) -> Option<JobResult> {
    let conditions = job.status.as_ref()?.conditions.as_ref()?;
    let is_true = |kinds: &[&str]| {
        conditions
            .iter()
            .any(|c| kinds.contains(&c.type_.as_str()) && c.status == "True")
    };
    if is_true(&["Failed", "FailureTarget"]) {
        Some(JobResult::Failed)
    } else if is_true(&["Complete", "SuccessCriteriaMet"]) {
        Some(JobResult::Succeeded)
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::batch::v1::{JobCondition, JobStatus, JobTemplateSpec};
    use k8s_openapi::api::core::v1::{Container, PodSpec, PodTemplateSpec};

    use super::*;
    use crate::api::{BrainstormScheduleSpec, BrainstormStep, RefineStep};

    fn template(image: &str) -> JobTemplateSpec {
        JobTemplateSpec {
            metadata: None,
            spec: Some(JobSpec {
                template: PodTemplateSpec {
                    metadata: None,
                    spec: Some(PodSpec {
                        containers: vec![Container {
                            name: "agent".into(),
                            image: Some(image.into()),
                            env: Some(vec![EnvVar {
                                name: GOAL_ENV.into(),
                                value: Some("stale".into()),
                                ..Default::default()
                            }]),
                            ..Default::default()
                        }],
                        restart_policy: Some("Never".into()),
                        ..Default::default()
                    }),
                },
                ..Default::default()
            }),
        }
    }

    fn schedule() -> BrainstormSchedule {
        let mut s = BrainstormSchedule::new(
            "shop-daily",
            BrainstormScheduleSpec {
                project: "shop".into(),
                schedule: "0 6 * * *".into(),
                time_zone: None,
                suspend: None,
                starting_deadline_seconds: None,
                refine: RefineStep {
                    job_template: template("refiner:1"),
                },
                brainstorm: BrainstormStep {
                    job_template: template("brainstormer:1"),
                    max_open_proposals: None,
                },
                lookback_days: None,
                handoff_ttl: None,
            },
        );
        s.metadata.namespace = Some("agents".into());
        s.metadata.uid = Some("uid-1".into());
        s
    }

    #[test]
    fn names_are_deterministic_and_bounded() {
        let tick: Timestamp = "2026-01-01T06:00:00Z".parse().expect("ts");
        assert_eq!(
            job_name("shop-daily", Role::Refine, tick),
            "shop-daily-refine-29454120"
        );
        assert_eq!(
            job_name("shop-daily", Role::Refine, tick),
            job_name("shop-daily", Role::Refine, tick)
        );
        assert_ne!(
            job_name("shop-daily", Role::Refine, tick),
            job_name("shop-daily", Role::Brainstorm, tick)
        );
        let long = "a".repeat(200);
        let name = job_name(&long, Role::Brainstorm, tick);
        assert!(name.len() <= 63, "{name}");
        assert_ne!(
            name,
            job_name(&"a".repeat(199), Role::Brainstorm, tick),
            "truncated names keep a hash"
        );
    }

    #[test]
    fn jobs_carry_owner_labels_goal_and_key() {
        let tick: Timestamp = "2026-01-01T06:00:00Z".parse().expect("ts");
        let job = build_job(&schedule(), Role::Refine, tick, "groom the project");
        let labels = job.metadata.labels.clone().unwrap_or_default();
        assert_eq!(labels.get("project").map(String::as_str), Some("shop"));
        assert_eq!(
            labels.get(SCHEDULE_LABEL).map(String::as_str),
            Some("shop-daily")
        );
        assert_eq!(labels.get(ROLE_LABEL).map(String::as_str), Some("refine"));
        let owner = &job.metadata.owner_references.as_ref().expect("owner")[0];
        assert_eq!(
            (owner.kind.as_str(), owner.controller),
            ("BrainstormSchedule", Some(true))
        );
        let pod = job
            .spec
            .as_ref()
            .and_then(|s| s.template.spec.as_ref())
            .expect("pod");
        let env: BTreeMap<_, _> = pod.containers[0]
            .env
            .iter()
            .flatten()
            .map(|v| (v.name.as_str(), v.value.clone().unwrap_or_default()))
            .collect();
        assert_eq!(
            env[GOAL_ENV], "groom the project",
            "the template's stale goal is replaced"
        );
        assert_eq!(env[KEY_ENV], "agents/shop-daily/refine");
        assert_eq!(env[PROFILE_ENV], "refine");
        assert_eq!(pod.containers[0].env.as_ref().map(Vec::len), Some(4));
    }

    #[test]
    fn results_from_conditions() {
        let with = |kind: &str, status: &str| Job {
            status: Some(JobStatus {
                conditions: Some(vec![JobCondition {
                    type_: kind.into(),
                    status: status.into(),
                    ..Default::default()
                }]),
                ..Default::default()
            }),
            ..Default::default()
        };
        assert_eq!(
            job_result(&with("Complete", "True")),
            Some(JobResult::Succeeded)
        );
        assert_eq!(job_result(&with("Failed", "True")), Some(JobResult::Failed));
        assert_eq!(job_result(&with("Complete", "False")), None);
        assert_eq!(job_result(&Job::default()), None);
    }
}
