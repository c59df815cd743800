//! The webhook's metrics (prefix `handoff_webhook_`), served on
//! `--metrics-listen` by handoff-kube's telemetry endpoints. The webhook
//! runs with `failurePolicy: Fail`, so how many reviews it answers, what it
//! decides and how fast is what an operator watches; every label value is
//! from a fixed set (no name, namespace, key or user), so the series stay
//! few however many objects are written.

use std::sync::Arc;
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use handoff_kube::telemetry::Listed;

use crate::decision::Reason;

/// Labels of an answered review.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    /// `handoffs`, `handoffoffers`, `other` or `unknown` (a review that
    /// does not parse names none).
    resource: &'static str,
    /// `allowed`, `denied` or `malformed` (the body is no admission request).
    outcome: &'static str,
}

/// Labels of a decision.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct DecisionLabels {
    /// `allowed` or `denied`.
    decision: &'static str,
    /// [`Reason::as_str`].
    reason: &'static str,
}

/// What one review came to, for [`WebhookMetrics::record`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// Decided: allowed or denied, by reason.
    Decided {
        /// The request's resource (`request.resource.resource`).
        resource: &'static str,
        /// Why.
        reason: Reason,
    },
    /// The body was not an admission request.
    Malformed,
}

/// The webhook's metrics.
pub struct WebhookMetrics {
    registry: Registry,
    requests: Family<RequestLabels, Counter>,
    decisions: Family<DecisionLabels, Counter>,
    latency: Histogram,
}

impl WebhookMetrics {
    /// Registers `handoff_webhook_requests_total`,
    /// `handoff_webhook_decisions_total` and
    /// `handoff_webhook_request_duration_seconds`.
    pub fn new() -> Arc<Self> {
        let mut registry = Registry::with_prefix("handoff_webhook");
        let requests = Family::<RequestLabels, Counter>::default();
        let decisions = Family::<DecisionLabels, Counter>::default();
        // 0.5 ms to about 4 s: the apiserver gives up after timeoutSeconds (5).
        let latency = Histogram::new(exponential_buckets(0.0005, 2.0, 14));
        registry.register(
            "requests",
            "Admission reviews answered, by resource and outcome (allowed, denied, malformed)",
            Listed(requests.clone()),
        );
        registry.register(
            "decisions",
            "Admission decisions by decision (allowed, denied) and reason",
            Listed(decisions.clone()),
        );
        registry.register(
            "request_duration_seconds",
            "Time to answer an admission review, from its body read to its answer",
            latency.clone(),
        );
        Arc::new(Self {
            registry,
            requests,
            decisions,
            latency,
        })
    }

    /// Counts one answered review that took `elapsed`.
    pub(crate) fn record(&self, outcome: Outcome, elapsed: Duration) {
        self.latency.observe(elapsed.as_secs_f64());
        let (resource, outcome) = match outcome {
            Outcome::Malformed => ("unknown", "malformed"),
            Outcome::Decided { resource, reason } => {
                let decision = if reason.allows() { "allowed" } else { "denied" };
                self.decisions
                    .get_or_create(&DecisionLabels {
                        decision,
                        reason: reason.as_str(),
                    })
                    .inc();
                (resource, decision)
            }
        };
        self.requests
            .get_or_create(&RequestLabels { resource, outcome })
            .inc();
    }

    /// The OpenMetrics text exposition (every family listed, also
    /// before its first series).
    pub fn encode(&self) -> String {
        let mut out = String::new();
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }
}

/// The `resource` label of a request's resource: the two the webhook is
/// registered for, else `other`.
pub(crate) fn resource_label(resource: &str) -> &'static str {
    match resource {
        "handoffs" => "handoffs",
        "handoffoffers" => "handoffoffers",
        _ => "other",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reviews_are_counted_by_resource_outcome_and_reason() {
        let metrics = WebhookMetrics::new();
        let ms = Duration::from_millis(2);
        // (what happened, the series it adds one to)
        let cases = [
            (
                Outcome::Decided {
                    resource: "handoffs",
                    reason: Reason::NameNotDerived,
                },
                [
                    "handoff_webhook_requests_total{resource=\"handoffs\",outcome=\"denied\"} 1",
                    "handoff_webhook_decisions_total{decision=\"denied\",reason=\"name_not_derived\"} 1",
                ],
            ),
            (
                Outcome::Decided {
                    resource: "handoffoffers",
                    reason: Reason::Checked,
                },
                [
                    "handoff_webhook_requests_total{resource=\"handoffoffers\",outcome=\"allowed\"} 1",
                    "handoff_webhook_decisions_total{decision=\"allowed\",reason=\"checked\"} 1",
                ],
            ),
            (
                Outcome::Malformed,
                [
                    "handoff_webhook_requests_total{resource=\"unknown\",outcome=\"malformed\"} 1",
                    "handoff_webhook_request_duration_seconds_count 3",
                ],
            ),
        ];
        for (outcome, _) in &cases {
            metrics.record(*outcome, ms);
        }
        let text = metrics.encode();
        for (_, series) in cases {
            for line in series {
                assert!(text.contains(line), "{line} not in {text}");
            }
        }
    }

    #[test]
    fn only_the_registered_resources_have_their_own_label() {
        for (resource, label) in [
            ("handoffs", "handoffs"),
            ("handoffoffers", "handoffoffers"),
            ("brainstormschedules", "other"),
            ("", "other"),
        ] {
            assert_eq!(resource_label(resource), label, "{resource}");
        }
    }
}
