//! Who is asking: the front door of each mode turns a request into a
//! [`Signed`] person — the [`Viewer`] pages show, the client and caller
//! every read is made with, and what their CSRF token is bound to — or
//! into the sign-in page, and nothing else.
//!
//! On a laptop there is one person, the kubeconfig's: their client is
//! built once, their name asked once (SelfSubjectReview), and one caller
//! per namespace is kept (bounded). Behind a proxy every request carries
//! its bearer token; the bridge's resolver reviews each token once, caches
//! the person's client, name and access answers, and refuses a rejected
//! token from its cache. The token is never logged or shown.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use axum::http::{HeaderMap, StatusCode, header};
use axum::response::Response;
use sha2::{Digest, Sha256};
use tokio::sync::OnceCell;

use handoff_bridge::auth::{
    AuthError, Caller, NamespaceError, TokenResolver, bearer_token, who_am_i,
};
use handoff_bridge::profiles::Profile;

use super::guard::CsrfKey;
use super::router::{Early, page};
use super::secret::{OneTimeLink, Session, cookie_of};
use crate::data::PROFILE;
use crate::model::{Mode, Viewer};
use crate::render::{self, SignIn};

/// Most namespaces whose caller a laptop console keeps; past it the cache
/// starts again (each caller only caches access answers).
const CALLERS: usize = 256;

/// The namespace a person's own client is made in for the front page,
/// which reads across namespaces (the client is the same in every one).
const ANY_NAMESPACE: &str = "default";

/// The front door of the console's mode.
pub(super) enum Front {
    /// `handoff console` on a laptop.
    Laptop(Box<Laptop>),
    /// Behind an authenticating proxy.
    Proxy(Arc<TokenResolver>),
}

/// A laptop console's one person and its sign-in link.
pub(super) struct Laptop {
    pub(super) link: OneTimeLink,
    pub(super) session: Session,
    client: kube::Client,
    username: OnceCell<String>,
    callers: Mutex<HashMap<String, Arc<Caller>>>,
}

/// A signed-in person.
pub(super) struct Signed {
    pub(super) viewer: Viewer,
    /// Their client (reads across namespaces: the front page, live).
    pub(super) client: kube::Client,
    /// Their caller in the route's namespace, when the route names one.
    pub(super) caller: Option<Arc<Caller>>,
    /// What their CSRF token is bound to.
    csrf_subject: Vec<u8>,
}

impl Signed {
    /// Checks a form's `csrf` field against this person's token.
    pub(super) fn check_csrf(
        &self,
        key: &CsrfKey,
        presented: Option<&str>,
    ) -> Result<(), super::guard::Refusal> {
        key.check(&self.csrf_subject, presented)
    }

    /// The caller of the route's namespace (the routes that name one ask
    /// for it when signing in).
    pub(super) fn caller(&self) -> Result<&Arc<Caller>, Early> {
        self.caller.as_ref().ok_or_else(|| {
            Early::from(page(
                StatusCode::INTERNAL_SERVER_ERROR,
                render::error(
                    Some(&self.viewer),
                    500,
                    "No namespace",
                    "This page names no namespace.",
                ),
            ))
        })
    }
}

impl Front {
    /// A laptop front door acting as `client`; the link's secret with it.
    pub(super) fn laptop(client: kube::Client) -> anyhow::Result<(String, Self)> {
        let (secret, link) = OneTimeLink::generate()?;
        let laptop = Laptop {
            link,
            session: Session::default(),
            client,
            username: OnceCell::new(),
            callers: Mutex::new(HashMap::new()),
        };
        Ok((secret, Self::Laptop(Box::new(laptop))))
    }

    /// A proxy front door resolving bearer tokens with `resolver`.
    pub(super) fn proxy(resolver: Arc<TokenResolver>) -> Self {
        Self::Proxy(resolver)
    }

    /// The mode pages are drawn for.
    pub(super) fn mode(&self) -> Mode {
        match self {
            Self::Laptop(_) => Mode::Laptop,
            Self::Proxy(_) => Mode::Proxy,
        }
    }

    /// The person asking, with their caller in `namespace` when given; the
    /// sign-in page (401) or an error page otherwise.
    pub(super) async fn sign_in(
        &self,
        csrf: &CsrfKey,
        headers: &HeaderMap,
        namespace: Option<&str>,
    ) -> Result<Signed, Early> {
        if let Some(namespace) = namespace
            && !is_dns_label(namespace)
        {
            return Err(bad_namespace(namespace).into());
        }
        match self {
            Self::Laptop(laptop) => laptop.sign_in(csrf, headers, namespace).await,
            Self::Proxy(resolver) => proxy_sign_in(resolver, csrf, headers, namespace).await,
        }
    }
}

