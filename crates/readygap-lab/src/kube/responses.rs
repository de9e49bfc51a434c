//! The API server's responses: a JSON body, and a Kubernetes `Status` error (used by the
//! routes of `api` and by the subresources and authorisation beside them).

use super::watch::status;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::Value;

/// A JSON response.
pub fn json_response(code: StatusCode, v: &Value) -> Response {
    (
        code,
        [(header::CONTENT_TYPE, "application/json")],
        v.to_string(),
    )
        .into_response()
}

/// A Status error response.
pub fn error(code: u16, reason: &str, message: &str) -> Response {
    let sc = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    json_response(sc, &status(code, reason, message))
}
