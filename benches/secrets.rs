//! The credential detector (`handoff_core::secrets`): recall and false
//! alarms on the project's corpus (`tests/fixtures/secrets/`), and the cost
//! of scanning a body as large as the schema admits, clean and at its
//! worst, measured side by side in one run.
//!
//! - **clean**: a handoff of prose, code, paths, git SHAs and lockfile
//!   lines, repeated to 32 KiB: what nearly every write is.
//! - **keywords everywhere**: the corpus's honest texts repeated: every
//!   keyword of the pre-filter is present, so every pattern runs, and every
//!   decoded view is built.
//! - **credentials everywhere**: the corpus's true positives repeated: a
//!   finding on nearly every line.

use std::time::{Duration, Instant};

use handoff_core::secrets::find;
use handoff_testkit::bench::median_p99;
use handoff_testkit::previous::{Previous, beside};

include!(concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/secrets/corpus.rs"
));

/// The body size measured: the schema's largest body is 32 Ki characters.
const BODY_BYTES: usize = 32 * 1024;

const SAMPLES: usize = 300;

const SECTION: &str = "Credential detector";

/// `parts` joined by newlines, repeated to at most [`BODY_BYTES`].
fn body_of(parts: &[String]) -> String {
    let mut body = String::from("## State\n");
    'fill: loop {
        for part in parts {
            if body.len() + part.len() + 1 > BODY_BYTES {
                break 'fill;
            }
            body.push_str(part);
            body.push('\n');
        }
    }
    body
}

fn clean_body() -> String {
    let lines = [
        "The importer streams rows now; the progress bar in `cli/import.rs` is wired to `Progress`.",
        "- fixed in 4b825dc642cb6eb9a060e54bf8d69288fbee4904 (PR #212), reverted a1b2c3d",
        "- src/import/csv.rs: `fn read_header(&mut self) -> Result<Header, ImportError>`",
        "\"integrity\": \"sha512-WFN9zNpBmRlN1mGcqlgrIHkbIAbW7rQgRnQMZRKvY3dzpIvQ8iPOe1oc0yqVTH1qQr9oT5ZuH5gUiF3w6bP7Gw==\"",
        "github.com/spf13/cobra v1.8.1 h1:e5/vxKd/rZsfSJMUX1agtjeTDf+qv1/JdBF8gg5k9ZM=",
        "Next: handle the `;` delimiter (#219), document `--strict`, ask @maria about bad rows.",
        "    cargo test -p importer -- csv::tests::streams_large_files --nocapture",
    ];
    body_of(&lines.map(str::to_owned))
}

/// Median and p99 in µs of scanning `body`, and the findings.
fn measure(body: &str) -> (f64, f64, usize) {
    let found = find(body).len();
    let mut samples: Vec<Duration> = (0..SAMPLES)
        .map(|_| {
            let start = Instant::now();
            std::hint::black_box(find(std::hint::black_box(body)));
            start.elapsed()
        })
        .collect();
    let (median, p99) = median_p99(&mut samples);
    (median, p99, found)
}

fn main() {
    let previous =
        Previous::load(&std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("BENCHMARKS.md"));
    // The previous run's figure of a cell, as a number (a cell reads
    // `new (was old)`: its first number is the new one).
    let was = |row: &str, column: &str, digits: usize| {
        previous
            .as_ref()
            .and_then(|p| p.number(SECTION, row, column))
            .map(|n| format!("{n:.digits$}"))
    };

    let positives = true_positives();
    let honest = honest_texts();
    let right = positives
        .iter()
        .filter(|(rule, text)| find(text).first().map(|f| f.rule) == Some(*rule))
        .count();
    let alarms = honest.iter().filter(|text| !find(text).is_empty()).count();
    let rules: std::collections::BTreeSet<&str> = positives.iter().map(|(rule, _)| *rule).collect();

    println!("## {SECTION} (2 cores, {SAMPLES} samples per body)");
    println!();
    println!(
        "The corpus in `tests/fixtures/secrets/`: {} true positives of {} rule ids, {} honest texts.",
        positives.len(),
        rules.len(),
        honest.len()
    );
    println!();
    println!("| corpus | texts | named right | missed or misnamed | false alarms | rate |");
    println!("|---|---:|---:|---:|---:|---|");
    let recall = format!("recall {:.3}", right as f64 / positives.len() as f64);
    let false_rate = format!("false alarms {:.3}", alarms as f64 / honest.len() as f64);
    println!(
        "| true positives | {} | {right} | {} | — | {} |",
        positives.len(),
        positives.len() - right,
        beside(&recall, was("true positives", "rate", 3).as_deref())
    );
    println!(
        "| honest texts | {} | — | — | {alarms} | {} |",
        honest.len(),
        beside(&false_rate, was("honest texts", "rate", 3).as_deref())
    );
    println!();

    let bodies = [
        ("clean", clean_body()),
        ("keywords everywhere", body_of(&honest)),
        (
            "credentials everywhere",
            body_of(&positives.iter().map(|(_, t)| t.clone()).collect::<Vec<_>>()),
        ),
    ];
    let mut clean_median = 0.0;
    println!("| body (≤ 32 KiB) | bytes | findings | median µs | p99 µs | median / clean | goal |");
    println!("|---|---:|---:|---:|---:|---:|---|");
    for (name, body) in &bodies {
        eprintln!("bench: scanning the {name} body …");
        let (median, p99, found) = measure(body);
        if *name == "clean" {
            clean_median = median;
        }
        let goal = if *name == "clean" {
            "≤ 1000 µs (release)"
        } else {
            ""
        };
        println!(
            "| {name} | {} | {found} | {} | {p99:.0} | {:.1}× | {goal} |",
            body.len(),
            beside(
                &format!("{median:.0}"),
                was(name, "median µs", 0).as_deref()
            ),
            median / clean_median.max(f64::MIN_POSITIVE),
        );
    }
}
