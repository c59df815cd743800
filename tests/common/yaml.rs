//! Reading the YAML files a suite checks (release artifacts, examples):
//! a file's text, and its documents as JSON values, each failure naming
//! the file.

use std::path::Path;

use serde_json::Value;

/// The text of `path`, else a panic naming it.
pub(crate) fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
}

/// Every YAML document of `text` (`what` names it), as JSON values;
/// empty documents are skipped.
pub(crate) fn documents(text: &str, what: &str) -> Vec<Value> {
    serde_saphyr::from_multiple::<Value>(text)
        .unwrap_or_else(|e| panic!("{what} is not YAML: {e}"))
        .into_iter()
        .filter(|doc| !doc.is_null())
        .collect()
}
