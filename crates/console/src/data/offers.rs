//! A namespace's offers, grouped by destination, pending first; and one
//! offer as a row (the reject confirmation shows it). Read as the person;
//! whether they may reject one is RBAC's answer (an access review for the
//! offers' status, as `reject_offer` asks it, or being the destination
//! agent) and the offer's phase.

use std::collections::BTreeMap;

use kube::ResourceExt;
use kube::api::ListParams;

use super::errors::{Doing, ReadError};
use super::reads::{all, api, object_name, one};
use crate::model::{OfferGroup, OfferRow, OffersPage};
use handoff_bridge::auth::Caller;
use handoff_core::api::{HandoffOffer, OfferPhase};

/// Most offers one page reads.
pub(super) const MAX_OFFERS: usize = 10_000;

/// Whether an offer in `phase` can still be rejected.
pub(super) fn rejectable(phase: OfferPhase) -> bool {
    matches!(phase, OfferPhase::Offered | OfferPhase::Accepted)
}

/// The phase as the CRD spells it.
fn phase_name(phase: OfferPhase) -> String {
    format!("{phase:?}")
}

/// The row of `o`; `may_reject` is the person's right, before the phase.
pub(super) fn offer_row_of(o: &HandoffOffer, may_reject: bool) -> OfferRow {
    OfferRow {
        name: o.name_any(),
        project: o.spec.project.clone(),
        from_key: o.spec.from_key.clone(),
        phase: phase_name(o.phase()),
        superseded_by: o.status.as_ref().and_then(|s| s.superseded_by.clone()),
        created: o.metadata.creation_timestamp.as_ref().map(|t| t.0),
        may_reject: may_reject && rejectable(o.phase()),
    }
}

/// Where a phase sorts in a group: pending first, then taken up, then the rest.
fn rank(phase: &str) -> u8 {
    match phase {
        "Offered" => 0,
        "Accepted" => 1,
        _ => 2,
    }
}

/// Offers grouped by destination (by name), pending first, then newest.
pub(super) fn groups(offers: Vec<(String, OfferRow)>) -> Vec<OfferGroup> {
    let mut by_to: BTreeMap<String, Vec<OfferRow>> = BTreeMap::new();
    for (to, row) in offers {
        by_to.entry(to).or_default().push(row);
    }
    by_to
        .into_iter()
        .map(|(to, mut offers)| {
            offers.sort_by(|a, b| {
                rank(&a.phase)
                    .cmp(&rank(&b.phase))
                    .then_with(|| b.created.cmp(&a.created))
                    .then_with(|| a.name.cmp(&b.name))
            });
            OfferGroup { to, offers }
        })
        .collect()
}

/// Whether the person may reject offers to `to`: they may patch the
/// offers' status (a groomer), or are that agent here.
async fn may_reject(caller: &Caller, grooms: bool, to: &str) -> bool {
    grooms || matches!(caller.agent().await, Ok(Some(agent)) if agent == to)
}

/// Whether the person may patch offers' status here (RBAC).
async fn grooms(caller: &Caller) -> bool {
    caller
        .may_on("handoffoffers/status", "patch")
        .await
        .unwrap_or(false)
}

/// The offers of the caller's namespace.
pub async fn offers(caller: &Caller) -> Result<OffersPage, ReadError> {
    let namespace = caller.store().namespace();
    let doing = Doing {
        action: "list offers",
        namespace,
    };
    let (offers, params) = (api::<HandoffOffer>(caller), ListParams::default());
    let (listed, grooms) = futures::join!(all(&offers, &params, MAX_OFFERS), grooms(caller),);
    let (listed, cut) = listed.map_err(|e| doing.kube(&e, "offers"))?;
    if cut {
        tracing::warn!(
            namespace,
            "more than {MAX_OFFERS} offers; the page shows the first"
        );
    }
    let mut rows = Vec::with_capacity(listed.len());
    for o in &listed {
        let allowed = may_reject(caller, grooms, &o.spec.to).await;
        rows.push((o.spec.to.clone(), offer_row_of(o, allowed)));
    }
    Ok(OffersPage {
        namespace: namespace.to_owned(),
        groups: groups(rows),
    })
}

/// The offer named `name` (read as the person).
pub(super) async fn stored_offer(caller: &Caller, name: &str) -> Result<HandoffOffer, ReadError> {
    object_name("name", name)?;
    let doing = Doing {
        action: "read offers",
        namespace: caller.store().namespace(),
    };
    one(
        &api::<HandoffOffer>(caller),
        name,
        &format!("offer named {name}"),
        doing,
    )
    .await
}

/// One offer as a row.
pub async fn offer_row(caller: &Caller, name: &str) -> Result<OfferRow, ReadError> {
    let o = stored_offer(caller, name).await?;
    let allowed = may_reject(caller, grooms(caller).await, &o.spec.to).await;
    Ok(offer_row_of(&o, allowed))
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    use super::*;
    use crate::data::rows::fixture::at;
    use handoff_core::api::{HandoffOfferSpec, HandoffOfferStatus};

    fn offer(name: &str, to: &str, phase: Option<OfferPhase>, created: i64) -> HandoffOffer {
        let mut o = HandoffOffer::new(
            name,
            HandoffOfferSpec {
                project: "shop".into(),
                to: to.into(),
                from_key: "acme/api#1".into(),
                session: None,
                artifact: None,
                body: None,
            },
        );
        o.metadata.creation_timestamp = Some(Time(at(created)));
        o.status = phase.map(|phase| HandoffOfferStatus {
            phase: Some(phase),
            ..HandoffOfferStatus::default()
        });
        o
    }

    #[test]
    fn only_pending_or_taken_up_offers_may_be_rejected_and_only_with_the_right() {
        // (phase, the person's right, may reject)
        let cases = [
            (None, true, true),
            (Some(OfferPhase::Offered), false, false),
            (Some(OfferPhase::Accepted), true, true),
            (Some(OfferPhase::Completed), true, false),
            (Some(OfferPhase::Rejected), true, false),
            (Some(OfferPhase::Superseded), true, false),
        ];
        for (phase, right, want) in cases {
            let row = offer_row_of(&offer("o", "bob", phase, 1), right);
            assert_eq!(row.may_reject, want, "{phase:?} {right}");
            assert_eq!(
                row.phase,
                format!("{:?}", phase.unwrap_or(OfferPhase::Offered))
            );
        }
    }

    #[test]
    fn offers_are_grouped_by_destination_pending_first_then_newest() {
        let rows = [
            offer("b-done", "bob", Some(OfferPhase::Completed), 9),
            offer("b-old", "bob", None, 1),
            offer("a-1", "alice", Some(OfferPhase::Rejected), 5),
            offer("b-new", "bob", Some(OfferPhase::Offered), 3),
            offer("b-taken", "bob", Some(OfferPhase::Accepted), 8),
        ]
        .iter()
        .map(|o| (o.spec.to.clone(), offer_row_of(o, true)))
        .collect();
        let got: Vec<(String, Vec<String>)> = groups(rows)
            .into_iter()
            .map(|g| (g.to, g.offers.into_iter().map(|o| o.name).collect()))
            .collect();
        assert_eq!(
            got,
            [
                ("alice".to_owned(), vec!["a-1".to_owned()]),
                (
                    "bob".to_owned(),
                    ["b-new", "b-old", "b-taken", "b-done"]
                        .map(String::from)
                        .to_vec()
                ),
            ]
        );
    }
}
