//! `diff_handoff` (extension): a unified diff between two revisions of a
//! key from the PostgreSQL mirror's history (the `similar` crate), cut at
//! [`MAX_DIFF_BYTES`] on a line boundary (the result says so). Gated like
//! `get_handoff{revision}`; without the mirror, an error saying how to turn
//! it on.
//!
//! The work of one call is bounded, so that no caller's diff can starve
//! another tenant's calls: a line diff of two bodies of ~16,000 short lines
//! can take Myers' algorithm seconds of CPU. So the diff runs on a thread
//! of its own, never on an async worker, at the lowest CPU priority (Linux's
//! `SCHED_IDLE` policy, or nice [`DIFF_NICE`] where that is refused: any
//! thread serving another call takes the CPU from it at once, and the
//! scheduler places waking threads on its core as on an idle one); at most
//! [`MAX_CONCURRENT_DIFFS`] run at once in a process (a call beyond waits
//! its turn, within the call's timeout; a call that times out leaves its
//! diff to finish in its turn); and the search for the smallest diff stops
//! at [`DIFF_DEADLINE`] (`similar`'s deadline), after which `similar`
//! finishes with a correct but possibly longer diff, and the answer says
//! it is approximate. The unified text is written line by line into a
//! buffer that stops at [`MAX_DIFF_BYTES`], so a huge diff is never built
//! whole.
//!
//! The turns are a fair share of their own ([`crate::fair`]), keyed by the
//! caller: a caller has at most one diff running or first in line, and a
//! freed turn goes round-robin to the next caller with a diff waiting, so
//! one caller's many diffs delay another's by one diff, not by all of
//! them. A diff's call also holds its caller's slot of the bridge's fair
//! share while it runs.

use std::sync::{Arc, LazyLock};
use std::time::{Duration, Instant};

use rmcp::model::JsonObject;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::contract::{Answer, Call, CallError, Tool, answer, needs_mirror};
use super::definition::{definition, reads};
use crate::fair::FairShare;
use crate::profiles::Audience;
use handoff_core::api::validation::{self, FieldError};
use handoff_core::fairness::Shares;
use handoff_mirror::{ListedRow, Mirror};

const NAME: &str = "diff_handoff";

/// Longest diff answered, in bytes; a longer one is cut.
pub(crate) const MAX_DIFF_BYTES: usize = 16 * 1024;

/// Longest the search for the smallest diff may run; past it the diff is
/// finished quickly and is approximate (still correct).
pub(crate) const DIFF_DEADLINE: Duration = Duration::from_millis(500);

/// Most diffs computed at once in a bridge process (each on a thread of
/// its own); more wait their turn. One: a bridge replica keeps its other
/// cores for the calls of everyone else.
pub(crate) const MAX_CONCURRENT_DIFFS: usize = 1;

/// The nice value of a diff's thread (Linux; 0 is the default, 19 the lowest).
const DIFF_NICE: i32 = 19;

/// Most diffs of one caller waiting for a turn, and of all callers.
const MAX_QUEUED_DIFFS_PER_CALLER: usize = 16;
const MAX_QUEUED_DIFFS: usize = 256;

/// Longest a diff waits for its turn: within the call's timeout.
const DIFF_TURN_WAIT: Duration = Duration::from_secs(15);

/// The turns of [`MAX_CONCURRENT_DIFFS`], round-robin among callers.
static DIFF_TURNS: LazyLock<Arc<FairShare>> = LazyLock::new(|| {
    FairShare::unmetered(
        Shares {
            max_in_flight: MAX_CONCURRENT_DIFFS,
            per_caller: 1,
            queued_per_caller: MAX_QUEUED_DIFFS_PER_CALLER,
            max_queued: MAX_QUEUED_DIFFS,
        },
        DIFF_TURN_WAIT,
    )
});

/// The row of `diff_handoff` in the tool table.
pub(crate) const TOOL: Tool = Tool {
    name: NAME,
    audience: Audience::Writers,
    action: "get",
    definition: || {
        definition::<DiffArgs, DiffResult>(
            NAME,
            "Show what changed in a handoff between two revisions (numbers from list_revisions), as a \
             unified diff of the bodies (cut when longer than 16 KiB, and approximate when the bodies \
             take too long to compare; the answer says so).",
            reads(),
        )
    },
    call: |call, args| Box::pin(handle(call, args)),
};

