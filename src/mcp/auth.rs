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
//! The agent profile comes from the caller's ServiceAccount label
//! `handoff.dev/profile` when present (read with the bridge's own, read-only
//! identity), else from the `X-Handoff-Profile` request header. A header can
//! therefore pick a profile, but never widen what RBAC allows.
//!
//! When the bridge answers from the PostgreSQL mirror instead of the
//! apiserver, RBAC is not in the path, so the bridge asks first: a
//! SelfSubjectAccessReview made with the caller's own token ([`Caller::may`]),
//! cached per token for [`ACCESS_TTL`].

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::api::authentication::v1::SelfSubjectReview;
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SelfSubjectAccessReview, SelfSubjectAccessReviewSpec,
};
use k8s_openapi::api::core::v1::ServiceAccount;
use kube::api::{Api, PostParams};
use kube::config::AuthInfo;
use kube::{Client, Config};
use sha2::{Digest, Sha256};
use tokio::sync::OnceCell;

use super::profiles::Profile;
use crate::names::PROFILE_LABEL;
use crate::store::HandoffStore;

/// The request header that names a profile when the ServiceAccount has no label.
pub const PROFILE_HEADER: &str = "x-handoff-profile";

/// Per-request timeouts of clients made for callers: an unreachable
/// apiserver gives a retriable error quickly instead of a hang.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
const READ_TIMEOUT: Duration = Duration::from_secs(15);

/// How long an access review answer is reused for the same token: short,
/// so a revoked RoleBinding stops mirror reads within seconds.
pub const ACCESS_TTL: Duration = Duration::from_secs(10);

/// Access review answers of one token: `(namespace, verb)` → when asked, allowed.
#[derive(Default)]
pub struct AccessCache(Mutex<HashMap<(String, String), (Instant, bool)>>);

/// `config` with the bridge's bounded connect and read timeouts.
pub fn with_timeouts(mut config: Config) -> Config {
    config.connect_timeout = Some(CONNECT_TIMEOUT);
    config.read_timeout = Some(READ_TIMEOUT);
    config
}

/// A caller the bridge acts for: its store (its own credentials), its
/// profile and, once asked, its name.
pub struct Caller {
    store: HandoffStore,
    client: Client,
    profile: Profile,
    username: OnceCell<String>,
    access: Arc<AccessCache>,
}

impl Caller {
    /// A caller whose name is looked up on first need (stdio).
    pub fn new(client: Client, namespace: &str, profile: Profile) -> Self {
        Self {
            store: HandoffStore::new(client.clone(), namespace),
            client,
            profile,
            username: OnceCell::new(),
            access: Arc::default(),
        }
    }

    fn known(
        client: Client,
        namespace: &str,
        profile: Profile,
        username: String,
        access: Arc<AccessCache>,
    ) -> Self {
        let mut caller = Self::new(client, namespace, profile);
        let _ = caller.username.set(username);
        caller.access = access;
        caller
    }

