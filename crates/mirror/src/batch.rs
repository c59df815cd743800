//! The controller's mirror writes, batched: concurrent reconciles' row
//! upserts and history appends go to PostgreSQL together.
//!
//! Why: one reconcile writes one row and appends one revision; written one
//! statement (and one commit) each, a bulk of writes costs two round trips
//! and two commits per handoff, and the mirror fell minutes behind the
//! apiserver at 10,000 handoffs. A batch is one transaction: the rows in
//! one multi-row upsert ([`super::Mirror::write_batch`], the same
//! never-backwards rule as a single row), then each history append,
//! pipelined on the one connection, then one commit.
//!
//! How a batch forms: callers queue their job and await its own outcome
//! ([`Batcher::upsert`], [`Batcher::record_revision`]: the same calls as
//! [`super::Mirror`]'s). The batcher takes a free connection slot (at most
//! `--postgres-pool-size` batches run at once), then collects jobs until
//! `--mirror-batch-rows` are in, `--mirror-batch-linger` has passed since
//! the first, or a job for a key already in the batch arrives (it opens
//! the next batch: one statement may not touch a row twice). While every
//! slot is busy, jobs queue and the next batch takes them all: batches grow
//! with the load, and a lone write waits at most the linger.
//!
//! Failure: a batch fails as a whole (one transaction), and fails each of
//! its callers with the same error ([`super::MirrorError::Batch`]); the
//! controller retries each with its backoff, as for a single write. A
//! batch runs through the mirror's call bound and gate (`--postgres-timeout`,
//! [`super::pool::Gate`]), and a caller waits at most that timeout plus the
//! linger for its outcome, however many batches are queued before its own.
//! A batch already sent when its callers give up (or leadership ends) may
//! still commit: rows never move backwards and history appends are
//! idempotent, so a late write is harmless.

use std::collections::HashSet;
use std::num::NonZeroUsize;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::sync::{Semaphore, mpsc, oneshot};

use super::{Mirror, MirrorError, Row};

/// The default of `--mirror-batch-rows`.
pub const DEFAULT_BATCH_ROWS: NonZeroUsize = NonZeroUsize::new(256).expect("256 is not zero");
/// The default of `--mirror-batch-linger`.
pub(crate) const DEFAULT_BATCH_LINGER: Duration = Duration::from_millis(2);

/// How batches form (`--mirror-batch-rows`, `--mirror-batch-linger`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchSettings {
    /// Most jobs (row upserts and history appends) in one batch.
    pub rows: NonZeroUsize,
    /// Most time a batch waits for more jobs after its first.
    pub linger: Duration,
}

impl Default for BatchSettings {
    fn default() -> Self {
        Self {
            rows: DEFAULT_BATCH_ROWS,
            linger: DEFAULT_BATCH_LINGER,
        }
    }
}

/// What a job asks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    /// [`Mirror::upsert`].
    Upsert,
    /// [`Mirror::record_revision`].
    Record,
}

/// What a job got: whether the row changed, or how many history rows the
/// append dropped beyond the cap.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The upsert's answer.
    Upserted(bool),
    /// The history append's answer.
    Recorded(u64),
}

type Reply = oneshot::Sender<Result<Outcome, Arc<MirrorError>>>;

struct Job {
    kind: Kind,
    row: Row,
    reply: Reply,
}

impl Job {
    fn key(&self) -> (Kind, &str, &str) {
        (self.kind, &self.row.namespace, &self.row.handoff_key)
    }
}

/// Pure: whether a job for `key` may join a batch that holds `keys` and
/// `len` jobs, at most `rows` in all (`None`: the batch is full).
pub fn admits(
    keys: &HashSet<(Kind, String, String)>,
    len: usize,
    rows: usize,
    key: (Kind, &str, &str),
) -> Option<bool> {
    if len >= rows {
        return None;
    }
    Some(!keys.contains(&(key.0, key.1.to_owned(), key.2.to_owned())))
}

/// Batches of mirror writes (see the module docs).
pub struct Batcher {
    jobs: mpsc::UnboundedSender<Job>,
    wait: Duration,
    stats: Arc<Stats>,
}

/// Counts of what the batcher sent.
#[derive(Debug, Default)]
struct Stats {
    batches: AtomicU64,
    jobs: AtomicU64,
}

impl Batcher {
    /// Starts the batcher of `mirror` (on the current tokio runtime); it
    /// runs until the batcher is dropped. `observe` is called with the
    /// size of each batch sent (a metric).
    pub fn start(
        mirror: Arc<Mirror>,
        settings: BatchSettings,
        observe: impl Fn(usize) + Send + Sync + 'static,
    ) -> Self {
        let (jobs, queue) = mpsc::unbounded_channel();
        let stats = Arc::new(Stats::default());
        let wait = mirror.settings.timeout + settings.linger;
        tokio::spawn(run(
            mirror,
            settings,
            queue,
            stats.clone(),
            Arc::new(observe),
        ));
        Self { jobs, wait, stats }
    }

    /// [`Mirror::upsert`], in a batch.
    pub async fn upsert(&self, row: &Row) -> Result<bool, MirrorError> {
        match self.call(Kind::Upsert, row).await? {
            Outcome::Upserted(changed) => Ok(changed),
            Outcome::Recorded(_) => Ok(true),
        }
    }

