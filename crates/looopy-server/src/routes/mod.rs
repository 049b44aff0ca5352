//! The REST routes under `/v1`, plus `/healthz`.

mod artifact_content;
mod artifacts;
mod authorize;
mod contexts;
mod events;
mod messages;
mod page;
mod tasks;

use axum::Json;
use axum::Router;
use axum::routing::{get, post};
use serde_json::{Value, json};

use crate::AppState;

/// Where OAuth authorization servers send the user back to.
pub const OAUTH_CALLBACK_PATH: &str = "/v1/oauth/callback";

/// The `/v1` API and the health check.
pub(crate) fn api_routes() -> Router<AppState> {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(crate::replicas::readyz))
        .route("/v1/contexts", get(contexts::list_contexts))
        .route(
            "/v1/contexts/{context_id}",
            get(contexts::get_context).delete(contexts::delete_context),
        )
        .route(
            "/v1/contexts/{context_id}/messages",
            post(messages::post_message).get(messages::get_messages),
        )
        .route("/v1/contexts/{context_id}/events", get(events::get_events))
        .route("/v1/tasks/{task_id}", get(tasks::get_task))
        .route(
            "/v1/tasks/{task_id}/artifacts",
            get(artifacts::list_artifacts),
        )
        .route(
            "/v1/tasks/{task_id}/artifacts/{artifact_id}",
            get(artifact_content::get_artifact_content),
        )
        .route("/v1/tasks/{task_id}/input", post(tasks::provide_input))
        .route("/v1/tasks/{task_id}/cancel", post(tasks::cancel_task))
        .route(
            "/v1/tasks/{task_id}/auth",
            post(authorize::provide_credentials),
        )
        .route(OAUTH_CALLBACK_PATH, get(authorize::oauth_callback))
}

async fn healthz() -> Json<Value> {
    Json(json!({"status": "ok"}))
}
