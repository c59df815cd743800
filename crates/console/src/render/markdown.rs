//! A handoff's markdown body as HTML that cannot run, load or hide anything.
//!
//! Bodies are written by agents, so the console treats them as hostile. Three
//! belts, each enough on its own for what it covers:
//! 1. [`handoff_core::text::visible_block`] first: bidi controls, C0/C1 and
//!    DEL become visible `\u{…}` escapes, so text cannot reorder itself or
//!    the page around it, and a reviewer sees what is there.
//! 2. pulldown-cmark's event stream, filtered: raw HTML is shown as text,
//!    images become the text `[image: alt]` (nothing is fetched), links are
//!    kept only for http, https, mailto and `#fragments` (a link without
//!    text shows its address), task-list boxes are text, headings start
//!    below the page's own, never skip a level and are dropped when empty,
//!    and containers stop nesting at [`MAX_DEPTH`].
//! 3. ammonia with a tight allowlist parses the result as a browser would
//!    and drops whatever step 2 might have let through (no `img`, no
//!    `style`, no `id`, only http/https/mailto URLs, relative URLs only as
//!    fragments, every link `rel="noopener noreferrer nofollow ugc"`).
//!
//! The console's Content-Security-Policy is the fourth: even markup that
//! got through could neither run script nor load an image from elsewhere.

use std::borrow::Cow;
use std::sync::LazyLock;

use pulldown_cmark::{CowStr, Event, HeadingLevel, Options, Parser, Tag, TagEnd};

/// Containers (block quotes, lists, emphasis) deeper than this lose their
/// markup but keep their text: a body of ten thousand `>` cannot build a
/// DOM that deep.
const MAX_DEPTH: usize = 16;

/// The heading level the page's own sections use; a body's headings start
/// one below it.
const PAGE_SECTION_LEVEL: usize = 2;

/// Link `rel` for every link a body keeps.
const LINK_REL: &str = "noopener noreferrer nofollow ugc";

/// The sanitiser of step 3, built once.
static CLEANER: LazyLock<ammonia::Builder<'static>> = LazyLock::new(|| {
    let mut builder = ammonia::Builder::default();
    builder
        .rm_tags(["img"])
        .url_schemes(["http", "https", "mailto"].into())
        .link_rel(Some(LINK_REL))
        .url_relative(ammonia::UrlRelative::Custom(Box::new(only_fragments)));
    builder
});

/// A relative URL is kept only when it points inside the page.
fn only_fragments(url: &str) -> Option<Cow<'_, str>> {
    url.starts_with('#').then_some(Cow::Borrowed(url))
}

/// `body` (markdown) as sanitised HTML, ready to place inside the page.
pub(crate) fn to_safe_html(body: &str) -> String {
    let visible = handoff_core::text::visible_block(body);
    let options =
        Options::ENABLE_TABLES | Options::ENABLE_STRIKETHROUGH | Options::ENABLE_TASKLISTS;
    let events = Filter::default().apply(Parser::new_ext(&visible, options));
    let mut html = String::with_capacity(visible.len() + visible.len() / 4);
    pulldown_cmark::html::push_html(&mut html, events.into_iter());
    CLEANER.clean(&html).to_string()
}

/// Whether a link's destination may stay a link: http, https, mailto, or a
/// fragment of this page. Tabs and newlines are removed first, as a browser's
/// URL parser does, so `java\tscript:` is judged as `javascript:`.
fn allowed_destination(dest: &str) -> bool {
    let cleaned: String = dest
        .trim_matches(|c: char| c.is_ascii_whitespace() || c.is_ascii_control())
        .chars()
        .filter(|c| !matches!(c, '\t' | '\n' | '\r'))
        .collect();
    let lower = cleaned.to_ascii_lowercase();
    lower.starts_with('#')
        || lower.starts_with("http://")
        || lower.starts_with("https://")
        || lower.starts_with("mailto:")
}

/// The state of step 2's walk over the events.
#[derive(Default)]
struct Filter<'a> {
    out: Vec<Event<'a>>,
    /// For each open link, when it was kept: where its start is in `out`
    /// and its destination (the text of a link that has none).
    links: Vec<Option<(usize, CowStr<'a>)>>,
    /// Open images; their alt text is collected, never drawn as markup.
    image_depth: usize,
    alt: String,
    /// How many containers are open (the deeper ones are not drawn).
    depth: usize,
    /// The last heading level written, so the next never skips one.
    last_heading: usize,
    /// The open headings: the level chosen (to close them alike), where
    /// each starts in `out` and the level before it (an empty one is
    /// dropped as if it never was).
    headings: Vec<(HeadingLevel, usize, usize)>,
}

