//! What the webhook answers, as a pure function of the request: one place
//! for every rule the apiserver cannot check itself (later rules, such as
//! the credential detector, are added here too).
//!
//! - **One key, one name.** A Handoff's `metadata.name` must be
//!   [`name_for_key`] of its `spec.handoffKey`. The apiserver's name
//!   uniqueness then *is* "one current handoff per key" on every path: a
//!   second object for a key (a twin) cannot be created, and the name of a
//!   key cannot be taken by an object of another key (a squat). CEL cannot
//!   compute the hash, hence a webhook. `generateName` yields a random
//!   suffix, never the derived name, so it is refused as well.
//! - **The text rule** ([`validation::handoff_spec`],
//!   [`validation::offer_spec`]) on a kubectl or GitOps write, as the bridge
//!   checks its arguments.
//! - **No credentials** ([`validation::no_credentials_in_handoff`],
//!   [`validation::no_credentials_in_offer`]): the bridge's detector
//!   (`handoff_core::secrets`), the same code, so a token the bridge refuses
//!   cannot be stored with kubectl either. The refusal names the field, the
//!   rule id, the line and the column, never the secret.
//!
//! Both are checked at CREATE and at an UPDATE that changes `spec`; an
//! UPDATE leaving `spec` alone (the controller's labels, finalizers) is
//! allowed without a look, and so is DELETE.

use handoff_core::api::naming::name_for_key;
use handoff_core::api::validation::{self, FieldError};
use handoff_core::api::{HandoffOfferSpec, HandoffSpec};
use serde_json::Value;

/// The API group whose objects are checked.
pub(crate) const GROUP: &str = "handoff.dev";

/// The operation of an admission request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Operation {
    Create,
    Update,
    /// DELETE, CONNECT: nothing to check.
    Other,
}

/// One admission request, reduced to what the rules read.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Request<'a> {
    pub(crate) operation: Operation,
    /// The API group of the object.
    pub(crate) group: &'a str,
    /// `Handoff`, `HandoffOffer`, …
    pub(crate) kind: &'a str,
    /// `metadata.name` of the object (after `generateName`).
    pub(crate) name: &'a str,
    /// `spec` of the object written.
    pub(crate) spec: Option<&'a Value>,
    /// `spec` of the object replaced (UPDATE).
    pub(crate) old_spec: Option<&'a Value>,
}

/// The answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Allowed, by [`Reason::Checked`] or [`Reason::NotChecked`].
    Allowed(Reason),
    /// Refused, with the HTTP code the caller sees, the message kubectl
    /// prints and the rule it broke.
    Refused {
        code: u16,
        message: String,
        reason: Reason,
    },
}

impl Verdict {
    /// Why it was decided so.
    pub(crate) fn reason(&self) -> Reason {
        match self {
            Self::Allowed(reason) | Self::Refused { reason, .. } => *reason,
        }
    }
}

/// Why a request was allowed or refused: a fixed set, so it can label the
/// webhook's metrics (`handoff_webhook_decisions_total{reason}`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Reason {
    /// Allowed: every rule was checked and holds.
    Checked,
    /// Allowed without a look: another group or kind, a DELETE or
    /// CONNECT, an UPDATE that leaves `spec` alone.
    NotChecked,
    /// Refused: the object has no `spec`.
    NoSpec,
    /// Refused: the `spec` does not parse.
    Unparsable,
    /// Refused: a Handoff's name is not its key's (a twin, a squat,
    /// `generateName`).
    NameNotDerived,
    /// Refused: a field breaks the text rule.
    TextRule,
    /// Refused: a field holds a credential.
    Credential,
}

impl Reason {
    /// The label value.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::Checked => "checked",
            Self::NotChecked => "not_checked",
            Self::NoSpec => "no_spec",
            Self::Unparsable => "unparsable",
            Self::NameNotDerived => "name_not_derived",
            Self::TextRule => "text_rule",
            Self::Credential => "credential",
        }
    }

    /// Whether a request decided for this reason is allowed.
    pub(crate) fn allows(self) -> bool {
        matches!(self, Self::Checked | Self::NotChecked)
    }
}

/// 422: the object breaks a rule of its own (like the schema's refusals).
const INVALID: u16 = 422;

