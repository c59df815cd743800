//! Offer operations against the apiserver, with the caller's credentials:
//! offer (the decision under optimistic concurrency), list, reject, and the
//! supersession both the bridge and the controller use.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::batch::v1::Job;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::{Client, Resource, ResourceExt};

use super::decision::{Decision, Outcome, active_selector, decide, offer_name, seq_of, slot};
use crate::api::{HandoffOffer, HandoffOfferSpec, HandoffOfferStatus, OfferPhase, SupersedeReason};
use crate::loops::{Categorized, Category};
use crate::names::{SLOT_LABEL, TO_LABEL};
use crate::schedule::jobs::job_result;

/// How many times a racing offer re-reads and decides again.
const MAX_ATTEMPTS: usize = 50;

/// Offers of one namespace, acting as one identity.
#[derive(Clone)]
pub struct OfferStore {
    offers: Api<HandoffOffer>,
    jobs: Api<Job>,
    recorder: Recorder,
    active_selector: String,
}

/// Why an offer operation failed.
#[derive(Debug, thiserror::Error)]
pub enum OfferError {
    /// An apiserver call failed.
    #[error("{0}")]
    Kube(#[from] kube::Error),
    /// Too many concurrent offers to one destination kept winning the race.
    #[error("too many concurrent offers to {to} in project {project}; retriable: try again")]
    Busy {
        /// Destination.
        to: String,
        /// Project.
        project: String,
    },
    /// No such offer.
    #[error("no offer named {0}")]
    NotFound(String),
}

impl Categorized for OfferError {
    fn category(&self) -> Category {
        match self {
            Self::Kube(err) => Category::of_kube(err),
            Self::Busy { .. } => Category::Transient,
            Self::NotFound(_) => Category::Invalid,
        }
    }
}

impl OfferStore {
    /// A store in `namespace`: offers with `client`, the agent-activity check
    /// (a Job list) with `reader`, Events reported as `reporter`.
    pub fn new(
        client: Client,
        reader: Client,
        namespace: &str,
        active_selector: &str,
        reporter: &str,
    ) -> Self {
        let reporter = Reporter {
            controller: reporter.into(),
            instance: None,
        };
        Self {
            offers: Api::namespaced(client.clone(), namespace),
            jobs: Api::namespaced(reader, namespace),
            recorder: Recorder::new(client, reporter),
            active_selector: active_selector.into(),
        }
    }

    /// Offers `spec` (see `decision.rs`): at most one `Offered` per
    /// destination remains, whatever runs concurrently.
    pub async fn offer(
        &self,
        spec: &HandoffOfferSpec,
        if_absent: bool,
    ) -> Result<(Outcome, Option<HandoffOffer>), OfferError> {
        let slot = slot(&spec.project, &spec.to);
        if self.agent_active(&spec.project, &spec.to).await? {
            return Ok((Outcome::AgentAlreadyActive, None));
        }
        for attempt in 0..MAX_ATTEMPTS {
            let all = self.slot_offers(&slot).await?;
            let next_seq = all
                .iter()
                .filter_map(|o| seq_of(&o.name_any(), &slot))
                .max()
                .unwrap_or(0)
                + 1;
            let pending: Vec<&HandoffOffer> = all
                .iter()
                .filter(|o| o.phase() == OfferPhase::Offered)
                .collect();
            let current = pending
                .iter()
                .max_by_key(|o| seq_of(&o.name_any(), &slot))
                .copied();
            let decision = decide(current.map(|o| &o.spec), spec, if_absent);
            if decision == Decision::ReturnExisting {
                return Ok((Outcome::AlreadyOffered, current.cloned()));
            }
            let name = offer_name(&slot, next_seq);
            let created = match self
                .offers
                .create(&PostParams::default(), &new_offer(&name, &slot, spec))
                .await
            {
                Ok(created) => created,
                Err(kube::Error::Api(status)) if status.code == 409 => {
                    // Another offer took this number: read again and decide again.
                    tokio::time::sleep(Duration::from_millis(5 * (attempt as u64 % 8 + 1))).await;
                    continue;
                }
                Err(err) => return Err(err.into()),
            };
            let created = self.set_offered(created).await?;
            for old in pending {
                self.supersede(old, &name, SupersedeReason::NewOffer)
                    .await?;
            }
            let outcome = if decision == Decision::Create {
                Outcome::Created
            } else {
                Outcome::SupersededPrevious
            };
            return Ok((outcome, Some(created)));
        }
        Err(OfferError::Busy {
            to: spec.to.clone(),
            project: spec.project.clone(),
        })
    }

    /// Offers of a project (and destination, and phase), oldest first.
    pub async fn list(
        &self,
        project: &str,
        to: Option<&str>,
        phase: Option<OfferPhase>,
    ) -> Result<Vec<HandoffOffer>, OfferError> {
        let mut fields = format!("spec.project={project}");
        if let Some(to) = to {
            fields.push_str(&format!(",spec.to={to}"));
        }
        let mut items = self
            .offers
            .list(&ListParams::default().fields(&fields))
            .await?
            .items;
        items.retain(|o| phase.is_none_or(|p| o.phase() == p));
        items.sort_by_key(|o| o.metadata.creation_timestamp.as_ref().map(|t| t.0));
        Ok(items)
    }

