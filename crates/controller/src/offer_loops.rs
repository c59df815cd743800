//! The controller's offer loops: observe → [`plan`] → apply. What they
//! decide (see [`handoff_core::offers::plan`]):
//!
//! - Agent Jobs (labelled `handoff.dev/agent`): while a Job of agent A runs
//!   in project P, every offer still `Offered` to A in P is `Superseded`
//!   (reason `AgentActivated`, `supersededBy: job/<name>`), except the one
//!   the Job names in its `handoff.dev/offer` annotation, which becomes
//!   `Accepted`; when that Job succeeds the offer is `Completed`.
//! - Offers: if a crashed or raced offerer left more than one `Offered` in a
//!   slot, all but the highest-numbered are superseded (reason `NewOffer`).
//! - Retention: a terminal offer (`Completed`, `Rejected`, `Superseded`) is
//!   deleted once the retention has passed since `status.finishedAt` (its
//!   `creationTimestamp` when that is absent), judged by the injected
//!   [`Clock`]; until then it is requeued for that moment.
//!
//! Observing is one list of the slot's offers (or the clock); applying is
//! the [`OfferStore`]'s writes, each a step of [`Error`].

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::batch::v1::Job;
use kube::api::Api;
use kube::core::DeserializeGuard;
use kube::runtime::controller::{Action, Controller};
use kube::runtime::events::Reporter;
use kube::runtime::watcher;
use kube::{Client, ResourceExt};

use handoff_core::api::HandoffOffer;
use handoff_core::liveness::LoopProgress;
use handoff_core::loops::{Categorized, Category};
use handoff_core::names::{AGENT_LABEL, CONTROLLER_FIELD_MANAGER};
use handoff_core::offers::plan::{Effect, Observed, Plan, Reads, Wake, job_slot, plan, reads};
use handoff_core::time::{Clock, SystemClock};
use handoff_kube::cluster::scoped;
use handoff_kube::loops::{KubeCategory, LoopMetrics};
use handoff_kube::offers::{OfferError, OfferStore};
use handoff_kube::runner::{self, LoopError, Plumbing, Reconcile};

/// Default `--offer-retention`: how long terminal offers are kept.
pub(crate) const DEFAULT_OFFER_RETENTION: Duration = Duration::from_secs(7 * 24 * 3600);

/// What the offer and agent Job loops share besides the runner's
/// [`Plumbing`] (one for both: they report as one `offers` loop): the
/// client, the active-agent selector, the clock and the retention.
pub struct OfferLoops {
    client: Client,
    active_selector: String,
    clock: Arc<dyn Clock>,
    retention: Duration,
    plumbing: Plumbing,
}

impl OfferLoops {
    /// The loops acting with `client`; `active_selector` as for the bridge;
    /// Events reported as `reporter`; failures counted in `metrics`.
    pub fn new(
        client: Client,
        active_selector: &str,
        reporter: Reporter,
        metrics: Arc<LoopMetrics>,
    ) -> Self {
        Self {
            plumbing: Plumbing::new(
                client.clone(),
                reporter,
                LoopProgress::new("offers", Duration::ZERO),
                metrics,
            ),
            client,
            active_selector: active_selector.into(),
            clock: Arc::new(SystemClock),
            retention: DEFAULT_OFFER_RETENTION,
        }
    }

    /// Terminal offers are kept for `retention`, judged by `clock`.
    pub fn with_retention(mut self, retention: Duration, clock: Arc<dyn Clock>) -> Self {
        self.retention = retention;
        self.clock = clock;
        self
    }

    /// Runs with `plumbing` (the controller's progress, metrics and scope).
    pub(crate) fn with_plumbing(mut self, plumbing: Plumbing) -> Self {
        self.plumbing = plumbing;
        self
    }

    fn store(&self, namespace: &str) -> OfferStore {
        OfferStore::new(
            self.client.clone(),
            self.client.clone(),
            namespace,
            &self.active_selector,
            CONTROLLER_FIELD_MANAGER,
            self.clock.clone(),
        )
    }

    /// Every offer of `slot` (observe).
    async fn slot_offers(&self, namespace: &str, slot: &str) -> Result<Vec<HandoffOffer>, Error> {
        self.store(namespace)
            .slot_offers(slot)
            .await
            .map_err(Error::ListSlot)
    }
}

/// Why a reconcile of either loop failed: one variant per step.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Listing the slot's offers (observe).
    #[error("{0}")]
    ListSlot(kube::Error),
    /// Moving an offer to `Accepted` or `Completed`.
    #[error("{0}")]
    SetPhase(OfferError),
    /// Superseding an offer.
    #[error("{0}")]
    Supersede(OfferError),
    /// Deleting a finished offer past its retention.
    #[error("{0}")]
    Delete(OfferError),
}

