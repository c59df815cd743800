//! Handoffs as MCP resources: the template `handoff://{handoff_key}`, whose
//! key is percent-encoded (keys hold `/`, `#`, spaces, any UTF-8), and the
//! markdown a read returns. Pure: the server gates and reads (see
//! `server.rs`), as `get_handoff` does.

use percent_encoding::percent_decode_str;
#[cfg(test)]
use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};
use rmcp::model::{ResourceContents, ResourceTemplate};

use handoff_core::api::validation;

/// The scheme every handoff resource URI starts with.
pub(crate) const SCHEME: &str = "handoff://";
/// The one resource template.
pub(crate) const URI_TEMPLATE: &str = "handoff://{handoff_key}";
/// What a read returns.
pub(crate) const MIME_TYPE: &str = "text/markdown";

/// Encoded in a key: everything but RFC 3986's unreserved characters.
#[cfg(test)]
const KEY_ENCODE: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// The resource template of handoffs.
pub(crate) fn template() -> ResourceTemplate {
    ResourceTemplate::new(URI_TEMPLATE, "handoff")
        .with_title("Handoff")
        .with_description(
            "The current handoff (compact markdown summary) of a continuation key; \
             percent-encode the key (`/` is %2F, `#` is %23, a space is %20).",
        )
        .with_mime_type(MIME_TYPE)
}

/// The URI of the handoff of `key` (what a client builds; the tests check
/// that [`key_of`] reads it back).
#[cfg(test)]
fn uri_for(key: &str) -> String {
    format!("{SCHEME}{}", utf8_percent_encode(key, KEY_ENCODE))
}

/// The key a handoff URI names, decoded and validated; the error says what
/// is wrong with the URI.
pub(crate) fn key_of(uri: &str) -> Result<String, String> {
    let form = format!("expected {URI_TEMPLATE} with the key percent-encoded");
    let Some(encoded) = uri.strip_prefix(SCHEME) else {
        return Err(format!("`{uri}` is not a handoff resource: {form}"));
    };
    if encoded.contains(['/', '#', '?', ' ']) {
        return Err(format!(
            "`{uri}` is not a handoff resource: the key holds an unencoded `/`, `#`, `?` or space; {form}"
        ));
    }
    if let Some(at) = bad_escape(encoded) {
        return Err(format!(
            "`{uri}` is not a handoff resource: `%` at byte {at} of the key is not followed by two hex digits; {form}"
        ));
    }
    let key = percent_decode_str(encoded)
        .decode_utf8()
        .map_err(|_| format!("`{uri}` is not a handoff resource: the key is not UTF-8; {form}"))?
        .into_owned();
    validation::handoff_key(&key)
        .map_err(|e| format!("`{uri}` does not name a valid handoff key: {e}"))?;
    Ok(key)
}

/// The position of the first `%` not followed by two hex digits.
fn bad_escape(encoded: &str) -> Option<usize> {
    let bytes = encoded.as_bytes();
    bytes.iter().enumerate().find_map(|(i, b)| {
        let valid = bytes
            .get(i + 1..i + 3)
            .is_some_and(|hex| hex.iter().all(u8::is_ascii_hexdigit));
        (*b == b'%' && !valid).then_some(i)
    })
}

/// What a read of `uri` returns: the body, as markdown.
pub(crate) fn contents(uri: &str, body: &str) -> ResourceContents {
    ResourceContents::text(body, uri).with_mime_type(MIME_TYPE)
}

/// Why a read of the handoff of `key` found nothing.
pub(crate) fn not_found(key: &str, uri: &str) -> String {
    format!(
        "resource not found: no handoff exists for `{key}` ({uri}); there is no prior context \
         to continue, so start fresh"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_round_trip_through_uris() {
        // (key, its URI)
        let cases = [
            ("plain-key_1.2~x", "handoff://plain-key_1.2~x"),
            ("acme/api#42", "handoff://acme%2Fapi%2342"),
            ("a key with spaces", "handoff://a%20key%20with%20spaces"),
            ("100% done", "handoff://100%25%20done"),
            (
                "zürich/チケット",
                "handoff://z%C3%BCrich%2F%E3%83%81%E3%82%B1%E3%83%83%E3%83%88",
            ),
            ("q?x=1&y", "handoff://q%3Fx%3D1%26y"),
        ];
        for (key, uri) in cases {
            assert_eq!(uri_for(key), uri, "{key:?}");
            assert_eq!(key_of(uri).as_deref(), Ok(key), "{uri:?}");
        }
    }

    #[test]
    fn lowercase_escapes_decode() {
        assert_eq!(key_of("handoff://acme%2fapi").as_deref(), Ok("acme/api"));
    }

    #[test]
    fn malformed_uris_are_refused_with_the_reason() {
        // (uri, a fragment of the reason)
        let cases = [
            ("https://acme%2Fapi", "not a handoff resource"),
            ("handoff:acme", "not a handoff resource"),
            ("handoff://", "handoff_key"),
            ("handoff://acme/api", "unencoded"),
            ("handoff://acme#42", "unencoded"),
            ("handoff://a b", "unencoded"),
            ("handoff://100%", "byte 3"),
            ("handoff://%zz", "byte 0"),
            ("handoff://%4", "byte 0"),
            ("handoff://%FF%FE", "not UTF-8"),
            ("handoff://tab%09here", "handoff_key"),
            ("handoff://%20", "handoff_key"),
        ];
        for (uri, reason) in cases {
            let err = key_of(uri).expect_err(uri);
            assert!(err.contains(reason), "{uri:?}: {err}");
            assert!(err.contains(uri), "{uri:?}: {err}");
        }
    }

    #[test]
    fn a_read_is_markdown_of_the_body() {
        let uri = uri_for("acme/api#42");
        let got = serde_json::to_value(contents(&uri, "## State\ndone")).expect("json");
        assert_eq!(got["uri"], "handoff://acme%2Fapi%2342");
        assert_eq!(got["mimeType"], "text/markdown");
        assert_eq!(got["text"], "## State\ndone");
    }

    #[test]
    fn the_template_is_the_documented_one() {
        let t = serde_json::to_value(template()).expect("json");
        assert_eq!(t["uriTemplate"], "handoff://{handoff_key}");
        assert_eq!(t["mimeType"], "text/markdown");
    }
}
