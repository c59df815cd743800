//! What every reconcile loop shares (the Handoff, schedule, offer and agent
//! Job loops), so each behaves the same under bad objects and failures;
//! [`crate::runner`] applies it to every loop:
//!
//! - **Guarded objects.** Watches and lists read [`DeserializeGuard`]s: an
//!   object that does not deserialize (an older stored version, a hand
//!   edit the schema no longer matches) is reported once per change — a
//!   `Warning` Event `InvalidObject` on it, a log line naming it, and
//!   `handoff_controller_invalid_objects_total{kind}` — and skipped. Without
//!   the guard, one such object fails the whole list and the watch backs
//!   off forever: the loop stalls for every other object.
//! - **Error categories.** A failure is `invalid` (the object or request is
//!   wrong: retrying the same thing cannot help) or `transient` (the
//!   apiserver or PostgreSQL is unavailable, a conflict, a timeout;
//!   [`handoff_core::loops::Category`], of an apiserver error
//!   [`KubeCategory::of_kube`]); counted in
//!   `handoff_controller_reconcile_errors_total{kind,category,step}`
//!   (`step`: what the reconcile was doing, `get`, `patch_status`, …, as
//!   the loop's error names it) and logged with the same step.
//! - **One backoff policy** ([`Backoff`], its pauses
//!   [`handoff_core::loops::delay`]): 1 s doubling per consecutive
//!   failure of an object, at most 60 s; an invalid failure waits the
//!   longest at once. An object's failure count is dropped when it
//!   reconciles cleanly and when it is deleted, so the map holds only
//!   objects that are failing now.
//! - **Progress** ([`tracked`]): every reconcile is an attempt of its
//!   loop's [`LoopProgress`]; a transient failure leaves the object's work
//!   pending, so `/healthz` reports a loop whose retries all fail (see
//!   [`handoff_core::liveness`]).

use std::collections::HashMap;
use std::sync::Mutex;

use k8s_openapi::api::core::v1::ObjectReference;
use kube::Resource;
use kube::core::DeserializeGuard;
use kube::core::error_boundary::InvalidObject;
use kube::runtime::controller::{Action, Error as ControllerError};
use kube::runtime::events::{Event, EventType, Recorder};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;

use handoff_core::liveness::LoopProgress;
use handoff_core::loops::{Categorized, Category, bounded_note, delay};

use crate::telemetry::Listed;

/// The [`Category`] of an apiserver error (this crate holds kube's
/// client; [`Category`] is [`handoff_core::loops`]'s).
pub trait KubeCategory {
    /// The category of an apiserver error: a request the apiserver refuses
    /// as malformed or invalid (400, 422) or a response that does not
    /// deserialize is invalid; everything else (unreachable, 5xx, 409, 429,
    /// 403 until RBAC is fixed) is transient.
    fn of_kube(err: &kube::Error) -> Self;
}

impl KubeCategory for Category {
    fn of_kube(err: &kube::Error) -> Self {
        match err {
            kube::Error::Api(status) if matches!(status.code, 400 | 422) => Category::Invalid,
            kube::Error::SerdeError(_) => Category::Invalid,
            _ => Category::Transient,
        }
    }
}

/// Consecutive failures per object (see the module docs).
#[derive(Debug, Default)]
pub(crate) struct Backoff {
    failures: Mutex<HashMap<String, u32>>,
}

impl Backoff {
    /// Counts a failure of `object` and returns the requeue.
    pub(crate) fn failed(&self, object: &str, category: Category) -> Action {
        let failures = match self.failures.lock() {
            Ok(mut map) => {
                let n = map.entry(object.to_owned()).or_insert(0);
                *n = n.saturating_add(1);
                *n
            }
            Err(_) => 1,
        };
        Action::requeue(delay(failures, category))
    }

    /// `object` reconciled cleanly, or is gone: forget its failures.
    pub(crate) fn forget(&self, object: &str) {
        if let Ok(mut map) = self.failures.lock() {
            map.remove(object);
        }
    }

    /// A failed reconcile of `object` (any kind `K`, or a guard of it) at
    /// `step`: counted by kind, category and step in `metrics`, logged, and
    /// retried after the policy's pause. Every loop's error policy is this
    /// call.
    pub(crate) fn failed_reconcile<K, E>(
        &self,
        object: &K,
        err: &E,
        step: &str,
        metrics: &LoopMetrics,
    ) -> Action
    where
        K: Resource<DynamicType = ()>,
        E: Categorized + std::fmt::Display,
    {
        let name = describe(object);
        let category = err.category();
        metrics.count_error(&K::kind(&()), category, step);
        tracing::warn!(object = %name, category = category.as_str(), step, error = %err, "reconcile failed; retrying");
        self.failed(&name, category)
    }

