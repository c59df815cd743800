//! Who is calling, and with which credentials the bridge acts for them.
//!
//! Over HTTP every request carries `Authorization: Bearer <token>` (an
//! agent's projected ServiceAccount token, or a static dev token). The
//! bridge never uses its own rights for handoffs: it builds a client that
//! sends the caller's token (token passthrough), so the apiserver's RBAC
//! decides every read and write, and it asks the apiserver who the token
//! belongs to with a SelfSubjectReview (that name becomes `spec.createdBy`).
//! Clients and identities are cached per token, bounded in size and age.
//!
//! Authentication cannot be amplified: however many requests carry a new
//! token at once, the bridge makes one review for it (single flight, keyed
//! by the token's SHA-256), and a token the apiserver rejected is answered
//! 401 from a bounded, short-lived cache of rejected hashes. An unknown
//! token costs one request on the pooled connections of a client without
//! credentials; only an accepted token gets a client of its own.
//!
//! The agent profile comes from the caller's ServiceAccount label
//! `handoff.dev/profile` when present (read with the bridge's own identity,
//! which may `get` ServiceAccounts of the namespace it serves only), else
//! from the `X-Handoff-Profile` request header. A header can therefore pick
//! a profile, but never widen what RBAC allows. The same read gives the
//! agent the caller is (label `handoff.dev/agent`): the destination an offer
//! names may reject it. A caller whose ServiceAccount lives in another
//! namespace gets its profile from the header only, and is no agent.
//!
//! When the bridge answers from the PostgreSQL mirror instead of the
//! apiserver, RBAC is not in the path, so the bridge asks first: a
//! SelfSubjectAccessReview made with the caller's own token ([`Caller::may`]),
//! cached per token for [`ACCESS_TTL`].

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::FutureExt;
use futures::future::{BoxFuture, WeakShared};
use http::HeaderValue;

use k8s_openapi::api::authentication::v1::SelfSubjectReview;
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SelfSubjectAccessReview, SelfSubjectAccessReviewSpec,
};
use k8s_openapi::api::core::v1::ServiceAccount;
use kube::api::{Api, PostParams};
use kube::config::AuthInfo;
use kube::{Client, Config, Resource};
use sha2::{Digest, Sha256};
use tokio::sync::OnceCell;

use super::profiles::Profile;
use handoff_core::names::{AGENT_LABEL, PROFILE_LABEL};
use handoff_kube::store::HandoffStore;
use handoff_kube::telemetry::BridgeMetrics;

/// The request header that names a profile when the ServiceAccount has no label.
pub const PROFILE_HEADER: &str = "x-handoff-profile";

/// Per-request timeouts of clients made for callers: an unreachable
/// apiserver gives a retriable error quickly instead of a hang.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
const READ_TIMEOUT: Duration = Duration::from_secs(15);

/// How long an access review answer is reused for the same token: short,
/// so a revoked RoleBinding stops mirror reads within seconds.
pub const ACCESS_TTL: Duration = Duration::from_secs(10);

/// What an access review asked: `(namespace, resource, verb)`.
type AccessQuestion = (String, String, String);

/// Access review answers of one token: question → when asked, allowed.
#[derive(Default)]
pub(crate) struct AccessCache(Mutex<HashMap<AccessQuestion, (Instant, bool)>>);

/// `config` with the bridge's bounded connect and read timeouts.
pub fn with_timeouts(mut config: Config) -> Config {
    config.connect_timeout = Some(CONNECT_TIMEOUT);
    config.read_timeout = Some(READ_TIMEOUT);
    config
}

/// A caller the bridge acts for: its store (its own credentials), its
/// profile and, once asked, its name and the agent it is.
pub struct Caller {
    store: HandoffStore,
    client: Client,
    profile: Profile,
    username: OnceCell<String>,
    agent: OnceCell<Option<String>>,
    access: Arc<AccessCache>,
}

impl Caller {
    /// A caller whose name (and agent label) is looked up on first need,
    /// with its own credentials (stdio).
    pub fn new(client: Client, namespace: &str, profile: Profile) -> Self {
        Self {
            store: HandoffStore::new(client.clone(), namespace),
            client,
            profile,
            username: OnceCell::new(),
            agent: OnceCell::new(),
            access: Arc::default(),
        }
    }

