//! What the benchmarks (`make bench`) share: a control plane that accepts a
//! static bearer token (its etcd sized for the scaling benchmark),
//! percentile summaries, memory readings of child processes and the
//! apiserver's count of writes. Nothing here asserts speed; benchmarks print
//! ratios.

use std::ops::Range;
use std::time::{Duration, Instant};

use futures::StreamExt;
use handoff_core::api::Handoff;
use handoff_core::api::naming::{labels_for, name_for_key};
use kube::api::{Api, Patch, PatchParams};

use crate::spec::{Fields, spec};
use crate::{ControlPlane, PlaneOptions};

/// How often a long fill prints its progress.
const PROGRESS_EVERY: Duration = Duration::from_secs(15);

/// The bearer token of the benchmark's agent (in `system:masters`).
pub const TOKEN: &str = "bench-token-0123456789abcdef";

/// etcd's `--quota-backend-bytes` on the benchmark's plane: 4 GiB, for the
/// scaling benchmark's last stage of 100,000 handoffs.
///
/// Measured (`etcd_mvcc_db_total_size_in_bytes`, scaling bench, 2 KiB
/// bodies): etcd's database grows ~10 KiB per handoff (98 MiB at 10,000)
/// with every revision kept — the agent's write, the controller's status
/// write and one Event, each a full copy with its managed fields. The
/// apiserver compacts old revisions every 5 minutes (its default
/// `--etcd-compaction-interval`), but a stage's writes come faster than
/// that, so a stage can hold all its revisions; and compaction only frees
/// pages for reuse, the file never shrinks (no defragmentation here). So
/// 100,000 handoffs need ~1 GiB: the default quota (2 GiB) leaves too
/// little room for slower compaction under load and for Events of retries,
/// 4 GiB leaves four times that, under etcd's suggested maximum of 8 GiB.
/// The quota is a limit, not an allocation: etcd's memory follows what the
/// database holds (~180 MiB at 10,000 handoffs).
pub const ETCD_QUOTA_BYTES: u64 = 4 << 30;
/// A local control plane that accepts [`TOKEN`], with the CRDs installed and
/// etcd's quota at [`ETCD_QUOTA_BYTES`].
pub async fn plane() -> anyhow::Result<ControlPlane> {
    let options = PlaneOptions {
        etcd_quota_bytes: Some(ETCD_QUOTA_BYTES),
        ..PlaneOptions::default()
    };
    crate::plane_with_admin_token_and(TOKEN, "bench", options).await
}

/// A client of `plane` that authenticates with [`TOKEN`] (as the agent of
/// the benchmarks, not as the admin).
pub async fn agent_client(plane: &ControlPlane) -> anyhow::Result<kube::Client> {
    let mut config =
        kube::Config::from_custom_kubeconfig(plane.kubeconfig().clone(), &Default::default())
            .await?;
    config.auth_info = kube::config::AuthInfo {
        token: Some(TOKEN.to_owned().into()),
        ..Default::default()
    };
    Ok(kube::Client::try_from(config)?)
}

/// The apiserver's count of writes (`apiserver_request_total` of the verbs
/// APPLY, PATCH, POST, PUT and DELETE) since it started, by what they wrote.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Writes {
    /// To `handoffs` (the spec, labels, finalizers: the object itself).
    pub spec: f64,
    /// To `handoffs/status`.
    pub status: f64,
    /// To `events` (core or `events.k8s.io`).
    pub events: f64,
    /// To anything else (Leases of leader election, namespaces, …).
    pub other: f64,
}

const WRITE_VERBS: [&str; 5] = ["APPLY", "PATCH", "POST", "PUT", "DELETE"];

impl Writes {
    /// The writes counted in a kube-apiserver `/metrics` text.
    pub fn parse(metrics: &str) -> Self {
        let mut writes = Self::default();
        for line in metrics.lines() {
            let Some(rest) = line.strip_prefix("apiserver_request_total{") else {
                continue;
            };
            let Some((labels, value)) = rest.rsplit_once('}') else {
                continue;
            };
            let Ok(value) = value.trim().parse::<f64>() else {
                continue;
            };
            let labels = labels_of(labels);
            let label = |name: &str| {
                labels
                    .iter()
                    .find(|(k, _)| k == name)
                    .map_or("", |(_, v)| v.as_str())
            };
            if !WRITE_VERBS.contains(&label("verb")) {
                continue;
            }
            let slot = match (label("resource"), label("subresource")) {
                ("handoffs", "") => &mut writes.spec,
                ("handoffs", "status") => &mut writes.status,
                ("events", _) => &mut writes.events,
                _ => &mut writes.other,
            };
            *slot += value;
        }
        writes
    }

