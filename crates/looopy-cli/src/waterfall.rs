//! `looopy run --verbose`: the turn's spans, recorded by a `tracing_subscriber` layer and
//! drawn after the run as a waterfall — one line per span, indented by nesting, with its
//! start offset, its duration, a bar on a shared time axis and its key attributes:
//!
//! ```text
//! spans of the turn (start, duration; 62.4 ms in all)
//!     0.0 ms   62.4 ms  |##############################|  invoke_agent looopy  state=completed iterations=2
//!     0.3 ms    5.1 ms  |###                           |    chat scripted  ttft=1.2ms in=12 out=8 finish=tool_calls
//!     4.0 ms   20.3 ms  |  ##########                  |    execute_tool calculator  call=call-1 outcome=success
//! ```

use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use tracing::Subscriber;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing_subscriber::layer::Context;
use tracing_subscriber::registry::LookupSpan;

/// Attributes shown on a span's line, with their short labels, in this order.
const SHOWN: &[(&str, &str)] = &[
    ("looopy.task.state", "state"),
    ("looopy.iterations", "iterations"),
    ("looopy.iteration", "iteration"),
    ("gen_ai.server.time_to_first_token", "ttft"),
    ("gen_ai.usage.input_tokens", "in"),
    ("gen_ai.usage.output_tokens", "out"),
    ("gen_ai.response.finish_reasons", "finish"),
    ("gen_ai.tool.call.id", "call"),
    ("looopy.tool.outcome", "outcome"),
    ("error.type", "error"),
];

/// Width of the time bar, in characters.
const BAR: usize = 30;

/// The spans recorded so far; cheap to clone (shared with its layer).
#[derive(Clone, Default)]
pub struct Waterfall {
    inner: Arc<Mutex<Recorded>>,
}

#[derive(Default)]
struct Recorded {
    spans: Vec<SpanRecord>,
    /// Live span ids → index in `spans` (the registry reuses ids of closed spans).
    live: HashMap<u64, usize>,
}

struct SpanRecord {
    parent: Option<usize>,
    name: String,
    start: Instant,
    end: Option<Instant>,
    fields: Vec<(usize, String)>,
}

impl Waterfall {
    fn lock(&self) -> MutexGuard<'_, Recorded> {
        // A panic while recording leaves at worst one span incomplete.
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The layer that records into this waterfall.
    pub fn layer(&self) -> WaterfallLayer {
        WaterfallLayer {
            waterfall: self.clone(),
        }
    }

    /// The waterfall as text; empty when no span was recorded. Spans still open are drawn
    /// up to now and marked `(open)`.
    pub fn render(&self) -> String {
        let recorded = self.lock();
        let spans = &recorded.spans;
        let Some(origin) = spans.iter().map(|s| s.start).min() else {
            return String::new();
        };
        let now = Instant::now();
        let end_of = |s: &SpanRecord| s.end.unwrap_or(now);
        let last = spans.iter().map(end_of).max().unwrap_or(origin);
        let total = last.duration_since(origin).as_secs_f64().max(1e-9);
        let mut children: Vec<Vec<usize>> = vec![Vec::new(); spans.len()];
        let mut roots = Vec::new();
        for (i, span) in spans.iter().enumerate() {
            match span.parent {
                Some(p) => children[p].push(i),
                None => roots.push(i),
            }
        }
        let mut out = format!(
            "spans of the turn (start, duration; {} in all)\n",
            millis(total)
        );
        let mut stack: Vec<(usize, usize)> = roots.into_iter().rev().map(|i| (i, 0)).collect();
        while let Some((i, depth)) = stack.pop() {
            let span = &spans[i];
            let start = span.start.duration_since(origin).as_secs_f64();
            let took = end_of(span).duration_since(span.start).as_secs_f64();
            let _ = write!(
                out,
                "{:>10} {:>10}  |{}|  {}{}",
                millis(start),
                millis(took),
                bar(start / total, took / total),
                "  ".repeat(depth),
                span.name
            );
            let mut fields: Vec<&(usize, String)> = span.fields.iter().collect();
            fields.sort_by_key(|(key, _)| *key);
            for (key, value) in fields {
                let _ = write!(out, "  {}={value}", SHOWN[*key].1);
            }
            if span.end.is_none() {
                out.push_str("  (open)");
            }
            out.push('\n');
            for &child in children[i].iter().rev() {
                stack.push((child, depth + 1));
            }
        }
        out
    }
}

fn millis(secs: f64) -> String {
    format!("{:.1} ms", secs * 1000.0)
}

