//! Which namespace a call is in (pure): the one a single-namespace bridge
//! serves, else the one the route names, else the caller's
//! ServiceAccount's.

/// Why a call has no namespace.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum NamespaceError {
    /// Not a ServiceAccount, and no namespace named in the route.
    #[error(
        "no namespace for user \"{user}\": it is not a ServiceAccount (whose namespace would be used); \
         name one in the path, /mcp/ns/<namespace>"
    )]
    Unnamed {
        /// The caller.
        user: String,
    },
    /// The route names something that is not a namespace name.
    #[error(
        "/mcp/ns/{value}: \"{value}\" is not a namespace name (rule: a DNS label, at most 63 \
         characters, lowercase letters, digits and '-')"
    )]
    Invalid {
        /// What the route said.
        value: String,
    },
    /// A single-namespace bridge asked for another namespace.
    #[error(
        "this bridge serves namespace \"{served}\" only (--namespace), not \"{asked}\": use /mcp"
    )]
    NotServed {
        /// The namespace the route named.
        asked: String,
        /// The one the bridge serves.
        served: String,
    },
}

/// Pure: the namespace of a call. A single-namespace bridge (`served`)
/// serves that one (a route may name only it); otherwise the route's
/// namespace, else the namespace of the caller's ServiceAccount. RBAC still
/// decides every read and write in it.
pub(super) fn call_namespace(
    served: Option<&str>,
    route: Option<&str>,
    username: &str,
) -> Result<String, NamespaceError> {
    if let Some(asked) = route
        && !is_dns_label(asked)
    {
        return Err(NamespaceError::Invalid {
            value: asked.to_owned(),
        });
    }
    match (served, route) {
        (Some(served), Some(asked)) if asked != served => Err(NamespaceError::NotServed {
            asked: asked.to_owned(),
            served: served.to_owned(),
        }),
        (Some(served), _) => Ok(served.to_owned()),
        (None, Some(asked)) => Ok(asked.to_owned()),
        (None, None) => service_account_of(username)
            .map(|(namespace, _)| namespace.to_owned())
            .ok_or_else(|| NamespaceError::Unnamed {
                user: username.to_owned(),
            }),
    }
}

/// Whether `value` is a valid namespace name (an RFC 1123 label).
fn is_dns_label(value: &str) -> bool {
    !value.is_empty()
        && value.len() <= 63
        && value
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !value.starts_with('-')
        && !value.ends_with('-')
}

/// `(namespace, name)` of a ServiceAccount user name
/// (`system:serviceaccount:<namespace>:<name>`).
pub(super) fn service_account_of(username: &str) -> Option<(&str, &str)> {
    let rest = username.strip_prefix("system:serviceaccount:")?;
    let (namespace, name) = rest.split_once(':')?;
    (!namespace.is_empty() && !name.is_empty() && !name.contains(':')).then_some((namespace, name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn call_namespaces() {
        let sa = "system:serviceaccount:team-a:implement";
        let person = "alice@example.com";
        // (served, route, user, the namespace or a part of the refusal)
        type Case<'a> = (
            Option<&'a str>,
            Option<&'a str>,
            &'a str,
            Result<&'a str, &'a str>,
        );
        let cases: [Case; 9] = [
            (None, None, sa, Ok("team-a")),
            (None, Some("team-b"), sa, Ok("team-b")),
            (None, Some("team-b"), person, Ok("team-b")),
            (None, None, person, Err("not a ServiceAccount")),
            (None, Some("Team_B"), sa, Err("is not a namespace name")),
            (None, Some(""), sa, Err("is not a namespace name")),
            (Some("handoff-system"), None, sa, Ok("handoff-system")),
            (
                Some("handoff-system"),
                Some("handoff-system"),
                person,
                Ok("handoff-system"),
            ),
            (
                Some("handoff-system"),
                Some("team-a"),
                sa,
                Err("serves namespace \"handoff-system\" only"),
            ),
        ];
        for (served, route, user, want) in cases {
            match (call_namespace(served, route, user), want) {
                (Ok(got), Ok(want)) => assert_eq!(got, want, "{served:?} {route:?} {user}"),
                (Err(err), Err(part)) => {
                    assert!(err.to_string().contains(part), "{err}")
                }
                (got, want) => panic!("{served:?} {route:?} {user}: {got:?}, wanted {want:?}"),
            }
        }
    }

    #[test]
    fn service_account_names() {
        assert_eq!(
            service_account_of("system:serviceaccount:agents:implement"),
            Some(("agents", "implement"))
        );
        assert_eq!(service_account_of("system:serviceaccount:agents"), None);
        assert_eq!(service_account_of("system:serviceaccount::x"), None);
        assert_eq!(service_account_of("alice"), None);
    }
}
