//! How every module talks to the apiserver the same way: one scope ("this
//! namespace, or all namespaces"), the namespaces a controller manages
//! ([`NamespaceScope`]), and one paged list, so a list never holds more
//! than one page of a large collection in memory at once.

use std::fmt::Debug;

use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, ListParams};
use kube::{Client, Resource};
use serde::de::DeserializeOwned;

/// Objects fetched per list request.
pub(crate) const PAGE_SIZE: u32 = 500;

/// `K` in `namespace`, or in every namespace when `None`.
pub fn scoped<K>(client: Client, namespace: Option<&str>) -> Api<K>
where
    K: Resource<Scope = NamespaceResourceScope>,
    K::DynamicType: Default,
{
    match namespace {
        Some(ns) => Api::namespaced(client, ns),
        None => Api::all(client),
    }
}

/// The pages of one list, requested one at a time ([`PAGE_SIZE`] objects
/// each unless the parameters set a limit).
pub struct Pages<'a, K> {
    api: &'a Api<K>,
    params: Option<ListParams>,
    /// The first page's resourceVersion: later pages are of the same
    /// snapshot (the continue token pins it).
    version: Option<String>,
}

impl<'a, K> Pages<'a, K>
where
    K: Clone + DeserializeOwned + Debug,
{
    /// The pages of `api.list(params)`.
    pub fn new(api: &'a Api<K>, params: &ListParams) -> Self {
        let mut params = params.clone();
        params.limit = params.limit.or(Some(PAGE_SIZE));
        Self {
            api,
            params: Some(params),
            version: None,
        }
    }

    /// The resourceVersion of the listing, once its first page is read: a
    /// watch from it misses no change made after the listing.
    pub fn version(&self) -> Option<&str> {
        self.version.as_deref()
    }

    /// The next page, or `None` after the last.
    pub async fn next(&mut self) -> Result<Option<Vec<K>>, kube::Error> {
        let Some(params) = self.params.take() else {
            return Ok(None);
        };
        let page = self.api.list(&params).await?;
        if self.version.is_none() {
            self.version = page.metadata.resource_version.filter(|v| !v.is_empty());
        }
        self.params = page
            .metadata
            .continue_
            .filter(|token| !token.is_empty())
            .map(|token| params.continue_token(&token));
        Ok(Some(page.items))
    }
}

/// The namespaces a controller manages: all, or those whose labels match a
/// selector (`--namespace-selector`). Tenants that run their own controller
/// label their namespaces (say `handoff.dev/controller=team-a`) and the
/// shared controller skips them with `!handoff.dev/controller`; test suites
/// that drive reconciles themselves use the same label, so a controller
/// already running in the cluster leaves their namespaces alone.
///
/// The selected namespaces are watched (metadata only: names and labels),
/// so a namespace labelled later is managed from then on; its objects are
/// picked up by their next event or by the loop's periodic recheck.
#[derive(Clone)]
pub enum NamespaceScope {
    /// Every namespace.
    All,
    /// Namespaces whose labels match the selector, as last seen.
    Selected(kube::runtime::reflector::Store<kube::core::PartialObjectMeta<Namespace>>),
}

impl NamespaceScope {
    /// Whether objects of `namespace` are this controller's.
    pub fn includes(&self, namespace: &str) -> bool {
        match self {
            Self::All => true,
            Self::Selected(store) => store
                .get(&kube::runtime::reflector::ObjectRef::new(namespace))
                .is_some(),
        }
    }

    /// All namespaces, or the ones labelled to match `selector` (an empty
    /// selector is all): the watch runs until `stop` and the scope is
    /// returned once its first list is in.
    pub async fn watch(
        client: Client,
        selector: &str,
        stop: tokio_util::sync::CancellationToken,
    ) -> Result<Self, kube::Error> {
        use futures::StreamExt;
        use kube::core::PartialObjectMeta;
        use kube::runtime::{WatchStreamExt, reflector, watcher};
        if selector.trim().is_empty() {
            return Ok(Self::All);
        }
        let api: Api<PartialObjectMeta<Namespace>> = Api::all(client);
        // A wrong selector is refused by the apiserver: say so at start.
        api.list(&ListParams::default().labels(selector).limit(1))
            .await?;
        let (store, writer) = reflector::store();
        let stream = watcher(api, watcher::Config::default().labels(selector))
            .default_backoff()
            .reflect(writer)
            .for_each(|_| async {});
        tokio::spawn(async move {
            tokio::select! {
                () = stream => {}
                () = stop.cancelled() => {}
            }
        });
        store.wait_until_ready().await.map_err(|_| {
            kube::Error::Service("the namespace watch stopped before its first list".into())
        })?;
        Ok(Self::Selected(store))
    }
}
