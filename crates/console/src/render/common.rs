//! Small pieces every page uses: times, counts, optional values, one-line
//! text made visible, and a table that scrolls inside its own box.

use std::borrow::Cow;

use jiff::Timestamp;
use maud::{Markup, html};

use crate::model::{Count, Health, LintStatus, Origin};

/// A time as absolute UTC text inside `<time>`; the console's script
/// rewrites the text to the viewer's zone and keeps the title.
pub(super) fn time(at: &Timestamp) -> Markup {
    let absolute = utc(at);
    html! { time datetime=(at.to_string()) title=(absolute) { (absolute) } }
}

/// An optional time, or a dash with words for screen readers.
pub(super) fn maybe_time(at: Option<&Timestamp>) -> Markup {
    match at {
        Some(at) => time(at),
        None => none(),
    }
}

/// `2026-12-05 06:18:50 UTC`.
pub(super) fn utc(at: &Timestamp) -> String {
    at.strftime("%Y-%m-%d %H:%M:%S UTC").to_string()
}

/// A count, saying "at least" when counting stopped at a bound.
pub(super) fn count(count: Count) -> String {
    match count {
        Count::Exact(n) => n.to_string(),
        Count::AtLeast(n) => format!("at least {n}"),
    }
}

/// What an absent value shows.
pub(super) fn none() -> Markup {
    html! { span.none { "—" span.sr-only { "none" } } }
}

/// An optional value from an object, made visible, or [`none`].
pub(super) fn maybe(value: Option<&str>) -> Markup {
    match value {
        Some(value) => html! { (line(value)) },
        None => none(),
    }
}

/// An optional number, or [`none`].
pub(super) fn maybe_number(value: Option<i64>) -> Markup {
    match value {
        Some(value) => html! { (value) },
        None => none(),
    }
}

/// A one-line field from an object (key, writer, message) with hidden
/// characters written as visible escapes, so it cannot reorder the page.
pub(super) fn line(text: &str) -> Cow<'_, str> {
    handoff_core::text::visible_line(text)
}

/// Several lines from an object (a snippet, a message), made visible.
pub(super) fn block(text: &str) -> Cow<'_, str> {
    handoff_core::text::visible_block(text)
}

/// A table inside a box that scrolls sideways on a narrow screen (the page
/// itself never does). The box is focusable so a keyboard can scroll it.
pub(super) fn table(caption: &str, head: &[&str], rows: Markup) -> Markup {
    html! {
        div.table-wrap role="region" aria-label=(caption) tabindex="0" {
            table {
                caption { (caption) }
                thead { tr { @for h in head { th scope="col" { (h) } } } }
                tbody { (rows) }
            }
        }
    }
}

/// A lint status in words (never colour alone).
pub(super) fn lint(status: &LintStatus) -> Markup {
    match status {
        LintStatus::Passed => html! { span.ok { "passed" } },
        LintStatus::Failed(message) => html! { span.bad title=(line(message)) { "failed" } },
        LintStatus::Pending => html! { span.muted { "pending" } },
    }
}

/// Rescued or written, in words.
pub(super) fn origin(origin: Origin) -> Markup {
    match origin {
        Origin::Written => html! { "written" },
        Origin::Rescued => html! { span.warn { "rescued" } },
    }
}

/// Stale by TTL, in words.
pub(super) fn stale(stale: bool) -> Markup {
    if stale {
        html! { span.warn { "stale" } }
    } else {
        html! { "no" }
    }
}

/// The health of one part, its state in words and then its sentence.
pub(super) fn health(health: &Health) -> Markup {
    let (class, word, text) = match health {
        Health::Healthy(text) => ("ok", "Healthy", text),
        Health::Degraded(text) => ("bad", "Degraded", text),
        Health::Unknown(text) => ("muted", "Unknown", text),
    };
    html! { p { strong class=(class) { (word) ": " } (block(text)) } }
}

/// The path of a link without its query, for a GET form's `action` (the
/// browser replaces the query with the form's fields).
pub(super) fn path_only(url: &str) -> &str {
    url.split_once('?').map_or(url, |(path, _)| path)
}