impl<'a> Filter<'a> {
    fn apply(mut self, events: impl Iterator<Item = Event<'a>>) -> Vec<Event<'a>> {
        self.last_heading = PAGE_SECTION_LEVEL;
        for event in events {
            if self.image_depth > 0 {
                self.in_image(event);
            } else {
                self.event(event);
            }
        }
        self.out
    }

    fn in_image(&mut self, event: Event<'a>) {
        match event {
            Event::Start(Tag::Image { .. }) => self.image_depth += 1,
            Event::End(TagEnd::Image) => {
                self.image_depth -= 1;
                if self.image_depth == 0 {
                    let alt = std::mem::take(&mut self.alt);
                    self.out.push(Event::Text(format!("[image: {alt}]").into()));
                }
            }
            Event::Text(t) | Event::Code(t) | Event::Html(t) | Event::InlineHtml(t) => {
                self.alt.push_str(&t);
            }
            Event::SoftBreak | Event::HardBreak => self.alt.push(' '),
            _ => {}
        }
    }

    fn event(&mut self, event: Event<'a>) {
        let kept = match event {
            Event::Html(t) | Event::InlineHtml(t) => Event::Text(t),
            Event::TaskListMarker(done) => Event::Text(if done { "[x] " } else { "[ ] " }.into()),
            Event::Start(tag) => match self.start(tag) {
                Some(tag) => Event::Start(tag),
                None => return,
            },
            Event::End(end) => match self.end(end) {
                Some(end) => Event::End(end),
                None => return,
            },
            other => other,
        };
        self.out.push(kept);
    }

    fn start(&mut self, tag: Tag<'a>) -> Option<Tag<'a>> {
        match tag {
            Tag::HtmlBlock => Some(Tag::CodeBlock(pulldown_cmark::CodeBlockKind::Indented)),
            Tag::Image { .. } => {
                self.image_depth = 1;
                None
            }
            Tag::Link {
                link_type,
                dest_url,
                title,
                id,
            } => {
                let keep = allowed_destination(&dest_url);
                self.links
                    .push(keep.then(|| (self.out.len(), dest_url.clone())));
                keep.then_some(Tag::Link {
                    link_type,
                    dest_url,
                    title,
                    id,
                })
            }
            Tag::Heading { level, .. } => {
                let wanted = level as usize + PAGE_SECTION_LEVEL;
                let chosen = wanted.min(self.last_heading + 1).min(6);
                let level = heading_level(chosen);
                self.headings
                    .push((level, self.out.len(), self.last_heading));
                self.last_heading = chosen;
                Some(Tag::Heading {
                    level,
                    id: None,
                    classes: Vec::new(),
                    attrs: Vec::new(),
                })
            }
            Tag::BlockQuote(_)
            | Tag::List(_)
            | Tag::Item
            | Tag::Emphasis
            | Tag::Strong
            | Tag::Strikethrough => {
                self.depth += 1;
                (self.depth <= MAX_DEPTH).then_some(tag)
            }
            Tag::CodeBlock(pulldown_cmark::CodeBlockKind::Fenced(_)) => Some(Tag::CodeBlock(
                pulldown_cmark::CodeBlockKind::Fenced(CowStr::Borrowed("")),
            )),
            other => Some(other),
        }
    }

    fn end(&mut self, end: TagEnd) -> Option<TagEnd> {
        match end {
            TagEnd::HtmlBlock => Some(TagEnd::CodeBlock),
            TagEnd::Link => {
                let (start, dest) = self.links.pop().flatten()?;
                if self.out.len() == start + 1 {
                    self.out.push(Event::Text(dest));
                }
                Some(TagEnd::Link)
            }
            TagEnd::Heading(_) => {
                let (level, start, before) = self.headings.pop()?;
                if self.out.len() == start + 1 {
                    self.out.pop();
                    self.last_heading = before;
                    return None;
                }
                Some(TagEnd::Heading(level))
            }
            TagEnd::BlockQuote(_)
            | TagEnd::List(_)
            | TagEnd::Item
            | TagEnd::Emphasis
            | TagEnd::Strong
            | TagEnd::Strikethrough => {
                let kept = self.depth <= MAX_DEPTH;
                self.depth = self.depth.saturating_sub(1);
                kept.then_some(end)
            }
            other => Some(other),
        }
    }
}

fn heading_level(level: usize) -> HeadingLevel {
    match level {
        0..=3 => HeadingLevel::H3,
        4 => HeadingLevel::H4,
        5 => HeadingLevel::H5,
        _ => HeadingLevel::H6,
    }
}

#[cfg(test)]
#[path = "markdown_tests.rs"]
pub(in crate::render) mod tests;