    fn known(client: Client, namespace: &str, profile: Profile, resolved: &Resolved) -> Self {
        let mut caller = Self::new(client, namespace, profile);
        let _ = caller.username.set(resolved.username.clone());
        let _ = caller.agent.set(resolved.sa_agent.clone());
        caller.access = resolved.access.clone();
        caller
    }

    /// Whether RBAC lets this caller `verb` handoffs in the store's
    /// namespace (see [`Caller::may_on`]).
    pub async fn may(&self, verb: &str) -> Result<bool, kube::Error> {
        self.may_on("handoffs", verb).await
    }

    /// Whether RBAC lets this caller `verb` `resource` (of handoff.dev,
    /// `plural` or `plural/subresource`) in the store's namespace: a
    /// SelfSubjectAccessReview with the caller's own credentials, cached
    /// for [`ACCESS_TTL`].
    pub(crate) async fn may_on(&self, resource: &str, verb: &str) -> Result<bool, kube::Error> {
        let namespace = self.store.namespace().to_owned();
        let key = (namespace.clone(), resource.to_owned(), verb.to_owned());
        let (plural, subresource) = match resource.split_once('/') {
            Some((plural, sub)) => (plural, Some(sub.to_owned())),
            None => (resource, None),
        };
        if let Ok(cache) = self.access.0.lock()
            && let Some((at, allowed)) = cache.get(&key)
            && at.elapsed() < ACCESS_TTL
        {
            return Ok(*allowed);
        }
        let review = SelfSubjectAccessReview {
            spec: SelfSubjectAccessReviewSpec {
                resource_attributes: Some(ResourceAttributes {
                    group: Some(handoff_core::api::GROUP.into()),
                    resource: Some(plural.into()),
                    subresource,
                    verb: Some(verb.into()),
                    namespace: Some(namespace),
                    ..ResourceAttributes::default()
                }),
                ..SelfSubjectAccessReviewSpec::default()
            },
            ..SelfSubjectAccessReview::default()
        };
        let answer = Api::<SelfSubjectAccessReview>::all(self.client.clone())
            .create(&PostParams::default(), &review)
            .await?;
        let allowed = answer.status.is_some_and(|s| s.allowed);
        if let Ok(mut cache) = self.access.0.lock() {
            cache.insert(key, (Instant::now(), allowed));
        }
        Ok(allowed)
    }

    /// A client with this caller's credentials.
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// The store acting with this caller's credentials.
    pub fn store(&self) -> &HandoffStore {
        &self.store
    }

    /// The agent profile.
    pub fn profile(&self) -> &Profile {
        &self.profile
    }

    /// The authenticated user name (a SelfSubjectReview, made once).
    pub(crate) async fn username(&self) -> Result<&str, kube::Error> {
        self.username
            .get_or_try_init(|| who_am_i(&self.client))
            .await
            .map(String::as_str)
    }

    /// The agent this caller is: the label `handoff.dev/agent` of its
    /// ServiceAccount (`None` for other users, unlabelled accounts and
    /// accounts the bridge may not read). Over HTTP read with the bridge's
    /// identity when the token was resolved; over stdio with the caller's
    /// own, on first need.
    pub async fn agent(&self) -> Result<Option<&str>, kube::Error> {
        self.agent
            .get_or_try_init(|| async {
                let username = self.username().await?.to_owned();
                Ok::<_, kube::Error>(account_labels(&self.client, &username).await.agent)
            })
            .await
            .map(Option::as_deref)
    }

    /// The name if already known (for messages; never a request).
    pub(crate) fn known_username(&self) -> &str {
        self.username
            .get()
            .map(String::as_str)
            .unwrap_or("the caller")
    }
}

/// The user name the apiserver sees for `client`'s credentials.
pub async fn who_am_i(client: &Client) -> Result<String, kube::Error> {
    let review = Api::<SelfSubjectReview>::all(client.clone())
        .create(&PostParams::default(), &SelfSubjectReview::default())
        .await?;
    Ok(username_of(review))
}

fn username_of(review: SelfSubjectReview) -> String {
    review
        .status
        .and_then(|s| s.user_info)
        .and_then(|u| u.username)
        .unwrap_or_default()
}