    /// The writes of `self` that `before` had not counted yet.
    pub fn since(&self, before: &Self) -> Self {
        Self {
            spec: self.spec - before.spec,
            status: self.status - before.status,
            events: self.events - before.events,
            other: self.other - before.other,
        }
    }

    /// Writes to Handoffs, their status and Events (what handoffs cause).
    pub fn of_handoffs(&self) -> f64 {
        self.spec + self.status + self.events
    }
}

/// The `name="value"` pairs of a metrics line's label set (`\"`, `\\`
/// and `\n` unescaped).
fn labels_of(text: &str) -> Vec<(String, String)> {
    let mut pairs = Vec::new();
    let mut rest = text;
    while let Some((name, after)) = rest.split_once("=\"") {
        let mut value = String::new();
        let mut chars = after.char_indices();
        let mut end = after.len();
        while let Some((i, c)) = chars.next() {
            match c {
                '\\' => match chars.next() {
                    Some((_, 'n')) => value.push('\n'),
                    Some((_, other)) => value.push(other),
                    None => {}
                },
                '"' => {
                    end = i + 1;
                    break;
                }
                _ => value.push(c),
            }
        }
        pairs.push((name.trim_start_matches(',').trim().to_owned(), value));
        rest = &after[end..];
    }
    pairs
}

/// The apiserver's [`Writes`] so far, read from its `/metrics` with `client`
/// (an admin's).
pub async fn apiserver_writes(client: &kube::Client) -> anyhow::Result<Writes> {
    let request = http::Request::get("/metrics").body(Vec::new())?;
    Ok(Writes::parse(&client.request_text(request).await?))
}

/// Median and p99 of `samples`, in microseconds (sorts them); zeros when
/// there are none.
pub fn median_p99(samples: &mut [Duration]) -> (f64, f64) {
    if samples.is_empty() {
        return (0.0, 0.0);
    }
    samples.sort();
    let at = |q: f64| {
        let index = ((samples.len() - 1) as f64 * q).round() as usize;
        samples[index].as_secs_f64() * 1e6
    };
    (at(0.5), at(0.99))
}

/// A `/proc/<pid>/status` memory field (`VmRSS`: resident now, `VmHWM`:
/// peak resident), in MiB.
pub fn memory_mib(pid: u32, field: &str) -> Option<f64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status_field_kib(&status, field).map(|kib| kib as f64 / 1024.0)
}

/// `field` (in kB) of a `/proc/<pid>/status` text.
fn status_field_kib(status: &str, field: &str) -> Option<u64> {
    status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// This machine's core count, for report headers.
pub fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, usize::from)
}

/// `done` of `total` with the rate since `since` and the time left at it.
pub fn progress(done: usize, total: usize, since: Instant) -> String {
    let rate = done as f64 / since.elapsed().as_secs_f64().max(1e-3);
    let left = total.saturating_sub(done) as f64 / rate.max(1e-3);
    format!("{done} / {total} ({rate:.0}/s, ~{left:.0} s left)")
}

/// Writes handoffs `range` with server-side apply (field manager
/// `bench-writer`), 32 in flight: handoff `i` has the key and project
/// `key_of(i)`, repo `org/repo`, kind `issue` and a body of `body_bytes`
/// bytes. Prints progress under `stage` (see [`apply_all`]).
pub async fn fill(
    api: &Api<Handoff>,
    range: Range<usize>,
    body_bytes: usize,
    key_of: impl Fn(usize) -> (String, String),
    stage: &str,
) -> anyhow::Result<()> {
    let body = "x".repeat(body_bytes);
    let handoff_of = |i| {
        let (key, project) = key_of(i);
        let mut h = Handoff::new(
            &name_for_key(&key),
            spec(key)
                .project(project.clone())
                .repo("org/repo")
                .kind("issue")
                .body(body.clone())
                .by("bench"),
        );
        h.metadata.labels = Some(labels_for(&project, Some("org/repo"), Some("issue")));
        h
    };
    apply_all(
        range,
        32,
        "bench-writer",
        |_| api.clone(),
        handoff_of,
        stage,
    )
    .await
}

