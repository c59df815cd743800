//! How every module talks to the apiserver the same way: one scope ("this
//! namespace, or all namespaces") and one paged list, so a list never
//! holds more than one page of a large collection in memory at once.

use std::fmt::Debug;

use k8s_openapi::NamespaceResourceScope;
use kube::api::{Api, ListParams};
use kube::{Client, Resource};
use serde::de::DeserializeOwned;

/// Objects fetched per list request.
pub const PAGE_SIZE: u32 = 500;

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
        }
    }

    /// The next page, or `None` after the last.
    pub async fn next(&mut self) -> Result<Option<Vec<K>>, kube::Error> {
        let Some(params) = self.params.take() else {
            return Ok(None);
        };
        let page = self.api.list(&params).await?;
        self.params = page
            .metadata
            .continue_
            .filter(|token| !token.is_empty())
            .map(|token| params.continue_token(&token));
        Ok(Some(page.items))
    }
}
