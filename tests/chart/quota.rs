//! The tenants' ResourceQuota: values `tenantQuota` against the kustomize
//! overlay of `config/tenant` an operator writes for the same thing (a
//! JSON patch of `handoff-quota` to resize it, `$patch: delete` to drop
//! it), object by object as the other pairings; and its sizes refused
//! naming the field when they are not counts.

use crate::render::{NAMESPACE, chart_objects, kustomize_objects, overlay, template};
use crate::{INSTANCE, assert_same, untemplated_crds, without};

/// config/default plus team `team-a` over `config/tenant` with `patch` (a
/// kustomization `patches:` entry, or none), labelled as the chart labels.
fn team_a_overlay(patch: &str) -> tempfile::TempDir {
    let top = format!(
        "apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - config/default
  - team-a
labels:
  - pairs:
      {INSTANCE}: handoff
    includeSelectors: false
"
    );
    let team = format!(
        "apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
namespace: team-a
resources:
  - ../config/tenant
{patch}"
    );
    overlay(&[
        ("kustomization.yaml", top.as_str()),
        ("team-a/kustomization.yaml", team.as_str()),
    ])
}

/// The resize config/tenant/kustomization.yaml documents.
const RESIZE: &str = "patches:
  - target: {kind: ResourceQuota, name: handoff-quota}
    patch: |-
      - op: replace
        path: /spec/hard/count~1handoffs.handoff.dev
        value: \"2000\"
      - op: replace
        path: /spec/hard/count~1handoffoffers.handoff.dev
        value: \"7\"
      - op: replace
        path: /spec/hard/count~1brainstormschedules.handoff.dev
        value: \"0\"
";

/// Dropping the quota in an overlay.
const DROP: &str = "patches:
  - patch: |-
      $patch: delete
      apiVersion: v1
      kind: ResourceQuota
      metadata:
        name: handoff-quota
";

#[test]
fn tenant_quota_values_render_their_kustomize_overlays() {
    // (--set, the overlay's patch)
    let cases = [
        ("tenants={team-a}", ""),
        (
            "tenants={team-a},tenantQuota.handoffs=2000,tenantQuota.handoffOffers=7,\
             tenantQuota.brainstormSchedules=0",
            RESIZE,
        ),
        ("tenants={team-a},tenantQuota.enabled=false", DROP),
    ];
    for (set, patch) in cases {
        let chart = chart_objects(&[], &[set]);
        let dir = team_a_overlay(patch);
        let mut kustomize = kustomize_objects(dir.path());
        untemplated_crds(&mut kustomize);
        without(
            &mut kustomize,
            &format!("Namespace {NAMESPACE}"),
            "values namespace.create is false",
        );
        assert_eq!(
            chart.contains_key("ResourceQuota team-a/handoff-quota"),
            !set.contains("enabled=false"),
            "--set {set}: the quota rendered or not"
        );
        assert_same(&chart, &kustomize, &format!("--set {set} vs its overlay"));
    }
}

#[test]
fn tenant_quota_sizes_are_counts() {
    let cases = [
        (
            "tenantQuota.handoffs=-1",
            "at '/tenantQuota/handoffs': minimum",
        ),
        (
            "tenantQuota.handoffOffers=many",
            "at '/tenantQuota/handoffOffers'",
        ),
        (
            "tenantQuota.brainstormSchedules=1.5",
            "at '/tenantQuota/brainstormSchedules'",
        ),
        (
            "tenantQuota.events=5",
            "at '/tenantQuota': additional properties 'events'",
        ),
    ];
    for (set, want) in cases {
        match template(&[], &[set]) {
            Ok(_) => panic!("--set {set} rendered"),
            Err(e) => assert!(e.contains(want), "--set {set}: want {want:?} in: {e}"),
        }
    }
}