/// Arguments of `diff_handoff`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DiffArgs {
    /// The continuation key.
    pub handoff_key: String,
    /// The older revision (1 or more).
    #[schemars(range(min = 1))]
    pub from: i64,
    /// The newer revision (1 or more).
    #[schemars(range(min = 1))]
    pub to: i64,
}

/// Result of `diff_handoff`.
#[derive(Debug, Serialize, JsonSchema, PartialEq)]
pub struct DiffResult {
    /// The key.
    pub handoff_key: String,
    /// The revision diffed from.
    pub from: i64,
    /// The revision diffed to.
    pub to: i64,
    /// The unified diff of the bodies (empty when identical).
    pub diff: String,
    /// True when the diff was cut at 16 KiB.
    pub truncated: bool,
    /// True when comparing the bodies took too long and the diff is
    /// approximate: correct, but maybe longer than the smallest.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub approximate: bool,
}

async fn handle(call: &Call<'_>, args: Option<JsonObject>) -> Result<Answer, CallError> {
    let args: DiffArgs = call.args(args)?;
    validation::handoff_key(&args.handoff_key)?;
    for (field, value) in [("from", args.from), ("to", args.to)] {
        if value < 1 {
            return Err(FieldError {
                field,
                rule: "a content revision number, 1 or more".into(),
                problem: format!("got {value}"),
            }
            .into());
        }
    }
    let Some(mirror) = call.mirror else {
        return Err(needs_mirror(NAME));
    };
    call.authorize("get").await?;
    let result = between(
        mirror,
        call.caller.known_username(),
        call.namespace(),
        &args.handoff_key,
        args.from,
        args.to,
    )
    .await?;
    let text = text(&result);
    Ok(answer(&result, text))
}

/// The diff of `key` from revision `from` to `to`, in `caller`'s turn; an
/// unknown revision is refused by name.
pub async fn between(
    mirror: &Mirror,
    caller: &str,
    namespace: &str,
    key: &str,
    from: i64,
    to: i64,
) -> Result<DiffResult, CallError> {
    let old = known(mirror, namespace, key, "from", from).await?;
    let new = known(mirror, namespace, key, "to", to).await?;
    let diffed = off_the_workers(caller, old.body, new.body, from, to).await?;
    Ok(DiffResult {
        handoff_key: key.to_owned(),
        from,
        to,
        diff: diffed.text,
        truncated: diffed.truncated,
        approximate: diffed.approximate,
    })
}

/// [`bounded`] with [`DIFF_DEADLINE`], on a thread of its own at a lower
/// priority, in `caller`'s turn (the turn is the thread's until it is done).
async fn off_the_workers(
    caller: &str,
    old: String,
    new: String,
    from: i64,
    to: i64,
) -> Result<Diffed, CallError> {
    let retriable = |why: String| CallError::Unsupported(format!("{why}; retriable: try again"));
    let turn = DIFF_TURNS
        .acquire(&Arc::from(caller))
        .await
        .map_err(|_| retriable("too many of this caller's diffs wait their turn".into()))?;
    let (done, diffed) = tokio::sync::oneshot::channel();
    std::thread::Builder::new()
        .name("handoff-diff".into())
        .spawn(move || {
            lower_priority();
            let deadline = Instant::now() + DIFF_DEADLINE;
            let _ = done.send(bounded(&old, &new, from, to, MAX_DIFF_BYTES, deadline));
            drop(turn);
        })
        .map_err(|e| retriable(format!("cannot start the diff ({e})")))?;
    diffed
        .await
        .map_err(|_| retriable("the diff stopped without an answer".into()))
}

/// Lowers the calling thread's CPU priority to [`DIFF_NICE`], then moves
/// it to the `SCHED_IDLE` policy. On Linux both change that one thread
/// (the process's other threads keep theirs); elsewhere nothing is
/// changed. A refusal (a sandbox without the call) leaves the priority as
/// it was (the nice value alone when only the policy is refused).
fn lower_priority() {
    #[cfg(target_os = "linux")]
    // SAFETY: `syscall(SYS_gettid)` and `setpriority` take plain integers;
    // `sched_setscheduler` reads the `sched_param` borrowed for the call.
    // None keeps a pointer or touches other memory of ours.
    unsafe {
        let thread = libc::syscall(libc::SYS_gettid);
        if libc::setpriority(libc::PRIO_PROCESS, thread as libc::id_t, DIFF_NICE) != 0 {
            tracing::debug!("cannot lower the diff thread's priority");
        }
        let idle = libc::sched_param { sched_priority: 0 };
        if libc::sched_setscheduler(0, libc::SCHED_IDLE, &idle) != 0 {
            tracing::debug!("cannot move the diff thread to SCHED_IDLE");
        }
    }
}

