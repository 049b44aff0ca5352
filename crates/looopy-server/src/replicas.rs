//! What a server does as one of several replicas sharing a PostgreSQL store: sweep for
//! contexts whose replica died (expired leases) and fail (or continue) their turns, give
//! the agent the bus (it forwards messages and cancels to the replica running a turn, and
//! acts on theirs), and answer `/readyz` from the database and the bus.

use std::time::Duration;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use looopy_store::Bus;
use serde_json::json;

use crate::AppState;

/// Starts the sweeper and, with a bus, the control-message listener. Both end with the
/// runtime (the server's process). Turns the sweeper continues (`--resume-interrupted`) are
/// tracked like any turn started here.
pub(crate) fn start(state: &AppState) {
    let agent = state.agent().clone();
    let bus = state.config().bus.clone();
    let every = (agent.config().lease_ttl / 3).max(Duration::from_millis(200));
    let sweeper = state.clone();
    tokio::spawn(async move {
        loop {
            match sweeper
                .agent()
                .take_over_expired("the replica running it stopped")
                .await
            {
                Ok(taken) if !taken.is_empty() => {
                    tracing::warn!(
                        failed = taken.failed.len(),
                        resumed = taken.resumed.len(),
                        "took over the turns of a replica that stopped"
                    );
                    for handle in taken.resumed {
                        sweeper.track_turn(handle);
                    }
                }
                Ok(_) => {}
                Err(error) => tracing::warn!(%error, "sweeping expired context leases failed"),
            }
            tokio::time::sleep(every).await;
        }
    });
    // Messages and cancels for turns running elsewhere are the agent's to send and take.
    if let Some(bus) = bus {
        agent.attach_bus(bus);
    }
}

/// `GET /readyz`: 200 when the database answers (and the bus, when there is one), else 503
/// saying which part failed. Liveness stays `/healthz`.
pub(crate) async fn readyz(State(state): State<AppState>) -> Response {
    let store = state.store();
    let database = match store.ping().await {
        Ok(()) => "ok".to_string(),
        Err(error) => error.to_string(),
    };
    let bus = match &state.config().bus {
        Some(bus) => Some(match bus.ping().await {
            Ok(()) => "ok".to_string(),
            Err(error) => error.to_string(),
        }),
        None => None,
    };
    let ready = database == "ok" && bus.as_deref().is_none_or(|b| b == "ok");
    let status = if ready {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    let body = json!({
        "status": if ready { "ready" } else { "unavailable" },
        "replica": store.is_shared().then(|| store.replica_id().to_string()),
        "database": database,
        "bus": bus.map(|b| json!({"kind": state.config().bus.as_ref().map(Bus::kind), "status": b})),
    });
    (status, Json(body)).into_response()
}
