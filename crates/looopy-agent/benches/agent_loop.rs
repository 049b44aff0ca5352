//! Agent loop benchmark (a plain `harness = false` binary):
//!
//! 1. **Throughput** — one turn whose scripted model emits 1,000,000 text deltas, with the
//!    SQLite event log on: time from `start_turn` to the final event durable (`wait`
//!    returns after the flush), and events per second.
//! 2. **Added latency per event** — for every delta, the time from the provider yielding
//!    it to the `content-delta` event arriving at a live log subscriber (i.e. committed
//!    and broadcast): p50/p99/max, both under full load (run 1) and paced at ~1 delta/ms
//!    (run 2, closer to a real model).
//!
//! Run 0 appends the same number of stamped `content-delta` events straight to the log, as
//! the baseline the loop's own cost is measured against.
//!
//! `cargo bench -p looopy-agent --bench agent_loop` (set `LOOOPY_BENCH_DELTAS` to change the
//! size of run 1). Arguments cargo or criterion pass are ignored.
//!
//! The cost of observability: `LOOOPY_BENCH_TRACING=1` installs what `looopy
//! --otlp-endpoint` installs — a `tracing` subscriber with the OpenTelemetry layer taking the
//! runtime's spans — but with no exporter, so what is measured is building the spans, not
//! sending them. `LOOOPY_BENCH_METRICS=1` installs the Prometheus recorder `looopy serve`
//! installs. Without them nothing is installed (the spans' callsites are disabled and the
//! `metrics` calls are no-ops), as for an embedder that wants neither.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use looopy_agent::tool::ToolRegistry;
use looopy_agent::{Agent, AgentConfig};
use looopy_llm::scripted::{Response, ScriptedProvider};
use looopy_llm::{ChatRequest, LlmEvent, LlmStream, Provider};
use looopy_protocol::event::ContentDelta;
use looopy_protocol::{EventPayload, Sequencer, Stamp, TaskState};
use looopy_store::Store;

/// Records when each text delta leaves the provider.
struct Timed {
    inner: ScriptedProvider,
    yielded: Arc<Mutex<Vec<Instant>>>,
}

impl Provider for Timed {
    fn name(&self) -> &str {
        "timed-scripted"
    }

    fn default_model(&self) -> &str {
        self.inner.default_model()
    }

    fn stream(&self, request: ChatRequest) -> LlmStream {
        let yielded = Arc::clone(&self.yielded);
        Box::pin(self.inner.stream(request).map(move |event| {
            if let Ok(LlmEvent::TextDelta(_)) = &event {
                if let Ok(mut times) = yielded.lock() {
                    times.push(Instant::now());
                }
            }
            event
        }))
    }
}

struct Run {
    elapsed: Duration,
    events: u64,
    latencies: Vec<Duration>,
    lagged: u64,
    batches: u64,
}

async fn run(store: Store, response: Response, deltas: usize) -> Run {
    let yielded = Arc::new(Mutex::new(Vec::with_capacity(deltas)));
    let provider = Timed {
        inner: ScriptedProvider::from_responses(vec![response]),
        yielded: Arc::clone(&yielded),
    };
    let agent = Agent::new(
        Arc::new(provider),
        store.clone(),
        ToolRegistry::builtin(),
        AgentConfig::default(),
    );
    // The subscriber records when each delta is delivered (committed and broadcast).
    let mut live = store.event_log().subscribe();
    let subscriber = tokio::spawn(async move {
        let mut arrived = vec![None; deltas];
        let mut lagged = 0u64;
        loop {
            match live.recv().await {
                Ok(batch) => {
                    let now = Instant::now();
                    let mut done = false;
                    for event in batch.iter() {
                        match &event.payload {
                            EventPayload::ContentDelta(d) => {
                                if let Some(slot) = arrived.get_mut(d.index as usize) {
                                    *slot = Some(now);
                                }
                            }
                            EventPayload::TaskComplete(_) => done = true,
                            _ => {}
                        }
                    }
                    if done {
                        break;
                    }
                }
                Err(tokio::sync::broadcast::error::RecvError::Lagged(n)) => lagged += n,
                Err(_) => break,
            }
        }
        (arrived, lagged)
    });
    let before = store.event_log().stats();
    let started = Instant::now();
    let turn = agent
        .start_turn("ctx-bench", "go", None)
        .await
        .expect("start_turn");
    let state = turn.wait().await.expect("turn");
    let elapsed = started.elapsed();
    assert_eq!(state, TaskState::Completed);
    let (arrived, lagged) = subscriber.await.expect("subscriber");
    let after = store.event_log().stats();
    let yielded = yielded.lock().expect("times").clone();
    let latencies = yielded
        .iter()
        .zip(&arrived)
        .filter_map(|(y, a)| a.map(|a| a.saturating_duration_since(*y)))
        .collect();
    Run {
        elapsed,
        events: after.events_committed - before.events_committed,
        latencies,
        lagged,
        batches: after.batches_committed - before.batches_committed,
    }
}

