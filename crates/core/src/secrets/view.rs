//! Views of a text in which a credential that hides from the text as
//! written shows: escapes decoded, wrapped lines joined, base64 decoded.
//!
//! A view keeps, for each of its bytes, where the bytes it came from start
//! and end in the original text, so that a finding in the view names the
//! original line and column and redacts the original bytes.

use std::borrow::Cow;
use std::ops::Range;
use std::sync::LazyLock;

use base64::Engine as _;
use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
use regex::Regex;

/// A text to scan and the way back to the original.
pub(super) struct View<'a> {
    pub(super) text: Cow<'a, str>,
    /// For each byte of `text` (and one past its end), the original range
    /// it came from; `None` for the text as written.
    origin: Option<Vec<Range<usize>>>,
}

impl<'a> View<'a> {
    pub(super) fn as_written(text: &'a str) -> Self {
        Self {
            text: Cow::Borrowed(text),
            origin: None,
        }
    }

    /// The original bytes a range of the view came from.
    pub(super) fn original(&self, range: &Range<usize>) -> Range<usize> {
        match &self.origin {
            None => range.clone(),
            Some(origin) if range.is_empty() => {
                origin[range.start].start..origin[range.start].start
            }
            Some(origin) => origin[range.start].start..origin[range.end - 1].end,
        }
    }

    /// Whether the range of the view is not a verbatim copy of the
    /// original (it holds a decoded escape or a joined line break).
    pub(super) fn rewritten(&self, range: &Range<usize>) -> bool {
        self.original(range).len() != range.len()
    }
}

/// Builds a view from pieces: verbatim slices and replacements.
struct Builder<'a> {
    source: &'a str,
    text: String,
    origin: Vec<Range<usize>>,
}

impl<'a> Builder<'a> {
    fn new(source: &'a str) -> Self {
        Self {
            source,
            text: String::with_capacity(source.len()),
            origin: Vec::with_capacity(source.len() + 1),
        }
    }

    fn verbatim(&mut self, range: Range<usize>) {
        self.text.push_str(&self.source[range.clone()]);
        self.origin.extend(range.map(|i| i..i + 1));
    }

    fn replaced(&mut self, with: &str, from: Range<usize>) {
        self.text.push_str(with);
        self.origin.extend(std::iter::repeat_n(from, with.len()));
    }

    fn finish(mut self) -> View<'a> {
        let end = self.source.len();
        self.origin.push(end..end);
        View {
            text: Cow::Owned(self.text),
            origin: Some(self.origin),
        }
    }
}

/// The text with JSON / shell style escapes decoded (`\n`, `\t`, `\r`,
/// `\"`, `\'`, `\\`, `\/`), or `None` when it holds none.
pub(super) fn unescaped(text: &str) -> Option<View<'_>> {
    static ESCAPE: LazyLock<Regex> = LazyLock::new(|| compile(r#"\\[ntr"'\\/]"#));
    let mut escapes = ESCAPE.find_iter(text).peekable();
    escapes.peek()?;
    let mut view = Builder::new(text);
    let mut at = 0;
    for escape in escapes {
        view.verbatim(at..escape.start());
        let decoded = match &escape.as_str()[1..] {
            "n" => "\n",
            "t" => "\t",
            "r" => "\r",
            other => other,
        };
        view.replaced(decoded, escape.range());
        at = escape.end();
    }
    view.verbatim(at..text.len());
    Some(view.finish())
}

/// The text with every line break that falls inside a token removed (with
/// the next line's indentation): `ghp_abc` / `def` becomes `ghp_abcdef`.
/// `None` when no break falls between two token characters.
pub(super) fn unwrapped(text: &str) -> Option<View<'_>> {
    static BREAK: LazyLock<Regex> =
        LazyLock::new(|| compile(r"[A-Za-z0-9_+/=-](\r?\n[ \t]*)[A-Za-z0-9_+/=-]"));
    let mut view: Option<Builder<'_>> = None;
    let mut at = 0;
    let mut from = 0;
    while let Some(caps) = BREAK.captures_at(text, from) {
        let Some(gap) = caps.get(1) else { break };
        let builder = view.get_or_insert_with(|| Builder::new(text));
        builder.verbatim(at..gap.start());
        at = gap.end();
        // The next token character may start the next break.
        from = gap.end();
    }
    let mut builder = view?;
    builder.verbatim(at..text.len());
    Some(builder.finish())
}