impl Laptop {
    async fn sign_in(
        &self,
        csrf: &CsrfKey,
        headers: &HeaderMap,
        namespace: Option<&str>,
    ) -> Result<Signed, Early> {
        let cookie = headers
            .get_all(header::COOKIE)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .find_map(cookie_of);
        let id = match cookie {
            Some(id) if self.session.is(id) => id,
            Some(_) => return Err(sign_in_page(Mode::Laptop, SignIn::SessionExpired).into()),
            None => return Err(sign_in_page(Mode::Laptop, SignIn::NoToken).into()),
        };
        let username = self
            .username
            .get_or_try_init(|| who_am_i(&self.client))
            .await
            .map_err(|err| {
                tracing::warn!(error = %err, "cannot ask the Kubernetes API who the kubeconfig's user is");
                Early::from(unavailable())
            })?
            .clone();
        let caller = namespace.map(|namespace| self.caller(namespace));
        Ok(Signed {
            viewer: Viewer {
                username,
                mode: Mode::Laptop,
                csrf: csrf.token(id.as_bytes()),
            },
            client: self.client.clone(),
            caller,
            csrf_subject: id.as_bytes().to_vec(),
        })
    }

    /// The kept caller of `namespace`, or a new one.
    fn caller(&self, namespace: &str) -> Arc<Caller> {
        let made = || {
            Arc::new(Caller::new(
                self.client.clone(),
                namespace,
                Profile::new(PROFILE),
            ))
        };
        let Ok(mut callers) = self.callers.lock() else {
            return made();
        };
        if let Some(caller) = callers.get(namespace) {
            return caller.clone();
        }
        if callers.len() >= CALLERS {
            callers.clear();
        }
        let caller = made();
        callers.insert(namespace.to_owned(), caller.clone());
        caller
    }
}

async fn proxy_sign_in(
    resolver: &Arc<TokenResolver>,
    csrf: &CsrfKey,
    headers: &HeaderMap,
    namespace: Option<&str>,
) -> Result<Signed, Early> {
    let token = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(bearer_token)
        .ok_or_else(|| Early::from(sign_in_page(Mode::Proxy, SignIn::NoToken)))?;
    let caller = resolver
        .caller(
            token,
            Some(PROFILE),
            Some(namespace.unwrap_or(ANY_NAMESPACE)),
        )
        .await
        .map_err(|err| {
            Early::from(match err {
                AuthError::InvalidToken => sign_in_page(Mode::Proxy, SignIn::TokenRejected),
                AuthError::Namespace(NamespaceError::Invalid { value }) => bad_namespace(&value),
                AuthError::Namespace(_) | AuthError::Unavailable(_) => {
                    tracing::warn!(error = %err, "cannot identify a person");
                    unavailable()
                }
            })
        })?;
    let username = caller
        .username()
        .await
        .map_err(|err| {
            tracing::warn!(error = %err, "cannot ask the Kubernetes API who a person is");
            Early::from(unavailable())
        })?
        .to_owned();
    let subject: [u8; 32] = Sha256::digest(token.as_bytes()).into();
    let client = caller.client().clone();
    Ok(Signed {
        viewer: Viewer {
            username,
            mode: Mode::Proxy,
            csrf: csrf.token(&subject),
        },
        client,
        caller: namespace.map(|_| Arc::new(caller)),
        csrf_subject: subject.to_vec(),
    })
}

/// The sign-in page, 401.
pub(super) fn sign_in_page(mode: Mode, why: SignIn) -> Response {
    page(StatusCode::UNAUTHORIZED, render::sign_in(mode, why))
}

fn unavailable() -> Response {
    page(
        StatusCode::SERVICE_UNAVAILABLE,
        render::error(
            None,
            503,
            "Kubernetes is not answering",
            "The console could not ask the Kubernetes API who you are. Try again in a moment.",
        ),
    )
}

fn bad_namespace(value: &str) -> Response {
    let message = format!(
        "namespace: \"{value}\" is not a namespace name (rule: a DNS label, at most 63 characters, lowercase letters, digits and '-')."
    );
    page(
        StatusCode::BAD_REQUEST,
        render::error(None, 400, "Not a namespace", &message),
    )
}

/// Pure: whether `value` is a DNS label (RFC 1123), as namespace names are.
fn is_dns_label(value: &str) -> bool {
    let bytes = value.as_bytes();
    (1..=63).contains(&bytes.len())
        && bytes
            .iter()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-')
        && bytes.first() != Some(&b'-')
        && bytes.last() != Some(&b'-')
}

#[cfg(test)]
mod tests {
    use super::is_dns_label;

    #[test]
    fn namespace_names() {
        let long = "a".repeat(64);
        let cases = [
            ("team-a", true),
            ("a", true),
            ("0abc", true),
            ("", false),
            ("-a", false),
            ("a-", false),
            ("Team", false),
            ("a.b", false),
            ("a/b", false),
            (long.as_str(), false),
        ];
        for (value, want) in cases {
            assert_eq!(is_dns_label(value), want, "{value:?}");
        }
    }
}
