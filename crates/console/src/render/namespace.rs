//! A namespace's pages besides its handoffs: offers per destination, the
//! refine → brainstorm schedules, and what needs a person's attention.

use maud::{Markup, html};

use super::common::{block, health, line, maybe, maybe_time, none, table, time};
use super::layout::{Frame, Section};
use crate::model::{
    CycleRow, OfferGroup, OffersPage, Problem, ProblemsPage, ScheduleRow, SchedulesPage, StepRow,
    Viewer,
};
use crate::routes;

/// Offers grouped by destination agent, pending first.
pub(crate) fn offers(viewer: &Viewer, page: &OffersPage) -> Markup {
    let ns = page.namespace.as_str();
    Frame::new(Some(viewer), "Offers")
        .namespace(ns, Some(Section::Offers))
        .page(html! {
            @if page.groups.is_empty() {
                p.empty {
                    "No offers in namespace " (ns)
                    ". An agent hands work to another with offer_handoff; the offer waits here until its destination accepts it."
                }
            }
            @for (i, group) in page.groups.iter().enumerate() {
                (offer_group(ns, i, group))
            }
        })
}

fn offer_group(ns: &str, index: usize, group: &OfferGroup) -> Markup {
    let mut offers: Vec<_> = group.offers.iter().collect();
    offers.sort_by_key(|o| o.phase != "Pending");
    let heading = format!("h-to-{index}");
    let any_reject = offers.iter().any(|o| o.may_reject);
    let mut head = vec![
        "Offer",
        "Project",
        "From handoff",
        "Phase",
        "Superseded by",
        "Offered",
    ];
    if any_reject {
        head.push("Action");
    }
    html! {
        section aria-labelledby=(heading) {
            h2 id=(heading) { "To " (line(&group.to)) }
            (table(&format!("Offers to {}", line(&group.to)), &head, html! {
                @for offer in &offers {
                    tr {
                        td { (line(&offer.name)) }
                        td { (line(&offer.project)) }
                        td { (line(&offer.from_key)) }
                        td { span class={ "phase " (offer.phase.to_ascii_lowercase()) } { (line(&offer.phase)) } }
                        td { (maybe(offer.superseded_by.as_deref())) }
                        td { (maybe_time(offer.created.as_ref())) }
                        @if any_reject {
                            td {
                                @if offer.may_reject {
                                    a.danger href=(routes::reject(ns, &offer.name)) { "Reject" span.sr-only { " " (line(&offer.name)) } }
                                } @else { (none()) }
                            }
                        }
                    }
                }
            }))
        }
    }
}

/// The BrainstormSchedules of a namespace with their last cycles.
pub(crate) fn schedules(viewer: &Viewer, page: &SchedulesPage) -> Markup {
    let ns = page.namespace.as_str();
    Frame::new(Some(viewer), "Schedules")
        .namespace(ns, Some(Section::Schedules))
        .page(html! {
            @if page.schedules.is_empty() {
                p.empty {
                    "No schedules in namespace " (ns)
                    ". A BrainstormSchedule runs a refine Job and then a brainstorm Job on a cron; see docs/agents.md to create one."
                }
            }
            @for (i, schedule) in page.schedules.iter().enumerate() {
                (schedule_section(i, schedule))
            }
        })
}

fn schedule_section(index: usize, s: &ScheduleRow) -> Markup {
    let heading = format!("h-schedule-{index}");
    html! {
        section aria-labelledby=(heading) {
            h2 id=(heading) { (line(&s.name)) }
            dl.facts {
                dt { "Project" } dd { (line(&s.project)) }
                dt { "Cron" } dd { code { (line(&s.cron)) } }
                dt { "Time zone" } dd { (maybe(s.time_zone.as_deref())) }
                dt { "Suspended" } dd { @if s.suspended { span.warn { "yes" } } @else { "no" } }
                dt { "Phase" } dd { (maybe(s.phase.as_deref())) }
                dt { "Active Job" } dd { (maybe(s.active_job.as_deref())) }
                dt { "Next tick" } dd { (maybe_time(s.next.as_ref())) }
            }
            @if s.cycles.is_empty() {
                p.empty { "No cycle has run yet; the first starts at the next tick." }
            } @else {
                (table(&format!("Cycles of {}, current first", line(&s.name)),
                    &["Tick", "Refine Job", "Brainstorm Job", "Result"],
                    html! { @for c in &s.cycles { (cycle(c)) } }))
            }
        }
    }
}

fn cycle(c: &CycleRow) -> Markup {
    html! {
        tr {
            td { (time(&c.tick)) }
            td { (step(Some(&c.refine))) }
            td { (step(c.brainstorm.as_ref())) }
            td { (maybe(c.result.as_deref())) }
        }
    }
}

fn step(step: Option<&StepRow>) -> Markup {
    match step {
        None => html! { "not started" },
        Some(step) => html! {
            code { (line(&step.job)) } ": "
            @match &step.result { Some(r) => (line(r)), None => "running" }
        },
    }
}

/// What needs attention: unbound keys, failed lint, the mirror, the
/// controller.
pub(crate) fn problems(viewer: &Viewer, page: &ProblemsPage) -> Markup {
    let ns = page.namespace.as_str();
    Frame::new(Some(viewer), "Problems")
        .namespace(ns, Some(Section::Problems))
        .page(html! {
            section aria-labelledby="h-unbound" {
                h2 #h-unbound { "Twins and squats" }
                (problem_list(ns, &page.unbound, "Handoffs whose key is not bound to them",
                    "No twins or squats: every handoff holds its own key."))
            }
            section aria-labelledby="h-lint" {
                h2 #h-lint { "Failed lint" }
                (problem_list(ns, &page.lint_failed, "Handoffs whose body failed the lint",
                    "Every body passed the lint (or waits for it)."))
            }
            section aria-labelledby="h-mirror" {
                h2 #h-mirror { "Mirror" }
                (health(&page.mirror))
            }
            section aria-labelledby="h-controller" {
                h2 #h-controller { "Controller" }
                (health(&page.controller))
            }
        })
}

fn problem_list(ns: &str, problems: &[Problem], caption: &str, empty: &str) -> Markup {
    if problems.is_empty() {
        return html! { p.empty { (empty) } };
    }
    table(
        caption,
        &["Key", "Object", "Message"],
        html! {
            @for p in problems {
                tr {
                    td.key { a href=(routes::handoff(ns, &p.name)) { (line(&p.key)) } }
                    td { code { (line(&p.name)) } }
                    td.wrap { (block(&p.message)) }
                }
            }
        },
    )
}