/// Decides one request.
pub(crate) fn decide(request: &Request<'_>) -> Verdict {
    if request.group != GROUP {
        return Verdict::Allowed(Reason::NotChecked);
    }
    match request.operation {
        Operation::Other => return Verdict::Allowed(Reason::NotChecked),
        Operation::Update if request.spec == request.old_spec => {
            return Verdict::Allowed(Reason::NotChecked);
        }
        Operation::Create | Operation::Update => {}
    }
    let Some(spec) = request.spec else {
        return refused(Reason::NoSpec, format!("a {} without a spec", request.kind));
    };
    match request.kind {
        "Handoff" => handoff(request.name, spec),
        "HandoffOffer" => match serde_json::from_value::<HandoffOfferSpec>(spec.clone()) {
            Ok(spec) => text_rule(validation::offer_spec(&spec), || {
                validation::no_credentials_in_offer(&spec)
            })
            .unwrap_or(Verdict::Allowed(Reason::Checked)),
            Err(err) => refused(
                Reason::Unparsable,
                format!("the HandoffOffer's spec does not parse: {err}"),
            ),
        },
        _ => Verdict::Allowed(Reason::NotChecked),
    }
}

fn handoff(name: &str, spec: &Value) -> Verdict {
    let spec = match serde_json::from_value::<HandoffSpec>(spec.clone()) {
        Ok(spec) => spec,
        Err(err) => {
            return refused(
                Reason::Unparsable,
                format!("the Handoff's spec does not parse: {err}"),
            );
        }
    };
    if let Some(refusal) = text_rule(validation::handoff_spec(&spec), || {
        validation::no_credentials_in_handoff(&spec)
    }) {
        return refusal;
    }
    let key = &spec.handoff_key;
    let expected = name_for_key(key);
    if name == expected {
        return Verdict::Allowed(Reason::Checked);
    }
    refused(
        Reason::NameNotDerived,
        format!(
            "metadata.name {name:?} is not the name of spec.handoffKey {key:?}: one key has one \
             Handoff, named \"{expected}\" (print it with `handoff name {}`); write the Handoff \
             under that name",
            shell_quoted(key)
        ),
    )
}

/// The refusal of the first failed check: the text rule (`text`), then the
/// credential detector (`credentials`, run only when the text rule holds);
/// `None` when both hold.
fn text_rule(
    text: Result<(), FieldError>,
    credentials: impl FnOnce() -> Result<(), FieldError>,
) -> Option<Verdict> {
    let (reason, err) = match text.map(|()| credentials()) {
        Err(err) => (Reason::TextRule, err),
        Ok(Err(err)) => (Reason::Credential, err),
        Ok(Ok(())) => return None,
    };
    Some(refused(
        reason,
        format!(
            "spec.{}: {}; {}",
            json_field(err.field),
            err.rule,
            err.problem
        ),
    ))
}

/// The spec's JSON name of a field the validation names as the bridge's
/// argument (`handoff_key` is `spec.handoffKey` to a kubectl writer).
fn json_field(field: &str) -> &str {
    match field {
        "handoff_key" => "handoffKey",
        "created_by" => "createdBy",
        "from_key" => "fromKey",
        other => other,
    }
}

fn refused(reason: Reason, message: String) -> Verdict {
    Verdict::Refused {
        code: INVALID,
        message,
        reason,
    }
}

