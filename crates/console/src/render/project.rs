//! The pages that list handoffs: the overview (namespaces and projects), a
//! project's handoffs, and the mirror's search.

use maud::{Markup, html};

use super::common::{
    block, count, line, lint, maybe, maybe_number, maybe_time, origin, path_only, stale, table,
};
use super::layout::{Frame, Section};
use crate::model::{HandoffRow, Overview, ProjectPage, SearchPage, Viewer};
use crate::routes;

/// The front page: every namespace the person can read, its projects and
/// their counts.
pub(crate) fn overview(viewer: &Viewer, page: &Overview) -> Markup {
    Frame::new(Some(viewer), "Handoffs you can see").page(html! {
        @if page.namespaces.is_empty() {
            p.empty {
                "You cannot list handoffs in any namespace. Ask your cluster's administrator \
                 to bind you the handoff-view role in the namespaces your agents use."
            }
        }
        @for ns in &page.namespaces {
            section.namespace id={ "ns-" (ns.namespace) } aria-labelledby={ "h-ns-" (ns.namespace) } {
                h2 id={ "h-ns-" (ns.namespace) } { "Namespace " (ns.namespace) }
                p.counts { (count(ns.handoffs)) " handoffs" }
                ul.links {
                    li { a href=(routes::search(&ns.namespace, None, None)) { "Search" } }
                    li { a href=(routes::offers(&ns.namespace)) { "Offers" } }
                    li { a href=(routes::schedules(&ns.namespace)) { "Schedules" } }
                    li { a href=(routes::problems(&ns.namespace)) { "Problems" } }
                }
                @if ns.projects.is_empty() {
                    p.empty {
                        "No handoffs in namespace " (ns.namespace)
                        " yet — an agent writes one with write_handoff."
                    }
                } @else {
                    (table(&format!("Projects in {}", ns.namespace), &["Project", "Handoffs", "Pending offers"], html! {
                        @for p in &ns.projects {
                            tr {
                                td { a href=(routes::project(&ns.namespace, &p.project, None, None, None)) { (line(&p.project)) } }
                                td.num { (count(p.handoffs)) }
                                td.num { (count(p.pending_offers)) }
                            }
                        }
                    }))
                }
            }
        }
    })
}

/// One project's handoffs, a page at a time, with filters; refreshed live.
pub(crate) fn project(viewer: &Viewer, page: &ProjectPage) -> Markup {
    let ns = page.namespace.as_str();
    let title = format!("Project {}", line(&page.project));
    let repo = page.filters.repo.as_deref();
    let kind = page.filters.kind.as_deref();
    let filtered = repo.is_some() || kind.is_some();
    let here = routes::project(ns, &page.project, None, None, None);
    Frame::new(Some(viewer), &title)
        .namespace(ns, Some(Section::Projects))
        .live(routes::live(
            ns,
            Some(&page.project),
            None,
            page.version.as_deref(),
        ))
        .page(html! {
            form.filters method="get" action=(here) {
                div.field {
                    label for="f-repo" { "Repository" }
                    input #f-repo type="text" name="repo" value=[repo];
                }
                div.field {
                    label for="f-kind" { "Kind" }
                    input #f-kind type="text" name="kind" value=[kind];
                }
                button type="submit" { "Filter" }
                @if filtered { a href=(here) { "Clear filters" } }
            }
            p.exports {
                "Export this project: "
                a href=(routes::export(ns, &page.project, "markdown")) { "Markdown" }
                " · "
                a href=(routes::export(ns, &page.project, "json")) { "JSON" }
            }
            @if page.rows.is_empty() {
                @if filtered {
                    p.empty { "No handoffs in project " (line(&page.project)) " match these filters. " a href=(here) { "Clear the filters" } " to see all." }
                } @else {
                    p.empty { "No handoffs in project " (line(&page.project)) " yet — an agent writes one with write_handoff." }
                }
            } @else {
                (rows_table(ns, page))
            }
            @if let Some(next) = &page.next {
                p.paging { a rel="next" href=(routes::project(ns, &page.project, repo, kind, Some(next))) { "Next page" } }
            }
        })
}

fn rows_table(ns: &str, page: &ProjectPage) -> Markup {
    let mut head = vec![
        "Key",
        "Repository",
        "Kind",
        "Writer",
        "Updated",
        "Revision",
        "Tokens",
        "Lint",
        "Origin",
        "Stale",
    ];
    if page.may_delete {
        head.push("Action");
    }
    let caption = format!("Handoffs in project {}", line(&page.project));
    table(
        &caption,
        &head,
        html! {
            @for row in &page.rows { (row_cells(ns, row, page.may_delete)) }
        },
    )
}

fn row_cells(ns: &str, row: &HandoffRow, may_delete: bool) -> Markup {
    html! {
        tr {
            td.key { a href=(routes::handoff(ns, &row.name)) { (line(&row.key)) } }
            td.wrap { (maybe(row.repo.as_deref())) }
            td { (maybe(row.kind.as_deref())) }
            td.wrap { (maybe(row.writer.as_deref())) }
            td { (maybe_time(row.updated.as_ref())) }
            td.num { (maybe_number(row.revision)) }
            td.num { (maybe_number(row.tokens)) }
            td { (lint(&row.lint)) }
            td { (origin(row.origin)) }
            td { (stale(row.stale)) }
            @if may_delete {
                td { a.danger href=(routes::delete(ns, &row.name)) { "Delete" span.sr-only { " " (line(&row.key)) } } }
            }
        }
    }
}

/// The mirror's full-text search in one namespace.
pub(crate) fn search(viewer: &Viewer, page: &SearchPage) -> Markup {
    let ns = page.namespace.as_str();
    let action = routes::search(ns, None, None);
    let query = page.query.trim();
    Frame::new(Some(viewer), "Search handoffs")
        .namespace(ns, Some(Section::Search))
        .page(html! {
            form.search method="get" action=(path_only(&action)) role="search" {
                div.field {
                    label for="q" { "Words to find" }
                    input #q type="search" name="q" value=(page.query);
                }
                div.field {
                    label for="s-project" { "Project (optional)" }
                    input #s-project type="text" name="project" value=[page.project.as_deref()];
                }
                button type="submit" { "Search" }
            }
            @if query.is_empty() {
                p.empty { "Type words to search every handoff's history in namespace " (ns) "." }
            } @else {
                @match &page.hits {
                    Err(why) => p.unavailable { (why.0) },
                    Ok(hits) if hits.is_empty() => p.empty {
                        "No handoffs in namespace " (ns) " match “" (line(query)) "”. Try fewer or other words."
                    },
                    Ok(hits) => {
                        h2 { "Results" }
                        ol.hits {
                            @for hit in hits {
                                li {
                                    a href=(routes::handoff(ns, &hit.name)) { (line(&hit.key)) }
                                    " in " (line(&hit.project)) ", updated " (maybe_time(hit.updated.as_ref()))
                                    p.snippet { (block(&hit.snippet)) }
                                }
                            }
                        }
                    },
                }
            }
            @if let Some(next) = &page.next {
                p.paging { a rel="next" href=(routes::search_page(ns, &page.query, page.project.as_deref(), Some(next))) { "More results" } }
            }
        })
}
