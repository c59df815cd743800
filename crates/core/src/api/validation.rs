//! Validation of handoff fields before anything is sent to the apiserver.
//!
//! The same rules as the CRD's schema, checked early so an agent gets one
//! clear message naming the field, the rule and what is wrong with the
//! value, instead of an apiserver round trip. The rules CEL cannot express
//! (the text rule below, with the position it reports) reach `kubectl` and
//! GitOps writers through the admission webhook, which calls
//! [`handoff_spec`] and [`offer_spec`]: one code for every path.
//!
//! **Text that cannot lie** ([`crate::text`]): no stored string holds a
//! C0/C1 control or a bidi control; multi-line fields keep tab, newline
//! and the carriage return of a CRLF, one-line fields none.

use super::handoff::{
    HandoffSpec, MAX_BODY_CHARS, MAX_KEY_BYTES, MAX_LABEL_CHARS, MAX_REPO_CHARS, MAX_WRITER_CHARS,
};
use super::naming::is_label_value;
use super::offer::HandoffOfferSpec;
use crate::text::{is_bidi_control, is_hidden, line_and_column};

/// A field that breaks a rule.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid `{field}`: {rule}; {problem}")]
pub struct FieldError {
    /// The argument / field name.
    pub field: &'static str,
    /// The rule, in words.
    pub rule: String,
    /// What is wrong with the given value.
    pub problem: String,
}

impl FieldError {
    fn new(field: &'static str, rule: impl Into<String>, problem: impl Into<String>) -> Self {
        Self {
            field,
            rule: rule.into(),
            problem: problem.into(),
        }
    }
}

/// The handoff key: 1–1024 bytes of UTF-8, no control characters.
pub fn handoff_key(value: &str) -> Result<(), FieldError> {
    let rule = format!(
        "a non-empty conversation key of at most {MAX_KEY_BYTES} bytes of UTF-8 without control characters"
    );
    required("handoff_key", value, &rule)?;
    if value.len() > MAX_KEY_BYTES {
        return Err(FieldError::new(
            "handoff_key",
            rule,
            format!(
                "got {} bytes ({} characters), over the limit of {MAX_KEY_BYTES} bytes",
                value.len(),
                value.chars().count()
            ),
        ));
    }
    no_control("handoff_key", value, &rule)
}

/// The project: a non-empty valid label value.
pub fn project(value: &str) -> Result<(), FieldError> {
    label_value("project", value)
}

/// Any field that must be a non-empty valid label value (e.g. an agent name).
pub fn label_value(field: &'static str, value: &str) -> Result<(), FieldError> {
    let rule = "a valid label value: at most 63 characters, only letters, digits, '-', '_' or '.', \
                starting and ending with a letter or digit";
    required(field, value, rule)?;
    if is_label_value(value) {
        return Ok(());
    }
    let problem = if value.chars().count() > MAX_LABEL_CHARS {
        format!("got {} characters", value.chars().count())
    } else {
        format!("got {}", preview(value))
    };
    Err(FieldError::new(field, rule, problem))
}

/// The repository: optional, at most 253 characters, no control characters.
pub fn repo(value: &str) -> Result<(), FieldError> {
    let rule =
        format!("at most {MAX_REPO_CHARS} characters without control characters (e.g. org/repo)");
    check_max_chars("repo", value, MAX_REPO_CHARS, &rule)?;
    no_control("repo", value, &rule)
}

/// The kind: optional, at most 63 characters, no control characters.
pub fn kind(value: &str) -> Result<(), FieldError> {
    let rule =
        format!("at most {MAX_LABEL_CHARS} characters without control characters (e.g. issue)");
    check_max_chars("kind", value, MAX_LABEL_CHARS, &rule)?;
    no_control("kind", value, &rule)
}

/// The body: 1–32768 characters of [`multiline_text`].
pub fn body(value: &str) -> Result<(), FieldError> {
    let rule = format!(
        "a non-empty markdown summary of at most {MAX_BODY_CHARS} characters (a summary, not a log) \
         without control characters other than tab and newline, nor bidi controls"
    );
    required("body", value, &rule)?;
    check_max_chars("body", value, MAX_BODY_CHARS, &rule)?;
    hidden_character("body", value, true).map_or(Ok(()), |problem| {
        Err(FieldError::new("body", rule, problem))
    })
}

