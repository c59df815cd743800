//! Handoff specs for tests, built from what a test cares about: one key
//! and a chain of the fields it sets (`spec("k").project("p").body("…")`),
//! instead of every field written out beside each test. The rest keep the
//! defaults of [`spec`].

use std::time::Duration;

use handoff_core::api::naming::name_for_key;
use handoff_core::api::{Handoff, HandoffSpec};
use kube::Api;

use crate::wait::eventually;

/// A spec of `key` in project `shop`, with an empty body and no repo,
/// kind or writer.
pub fn spec(key: impl Into<String>) -> HandoffSpec {
    HandoffSpec {
        handoff_key: key.into(),
        project: "shop".into(),
        repo: None,
        kind: None,
        body: String::new(),
        created_by: None,
    }
}

/// The usual handoff of the suites: project `shop`, repo `org/a`, kind
/// `issue`, written by `writer`.
pub fn shop(key: &str, body: &str) -> HandoffSpec {
    spec(key)
        .repo("org/a")
        .kind("issue")
        .body(body)
        .by("writer")
}

/// The fields a test sets on a [`spec`], each replacing the default.
pub trait Fields {
    /// Its project.
    fn project(self, project: impl Into<String>) -> Self;
    /// Its repo.
    fn repo(self, repo: impl Into<String>) -> Self;
    /// Its kind.
    fn kind(self, kind: impl Into<String>) -> Self;
    /// Its body.
    fn body(self, body: impl Into<String>) -> Self;
    /// Its writer (`createdBy`).
    fn by(self, writer: impl Into<String>) -> Self;
}

impl Fields for HandoffSpec {
    fn project(mut self, project: impl Into<String>) -> Self {
        self.project = project.into();
        self
    }
    fn repo(mut self, repo: impl Into<String>) -> Self {
        self.repo = Some(repo.into());
        self
    }
    fn kind(mut self, kind: impl Into<String>) -> Self {
        self.kind = Some(kind.into());
        self
    }
    fn body(mut self, body: impl Into<String>) -> Self {
        self.body = body.into();
        self
    }
    fn by(mut self, writer: impl Into<String>) -> Self {
        self.created_by = Some(writer.into());
        self
    }
}

/// Waits (up to a minute) until the controller has counted the latest
/// write of `key` as `revision`, the status of the object's current
/// generation; returns the handoff then.
pub async fn counted(api: &Api<Handoff>, key: &str, revision: i64) -> Handoff {
    counted_named(api, &name_for_key(key), revision).await
}

/// [`counted`] of the object named `name` (a twin: not the name its key
/// derives).
pub async fn counted_named(api: &Api<Handoff>, name: &str, revision: i64) -> Handoff {
    eventually(
        &format!("revision {revision} of {name} counted"),
        Duration::from_secs(60),
        || async {
            let h = api
                .get_opt(name)
                .await
                .map_err(|e| e.to_string())?
                .ok_or("no such handoff")?;
            let status = h.status.clone().unwrap_or_default();
            match (status.revision, status.observed_generation) {
                (Some(r), observed) if r == revision && observed == h.metadata.generation => Ok(h),
                seen => Err(format!("revision and observed generation {seen:?}")),
            }
        },
    )
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_field_replaces_its_default() {
        let built = spec("k")
            .project("p")
            .repo("o/r")
            .kind("issue")
            .body("b")
            .by("w");
        assert_eq!(
            built,
            HandoffSpec {
                handoff_key: "k".into(),
                project: "p".into(),
                repo: Some("o/r".into()),
                kind: Some("issue".into()),
                body: "b".into(),
                created_by: Some("w".into()),
            }
        );
        assert_eq!(spec("k").project, "shop");
        assert_eq!(shop("k", "b").created_by.as_deref(), Some("writer"));
    }
}
