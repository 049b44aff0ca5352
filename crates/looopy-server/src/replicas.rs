//! What a server does as one of several replicas sharing a PostgreSQL store: sweep for
//! contexts whose replica died (expired leases) and fail their turns, act on control
//! messages from the other replicas (a cancel of a turn running here), forward a cancel to
//! the replica running the turn, and answer `/readyz` from the database and the bus.

use std::time::Duration;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use looopy_agent::Agent;
use looopy_store::Bus;
use serde_json::json;

use crate::{ApiError, AppState};

/// Starts the sweeper and, with a bus, the control-message listener. Both end with the
/// runtime (the server's process).
pub(crate) fn start(agent: &Agent, bus: Option<Bus>) {
    let every = (agent.config().lease_ttl / 3).max(Duration::from_millis(200));
    let sweeper = agent.clone();
    tokio::spawn(async move {
        loop {
            match sweeper
                .take_over_expired("the replica running it stopped")
                .await
            {
                Ok(failed) if !failed.is_empty() => {
                    tracing::warn!(
                        count = failed.len(),
                        "failed the turns of a replica that stopped"
                    );
                }
                Ok(_) => {}
                Err(error) => tracing::warn!(%error, "sweeping expired context leases failed"),
            }
            tokio::time::sleep(every).await;
        }
    });
    if let Some(bus) = bus {
        let agent = agent.clone();
        let mut controls = bus.controls();
        tokio::spawn(async move {
            loop {
                let control = match controls.recv().await {
                    Ok(control) => control,
                    Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => continue,
                    Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
                };
                if control.topic != "cancel" {
                    tracing::debug!(topic = %control.topic, "ignoring an unknown control message");
                    continue;
                }
                let Some(task_id) = control.body.get("taskId").and_then(|v| v.as_str()) else {
                    continue;
                };
                tracing::info!(%task_id, from = %control.from, "cancel forwarded by another replica");
                if let Err(error) = agent.cancel(task_id).await {
                    tracing::warn!(%task_id, %error, "forwarded cancel failed");
                }
            }
        });
    }
}

/// Sends a cancel of `task_id` to `replica`, which runs its turn.
pub(crate) async fn forward_cancel(
    state: &AppState,
    replica: &str,
    task_id: &str,
) -> Result<(), ApiError> {
    let Some(bus) = &state.config().bus else {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            "running_elsewhere",
            format!(
                "task {task_id} runs on replica {replica}, and this server has no bus to reach it"
            ),
        ));
    };
    bus.send_control(replica, "cancel", json!({ "taskId": task_id }))
        .await
        .map_err(|error| {
            ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "replica_unreachable",
                format!("could not reach replica {replica} running task {task_id}: {error}"),
            )
        })
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
