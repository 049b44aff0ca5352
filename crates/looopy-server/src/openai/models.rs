//! `GET /v1/models`: the one model this server answers as, `looopy` — the agent itself.
//! `[[agents]]` entries are sub-agents the model calls as tools; the server cannot run one
//! as a turn of its own, so none is listed (or accepted as `model`).

use axum::Json;
use axum::http::StatusCode;
use serde_json::{Value, json};

use crate::ApiError;

/// The model name of this server's agent.
pub const MODEL: &str = "looopy";

/// `GET /v1/models` in OpenAI's list shape.
pub(crate) async fn list() -> Json<Value> {
    Json(json!({"object": "list", "data": [model()]}))
}

/// `GET /v1/models/{model}`.
pub(crate) async fn retrieve(
    crate::extract::ApiPath(name): crate::extract::ApiPath<String>,
) -> Result<Json<Value>, ApiError> {
    check(Some(&name))?;
    Ok(Json(model()))
}

fn model() -> Value {
    // `created` is fixed: the agent has no release date, and a list must not change
    // between calls.
    json!({"id": MODEL, "object": "model", "created": 0, "owned_by": "looopy"})
}

/// The model a request names, when this server answers as it (none: `looopy`); 404
/// `model_not_found` otherwise, as OpenAI answers an unknown model.
pub(crate) fn check(model: Option<&str>) -> Result<String, ApiError> {
    match model {
        None | Some(MODEL) => Ok(MODEL.to_string()),
        Some(other) => Err(ApiError::new(
            StatusCode::NOT_FOUND,
            "model_not_found",
            format!("the model {other:?} does not exist; this server answers as {MODEL:?}"),
        )),
    }
}
