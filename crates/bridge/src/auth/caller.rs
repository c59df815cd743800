//! A caller the bridge acts for: its store and client (its own
//! credentials), its profile, its name and agent (asked once), and its
//! access reviews (cached per token for [`ACCESS_TTL`]).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::api::authentication::v1::SelfSubjectReview;
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SelfSubjectAccessReview, SelfSubjectAccessReviewSpec,
};
use k8s_openapi::api::core::v1::ServiceAccount;
use kube::Client;
use kube::api::{Api, PostParams};
use tokio::sync::OnceCell;

use super::namespace::service_account_of;
use crate::profiles::Profile;
use handoff_core::names::{AGENT_LABEL, PROFILE_LABEL};
use handoff_kube::store::HandoffStore;

/// How long an access review answer is reused for the same token: short,
/// so a revoked RoleBinding stops mirror reads within seconds.
pub const ACCESS_TTL: Duration = Duration::from_secs(10);

/// What an access review asked: `(namespace, resource, verb)`.
type AccessQuestion = (String, String, String);

/// Access review answers of one token: question → when asked, allowed.
#[derive(Default)]
pub(crate) struct AccessCache(Mutex<HashMap<AccessQuestion, (Instant, bool)>>);

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

    /// A caller whose name, agent and access answers are already known
    /// (a resolved token's).
    pub(super) fn known(
        client: Client,
        namespace: &str,
        profile: Profile,
        username: &str,
        agent: Option<&str>,
        access: Arc<AccessCache>,
    ) -> Self {
        let mut caller = Self::new(client, namespace, profile);
        let _ = caller.username.set(username.to_owned());
        let _ = caller.agent.set(agent.map(str::to_owned));
        caller.access = access;
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
    pub async fn may_on(&self, resource: &str, verb: &str) -> Result<bool, kube::Error> {
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
    pub async fn username(&self) -> Result<&str, kube::Error> {
        self.username
            .get_or_try_init(|| who_am_i(&self.client))
            .await
            .map(String::as_str)
    }

    /// The agent this caller is in the namespace of its call: the label
    /// `handoff.dev/agent` of its ServiceAccount, when that account lives
    /// in this namespace. An account of another namespace is no agent here,
    /// whatever its label says: a team's admin labels its own accounts, and
    /// that must not make them another team's agents. `None` too for other
    /// users, unlabelled accounts and accounts the bridge may not read.
    pub async fn agent(&self) -> Result<Option<&str>, kube::Error> {
        let label = self.agent_label().await?;
        let home = service_account_of(self.username().await?).map(|(namespace, _)| namespace);
        Ok(label.filter(|_| home == Some(self.store.namespace())))
    }

    /// The label `handoff.dev/agent` of the caller's ServiceAccount, in
    /// whichever namespace it lives (for messages; [`Caller::agent`] is the
    /// identity). Over HTTP read with the bridge's identity when the token
    /// was resolved; over stdio with the caller's own, on first need.
    pub(crate) async fn agent_label(&self) -> Result<Option<&str>, kube::Error> {
        self.agent
            .get_or_try_init(|| async {
                let username = self.username().await?.to_owned();
                Ok::<_, kube::Error>(account_labels(&self.client, &username).await.agent)
            })
            .await
            .map(Option::as_deref)
    }

    /// The namespace of the caller's ServiceAccount, if it is one and its
    /// name is known.
    pub(crate) fn account_namespace(&self) -> Option<&str> {
        service_account_of(self.known_username()).map(|(namespace, _)| namespace)
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

pub(super) fn username_of(review: SelfSubjectReview) -> String {
    review
        .status
        .and_then(|s| s.user_info)
        .and_then(|u| u.username)
        .unwrap_or_default()
}

/// What the labels of a caller's ServiceAccount say.
#[derive(Default)]
pub(super) struct AccountLabels {
    pub(super) profile: Option<Profile>,
    pub(super) agent: Option<String>,
}

/// The labels `handoff.dev/profile` and `handoff.dev/agent` of the
/// ServiceAccount behind `username`, read with `reader` (nothing for other
/// users, or when the account cannot be read).
pub(super) async fn account_labels(reader: &Client, username: &str) -> AccountLabels {
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