/// Asks the apiserver who `token` belongs to (a SelfSubjectReview), on the
/// pooled connections of `reviewer`, a client without credentials of its
/// own: an unknown token costs one request, not a client and a TLS
/// handshake. The token travels in a header marked sensitive.
async fn review_token(reviewer: &Client, token: &str) -> Result<String, AuthError> {
    let unavailable = |err: &dyn std::fmt::Display| AuthError::Unavailable(err.to_string());
    let body = serde_json::to_vec(&SelfSubjectReview::default()).map_err(|e| unavailable(&e))?;
    let mut request = kube::core::Request::new(SelfSubjectReview::url_path(&(), None))
        .create(&PostParams::default(), body)
        .map_err(|e| unavailable(&e))?;
    let mut credential =
        HeaderValue::from_str(&format!("Bearer {token}")).map_err(|_| AuthError::InvalidToken)?;
    credential.set_sensitive(true);
    request
        .headers_mut()
        .insert(http::header::AUTHORIZATION, credential);
    match reviewer.request::<SelfSubjectReview>(request).await {
        Ok(review) => Ok(username_of(review)),
        Err(kube::Error::Api(s)) if s.code == 401 => Err(AuthError::InvalidToken),
        Err(err) => Err(unavailable(&err)),
    }
}

/// Why a request could not be tied to a caller.
#[derive(Clone, Debug, thiserror::Error)]
pub enum AuthError {
    /// The apiserver rejected the token.
    #[error("the apiserver did not accept the bearer token")]
    InvalidToken,
    /// The apiserver could not be asked (the detail is for the bridge's
    /// log, never for the caller).
    #[error("the Kubernetes API is unreachable: {0}")]
    Unavailable(String),
    /// The call's namespace is unknown, invalid or not served.
    #[error("{0}")]
    Namespace(#[from] NamespaceError),
}

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
pub(crate) fn call_namespace(
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

/// What is cached per token.
struct Resolved {
    client: Client,
    username: String,
    sa_profile: Option<Profile>,
    sa_agent: Option<String>,
    access: Arc<AccessCache>,
}

/// What the labels of a caller's ServiceAccount say.
#[derive(Default)]
struct AccountLabels {
    profile: Option<Profile>,
    agent: Option<String>,
}

/// The labels `handoff.dev/profile` and `handoff.dev/agent` of the
/// ServiceAccount behind `username`, read with `reader` (nothing for other
/// users, or when the account cannot be read).
async fn account_labels(reader: &Client, username: &str) -> AccountLabels {
    let Some((namespace, name)) = service_account_of(username) else {
        return AccountLabels::default();
    };
    match Api::<ServiceAccount>::namespaced(reader.clone(), namespace)
        .get_opt(name)
        .await
    {
        Ok(sa) => {
            let labels = sa.and_then(|sa| sa.metadata.labels).unwrap_or_default();
            AccountLabels {
                profile: labels.get(PROFILE_LABEL).map(|p| Profile::new(p)),
                agent: labels.get(AGENT_LABEL).cloned(),
            }
        }
        Err(err) => {
            tracing::warn!(%username, error = %err, "cannot read the caller's ServiceAccount; using the profile header, and the caller is no agent");
            AccountLabels::default()
        }
    }
}

/// SHA-256 of a bearer token: caches and reviews in progress are keyed by
/// it, never by the token.
type TokenHash = [u8; 32];
type Outcome = Result<Arc<Resolved>, AuthError>;
type ReviewFuture = BoxFuture<'static, Outcome>;

/// How many callers are remembered, for how long, and how many tokens are
/// reviewed at once.
#[derive(Clone, Copy, Debug)]
pub struct ResolverSettings {
    /// Most tokens whose client and identity are kept.
    pub capacity: usize,
    /// How long an identity is trusted.
    pub ttl: Duration,
    /// Most rejected token hashes kept.
    pub rejected_capacity: usize,
    /// How long a rejected token is answered 401 without asking again.
    pub rejected_ttl: Duration,
    /// Most identity reviews in progress at once; more wait their turn.
    /// Bounds what unknown tokens cost the apiserver (and the bridge),
    /// however many arrive; known callers never wait for it.
    pub concurrent_reviews: usize,
}

/// The caches of a resolver, under one lock so that a lookup and the end of
/// a review never interleave (a request either sees the cached answer or
/// joins the review in progress).
struct Caches {
    known: TtlCache<Arc<Resolved>>,
    rejected: TtlCache<()>,
    /// One review per token hash at a time (single flight); weak, so a
    /// review whose every requester has gone is dropped, not leaked.
    pending: HashMap<TokenHash, (u64, WeakShared<ReviewFuture>)>,
    next_review: u64,
}

/// Turns bearer tokens into callers: one identity review per token at a
/// time however many requests carry it, a bounded TTL cache of identities
/// and a bounded, shorter one of rejected tokens.
pub struct TokenResolver {
    base: Config,
    reviewer: Client,
    bridge: Client,
    namespace: Option<String>,
    metrics: Arc<BridgeMetrics>,
    caches: Mutex<Caches>,
    reviews: tokio::sync::Semaphore,
}

impl TokenResolver {
    /// `base` is the bridge's own configuration (cluster URL and CA are
    /// kept, credentials replaced per caller); `bridge` its own client, used
    /// here only to read ServiceAccount labels; `namespace` the one namespace
    /// it serves, or `None` for each caller's own (see [`call_namespace`]).
    /// Reviews are counted in `metrics`.
    pub fn new(
        base: Config,
        bridge: Client,
        namespace: Option<&str>,
        settings: ResolverSettings,
        metrics: Arc<BridgeMetrics>,
    ) -> Result<Self, kube::Error> {
        let mut anonymous = with_timeouts(base.clone());
        anonymous.auth_info = AuthInfo::default();
        Ok(Self {
            base,
            reviewer: Client::try_from(anonymous)?,
            bridge,
            namespace: namespace.map(str::to_owned),
            metrics,
            caches: Mutex::new(Caches {
                known: TtlCache::new(settings.capacity, settings.ttl),
                rejected: TtlCache::new(settings.rejected_capacity, settings.rejected_ttl),
                pending: HashMap::new(),
                next_review: 0,
            }),
            reviews: tokio::sync::Semaphore::new(settings.concurrent_reviews),
        })
    }

    /// The caller for `token` in the namespace the route names (if any; see
    /// [`call_namespace`]), with `header_profile` used when its
    /// ServiceAccount has no profile label.
    pub async fn caller(
        self: &Arc<Self>,
        token: &str,
        header_profile: Option<&str>,
        route_namespace: Option<&str>,
    ) -> Result<Caller, AuthError> {
        let resolved = self.resolve(token).await?;
        let namespace = call_namespace(
            self.namespace.as_deref(),
            route_namespace,
            &resolved.username,
        )?;
        let profile = resolved
            .sa_profile
            .clone()
            .unwrap_or_else(|| Profile::new(header_profile.unwrap_or_default()));
        Ok(Caller::known(
            resolved.client.clone(),
            &namespace,
            profile,
            &resolved,
        ))
    }

    /// A cached answer, else the review in progress for this token, else a
    /// new one.
    async fn resolve(self: &Arc<Self>, token: &str) -> Outcome {
        let key: TokenHash = Sha256::digest(token.as_bytes()).into();
        let review = {
            let mut caches = self
                .caches
                .lock()
                .map_err(|_| AuthError::Unavailable("the token cache lock is poisoned".into()))?;
            if let Some(hit) = caches.known.get(&key) {
                return Ok(hit);
            }
            if caches.rejected.get(&key).is_some() {
                return Err(AuthError::InvalidToken);
            }
            match caches.pending.get(&key).and_then(|(_, r)| r.upgrade()) {
                Some(review) => review,
                None => {
                    caches.next_review += 1;
                    let id = caches.next_review;
                    let review = self
                        .clone()
                        .review(key, id, token.to_owned())
                        .boxed()
                        .shared();
                    if let Some(weak) = review.downgrade() {
                        caches.pending.insert(key, (id, weak));
                    }
                    review
                }
            }
        };
        review.await
    }

    /// One identity review; its answer is cached before it stops being
    /// the review in progress.
    async fn review(self: Arc<Self>, key: TokenHash, id: u64, token: String) -> Outcome {
        let in_progress = InProgress {
            resolver: self.clone(),
            key,
            id,
        };
        let outcome = self.identify(&token).await;
        if let Ok(mut caches) = self.caches.lock() {
            match &outcome {
                Ok(resolved) => caches.known.insert(key, resolved.clone()),
                Err(AuthError::InvalidToken) => caches.rejected.insert(key, ()),
                Err(AuthError::Unavailable(_) | AuthError::Namespace(_)) => {}
            }
        }
        drop(in_progress);
        outcome
    }

    async fn identify(&self, token: &str) -> Outcome {
        let turn = self
            .reviews
            .acquire()
            .await
            .map_err(|_| AuthError::Unavailable("the review limit is closed".into()))?;
        let reviewed = review_token(&self.reviewer, token).await;
        drop(turn);
        self.metrics.identity_review(match &reviewed {
            Ok(_) => "ok",
            Err(AuthError::InvalidToken) => "rejected",
            Err(AuthError::Unavailable(_) | AuthError::Namespace(_)) => "unavailable",
        });
        let username = reviewed?;
        let client = self.client_for(token)?;
        let labels = account_labels(&self.bridge, &username).await;
        Ok(Arc::new(Resolved {
            client,
            username,
            sa_profile: labels.profile,
            sa_agent: labels.agent,
            access: Arc::default(),
        }))
    }

    fn client_for(&self, token: &str) -> Result<Client, AuthError> {
        let mut config = with_timeouts(self.base.clone());
        config.auth_info = AuthInfo {
            token: Some(token.to_owned().into()),
            ..AuthInfo::default()
        };
        Client::try_from(config).map_err(|e| AuthError::Unavailable(e.to_string()))
    }
}

/// Marks a review in progress; dropped when the review ends or is
/// abandoned by every requester, it stops being the one later requests join.
struct InProgress {
    resolver: Arc<TokenResolver>,
    key: TokenHash,
    id: u64,
}

impl Drop for InProgress {
    fn drop(&mut self) {
        if let Ok(mut caches) = self.resolver.caches.lock()
            && caches
                .pending
                .get(&self.key)
                .is_some_and(|(id, _)| *id == self.id)
        {
            caches.pending.remove(&self.key);
        }
    }
}

/// `(namespace, name)` of a ServiceAccount user name
/// (`system:serviceaccount:<namespace>:<name>`).
pub(crate) fn service_account_of(username: &str) -> Option<(&str, &str)> {
    let rest = username.strip_prefix("system:serviceaccount:")?;
    let (namespace, name) = rest.split_once(':')?;
    (!namespace.is_empty() && !name.is_empty() && !name.contains(':')).then_some((namespace, name))
}

/// The bearer token of an `Authorization` header value.
pub(crate) fn bearer_token(header: &str) -> Option<&str> {
    let (scheme, token) = header.trim().split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

/// A map with a size bound and an age bound: entries older than `ttl` are
/// misses, and a full map drops its oldest entries. Every entry lives as
/// long, so insertion order is expiry order: eviction pops the front of a
/// queue (constant time even when a flood of distinct keys fills it).
struct TtlCache<V> {
    entries: HashMap<TokenHash, (Instant, V)>,
    /// Insertion times and keys, oldest first; an element whose time is not
    /// its key's current one is stale and skipped.
    order: VecDeque<(Instant, TokenHash)>,
    capacity: usize,
    ttl: Duration,
}

impl<V: Clone> TtlCache<V> {
    fn new(capacity: usize, ttl: Duration) -> Self {
        Self {
            entries: HashMap::new(),
            order: VecDeque::new(),
            capacity: capacity.max(1),
            ttl,
        }
    }

    fn get(&mut self, key: &TokenHash) -> Option<V> {
        match self.entries.get(key) {
            Some((at, v)) if at.elapsed() < self.ttl => Some(v.clone()),
            Some(_) => {
                self.entries.remove(key);
                None
            }
            None => None,
        }
    }

    fn insert(&mut self, key: TokenHash, value: V) {
        let now = Instant::now();
        self.entries.insert(key, (now, value));
        self.order.push_back((now, key));
        while let Some(&(at, oldest)) = self.order.front() {
            let current = self.entries.get(&oldest).is_some_and(|(t, _)| *t == at);
            if !current {
                self.order.pop_front();
            } else if self.entries.len() > self.capacity || at.elapsed() >= self.ttl {
                self.entries.remove(&oldest);
                self.order.pop_front();
            } else {
                break;
            }
        }
        if self.order.len() > 2 * self.capacity {
            let entries = &self.entries;
            self.order
                .retain(|(at, key)| entries.get(key).is_some_and(|(t, _)| t == at));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bearer_tokens() {
        assert_eq!(bearer_token("Bearer abc"), Some("abc"));
        assert_eq!(bearer_token("bearer   abc "), Some("abc"));
        assert_eq!(bearer_token("Basic abc"), None);
        assert_eq!(bearer_token("Bearer "), None);
        assert_eq!(bearer_token(""), None);
    }

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

    #[test]
    fn cache_is_bounded_and_expires() {
        let mut cache = TtlCache::new(2, Duration::from_secs(60));
        for i in 0..5u8 {
            cache.insert([i; 32], i);
        }
        assert_eq!(cache.entries.len(), 2);
        assert_eq!(cache.get(&[4; 32]), Some(4));
        assert_eq!(cache.get(&[0; 32]), None, "the oldest was evicted");

        let mut expiring = TtlCache::new(8, Duration::ZERO);
        expiring.insert([1; 32], 1);
        assert_eq!(expiring.get(&[1; 32]), None);
        assert!(expiring.entries.is_empty());
    }

    #[test]
    fn a_flood_of_keys_keeps_the_cache_and_its_queue_bounded() {
        let mut cache = TtlCache::new(16, Duration::from_secs(60));
        for i in 0..10_000u32 {
            let mut key = [0; 32];
            key[..4].copy_from_slice(&i.to_le_bytes());
            cache.insert(key, ());
            cache.insert([7; 32], ());
        }
        assert_eq!(cache.entries.len(), 16);
        assert!(cache.order.len() <= 32, "queue: {}", cache.order.len());
        assert_eq!(cache.get(&[7; 32]), Some(()), "the newest insert stays");
    }

    /// A fake apiserver counting SelfSubjectReviews: `Bearer good` is
    /// alice, any other token 401; each answer takes `delay`.
    async fn fake_apiserver(delay: Duration) -> (String, Arc<std::sync::atomic::AtomicUsize>) {
        let (url, reviews, _) = fake_apiserver_with_peak(delay).await;
        (url, reviews)
    }

    /// [`fake_apiserver`], also reporting the most reviews it served at once.
    async fn fake_apiserver_with_peak(
        delay: Duration,
    ) -> (
        String,
        Arc<std::sync::atomic::AtomicUsize>,
        Arc<std::sync::atomic::AtomicUsize>,
    ) {
        use axum::http::{HeaderMap, StatusCode};
        use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
        let reviews = Arc::new(AtomicUsize::new(0));
        let peak = Arc::new(AtomicUsize::new(0));
        let now = Arc::new(AtomicUsize::new(0));
        let (counted, seen_peak) = (reviews.clone(), peak.clone());
        let app = axum::Router::new().route(
            "/apis/authentication.k8s.io/v1/selfsubjectreviews",
            axum::routing::post(move |headers: HeaderMap| {
                let (counted, seen_peak, now) = (counted.clone(), seen_peak.clone(), now.clone());
                async move {
                    counted.fetch_add(1, SeqCst);
                    seen_peak.fetch_max(now.fetch_add(1, SeqCst) + 1, SeqCst);
                    tokio::time::sleep(delay).await;
                    now.fetch_sub(1, SeqCst);
                    if headers.get("authorization").is_some_and(|v| v == "Bearer good") {
                        let review = serde_json::json!({"apiVersion": "authentication.k8s.io/v1",
                            "kind": "SelfSubjectReview", "status": {"userInfo": {"username": "alice"}}});
                        (StatusCode::CREATED, review.to_string())
                    } else {
                        let status = serde_json::json!({"apiVersion": "v1", "kind": "Status",
                            "status": "Failure", "message": "Unauthorized", "reason": "Unauthorized", "code": 401});
                        (StatusCode::UNAUTHORIZED, status.to_string())
                    }
                }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let url = format!("http://{}", listener.local_addr().expect("addr"));
        tokio::spawn(async move { axum::serve(listener, app).await });
        (url, reviews, peak)
    }

    fn resolver(url: &str, rejected_ttl: Duration) -> (Arc<TokenResolver>, Arc<BridgeMetrics>) {
        resolver_with(url, rejected_ttl, 4)
    }

    fn resolver_with(
        url: &str,
        rejected_ttl: Duration,
        concurrent_reviews: usize,
    ) -> (Arc<TokenResolver>, Arc<BridgeMetrics>) {
        let config = Config::new(url.parse().expect("url"));
        let bridge = Client::try_from(config.clone()).expect("client");
        let metrics = BridgeMetrics::new();
        let settings = ResolverSettings {
            capacity: 16,
            ttl: Duration::from_secs(60),
            rejected_capacity: 16,
            rejected_ttl,
            concurrent_reviews,
        };
        let resolver = TokenResolver::new(config, bridge, Some("ns"), settings, metrics.clone())
            .expect("resolver");
        (Arc::new(resolver), metrics)
    }

    async fn concurrently(
        resolver: &Arc<TokenResolver>,
        token: &str,
        n: usize,
    ) -> Vec<Result<Caller, AuthError>> {
        let calls = (0..n).map(|_| {
            let resolver = resolver.clone();
            let token = token.to_owned();
            tokio::spawn(async move { resolver.caller(&token, None, None).await })
        });
        futures::future::join_all(calls)
            .await
            .into_iter()
            .map(|joined| joined.expect("join"))
            .collect()
    }

    #[tokio::test]
    async fn two_hundred_requests_with_one_new_token_make_one_review() {
        use std::sync::atomic::Ordering::SeqCst;
        let (url, reviews) = fake_apiserver(Duration::from_millis(200)).await;
        let (resolver, metrics) = resolver(&url, Duration::from_secs(60));

        let accepted = concurrently(&resolver, "good", 200).await;
        assert!(
            accepted
                .iter()
                .all(|c| c.as_ref().is_ok_and(|c| c.known_username() == "alice"))
        );
        assert_eq!(
            reviews.load(SeqCst),
            1,
            "one review for one new valid token"
        );

        let rejected = concurrently(&resolver, "junk", 200).await;
        assert!(
            rejected
                .iter()
                .all(|c| matches!(c, Err(AuthError::InvalidToken)))
        );
        assert_eq!(
            reviews.load(SeqCst),
            2,
            "one review for one new invalid token"
        );

        let again = resolver.caller("junk", None, None).await;
        assert!(matches!(again, Err(AuthError::InvalidToken)));
        assert_eq!(reviews.load(SeqCst), 2, "a rejected token is remembered");
        let page = metrics.encode();
        for series in [
            "handoff_mcp_identity_reviews_total{result=\"ok\"} 1",
            "handoff_mcp_identity_reviews_total{result=\"rejected\"} 1",
        ] {
            assert!(page.contains(series), "{series} in {page}");
        }
        assert!(resolver.caches.lock().expect("lock").pending.is_empty());
    }

    #[tokio::test]
    async fn a_rejected_token_is_asked_again_after_its_ttl_and_abandoned_reviews_end() {
        use std::sync::atomic::Ordering::SeqCst;
        let (url, reviews) = fake_apiserver(Duration::from_millis(100)).await;
        let (resolver, _) = resolver(&url, Duration::ZERO);
        for _ in 0..2 {
            assert!(matches!(
                resolver.caller("junk", None, None).await,
                Err(AuthError::InvalidToken)
            ));
        }
        assert_eq!(
            reviews.load(SeqCst),
            2,
            "no negative caching with a zero TTL"
        );

        let abandoned = tokio::time::timeout(
            Duration::from_millis(20),
            resolver.caller("gone", None, None),
        )
        .await;
        assert!(abandoned.is_err(), "the review outlived its requester");
        assert!(
            resolver.caches.lock().expect("lock").pending.is_empty(),
            "a review nobody waits for is not kept"
        );
    }

    #[tokio::test]
    async fn an_unreachable_apiserver_is_unavailable_and_not_remembered() {
        let port = {
            let probe = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
            probe.local_addr().expect("addr").port()
        };
        let (resolver, metrics) =
            resolver(&format!("http://127.0.0.1:{port}"), Duration::from_secs(60));
        for _ in 0..2 {
            assert!(matches!(
                resolver.caller("t", None, None).await,
                Err(AuthError::Unavailable(_))
            ));
        }
        assert!(
            metrics
                .encode()
                .contains("handoff_mcp_identity_reviews_total{result=\"unavailable\"} 2"),
            "each attempt asks again"
        );
    }

    #[tokio::test]
    async fn distinct_new_tokens_are_reviewed_at_most_n_at_a_time() {
        use std::sync::atomic::Ordering::SeqCst;
        let (url, reviews, peak) = fake_apiserver_with_peak(Duration::from_millis(50)).await;
        let (resolver, _) = resolver_with(&url, Duration::from_secs(60), 2);
        let calls = (0..12).map(|i| {
            let resolver = resolver.clone();
            tokio::spawn(async move { resolver.caller(&format!("junk-{i}"), None, None).await })
        });
        for answer in futures::future::join_all(calls).await {
            assert!(matches!(
                answer.expect("join"),
                Err(AuthError::InvalidToken)
            ));
        }
        assert_eq!(reviews.load(SeqCst), 12, "one review per distinct token");
        assert_eq!(peak.load(SeqCst), 2, "never more than two at once");
    }
}
