//! Why a read or an action failed, as a sentence for people: never a
//! library's or the apiserver's text (that goes to the log), always what
//! was refused or missing and what to do.

use handoff_bridge::call::Unanswered;
use handoff_bridge::tools::contract::CallError;
use handoff_core::api::validation::FieldError;

/// Why a page or an action has no answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReadError {
    /// RBAC does not let the person do this.
    #[error("{0}")]
    Forbidden(String),
    /// There is no such object (or it went away).
    #[error("{0}")]
    NotFound(String),
    /// A part of the request does not parse or breaks its rule.
    #[error("invalid `{field}`: {rule}; {problem}")]
    Invalid {
        field: &'static str,
        rule: String,
        problem: String,
    },
    /// The cluster or the mirror did not answer: retriable.
    #[error("{0}")]
    Unavailable(String),
}

impl From<FieldError> for ReadError {
    fn from(err: FieldError) -> Self {
        Self::Invalid {
            field: err.field,
            rule: err.rule,
            problem: err.problem,
        }
    }
}

/// What the person was doing, for the sentence of a failure: `action` as
/// in "you may not {action} in namespace {namespace}".
#[derive(Debug, Clone, Copy)]
pub(super) struct Doing<'a> {
    pub(super) action: &'a str,
    pub(super) namespace: &'a str,
}

impl Doing<'_> {
    fn forbidden(&self) -> ReadError {
        ReadError::Forbidden(format!(
            "You may not {} in namespace {}: your RBAC roles do not allow it. Ask the \
             namespace's administrator for a RoleBinding if you need to.",
            self.action, self.namespace
        ))
    }

    fn unavailable(&self) -> ReadError {
        ReadError::Unavailable(format!(
            "The Kubernetes API did not answer when asked to {} in namespace {}; try again shortly.",
            self.action, self.namespace
        ))
    }

    /// An apiserver failure: refused, missing (`what` names it), expired
    /// credentials, or unavailable.
    pub(super) fn kube(&self, err: &kube::Error, what: &str) -> ReadError {
        match err {
            kube::Error::Api(status) if status.code == 403 => self.forbidden(),
            kube::Error::Api(status) if status.code == 404 => ReadError::NotFound(format!(
                "There is no {what} in namespace {} (it may have been deleted).",
                self.namespace
            )),
            kube::Error::Api(status) if status.code == 401 => ReadError::Forbidden(
                "The cluster did not accept your credentials (they may have expired): sign in again."
                    .to_owned(),
            ),
            other => {
                tracing::warn!(error = %other, action = self.action, namespace = self.namespace, "a console read failed");
                self.unavailable()
            }
        }
    }

    /// A tool call's failure.
    pub(super) fn unanswered(&self, err: Unanswered) -> ReadError {
        match err {
            Unanswered::Failed(err) => self.call_error(err),
            Unanswered::TimedOut => self.unavailable(),
            Unanswered::Hidden(why) => {
                tracing::error!(%why, "the console's profile does not see a tool it calls");
                ReadError::Unavailable(format!(
                    "The console cannot {} (its tool profile does not offer it); this is a bug of \
                     the console: please report it.",
                    self.action
                ))
            }
        }
    }

    fn call_error(&self, err: CallError) -> ReadError {
        match err {
            CallError::Field(err) => err.into(),
            CallError::Kube { outcome, message } => {
                tracing::warn!(%message, outcome, action = self.action, "a console tool call failed");
                match outcome {
                    "forbidden" => self.forbidden(),
                    _ => self.unavailable(),
                }
            }
            CallError::Mirror(_) | CallError::MirrorFailed => ReadError::Unavailable(format!(
                "The handoff history (the PostgreSQL mirror) did not answer when asked to {} in \
                 namespace {}; try again shortly.",
                self.action, self.namespace
            )),
            CallError::Refused(message) => {
                tracing::info!(%message, action = self.action, "a console action was refused");
                self.forbidden()
            }
            other => {
                tracing::warn!(error = %other, action = self.action, "a console tool call failed");
                ReadError::Unavailable(format!(
                    "The console could not {} in namespace {} just now; try again shortly.",
                    self.action, self.namespace
                ))
            }
        }
    }
}

/// The sentence of a part that needs the mirror when the console runs
/// without one.
pub(super) fn no_mirror(what: &str) -> String {
    format!(
        "{what} come from the handoff history (the PostgreSQL mirror), and this console runs \
         without it: start it with --postgres-url pointing at the mirror the controller writes."
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn api(code: u16) -> kube::Error {
        kube::Error::Api(
            kube::core::Status::failure("the apiserver's own words", "Reason")
                .with_code(code)
                .boxed(),
        )
    }

    #[test]
    fn apiserver_failures_become_sentences_for_people() {
        let doing = Doing {
            action: "list handoffs",
            namespace: "team",
        };
        // (error, the variant's name, a fragment of its sentence)
        let cases = [
            (
                api(403),
                "forbidden",
                "may not list handoffs in namespace team",
            ),
            (api(404), "not found", "no handoff `k` in namespace team"),
            (api(401), "forbidden", "sign in again"),
            (api(500), "unavailable", "did not answer"),
            (api(429), "unavailable", "try again shortly"),
        ];
        for (err, variant, fragment) in cases {
            let got = doing.kube(&err, "handoff `k`");
            let name = match &got {
                ReadError::Forbidden(_) => "forbidden",
                ReadError::NotFound(_) => "not found",
                ReadError::Invalid { .. } => "invalid",
                ReadError::Unavailable(_) => "unavailable",
            };
            let text = got.to_string();
            assert_eq!(name, variant, "{err:?}");
            assert!(text.contains(fragment), "{fragment:?} not in {text:?}");
            assert!(
                !text.contains("own words"),
                "the apiserver's text leaked: {text}"
            );
        }
    }

    #[test]
    fn tool_failures_become_sentences_for_people() {
        let doing = Doing {
            action: "read the history of handoffs",
            namespace: "team",
        };
        let field = FieldError {
            field: "from",
            rule: "a revision the history holds".into(),
            problem: "no revision 9".into(),
        };
        // (failure, the error expected, or a fragment of an Unavailable)
        let cases: [(Unanswered, Result<ReadError, &str>); 6] = [
            (
                Unanswered::Failed(CallError::Field(field.clone())),
                Ok(field.clone().into()),
            ),
            (
                Unanswered::Failed(CallError::Kube {
                    outcome: "forbidden",
                    message: "apiserver words".into(),
                }),
                Ok(doing.forbidden()),
            ),
            (
                Unanswered::Failed(CallError::Refused("not the destination".into())),
                Ok(doing.forbidden()),
            ),
            (
                Unanswered::Failed(CallError::MirrorFailed),
                Err("PostgreSQL mirror) did not answer"),
            ),
            (Unanswered::TimedOut, Err("Kubernetes API did not answer")),
            (Unanswered::Hidden("x".into()), Err("bug of the console")),
        ];
        for (failure, want) in cases {
            let label = format!("{failure:?}");
            let got = doing.unanswered(failure);
            match want {
                Ok(want) => assert_eq!(got, want, "{label}"),
                Err(fragment) => match got {
                    ReadError::Unavailable(text) => {
                        assert!(text.contains(fragment), "{label}: {text}")
                    }
                    other => panic!("{label}: {other:?}"),
                },
            }
        }
    }
}
