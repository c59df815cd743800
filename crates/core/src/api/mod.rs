//! The custom resources of `handoff.dev` and the pure mappings around them.
//!
//! Everything here is pure: types, schema generation, the key → name
//! mapping, the rule for setting a status condition.
//! `crds/` at the repository root holds [`render`] of each of [`crds`]; a test
//! fails when they drift, and `make crds` regenerates them (`handoff crd`,
//! which does the printing and the file writes, lives in the binary).

mod condition;
mod handoff;
pub mod naming;
mod offer;
mod schedule;
pub mod validation;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResourceExt;

pub use condition::set_condition;
pub use handoff::{
    Handoff, HandoffOrigin, HandoffPhase, HandoffSpec, HandoffStatus, MAX_BODY_CHARS,
    MAX_KEY_BYTES, MAX_LABEL_CHARS, MAX_REPO_CHARS, MAX_WRITER_CHARS, PREVIEW_CHARS, RESCUE_MARK,
    is_rescued, preview_line,
};
pub use offer::{
    HandoffOffer, HandoffOfferSpec, HandoffOfferStatus, MAX_ARTIFACT_CHARS, MAX_SESSION_CHARS,
    OfferPhase, SupersedeReason,
};
pub use schedule::{
    BrainstormSchedule, BrainstormScheduleSpec, BrainstormScheduleStatus, BrainstormStep, Cycle,
    DEFAULT_LOOKBACK_DAYS, DEFAULT_MAX_OPEN_PROPOSALS, DEFAULT_STARTING_DEADLINE_SECONDS,
    JobResult, RefineStep, SchedulePhase, StepRun,
};

/// The API group of every resource here.
pub const GROUP: &str = "handoff.dev";

/// Every CustomResourceDefinition this project installs, in a stable order.
pub fn crds() -> Vec<CustomResourceDefinition> {
    vec![
        Handoff::crd(),
        BrainstormSchedule::crd(),
        HandoffOffer::crd(),
    ]
}

/// The file name of a CRD under `crds/`: `<group>_<plural>.yaml`, as
/// controller-gen names them.
pub fn crd_file_name(crd: &CustomResourceDefinition) -> String {
    format!("{}_{}.yaml", crd.spec.group, crd.spec.names.plural)
}

/// A CRD as the YAML document committed under `crds/`.
pub fn render(crd: &CustomResourceDefinition) -> Result<String, serde_saphyr::SerializeError> {
    serde_saphyr::to_string(crd)
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    /// `crds/` must hold exactly what the Rust types generate. Run `make crds`
    /// after changing a type.
    #[test]
    fn committed_crds_match_the_types() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../crds");
        let mut expected = Vec::new();
        for crd in crds() {
            let name = crd_file_name(&crd);
            let committed = std::fs::read_to_string(dir.join(&name))
                .unwrap_or_else(|e| panic!("crds/{name} is missing ({e}); run `make crds`"));
            assert!(
                committed == render(&crd).expect("render"),
                "crds/{name} differs from the Rust types; run `make crds` and commit the result"
            );
            expected.push(name);
        }
        let mut present: Vec<String> = std::fs::read_dir(&dir)
            .expect("crds/ exists")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".yaml") && n != KUSTOMIZATION)
            .collect();
        present.sort();
        let mut listed = kustomization_resources(&dir.join(KUSTOMIZATION));
        listed.sort();
        expected.sort();
        assert_eq!(present, expected, "crds/ holds files no type generates");
        assert_eq!(
            listed, expected,
            "crds/{KUSTOMIZATION} must list exactly the generated CRD files (config/crd builds from it)"
        );
    }

    /// `crds/kustomization.yaml` lets `config/crd` reference `../../crds`
    /// (kustomize loads directories, not plain files, from outside its root).
    const KUSTOMIZATION: &str = "kustomization.yaml";

    /// The `resources:` of a kustomization file, strictly: it must be a
    /// `Kustomization` with nothing but `resources` besides its type fields.
    fn kustomization_resources(path: &Path) -> Vec<String> {
        #[derive(serde::Deserialize)]
        #[serde(deny_unknown_fields, rename_all = "camelCase")]
        struct Kustomization {
            api_version: String,
            kind: String,
            resources: Vec<String>,
        }
        let text = std::fs::read_to_string(path)
            .unwrap_or_else(|e| panic!("{} is missing ({e})", path.display()));
        let k: Kustomization = serde_saphyr::from_str(&text)
            .unwrap_or_else(|e| panic!("{} is not a plain resource list: {e}", path.display()));
        assert_eq!(k.api_version, "kustomize.config.k8s.io/v1beta1");
        assert_eq!(k.kind, "Kustomization");
        k.resources
    }

    #[test]
    fn handoff_crd_names_and_columns() {
        let crd = Handoff::crd();
        assert_eq!(crd.spec.group, GROUP);
        assert_eq!(
            crd.spec.names.short_names.as_deref(),
            Some(&["ho".to_owned()][..])
        );
        assert_eq!(
            crd.spec.names.categories.as_deref(),
            Some(&["agents".to_owned()][..])
        );
        let version = &crd.spec.versions[0];
        let columns: Vec<_> = version
            .additional_printer_columns
            .iter()
            .flatten()
            .map(|c| (c.name.as_str(), c.priority.unwrap_or(0)))
            .collect();
        assert_eq!(
            columns,
            [
                ("Key", 0),
                ("Project", 0),
                ("Repo", 0),
                ("Kind", 0),
                ("Updated", 0),
                ("Revision", 0),
                ("Tokens", 0),
                ("Lint", 0),
                ("Writer", 1),
                ("Origin", 1),
                ("Age", 0)
            ]
        );
        let lint = version
            .additional_printer_columns
            .iter()
            .flatten()
            .find(|c| c.name == "Lint")
            .map(|c| c.json_path.as_str());
        assert_eq!(
            lint,
            Some(
                format!(
                    ".status.conditions[?(@.type==\"{}\")].reason",
                    crate::handoff::LINTED
                )
                .as_str()
            ),
            "the Lint column reads the condition the controller sets"
        );
        let selectable: Vec<_> = version
            .selectable_fields
            .iter()
            .flatten()
            .map(|f| f.json_path.as_str())
            .collect();
        assert_eq!(
            selectable,
            [
                ".spec.project",
                ".spec.repo",
                ".spec.kind",
                ".spec.handoffKey"
            ]
        );
    }
}