    /// [`Mirror::record_revision`], in a batch.
    pub async fn record_revision(&self, row: &Row) -> Result<u64, MirrorError> {
        match self.call(Kind::Record, row).await? {
            Outcome::Recorded(dropped) => Ok(dropped),
            Outcome::Upserted(_) => Ok(0),
        }
    }

    /// Batches sent so far, and the jobs they carried.
    pub fn sent(&self) -> (u64, u64) {
        (
            self.stats.batches.load(Ordering::Relaxed),
            self.stats.jobs.load(Ordering::Relaxed),
        )
    }

    async fn call(&self, kind: Kind, row: &Row) -> Result<Outcome, MirrorError> {
        let (reply, outcome) = oneshot::channel();
        let job = Job {
            kind,
            row: row.clone(),
            reply,
        };
        self.jobs
            .send(job)
            .map_err(|_| MirrorError::Pool("the mirror's batcher has stopped".into()))?;
        match tokio::time::timeout(self.wait, outcome).await {
            Err(_) => Err(MirrorError::Timeout(self.wait)),
            Ok(Err(_)) => Err(MirrorError::Pool(
                "the mirror's batcher dropped a write".into(),
            )),
            Ok(Ok(result)) => result.map_err(MirrorError::Batch),
        }
    }
}

/// Forms batches until every [`Batcher`] handle is gone.
async fn run(
    mirror: Arc<Mirror>,
    settings: BatchSettings,
    mut queue: mpsc::UnboundedReceiver<Job>,
    stats: Arc<Stats>,
    observe: Arc<dyn Fn(usize) + Send + Sync>,
) {
    let slots = Arc::new(Semaphore::new(mirror.settings.size.max(1)));
    let mut next: Option<Job> = None;
    loop {
        let Ok(slot) = slots.clone().acquire_owned().await else {
            return;
        };
        let first = match next.take() {
            Some(job) => job,
            None => match queue.recv().await {
                Some(job) => job,
                None => return,
            },
        };
        let deadline = tokio::time::Instant::now() + settings.linger;
        let mut keys = HashSet::from([owned(first.key())]);
        let mut batch = vec![first];
        loop {
            // Jobs already queued join without waiting for the linger.
            let job = match queue.try_recv() {
                Ok(job) => job,
                Err(mpsc::error::TryRecvError::Disconnected) => break,
                Err(mpsc::error::TryRecvError::Empty) => tokio::select! {
                    job = queue.recv() => match job {
                        Some(job) => job,
                        None => break,
                    },
                    () = tokio::time::sleep_until(deadline) => break,
                },
            };
            match admits(&keys, batch.len(), settings.rows.get(), job.key()) {
                Some(true) => {
                    keys.insert(owned(job.key()));
                    batch.push(job);
                }
                Some(false) | None => {
                    next = Some(job);
                    break;
                }
            }
            if batch.len() >= settings.rows.get() {
                break;
            }
        }
        stats.batches.fetch_add(1, Ordering::Relaxed);
        stats.jobs.fetch_add(
            u64::try_from(batch.len()).unwrap_or(u64::MAX),
            Ordering::Relaxed,
        );
        observe(batch.len());
        let mirror = mirror.clone();
        tokio::spawn(async move {
            send(&mirror, batch).await;
            drop(slot);
        });
    }
}

fn owned(key: (Kind, &str, &str)) -> (Kind, String, String) {
    (key.0, key.1.to_owned(), key.2.to_owned())
}

/// Writes one batch and answers each of its callers.
async fn send(mirror: &Mirror, batch: Vec<Job>) {
    let (upserts, records): (Vec<Job>, Vec<Job>) =
        batch.into_iter().partition(|j| j.kind == Kind::Upsert);
    let up: Vec<&Row> = upserts.iter().map(|j| &j.row).collect();
    let rec: Vec<&Row> = records.iter().map(|j| &j.row).collect();
    match mirror.write_batch(&up, &rec).await {
        Ok(written) => {
            for job in upserts {
                let changed = written
                    .changed
                    .contains(&(job.row.namespace.clone(), job.row.handoff_key.clone()));
                let _ = job.reply.send(Ok(Outcome::Upserted(changed)));
            }
            for (job, dropped) in records.into_iter().zip(written.dropped) {
                let _ = job.reply.send(Ok(Outcome::Recorded(dropped)));
            }
        }
        Err(err) => {
            let err = Arc::new(err);
            for job in upserts.into_iter().chain(records) {
                let _ = job.reply.send(Err(err.clone()));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_batch_takes_each_key_once_and_no_more_than_its_rows() {
        let keys = HashSet::from([(Kind::Upsert, "ns".to_owned(), "a".to_owned())]);
        let cases = [
            ((Kind::Upsert, "ns", "b"), 1, 2, Some(true)),
            ((Kind::Upsert, "ns", "a"), 1, 2, Some(false)),
            ((Kind::Record, "ns", "a"), 1, 2, Some(true)),
            ((Kind::Upsert, "other", "a"), 1, 2, Some(true)),
            ((Kind::Upsert, "ns", "b"), 2, 2, None),
        ];
        for (key, len, rows, want) in cases {
            assert_eq!(admits(&keys, len, rows, key), want, "{key:?} {len}/{rows}");
        }
    }
}
