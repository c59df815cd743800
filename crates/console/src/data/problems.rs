//! What needs a person's attention in a namespace: objects that are not
//! their key's handoff (`KeyBound=False`: twins and squats), bodies that
//! failed the lint, how far the PostgreSQL mirror is behind, and whether
//! the controller is alive.
//!
//! Mirror lag is read from the handoffs themselves, as the person: a
//! handoff whose `Mirrored` condition is not `True` for its current
//! generation waits for the mirror, and the page says how many wait and
//! since when the oldest does. The controller's liveness is its leader
//! Lease (`handoff-controller`, in the namespace itself — a team running
//! its own controller — or else in `handoff-system`, where config/ installs
//! it): renewed within its duration is alive.

use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::coordination::v1::Lease;
use kube::ResourceExt;
use kube::api::{Api, ListParams};

use super::errors::{Doing, ReadError};
use super::reads::{all, api};
use super::rows::lint_status;
use crate::model::{Health, LintStatus, Problem, ProblemsPage};
use handoff_bridge::auth::Caller;
use handoff_bridge::call::Services;
use handoff_core::api::Handoff;
use handoff_core::handoff::view::updated_at;
use handoff_core::handoff::{KEY_BOUND, MIRRORED, canonical};

/// Most handoffs the page reads.
const MAX_HANDOFFS: usize = 10_000;

/// The controller's leader Lease (its `--lease-name` default).
const LEASE_NAME: &str = "handoff-controller";
/// Where config/ runs the controller, and so its Lease.
const SYSTEM_NAMESPACE: &str = "handoff-system";

/// The condition `type_` of `h`, if set for its current generation.
fn current<'a>(h: &'a Handoff, type_: &str) -> Option<&'a str> {
    h.status
        .as_ref()?
        .conditions
        .iter()
        .find(|c| c.type_ == type_ && c.observed_generation == h.metadata.generation)
        .map(|c| c.status.as_str())
}

/// Objects that are not their key's handoff.
pub(super) fn unbound(handoffs: &[Handoff]) -> Vec<Problem> {
    handoffs
        .iter()
        .filter_map(|h| {
            let condition = h.status.as_ref().and_then(|s| {
                s.conditions
                    .iter()
                    .find(|c| c.type_ == KEY_BOUND && c.status == "False")
            });
            let message = match condition {
                Some(c) => c.message.clone(),
                None if !canonical(h) => format!(
                    "Its name is not the one derived from its key, so it is not the key's handoff \
                     (the controller has not reported it yet). Remove it with `kubectl delete \
                     handoff {} -n {}`.",
                    h.name_any(),
                    h.namespace().unwrap_or_default()
                ),
                None => return None,
            };
            Some(Problem {
                name: h.name_any(),
                key: h.spec.handoff_key.clone(),
                message,
            })
        })
        .collect()
}

/// Handoffs whose body failed the lint.
pub(super) fn lint_failed(handoffs: &[Handoff]) -> Vec<Problem> {
    handoffs
        .iter()
        .filter(|h| canonical(h))
        .filter_map(|h| match lint_status(h) {
            LintStatus::Failed(message) => Some(Problem {
                name: h.name_any(),
                key: h.spec.handoff_key.clone(),
                message,
            }),
            _ => None,
        })
        .collect()
}

/// How far the mirror is behind, from the handoffs' `Mirrored` conditions.
pub(super) fn mirror_health(handoffs: &[Handoff], now: Timestamp) -> Health {
    let current_ones: Vec<&Handoff> = handoffs.iter().filter(|h| canonical(h)).collect();
    if current_ones.is_empty() {
        return Health::Healthy("There are no handoffs to mirror.".into());
    }
    let reported = current_ones.iter().any(|h| {
        h.status
            .as_ref()
            .is_some_and(|s| s.conditions.iter().any(|c| c.type_ == MIRRORED))
    });
    if !reported {
        return Health::Unknown(
            "The controller has reported no mirror row for any handoff here: it may run without \
             the PostgreSQL mirror."
                .into(),
        );
    }
    let waiting: Vec<&&Handoff> = current_ones
        .iter()
        .filter(|h| current(h, MIRRORED) != Some("True"))
        .collect();
    let total = current_ones.len();
    let Some(oldest) = waiting
        .iter()
        .filter_map(|h| updated_at(h))
        .map(|t| t.0)
        .min()
    else {
        return match waiting.len() {
            0 => Health::Healthy(format!("All {total} handoffs are in the mirror.")),
            n => Health::Degraded(format!(
                "{n} of {total} handoffs are not in the mirror yet."
            )),
        };
    };
    let lag = now.duration_since(oldest).as_secs().max(0);
    Health::Degraded(format!(
        "{} of {total} handoffs are not in the mirror yet; the oldest of them was written at {oldest} \
         ({lag} s ago).",
        waiting.len()
    ))
}

