//! The reads several pages share, all with the person's client: a bounded
//! paged list, the project's TTL, and one object by name.

use std::fmt::Debug;
use std::time::Duration;

use kube::Resource;
use kube::api::{Api, ListParams};
use serde::de::DeserializeOwned;

use super::errors::{Doing, ReadError};
use handoff_bridge::auth::Caller;
use handoff_core::api::BrainstormSchedule;
use handoff_core::api::validation::{self, FieldError};
use handoff_core::time::parse_duration;

/// Objects per list request.
const PAGE: u32 = 500;

/// `K` in the caller's namespace, as the caller.
pub(super) fn api<K>(caller: &Caller) -> Api<K>
where
    K: Resource<Scope = k8s_openapi::NamespaceResourceScope>,
    K::DynamicType: Default,
{
    Api::namespaced(caller.client().clone(), caller.store().namespace())
}

/// Every object of `api.list(params)`, page by page, up to `cap`: the
/// objects and whether the cap cut the list.
pub(super) async fn all<K>(
    api: &Api<K>,
    params: &ListParams,
    cap: usize,
) -> Result<(Vec<K>, bool), kube::Error>
where
    K: Clone + DeserializeOwned + Debug,
{
    let mut params = params.clone().limit(PAGE);
    let mut items = Vec::new();
    loop {
        let page = api.list(&params).await?;
        items.extend(page.items);
        if items.len() > cap {
            items.truncate(cap);
            return Ok((items, true));
        }
        match page.metadata.continue_.filter(|c| !c.is_empty()) {
            Some(token) => params = params.continue_token(&token),
            None => return Ok((items, false)),
        }
    }
}

/// One object by name, or why not (`what` names it for people).
pub(super) async fn one<K>(
    api: &Api<K>,
    name: &str,
    what: &str,
    doing: Doing<'_>,
) -> Result<K, ReadError>
where
    K: Clone + DeserializeOwned + Debug,
{
    match api.get_opt(name).await {
        Ok(Some(found)) => Ok(found),
        Ok(None) => Err(ReadError::NotFound(format!(
            "There is no {what} in namespace {} (it may have been deleted).",
            doing.namespace
        ))),
        Err(err) => Err(doing.kube(&err, what)),
    }
}

/// The handoff TTL of `project`: its BrainstormSchedule's `handoffTTL`,
/// when the person may read it; none otherwise (the controller may have a
/// default the console cannot see, so nothing is shown stale by it).
pub(super) async fn project_ttl(caller: &Caller, project: &str) -> Option<Duration> {
    let params = ListParams::default().fields(&format!("spec.project={project}"));
    match api::<BrainstormSchedule>(caller).list(&params).await {
        Ok(list) => list
            .items
            .iter()
            .find_map(|s| parse_duration(s.spec.handoff_ttl.as_deref()?).ok()),
        Err(err) => {
            tracing::debug!(error = %err, project, "the person cannot read the project's schedule; no TTL");
            None
        }
    }
}

/// Checks an object name from a URL (`field`): a Kubernetes object name.
pub(super) fn object_name(field: &'static str, value: &str) -> Result<(), ReadError> {
    validation::object_name(field, value).map_err(|err| {
        ReadError::from(FieldError {
            rule: "an object's name as the console's links give it: at most 253 characters, \
                   lower-case letters, digits, '-' and '.', starting and ending with a letter or digit"
                .into(),
            ..err
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn object_names_are_checked_with_a_rule_for_people() {
        // (name, the problem's fragment when refused)
        let cases = [
            ("h-0123abcd", None),
            ("a.b-c", None),
            ("", Some("empty")),
            ("Upper", Some("")),
            ("-edge", Some("")),
            ("a/b", Some("")),
        ];
        for (name, refused) in cases {
            match (object_name("name", name), refused) {
                (Ok(()), None) => {}
                (
                    Err(ReadError::Invalid {
                        field,
                        rule,
                        problem,
                    }),
                    Some(fragment),
                ) => {
                    assert_eq!(field, "name", "{name:?}");
                    assert!(rule.contains("the console's links"), "{rule}");
                    assert!(problem.contains(fragment), "{name:?}: {problem}");
                }
                (got, want) => panic!("{name:?}: got {got:?}, want refusal {want:?}"),
            }
        }
    }
}