    /// Whether RBAC lets this caller `verb` handoffs in the store's
    /// namespace: a SelfSubjectAccessReview with the caller's own
    /// credentials, cached for [`ACCESS_TTL`].
    pub async fn may(&self, verb: &str) -> Result<bool, kube::Error> {
        let namespace = self.store.namespace().to_owned();
        let key = (namespace.clone(), verb.to_owned());
        if let Ok(cache) = self.access.0.lock()
            && let Some((at, allowed)) = cache.get(&key)
            && at.elapsed() < ACCESS_TTL
        {
            return Ok(*allowed);
        }
        let review = SelfSubjectAccessReview {
            spec: SelfSubjectAccessReviewSpec {
                resource_attributes: Some(ResourceAttributes {
                    group: Some(crate::api::GROUP.into()),
                    resource: Some("handoffs".into()),
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
    pub async fn username(&self) -> Result<&str, kube::Error> {
        self.username
            .get_or_try_init(|| who_am_i(&self.client))
            .await
            .map(String::as_str)
    }

    /// The name if already known (for messages; never a request).
    pub fn known_username(&self) -> &str {
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
    Ok(review
        .status
        .and_then(|s| s.user_info)
        .and_then(|u| u.username)
        .unwrap_or_default())
}

/// Why a request could not be tied to a caller.
#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    /// The apiserver rejected the token.
    #[error("the apiserver did not accept the bearer token")]
    InvalidToken,
    /// The apiserver could not be asked.
    #[error("the Kubernetes API is unreachable: {0}")]
    Unavailable(String),
}

/// What is cached per token.
struct Resolved {
    client: Client,
    username: String,
    sa_profile: Option<Profile>,
    access: Arc<AccessCache>,
}

/// Turns bearer tokens into callers, with a bounded TTL cache.
pub struct TokenResolver {
    base: Config,
    bridge: Client,
    namespace: String,
    cache: Mutex<TtlCache<Arc<Resolved>>>,
}

impl TokenResolver {
    /// `base` is the bridge's own configuration (cluster URL and CA are
    /// kept, credentials replaced per caller); `bridge` its own client, used
    /// only to read ServiceAccount labels.
    pub fn new(
        base: Config,
        bridge: Client,
        namespace: &str,
        capacity: usize,
        ttl: Duration,
    ) -> Self {
        Self {
            base,
            bridge,
            namespace: namespace.to_owned(),
            cache: Mutex::new(TtlCache::new(capacity, ttl)),
        }
    }

    /// The caller for `token`, with `header_profile` used when its
    /// ServiceAccount has no profile label.
    pub async fn caller(
        &self,
        token: &str,
        header_profile: Option<&str>,
    ) -> Result<Caller, AuthError> {
        let resolved = self.resolve(token).await?;
        let profile = resolved
            .sa_profile
            .clone()
            .unwrap_or_else(|| Profile::new(header_profile.unwrap_or_default()));
        Ok(Caller::known(
            resolved.client.clone(),
            &self.namespace,
            profile,
            resolved.username.clone(),
            resolved.access.clone(),
        ))
    }

    async fn resolve(&self, token: &str) -> Result<Arc<Resolved>, AuthError> {
        let key: [u8; 32] = Sha256::digest(token.as_bytes()).into();
        if let Some(hit) = self.cache.lock().ok().and_then(|mut c| c.get(&key)) {
            return Ok(hit);
        }
        let client = self.client_for(token)?;
        let username = match who_am_i(&client).await {
            Ok(name) => name,
            Err(kube::Error::Api(s)) if s.code == 401 => return Err(AuthError::InvalidToken),
            Err(err) => return Err(AuthError::Unavailable(err.to_string())),
        };
        let sa_profile = self.service_account_profile(&username).await;
        let resolved = Arc::new(Resolved {
            client,
            username,
            sa_profile,
            access: Arc::default(),
        });
        if let Ok(mut cache) = self.cache.lock() {
            cache.insert(key, resolved.clone());
        }
        Ok(resolved)
    }

    fn client_for(&self, token: &str) -> Result<Client, AuthError> {
        let mut config = with_timeouts(self.base.clone());
        config.auth_info = AuthInfo {
            token: Some(token.to_owned().into()),
            ..AuthInfo::default()
        };
        Client::try_from(config).map_err(|e| AuthError::Unavailable(e.to_string()))
    }

    async fn service_account_profile(&self, username: &str) -> Option<Profile> {
        let (namespace, name) = service_account_of(username)?;
        match Api::<ServiceAccount>::namespaced(self.bridge.clone(), namespace)
            .get_opt(name)
            .await
        {
            Ok(sa) => sa?
                .metadata
                .labels?
                .get(PROFILE_LABEL)
                .map(|p| Profile::new(p)),
            Err(err) => {
                tracing::warn!(%username, error = %err, "cannot read the caller's ServiceAccount; using the profile header");
                None
            }
        }
    }
}

/// `(namespace, name)` of a ServiceAccount user name
/// (`system:serviceaccount:<namespace>:<name>`).
pub fn service_account_of(username: &str) -> Option<(&str, &str)> {
    let rest = username.strip_prefix("system:serviceaccount:")?;
    let (namespace, name) = rest.split_once(':')?;
    (!namespace.is_empty() && !name.is_empty() && !name.contains(':')).then_some((namespace, name))
}

/// The bearer token of an `Authorization` header value.
pub fn bearer_token(header: &str) -> Option<&str> {
    let (scheme, token) = header.trim().split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

/// A map with a size bound and an age bound: entries older than `ttl` are
/// misses, and a full map first drops expired entries, then the oldest.
struct TtlCache<V> {
    entries: HashMap<[u8; 32], (Instant, V)>,
    capacity: usize,
    ttl: Duration,
}

impl<V: Clone> TtlCache<V> {
    fn new(capacity: usize, ttl: Duration) -> Self {
        Self {
            entries: HashMap::new(),
            capacity: capacity.max(1),
            ttl,
        }
    }

    fn get(&mut self, key: &[u8; 32]) -> Option<V> {
        match self.entries.get(key) {
            Some((at, v)) if at.elapsed() < self.ttl => Some(v.clone()),
            Some(_) => {
                self.entries.remove(key);
                None
            }
            None => None,
        }
    }

    fn insert(&mut self, key: [u8; 32], value: V) {
        if self.entries.len() >= self.capacity && !self.entries.contains_key(&key) {
            let ttl = self.ttl;
            self.entries.retain(|_, (at, _)| at.elapsed() < ttl);
            if self.entries.len() >= self.capacity
                && let Some(oldest) = self
                    .entries
                    .iter()
                    .min_by_key(|(_, (at, _))| *at)
                    .map(|(k, _)| *k)
            {
                self.entries.remove(&oldest);
            }
        }
        self.entries.insert(key, (Instant::now(), value));
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
}