/// Applies `handoff_of(i)` for each `i` of `range` through `api_of(i)`
/// with server-side apply as `field_manager` (forced), `in_flight` at
/// once; the first failure ends it. Prints how many are written every 15 s
/// under `stage`.
pub async fn apply_all(
    range: Range<usize>,
    in_flight: usize,
    field_manager: &str,
    api_of: impl Fn(usize) -> Api<Handoff>,
    handoff_of: impl Fn(usize) -> Handoff,
    stage: &str,
) -> anyhow::Result<()> {
    let params = PatchParams::apply(field_manager).force();
    let total = range.len();
    let mut results = futures::stream::iter(range)
        .map(|i| {
            let (api, params, h) = (api_of(i), params.clone(), handoff_of(i));
            async move {
                let name = h.metadata.name.clone().unwrap_or_default();
                api.patch(&name, &params, &Patch::Apply(&h)).await
            }
        })
        .buffer_unordered(in_flight);
    let (started, mut reported, mut done) = (Instant::now(), Instant::now(), 0);
    while let Some(result) = results.next().await {
        result?;
        done += 1;
        if reported.elapsed() >= PROGRESS_EVERY {
            eprintln!(
                "bench: {stage}:   written {}",
                progress(done, total, started)
            );
            reported = Instant::now();
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::{Writes, labels_of, median_p99, status_field_kib};

    #[test]
    fn percentiles_of_a_sample() {
        let mut samples: Vec<Duration> = (1..=100).rev().map(Duration::from_micros).collect();
        assert_eq!(median_p99(&mut samples), (51.0, 99.0));
        assert_eq!(median_p99(&mut [Duration::from_micros(7)]), (7.0, 7.0));
        assert_eq!(median_p99(&mut []), (0.0, 0.0));
    }

    #[test]
    fn status_fields_are_read_in_kib() {
        let status = "Name:\thandoff\nVmHWM:\t  165432 kB\nVmRSS:\t  120000 kB\n";
        assert_eq!(status_field_kib(status, "VmHWM"), Some(165_432));
        assert_eq!(status_field_kib(status, "VmRSS"), Some(120_000));
        assert_eq!(status_field_kib(status, "VmSwap"), None);
        assert_eq!(status_field_kib("VmRSSx: 1 kB", "VmRSS"), None);
    }

    #[test]
    fn writes_are_counted_by_what_they_wrote() {
        let metrics = r#"# HELP apiserver_request_total [STABLE] Counter of apiserver requests
# TYPE apiserver_request_total counter
apiserver_request_total{code="201",component="apiserver",dry_run="",group="handoff.dev",resource="handoffs",scope="resource",subresource="",verb="APPLY",version="v1alpha1"} 1000
apiserver_request_total{code="200",component="apiserver",dry_run="",group="handoff.dev",resource="handoffs",scope="resource",subresource="",verb="APPLY",version="v1alpha1"} 5
apiserver_request_total{code="200",component="apiserver",dry_run="",group="handoff.dev",resource="handoffs",scope="resource",subresource="",verb="PATCH",version="v1alpha1"} 7
apiserver_request_total{code="200",component="apiserver",dry_run="",group="handoff.dev",resource="handoffs",scope="resource",subresource="status",verb="PATCH",version="v1alpha1"} 2000
apiserver_request_total{code="200",component="apiserver",dry_run="",group="handoff.dev",resource="handoffs",scope="resource",subresource="",verb="GET",version="v1alpha1"} 9999
apiserver_request_total{code="200",component="apiserver",dry_run="",group="handoff.dev",resource="handoffs",scope="namespace",subresource="",verb="WATCH",version="v1alpha1"} 3
apiserver_request_total{code="201",component="apiserver",dry_run="",group="",resource="events",scope="resource",subresource="",verb="POST",version="v1"} 30
apiserver_request_total{code="200",component="apiserver",dry_run="",group="events.k8s.io",resource="events",scope="resource",subresource="",verb="PATCH",version="v1"} 4
apiserver_request_total{code="200",component="apiserver",dry_run="",group="coordination.k8s.io",resource="leases",scope="resource",subresource="",verb="PUT",version="v1"} 12
apiserver_request_total{code="200",component="apiserver",dry_run="",group="handoff.dev",resource="handoffs",scope="resource",subresource="",verb="DELETE",version="v1alpha1"} 1
apiserver_request_duration_seconds_count{resource="handoffs",subresource="",verb="APPLY"} 1005
"#;
        let writes = Writes::parse(metrics);
        assert_eq!(
            writes,
            Writes {
                spec: 1013.0,
                status: 2000.0,
                events: 34.0,
                other: 12.0,
            }
        );
        assert_eq!(writes.of_handoffs(), 3047.0);
        let before = Writes {
            spec: 13.0,
            status: 0.0,
            events: 4.0,
            other: 2.0,
        };
        assert_eq!(
            writes.since(&before),
            Writes {
                spec: 1000.0,
                status: 2000.0,
                events: 30.0,
                other: 10.0,
            }
        );
        assert_eq!(Writes::parse(""), Writes::default());
    }

    #[test]
    fn label_values_are_unescaped() {
        assert_eq!(
            labels_of(r#"a="1",b="x\"y}z",c="back\\slash\nline""#),
            [
                ("a".to_owned(), "1".to_owned()),
                ("b".to_owned(), "x\"y}z".to_owned()),
                ("c".to_owned(), "back\\slash\nline".to_owned()),
            ]
        );
        assert!(labels_of("").is_empty());
    }
}