/// Whether the controller is alive, from its leader Lease (`None`: not found).
pub(super) fn liveness(lease: Option<&Lease>, now: Timestamp) -> Health {
    let Some(lease) = lease else {
        return Health::Unknown(format!(
            "There is no controller Lease {LEASE_NAME} in this namespace or in {SYSTEM_NAMESPACE}: \
             the controller may not be installed, or it uses another Lease."
        ));
    };
    let spec = lease.spec.clone().unwrap_or_default();
    let holder = spec.holder_identity.filter(|h| !h.is_empty());
    let (Some(holder), Some(renewed)) = (holder, spec.renew_time.map(|t| t.0)) else {
        return Health::Degraded(
            "No controller holds its Lease: no controller is running, or it just stopped.".into(),
        );
    };
    let duration =
        Duration::from_secs(u64::try_from(spec.lease_duration_seconds.unwrap_or(15)).unwrap_or(15));
    let age = now.duration_since(renewed).as_secs().max(0);
    if age.unsigned_abs() <= duration.as_secs() {
        Health::Healthy(format!(
            "Controller {holder} renewed its Lease at {renewed} ({age} s ago)."
        ))
    } else {
        Health::Degraded(format!(
            "Controller {holder} last renewed its Lease at {renewed}, {age} s ago, past its {} s \
             duration: the controller may be down.",
            duration.as_secs()
        ))
    }
}

/// The controller's Lease as the person reads it: here, else in
/// `handoff-system`; an Unknown health when it cannot be read.
async fn controller(caller: &Caller, now: Timestamp) -> Health {
    let mut forbidden = false;
    for namespace in [caller.store().namespace(), SYSTEM_NAMESPACE] {
        let leases: Api<Lease> = Api::namespaced(caller.client().clone(), namespace);
        match leases.get_opt(LEASE_NAME).await {
            Ok(Some(lease)) => return liveness(Some(&lease), now),
            Ok(None) => {}
            Err(kube::Error::Api(status)) if status.code == 403 => forbidden = true,
            Err(err) => {
                tracing::warn!(error = %err, namespace, "cannot read the controller's Lease");
                return Health::Unknown(
                    "The Kubernetes API did not answer when asked for the controller's Lease."
                        .into(),
                );
            }
        }
    }
    if forbidden {
        return Health::Unknown(format!(
            "You may not read the controller's Lease ({LEASE_NAME}, coordination.k8s.io), so \
             whether it is alive is not known."
        ));
    }
    liveness(None, now)
}

