//! One handoff (its facts, its body rendered safely, its revisions) and the
//! diff between two of its revisions.

use maud::{Markup, PreEscaped, html};

use super::common::{
    block, line, lint, maybe, maybe_number, maybe_time, origin, path_only, stale, table,
};
use super::layout::{Frame, Section};
use super::markdown::to_safe_html;
use crate::model::{DiffPage, HandoffPage, HandoffRow, LintStatus, RevisionRow, Viewer};
use crate::routes;

/// One handoff, whole; refreshed live when an agent writes it.
pub(crate) fn handoff(viewer: &Viewer, page: &HandoffPage) -> Markup {
    let ns = page.namespace.as_str();
    let row = &page.row;
    let title = format!("Handoff {}", line(&row.key));
    Frame::new(Some(viewer), &title)
        .namespace(ns, Some(Section::Projects))
        .live(routes::live(
            ns,
            None,
            Some(&row.name),
            page.version.as_deref(),
        ))
        .page(html! {
            (facts(ns, row))
            @if page.may_delete {
                p.actions { a.button.danger href=(routes::delete(ns, &row.name)) { "Delete this handoff…" } }
            }
            section aria-labelledby="h-body" {
                h2 #h-body { "Body" }
                div.body dir="auto" { (PreEscaped(to_safe_html(&page.body))) }
            }
            section aria-labelledby="h-revisions" {
                h2 #h-revisions { "Revisions" }
                @match &page.revisions {
                    Err(why) => p.unavailable { (why.0) },
                    Ok(revisions) if revisions.is_empty() => p.empty {
                        "The mirror holds no revisions of this handoff yet; they appear once it has copied a write."
                    },
                    Ok(revisions) => (revisions_table(ns, &row.name, revisions)),
                }
            }
        })
}

fn facts(ns: &str, row: &HandoffRow) -> Markup {
    html! {
        dl.facts {
            dt { "Project" } dd { a href=(routes::project(ns, &row.project, None, None, None)) { (line(&row.project)) } }
            dt { "Object" } dd { code { (line(&row.name)) } }
            dt { "Repository" } dd { (maybe(row.repo.as_deref())) }
            dt { "Kind" } dd { (maybe(row.kind.as_deref())) }
            dt { "Writer" } dd { (maybe(row.writer.as_deref())) }
            dt { "Updated" } dd { (maybe_time(row.updated.as_ref())) }
            dt { "Revision" } dd { (maybe_number(row.revision)) }
            dt { "Tokens" } dd { (maybe_number(row.tokens)) }
            dt { "Lint" } dd {
                (lint(&row.lint))
                @if let LintStatus::Failed(message) = &row.lint { ": " (line(message)) }
            }
            dt { "Origin" } dd { (origin(row.origin)) }
            dt { "Stale" } dd { (stale(row.stale)) }
        }
    }
}

fn revisions_table(ns: &str, name: &str, revisions: &[RevisionRow]) -> Markup {
    let rows = html! {
        @for (i, rev) in revisions.iter().enumerate() {
            tr {
                td.num { (rev.revision) }
                td { (maybe_time(rev.at.as_ref())) }
                td { (maybe(rev.writer.as_deref())) }
                td.num { (maybe_number(rev.tokens)) }
                td {
                    @if let Some(older) = revisions.get(i + 1) {
                        a href=(routes::diff(ns, name, older.revision, rev.revision)) {
                            "Changes from " (older.revision) " to " (rev.revision)
                        }
                    } @else {
                        (super::common::none())
                    }
                }
            }
        }
    };
    let newest = revisions.first().map(|r| r.revision);
    let oldest = revisions.last().map(|r| r.revision);
    html! {
        (table("Revisions, newest first", &["Revision", "Written", "Writer", "Tokens", "Diff"], rows))
        @if revisions.len() > 1 {
            form.diff-form method="get" action=(path_only(&routes::diff(ns, name, 0, 0))) {
                div.field {
                    label for="d-from" { "From revision" }
                    select #d-from name="from" {
                        @for rev in revisions {
                            option value=(rev.revision) selected[Some(rev.revision) == oldest] { (rev.revision) }
                        }
                    }
                }
                div.field {
                    label for="d-to" { "To revision" }
                    select #d-to name="to" {
                        @for rev in revisions {
                            option value=(rev.revision) selected[Some(rev.revision) == newest] { (rev.revision) }
                        }
                    }
                }
                button type="submit" { "Show changes" }
            }
        }
    }
}

/// The bounded unified diff between two revisions of one handoff.
pub(crate) fn diff(viewer: &Viewer, page: &DiffPage) -> Markup {
    let ns = page.namespace.as_str();
    let title = format!(
        "Changes to {} from revision {} to {}",
        line(&page.key),
        page.from,
        page.to
    );
    Frame::new(Some(viewer), &title)
        .namespace(ns, Some(Section::Projects))
        .page(html! {
            p { a href=(routes::handoff(ns, &page.name)) { "Back to the handoff" } }
            @match &page.diff {
                Err(why) => p.unavailable { (why.0) },
                Ok(diff) if diff.text.trim().is_empty() => p.empty {
                    "Revisions " (page.from) " and " (page.to) " have the same body."
                },
                Ok(diff) => {
                    @if diff.truncated {
                        p.note { "The diff was cut at the bound diff_handoff keeps; the rest is not shown." }
                    }
                    div.table-wrap role="region" aria-label="Unified diff" tabindex="0" {
                        pre.diff { (diff_lines(&diff.text)) }
                    }
                },
            }
        })
}

/// Each line of a unified diff in a span whose class says what it is; the
/// `+`/`-` stays in the text, so colour is never the only sign.
fn diff_lines(text: &str) -> Markup {
    let text = block(text);
    html! {
        @for l in text.lines() {
            span class=(diff_class(l)) { (l) } "\n"
        }
    }
}

fn diff_class(line: &str) -> &'static str {
    if line.starts_with("+++") || line.starts_with("---") {
        "file"
    } else if line.starts_with("@@") {
        "hunk"
    } else if line.starts_with('+') {
        "add"
    } else if line.starts_with('-') {
        "del"
    } else {
        "ctx"
    }
}