/// A multi-line text field of at most `max` characters (an offer's body):
/// no control characters but tab, newline and a CRLF's carriage return, no
/// bidi controls.
pub fn multiline_text(field: &'static str, value: &str, max: usize) -> Result<(), FieldError> {
    let rule = format!(
        "at most {max} characters without control characters other than tab and newline, nor bidi controls"
    );
    check_max_chars(field, value, max, &rule)?;
    hidden_character(field, value, true)
        .map_or(Ok(()), |problem| Err(FieldError::new(field, rule, problem)))
}

/// A one-line text field of at most `max` characters (a session id, an
/// artifact reference, a writer's name): no control or bidi characters.
pub fn line_text(field: &'static str, value: &str, max: usize) -> Result<(), FieldError> {
    let rule = format!("at most {max} characters on one line, without control or bidi characters");
    check_max_chars(field, value, max, &rule)?;
    no_control(field, value, &rule)
}

/// Every field of a Handoff's spec, as the admission webhook checks a
/// `kubectl` or GitOps write (the bridge checks its arguments one by one,
/// with the same functions, before it builds a spec).
pub fn handoff_spec(spec: &HandoffSpec) -> Result<(), FieldError> {
    handoff_key(&spec.handoff_key)?;
    project(&spec.project)?;
    if let Some(repo_value) = &spec.repo {
        repo(repo_value)?;
    }
    if let Some(kind_value) = &spec.kind {
        kind(kind_value)?;
    }
    body(&spec.body)?;
    if let Some(writer) = &spec.created_by {
        line_text("createdBy", writer, MAX_WRITER_CHARS)?;
    }
    Ok(())
}

/// Every field of an offer's spec (see [`handoff_spec`]).
pub fn offer_spec(spec: &HandoffOfferSpec) -> Result<(), FieldError> {
    project(&spec.project)?;
    label_value("to", &spec.to)?;
    handoff_key(&spec.from_key).map_err(|e| FieldError {
        field: "fromKey",
        ..e
    })?;
    if let Some(session) = &spec.session {
        line_text("session", session, super::offer::MAX_SESSION_CHARS)?;
    }
    if let Some(artifact) = &spec.artifact {
        line_text("artifact", artifact, super::offer::MAX_ARTIFACT_CHARS)?;
    }
    if let Some(body_value) = &spec.body {
        multiline_text("body", body_value, MAX_BODY_CHARS)?;
    }
    Ok(())
}

/// No credential in any field of a Handoff's spec a writer supplies (the
/// admission webhook's check; the bridge checks its arguments one by one).
pub fn no_credentials_in_handoff(spec: &HandoffSpec) -> Result<(), FieldError> {
    no_credentials("handoff_key", &spec.handoff_key)?;
    no_credentials("project", &spec.project)?;
    if let Some(repo) = &spec.repo {
        no_credentials("repo", repo)?;
    }
    if let Some(kind) = &spec.kind {
        no_credentials("kind", kind)?;
    }
    no_credentials("body", &spec.body)
}

/// No credential in any field of an offer's spec (see
/// [`no_credentials_in_handoff`]).
pub fn no_credentials_in_offer(spec: &HandoffOfferSpec) -> Result<(), FieldError> {
    no_credentials("project", &spec.project)?;
    no_credentials("to", &spec.to)?;
    no_credentials("from_key", &spec.from_key)?;
    for (field, value) in [
        ("session", &spec.session),
        ("artifact", &spec.artifact),
        ("body", &spec.body),
    ] {
        if let Some(value) = value {
            no_credentials(field, value)?;
        }
    }
    Ok(())
}

/// No credential in a field the writer supplies: the first finding of
/// [`crate::secrets::find`] is named by its rule id, line and column, never
/// echoed.
pub fn no_credentials(field: &'static str, value: &str) -> Result<(), FieldError> {
    match crate::secrets::find(value).first() {
        None => Ok(()),
        Some(finding) => Err(FieldError::new(
            field,
            "no credentials: a handoff is kept in etcd, its backups and the mirror's history; \
             remove it or name where it lives (e.g. the token in Secret ci/github)",
            format!("a credential at {} (not shown)", finding.describe()),
        )),
    }
}

/// Longest cursor a paged tool takes, in characters (its own cursors are
/// a few hundred: base64url of a small JSON position).
pub const MAX_CURSOR_CHARS: usize = 4096;

