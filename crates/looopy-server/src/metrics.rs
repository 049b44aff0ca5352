//! `GET /metrics`: the process's metrics in the Prometheus text format.
//!
//! The libraries record through the `metrics` facade (a no-op until a recorder is
//! installed); the server installs a Prometheus recorder for the process the first time a
//! router is built, and renders it into this route — no listener of its own, so the route
//! sits behind the same authentication as the API unless
//! [`ServerConfig::metrics_public`](crate::ServerConfig::metrics_public) says otherwise.
//! An application that installed its own `metrics` recorder first keeps it; the route then
//! answers 404 `metrics_unavailable` and its recorder gets the same metrics.
//!
//! Every metric is exported from the start, at 0 (gauges), with no samples (histograms) or
//! with its series of known label values at 0 (counters: every `state`, `direction`,
//! `reason`, `via` and push `outcome`; the `kind`s of a plain turn's events; `success` and
//! `error` of each tool the agent has when the router is built) — see [`zero`]. A scraper
//! then sees `looopy_sse_streams 0` rather than nothing, so alerts like
//! `looopy_sse_streams == 0` or `rate(looopy_turns_total{state="failed"}[5m])` work on a
//! fresh server (`looopy-cli/tests/metrics_names.rs` checks the README's table against a
//! fresh `looopy serve`).
//!
//! | metric | type | labels |
//! |---|---|---|
//! | `looopy_turns_total` | counter | `state` the run ended in |
//! | `looopy_turn_duration_seconds` | histogram | |
//! | `looopy_events_total` | counter | `kind` of the committed event |
//! | `looopy_event_log_commit_seconds` | histogram | |
//! | `looopy_llm_time_to_first_token_seconds` | histogram | |
//! | `looopy_llm_tokens_total` | counter | `direction`: `input`, `output` |
//! | `looopy_tool_calls_total` | counter | `tool` (`unknown` for unregistered names), `outcome`: `success`, `error`, `canceled`, `input_required` |
//! | `looopy_sse_streams` | gauge | |
//! | `looopy_sse_disconnects_total` | counter | `reason`: `settled`, `client_gone`, `lagged`, `shutdown`, `log_closed`, `store_failed`, `storage_unavailable` |
//! | `looopy_sse_catch_ups_total` | counter | |
//! | `looopy_replica_events_delivered_total` | counter | `via`: `bus`, `sweep` |
//! | `looopy_push_notifications_total` | counter | `outcome`: `delivered`, `refused`, `gave_up`, `retried` |
//! | `looopy_push_delivery_seconds` | histogram | |

use std::sync::OnceLock;
use std::time::Duration;

use axum::Router;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use looopy_agent::metric;
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};

use crate::{ApiError, AppState};

/// The path of the route.
pub const PATH: &str = "/metrics";
/// Gauge: event streams open now (REST and A2A).
pub const SSE_STREAMS: &str = "looopy_sse_streams";
/// Counter, `reason`: event streams that ended, and why.
pub const SSE_DISCONNECTS_TOTAL: &str = "looopy_sse_disconnects_total";
/// Counter: streams that fell behind and caught up from the log instead of ending (A2A).
pub const SSE_CATCH_UPS_TOTAL: &str = "looopy_sse_catch_ups_total";

const TURN_DURATION: &[f64] = &[
    0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0,
];
const TIME_TO_FIRST_TOKEN: &[f64] = &[
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
];
const COMMIT: &[f64] = &[
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0,
];
/// One webhook delivery, request to answer.
const PUSH_DELIVERY: &[f64] = &[
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
];
/// Histogram samples wait in lock-free buckets until folded in; fold them at least this
/// often so a server nobody scrapes does not grow.
const UPKEEP: Duration = Duration::from_secs(5);

static HANDLE: OnceLock<Option<PrometheusHandle>> = OnceLock::new();
static REPLICA: OnceLock<String> = OnceLock::new();

/// Labels every metric with `replica="{id}"`, so the series of replicas sharing a store
/// can be told apart. Call before the recorder is installed (before serving); false after.
pub fn set_replica_label(id: &str) -> bool {
    REPLICA.set(id.to_string()).is_ok() && HANDLE.get().is_none()
}

/// Installs the Prometheus recorder as the process's `metrics` recorder (once; later
/// calls return the same handle). `None` when another recorder was installed first.
pub fn install() -> Option<PrometheusHandle> {
    HANDLE.get_or_init(build).clone()
}

fn base_builder() -> PrometheusBuilder {
    let builder = PrometheusBuilder::new();
    match REPLICA.get() {
        Some(id) => builder.add_global_label("replica", id),
        None => builder,
    }
}

fn build() -> Option<PrometheusHandle> {
    let builder = [
        (metric::TURN_DURATION_SECONDS, TURN_DURATION),
        (metric::LLM_TIME_TO_FIRST_TOKEN_SECONDS, TIME_TO_FIRST_TOKEN),
        ("looopy_event_log_commit_seconds", COMMIT),
        ("looopy_push_delivery_seconds", PUSH_DELIVERY),
    ]
    .into_iter()
    .try_fold(base_builder(), |builder, (name, buckets)| {
        builder.set_buckets_for_metric(Matcher::Full(name.to_string()), buckets)
    });
    let handle = match builder.and_then(PrometheusBuilder::install_recorder) {
        Ok(handle) => handle,
        Err(error) => {
            tracing::warn!(%error, "metrics recorder not installed; GET /metrics is unavailable");
            return None;
        }
    };
    describe();
    zero();
    let upkeep = handle.clone();
    let spawned = std::thread::Builder::new()
        .name("looopy-metrics-upkeep".into())
        .spawn(move || {
            loop {
                std::thread::sleep(UPKEEP);
                upkeep.run_upkeep();
            }
        });
    if let Err(error) = spawned {
        // Rendering folds the samples too; only an unscraped server would grow.
        tracing::warn!(%error, "metrics upkeep thread not started");
    }
    Some(handle)
}

