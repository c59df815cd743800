use std::path::PathBuf;

use super::*;

/// What a hostile fixture must render to.
enum Expect {
    /// Exactly this HTML.
    Exact(&'static str),
    /// A check of its own (long or deep bodies), with what it asserts.
    Check(&'static str, fn(&str) -> bool),
}

use Expect::{Check, Exact};

const REL: &str = r#"rel="noopener noreferrer nofollow ugc""#;

fn cases() -> Vec<(&'static str, Expect)> {
    vec![
        (
            "raw-script",
            Exact(
                "<pre><code>&lt;script&gt;document.title='pwned'&lt;/script&gt;\n</code></pre>\n",
            ),
        ),
        (
            "inline-script",
            Exact("<p>Hello &lt;script&gt;document.title='pwned'&lt;/script&gt; world</p>\n"),
        ),
        (
            "event-handler",
            Exact(
                "<p>&lt;img src=x onerror=\"document.title='pwned'\"&gt; &lt;div onmouseover=\"x()\"&gt;hover&lt;/div&gt;</p>\n",
            ),
        ),
        (
            "svg-iframe-object",
            Exact(
                "<p>&lt;svg&gt;&lt;script&gt;alert(1)&lt;/script&gt;&lt;/svg&gt;&lt;iframe src=\"/\"&gt;&lt;/iframe&gt;&lt;object data=\"/\"&gt;&lt;/object&gt;&lt;embed src=\"/\"&gt;</p>\n<p>inline &lt;svg onload=alert(1)&gt;&lt;/svg&gt; and &lt;iframe srcdoc=\"&lt;script&gt;alert(1)&lt;/script&gt;\"&gt;&lt;/iframe&gt;</p>\n",
            ),
        ),
        (
            "link-javascript",
            Exact("<p>click tab case space javascript:alert(1)</p>\n"),
        ),
        ("link-entity", Exact("<p>ent hex colon</p>\n")),
        ("link-data-vbscript-file", Exact("<p>d v f</p>\n")),
        ("link-relative", Exact("<p>del up proto</p>\n")),
        (
            "reference-link",
            Exact(
                "<p>x and [y][s]</p>\n<p>[s]: &lt;data:text/html,&lt;script&gt;alert(1)&lt;/script&gt;&gt;</p>\n",
            ),
        ),
        (
            "image-remote-and-data",
            Exact(
                "<p>[image: tracker] [image: d] ![svg](data:image/svg+xml,&lt;svg onload=alert(1)&gt;)</p>\n",
            ),
        ),
        (
            "image-reference-and-link",
            Exact(
                "<p>[image: ref] <a href=\"https://example.org/\" rel=\"noopener noreferrer nofollow ugc\">[image: inner]</a></p>\n",
            ),
        ),
        (
            "html-entities-in-href",
            Exact("<p>&lt;a href=\"&amp;#106;avascript:alert(1)\"&gt;e&lt;/a&gt;</p>\n"),
        ),
        (
            "html-comment-and-cdata",
            Exact(
                "<pre><code>&lt;!-- &lt;script&gt;alert(1)&lt;/script&gt; --&gt; &lt;![CDATA[&lt;script&gt;alert(1)&lt;/script&gt;]]&gt;\n</code></pre>\n",
            ),
        ),
        (
            "css-injection",
            Exact(
                "<pre><code>&lt;style&gt;body{display:none}&lt;/style&gt; &lt;span style=\"position:fixed;inset:0\"&gt;overlay&lt;/span&gt;\n</code></pre>\n",
            ),
        ),
        (
            "form-and-meta",
            Exact(
                "<pre><code>&lt;form action=\"/ns/x/handoffs/y/delete\" method=\"post\"&gt;&lt;input name=\"csrf\"&gt;&lt;button&gt;go&lt;/button&gt;&lt;/form&gt;\n&lt;meta http-equiv=\"refresh\" content=\"0;url=https://attacker.invalid/\"&gt;&lt;base href=\"https://attacker.invalid/\"&gt;&lt;link rel=\"stylesheet\" href=\"https://attacker.invalid/x.css\"&gt;\n</code></pre>\n",
            ),
        ),
        (
            "id-clobbering",
            Exact(
                "<pre><code>&lt;div id=\"content\" data-live=\"/ns/x/live\"&gt;x&lt;/div&gt; &lt;a name=\"content\"&gt;y&lt;/a&gt;\n</code></pre>\n<h3>content {#content}</h3>\n",
            ),
        ),
        (
            "heading-levels",
            Exact("<h3>Title</h3>\n<h4>Skipped a level</h4>\n<h5>Deep</h5>\n"),
        ),
        (
            "autolink-and-mailto",
            Exact(
                "<p><a href=\"https://example.org/ok\" rel=\"noopener noreferrer nofollow ugc\">https://example.org/ok</a> <a href=\"mailto:a@example.org\" rel=\"noopener noreferrer nofollow ugc\">mailto:a@example.org</a> https://bare.example.org <a href=\"#notes\" rel=\"noopener noreferrer nofollow ugc\">frag</a></p>\n",
            ),
        ),
        (
            "bidi-controls",
            Exact(
                "<p>The fix is \\u{202e}gnol os ton\\u{202c} and \\u{2066}isolated\\u{2069} and \u{200e}mark\u{200f}.</p>\n",
            ),
        ),
        (
            "c0-and-esc",
            Exact("<p>bell\\u{7} esc\\u{1b}[2J del\\u{7f} c1\\u{85} done</p>\n"),
        ),
        (
            "task-list",
            Exact("<ul>\n<li>[x] done</li>\n<li>[ ] todo</li>\n</ul>\n"),
        ),
        (
            "table-style",
            Exact(
                "<table><thead><tr><th>a</th><th>b</th></tr></thead><tbody>\n<tr><td>&lt;b onclick=x()&gt;1&lt;/b&gt;</td><td>2</td></tr>\n</tbody></table>\n",
            ),
        ),
        (
            "long-line",
            Check("one paragraph of every 'a'", |h| {
                h.starts_with("<p>aaaa")
                    && h.ends_with("aaaa</p>\n")
                    && h.matches('a').count() > 32_000
            }),
        ),
        (
            "long-backticks",
            Check("an empty code block (the line is a fence)", |h| {
                h == "<pre><code></code></pre>\n"
            }),
        ),
        (
            "long-code-line",
            Check("one pre of every 'b'", |h| {
                h.starts_with("<pre><code>bbbb") && h.ends_with("bbbb\n</code></pre>\n")
            }),
        ),
        (
            "deep-quotes",
            Check("block quotes stop at MAX_DEPTH", |h| {
                h.matches("<blockquote>").count() == MAX_DEPTH && h.contains("<p>x</p>")
            }),
        ),
        (
            "deep-lists",
            Check("lists and items stop at MAX_DEPTH together", |h| {
                let open = h.matches("<ul>").count() + h.matches("<li>").count();
                open == MAX_DEPTH && h.matches('l').count() >= 150
            }),
        ),
        (
            "deep-emphasis",
            Check("emphasis stops at MAX_DEPTH", |h| {
                let open = h.matches("<strong>").count() + h.matches("<em>").count();
                open == MAX_DEPTH && h.contains('x')
            }),
        ),
        (
            "deep-brackets",
            Check("brackets stay text", |h| {
                h.starts_with("<p>[[[[") && !h.contains("<a")
            }),
        ),
    ]
}

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/hostile")
}

#[test]
fn every_hostile_body_renders_as_expected_and_inert() {
    for (name, expect) in cases() {
        let path = fixtures().join(format!("{name}.md"));
        let body =
            std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let html = to_safe_html(&body);
        assert_inert(name, &html);
        match expect {
            Exact(want) => assert_eq!(html, want, "{name}"),
            Check(what, check) => assert!(check(&html), "{name}: {what}; got {html:.400}"),
        }
    }
}

#[test]
fn every_fixture_has_a_case() {
    let known: Vec<_> = cases().into_iter().map(|(name, _)| name).collect();
    let entries = std::fs::read_dir(fixtures()).expect("the hostile fixtures directory");
    for entry in entries {
        let name = entry.expect("a fixture").file_name();
        let name = name.to_string_lossy();
        let stem = name
            .strip_suffix(".md")
            .unwrap_or_else(|| panic!("{name}: not .md"));
        assert!(
            known.contains(&stem),
            "fixture {name} has no expectation in cases()"
        );
    }
}

/// Tags a body may produce, and the attributes they may carry.
const TAGS: &[&str] = &[
    "p",
    "a",
    "pre",
    "code",
    "blockquote",
    "ul",
    "ol",
    "li",
    "h3",
    "h4",
    "h5",
    "h6",
    "table",
    "thead",
    "tbody",
    "tr",
    "th",
    "td",
    "em",
    "strong",
    "del",
    "br",
    "hr",
];
const ATTRIBUTES: &[&str] = &["href", "rel", "title", "start"];

/// No element outside [`TAGS`], no attribute outside [`ATTRIBUTES`]
/// (so no `on…`, `style`, `id`, `src`), every `href` http(s), mailto or a
/// fragment, every link with the `rel`.
fn assert_inert(name: &str, html: &str) {
    for tag in tags(html) {
        assert!(
            TAGS.contains(&tag.name.as_str()),
            "{name}: element <{}>",
            tag.name
        );
        for (attr, value) in &tag.attributes {
            assert!(
                ATTRIBUTES.contains(&attr.as_str()),
                "{name}: attribute {attr}={value:?}"
            );
            if attr == "href" {
                assert!(allowed_destination(value), "{name}: href {value:?}");
            }
        }
        if tag.name == "a" {
            assert!(
                tag.raw.contains(REL),
                "{name}: link without rel: {}",
                tag.raw
            );
        }
    }
    for absent in [
        "<script",
        "<img",
        "javascript:",
        "data:",
        "<style",
        "<iframe",
        "<svg",
    ] {
        let in_markup = tags(html)
            .iter()
            .any(|t| t.raw.to_ascii_lowercase().contains(absent));
        assert!(!in_markup, "{name}: {absent} in markup");
    }
}

pub(in crate::render) struct TagSeen {
    pub(in crate::render) name: String,
    pub(in crate::render) attributes: Vec<(String, String)>,
    raw: String,
}

/// The start tags of serialised HTML (every `<` that is text is escaped,
/// so each `<` starts a tag; values are double-quoted).
pub(in crate::render) fn tags(html: &str) -> Vec<TagSeen> {
    let mut out = Vec::new();
    let mut rest = html;
    while let Some(start) = rest.find('<') {
        let after = &rest[start + 1..];
        let mut quoted = false;
        let end = after
            .char_indices()
            .find(|&(_, c)| {
                if c == '"' {
                    quoted = !quoted;
                }
                c == '>' && !quoted
            })
            .map_or(after.len(), |(i, _)| i);
        let raw = &after[..end];
        rest = &after[end..];
        if raw.starts_with('/') {
            continue;
        }
        let name_end = raw.find([' ', '/']).unwrap_or(raw.len());
        out.push(TagSeen {
            name: raw[..name_end].to_ascii_lowercase(),
            attributes: attributes(&raw[name_end..]),
            raw: raw.to_owned(),
        });
    }
    out
}

fn attributes(mut s: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    loop {
        s = s.trim_start_matches([' ', '/']);
        if s.is_empty() {
            return out;
        }
        let name_end = s.find(['=', ' ']).unwrap_or(s.len());
        let name = s[..name_end].to_ascii_lowercase();
        s = &s[name_end..];
        let mut value = String::new();
        if let Some(v) = s.strip_prefix("=\"") {
            let close = v.find('"').unwrap_or(v.len());
            value = v[..close].to_owned();
            s = v.get(close + 1..).unwrap_or("");
        }
        out.push((name, value));
    }
}

#[test]
fn destinations_are_judged_as_a_browser_would() {
    let cases = [
        ("https://example.org/x", true),
        ("HTTP://example.org", true),
        ("mailto:a@example.org", true),
        ("#notes", true),
        ("javascript:alert(1)", false),
        ("JaVaScRiPt:alert(1)", false),
        ("java\tscript:alert(1)", false),
        (" \u{1}javascript:alert(1)", false),
        ("https\n://x", true),
        ("data:text/html,x", false),
        ("vbscript:x", false),
        ("file:///etc/passwd", false),
        ("/ns/x/handoffs/y/delete", false),
        ("//attacker.invalid/x", false),
        ("../offers", false),
        ("", false),
    ];
    for (dest, want) in cases {
        assert_eq!(allowed_destination(dest), want, "{dest:?}");
    }
}

/// The second belt alone: what step 2 would never produce, ammonia still
/// removes.
#[test]
fn the_sanitiser_alone_removes_what_the_filter_would() {
    let cases = [
        ("<script>alert(1)</script>x", "x"),
        ("<img src=\"https://attacker.invalid/p.png\">", ""),
        (
            "<a href=\"javascript:alert(1)\">j</a>",
            "<a rel=\"noopener noreferrer nofollow ugc\">j</a>",
        ),
        (
            "<a href=\"java&#9;script:alert(1)\">t</a>",
            "<a rel=\"noopener noreferrer nofollow ugc\">t</a>",
        ),
        (
            "<a href=\"/ns/x/delete\">r</a>",
            "<a rel=\"noopener noreferrer nofollow ugc\">r</a>",
        ),
        (
            "<a href=\"#f\">f</a>",
            "<a href=\"#f\" rel=\"noopener noreferrer nofollow ugc\">f</a>",
        ),
        (
            "<div id=\"content\" style=\"display:none\" onclick=\"x()\">d</div>",
            "<div>d</div>",
        ),
        ("<p onmouseover=\"x()\">p</p><!-- c -->", "<p>p</p>"),
        ("<iframe src=\"/\"></iframe><form><input></form>", ""),
    ];
    for (input, want) in cases {
        assert_eq!(CLEANER.clean(input).to_string(), want, "{input}");
    }
}

#[test]
fn links_keep_their_text_when_dropped_and_their_rel_when_kept() {
    let cases = [
        (
            "[a](https://x.example/)",
            "<p><a href=\"https://x.example/\" rel=\"noopener noreferrer nofollow ugc\">a</a></p>\n",
        ),
        ("[a *b*](javascript:x)", "<p>a <em>b</em></p>\n"),
        (
            "[a](https://x.example/ \"t\")",
            "<p><a href=\"https://x.example/\" title=\"t\" rel=\"noopener noreferrer nofollow ugc\">a</a></p>\n",
        ),
        (
            "![alt *b*](https://x.example/p.png)",
            "<p>[image: alt b]</p>\n",
        ),
        (
            "```rust\nfn x() {}\n```",
            "<pre><code>fn x() {}\n</code></pre>\n",
        ),
        ("x  \ny ~~z~~", "<p>x<br>\ny <del>z</del></p>\n"),
        (
            "[](https://x.example/)",
            "<p><a href=\"https://x.example/\" rel=\"noopener noreferrer nofollow ugc\">https://x.example/</a></p>\n",
        ),
        ("#\n\n## b", "<h3>b</h3>\n"),
        (
            "###### a\n\n# b\n\n## c",
            "<h3>a</h3>\n<h3>b</h3>\n<h4>c</h4>\n",
        ),
    ];
    for (body, want) in cases {
        assert_eq!(to_safe_html(body), want, "{body}");
    }
}