/// What needs attention in the caller's namespace.
pub async fn problems(caller: &Caller, services: &Services) -> Result<ProblemsPage, ReadError> {
    let namespace = caller.store().namespace();
    let doing = Doing {
        action: "list handoffs",
        namespace,
    };
    let now = Timestamp::now();
    let (handoffs, params) = (api::<Handoff>(caller), ListParams::default());
    let (listed, controller) = futures::join!(
        all(&handoffs, &params, MAX_HANDOFFS),
        controller(caller, now),
    );
    let (handoffs, cut) = listed.map_err(|e| doing.kube(&e, "handoffs"))?;
    let mut mirror = mirror_health(&handoffs, now);
    if cut {
        mirror = Health::Unknown(format!(
            "The namespace holds more than {MAX_HANDOFFS} handoffs, more than this page reads: \
             the mirror's lag is not known."
        ));
    } else if services.mirror.is_none()
        && let Health::Healthy(text) | Health::Degraded(text) = &mut mirror
    {
        text.push_str(
            " (This console runs without the mirror: revisions and diffs are not shown.)",
        );
    }
    Ok(ProblemsPage {
        namespace: namespace.to_owned(),
        unbound: unbound(&handoffs),
        lint_failed: lint_failed(&handoffs),
        mirror,
        controller,
    })
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::coordination::v1::LeaseSpec;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;

    use super::*;
    use crate::data::rows::fixture::{at, condition, stored};
    use handoff_core::handoff::LINTED;

    fn health_kind(h: &Health) -> &'static str {
        match h {
            Health::Healthy(_) => "healthy",
            Health::Degraded(_) => "degraded",
            Health::Unknown(_) => "unknown",
        }
    }

    #[test]
    fn twins_squats_and_failed_lint_are_listed() {
        let good = stored("a", "b", 10, vec![condition(LINTED, "True", 1)]);
        let failed = stored("f", "b", 10, vec![condition(LINTED, "False", 1)]);
        let mut twin = stored("a", "b", 10, vec![condition(KEY_BOUND, "False", 1)]);
        twin.metadata.name = Some("twin-of-a".into());
        let mut unreported = stored("s", "b", 10, Vec::new());
        unreported.metadata.name = Some("squat".into());
        let all = [good, failed, twin, unreported];
        let names = |p: Vec<Problem>| {
            p.into_iter()
                .map(|p| (p.name, p.message))
                .collect::<Vec<_>>()
        };
        let got = names(unbound(&all));
        assert_eq!(got.len(), 2);
        assert_eq!(got[0], ("twin-of-a".into(), "KeyBound is False".into()));
        assert_eq!(got[1].0, "squat");
        assert!(
            got[1].1.contains("kubectl delete handoff squat -n team"),
            "{}",
            got[1].1
        );
        let failed = names(lint_failed(&all));
        assert_eq!(failed, [(name_of("f"), "Linted is False".to_owned())]);
    }

    fn name_of(key: &str) -> String {
        handoff_core::api::naming::name_for_key(key)
    }

    #[test]
    fn mirror_lag_is_counted_from_the_conditions() {
        let mirrored =
            |key, updated| stored(key, "b", updated, vec![condition(MIRRORED, "True", 1)]);
        let waiting =
            |key, updated| stored(key, "b", updated, vec![condition(MIRRORED, "False", 1)]);
        let mut old_generation = mirrored("g", 50);
        old_generation.metadata.generation = Some(2);
        let plain = stored("p", "b", 10, Vec::new());
        // (handoffs, health, fragment)
        let cases: [(Vec<Handoff>, &str, &str); 5] = [
            (Vec::new(), "healthy", "no handoffs"),
            (
                vec![plain.clone()],
                "unknown",
                "without the PostgreSQL mirror",
            ),
            (
                vec![mirrored("a", 10), mirrored("b", 20)],
                "healthy",
                "All 2 handoffs",
            ),
            (
                vec![mirrored("a", 10), waiting("b", 40), old_generation, plain],
                "degraded",
                "3 of 4 handoffs are not in the mirror yet; the oldest of them was written at 1970-01-01T00:00:10Z (90 s ago)",
            ),
            (vec![waiting("b", 40)], "degraded", "(60 s ago)"),
        ];
        for (handoffs, kind, fragment) in cases {
            let got = mirror_health(&handoffs, at(100));
            let text = format!("{got:?}");
            assert_eq!(health_kind(&got), kind, "{text}");
            assert!(text.contains(fragment), "{fragment:?} not in {text}");
        }
    }

    fn lease(holder: Option<&str>, renewed: Option<i64>) -> Lease {
        Lease {
            spec: Some(LeaseSpec {
                holder_identity: holder.map(Into::into),
                renew_time: renewed.map(|s| MicroTime(at(s))),
                lease_duration_seconds: Some(15),
                ..LeaseSpec::default()
            }),
            ..Lease::default()
        }
    }

    #[test]
    fn the_controller_is_alive_while_it_renews_its_lease() {
        // (lease, health, fragment)
        let cases = [
            (None, "unknown", "no controller Lease handoff-controller"),
            (
                Some(lease(Some("pod-a"), Some(95))),
                "healthy",
                "pod-a renewed its Lease",
            ),
            (
                Some(lease(Some("pod-a"), Some(85))),
                "healthy",
                "(15 s ago)",
            ),
            (
                Some(lease(Some("pod-a"), Some(60))),
                "degraded",
                "40 s ago, past its 15 s duration",
            ),
            (
                Some(lease(Some(""), Some(95))),
                "degraded",
                "No controller holds",
            ),
            (Some(lease(None, None)), "degraded", "No controller holds"),
        ];
        for (lease, kind, fragment) in cases {
            let got = liveness(lease.as_ref(), at(100));
            let text = format!("{got:?}");
            assert_eq!(health_kind(&got), kind, "{text}");
            assert!(
                text.to_lowercase().contains(&fragment.to_lowercase()),
                "{fragment:?} not in {text}"
            );
        }
    }
}
