//! Writing a rescue: whether it may write over what the key holds (the
//! freshness rule of the hook's module docs), and the write itself, for
//! the hooks and for `handoff rescue`.

use anyhow::{Context, anyhow};
use jiff::Timestamp;
use serde_json::json;

use handoff_transcript::cli::Loaded;
use handoff_transcript::rescue::{self, Source};
use handoff_transcript::{Budget, Outcome};

use super::link::Link;
use super::{RescueArgs, Stored, Target};

/// Whether a rescue may write over what the key holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Plan {
    /// Nothing fresh: write the rescue (a second, identical one is an
    /// unchanged write).
    Write,
    /// A fresh agent-written handoff; why it stays.
    Keep(String),
}

/// Pure: the freshness rule of the module docs.
pub fn plan(existing: Option<&Stored>, started: Option<Timestamp>) -> Plan {
    let Some(h) = existing else {
        return Plan::Write;
    };
    if rescue::is_rescued(&h.body) {
        return Plan::Write;
    }
    let updated: Option<Timestamp> = h.updated_at.as_deref().and_then(|u| u.parse().ok());
    let started = started.map(|s| at_precision_of(s, h.updated_at.as_deref().unwrap_or_default()));
    match (updated, started) {
        (Some(u), Some(s)) if u < s => Plan::Write,
        (Some(u), Some(s)) => Plan::Keep(format!(
            "the agent wrote it at {u}, since this session began ({s})"
        )),
        (_, None) => Plan::Keep(
            "it was written by an agent, and when this session began is unknown".to_owned(),
        ),
        (None, Some(_)) => Plan::Keep("it was written by an agent at an unknown time".to_owned()),
    }
}

/// Pure: `start` at the precision of `updated`. The apiserver stamps
/// `updated_at` in whole seconds and the agents stamp transcripts in
/// milliseconds: an agent writing within its session's first second would
/// otherwise be judged older than its own session (and rescued over).
fn at_precision_of(start: Timestamp, updated: &str) -> Timestamp {
    if updated.contains('.') {
        return start;
    }
    Timestamp::from_second(start.as_second()).unwrap_or(start)
}

/// The handoff of `key`, if any.
pub async fn get(link: &Link, key: &str) -> anyhow::Result<Option<Stored>> {
    let found = link
        .call("get_handoff", json!({"handoff_key": key}))
        .await?;
    match found.get("handoff") {
        Some(h) if found["found"] == json!(true) => Ok(Some(
            serde_json::from_value(h.clone()).context("get_handoff's answer")?,
        )),
        _ => Ok(None),
    }
}

/// Writes the rescue of `outcome` for `key`; `created`, `updated` or
/// `unchanged`.
pub(super) async fn write_rescue(
    link: &Link,
    key: &str,
    outcome: &Outcome,
    source: Source<'_>,
    target: &Target,
    existing: Option<Stored>,
) -> anyhow::Result<String> {
    let project = target
        .project
        .clone()
        .or_else(|| existing.as_ref().map(|h| h.project.clone()))
        .ok_or_else(|| {
            anyhow!("`{key}` has no handoff to take the project from: pass --project or set HANDOFF_PROJECT")
        })?;
    let repo = target
        .repo
        .clone()
        .or_else(|| existing.as_ref().and_then(|h| h.repo.clone()));
    let kind = target
        .kind
        .clone()
        .or_else(|| existing.as_ref().and_then(|h| h.kind.clone()));
    let body = rescue::body(outcome, source, target.max_tokens);
    let kind = rescue::rescued_kind(kind.as_deref());
    // A rescue has read the key anyway (the freshness rule): the same
    // rescue again is not sent at all, so its answer never rests on
    // whether the write path can tell an identical write apart.
    if let Some(h) = existing.as_ref().filter(|h| {
        h.project == project
            && h.repo == repo
            && h.kind.as_deref() == Some(&*kind)
            && h.body == body
    }) {
        tracing::debug!(key = %h.handoff_key, "the rescue is already stored");
        return Ok("unchanged".to_owned());
    }
    let mut args = json!({
        "handoff_key": key,
        "project": project,
        "kind": kind,
        "body": body,
    });
    if let Some(repo) = repo {
        args["repo"] = json!(repo);
    }
    let written = link.call("write_handoff", args).await?;
    Ok(written["outcome"].as_str().unwrap_or("written").to_owned())
}

/// Runs `handoff rescue`: prints one JSON line, `{"outcome", "key",
/// "approx_tokens"}` (`kept` with a `reason` when a fresh agent-written
/// handoff stays).
pub async fn run_rescue(args: RescueArgs) -> anyhow::Result<()> {
    let Loaded {
        outcome,
        file,
        session,
    } = args.source.load(Budget::UNLIMITED)?;
    let started = file.as_deref().and_then(rescue::started_at);
    let link = Link::from_env(args.link.namespace.as_deref(), &args.link.profile).await?;
    let existing = get(&link, &args.key).await?;
    if let Plan::Keep(reason) = plan(existing.as_ref(), started) {
        println!(
            "{}",
            json!({"outcome": "kept", "key": args.key, "reason": reason})
        );
        return Ok(());
    }
    let source = Source {
        agent: args.source.agent,
        session: session.as_deref(),
        started,
    };
    let written = write_rescue(&link, &args.key, &outcome, source, &args.target, existing).await?;
    let after = get(&link, &args.key).await?;
    let tokens = after.map_or(0, |h| rescue::approx_tokens(&h.body));
    println!(
        "{}",
        json!({"outcome": written, "key": args.key, "approx_tokens": tokens})
    );
    Ok(())
}