/// The event log alone: stamped deltas appended in a tight loop, then flushed.
async fn baseline(store: Store, deltas: usize) -> (Duration, u64) {
    let seq = Sequencer::starting_after(0);
    let stamp = Stamp::new("ctx-baseline", "task-baseline");
    let log = store.event_log();
    let started = Instant::now();
    for index in 0..deltas as u64 {
        let payload = EventPayload::ContentDelta(ContentDelta {
            delta: "tok ".into(),
            index,
        });
        log.append(stamp.stamp(&seq, payload))
            .await
            .expect("append");
    }
    log.flush().await.expect("flush");
    (started.elapsed(), deltas as u64)
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let i = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[i]
}

fn report(name: &str, mut r: Run) {
    r.latencies.sort();
    println!("{name}");
    println!(
        "  {} events in {:.3} s = {:.0} events/s ({} transactions, {:.0} events each)",
        r.events,
        r.elapsed.as_secs_f64(),
        r.events as f64 / r.elapsed.as_secs_f64(),
        r.batches,
        r.events as f64 / r.batches.max(1) as f64,
    );
    println!(
        "  delta latency provider -> committed+broadcast: p50 {:?}  p99 {:?}  max {:?}  ({} measured, {} lagged)",
        percentile(&r.latencies, 0.50),
        percentile(&r.latencies, 0.99),
        r.latencies.last().copied().unwrap_or_default(),
        r.latencies.len(),
        r.lagged,
    );
}

/// Installs the subscriber and recorder the environment asks for; says what it installed.
fn install_observability() -> &'static str {
    use opentelemetry::trace::TracerProvider as _;
    use tracing_subscriber::Layer as _;
    use tracing_subscriber::layer::SubscriberExt as _;
    use tracing_subscriber::util::SubscriberInitExt as _;

    let on = |name: &str| std::env::var(name).is_ok_and(|v| v == "1");
    let tracing = on("LOOOPY_BENCH_TRACING");
    let metrics = on("LOOOPY_BENCH_METRICS");
    if tracing {
        // A provider without an exporter: spans are built, sampled and dropped.
        let provider = opentelemetry_sdk::trace::SdkTracerProvider::builder().build();
        let spans = tracing_subscriber::filter::FilterFn::new(|meta| {
            meta.is_span()
                && *meta.level() <= tracing::Level::INFO
                && meta.target().starts_with("looopy_")
        });
        tracing_subscriber::registry()
            .with(
                tracing_opentelemetry::layer()
                    .with_tracer(provider.tracer("bench"))
                    .with_tracked_inactivity(false)
                    .with_context_activation(false)
                    .with_filter(spans),
            )
            .init();
    }
    if metrics {
        metrics_exporter_prometheus::PrometheusBuilder::new()
            .install_recorder()
            .expect("metrics recorder");
    }
    match (tracing, metrics) {
        (false, false) => "no subscriber, no recorder",
        (true, false) => "tracing on (OpenTelemetry layer, no exporter)",
        (false, true) => "metrics on (Prometheus recorder)",
        (true, true) => "tracing and metrics on",
    }
}

fn main() {
    println!("observability: {}", install_observability());
    let deltas: usize = std::env::var("LOOOPY_BENCH_DELTAS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000_000);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = Store::open(dir.path().join("bench.db")).expect("store");
        let (elapsed, events) = baseline(store.clone(), deltas).await;
        println!("run 0: the event log alone, {deltas} stamped deltas appended and flushed");
        println!(
            "  {events} events in {:.3} s = {:.0} events/s",
            elapsed.as_secs_f64(),
            events as f64 / elapsed.as_secs_f64()
        );

        let dir = tempfile::tempdir().expect("tempdir");
        let store = Store::open(dir.path().join("bench.db")).expect("store");
        let saturated = run(
            store.clone(),
            Response::new().repeat_text("tok ", deltas as u64),
            deltas,
        )
        .await;
        report(
            &format!("run 1: {deltas} deltas as fast as the loop takes them"),
            saturated,
        );

        let dir = tempfile::tempdir().expect("tempdir");
        let store = Store::open(dir.path().join("bench.db")).expect("store");
        // The scripted model streams one text step in at most MAX_TEXT_CHUNKS deltas, so the
        // paced run is several steps of one-character chunks.
        let step = looopy_llm::scripted::MAX_TEXT_CHUNKS;
        let steps = 8;
        let paced_deltas = step * steps;
        let response = (0..steps).fold(Response::new(), |r, _| {
            r.text_chunked("x".repeat(step), 1, 1)
        });
        let paced = run(store.clone(), response, paced_deltas).await;
        report(
            &format!("run 2: {paced_deltas} deltas paced ~1 ms apart"),
            paced,
        );
    });
}