    /// Follows a loop's outcomes: an object that was deleted while a retry
    /// was pending comes back as `ObjectNotFound`, and its count goes (and
    /// its pending work in `progress`); other errors are logged at debug
    /// level (the error policy already logged the reconcile's own failure).
    pub(crate) fn observe<K, E>(&self, outcome: &Outcome<K, E>, progress: &LoopProgress)
    where
        K: Resource<DynamicType = ()>,
        E: std::error::Error + 'static,
    {
        match outcome {
            Err(ControllerError::ObjectNotFound(gone)) => {
                let key = object_key(&K::kind(&()), gone.namespace.as_deref(), &gone.name);
                self.forget(&key);
                progress.forget(&key);
            }
            Err(err) => tracing::debug!(error = %err, "controller event"),
            Ok(_) => {}
        }
    }

    /// How many objects are failing now (the tests read the map's size).
    #[cfg(test)]
    fn failing(&self) -> usize {
        self.failures.lock().map(|m| m.len()).unwrap_or(0)
    }
}

/// Runs one reconcile of `object` as an attempt of `progress` (see
/// [`handoff_core::liveness`]): its work is done when it succeeds or fails as
/// [`Category::Invalid`] (no retry or restart fixes that); a transient
/// failure leaves the work pending, so a loop whose every retry fails
/// shows as wedged.
pub(crate) async fn tracked<K, T, E>(
    progress: &LoopProgress,
    object: &K,
    work: impl std::future::Future<Output = Result<T, E>>,
) -> Result<T, E>
where
    K: Resource<DynamicType = ()>,
    E: Categorized,
{
    let attempt = progress.start(describe(object));
    let result = work.await;
    attempt.end(done(&result));
    result
}

/// Whether a reconcile's `result` finished its work (see [`tracked`]).
pub(crate) fn done<T, E: Categorized>(result: &Result<T, E>) -> bool {
    match result {
        Ok(_) => true,
        Err(err) => err.category() == Category::Invalid,
    }
}

/// What a kube `Controller` yields for each reconcile.
pub type Outcome<K, E> = Result<(ObjectRef<K>, Action), ControllerError<E, watcher::Error>>;

/// `Kind namespace/name`: how logs and the backoff name an object.
pub(crate) fn object_key(kind: &str, namespace: Option<&str>, name: &str) -> String {
    format!("{kind} {}/{name}", namespace.unwrap_or_default())
}

/// [`object_key`] of an object (a [`DeserializeGuard`] is named as the
/// kind it guards).
pub fn describe<K: Resource<DynamicType = ()>>(object: &K) -> String {
    let meta = object.meta();
    object_key(
        &K::kind(&()),
        meta.namespace.as_deref(),
        meta.name.as_deref().unwrap_or_default(),
    )
}

/// `kind`, `category` and `step` labels.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ErrorLabels {
    kind: String,
    category: String,
    step: String,
}

/// `kind` label.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct KindLabel {
    kind: String,
}

/// The metrics every loop reports (registered by the controller).
#[derive(Debug, Default)]
pub struct LoopMetrics {
    errors: Family<ErrorLabels, Counter>,
    invalid: Family<KindLabel, Counter>,
}

impl LoopMetrics {
    /// Registers the metrics in `registry`.
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "reconcile_errors",
            "Failed reconciles by object kind, category (invalid or transient) and the step that failed",
            Listed(self.errors.clone()),
        );
        registry.register(
            "invalid_objects",
            "Objects skipped because they do not deserialize (reported once per change)",
            Listed(self.invalid.clone()),
        );
    }

    /// Counts a failed reconcile of a `kind` at `step`.
    pub(crate) fn count_error(&self, kind: &str, category: Category, step: &str) {
        self.errors
            .get_or_create(&ErrorLabels {
                kind: kind.into(),
                category: category.as_str().into(),
                step: step.into(),
            })
            .inc();
    }

    /// Counts a skipped invalid object of a `kind`.
    pub(crate) fn count_invalid(&self, kind: &str) {
        self.invalid
            .get_or_create(&KindLabel { kind: kind.into() })
            .inc();
    }
}

/// The object inside a guard, or `None` after reporting it as invalid
/// (Event, log line, metric): the caller skips it and waits for a change.
pub(crate) async fn valid_or_report<'a, K>(
    guard: &'a DeserializeGuard<K>,
    recorder: &Recorder,
    metrics: &LoopMetrics,
) -> Option<&'a K>
where
    K: Resource<DynamicType = ()>,
{
    match &guard.0 {
        Ok(object) => Some(object),
        Err(invalid) => {
            report_invalid::<K>(invalid, recorder, metrics).await;
            None
        }
    }
}

/// How soon an object of a namespace this controller does not manage is
/// looked at again (the namespace may have been labelled meanwhile).
pub(crate) const UNMANAGED_RECHECK: std::time::Duration = std::time::Duration::from_secs(300);

/// Whether the object in `guard` lives in a namespace of `scope` (an
/// object that does not deserialize still names its namespace).
pub(crate) fn managed<K>(
    guard: &DeserializeGuard<K>,
    scope: &crate::cluster::NamespaceScope,
) -> bool
where
    K: Resource<DynamicType = ()>,
{
    let namespace = match &guard.0 {
        Ok(object) => object.meta().namespace.as_deref(),
        Err(invalid) => invalid.metadata.namespace.as_deref(),
    };
    scope.includes(namespace.unwrap_or_default())
}

