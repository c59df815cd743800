//! The convergence check the controller suites and the reliability suite
//! share: the set of live, counted Handoffs equals the set of mirror rows,
//! with equal revisions and the same object uid (a row of a deleted and
//! re-created handoff is not a match). Only the current handoff of a key
//! (the object at the name derived from its key) is mirrored, so only
//! those are counted.

use std::collections::BTreeMap;

use kube::ResourceExt;
use kube::api::{Api, ListParams};

use handoff_core::api::Handoff;
use handoff_core::api::naming::name_for_key;

/// `handoff key → (revision, uid)`.
pub type Snapshot = BTreeMap<String, (i64, String)>;

/// Every live Handoff of `api`'s namespace whose name is derived from its
/// key, at its counted revision (listed
/// in pages of 500); `None` while one is not counted yet or is terminating,
/// or when the apiserver does not answer.
pub async fn counted_handoffs(api: &Api<Handoff>) -> Option<Snapshot> {
    let mut out = Snapshot::new();
    let mut params = ListParams::default().limit(500);
    loop {
        let page = api.list(&params).await.ok()?;
        for h in &page.items {
            if h.metadata.deletion_timestamp.is_some() {
                return None;
            }
            if h.metadata.name.as_deref() != Some(name_for_key(&h.spec.handoff_key).as_str()) {
                continue;
            }
            let revision = h.status.as_ref().and_then(|s| s.revision)?;
            out.insert(h.spec.handoff_key.clone(), (revision, h.uid()?));
        }
        match page.metadata.continue_.filter(|c| !c.is_empty()) {
            Some(token) => params = params.continue_token(&token),
            None => return Some(out),
        }
    }
}

/// Every mirror row of `namespace`.
pub async fn mirrored_rows(
    db: &tokio_postgres::Client,
    namespace: &str,
) -> Result<Snapshot, tokio_postgres::Error> {
    Ok(db
        .query(
            "SELECT handoff_key, revision, id::text FROM handoffs WHERE namespace = $1",
            &[&namespace],
        )
        .await?
        .iter()
        .map(|r| (r.get(0), (r.get(1), r.get(2))))
        .collect())
}

/// `Some(number of handoffs)` when the mirror of `namespace` holds exactly
/// the live, counted Handoffs; `None` otherwise (check again later).
pub async fn converged(
    api: &Api<Handoff>,
    db: &tokio_postgres::Client,
    namespace: &str,
) -> Option<usize> {
    let crs = counted_handoffs(api).await?;
    let rows = mirrored_rows(db, namespace).await.ok()?;
    (rows == crs).then_some(crs.len())
}
