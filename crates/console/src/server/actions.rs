//! The only writes: deleting a handoff and rejecting an offer, each a GET
//! of its confirmation page and a POST of the confirmed form (the Origin
//! rule has run before; the CSRF rule runs here, before anything is
//! read), answered with a 303 back to the list. And export, a download.
//! RBAC decides each as the person: the console holds no right of its own.

use std::collections::HashMap;

use axum::Form;
use axum::extract::rejection::FormRejection;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

use super::pages::{Params, PlaceOf, params, place, signed};
use super::router::{Early, Shared, bad_input, either, forbidden, page, read_error, see_other};
use crate::data::{self, ExportFormat};
use crate::render;
use crate::routes;

/// A posted form's fields, or none when it could not be read.
type Fields = Result<Form<HashMap<String, String>>, FormRejection>;

/// Signs in for the route's namespace and checks the form's CSRF token;
/// the refusal page otherwise.
async fn confirmed(
    app: &Shared,
    headers: &HeaderMap,
    namespace: &str,
    fields: Fields,
) -> Result<super::door::Signed, Early> {
    let signed = signed(app, headers, Some(namespace)).await?;
    let fields = fields.map(|Form(f)| f).unwrap_or_default();
    signed
        .check_csrf(&app.0.csrf, fields.get("csrf").map(String::as_str))
        .map_err(|refusal| Early::from(forbidden(Some(&signed.viewer), refusal.message())))?;
    Ok(signed)
}

/// The confirmation page of deleting a handoff.
pub(super) async fn confirm_delete(app: Shared, headers: HeaderMap, at: PlaceOf) -> Response {
    either(
        async {
            let at = place(at)?;
            let signed = signed(&app, &headers, Some(&at.namespace)).await?;
            let row = data::handoff_row(signed.caller()?, &at.name)
                .await
                .map_err(|err| Early::from(read_error(&signed.viewer, err)))?;
            Ok(page(
                StatusCode::OK,
                render::confirm_delete(&signed.viewer, &at.namespace, &row),
            ))
        }
        .await,
    )
}

/// Deletes a handoff (confirmed), then back to its project's list.
pub(super) async fn delete(
    app: Shared,
    headers: HeaderMap,
    at: PlaceOf,
    fields: Fields,
) -> Response {
    either(async {
        let at = place(at)?;
        let signed = confirmed(&app, &headers, &at.namespace, fields).await?;
        let caller = signed.caller()?;
        let row = data::handoff_row(caller, &at.name)
            .await
            .map_err(|err| Early::from(read_error(&signed.viewer, err)))?;
        data::delete_handoff(caller, &app.0.services, &at.name)
            .await
            .map_err(|err| Early::from(read_error(&signed.viewer, err)))?;
        tracing::info!(user = %signed.viewer.username, namespace = %at.namespace, handoff = %at.name, "deleted a handoff from the console");
        Ok(see_other(&routes::project(
            &at.namespace,
            &row.project,
            None,
            None,
            None,
        )))
    }
    .await)
}

/// The confirmation page of rejecting an offer.
pub(super) async fn confirm_reject(app: Shared, headers: HeaderMap, at: PlaceOf) -> Response {
    either(
        async {
            let at = place(at)?;
            let signed = signed(&app, &headers, Some(&at.namespace)).await?;
            let row = data::offer_row(signed.caller()?, &at.name)
                .await
                .map_err(|err| Early::from(read_error(&signed.viewer, err)))?;
            Ok(page(
                StatusCode::OK,
                render::confirm_reject(&signed.viewer, &at.namespace, &row),
            ))
        }
        .await,
    )
}

/// Rejects an offer (confirmed), then back to the offers.
pub(super) async fn reject(
    app: Shared,
    headers: HeaderMap,
    at: PlaceOf,
    fields: Fields,
) -> Response {
    either(async {
        let at = place(at)?;
        let signed = confirmed(&app, &headers, &at.namespace, fields).await?;
        data::reject_offer(signed.caller()?, &app.0.services, &at.name)
            .await
            .map_err(|err| Early::from(read_error(&signed.viewer, err)))?;
        tracing::info!(user = %signed.viewer.username, namespace = %at.namespace, offer = %at.name, "rejected an offer from the console");
        Ok(see_other(&routes::offers(&at.namespace)))
    }
    .await)
}

/// Pure: the export format a `?format=` value names.
fn export_format(value: &str) -> Option<ExportFormat> {
    match value {
        "markdown" | "" => Some(ExportFormat::Markdown),
        "json" => Some(ExportFormat::Json),
        _ => None,
    }
}

/// Pure: a file name safe in a `Content-Disposition` header: letters,
/// digits, `.`, `-` and `_` kept, anything else `_`.
fn safe_file_name(name: &str) -> String {
    let safe: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_') {
                c
            } else {
                '_'
            }
        })
        .collect();
    if safe.trim_matches('.').is_empty() {
        "handoffs".to_owned()
    } else {
        safe
    }
}

/// A project's handoffs as a download.
pub(super) async fn export(
    app: Shared,
    headers: HeaderMap,
    at: PlaceOf,
    query: Params,
) -> Response {
    either(
        async {
            let at = place(at)?;
            let signed = signed(&app, &headers, Some(&at.namespace)).await?;
            let params = params(&signed.viewer, query)?;
            let asked = params.get("format").map(String::as_str).unwrap_or_default();
            let format = export_format(asked).ok_or_else(|| {
                Early::from(bad_input(
                    &signed.viewer,
                    "format",
                    "markdown or json",
                    &format!("{asked:?} is neither"),
                ))
            })?;
            let export = data::export(signed.caller()?, &at.project, format)
                .await
                .map_err(|err| Early::from(read_error(&signed.viewer, err)))?;
            let disposition = format!(
                "attachment; filename=\"{}\"",
                safe_file_name(&export.file_name)
            );
            let disposition = HeaderValue::from_str(&disposition)
                .unwrap_or_else(|_| HeaderValue::from_static("attachment"));
            Ok((
                [
                    (
                        header::CONTENT_TYPE,
                        HeaderValue::from_static(export.content_type),
                    ),
                    (header::CONTENT_DISPOSITION, disposition),
                ],
                export.bytes,
            )
                .into_response())
        }
        .await,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn export_formats() {
        assert!(matches!(export_format("json"), Some(ExportFormat::Json)));
        assert!(matches!(
            export_format("markdown"),
            Some(ExportFormat::Markdown)
        ));
        assert!(matches!(export_format(""), Some(ExportFormat::Markdown)));
        assert!(export_format("JSON").is_none());
        assert!(export_format("yaml").is_none());
    }

    #[test]
    fn file_names() {
        let cases = [
            ("shop.md", "shop.md"),
            ("a b\"c.json", "a_b_c.json"),
            ("x\r\ny", "x__y"),
            ("..", "handoffs"),
            ("", "handoffs"),
            ("ünï.md", "_n_.md"),
        ];
        for (name, want) in cases {
            assert_eq!(safe_file_name(name), want, "{name:?}");
        }
    }
}