/// `value` as one POSIX shell word (single quotes; a quote inside closes,
/// escapes and reopens).
fn shell_quoted(value: &str) -> String {
    format!("'{}'", value.replace('\'', r"'\''"))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn spec(key: &str, body: &str) -> Value {
        json!({"handoffKey": key, "project": "shop", "body": body})
    }

    fn request<'a>(
        operation: Operation,
        kind: &'a str,
        name: &'a str,
        spec: Option<&'a Value>,
        old_spec: Option<&'a Value>,
    ) -> Request<'a> {
        Request {
            operation,
            group: GROUP,
            kind,
            name,
            spec,
            old_spec,
        }
    }

    /// The message of a refusal, `None` when allowed.
    fn message(verdict: Verdict) -> Option<String> {
        match verdict {
            Verdict::Allowed(_) => None,
            Verdict::Refused { code, message, .. } => {
                assert_eq!(code, INVALID, "{message}");
                Some(message)
            }
        }
    }

    /// (operation, name, spec, old spec, refused with every one of these in the message)
    type Case<'a> = (
        Operation,
        &'a str,
        &'a Value,
        Option<&'a Value>,
        Option<Vec<&'a str>>,
    );

    #[test]
    fn handoffs_are_named_by_their_key_and_follow_the_text_rule() {
        let key = "acme/api#42";
        let derived = name_for_key(key);
        let reserved = "team-a/nightly/refine";
        let reserved_name = name_for_key(reserved);
        let honest = spec(key, "state: testing");
        let squatting = spec("acme/other#1", "state: mine now");
        let squat_name = name_for_key("acme/other#1");
        let at_reserved = spec("someone/else", "state: mine now");
        let escaped = spec(key, "line one\n\u{1b}[1Awriter: root");
        let bidi = spec(key, "a\u{202e}b");
        let crlf = spec(key, "one\r\ntwo\tthree");
        let quoted_key = spec("it's", "x");
        let quoted_name = name_for_key("it's");
        let edited = spec(key, "state: edited");
        let edited_escape = spec(key, "\u{7}");
        let bad_key = spec("a\nb", "x");
        // (operation, name, spec, old spec, refused with every one of these in the message)
        let cases: Vec<Case<'_>> = vec![
            (Operation::Create, &derived, &honest, None, None),
            (Operation::Create, &derived, &crlf, None, None),
            // A twin: its own name, the victim's key.
            (
                Operation::Create,
                "my-own-name",
                &honest,
                None,
                Some(vec![
                    "\"my-own-name\"",
                    "\"acme/api#42\"",
                    &derived,
                    "handoff name 'acme/api#42'",
                ]),
            ),
            // generateName's random suffix.
            (
                Operation::Create,
                "acme-api-42-x7k2q",
                &honest,
                None,
                Some(vec![&derived]),
            ),
            // A squat: the derived name of the key, another key.
            (
                Operation::Create,
                &derived,
                &squatting,
                None,
                Some(vec!["\"acme/other#1\"", &squat_name]),
            ),
            // A squat at a schedule's reserved key's name.
            (
                Operation::Create,
                &reserved_name,
                &at_reserved,
                None,
                Some(vec![&reserved_name, "\"someone/else\""]),
            ),
            (
                Operation::Create,
                &derived,
                &escaped,
                None,
                Some(vec!["spec.body", "U+001B", "line 2, column 1"]),
            ),
            (
                Operation::Create,
                &derived,
                &bidi,
                None,
                Some(vec!["spec.body", "U+202E"]),
            ),
            (Operation::Create, &quoted_name, &quoted_key, None, None),
            (
                Operation::Create,
                "x",
                &quoted_key,
                None,
                Some(vec![r"handoff name 'it'\''s'"]),
            ),
            (
                Operation::Create,
                "x",
                &bad_key,
                None,
                Some(vec!["spec.handoffKey", "U+000A"]),
            ),
            // The controller's label and finalizer writes leave spec alone.
            (
                Operation::Update,
                "my-own-name",
                &honest,
                Some(&honest),
                None,
            ),
            (Operation::Update, &derived, &edited, Some(&honest), None),
            (
                Operation::Update,
                &derived,
                &edited_escape,
                Some(&honest),
                Some(vec!["spec.body", "U+0007"]),
            ),
            // A twin made before the check cannot be edited, only deleted.
            (
                Operation::Update,
                "my-own-name",
                &edited,
                Some(&honest),
                Some(vec![&derived]),
            ),
            (Operation::Other, "my-own-name", &honest, None, None),
        ];
        for (operation, name, spec, old, expected) in cases {
            let got = message(decide(&request(
                operation,
                "Handoff",
                name,
                Some(spec),
                old,
            )));
            match (expected, got) {
                (None, None) => {}
                (Some(parts), Some(message)) => {
                    for part in parts {
                        assert!(message.contains(part), "{part:?} not in {message:?}");
                    }
                }
                (expected, got) => {
                    panic!("{operation:?} {name} {spec}: expected {expected:?}, got {got:?}")
                }
            }
        }
    }

    #[test]
    fn credentials_are_refused_by_rule_and_place_never_echoed() {
        let key = "acme/api#42";
        let name = name_for_key(key);
        let token = format!("ghp_{}", "aB3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1xY3z5A");
        let in_body = spec(key, &format!("## State\nuse {token} here"));
        let message_of = |spec: &Value, kind: &str, name: &str| {
            message(decide(&request(
                Operation::Create,
                kind,
                name,
                Some(spec),
                None,
            )))
        };
        let got = message_of(&in_body, "Handoff", &name).expect("refused");
        for part in [
            "spec.body",
            "line 2, column 5",
            "rule github-pat",
            "not shown",
        ] {
            assert!(got.contains(part), "{part:?} not in {got:?}");
        }
        assert!(!got.contains(&token), "{got}");

        let in_key = format!("k {token}");
        let keyed = spec(&in_key, "ok");
        let got = message_of(&keyed, "Handoff", &name_for_key(&in_key)).expect("refused");
        assert!(
            got.contains("spec.handoffKey") && got.contains("rule github-pat"),
            "{got}"
        );

        let offer = json!({"project": "shop", "to": "dev-lead", "fromKey": key,
            "artifact": format!("https://bot:{}@git.shop.internal/r.git", "Zq9Lx2Wm7")});
        let got = message_of(&offer, "HandoffOffer", "any").expect("refused");
        assert!(
            got.contains("spec.artifact") && got.contains("rule password-in-url"),
            "{got}"
        );

        let honest = spec(
            key,
            "PWD=/home/runner/work/shop/shop_api\nAuthorization: Bearer placeholder",
        );
        assert_eq!(message_of(&honest, "Handoff", &name), None);
    }

    #[test]
    fn offers_follow_the_text_rule_and_other_kinds_pass() {
        let good = json!({"project": "shop", "to": "dev-lead", "fromKey": "acme/api#42"});
        let bad = json!({"project": "shop", "to": "dev-lead", "fromKey": "acme/api#42",
            "body": "ok\u{1b}]0;title\u{7}"});
        let no_spec = request(Operation::Create, "Handoff", "x", None, None);
        assert!(message(decide(&no_spec)).is_some_and(|m| m.contains("without a spec")));
        let cases: [(&str, &str, &Value, Option<&str>); 4] = [
            (GROUP, "HandoffOffer", &good, None),
            (GROUP, "HandoffOffer", &bad, Some("spec.body")),
            (GROUP, "BrainstormSchedule", &bad, None),
            ("example.com", "Handoff", &bad, None),
        ];
        for (group, kind, spec, expected) in cases {
            let mut req = request(Operation::Create, kind, "any", Some(spec), None);
            req.group = group;
            let got = message(decide(&req));
            match (expected, &got) {
                (None, None) => {}
                (Some(part), Some(m)) => assert!(m.contains(part), "{part} not in {m}"),
                _ => panic!("{group} {kind}: expected {expected:?}, got {got:?}"),
            }
        }
    }

    #[test]
    fn each_decision_names_its_reason() {
        let key = "acme/api#42";
        let name = name_for_key(key);
        let honest = spec(key, "state: ok");
        let escaped = spec(key, "\u{1b}");
        let secret = spec(
            key,
            &format!("ghp_{}", "aB3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1xY3z5A"),
        );
        let unparsable = json!({"handoffKey": 42});
        // (operation, kind, name, spec, old spec, reason)
        type Case<'a> = (
            Operation,
            &'a str,
            &'a str,
            Option<&'a Value>,
            Option<&'a Value>,
            Reason,
        );
        let cases: [Case<'_>; 9] = [
            (
                Operation::Create,
                "Handoff",
                &name,
                Some(&honest),
                None,
                Reason::Checked,
            ),
            (
                Operation::Create,
                "HandoffOffer",
                "o",
                Some(&json!({"project": "shop", "to": "lead", "fromKey": key})),
                None,
                Reason::Checked,
            ),
            (
                Operation::Other,
                "Handoff",
                "x",
                Some(&honest),
                None,
                Reason::NotChecked,
            ),
            (
                Operation::Update,
                "Handoff",
                "x",
                Some(&honest),
                Some(&honest),
                Reason::NotChecked,
            ),
            (
                Operation::Create,
                "Handoff",
                "x",
                None,
                None,
                Reason::NoSpec,
            ),
            (
                Operation::Create,
                "Handoff",
                "x",
                Some(&unparsable),
                None,
                Reason::Unparsable,
            ),
            (
                Operation::Create,
                "Handoff",
                "my-twin",
                Some(&honest),
                None,
                Reason::NameNotDerived,
            ),
            (
                Operation::Create,
                "Handoff",
                &name,
                Some(&escaped),
                None,
                Reason::TextRule,
            ),
            (
                Operation::Create,
                "Handoff",
                &name,
                Some(&secret),
                None,
                Reason::Credential,
            ),
        ];
        for (operation, kind, name, spec, old, reason) in cases {
            let verdict = decide(&request(operation, kind, name, spec, old));
            assert_eq!(
                verdict.reason(),
                reason,
                "{operation:?} {kind} {name}: {verdict:?}"
            );
            assert_eq!(
                matches!(verdict, Verdict::Allowed(_)),
                reason.allows(),
                "{verdict:?}"
            );
        }
        // The metric's label of each reason (docs/operate.md lists them).
        let labels = [
            (Reason::Checked, "checked"),
            (Reason::NotChecked, "not_checked"),
            (Reason::NoSpec, "no_spec"),
            (Reason::Unparsable, "unparsable"),
            (Reason::NameNotDerived, "name_not_derived"),
            (Reason::TextRule, "text_rule"),
            (Reason::Credential, "credential"),
        ];
        for (reason, label) in labels {
            assert_eq!(reason.as_str(), label, "{reason:?}");
        }
    }
}
