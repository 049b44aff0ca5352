//! Errors in OpenAI's shape. Every route of this door answers its errors as
//! `{"error": {"message", "type", "code", "param"}}` with the status the SDKs map to their
//! exception classes (400 `BadRequestError`, 401 `AuthenticationError`, 404
//! `NotFoundError`, 409 `ConflictError`, 429 `RateLimitError`, 5xx
//! `InternalServerError`). The rest of the API's [`ApiError`](crate::ApiError) bodies are
//! rewritten on the way out, so the same checks answer here in this shape; only refusals
//! made before a route is reached (authentication, the body reader) keep the API's own
//! `{"error": {"code", "message"}}`, which the SDKs read just as well.

use axum::body::Body;
use axum::http::{StatusCode, header};
use axum::response::Response;
use serde_json::{Value, json};

/// Error bodies bigger than this are left alone (ours are far smaller).
const MAX_ERROR_BODY: usize = 64 * 1024;

/// OpenAI's error `type` for a status.
pub fn error_type(status: StatusCode) -> &'static str {
    match status.as_u16() {
        401 => "authentication_error",
        403 => "permission_error",
        429 => "rate_limit_error",
        s if s >= 500 => "server_error",
        _ => "invalid_request_error",
    }
}

/// The OpenAI error body for `status`, `code` and `message`.
pub fn body(status: StatusCode, code: &str, message: &str) -> Value {
    json!({"error": {"message": message, "type": error_type(status), "code": code, "param": Value::Null}})
}

/// Middleware (`map_response`): rewrites a JSON error answer into OpenAI's shape.
pub(crate) async fn openai_errors(response: Response) -> Response {
    let status = response.status();
    let is_json = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    if !(status.is_client_error() || status.is_server_error()) || !is_json {
        return response;
    }
    let (mut parts, raw) = response.into_parts();
    let bytes = match axum::body::to_bytes(raw, MAX_ERROR_BODY).await {
        Ok(bytes) => bytes,
        Err(error) => {
            tracing::debug!(%error, "an error body could not be read");
            return Response::from_parts(parts, Body::empty());
        }
    };
    let rewritten = serde_json::from_slice::<Value>(&bytes)
        .ok()
        .and_then(|value| {
            let error = value.get("error")?;
            let code = error.get("code")?.as_str()?;
            let message = error.get("message")?.as_str()?;
            Some(body(status, code, message))
        });
    match rewritten {
        Some(value) => {
            let bytes = value.to_string();
            parts.headers.remove(header::CONTENT_LENGTH);
            Response::from_parts(parts, Body::from(bytes))
        }
        None => Response::from_parts(parts, Body::from(bytes)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::response::IntoResponse;

    #[tokio::test]
    async fn api_errors_are_rewritten_with_a_type() {
        let response = crate::ApiError::not_found("response", "resp_x_1").into_response();
        let response = openai_errors(response).await;
        assert_eq!(response.status(), StatusCode::NOT_FOUND);
        let bytes = axum::body::to_bytes(response.into_body(), 4096)
            .await
            .unwrap();
        let value: Value = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(
            value,
            json!({"error": {"message": "response resp_x_1 not found",
                             "type": "invalid_request_error", "code": "not_found", "param": null}})
        );
    }
}