async fn known(
    mirror: &Mirror,
    namespace: &str,
    key: &str,
    field: &'static str,
    revision: i64,
) -> Result<ListedRow, CallError> {
    mirror
        .revision(namespace, key, revision)
        .await?
        .ok_or_else(|| {
            FieldError {
                field,
                rule: "a revision the history holds (see list_revisions)".into(),
                problem: format!("`{key}` has no revision {revision} in the history"),
            }
            .into()
        })
}

/// A rendered diff: its text and how it was bounded.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Diffed {
    /// The unified diff (empty when identical).
    pub(crate) text: String,
    /// Cut at the byte limit (after the last whole line that fits).
    pub(crate) truncated: bool,
    /// The deadline stopped the search for the smallest diff.
    pub(crate) approximate: bool,
}

/// The unified diff of `old` → `new`, at most `max` bytes (cut after the
/// last whole line that fits); and whether it was cut. No deadline: for
/// the local CLI.
pub fn unified(old: &str, new: &str, from: i64, to: i64, max: usize) -> (String, bool) {
    let diff = similar::TextDiff::from_lines(old, new);
    render(&diff, from, to, max)
}

/// [`unified`] whose search for the smallest diff stops at `deadline`;
/// the result says whether it did (the deadline had passed when the diff
/// was done, so `similar` may have approximated).
pub(crate) fn bounded(
    old: &str,
    new: &str,
    from: i64,
    to: i64,
    max: usize,
    deadline: Instant,
) -> Diffed {
    let diff = similar::TextDiff::configure()
        .deadline(deadline)
        .diff_lines(old, new);
    let approximate = Instant::now() >= deadline && old != new;
    let (text, truncated) = render(&diff, from, to, max);
    Diffed {
        text,
        truncated,
        approximate,
    }
}

/// The unified text of `diff`, written line by line and stopped after the
/// last whole line within `max` bytes; and whether it stopped early.
fn render<'a>(
    diff: &'a similar::TextDiff<'a, 'a, 'a, str>,
    from: i64,
    to: i64,
    max: usize,
) -> (String, bool) {
    let mut unified = diff.unified_diff();
    let (old, new) = (format!("revision {from}"), format!("revision {to}"));
    unified.context_radius(3).header(&old, &new);
    let mut capped = Capped {
        out: Vec::new(),
        line: Vec::new(),
        max,
        cut: false,
    };
    // An error is the cut: the writer refuses the first line over `max`.
    let _ = unified.to_writer(&mut capped);
    if !capped.cut && !capped.line.is_empty() {
        let line = std::mem::take(&mut capped.line);
        capped.keep(&line);
    }
    (
        String::from_utf8_lossy(&capped.out).into_owned(),
        capped.cut,
    )
}

/// A writer keeping whole lines up to `max` bytes, then refusing.
struct Capped {
    out: Vec<u8>,
    line: Vec<u8>,
    max: usize,
    cut: bool,
}

impl Capped {
    /// Keeps `line` if it fits; else marks the cut.
    fn keep(&mut self, line: &[u8]) -> bool {
        if self.out.len() + line.len() > self.max {
            self.cut = true;
            return false;
        }
        self.out.extend_from_slice(line);
        true
    }
}

