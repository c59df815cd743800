//! Validation of handoff fields before anything is sent to the apiserver.
//!
//! The same rules as the CRD's schema (which stays the authority for
//! `kubectl` and GitOps writers), checked early so an agent gets one clear
//! message naming the field, the rule and what is wrong with the value,
//! instead of an apiserver round trip.

use super::handoff::{MAX_BODY_CHARS, MAX_KEY_BYTES, MAX_LABEL_CHARS, MAX_REPO_CHARS};
use super::naming::is_label_value;

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

/// At most `max` characters.
pub fn max_chars(field: &'static str, value: &str, max: usize) -> Result<(), FieldError> {
    check_max_chars(field, value, max, &format!("at most {max} characters"))
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

/// The body: 1–32768 characters, no NUL.
pub fn body(value: &str) -> Result<(), FieldError> {
    let rule = format!(
        "a non-empty markdown summary of at most {MAX_BODY_CHARS} characters (a summary, not a log) without NUL"
    );
    required("body", value, &rule)?;
    check_max_chars("body", value, MAX_BODY_CHARS, &rule)?;
    if value.contains('\0') {
        return Err(FieldError::new("body", rule, "it contains a NUL character"));
    }
    Ok(())
}

/// No credential in a field the writer supplies: the first finding of
/// [`crate::secrets::find`] is named by its kind and line, never echoed.
pub fn no_credentials(field: &'static str, value: &str) -> Result<(), FieldError> {
    match crate::secrets::find(value).first() {
        None => Ok(()),
        Some(finding) => Err(FieldError::new(
            field,
            "no credentials: a handoff is kept in etcd, its backups and the mirror's history; \
             remove it or name where it lives (e.g. the token in Secret ci/github)",
            format!(
                "line {} holds a credential: {} (not shown)",
                finding.line, finding.kind
            ),
        )),
    }
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
    match value.char_indices().find(|(_, c)| c.is_control()) {
        Some((at, c)) => Err(FieldError::new(
            field,
            rule,
            format!(
                "it contains the control character U+{:04X} at byte {at}",
                u32::from(c)
            ),
        )),
        None => Ok(()),
    }
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
            (body, "a\0b", Some(("body", "NUL"))),
            (body, &big_body, Some(("body", "5 too many"))),
            (
                |v: &str| no_credentials("body", v),
                "## State\nfine\nkey AKIAFAKEFAKEFAKEFAKE",
                Some((
                    "body",
                    "line 3 holds a credential: AWS access key id (not shown)",
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
    fn previews_are_short() {
        assert_eq!(preview("abc"), "\"abc\"");
        assert!(preview(&"y".repeat(1000)).chars().count() < 70);
    }
}