fn describe() {
    use metrics::{describe_counter, describe_gauge, describe_histogram};
    describe_counter!(
        metric::TURNS_TOTAL,
        "Runs of turns, by the state they ended in."
    );
    describe_histogram!(
        metric::TURN_DURATION_SECONDS,
        metrics::Unit::Seconds,
        "Wall time of one run of a turn (time paused for input not included)."
    );
    describe_counter!(
        "looopy_events_total",
        "Events committed to the event log, by kind."
    );
    describe_histogram!(
        "looopy_event_log_commit_seconds",
        metrics::Unit::Seconds,
        "Time to commit one batch of events to the event log."
    );
    describe_counter!(
        "looopy_replica_events_delivered_total",
        "Events another replica committed, delivered to this replica's streams, by what told it (bus, sweep)."
    );
    describe_histogram!(
        metric::LLM_TIME_TO_FIRST_TOKEN_SECONDS,
        metrics::Unit::Seconds,
        "From sending a model request to its first text, thought or tool call."
    );
    describe_counter!(
        metric::LLM_TOKENS_TOTAL,
        "Tokens reported by the model provider, by direction (input, output)."
    );
    describe_counter!(metric::TOOL_CALLS_TOTAL, "Tool calls, by tool and outcome.");
    describe_gauge!(SSE_STREAMS, "Event streams open now.");
    describe_counter!(
        "looopy_push_notifications_total",
        "Push notification deliveries to webhooks, by outcome (delivered, refused, retried, gave_up)."
    );
    describe_histogram!(
        "looopy_push_delivery_seconds",
        metrics::Unit::Seconds,
        "Time of one successful push notification delivery, request to answer."
    );
    describe_counter!(
        SSE_DISCONNECTS_TOTAL,
        "Event streams that ended, by reason."
    );
    describe_counter!(
        SSE_CATCH_UPS_TOTAL,
        "Streams that fell behind and caught up from the event log (A2A streams)."
    );
}

/// The labels of the series [`zero`] exports at 0, per counter.
const ZERO_SERIES: &[(&str, &str, &[&str])] = &[
    (
        metric::TURNS_TOTAL,
        "state",
        &[
            "completed",
            "failed",
            "canceled",
            "rejected",
            "waiting-input",
            "waiting-auth",
            "waiting-subtask",
            "error",
        ],
    ),
    // The events of every turn; the other kinds appear as they are first committed.
    (
        "looopy_events_total",
        "kind",
        &[
            "task-created",
            "task-status",
            "content-delta",
            "content-complete",
            "task-complete",
        ],
    ),
    (metric::LLM_TOKENS_TOTAL, "direction", &["input", "output"]),
    (
        SSE_DISCONNECTS_TOTAL,
        "reason",
        &[
            "settled",
            "client_gone",
            "lagged",
            "shutdown",
            "log_closed",
            "store_failed",
            "storage_unavailable",
        ],
    ),
    (
        "looopy_replica_events_delivered_total",
        "via",
        &["bus", "sweep"],
    ),
    (
        "looopy_push_notifications_total",
        "outcome",
        &["delivered", "refused", "gave_up", "retried"],
    ),
];

/// Registers every metric with nothing counted yet (see the module docs): Prometheus
/// cannot tell a series that does not exist from one that never moved, and rules like
/// `looopy_sse_streams == 0` or `increase(...[5m]) > 0` see nothing until it exists.
/// Adding 0 to a counter and registering a gauge or histogram change no value, so this is
/// safe to run again (another router in the same process).
fn zero() {
    for (name, label, values) in ZERO_SERIES {
        for value in *values {
            metrics::counter!(*name, *label => *value).increment(0);
        }
    }
    metrics::counter!(SSE_CATCH_UPS_TOTAL).increment(0);
    metrics::gauge!(SSE_STREAMS).increment(0.0);
    for name in [
        metric::TURN_DURATION_SECONDS,
        metric::LLM_TIME_TO_FIRST_TOKEN_SECONDS,
        "looopy_event_log_commit_seconds",
        "looopy_push_delivery_seconds",
    ] {
        // Registering creates the (empty) histogram; no sample is recorded.
        drop(metrics::histogram!(name));
    }
}

/// `looopy_tool_calls_total{tool, outcome}` at 0 for the agent's tools as they are now
/// (`success` and `error`, the outcomes error-rate alerts divide); tools added later and the
/// other outcomes appear when first counted.
fn zero_tools(state: &AppState) {
    for tool in state.agent().tools().names() {
        for outcome in ["success", "error"] {
            metrics::counter!(metric::TOOL_CALLS_TOTAL, "tool" => tool.clone(), "outcome" => outcome)
                .increment(0);
        }
    }
}

/// The `/metrics` route (installing the recorder if nothing has yet, and exporting
/// `state`'s agent's tools at 0).
pub(crate) fn routes(state: &AppState) -> Router<AppState> {
    let handle = install();
    if handle.is_some() {
        zero_tools(state);
    }
    Router::new().route(
        PATH,
        get(move || {
            let handle = handle.clone();
            async move { render(handle.as_ref()) }
        }),
    )
}

fn render(handle: Option<&PrometheusHandle>) -> Response {
    let Some(handle) = handle else {
        return ApiError::new(
            StatusCode::NOT_FOUND,
            "metrics_unavailable",
            "another metrics recorder was installed in this process",
        )
        .into_response();
    };
    handle.run_upkeep();
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        handle.render(),
    )
        .into_response()
}
