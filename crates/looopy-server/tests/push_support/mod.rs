//! Shared parts of the push-notification tests: a real webhook receiver on loopback (axum)
//! that records every request, can fail the first N and can hold requests at a gate; a
//! JSON-RPC helper; and the notifications a task's log says a webhook must receive.
#![allow(dead_code)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use looopy_a2a::{MappingState, to_v1};
use looopy_store::{PushConfigRecord, Store};
use looopy_testkit::server::TestServer;
use looopy_testkit::wait::eventually;
use serde_json::{Value, json};
use tokio::sync::Semaphore;

/// One request the receiver got.
#[derive(Debug, Clone)]
pub struct Hit {
    pub id: String,
    pub token: Option<String>,
    pub authorization: Option<String>,
    pub content_type: String,
    pub body: Value,
    /// Whether it was answered 2xx (acknowledged).
    pub acknowledged: bool,
}

#[derive(Clone, Default)]
struct ReceiverState {
    hits: Arc<Mutex<Vec<Hit>>>,
    fail_first: Arc<AtomicUsize>,
    gate: Option<Arc<Semaphore>>,
}

/// A webhook receiver on `127.0.0.1:0`.
pub struct Receiver {
    pub url: String,
    state: ReceiverState,
}

impl Receiver {
    /// Acknowledges everything.
    pub async fn start() -> Self {
        Self::with(0, None).await
    }

    /// Answers 500 to the first `fail_first` requests; with a gate, each request waits for
    /// a permit first (the test opens the gate when it wants).
    pub async fn with(fail_first: usize, gate: Option<Arc<Semaphore>>) -> Self {
        let state = ReceiverState {
            hits: Arc::default(),
            fail_first: Arc::new(AtomicUsize::new(fail_first)),
            gate,
        };
        let app = Router::new()
            .route("/hook", post(hook))
            .with_state(state.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        Self {
            url: format!("http://{addr}/hook"),
            state,
        }
    }

    /// Every request so far.
    pub fn hits(&self) -> Vec<Hit> {
        self.state.hits.lock().unwrap().clone()
    }

    /// The acknowledged requests.
    pub fn acknowledged(&self) -> Vec<Hit> {
        self.hits().into_iter().filter(|h| h.acknowledged).collect()
    }
}

async fn hook(State(state): State<ReceiverState>, headers: HeaderMap, body: String) -> StatusCode {
    if let Some(gate) = &state.gate {
        gate.acquire().await.unwrap().forget();
    }
    let header = |name: &str| headers.get(name).map(|v| v.to_str().unwrap().to_string());
    let fail = state
        .fail_first
        .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
        .is_ok();
    state.hits.lock().unwrap().push(Hit {
        id: header("x-a2a-notification-id").unwrap_or_default(),
        token: header("x-a2a-notification-token"),
        authorization: header("authorization"),
        content_type: header("content-type").unwrap_or_default(),
        body: serde_json::from_str(&body).unwrap_or(Value::Null),
        acknowledged: !fail,
    });
    if fail {
        StatusCode::INTERNAL_SERVER_ERROR
    } else {
        StatusCode::OK
    }
}

/// A JSON-RPC call to `/a2a` with `A2A-Version: version`; the whole response body.
pub async fn rpc(server: &TestServer, version: &str, method: &str, params: Value) -> Value {
    server
        .client
        .post(server.url("/a2a"))
        .header("A2A-Version", version)
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

/// A v1.0 user message.
pub fn message(text: &str) -> Value {
    json!({"messageId": uuid::Uuid::new_v4().to_string(), "role": "ROLE_USER", "parts": [{"text": text}]})
}

/// The task's configs once every one of them is done (its last notification delivered or
/// given up).
pub async fn all_done(store: &Store, task_id: &str) -> Vec<PushConfigRecord> {
    eventually(&format!("push configs of {task_id} done"), || async {
        let configs = store.list_push_configs(task_id).await.unwrap();
        (!configs.is_empty() && configs.iter().all(|c| c.done)).then_some(configs)
    })
    .await
}

/// The notifications (idempotency key, v1.0 body) a webhook on `task_id` must receive when
/// it follows the task from event `after` on: the task's logged events mapped as streams
/// map them.
pub async fn expected(
    store: &Store,
    context_id: &str,
    task_id: &str,
    after: u64,
) -> Vec<(String, Value)> {
    let events = store
        .event_log()
        .read_after(context_id, 0, 1_000_000)
        .await
        .unwrap();
    let mut mapping = MappingState::new(task_id);
    let mut out = Vec::new();
    for event in &events {
        for (i, item) in to_v1(event, &mut mapping).into_iter().enumerate() {
            if event.seq > after {
                out.push((
                    format!("{task_id}:{}:{i}", event.seq),
                    serde_json::to_value(&item).unwrap(),
                ));
            }
        }
    }
    out
}

/// The acknowledged notifications as (key, body), first delivery of each key only.
pub fn deduped(hits: &[Hit]) -> Vec<(String, Value)> {
    let mut seen = std::collections::HashSet::new();
    hits.iter()
        .filter(|h| h.acknowledged && seen.insert(h.id.clone()))
        .map(|h| (h.id.clone(), h.body.clone()))
        .collect()
}