    /// Marks an offer `Rejected` (an explicit action).
    pub async fn reject(&self, name: &str) -> Result<HandoffOffer, OfferError> {
        let offer = self
            .offers
            .get_opt(name)
            .await?
            .ok_or_else(|| OfferError::NotFound(name.into()))?;
        let status = HandoffOfferStatus {
            phase: Some(OfferPhase::Rejected),
            ..offer.status.clone().unwrap_or_default()
        };
        Ok(self.patch_status(&offer, &status).await?)
    }

    /// Supersedes `old` (if still pending) by `by`, with an Event on `old`
    /// naming its substitute and the reason.
    pub async fn supersede(
        &self,
        old: &HandoffOffer,
        by: &str,
        reason: SupersedeReason,
    ) -> Result<(), OfferError> {
        let current = match self.offers.get_opt(&old.name_any()).await? {
            Some(o) if o.phase() == OfferPhase::Offered => o,
            _ => return Ok(()),
        };
        let status = HandoffOfferStatus {
            phase: Some(OfferPhase::Superseded),
            superseded_by: Some(by.into()),
            reason: Some(reason),
            ..current.status.clone().unwrap_or_default()
        };
        match self.patch_status(&current, &status).await {
            Ok(_) => {}
            // Changed meanwhile (accepted, rejected, superseded by someone else): leave it.
            Err(kube::Error::Api(s)) if s.code == 409 => return Ok(()),
            Err(err) => return Err(err.into()),
        }
        let note = format!("superseded by {by} ({reason:?})");
        let event = Event {
            type_: EventType::Normal,
            reason: "Superseded".into(),
            note: Some(note),
            action: "Supersede".into(),
            secondary: None,
        };
        if let Err(err) = self
            .recorder
            .publish(&event, &current.object_ref(&()))
            .await
        {
            tracing::warn!(offer = %current.name_any(), error = %err, "cannot record the Superseded Event");
        }
        Ok(())
    }

    /// Sets a phase on an offer (used by the controller).
    pub async fn set_phase(
        &self,
        offer: &HandoffOffer,
        phase: OfferPhase,
        job: Option<&str>,
    ) -> Result<(), OfferError> {
        let status = HandoffOfferStatus {
            phase: Some(phase),
            job: job
                .map(Into::into)
                .or_else(|| offer.status.as_ref().and_then(|s| s.job.clone())),
            ..offer.status.clone().unwrap_or_default()
        };
        match self.patch_status(offer, &status).await {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(s)) if s.code == 409 => Ok(()),
            Err(err) => Err(err.into()),
        }
    }

    /// All offers of a slot.
    pub async fn slot_offers(&self, slot: &str) -> Result<Vec<HandoffOffer>, kube::Error> {
        Ok(self
            .offers
            .list(&ListParams::default().labels(&format!("{SLOT_LABEL}={slot}")))
            .await?
            .items)
    }

    /// Whether a non-terminal Job of the agent runs in the project.
    pub async fn agent_active(&self, project: &str, to: &str) -> Result<bool, kube::Error> {
        let selector = active_selector(&self.active_selector, project, to);
        let jobs = self
            .jobs
            .list(&ListParams::default().labels(&selector))
            .await?;
        Ok(jobs.items.iter().any(|j| job_result(j).is_none()))
    }

    /// Records `Offered` on a new offer. A 409 means a newer offer (or the
    /// controller) already moved it on: the offer as it is now is returned.
    async fn set_offered(&self, created: HandoffOffer) -> Result<HandoffOffer, kube::Error> {
        let status = HandoffOfferStatus {
            phase: Some(OfferPhase::Offered),
            ..Default::default()
        };
        match self.patch_status(&created, &status).await {
            Err(kube::Error::Api(s)) if s.code == 409 => self.offers.get(&created.name_any()).await,
            other => other,
        }
    }

    /// A status patch guarded by the object's resourceVersion (409 when it changed).
    async fn patch_status(
        &self,
        offer: &HandoffOffer,
        status: &HandoffOfferStatus,
    ) -> Result<HandoffOffer, kube::Error> {
        let patch = serde_json::json!({
            "metadata": {"resourceVersion": offer.resource_version()},
            "status": status,
        });
        self.offers
            .patch_status(
                &offer.name_any(),
                &PatchParams::default(),
                &Patch::Merge(&patch),
            )
            .await
    }
}

fn new_offer(name: &str, slot: &str, spec: &HandoffOfferSpec) -> HandoffOffer {
    let mut offer = HandoffOffer::new(name, spec.clone());
    offer.metadata.labels = Some(BTreeMap::from([
        ("project".to_owned(), spec.project.clone()),
        (TO_LABEL.to_owned(), spec.to.clone()),
        (SLOT_LABEL.to_owned(), slot.to_owned()),
    ]));
    offer
}
