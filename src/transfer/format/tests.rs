use super::*;

const HEADER: &str = r#"{"apiVersion":"handoff.dev/export/v1","kind":"HandoffExport","namespace":"a","exportedAt":"2026-12-05T09:00:00Z","history":false}"#;
/// An AWS access key id the credential scan finds (not a real one).
const AWS_KEY: &str = "AKIAQZ7HX3MK2WJ5RT4B";

fn entry_line(key: &str, body: &str) -> String {
    serde_json::json!({
        "name": name_for_key(key),
        "spec": {"handoffKey": key, "project": "shop", "body": body},
        "revision": 2,
        "updatedAt": "2026-12-05T08:00:00Z",
    })
    .to_string()
}

fn file(lines: &[String]) -> String {
    let mut text = lines.join("\n");
    text.push('\n');
    text
}

fn end(n: u64) -> String {
    line(&End::new(n)).expect("end")
}

#[test]
fn what_the_export_writes_is_what_the_import_reads() {
    let mut spec = HandoffSpec::new("acme/api#42", "shop", "## State\nwip\n");
    spec.repo = Some("org/api".to_owned());
    spec.kind = Some("issue".to_owned());
    spec.created_by = Some("alice".to_owned());
    let entry = Entry {
        name: name_for_key("acme/api#42"),
        spec,
        created_at: Some("2026-12-01T00:00:00Z".to_owned()),
        revision: Some(3),
        updated_at: Some("2026-12-05T08:00:00Z".to_owned()),
        history: vec![Revision {
            revision: 1,
            written_at: "2026-12-01T00:00:00Z".to_owned(),
            created_by: "alice".to_owned(),
            project: "shop".to_owned(),
            repo: None,
            kind: Some("issue".to_owned()),
            body: "first".to_owned(),
        }],
    };
    let header = Header {
        api_version: API_VERSION.to_owned(),
        kind: HEADER_KIND.to_owned(),
        namespace: "team-a".to_owned(),
        project: Some("shop".to_owned()),
        exported_at: "2026-12-05T09:00:00Z".to_owned(),
        history: true,
    };
    let text = file(&[
        line(&header).expect("header"),
        line(&entry).expect("entry"),
        end(1),
    ]);
    assert_eq!(
        parse(&text),
        Ok(Export {
            header,
            entries: vec![entry]
        })
    );
}

#[test]
fn an_empty_export_is_valid() {
    let got = parse(&file(&[HEADER.to_owned(), end(0)])).expect("valid");
    assert!(got.entries.is_empty());
}

