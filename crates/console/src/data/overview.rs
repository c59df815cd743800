//! The front page: the namespaces where the person may list handoffs, with
//! their projects and counts. Candidates are the namespaces the console was
//! given, and every namespace when the person may list namespaces; each is
//! kept only when a SelfSubjectAccessReview (with the person's own
//! credentials) says they may `list handoffs` there. Counting reads
//! metadata only, page by page, and stops at [`MAX_COUNTED`] per namespace
//! (the count then says "at least").

use std::collections::{BTreeMap, BTreeSet};

use futures::StreamExt;
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SelfSubjectAccessReview, SelfSubjectAccessReviewSpec,
};
use k8s_openapi::api::core::v1::Namespace;
use kube::Client;
use kube::api::{Api, ListParams, PostParams};

use super::errors::{Doing, ReadError};
use super::offers::MAX_OFFERS;
use super::reads::all;
use crate::model::{Count, NamespaceSummary, Overview, ProjectCount};
use handoff_core::api::{Handoff, HandoffOffer, OfferPhase};
use handoff_core::names::PROJECT_LABEL;

/// Most handoffs counted per namespace.
pub const MAX_COUNTED: usize = 10_000;

/// Namespaces reviewed and counted at once.
const CONCURRENT_NAMESPACES: usize = 8;

/// Objects per metadata page.
const PAGE: u32 = 500;

/// Whether the person may `verb` `resource` (of `group`) in `namespace`
/// (`None`: cluster-wide), asked with their own credentials.
async fn may(
    person: &Client,
    group: &str,
    resource: &str,
    verb: &str,
    namespace: Option<&str>,
) -> Result<bool, kube::Error> {
    let review = SelfSubjectAccessReview {
        spec: SelfSubjectAccessReviewSpec {
            resource_attributes: Some(ResourceAttributes {
                group: Some(group.into()),
                resource: Some(resource.into()),
                verb: Some(verb.into()),
                namespace: namespace.map(Into::into),
                ..ResourceAttributes::default()
            }),
            ..SelfSubjectAccessReviewSpec::default()
        },
        ..SelfSubjectAccessReview::default()
    };
    let answer = Api::<SelfSubjectAccessReview>::all(person.clone())
        .create(&PostParams::default(), &review)
        .await?;
    Ok(answer.status.is_some_and(|s| s.allowed))
}

/// The given namespaces, and every namespace when the person may list them.
async fn candidates(person: &Client, given: &[String]) -> Result<BTreeSet<String>, kube::Error> {
    let mut names: BTreeSet<String> = given.iter().filter(|n| !n.is_empty()).cloned().collect();
    if may(person, "", "namespaces", "list", None).await? {
        let api: Api<Namespace> = Api::all(person.clone());
        let mut params = ListParams::default().limit(PAGE);
        loop {
            let page = api.list_metadata(&params).await?;
            names.extend(page.items.into_iter().filter_map(|n| n.metadata.name));
            match page.metadata.continue_.filter(|c| !c.is_empty()) {
                Some(token) => params = params.continue_token(&token),
                None => break,
            }
        }
    }
    Ok(names)
}

/// The `project` label of every handoff of `namespace`, up to
/// [`MAX_COUNTED`], and whether counting stopped there.
async fn handoff_projects(
    person: &Client,
    namespace: &str,
) -> Result<(Vec<Option<String>>, bool), kube::Error> {
    let api: Api<Handoff> = Api::namespaced(person.clone(), namespace);
    let mut params = ListParams::default().limit(PAGE);
    let mut projects = Vec::new();
    loop {
        let page = api.list_metadata(&params).await?;
        projects.extend(
            page.items
                .into_iter()
                .map(|h| h.metadata.labels.and_then(|mut l| l.remove(PROJECT_LABEL))),
        );
        if projects.len() >= MAX_COUNTED {
            let more = projects.len() > MAX_COUNTED
                || page.metadata.continue_.is_some_and(|c| !c.is_empty());
            projects.truncate(MAX_COUNTED);
            return Ok((projects, more));
        }
        match page.metadata.continue_.filter(|c| !c.is_empty()) {
            Some(token) => params = params.continue_token(&token),
            None => return Ok((projects, false)),
        }
    }
}

/// The project of every offer of `namespace` and whether it is pending;
/// none when the person may not list offers.
async fn offer_projects(person: &Client, namespace: &str) -> (Vec<(String, bool)>, bool) {
    let api: Api<HandoffOffer> = Api::namespaced(person.clone(), namespace);
    match all(&api, &ListParams::default(), MAX_OFFERS).await {
        Ok((offers, cut)) => (
            offers
                .iter()
                .map(|o| (o.spec.project.clone(), o.phase() == OfferPhase::Offered))
                .collect(),
            cut,
        ),
        Err(err) => {
            tracing::debug!(error = %err, namespace, "the person cannot list offers; none counted");
            (Vec::new(), false)
        }
    }
}