/// A cursor's text, before it is decoded: what is wrong with it, or `None`
/// when it has a cursor's shape — at most [`MAX_CURSOR_CHARS`] base64url
/// characters (`A`–`Z`, `a`–`z`, `0`–`9`, `-`, `_`), surrounding
/// whitespace ignored. A hidden character is named first, by code point
/// and byte, with the body's rule. Each paged tool says whose cursor it
/// must be, so the tool builds the [`FieldError`].
pub fn cursor_problem(value: &str) -> Option<String> {
    let value = value.trim();
    if let Some(problem) = hidden_character("cursor", value, false) {
        return Some(problem);
    }
    let count = value.chars().count();
    if count > MAX_CURSOR_CHARS {
        return Some(format!(
            "got {count} characters, over the limit of {MAX_CURSOR_CHARS}"
        ));
    }
    value
        .char_indices()
        .find(|(_, c)| !(c.is_ascii_alphanumeric() || matches!(c, '-' | '_')))
        .map(|(at, c)| {
            format!(
                "it contains {c:?} at byte {at}, which is not base64url (A-Z, a-z, 0-9, '-', '_')"
            )
        })
}

/// A search query of at most `max` characters: words, as the body's text
/// rule has them (tab and newline are spaces; no other control character,
/// no bidi control), so nothing PostgreSQL cannot store (a NUL) reaches it.
pub fn search_query(value: &str, max: usize) -> Result<(), FieldError> {
    multiline_text("query", value, max)
}

/// An object's name, as `reject_offer` takes an offer's: a DNS-1123
/// subdomain (at most 253 characters: lower-case letters, digits, `-` and
/// `.`, starting and ending with a letter or digit), what the apiserver
/// names objects by.
pub fn object_name(field: &'static str, value: &str) -> Result<(), FieldError> {
    let rule = "an object's name, as offer_handoff and list_offers show it: at most 253 characters, \
                lower-case letters, digits, '-' and '.', starting and ending with a letter or digit";
    required(field, value, rule)?;
    no_control(field, value, rule)?;
    let bytes = value.as_bytes();
    let edge_ok = |b: Option<&u8>| b.is_some_and(|b| b.is_ascii_lowercase() || b.is_ascii_digit());
    let valid = bytes.len() <= 253
        && bytes
            .iter()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'-' | b'.'))
        && edge_ok(bytes.first())
        && edge_ok(bytes.last());
    if valid {
        return Ok(());
    }
    let problem = if value.chars().count() > 253 {
        format!("got {} characters", value.chars().count())
    } else {
        format!("got {}", preview(value))
    };
    Err(FieldError::new(field, rule, problem))
}

fn required(field: &'static str, value: &str, rule: &str) -> Result<(), FieldError> {
    if value.trim().is_empty() {
        return Err(FieldError::new(field, rule, "it is empty"));
    }
    Ok(())
}

fn check_max_chars(
    field: &'static str,
    value: &str,
    max: usize,
    rule: &str,
) -> Result<(), FieldError> {
    let count = value.chars().count();
    if count > max {
        return Err(FieldError::new(
            field,
            rule,
            format!("got {count} characters, {} too many", count - max),
        ));
    }
    Ok(())
}

fn no_control(field: &'static str, value: &str, rule: &str) -> Result<(), FieldError> {
    hidden_character(field, value, false)
        .map_or(Ok(()), |problem| Err(FieldError::new(field, rule, problem)))
}

/// The first character a terminal or a model would not show as itself: a
/// C0/C1 control (with `multiline`, tab, newline and a CRLF's `\r` are
/// text) or a bidi control. Named by code point and position.
fn hidden_character(field: &str, value: &str, multiline: bool) -> Option<String> {
    let mut chars = value.char_indices().peekable();
    while let Some((at, c)) = chars.next() {
        if !is_hidden(c, chars.peek().map(|(_, next)| *next), multiline) {
            continue;
        }
        let what = if is_bidi_control(c) {
            "the bidi control character"
        } else {
            "the control character"
        };
        let code = match c {
            '\0' => "U+0000 (NUL)".to_owned(),
            '\r' => "U+000D (CR, not part of a CRLF)".to_owned(),
            '\u{1b}' => "U+001B (ESC)".to_owned(),
            '\u{7f}' => "U+007F (DEL)".to_owned(),
            _ => format!("U+{:04X}", u32::from(c)),
        };
        return Some(if multiline {
            let (line, column) = line_and_column(value, at);
            format!("{field} contains {what} {code} at line {line}, column {column} (byte {at})")
        } else {
            format!("it contains {what} {code} at byte {at}")
        });
    }
    None
}

