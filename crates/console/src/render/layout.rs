//! The frame of every page: document head, skip link, header with who is
//! signed in, the namespace's navigation, and `<main id="content">` with the
//! page's one `<h1>`.

use maud::{DOCTYPE, Markup, html};

use crate::model::{Mode, Viewer};
use crate::routes;

/// What the frame needs besides the page's own content.
pub(super) struct Frame<'a> {
    pub(super) viewer: Option<&'a Viewer>,
    /// The namespace the page is about: its navigation is shown.
    pub(super) namespace: Option<&'a str>,
    /// The page's `<h1>` and the first part of its `<title>`.
    pub(super) title: &'a str,
    /// The event stream that says when this page changed (live refresh).
    pub(super) live: Option<String>,
    /// Which navigation entry is this page.
    pub(super) current: Option<Section>,
}

/// The entries of a namespace's navigation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Section {
    Projects,
    Search,
    Offers,
    Schedules,
    Problems,
}

impl<'a> Frame<'a> {
    pub(super) fn new(viewer: Option<&'a Viewer>, title: &'a str) -> Self {
        Self {
            viewer,
            namespace: None,
            title,
            live: None,
            current: None,
        }
    }

    pub(super) fn namespace(mut self, namespace: &'a str, current: Option<Section>) -> Self {
        self.namespace = Some(namespace);
        self.current = current;
        self
    }

    pub(super) fn live(mut self, url: String) -> Self {
        self.live = Some(url);
        self
    }

    /// The whole page around `content` (which follows the `<h1>`).
    pub(super) fn page(self, content: Markup) -> Markup {
        html! {
            (DOCTYPE)
            html lang="en" {
                head {
                    meta charset="utf-8";
                    meta name="viewport" content="width=device-width, initial-scale=1";
                    meta name="referrer" content="no-referrer";
                    title { (self.title) " · handoff console" }
                    link rel="stylesheet" href=(routes::STYLESHEET);
                    script src=(routes::SCRIPT) defer {}
                }
                body {
                    a.skip href="#content" { "Skip to content" }
                    header.top {
                        a.brand href=(routes::HOME) { "handoff console" }
                        @if let Some(namespace) = self.namespace {
                            (nav(namespace, self.current))
                        }
                        @if let Some(viewer) = self.viewer {
                            p.who {
                                "Signed in as " strong { (viewer.username) }
                                " (" (mode(viewer.mode)) ")"
                            }
                        }
                        @if self.live.is_some() {
                            p #live-status .live-status role="status" {}
                        }
                    }
                    main #content data-live=[self.live.as_deref()] {
                        h1 { (self.title) }
                        (content)
                    }
                }
            }
        }
    }
}

fn mode(mode: Mode) -> &'static str {
    match mode {
        Mode::Laptop => "laptop, as your kubeconfig",
        Mode::Proxy => "through your organisation's proxy",
    }
}

fn nav(namespace: &str, current: Option<Section>) -> Markup {
    let entries = [
        (
            Section::Projects,
            "Projects",
            format!("{}#ns-{namespace}", routes::HOME),
        ),
        (
            Section::Search,
            "Search",
            routes::search(namespace, None, None),
        ),
        (Section::Offers, "Offers", routes::offers(namespace)),
        (
            Section::Schedules,
            "Schedules",
            routes::schedules(namespace),
        ),
        (Section::Problems, "Problems", routes::problems(namespace)),
    ];
    html! {
        nav aria-label={ "Namespace " (namespace) } {
            span.ns { "Namespace " strong { (namespace) } }
            ul {
                @for (section, label, href) in entries {
                    li {
                        @if current == Some(section) {
                            a href=(href) aria-current="page" { (label) }
                        } @else {
                            a href=(href) { (label) }
                        }
                    }
                }
            }
        }
    }
}

/// A page saying what went wrong, with the HTTP status, and a way back.
pub(crate) fn error(viewer: Option<&Viewer>, status: u16, title: &str, message: &str) -> Markup {
    Frame::new(viewer, title).page(html! {
        p.status { "Error " (status) }
        p { (message) }
        p { a href=(routes::HOME) { "Back to the overview" } }
    })
}
