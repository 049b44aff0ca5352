//! The A2A protocol endpoints (agent card, JSON-RPC). Placeholder: filled in separately.

use axum::Router;

use crate::AppState;

/// The A2A routes, merged into the server's router.
pub fn routes() -> Router<AppState> {
    Router::new()
}
