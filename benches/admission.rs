//! `make bench`: the latency of one admission review of `handoff webhook`
//! over loopback TLS, as the apiserver sends it: on one kept-alive
//! connection, and on a new TLS connection per review (what an apiserver
//! that does not reuse connections pays). Measured side by side in one run,
//! interleaved (kept-alive, new, kept-alive, …) so noise on a shared machine
//! hits both alike. Reported: median and p99 of each and their ratio,
//! beside the previous run's; nothing is asserted (the admission suite,
//! `tests/it/admission.rs`, asserts what the webhook answers).

use std::path::Path;
use std::time::{Duration, Instant};

use handoff_core::api::naming::name_for_key;
use handoff_testkit::WebhookProcess;
use handoff_testkit::admission::{connect, post, review};
use handoff_testkit::bench::{self, median_p99};
use handoff_testkit::previous::{Previous, medians};

/// Reviews of each kind, after [`WARMUP`] of each.
const ITERATIONS: usize = 500;
const WARMUP: usize = 50;
/// The section of BENCHMARKS.md this bench writes.
const SECTION: &str = "Admission review over loopback";

fn main() -> anyhow::Result<()> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let previous = Previous::load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("BENCHMARKS.md"));
    let webhook = WebhookProcess::start(Path::new(env!("CARGO_BIN_EXE_handoff")))?;
    let key = "acme/api#42";
    let honest = review("uid", &name_for_key(key), key, &"state: fine\n".repeat(200));
    let (mut kept, mut fresh) = rt.block_on(async {
        let mut stream = connect(&webhook.addr(), webhook.ca_pem()).await?;
        let (mut kept, mut fresh) = (Vec::new(), Vec::new());
        for i in 0..WARMUP + ITERATIONS {
            let started = Instant::now();
            post(&mut stream, &honest).await?;
            let kept_took = started.elapsed();
            let started = Instant::now();
            let mut new = connect(&webhook.addr(), webhook.ca_pem()).await?;
            post(&mut new, &honest).await?;
            let fresh_took = started.elapsed();
            if i >= WARMUP {
                kept.push(kept_took);
                fresh.push(fresh_took);
            }
        }
        anyhow::Ok::<(Vec<Duration>, Vec<Duration>)>((kept, fresh))
    })?;
    let (kept_median, kept_p99) = median_p99(&mut kept);
    let (fresh_median, fresh_p99) = median_p99(&mut fresh);
    println!("\n## {SECTION} ({} cores)\n", bench::cores());
    println!(
        "`handoff webhook` answering an honest Handoff CREATE (a 2.4 KB body), {ITERATIONS} reviews of \
         each kind, interleaved.\n"
    );
    println!("| review | median µs | p99 µs |\n|---|---:|---:|");
    println!("| on a kept-alive connection | {kept_median:.0} | {kept_p99:.0} |");
    println!("| on a new TLS connection | {fresh_median:.0} | {fresh_p99:.0} |");
    let label = "new connection / kept-alive";
    println!(
        "\n| ratio | median | p99 | previous run ({}) median / p99 |\n|---|---:|---:|---:|",
        previous.as_ref().map_or("none", Previous::date)
    );
    println!(
        "| {label} | {:.2} | {:.2} | {} |",
        fresh_median / kept_median,
        fresh_p99 / kept_p99,
        medians(previous.as_ref(), SECTION, label)
    );
    Ok(())
}
