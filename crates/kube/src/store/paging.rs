//! The list order (`updated_at` desc, then key) and the reads of a
//! project page by page: the first of it in list order, or a bounded scan.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::ListParams;

use super::{HandoffStore, ListQuery};
use crate::cluster::Pages;
use handoff_core::api::Handoff;
use handoff_core::handoff::canonical;
use handoff_core::handoff::view::updated_at;

impl HandoffStore {
    /// The first `keep` handoffs of a project (and repo, and kind) in list order
    /// ([`newest_first`]) strictly after `after`, and how many the project
    /// has in all. The apiserver has no such order, so every page of the
    /// project is read, but only one page and the `keep` first so far are
    /// in memory at once ([`keep_first`]): memory does not grow with the
    /// project (time does; the PostgreSQL mirror answers from an index).
    /// Objects whose name is not derived from their key
    /// ([`canonical`]) are neither kept nor counted.
    pub async fn list_first(
        &self,
        query: &ListQuery,
        after: Option<&SortKey>,
        keep: usize,
    ) -> Result<FirstOf, kube::Error> {
        let params = ListParams::default().fields(&project_fields(query));
        let mut first = FirstOf::default();
        let mut pages = Pages::new(&self.api, &params);
        while let Some(mut page) = pages.next().await? {
            // Only the current handoff of each key is listed.
            page.retain(canonical);
            first.total += page.len();
            first.items = keep_first(first.items, page, sort_key, after, keep);
        }
        first.version = pages.version().map(str::to_owned);
        Ok(first)
    }

    /// Reads the handoffs of a project (and repo, and kind) page by page, handing
    /// each page to `visit`, until all are read or `cap` were; returns how
    /// many were read and whether the cap stopped the scan before the end.
    pub async fn scan(
        &self,
        query: &ListQuery,
        cap: usize,
        mut visit: impl FnMut(Vec<Handoff>),
    ) -> Result<(usize, bool), kube::Error> {
        let params = ListParams::default().fields(&project_fields(query));
        let mut pages = Pages::new(&self.api, &params);
        let mut scanned = 0;
        while let Some(mut page) = pages.next().await? {
            if scanned + page.len() > cap {
                page.truncate(cap - scanned);
                scanned += page.len();
                visit(page);
                return Ok((scanned, true));
            }
            scanned += page.len();
            visit(page);
        }
        Ok((scanned, false))
    }
}

/// What [`HandoffStore::list_first`] found.
#[derive(Debug, Default)]
pub struct FirstOf {
    /// The first handoffs in list order.
    pub items: Vec<Handoff>,
    /// How many handoffs the project (and repo, and kind) has.
    pub total: usize,
    /// The listing's resourceVersion (a watch from it sees every later
    /// change).
    pub version: Option<String>,
}

/// `kept` (already in list order) merged with `page`: the first `keep`
/// items strictly after `after`, in [`newest_first`] order.
pub(crate) fn keep_first<T>(
    mut kept: Vec<T>,
    page: Vec<T>,
    key: impl Fn(&T) -> SortKey,
    after: Option<&SortKey>,
    keep: usize,
) -> Vec<T> {
    kept.extend(
        page.into_iter()
            .filter(|item| after.is_none_or(|a| newest_first(&key(item), a).is_gt())),
    );
    kept.sort_by(|a, b| newest_first(&key(a), &key(b)));
    kept.truncate(keep);
    kept
}

/// The order of lists: `(updated_at desc, handoff_key asc)`.
pub type SortKey = (Option<Time>, String);

/// A handoff's position in list order.
pub fn sort_key(h: &Handoff) -> SortKey {
    (updated_at(h), h.spec.handoff_key.clone())
}

/// Newest first; ties broken by key so the order is total and pages are stable.
pub fn newest_first(a: &SortKey, b: &SortKey) -> std::cmp::Ordering {
    b.0.as_ref()
        .map(|t| t.0)
        .cmp(&a.0.as_ref().map(|t| t.0))
        .then_with(|| a.1.cmp(&b.1))
}

/// The field selector of a project (and repo, and kind).
fn project_fields(query: &ListQuery) -> String {
    let mut fields = format!("spec.project={}", escape_field_value(&query.project));
    for (field, value) in [("spec.repo", &query.repo), ("spec.kind", &query.kind)] {
        if let Some(value) = value.as_deref().filter(|v| !v.is_empty()) {
            fields.push_str(&format!(",{field}={}", escape_field_value(value)));
        }
    }
    fields
}

/// Field-selector values escape `\`, `,` and `=` with a backslash.
fn escape_field_value(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for c in value.chars() {
        if matches!(c, '\\' | ',' | '=') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(secs: i64) -> Option<Time> {
        Some(Time(
            k8s_openapi::jiff::Timestamp::from_second(secs).expect("ts"),
        ))
    }

    #[test]
    fn newest_first_then_by_key() {
        let mut keys: Vec<SortKey> = vec![
            (at(1), "b".into()),
            (at(3), "a".into()),
            (None, "z".into()),
            (at(3), "0".into()),
            (at(1), "a".into()),
        ];
        keys.sort_by(newest_first);
        let order: Vec<&str> = keys.iter().map(|k| k.1.as_str()).collect();
        assert_eq!(order, ["0", "a", "a", "b", "z"]);
        assert_eq!(keys[0].0, at(3));
        assert_eq!(keys[4].0, None, "undated entries sort last");
    }

    #[test]
    fn field_values_are_escaped() {
        assert_eq!(escape_field_value("org/repo"), "org/repo");
        assert_eq!(escape_field_value(r"a,b=c\d"), r"a\,b\=c\\d");
    }

    #[test]
    fn the_selector_holds_the_filters_given() {
        let query = |repo: Option<&str>, kind: Option<&str>| ListQuery {
            project: "shop".into(),
            repo: repo.map(Into::into),
            kind: kind.map(Into::into),
        };
        // (repo, kind, the field selector)
        let cases = [
            (None, None, "spec.project=shop"),
            (Some(""), Some(""), "spec.project=shop"),
            (Some("o/r"), None, "spec.project=shop,spec.repo=o/r"),
            (None, Some("issue"), "spec.project=shop,spec.kind=issue"),
            (
                Some("a,b"),
                Some("x=y"),
                r"spec.project=shop,spec.repo=a\,b,spec.kind=x\=y",
            ),
        ];
        for (repo, kind, want) in cases {
            assert_eq!(
                project_fields(&query(repo, kind)),
                want,
                "{repo:?} {kind:?}"
            );
        }
    }

    #[test]
    fn keeping_the_first_page_by_page_equals_sorting_everything() {
        let items: Vec<SortKey> = (0..57)
            .map(|i| (at((i * 7919) % 23), format!("k{:02}", (i * 31) % 57)))
            .collect();
        let mut sorted = items.clone();
        sorted.sort_by(newest_first);
        for (after, keep) in [
            (None, 1),
            (None, 10),
            (None, 100),
            (Some(sorted[9].clone()), 5),
            (Some(sorted[56].clone()), 5),
        ] {
            let mut kept = Vec::new();
            for page in items.chunks(8) {
                kept = keep_first(kept, page.to_vec(), Clone::clone, after.as_ref(), keep);
                assert!(kept.len() <= keep, "never more than `keep` in memory");
            }
            let expected: Vec<SortKey> = sorted
                .iter()
                .filter(|k| after.as_ref().is_none_or(|a| newest_first(k, a).is_gt()))
                .take(keep)
                .cloned()
                .collect();
            assert_eq!(kept, expected, "after {after:?}, keep {keep}");
        }
    }
}
