//! The turn's spans on a multi-threaded runtime: two tool calls of one batch run at the same
//! time on their own tasks (possibly other threads), yet each `execute_tool` span is a child
//! of the run's `invoke_agent` span, and what a tool traces on its task — and on a task it
//! spawns — nests under its own call's span, not under the other call's or the model call's.
//!
//! One test in this binary: it installs the process-wide subscriber.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::*;
use looopy_agent::tool::{ToolContext, tool_fn};
use looopy_agent::{Agent, AgentConfig};
use looopy_llm::scripted::Response;
use looopy_protocol::TaskState;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;
use tracing::Instrument;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing_subscriber::layer::{Context, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;

/// A span as recorded: its name (`otel.name` when set), its parent and its string fields.
#[derive(Debug, Clone)]
struct Recorded {
    name: String,
    parent: Option<u64>,
    fields: HashMap<String, String>,
}

/// Every span in creation order; `live` maps the ids of open spans to their index (the
/// registry reuses the ids of closed spans).
#[derive(Clone, Default)]
struct Spans {
    spans: Arc<Mutex<Vec<Recorded>>>,
    live: Arc<Mutex<HashMap<u64, usize>>>,
}

struct Fields<'a>(&'a mut HashMap<String, String>);

impl Visit for Fields<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_string(), value.to_string());
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0
            .insert(field.name().to_string(), format!("{value:?}"));
    }
}

impl<S> tracing_subscriber::Layer<S> for Spans
where
    S: tracing::Subscriber + for<'a> LookupSpan<'a>,
{
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let mut fields = HashMap::new();
        attrs.record(&mut Fields(&mut fields));
        let parent = ctx
            .span(id)
            .and_then(|s| s.parent())
            .and_then(|p| self.live.lock().unwrap().get(&p.id().into_u64()).copied())
            .map(|i| i as u64);
        let name = fields
            .get("otel.name")
            .cloned()
            .unwrap_or_else(|| attrs.metadata().name().to_string());
        let mut spans = self.spans.lock().unwrap();
        spans.push(Recorded {
            name,
            parent,
            fields,
        });
        self.live
            .lock()
            .unwrap()
            .insert(id.into_u64(), spans.len() - 1);
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, _ctx: Context<'_, S>) {
        if let Some(&i) = self.live.lock().unwrap().get(&id.into_u64()) {
            values.record(&mut Fields(&mut self.spans.lock().unwrap()[i].fields));
        }
    }

    fn on_close(&self, id: Id, _ctx: Context<'_, S>) {
        self.live.lock().unwrap().remove(&id.into_u64());
    }
}

#[derive(Deserialize, JsonSchema)]
struct LookupArgs {
    /// What to look up.
    key: String,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_tool_calls_are_parented_to_the_run_and_their_work_to_their_call() {
    let recorded = Spans::default();
    tracing::subscriber::set_global_default(tracing_subscriber::registry().with(recorded.clone()))
        .unwrap();

    // Both calls must be running at once to get past the barrier: the batch is concurrent.
    let barrier = Arc::new(tokio::sync::Barrier::new(2));
    let lookup = tool_fn(
        "lookup",
        "Looks a key up.",
        move |args: LookupArgs, _ctx: ToolContext| {
            let barrier = Arc::clone(&barrier);
            async move {
                let work = tracing::info_span!("lookup_work", key = %args.key);
                async move {
                    barrier.wait().await;
                    // Work the tool hands to a task of its own stays in its call's trace.
                    let key = args.key.clone();
                    tokio::spawn(
                        async move {
                            tracing::info_span!("lookup_subtask", key = %key).in_scope(|| ());
                        }
                        .in_current_span(),
                    )
                    .await
                    .unwrap();
                    Ok::<_, String>(format!("value of {}", args.key))
                }
                .instrument(work)
                .await
            }
        },
    );
    let db = TestDb::new();
    let agent = Agent::builder()
        .provider(scripted(vec![
            Response::new()
                .tool_call_with_id("call-a", "lookup", json!({"key": "a"}))
                .tool_call_with_id("call-b", "lookup", json!({"key": "b"})),
            Response::new().text("Both found."),
        ]))
        .store(db.open())
        .tool(lookup)
        .config(AgentConfig::default())
        .build()
        .unwrap();
    let turn = agent
        .start_turn("ctx-spans", "look up a and b", None)
        .await
        .unwrap();
    let task_id = turn.task_id.clone();
    let state = tokio::time::timeout(Duration::from_secs(20), turn.wait())
        .await
        .expect("the calls ran concurrently")
        .unwrap();
    assert_eq!(state, TaskState::Completed);

    let spans = recorded.spans.lock().unwrap().clone();
    let index_of = |pred: &dyn Fn(&Recorded) -> bool| -> Vec<usize> {
        (0..spans.len()).filter(|&i| pred(&spans[i])).collect()
    };
    let runs = index_of(&|s| s.name == "invoke_agent looopy");
    assert_eq!(runs.len(), 1, "{spans:#?}");
    let run = runs[0];
    assert_eq!(spans[run].fields["looopy.task_id"], task_id);
    assert_eq!(spans[run].fields["looopy.context_id"], "ctx-spans");
    assert_eq!(spans[run].fields["looopy.task.state"], "completed");

    let chats = index_of(&|s| s.name.starts_with("chat "));
    assert_eq!(chats.len(), 2, "{spans:#?}");
    for &chat in &chats {
        assert_eq!(spans[chat].parent, Some(run as u64), "{:?}", spans[chat]);
    }

    for (call, key) in [("call-a", "a"), ("call-b", "b")] {
        let tool = index_of(&|s| {
            s.name == "execute_tool lookup"
                && s.fields.get("gen_ai.tool.call.id").map(String::as_str) == Some(call)
        });
        assert_eq!(tool.len(), 1, "{spans:#?}");
        let tool = tool[0];
        assert_eq!(
            spans[tool].parent,
            Some(run as u64),
            "not under the run: {:?}",
            spans[tool]
        );
        assert_eq!(spans[tool].fields["gen_ai.tool.name"], "lookup");
        assert_eq!(spans[tool].fields["looopy.tool.outcome"], "success");
        assert_eq!(spans[tool].fields["looopy.task_id"], task_id);

        let work = index_of(&|s| {
            s.name == "lookup_work" && s.fields.get("key").map(String::as_str) == Some(key)
        });
        assert_eq!(work.len(), 1, "{spans:#?}");
        assert_eq!(spans[work[0]].parent, Some(tool as u64), "work of {call}");
        let subtask = index_of(&|s| {
            s.name == "lookup_subtask" && s.fields.get("key").map(String::as_str) == Some(key)
        });
        assert_eq!(subtask.len(), 1, "{spans:#?}");
        assert_eq!(
            spans[subtask[0]].parent,
            Some(work[0] as u64),
            "subtask of {call}"
        );
    }
}