/// `from` and `len` are fractions of the whole; every span gets at least one mark.
fn bar(from: f64, len: f64) -> String {
    let start = ((from * BAR as f64).floor() as usize).min(BAR - 1);
    let marks = ((len * BAR as f64).round() as usize).clamp(1, BAR - start);
    format!(
        "{}{}{}",
        " ".repeat(start),
        "#".repeat(marks),
        " ".repeat(BAR - start - marks)
    )
}

/// Records span starts, ends and the [`SHOWN`] attributes.
pub struct WaterfallLayer {
    waterfall: Waterfall,
}

/// Collects a span's name (`otel.name`) and shown attributes.
struct Fields<'a> {
    name: &'a mut Option<String>,
    fields: &'a mut Vec<(usize, String)>,
}

impl Fields<'_> {
    fn put(&mut self, field: &Field, value: String) {
        if field.name() == "otel.name" {
            *self.name = Some(value);
            return;
        }
        if let Some(key) = SHOWN.iter().position(|(name, _)| *name == field.name()) {
            self.fields.retain(|(k, _)| *k != key);
            self.fields.push((key, value));
        }
    }
}

impl Visit for Fields<'_> {
    fn record_f64(&mut self, field: &Field, value: f64) {
        // The only float shown is a time in seconds.
        self.put(field, format!("{:.1}ms", value * 1000.0));
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        self.put(field, value.to_string());
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.put(field, format!("{value:?}"));
    }
}

impl<S> tracing_subscriber::Layer<S> for WaterfallLayer
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let parent_id = ctx
            .span(id)
            .and_then(|span| span.parent())
            .map(|parent| parent.id().into_u64());
        let mut name = None;
        let mut fields = Vec::new();
        attrs.record(&mut Fields {
            name: &mut name,
            fields: &mut fields,
        });
        let mut recorded = self.waterfall.lock();
        let parent = parent_id.and_then(|p| recorded.live.get(&p).copied());
        let index = recorded.spans.len();
        recorded.spans.push(SpanRecord {
            parent,
            name: name.unwrap_or_else(|| attrs.metadata().name().to_string()),
            start: Instant::now(),
            end: None,
            fields,
        });
        recorded.live.insert(id.into_u64(), index);
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, _ctx: Context<'_, S>) {
        let mut recorded = self.waterfall.lock();
        let Some(&index) = recorded.live.get(&id.into_u64()) else {
            return;
        };
        let span = &mut recorded.spans[index];
        let mut name = None;
        values.record(&mut Fields {
            name: &mut name,
            fields: &mut span.fields,
        });
        if let Some(name) = name {
            span.name = name;
        }
    }

    fn on_close(&self, id: Id, _ctx: Context<'_, S>) {
        let mut recorded = self.waterfall.lock();
        if let Some(index) = recorded.live.remove(&id.into_u64()) {
            recorded.spans[index].end = Some(Instant::now());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tracing_subscriber::layer::SubscriberExt as _;

    #[test]
    fn nested_spans_are_indented_under_their_parent_with_their_attributes() {
        let waterfall = Waterfall::default();
        let subscriber = tracing_subscriber::registry().with(waterfall.layer());
        tracing::subscriber::with_default(subscriber, || {
            let turn = tracing::info_span!(
                "invoke_agent",
                otel.name = "invoke_agent a",
                looopy.task.state = tracing::field::Empty
            );
            let chat = tracing::info_span!(parent: &turn, "chat", otel.name = "chat m", gen_ai.usage.input_tokens = 12_u64);
            drop(chat);
            let tool = tracing::info_span!(parent: &turn, "execute_tool", otel.name = "execute_tool t", gen_ai.tool.call.id = "c1");
            drop(tool);
            turn.record("looopy.task.state", "completed");
        });
        let text = waterfall.render();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 4, "{text}");
        assert!(lines[0].starts_with("spans of the turn"));
        assert!(
            lines[1].contains("|  invoke_agent a  state=completed"),
            "{text}"
        );
        assert!(lines[2].contains("|    chat m  in=12"), "{text}");
        assert!(lines[3].contains("|    execute_tool t  call=c1"), "{text}");
    }

    #[test]
    fn bars_stay_inside_the_axis() {
        assert_eq!(bar(0.0, 1.0), "#".repeat(BAR));
        assert_eq!(bar(0.99, 0.5).len(), BAR);
        assert_eq!(bar(0.5, 0.0).trim(), "#");
    }
}