impl Categorized for Error {
    fn category(&self) -> Category {
        match self {
            Self::ListSlot(err) => Category::of_kube(err),
            Self::SetPhase(err) | Self::Supersede(err) | Self::Delete(err) => err.category(),
        }
    }
}

impl LoopError for Error {
    fn step(&self) -> &'static str {
        match self {
            Self::ListSlot(_) => "list_slot",
            Self::SetPhase(_) => "set_phase",
            Self::Supersede(_) => "supersede",
            Self::Delete(_) => "delete",
        }
    }
}

/// The agent Job loop.
struct Jobs(Arc<OfferLoops>);

/// The offer loop.
struct Offers(Arc<OfferLoops>);

impl Reconcile for Jobs {
    type Object = Job;
    type Error = Error;

    fn plumbing(&self) -> &Plumbing {
        &self.0.plumbing
    }

    /// Applies an agent Job's start or success to the agent's offers.
    async fn reconcile(&self, job: &Job) -> Result<Action, Error> {
        let Some(slot) = job_slot(job) else {
            return Ok(Action::await_change());
        };
        let namespace = job.namespace().unwrap_or_default();
        let offers = self.0.slot_offers(&namespace, &slot).await?;
        let plan = plan(&Observed::Job {
            job,
            offers: &offers,
        });
        apply(plan, &namespace, &self.0).await
    }
}

impl Reconcile for Offers {
    type Object = HandoffOffer;
    type Error = Error;

    fn plumbing(&self) -> &Plumbing {
        &self.0.plumbing
    }

    /// Converges a slot to at most one `Offered` (the highest-numbered),
    /// and deletes terminal offers past their retention.
    async fn reconcile(&self, offer: &HandoffOffer) -> Result<Action, Error> {
        let namespace = offer.namespace().unwrap_or_default();
        let slot_offers;
        let observed = match reads(offer) {
            Reads::Nothing => return Ok(Action::await_change()),
            Reads::Clock => Observed::Finished {
                offer,
                retention: self.0.retention,
                now: self.0.clock.now(),
            },
            Reads::Slot(slot) => {
                slot_offers = self.0.slot_offers(&namespace, slot).await?;
                Observed::Pending {
                    slot,
                    offers: &slot_offers,
                }
            }
        };
        apply(plan(&observed), &namespace, &self.0).await
    }
}

/// Runs both loops until `shutdown` resolves (in `namespace`, or all).
pub async fn run(
    loops: Arc<OfferLoops>,
    namespace: Option<&str>,
    concurrency: u16,
    shutdown: tokio_util::sync::CancellationToken,
) {
    let jobs: Api<DeserializeGuard<Job>> = scoped(loops.client.clone(), namespace);
    let offers: Api<DeserializeGuard<HandoffOffer>> = scoped(loops.client.clone(), namespace);
    let job_loop = runner::run(
        Controller::new(jobs, watcher::Config::default().labels(AGENT_LABEL)),
        Arc::new(Jobs(loops.clone())),
        concurrency,
        shutdown.clone(),
    );
    let offer_loop = runner::run(
        Controller::new(offers, watcher::Config::default()),
        Arc::new(Offers(loops)),
        concurrency,
        shutdown,
    );
    futures::join!(job_loop, offer_loop);
}

/// Carries out `plan` in `namespace`, write by write (the first failure
/// stops the rest: the retry plans again).
async fn apply(plan: Plan<'_>, namespace: &str, ctx: &OfferLoops) -> Result<Action, Error> {
    let store = ctx.store(namespace);
    for effect in plan.effects {
        match effect {
            Effect::SetPhase { offer, phase, job } => store
                .set_phase(offer, phase, Some(&job))
                .await
                .map_err(Error::SetPhase)?,
            Effect::Supersede { offer, by, reason } => store
                .supersede(offer, &by, reason)
                .await
                .map_err(Error::Supersede)?,
            Effect::Delete { offer } => {
                store.delete_finished(offer).await.map_err(Error::Delete)?;
                tracing::info!(offer = %offer.name_any(), namespace = ?offer.namespace(), phase = ?offer.phase(), "deleted a finished offer past its retention");
            }
        }
    }
    Ok(match plan.wake {
        Wake::OnChange => Action::await_change(),
        Wake::After(wait) => Action::requeue(wait),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_step_names_itself() {
        let kube = || crate::test_support::api_error(500);
        let cases = [
            (Error::ListSlot(kube()), "list_slot"),
            (Error::SetPhase(OfferError::Acting(kube())), "set_phase"),
            (Error::Supersede(OfferError::Acting(kube())), "supersede"),
            (Error::Delete(OfferError::Kube(kube())), "delete"),
        ];
        for (err, step) in cases {
            assert_eq!(err.step(), step, "{err:?}");
            assert_eq!(err.category(), Category::Transient, "{err:?}");
        }
    }
}