#[test]
fn each_bad_file_is_refused_naming_where_and_what() {
    let ok = entry_line("a", "fine");
    let header_with = |field: &str, value: serde_json::Value| {
        let mut h: serde_json::Value = serde_json::from_str(HEADER).expect("header");
        h[field] = value;
        h.to_string()
    };
    let mut no_body: serde_json::Value = serde_json::from_str(&ok).expect("entry");
    no_body["spec"]
        .as_object_mut()
        .expect("spec")
        .remove("body");
    let mut extra: serde_json::Value = serde_json::from_str(&ok).expect("entry");
    extra["spec"]["ttl"] = serde_json::json!("1h");
    let mut twin: serde_json::Value = serde_json::from_str(&ok).expect("entry");
    twin["name"] = serde_json::json!("my-twin");
    let mut bad_time: serde_json::Value = serde_json::from_str(&ok).expect("entry");
    bad_time["updatedAt"] = serde_json::json!("yesterday");
    let mut bad_history: serde_json::Value = serde_json::from_str(&ok).expect("entry");
    bad_history["history"] = serde_json::json!([{
        "revision": "one", "writtenAt": "2026-12-05T08:00:00Z", "createdBy": "",
        "project": "shop", "body": "x",
    }]);
    // (case, file, fragments every one of which the errors hold)
    let cases: Vec<(&str, String, Vec<&str>)> = vec![
        ("empty", String::new(), vec!["the file is empty"]),
        (
            "not JSON",
            file(&["{nope".to_owned(), end(0)]),
            vec!["line 1 (header)", "not valid JSON"],
        ),
        (
            "another version",
            file(&[
                header_with("apiVersion", serde_json::json!("handoff.dev/export/v2")),
                end(0),
            ]),
            vec!["line 1 (header)", "`apiVersion`", "handoff.dev/export/v2"],
        ),
        (
            "no end line: truncated",
            file(&[HEADER.to_owned(), ok.clone()]),
            vec!["line 2", "truncated"],
        ),
        (
            "the count disagrees",
            file(&[HEADER.to_owned(), ok.clone(), end(2)]),
            vec!["line 3", "`handoffs`", "says 2, the file holds 1"],
        ),
        (
            "a missing body",
            file(&[HEADER.to_owned(), no_body.to_string(), end(1)]),
            vec!["line 2, entry 1, key `a`", "`spec.body`", "missing"],
        ),
        (
            "an unknown field",
            file(&[HEADER.to_owned(), extra.to_string(), end(1)]),
            vec!["entry 1", "unknown field `spec.ttl`"],
        ),
        (
            "a name not derived from the key",
            file(&[HEADER.to_owned(), twin.to_string(), end(1)]),
            vec!["entry 1, key `a`", "`name`", "\"my-twin\"", "a twin"],
        ),
        (
            "a time that is none",
            file(&[HEADER.to_owned(), bad_time.to_string(), end(1)]),
            vec!["key `a`", "`updatedAt`", "RFC 3339", "yesterday"],
        ),
        (
            "a bad history",
            file(&[HEADER.to_owned(), bad_history.to_string(), end(1)]),
            vec![
                "key `a`",
                "history[0]",
                "`history[].revision`",
                "an integer; got a string",
            ],
        ),
        (
            "a body over the rule",
            file(&[HEADER.to_owned(), entry_line("a", "bell \u{7}"), end(1)]),
            vec!["key `a`", "`spec.body`"],
        ),
        (
            "a project that is no label value",
            file(&[
                HEADER.to_owned(),
                entry_line("a", "x").replace("\"shop\"", "\"a shop\""),
                end(1),
            ]),
            vec!["key `a`", "`spec.project`", "valid label value"],
        ),
        (
            "a credential in a body",
            file(&[
                HEADER.to_owned(),
                ok.clone(),
                entry_line("b", &format!("key {AWS_KEY}")),
                end(2),
            ]),
            vec![
                "line 3, entry 2, key `b`",
                "`spec.body`",
                "rule aws",
                "not shown",
            ],
        ),
        (
            "a key holding a terminal escape, shown escaped",
            file(&[HEADER.to_owned(), entry_line("a\u{1b}[2J", "x"), end(1)]),
            vec!["entry 1, key `a", "`spec.handoffKey`"],
        ),
        (
            "two entries of one key",
            file(&[HEADER.to_owned(), ok.clone(), ok.clone(), end(2)]),
            vec!["entry 2, key `a`", "a twin: entry 1 holds the same key"],
        ),
    ];
    for (case, text, fragments) in cases {
        let errors = parse(&text).expect_err(case).join("\n");
        for fragment in fragments {
            assert!(
                errors.contains(fragment),
                "{case}: {fragment:?} not in {errors}"
            );
        }
        assert!(
            !errors.contains(AWS_KEY),
            "{case}: the secret is shown: {errors}"
        );
        assert!(
            !errors.contains('\u{1b}'),
            "{case}: a raw escape: {errors:?}"
        );
    }
}

#[test]
fn a_credential_in_a_history_body_is_refused_too() {
    let mut e: serde_json::Value = serde_json::from_str(&entry_line("a", "x")).expect("entry");
    e["history"] = serde_json::json!([{
        "revision": 1, "writtenAt": "2026-12-05T08:00:00Z", "createdBy": "",
        "project": "shop", "body": format!("aws {AWS_KEY}"),
    }]);
    let errors = parse(&file(&[HEADER.to_owned(), e.to_string(), end(1)]))
        .expect_err("refused")
        .join("\n");
    assert!(
        errors.contains("history[0]: invalid `history[].body`"),
        "{errors}"
    );
    assert!(!errors.contains(AWS_KEY), "{errors}");
}