impl std::io::Write for Capped {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        for piece in buf.split_inclusive(|b| *b == b'\n') {
            self.line.extend_from_slice(piece);
            if self.line.ends_with(b"\n") {
                let line = std::mem::take(&mut self.line);
                if !self.keep(&line) {
                    return Err(std::io::Error::other("the diff is cut here"));
                }
            }
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The text of a `diff_handoff` answer.
pub fn text(result: &DiffResult) -> String {
    let head = format!(
        "Changes to `{}` from revision {} to revision {}",
        result.handoff_key, result.from, result.to
    );
    if result.diff.is_empty() {
        return format!("{head}: none (the bodies are identical).");
    }
    let cut = if result.truncated {
        format!(
            "\n(diff cut at {MAX_DIFF_BYTES} bytes; read whole revisions with get_handoff{{revision}})"
        )
    } else {
        String::new()
    };
    let approximate = if result.approximate {
        format!(
            "\n(approximate: comparing the bodies took longer than {} ms, so this diff is correct but may \
             be longer than the smallest one)",
            DIFF_DEADLINE.as_millis()
        )
    } else {
        String::new()
    };
    format!("{head}:\n\n{}{cut}{approximate}", result.diff)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn diffs_are_unified_and_cut_on_a_line_boundary() {
        let (diff, cut) = unified("a\nb\n", "a\nc\n", 1, 2, MAX_DIFF_BYTES);
        assert_eq!(
            diff,
            "--- revision 1\n+++ revision 2\n@@ -1,2 +1,2 @@\n a\n-b\n+c\n"
        );
        assert!(!cut);
        let old: String = (0..2000).map(|i| format!("line {i}\n")).collect();
        let (diff, cut) = unified(&old, "", 1, 2, 1000);
        assert!(
            cut && diff.len() <= 1000 && diff.ends_with('\n'),
            "{}",
            diff.len()
        );
        assert_eq!(
            unified("same\n", "same\n", 1, 2, 10),
            (String::new(), false)
        );
    }

    /// Two bodies of `n` short lines with nothing in common but every
    /// other line: Myers' worst kind of input.
    fn worst(n: usize) -> (String, String) {
        let old = (0..n).map(|i| format!("{}\n", i % 7)).collect();
        let new = (0..n).map(|i| format!("{}\n", (i * 3 + 1) % 11)).collect();
        (old, new)
    }

    #[test]
    fn a_passed_deadline_makes_the_diff_approximate_and_says_so() {
        let (old, new) = worst(2000);
        let far = Instant::now() + Duration::from_secs(3600);
        // (deadline, bodies, approximate)
        let cases = [
            (far, (old.as_str(), new.as_str()), false),
            (Instant::now(), (old.as_str(), new.as_str()), true),
            (Instant::now(), ("same\n", "same\n"), false),
        ];
        for (deadline, (a, b), approximate) in cases {
            let diffed = bounded(a, b, 1, 2, MAX_DIFF_BYTES, deadline);
            assert_eq!(diffed.approximate, approximate, "{}", a.len());
            assert!(diffed.text.len() <= MAX_DIFF_BYTES);
        }
        let (old, new) = worst(8000);
        let approximate = bounded(&old, &new, 1, 2, MAX_DIFF_BYTES, Instant::now());
        let result = DiffResult {
            handoff_key: "k".into(),
            from: 1,
            to: 2,
            diff: approximate.text,
            truncated: approximate.truncated,
            approximate: approximate.approximate,
        };
        let said = text(&result);
        assert!(said.contains("(diff cut at 16384 bytes;"), "{said}");
        assert!(
            said.contains("(approximate: comparing the bodies took longer than 500 ms"),
            "{said}"
        );
        let wire = serde_json::to_value(&result).expect("json");
        assert_eq!(wire["approximate"], serde_json::json!(true));
    }

    #[test]
    fn the_bounded_diff_renders_like_the_whole_one_up_to_the_cut() {
        let far = Instant::now() + Duration::from_secs(3600);
        for (old, new, max) in [
            ("a\nb\n", "a\nc\n", MAX_DIFF_BYTES),
            ("x\n", "", MAX_DIFF_BYTES),
            ("", "y\n", 5),
        ] {
            let whole = similar::TextDiff::from_lines(old, new)
                .unified_diff()
                .context_radius(3)
                .header("revision 1", "revision 2")
                .to_string();
            let diffed = bounded(old, new, 1, 2, max, far);
            assert!(
                whole.starts_with(&diffed.text),
                "{whole:?} vs {:?}",
                diffed.text
            );
            assert_eq!(diffed.truncated, whole.len() > max, "{whole:?}");
        }
        let (old, new) = worst(600);
        let (cut, truncated) = unified(&old, &new, 1, 2, 1000);
        assert!(truncated && cut.len() <= 1000 && cut.ends_with('\n'));
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn only_the_diff_thread_runs_at_the_lowest_priority() {
        // SAFETY: reads the calling thread's policy; no memory involved.
        let policy = || unsafe { libc::sched_getscheduler(0) };
        let before = policy();
        let lowered = std::thread::spawn(move || {
            lower_priority();
            policy()
        })
        .join()
        .expect("the diff thread");
        assert_eq!(lowered, libc::SCHED_IDLE);
        assert_eq!(policy(), before, "the caller's thread keeps its policy");
    }
}
