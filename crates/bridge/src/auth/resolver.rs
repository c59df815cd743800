//! Bearer tokens to callers: one identity review per token at a time
//! (single flight, keyed by the token's SHA-256), a bounded TTL cache of
//! identities and a shorter one of rejected tokens, and at most
//! `--max-concurrent-reviews` reviews in progress; and the bounded
//! timeouts of every client made for a caller ([`with_timeouts`]).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::FutureExt;
use futures::future::{BoxFuture, WeakShared};
use http::HeaderValue;
use k8s_openapi::api::authentication::v1::SelfSubjectReview;
use kube::api::PostParams;
use kube::config::AuthInfo;
use kube::{Client, Config, Resource};
use sha2::{Digest, Sha256};

use super::cache::{TokenHash, TtlCache};
use super::caller::{AccessCache, Caller, account_labels, username_of};
use super::namespace::{NamespaceError, call_namespace};
use crate::profiles::Profile;
use handoff_kube::telemetry::BridgeMetrics;

/// Per-request timeouts of clients made for callers: an unreachable
/// apiserver gives a retriable error quickly instead of a hang.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
const READ_TIMEOUT: Duration = Duration::from_secs(15);

/// `config` with the bridge's bounded connect and read timeouts.
pub fn with_timeouts(mut config: Config) -> Config {
    config.connect_timeout = Some(CONNECT_TIMEOUT);
    config.read_timeout = Some(READ_TIMEOUT);
    config
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

/// What is cached per token.
struct Resolved {
    client: Client,
    username: String,
    sa_profile: Option<Profile>,
    sa_agent: Option<String>,
    access: Arc<AccessCache>,
}

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
            &resolved.username,
            resolved.sa_agent.as_deref(),
            resolved.access.clone(),
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

/// The bearer token of an `Authorization` header value.
pub fn bearer_token(header: &str) -> Option<&str> {
    let (scheme, token) = header.trim().split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
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