/// A short, quoted, escaped rendering of a value for messages.
pub fn preview(value: &str) -> String {
    const MAX: usize = 60;
    let mut shown: String = value.chars().take(MAX).collect();
    if value.chars().count() > MAX {
        shown.push('…');
    }
    format!("{shown:?}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_name_the_field_and_the_problem() {
        type Check = fn(&str) -> Result<(), FieldError>;
        /// The field and words an error must have; `None`: the value is valid.
        type Expect<'a> = Option<(&'a str, &'a str)>;
        let big_body = "x".repeat(MAX_BODY_CHARS + 5);
        let long_project = "p".repeat(64);
        let long_kind = "k".repeat(64);
        let cases: Vec<(Check, &str, Expect)> = vec![
            (handoff_key, "acme/api#42", None),
            (handoff_key, "", Some(("handoff_key", "it is empty"))),
            (handoff_key, "   ", Some(("handoff_key", "it is empty"))),
            (handoff_key, "a\nb", Some(("handoff_key", "U+000A"))),
            (project, "shop", None),
            (
                project,
                "Not A Label!",
                Some(("project", "\"Not A Label!\"")),
            ),
            (project, &long_project, Some(("project", "64 characters"))),
            (project, "-x", Some(("project", "valid label value"))),
            (repo, "org/repo", None),
            (repo, "", None),
            (repo, "a\tb", Some(("repo", "U+0009"))),
            (kind, &long_kind, Some(("kind", "1 too many"))),
            (body, "## State\nok", None),
            (body, "", Some(("body", "it is empty"))),
            (
                body,
                "a\0b",
                Some(("body", "U+0000 (NUL) at line 1, column 2")),
            ),
            (body, "ok\r\nline\ttab", None),
            (
                body,
                "x\n\u{1b}[1Awriter: root",
                Some(("body", "U+001B (ESC) at line 2, column 1")),
            ),
            (body, "a\rb", Some(("body", "U+000D"))),
            (body, "tail\r", Some(("body", "U+000D"))),
            (body, "c1 \u{9b} csi", Some(("body", "U+009B"))),
            (
                body,
                "abc\u{202E}fed",
                Some(("body", "bidi control character U+202E")),
            ),
            (body, "iso \u{2066}x\u{2069}", Some(("body", "U+2066"))),
            (body, "日本語 and emoji 🎉 and arabic مرحبا", None),
            (
                handoff_key,
                "a\u{202E}b",
                Some(("handoff_key", "bidi control character U+202E at byte 1")),
            ),
            (repo, "org/\u{7f}", Some(("repo", "U+007F"))),
            (body, &big_body, Some(("body", "5 too many"))),
            (
                |v: &str| no_credentials("body", v),
                concat!("## State\nfine\nkey ", "AKIA", "QZ7HX3MK2WJ5RT4B"),
                Some((
                    "body",
                    "a credential at line 3, column 5: rule aws-access-token (an AWS access key id) (not shown)",
                )),
            ),
            (|v: &str| no_credentials("repo", v), "org/repo", None),
        ];
        for (check, value, expected) in cases {
            match (check(value), expected) {
                (Ok(()), None) => {}
                (Err(err), Some((field, words))) => {
                    assert_eq!(err.field, field);
                    let msg = err.to_string();
                    assert!(msg.contains(words), "{msg} lacks {words:?}");
                    assert!(msg.starts_with(&format!("invalid `{field}`")), "{msg}");
                }
                (got, want) => panic!("{}: got {got:?}, want {want:?}", preview(value)),
            }
        }
    }

    #[test]
    fn arguments_that_are_no_stored_field_name_the_field_and_the_problem() {
        type Check = fn(&str) -> Result<(), FieldError>;
        /// The field and words an error must have; `None`: the value is valid.
        type Expect<'a> = Option<(&'a str, &'a str)>;
        let long_query = "w ".repeat(300);
        let long_name = "a".repeat(254);
        let cases: Vec<(Check, &str, Expect)> = vec![
            (
                |v| search_query(v, 500),
                "refund \"payments_test.go\" -draft",
                None,
            ),
            (|v| search_query(v, 500), "two\nlines\tand a tab", None),
            (|v| search_query(v, 500), "Überweisung 日本", None),
            (
                |v| search_query(v, 500),
                "a\0b",
                Some(("query", "U+0000 (NUL) at line 1, column 2")),
            ),
            (
                |v| search_query(v, 500),
                "x\u{1b}[2K",
                Some(("query", "U+001B (ESC)")),
            ),
            (|v| search_query(v, 500), "a\rb", Some(("query", "U+000D"))),
            (
                |v| search_query(v, 500),
                "abc\u{202E}",
                Some(("query", "bidi control")),
            ),
            (
                |v| search_query(v, 500),
                &long_query,
                Some(("query", "100 too many")),
            ),
            (|v| object_name("offer", v), "infra-7f3a2c-1", None),
            (|v| object_name("offer", v), "a.b-c", None),
            (
                |v| object_name("offer", v),
                "",
                Some(("offer", "it is empty")),
            ),
            (
                |v| object_name("offer", v),
                "a\0b",
                Some(("offer", "U+0000 (NUL) at byte 1")),
            ),
            (
                |v| object_name("offer", v),
                "a\u{7}b",
                Some(("offer", "U+0007 at byte 1")),
            ),
            (
                |v| object_name("offer", v),
                "Nope",
                Some(("offer", "got \"Nope\"")),
            ),
            (
                |v| object_name("offer", v),
                "-x",
                Some(("offer", "got \"-x\"")),
            ),
            (
                |v| object_name("offer", v),
                "../x",
                Some(("offer", "lower-case letters")),
            ),
            (
                |v| object_name("offer", v),
                &long_name,
                Some(("offer", "got 254 characters")),
            ),
        ];
        for (check, value, expected) in cases {
            match (check(value), expected) {
                (Ok(()), None) => {}
                (Err(err), Some((field, words))) => {
                    assert_eq!(err.field, field);
                    let msg = err.to_string();
                    assert!(msg.contains(words), "{msg} lacks {words:?}");
                }
                (got, want) => panic!("{}: got {got:?}, want {want:?}", preview(value)),
            }
        }
    }

    #[test]
    fn cursors_have_a_shape() {
        let long = "A".repeat(MAX_CURSOR_CHARS + 1);
        // (cursor, words of the problem; None: the shape of one)
        let cases = [
            ("eyJvIjo1MH0", None),
            ("  eyJvIjo1MH0\n", None),
            ("abc-_XYZ09", None),
            ("eyJ\0vIjo1MH0", Some("U+0000 (NUL) at byte 3")),
            ("eyJ\u{1}", Some("U+0001 at byte 3")),
            ("eyJ\u{9b}x", Some("U+009B")),
            ("../../x", Some("'.' at byte 0, which is not base64url")),
            ("a b", Some("' ' at byte 1")),
            ("eyJ=", Some("'=' at byte 3")),
            (long.as_str(), Some("over the limit of 4096")),
        ];
        for (cursor, want) in cases {
            match (cursor_problem(cursor), want) {
                (None, None) => {}
                (Some(problem), Some(words)) => {
                    assert!(problem.contains(words), "{cursor:?}: {problem}");
                }
                (got, want) => panic!("{cursor:?}: got {got:?}, want {want:?}"),
            }
        }
    }

    #[test]
    fn whole_specs_name_the_failing_field() {
        let mut spec = HandoffSpec {
            created_by: Some("alice".into()),
            ..HandoffSpec::new("acme/api#42", "shop", "fine")
        };
        assert_eq!(handoff_spec(&spec), Ok(()));
        spec.created_by = Some("alice\u{1b}[2K".into());
        assert_eq!(handoff_spec(&spec).map_err(|e| e.field), Err("createdBy"));
        let mut offer = HandoffOfferSpec {
            project: "shop".into(),
            to: "dev-lead".into(),
            from_key: "acme/api#42".into(),
            session: Some("s1".into()),
            artifact: None,
            body: Some("line\nnext".into()),
        };
        assert_eq!(offer_spec(&offer), Ok(()));
        offer.from_key = "a\u{9b}".into();
        assert_eq!(offer_spec(&offer).map_err(|e| e.field), Err("fromKey"));
        offer.from_key = "ok".into();
        offer.body = Some("\u{2067}".into());
        assert_eq!(offer_spec(&offer).map_err(|e| e.field), Err("body"));
    }

    #[test]
    fn previews_are_short() {
        assert_eq!(preview("abc"), "\"abc\"");
        assert!(preview(&"y".repeat(1000)).chars().count() < 70);
    }
}
