//! The confirmation pages of the two actions. A link never acts: it leads
//! here, and only this page's form (POST to the same URL, carrying the
//! person's CSRF token) deletes or rejects.

use maud::{Markup, html};

use super::common::{line, maybe, maybe_time};
use super::layout::{Frame, Section};
use crate::model::{HandoffRow, OfferRow, Viewer};
use crate::routes;

/// "Delete this handoff?" with the facts that identify it.
pub(crate) fn confirm_delete(viewer: &Viewer, namespace: &str, row: &HandoffRow) -> Markup {
    let title = format!("Delete handoff {}?", line(&row.key));
    Frame::new(Some(viewer), &title)
        .namespace(namespace, Some(Section::Projects))
        .page(html! {
            p {
                "This deletes the Handoff object " code { (line(&row.name)) } " in namespace "
                (namespace) ". The next agent on this key starts without it; the mirror keeps its revisions."
            }
            dl.facts {
                dt { "Project" } dd { (line(&row.project)) }
                dt { "Writer" } dd { (maybe(row.writer.as_deref())) }
                dt { "Updated" } dd { (maybe_time(row.updated.as_ref())) }
            }
            (confirm_form(&routes::delete(namespace, &row.name), &viewer.csrf, "Delete handoff",
                &routes::handoff(namespace, &row.name)))
        })
}

/// "Reject this offer?" with the facts that identify it.
pub(crate) fn confirm_reject(viewer: &Viewer, namespace: &str, row: &OfferRow) -> Markup {
    let title = format!("Reject offer {}?", line(&row.name));
    Frame::new(Some(viewer), &title)
        .namespace(namespace, Some(Section::Offers))
        .page(html! {
            p {
                "The offer of handoff " code { (line(&row.from_key)) } " in project "
                (line(&row.project)) " is marked rejected; its destination no longer sees it."
            }
            dl.facts {
                dt { "Phase" } dd { (line(&row.phase)) }
                dt { "Offered" } dd { (maybe_time(row.created.as_ref())) }
            }
            (confirm_form(&routes::reject(namespace, &row.name), &viewer.csrf, "Reject offer",
                &routes::offers(namespace)))
        })
}

fn confirm_form(action: &str, csrf: &str, label: &str, cancel: &str) -> Markup {
    html! {
        form.confirm method="post" action=(action) {
            input type="hidden" name="csrf" value=(csrf);
            button.danger type="submit" { (label) }
            " "
            a.button href=(cancel) { "Cancel" }
        }
    }
}
