//! Offer operations against the apiserver: offer (the decision under
//! optimistic concurrency), list, get, reject, and the supersession both the
//! bridge and the controller use.
//!
//! Two identities: the CALLER's creates, lists and reads offers (RBAC
//! decides who may offer and see offers), and the ACTING identity writes
//! the phase (the status subresource), records Events and checks whether
//! the destination agent is active (a Job list). In the bridge the acting
//! identity is the bridge's own ServiceAccount, so agents need no right on
//! `handoffoffers/status` or Events; in the controller both are the
//! controller's. Every terminal phase written here carries `finishedAt`,
//! from which the controller's retention counts.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::{Client, Resource, ResourceExt};

use crate::loops::KubeCategory;
use handoff_core::api::{
    HandoffOffer, HandoffOfferSpec, HandoffOfferStatus, OfferPhase, SupersedeReason,
};
use handoff_core::loops::{Categorized, Category};
use handoff_core::names::{SLOT_LABEL, TO_LABEL};
use handoff_core::offers::{Decision, Outcome, active_selector, decide, offer_name, seq_of, slot};
use handoff_core::schedule::jobs::job_result;
use handoff_core::time::Clock;

/// How many times a racing offer re-reads and decides again.
const MAX_ATTEMPTS: usize = 50;

/// Offers of one namespace: read and created as the caller, moved (status,
/// Events, the Job check) as the acting identity.
#[derive(Clone)]
pub struct OfferStore {
    offers: Api<HandoffOffer>,
    statuses: Api<HandoffOffer>,
    jobs: Api<Job>,
    recorder: Recorder,
    active_selector: String,
    clock: Arc<dyn Clock>,
}

/// Why an offer operation failed.
#[derive(Debug, thiserror::Error)]
pub enum OfferError {
    /// An apiserver call made as the caller failed.
    #[error("{0}")]
    Kube(#[from] kube::Error),
    /// An apiserver call made as the acting identity (status, Events, the
    /// agent Job check) failed.
    #[error("{0}")]
    Acting(kube::Error),
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
            Self::Kube(err) | Self::Acting(err) => Category::of_kube(err),
            Self::Busy { .. } => Category::Transient,
            Self::NotFound(_) => Category::Invalid,
        }
    }
}

