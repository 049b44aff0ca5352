//! The web page served at `/`. Placeholder: filled in separately.

use axum::Router;

use crate::AppState;

/// The web routes, merged into the server's router.
pub fn routes() -> Router<AppState> {
    Router::new()
}
