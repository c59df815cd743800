//! A Prometheus registry that remembers what was registered in it: each
//! metric's name, type and help. The text exposition leaves out a labelled
//! family until its first series exists, so the encoded text cannot say
//! which metrics a component has; this list can (tests check the alerts'
//! and the dashboard's queries against it).

use prometheus_client::metrics::MetricType;
use prometheus_client::registry::{Metric, Registry};

/// One registered metric.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Registered {
    /// The full name, prefix included, as in a `# TYPE` line.
    pub name: String,
    /// Counter, gauge, histogram, …
    pub kind: MetricType,
    /// The help text.
    pub help: String,
}

impl Registered {
    /// The series names a query can select: a counter's `_total`, a
    /// histogram's `_bucket`, `_sum` and `_count`, else the name.
    pub fn series(&self) -> Vec<String> {
        match self.kind {
            MetricType::Counter => vec![format!("{}_total", self.name)],
            MetricType::Histogram => ["_bucket", "_sum", "_count"]
                .iter()
                .map(|suffix| format!("{}{suffix}", self.name))
                .collect(),
            _ => vec![self.name.clone()],
        }
    }
}

/// A [`Registry`] with a prefix, and the list of what it holds.
#[derive(Debug)]
pub struct ListedRegistry {
    registry: Registry,
    prefix: String,
    listed: Vec<Registered>,
}

impl ListedRegistry {
    /// An empty registry whose metrics' names start with `prefix_`.
    pub fn with_prefix(prefix: &str) -> Self {
        Self {
            registry: Registry::with_prefix(prefix),
            prefix: prefix.to_owned(),
            listed: Vec::new(),
        }
    }

    /// Registers `metric` as `name` (without the prefix and, for a
    /// counter, without `_total`), and lists it.
    pub fn register(&mut self, name: &str, help: &str, metric: impl Metric) {
        self.listed.push(Registered {
            name: format!("{}_{name}", self.prefix),
            kind: metric.metric_type(),
            help: help.to_owned(),
        });
        self.registry.register(name, help, metric);
    }

    /// What was registered, in order.
    pub fn listed(&self) -> &[Registered] {
        &self.listed
    }

    /// The OpenMetrics text exposition.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }
}

#[cfg(test)]
mod tests {
    use prometheus_client::metrics::counter::Counter;
    use prometheus_client::metrics::family::Family;
    use prometheus_client::metrics::gauge::Gauge;
    use prometheus_client::metrics::histogram::Histogram;

    use super::*;

    #[derive(Clone, Debug, Hash, PartialEq, Eq, prometheus_client::encoding::EncodeLabelSet)]
    struct Labels {
        kind: String,
    }

    #[test]
    fn every_registered_metric_is_listed_with_its_series_even_without_one() {
        let mut registry = ListedRegistry::with_prefix("app");
        registry.register("calls", "Calls", Family::<Labels, Counter>::default());
        registry.register("depth", "Depth", Gauge::<i64>::default());
        registry.register("wait_seconds", "Wait", Histogram::new([1.0]));
        let series: Vec<String> = registry
            .listed()
            .iter()
            .flat_map(Registered::series)
            .collect();
        assert_eq!(
            series,
            [
                "app_calls_total",
                "app_depth",
                "app_wait_seconds_bucket",
                "app_wait_seconds_sum",
                "app_wait_seconds_count"
            ]
        );
        let text = registry.encode();
        assert!(
            !text.contains("app_calls"),
            "an empty family is not encoded: {text}"
        );
        assert!(text.contains("# HELP app_depth Depth"), "{text}");
    }
}