/// The note of an `InvalidObject` Event.
pub(crate) fn invalid_note(kind: &str, error: &str) -> String {
    bounded_note(format!(
        "skipped: this {kind} does not match the schema the controller reads ({error}); fix or replace it"
    ))
}

async fn report_invalid<K>(invalid: &InvalidObject, recorder: &Recorder, metrics: &LoopMetrics)
where
    K: Resource<DynamicType = ()>,
{
    let kind = K::kind(&()).into_owned();
    let meta = &invalid.metadata;
    let object = format!(
        "{}/{}",
        meta.namespace.as_deref().unwrap_or_default(),
        meta.name.as_deref().unwrap_or_default()
    );
    tracing::warn!(kind = %kind, object = %object, error = %invalid.error, "skipping an object that does not deserialize");
    metrics.count_invalid(&kind);
    let reference = ObjectReference {
        api_version: Some(K::api_version(&()).into_owned()),
        kind: Some(kind.clone()),
        name: meta.name.clone(),
        namespace: meta.namespace.clone(),
        uid: meta.uid.clone(),
        resource_version: meta.resource_version.clone(),
        field_path: None,
    };
    let event = Event {
        type_: EventType::Warning,
        reason: "InvalidObject".into(),
        note: Some(invalid_note(&kind, &invalid.error)),
        action: "Reconcile".into(),
        secondary: None,
    };
    if let Err(err) = recorder.publish(&event, &reference).await {
        tracing::warn!(kind = %kind, object = %object, error = %err, "could not record an Event");
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn failures_are_counted_per_object_and_forgotten() {
        let backoff = Backoff::default();
        assert_eq!(
            backoff.failed("a", Category::Transient),
            Action::requeue(Duration::from_secs(1))
        );
        assert_eq!(
            backoff.failed("a", Category::Transient),
            Action::requeue(Duration::from_secs(2))
        );
        assert_eq!(
            backoff.failed("b", Category::Transient),
            Action::requeue(Duration::from_secs(1))
        );
        assert_eq!(backoff.failing(), 2);
        backoff.forget("a");
        assert_eq!(backoff.failing(), 1);
        assert_eq!(
            backoff.failed("a", Category::Transient),
            Action::requeue(Duration::from_secs(1))
        );
    }

    #[test]
    fn kube_errors_are_categorized() {
        let api = |code: u16| {
            kube::Error::Api(
                kube::core::Status::failure("x", "y")
                    .with_code(code)
                    .boxed(),
            )
        };
        let cases = [
            (api(422), Category::Invalid),
            (api(400), Category::Invalid),
            (api(409), Category::Transient),
            (api(500), Category::Transient),
            (api(503), Category::Transient),
            (api(403), Category::Transient),
            (api(429), Category::Transient),
        ];
        for (err, category) in cases {
            assert_eq!(Category::of_kube(&err), category, "{err}");
        }
    }

    #[derive(Debug)]
    struct Failed(Category);

    impl std::fmt::Display for Failed {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(f, "failed ({})", self.0.as_str())
        }
    }

    impl Categorized for Failed {
        fn category(&self) -> Category {
            self.0
        }
    }

    #[test]
    fn work_is_done_on_success_or_an_invalid_failure_only() {
        let cases = [
            (Ok(()), true, "success"),
            (
                Err(Failed(Category::Invalid)),
                true,
                "the object is wrong: handled",
            ),
            (
                Err(Failed(Category::Transient)),
                false,
                "a retry is no progress",
            ),
        ];
        for (result, expected, why) in cases {
            assert_eq!(done(&result), expected, "{why}");
        }
    }

    #[test]
    fn failed_reconciles_are_counted_by_kind_category_and_step() {
        let metrics = LoopMetrics::default();
        let mut registry = Registry::with_prefix("handoff_controller");
        metrics.register(&mut registry);
        Backoff::default().failed_reconcile(
            &k8s_openapi::api::core::v1::ConfigMap::default(),
            &Failed(Category::Transient),
            "patch_status",
            &metrics,
        );
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).expect("encode");
        assert!(
            text.contains(
                "handoff_controller_reconcile_errors_total{kind=\"ConfigMap\",category=\"transient\",step=\"patch_status\"} 1"
            ),
            "{text}"
        );
    }

    #[test]
    fn invalid_notes_are_bounded_and_name_the_kind() {
        let short = invalid_note("Handoff", "missing field `spec`");
        assert!(short.contains("this Handoff does not match"), "{short}");
        assert!(short.contains("missing field `spec`"), "{short}");
        let long = invalid_note("Handoff", &"é".repeat(2000));
        assert!(long.len() <= 1024, "{}", long.len());
        assert!(long.ends_with('…'));
    }
}