fn count(n: u64, cut: bool) -> Count {
    if cut {
        Count::AtLeast(n)
    } else {
        Count::Exact(n)
    }
}

/// A namespace's summary from its handoffs' projects and its offers.
pub(super) fn summary(
    namespace: &str,
    handoffs: &[Option<String>],
    handoffs_cut: bool,
    offers: &[(String, bool)],
    offers_cut: bool,
) -> NamespaceSummary {
    let mut per_project: BTreeMap<&str, (u64, u64)> = BTreeMap::new();
    for project in handoffs.iter().flatten() {
        per_project.entry(project).or_default().0 += 1;
    }
    for (project, pending) in offers {
        per_project.entry(project).or_default().1 += u64::from(*pending);
    }
    NamespaceSummary {
        namespace: namespace.to_owned(),
        projects: per_project
            .into_iter()
            .map(|(project, (handoffs, pending))| ProjectCount {
                project: project.to_owned(),
                handoffs: count(handoffs, handoffs_cut),
                pending_offers: count(pending, offers_cut),
            })
            .collect(),
        handoffs: count(handoffs.len() as u64, handoffs_cut),
    }
}

/// One candidate: its summary when the person may list handoffs there.
async fn namespace(
    person: &Client,
    namespace: String,
) -> Result<Option<NamespaceSummary>, ReadError> {
    let doing = Doing {
        action: "list handoffs",
        namespace: &namespace,
    };
    let allowed = may(
        person,
        handoff_core::api::GROUP,
        "handoffs",
        "list",
        Some(&namespace),
    )
    .await
    .map_err(|e| doing.kube(&e, "namespace"))?;
    if !allowed {
        return Ok(None);
    }
    let (projects, (offers, offers_cut)) = futures::join!(
        handoff_projects(person, &namespace),
        offer_projects(person, &namespace),
    );
    let (projects, cut) = projects.map_err(|e| doing.kube(&e, "namespace"))?;
    Ok(Some(summary(
        &namespace, &projects, cut, &offers, offers_cut,
    )))
}

/// The namespaces the person may read, with their projects and counts.
pub async fn overview(person: &Client, candidates_given: &[String]) -> Result<Overview, ReadError> {
    let names = candidates(person, candidates_given).await.map_err(|e| {
        Doing {
            action: "list namespaces",
            namespace: "the cluster",
        }
        .kube(&e, "namespace")
    })?;
    let results: Vec<Result<Option<NamespaceSummary>, ReadError>> = futures::stream::iter(names)
        .map(|name| namespace(person, name))
        .buffered(CONCURRENT_NAMESPACES)
        .collect()
        .await;
    let mut namespaces = Vec::new();
    for result in results {
        namespaces.extend(result?);
    }
    Ok(Overview { namespaces })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn projects_are_counted_by_label_with_their_pending_offers() {
        let shop = Some("shop".to_owned());
        let bank = Some("bank".to_owned());
        let handoffs = [shop.clone(), bank, shop, None];
        let offers = [
            ("shop".to_owned(), true),
            ("shop".to_owned(), false),
            ("docs".to_owned(), true),
        ];
        // (handoffs cut, offers cut, [(project, handoffs, pending)], namespace total)
        let cases = [
            (
                false,
                false,
                vec![
                    ("bank", Count::Exact(1), Count::Exact(0)),
                    ("docs", Count::Exact(0), Count::Exact(1)),
                    ("shop", Count::Exact(2), Count::Exact(1)),
                ],
                Count::Exact(4),
            ),
            (
                true,
                false,
                vec![
                    ("bank", Count::AtLeast(1), Count::Exact(0)),
                    ("docs", Count::AtLeast(0), Count::Exact(1)),
                    ("shop", Count::AtLeast(2), Count::Exact(1)),
                ],
                Count::AtLeast(4),
            ),
        ];
        for (cut, offers_cut, projects, total) in cases {
            let got = summary("team", &handoffs, cut, &offers, offers_cut);
            assert_eq!(got.namespace, "team");
            assert_eq!(got.handoffs, total);
            let rows: Vec<(&str, Count, Count)> = got
                .projects
                .iter()
                .map(|p| (p.project.as_str(), p.handoffs, p.pending_offers))
                .collect();
            assert_eq!(rows, projects, "cut {cut}");
        }
    }
}