/// The base64 blobs of a text (at least 24 characters, or lines of at
/// least 60 wrapped as `base64` wraps them), each with its decoded text.
/// A blob that does not decode to text (an image, a DER key, a hex digest
/// read as base64) is left out.
pub(super) fn base64_blobs(text: &str) -> impl Iterator<Item = (Range<usize>, String)> + '_ {
    static BLOB: LazyLock<Regex> = LazyLock::new(|| {
        compile(
            r"(?:[A-Za-z0-9+/]{60,}\r?\n[ \t]*)+[A-Za-z0-9+/]{2,}={0,2}|[A-Za-z0-9+/]{24,}={0,2}|[A-Za-z0-9_-]{24,}={0,2}",
        )
    });
    BLOB.find_iter(text).filter_map(|blob| {
        let decoded = decode_text(blob.as_str())?;
        Some((blob.range(), decoded))
    })
}

/// A blob decoded as standard or URL-safe base64, padding optional, when
/// the result is text (UTF-8 without control characters but tab and line
/// breaks).
fn decode_text(blob: &str) -> Option<String> {
    let config = GeneralPurposeConfig::new()
        .with_decode_padding_mode(DecodePaddingMode::Indifferent)
        .with_decode_allow_trailing_bits(true);
    let standard = GeneralPurpose::new(&base64::alphabet::STANDARD, config);
    let url_safe = GeneralPurpose::new(&base64::alphabet::URL_SAFE, config);
    let compact: String = blob.chars().filter(|c| !c.is_whitespace()).collect();
    let bytes = standard
        .decode(&compact)
        .or_else(|_| url_safe.decode(&compact))
        .ok()?;
    let text = String::from_utf8(bytes).ok()?;
    let is_text = text
        .chars()
        .all(|c| !c.is_control() || matches!(c, '\n' | '\r' | '\t'));
    is_text.then_some(text)
}

/// Compiles one of this module's fixed patterns.
fn compile(pattern: &str) -> Regex {
    Regex::new(pattern).unwrap_or_else(|e| panic!("pattern {pattern:?} does not compile: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unescaping_maps_back_to_the_original() {
        let text = r#"{"k":"a\nb: c"}"#;
        let view = unescaped(text).expect("has escapes");
        assert_eq!(view.text, "{\"k\":\"a\nb: c\"}");
        let b = view.text.find('b').expect("b");
        assert_eq!(&text[view.original(&(b..b + 4))], "b: c");
        let nl = view.text.find('\n').expect("newline");
        assert_eq!(&text[view.original(&(nl..nl + 1))], "\\n");
        assert!(view.rewritten(&(nl - 1..nl + 2)));
        assert!(unescaped("no escapes here").is_none());
    }

    #[test]
    fn unwrapping_joins_only_breaks_inside_tokens() {
        let text = "token ghp_abc\n    def and\n\nmore";
        let view = unwrapped(text).expect("a break inside a token");
        assert_eq!(view.text, "token ghp_abcdef and\n\nmore");
        let start = view.text.find("ghp_").expect("token");
        let range = start..start + "ghp_abcdef".len();
        assert_eq!(&text[view.original(&range)], "ghp_abc\n    def");
        assert!(view.rewritten(&range));
        assert!(unwrapped("one line.\n- next").is_none());
    }

    #[test]
    fn base64_blobs_decode_to_text_or_are_left_out() {
        use base64::engine::general_purpose::STANDARD;
        let hidden = STANDARD.encode("users:\n- name: ci\n  user:\n    token: abc");
        let wrapped = {
            let long = STANDARD.encode("x".repeat(100));
            format!("{}\n  {}", &long[..64], &long[64..])
        };
        let sha = "3f786850e387550fdab836ed7e6dc881de23001b";
        let text = format!("a {hidden} b\n{wrapped}\nsha {sha}");
        let blobs: Vec<_> = base64_blobs(&text).map(|(_, decoded)| decoded).collect();
        assert_eq!(
            blobs,
            vec![
                "users:\n- name: ci\n  user:\n    token: abc".to_owned(),
                "x".repeat(100)
            ]
        );
    }
}
