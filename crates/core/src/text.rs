//! Text a person reads in a terminal, or a model reads as context, shown as
//! what it is. Two jobs, both pure:
//!
//! - **Hidden characters.** A C0/C1 control (an ESC sequence moves the
//!   cursor and erases lines, so a body could print a forged `writer:`
//!   line) or a Unicode bidi embedding/override/isolate control (which
//!   reorders what follows) changes how the rest of the text is displayed.
//!   Validation refuses them in every stored field ([`crate::api::validation`]);
//!   the CLI still escapes whatever such characters an older object holds
//!   ([`visible_block`], [`visible_line`]).
//! - **Fences.** A body shown to a model as data sits inside a tilde fence
//!   longer than any run of tildes or backticks in the body *after NFKC
//!   normalisation*, so neither an ASCII run nor a look-alike (fullwidth
//!   `～`, which NFKC folds to `~`) reads as the fence's end ([`fence_for`]).
//!   NFKC comes from `unicode-normalization` (the unicode-rs crate the URL
//!   and IDNA stacks already use).

use std::borrow::Cow;

use unicode_normalization::UnicodeNormalization;

/// The 1-based line and column (in characters) of a byte offset, as
/// refusals name a position (a hidden character, a credential).
pub(crate) fn line_and_column(text: &str, byte: usize) -> (usize, usize) {
    let before = &text[..byte];
    let line = before.bytes().filter(|b| *b == b'\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    (line, before[line_start..].chars().count() + 1)
}

/// The Unicode bidi embedding, override and isolate controls (LRE, RLE,
/// PDF, LRO, RLO; LRI, RLI, FSI, PDI): they reorder how the text after
/// them is displayed.
pub fn is_bidi_control(c: char) -> bool {
    matches!(c, '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}')
}

/// Whether `c` would not show as itself: a control (C0, DEL, C1) or a bidi
/// control. In a multi-line text (`multiline`) tab and newline are text,
/// and so is a carriage return that `next` shows to be a CRLF's.
pub fn is_hidden(c: char, next: Option<char>, multiline: bool) -> bool {
    match c {
        '\n' | '\t' => !multiline,
        '\r' => !(multiline && next == Some('\n')),
        _ => c.is_control() || is_bidi_control(c),
    }
}

/// `text` with every hidden character but tab, newline and a CRLF written
/// as a visible escape (`\u{1b}`), for printing a body.
pub fn visible_block(text: &str) -> Cow<'_, str> {
    escape(text, true)
}

/// `text` with every hidden character, tab and newline included, written
/// as a visible escape, for a one-line field (a key, a writer, a column).
pub fn visible_line(text: &str) -> Cow<'_, str> {
    escape(text, false)
}

fn escape(text: &str, multiline: bool) -> Cow<'_, str> {
    let mut chars = text.chars().peekable();
    let mut at = 0usize;
    while let Some(c) = chars.next() {
        if is_hidden(c, chars.peek().copied(), multiline) {
            return Cow::Owned(escape_from(text, at, multiline));
        }
        at += c.len_utf8();
    }
    Cow::Borrowed(text)
}

fn escape_from(text: &str, first: usize, multiline: bool) -> String {
    let mut out = String::with_capacity(text.len() + 8);
    out.push_str(&text[..first]);
    let mut chars = text[first..].chars().peekable();
    while let Some(c) = chars.next() {
        if is_hidden(c, chars.peek().copied(), multiline) {
            out.push_str(&format!("\\u{{{:x}}}", u32::from(c)));
        } else {
            out.push(c);
        }
    }
    out
}

/// A tilde fence longer than any run of `~` or `` ` `` in `body` after NFKC
/// normalisation (at least three), so nothing in the body closes it.
pub fn fence_for(body: &str) -> String {
    let mut longest = 0usize;
    let mut run = 0usize;
    let mut run_char = None;
    for c in body.nfkc() {
        if c == '~' || c == '`' {
            run = if run_char == Some(c) { run + 1 } else { 1 };
            run_char = Some(c);
            longest = longest.max(run);
        } else {
            run = 0;
            run_char = None;
        }
    }
    "~".repeat((longest + 1).max(3))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_and_columns_count_characters() {
        let text = "ab\nçé x";
        assert_eq!(line_and_column(text, 0), (1, 1));
        assert_eq!(line_and_column(text, 3), (2, 1));
        assert_eq!(line_and_column(text, text.find('x').expect("x")), (2, 4));
    }

    #[test]
    fn hidden_characters_are_escaped_and_text_is_kept() {
        // (input, as a block, as a line)
        let cases = [
            ("plain", "plain", "plain"),
            ("a\nb\tc", "a\nb\tc", "a\\u{a}b\\u{9}c"),
            (
                "crlf\r\nlone\r",
                "crlf\r\nlone\\u{d}",
                "crlf\\u{d}\\u{a}lone\\u{d}",
            ),
            (
                "\u{1b}[1A\u{1b}[2K- writer: root",
                "\\u{1b}[1A\\u{1b}[2K- writer: root",
                "\\u{1b}[1A\\u{1b}[2K- writer: root",
            ),
            ("c1\u{9b}2J", "c1\\u{9b}2J", "c1\\u{9b}2J"),
            ("abc\u{202e}fed", "abc\\u{202e}fed", "abc\\u{202e}fed"),
            ("日本 🎉 مرحبا", "日本 🎉 مرحبا", "日本 🎉 مرحبا"),
            ("del\u{7f}", "del\\u{7f}", "del\\u{7f}"),
        ];
        for (input, block, line) in cases {
            assert_eq!(visible_block(input), block, "{input:?}");
            assert_eq!(visible_line(input), line, "{input:?}");
        }
        assert!(matches!(visible_block("fine\n"), Cow::Borrowed(_)));
    }

    #[test]
    fn fences_outgrow_every_run_after_nfkc() {
        // (body, fence length)
        let cases = [
            ("", 3),
            ("~", 3),
            ("a ~~~ b", 4),
            ("~~~~~~", 7),
            ("```` code", 5),
            ("~`~`~`", 3),
            // Fullwidth tildes and backticks fold to ASCII under NFKC.
            ("\u{ff5e}\u{ff5e}\u{ff5e}\u{ff5e}\u{ff5e}", 6),
            ("\u{ff40}\u{ff40}\u{ff40}\u{ff40}", 5),
            ("~~\u{ff5e}~~", 6),
        ];
        for (body, len) in cases {
            assert_eq!(fence_for(body).len(), len, "{body:?}");
            assert!(fence_for(body).chars().all(|c| c == '~'));
        }
    }
}
