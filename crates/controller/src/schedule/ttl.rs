//! Per-project handoff TTLs for grooming, from
//! `BrainstormSchedule.spec.handoffTTL`: a project with a schedule that
//! sets one uses it; every other project falls back to the controller-wide
//! `--default-handoff-ttl` (off by default). Schedules are read from a
//! watch-backed store that every replica keeps (a read; only the leader
//! grooms).

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use kube::api::Api;
use kube::core::DeserializeGuard;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, ResourceExt};

use handoff_core::api::BrainstormSchedule;
use handoff_core::time::parse_duration;
use handoff_kube::cluster::scoped;

/// The handoff TTL of a project, or `None` for no grooming.
pub trait TtlPolicy: Send + Sync {
    /// The TTL of `project` in `namespace`.
    fn ttl_for(&self, namespace: &str, project: &str) -> Option<Duration>;
}

/// One TTL for every project (`--default-handoff-ttl`), or none.
#[derive(Debug, Clone, Copy, Default)]
pub struct DefaultTtl(pub Option<Duration>);

impl TtlPolicy for DefaultTtl {
    fn ttl_for(&self, _namespace: &str, _project: &str) -> Option<Duration> {
        self.0
    }
}

/// TTLs from schedules, with a fallback.
pub struct ScheduleTtl {
    store: Store<DeserializeGuard<BrainstormSchedule>>,
    fallback: Arc<dyn TtlPolicy>,
}

impl TtlPolicy for ScheduleTtl {
    fn ttl_for(&self, namespace: &str, project: &str) -> Option<Duration> {
        let schedules = self.store.state();
        // A schedule that does not deserialize sets no TTL (the schedule
        // loop reports it).
        let readable = schedules.iter().filter_map(|guard| guard.0.as_ref().ok());
        ttl_from(readable, namespace, project).or_else(|| self.fallback.ttl_for(namespace, project))
    }
}

/// The TTL a project's schedule sets, if any (the first valid one).
pub(crate) fn ttl_from<'a>(
    schedules: impl IntoIterator<Item = &'a BrainstormSchedule>,
    namespace: &str,
    project: &str,
) -> Option<Duration> {
    schedules
        .into_iter()
        .filter(|s| s.namespace().as_deref() == Some(namespace) && s.spec.project == project)
        .find_map(|s| parse_duration(s.spec.handoff_ttl.as_deref()?).ok())
}

/// A [`ScheduleTtl`] and the future that keeps its store fed (run it for
/// the life of the controller).
pub fn watch(
    client: Client,
    namespace: Option<&str>,
    fallback: Arc<dyn TtlPolicy>,
) -> (
    Arc<ScheduleTtl>,
    impl std::future::Future<Output = ()> + Send + 'static,
) {
    let api: Api<DeserializeGuard<BrainstormSchedule>> = scoped(client, namespace);
    let (store, writer) = reflector::store();
    let feed = reflector::reflector(writer, watcher(api, watcher::Config::default()))
        .default_backoff()
        .touched_objects()
        .for_each(|_| async {});
    (Arc::new(ScheduleTtl { store, fallback }), feed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use handoff_core::api::{BrainstormScheduleSpec, BrainstormStep, RefineStep};

    fn schedule(ns: &str, project: &str, ttl: Option<&str>) -> BrainstormSchedule {
        let template = k8s_openapi::api::batch::v1::JobTemplateSpec::default();
        let mut s = BrainstormSchedule::new(
            "s",
            BrainstormScheduleSpec {
                project: project.into(),
                schedule: "0 6 * * *".into(),
                time_zone: None,
                suspend: None,
                starting_deadline_seconds: None,
                refine: RefineStep {
                    job_template: template.clone(),
                },
                brainstorm: BrainstormStep {
                    job_template: template,
                    max_open_proposals: None,
                },
                lookback_days: None,
                handoff_ttl: ttl.map(Into::into),
            },
        );
        s.metadata.namespace = Some(ns.into());
        s
    }

    #[test]
    fn the_projects_schedule_sets_its_ttl() {
        let all = [
            schedule("a", "shop", Some("72h")),
            schedule("b", "shop", Some("1d")),
            schedule("a", "web", None),
        ];
        assert_eq!(
            ttl_from(&all, "a", "shop"),
            Some(Duration::from_secs(72 * 3600))
        );
        assert_eq!(
            ttl_from(&all, "b", "shop"),
            Some(Duration::from_secs(86_400))
        );
        assert_eq!(
            ttl_from(&all, "a", "web"),
            None,
            "a schedule without handoffTTL sets none"
        );
        assert_eq!(ttl_from(&all, "c", "shop"), None, "namespaces are separate");
    }

    #[test]
    fn the_default_applies_to_every_project() {
        let policy = DefaultTtl(Some(Duration::from_secs(5)));
        assert_eq!(policy.ttl_for("a", "b"), Some(Duration::from_secs(5)));
        assert_eq!(DefaultTtl::default().ttl_for("a", "b"), None);
    }
}
