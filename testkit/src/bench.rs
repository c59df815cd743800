//! What the benchmarks (`make bench`) share: a control plane that accepts a
//! static bearer token, percentile summaries and memory readings of child
//! processes. Nothing here asserts speed; benchmarks print ratios.

use std::time::Duration;

use crate::ControlPlane;

/// The bearer token of the benchmark's agent (in `system:masters`).
pub const TOKEN: &str = "bench-token-0123456789abcdef";

/// A local control plane that accepts [`TOKEN`], with the CRDs installed.
pub async fn plane() -> anyhow::Result<ControlPlane> {
    crate::plane_with_admin_token(TOKEN, "bench").await
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

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::{median_p99, status_field_kib};

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
}