impl OfferStore {
    /// A store in `namespace`: offers created, listed and read with
    /// `caller`; status writes, Events (reported as `reporter`) and the
    /// agent-activity check (a Job list) with `acting`; `finishedAt` read
    /// from `clock`.
    pub fn new(
        caller: Client,
        acting: Client,
        namespace: &str,
        active_selector: &str,
        reporter: &str,
        clock: Arc<dyn Clock>,
    ) -> Self {
        let reporter = Reporter {
            controller: reporter.into(),
            instance: None,
        };
        Self {
            offers: Api::namespaced(caller, namespace),
            statuses: Api::namespaced(acting.clone(), namespace),
            jobs: Api::namespaced(acting.clone(), namespace),
            recorder: Recorder::new(acting, reporter),
            active_selector: active_selector.into(),
            clock,
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
        // The caller's own read first: a caller without offer rights is
        // refused before anything is asked with the acting identity.
        let mut read = Some(self.slot_offers(&slot).await?);
        if self
            .agent_active(&spec.project, &spec.to)
            .await
            .map_err(OfferError::Acting)?
        {
            return Ok((Outcome::AgentAlreadyActive, None));
        }
        for attempt in 0..MAX_ATTEMPTS {
            let all = match read.take() {
                Some(all) => all,
                None => self.slot_offers(&slot).await?,
            };
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
            let created = self
                .set_offered(created)
                .await
                .map_err(OfferError::Acting)?;
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

    /// One page of a project's offers (and destination), as the
    /// apiserver pages them (by name): at most `limit`, from `page` (the
    /// `continue` token of the previous page). Those in another phase than
    /// `phase` are left out of the page, so a page may hold fewer. Also
    /// the token of the next page, if any.
    pub async fn list_page(
        &self,
        project: &str,
        to: Option<&str>,
        phase: Option<OfferPhase>,
        limit: u32,
        page: Option<&str>,
    ) -> Result<(Vec<HandoffOffer>, Option<String>), OfferError> {
        let mut fields = format!("spec.project={project}");
        if let Some(to) = to {
            fields.push_str(&format!(",spec.to={to}"));
        }
        let mut params = ListParams::default().fields(&fields).limit(limit);
        if let Some(token) = page {
            params = params.continue_token(token);
        }
        let list = self.offers.list(&params).await?;
        let next = list.metadata.continue_.filter(|c| !c.is_empty());
        let mut items = list.items;
        items.retain(|o| phase.is_none_or(|p| o.phase() == p));
        Ok((items, next))
    }

    /// The offer `name`, read as the caller (RBAC decides whether it may).
    pub async fn get(&self, name: &str) -> Result<HandoffOffer, OfferError> {
        self.offers
            .get_opt(name)
            .await?
            .ok_or_else(|| OfferError::NotFound(name.into()))
    }

    /// Marks `offer` `Rejected` (an explicit action); already rejected, it
    /// is returned as it is.
    pub async fn reject(&self, offer: &HandoffOffer) -> Result<HandoffOffer, OfferError> {
        if offer.phase() == OfferPhase::Rejected {
            return Ok(offer.clone());
        }
        let status = HandoffOfferStatus {
            phase: Some(OfferPhase::Rejected),
            finished_at: Some(self.now()),
            ..offer.status.clone().unwrap_or_default()
        };
        self.patch_status(offer, &status)
            .await
            .map_err(OfferError::Acting)
    }

    /// Supersedes `old` (if still pending) by `by`, with an Event on `old`
    /// naming its substitute and the reason.
    pub async fn supersede(
        &self,
        old: &HandoffOffer,
        by: &str,
        reason: SupersedeReason,
    ) -> Result<(), OfferError> {
        let current = match self.statuses.get_status(&old.name_any()).await {
            Ok(o) if o.phase() == OfferPhase::Offered => o,
            Ok(_) => return Ok(()),
            Err(kube::Error::Api(s)) if s.code == 404 => return Ok(()),
            Err(err) => return Err(OfferError::Acting(err)),
        };
        let status = HandoffOfferStatus {
            phase: Some(OfferPhase::Superseded),
            superseded_by: Some(by.into()),
            reason: Some(reason),
            finished_at: Some(self.now()),
            ..current.status.clone().unwrap_or_default()
        };
        match self.patch_status(&current, &status).await {
            Ok(_) => {}
            // Changed meanwhile (accepted, rejected, superseded by someone else): leave it.
            Err(kube::Error::Api(s)) if s.code == 409 => return Ok(()),
            Err(err) => return Err(OfferError::Acting(err)),
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
            finished_at: phase.is_terminal().then(|| self.now()),
            ..offer.status.clone().unwrap_or_default()
        };
        match self.patch_status(offer, &status).await {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(s)) if s.code == 409 => Ok(()),
            Err(err) => Err(OfferError::Acting(err)),
        }
    }

    /// Deletes a terminal offer past its retention (the controller), only
    /// if it is still the object that was judged (its resourceVersion).
    pub async fn delete_finished(&self, offer: &HandoffOffer) -> Result<(), OfferError> {
        let params = kube::api::DeleteParams {
            preconditions: Some(kube::api::Preconditions {
                resource_version: offer.resource_version(),
                uid: offer.uid(),
            }),
            ..Default::default()
        };
        match self.offers.delete(&offer.name_any(), &params).await {
            Ok(_) => Ok(()),
            // Already gone, or changed meanwhile (its next reconcile judges it again).
            Err(kube::Error::Api(s)) if s.code == 404 || s.code == 409 => Ok(()),
            Err(err) => Err(err.into()),
        }
    }

    /// All offers of a slot (as the caller).
    pub async fn slot_offers(&self, slot: &str) -> Result<Vec<HandoffOffer>, kube::Error> {
        Ok(self
            .offers
            .list(&ListParams::default().labels(&format!("{SLOT_LABEL}={slot}")))
            .await?
            .items)
    }

    /// Whether a non-terminal Job of the agent runs in the project.
    pub(crate) async fn agent_active(&self, project: &str, to: &str) -> Result<bool, kube::Error> {
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
            Err(kube::Error::Api(s)) if s.code == 409 => {
                self.statuses.get_status(&created.name_any()).await
            }
            other => other,
        }
    }

    fn now(&self) -> Time {
        Time(self.clock.now())
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
        self.statuses
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
