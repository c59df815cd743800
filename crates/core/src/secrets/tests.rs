//! The detector against the corpus (`tests/fixtures/secrets/`), fixed data:
//! exact counts, every rule covered, findings placed and redacted.

use super::*;

include!(concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../tests/fixtures/secrets/corpus.rs"
));

/// The corpus as scanned: (misses or misnamed, false alarms).
fn score() -> (Vec<String>, Vec<String>) {
    let mut misses = Vec::new();
    for (rule, text) in true_positives() {
        let found = find(&text);
        if found.first().map(|f| f.rule) != Some(rule) {
            misses.push(format!(
                "{rule}: {text:?} gave {:?}",
                found.first().map(|f| f.rule)
            ));
        }
    }
    let mut alarms = Vec::new();
    for text in honest_texts() {
        let found = find(&text);
        if let Some(f) = found.first() {
            alarms.push(format!("{text:?}: {}", f.describe()));
        }
    }
    (misses, alarms)
}

#[test]
fn the_corpus_has_no_miss_and_no_false_alarm() {
    let (misses, alarms) = score();
    assert!(
        misses.is_empty() && alarms.is_empty(),
        "{} misses:\n{}\n{} false alarms:\n{}",
        misses.len(),
        misses.join("\n"),
        alarms.len(),
        alarms.join("\n")
    );
}

/// The corpus is fixed data: its size is part of what the tests prove
/// (at least 150 true positives of at least 60 rules, 150 honest texts).
/// Change these numbers with the corpus.
#[test]
fn the_corpus_has_its_size() {
    let positives = true_positives();
    let ids: std::collections::BTreeSet<&str> = positives.iter().map(|(id, _)| *id).collect();
    assert_eq!(
        (
            positives.len(),
            ids.len(),
            rules::all().count(),
            honest_texts().len()
        ),
        (528, 234, 234, 389),
        "(true positives, their rule ids, rules, honest texts)"
    );
}

#[test]
fn every_rule_has_a_true_positive() {
    let positives = true_positives();
    for rule in rules::all() {
        assert!(
            positives.iter().any(|(id, _)| *id == rule.id),
            "no corpus entry for {}",
            rule.id
        );
    }
}

#[test]
fn findings_name_the_line_the_column_and_the_bytes() {
    let key = format!("AKIA{}", fill("QZ7HX3MK2WJ5RT4B", 16));
    let text = format!("## State\nok\n\nid é {key} here\n");
    let start = text.find("AKIA").expect("present");
    assert_eq!(
        find(&text),
        vec![Finding {
            rule: "aws-access-token",
            description: "an AWS access key id",
            line: 4,
            column: 6,
            range: start..start + 20,
            seen: Seen::AsWritten,
        }]
    );
}

#[test]
fn a_decoded_view_names_the_original_place() {
    let token = format!("ghp_{}", fill("aB3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1xY", 36));
    let wrapped = format!("x\n  GH={}\n  {}", &token[..10], &token[10..]);
    let found = find(&wrapped);
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(
        (found[0].rule, found[0].line, found[0].column, found[0].seen),
        ("github-pat", 2, 6, Seen::Unwrapped)
    );
    assert_eq!(
        &wrapped[found[0].range.clone()],
        format!("{}\n  {}", &token[..10], &token[10..])
    );

    let blob = b64(&format!("export GH_TOKEN={token}"));
    let text = format!("## Refs\nconfig {blob} end");
    let found = find(&text);
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(
        (found[0].rule, found[0].line, found[0].column, found[0].seen),
        ("github-pat", 2, 8, Seen::Base64)
    );
    assert_eq!(&text[found[0].range.clone()], blob);
}

#[test]
fn describing_a_finding_never_shows_the_secret() {
    for (_, text) in true_positives() {
        for finding in find(&text) {
            let secret = &text[finding.range.clone()];
            assert!(!finding.describe().contains(secret), "{finding:?}");
        }
    }
}

#[test]
fn redaction_replaces_each_finding_by_its_rule() {
    let pem = "-----BEGIN OPENSSH PRIVATE KEY-----";
    let key = format!("AKIA{}", fill("QZ7HX3MK2WJ5RT4B", 16));
    let cases = [
        ("nothing here".to_owned(), "nothing here".to_owned()),
        (
            format!("key {key} and\n{pem}\nend"),
            "key [redacted: aws-access-token] and\n[redacted: private-key]\nend".to_owned(),
        ),
        (
            "DB_PASS=Tr0ub4dor-and-3 ok".to_owned(),
            "DB_PASS=[redacted: password-assignment] ok".to_owned(),
        ),
    ];
    for (text, want) in cases {
        assert_eq!(redact(&text), want);
        assert!(find(&redact(&text)).is_empty());
    }
    for (_, text) in true_positives() {
        assert_eq!(find(&redact(&text)), vec![], "redacted: {}", redact(&text));
    }
}
