//! `looopy tail`: a terminal client for a running server. It renders a context's stream
//! like `looopy chat` and, when the connection drops, reconnects with `Last-Event-ID` so
//! nothing is missed or shown twice. Sub-agents' child tasks show as an indented tree under
//! their `↳` line (see `render::tree`); `--until-done` without `--task` waits for a
//! top-level task, not a child.

use std::io::IsTerminal;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result};
use futures::StreamExt;
use looopy_protocol::Event;
use looopy_stream::sse::SseDecoder;

use crate::cli::TailArgs;
use crate::render::{Renderer, Style};

/// Why one connection ended.
enum Ended {
    /// The followed task finished (`--until-done`).
    Done,
    /// The connection dropped or the server closed the stream: reconnect.
    Dropped(String),
}

pub async fn run(args: TailArgs) -> Result<ExitCode> {
    let style = if args.json {
        Style::Json
    } else {
        Style::Human {
            color: std::io::stdout().is_terminal(),
        }
    };
    let mut renderer = Renderer::new(style);
    let client = reqwest::Client::builder()
        .connect_timeout(Duration::from_secs(10))
        .build()
        .context("building the HTTP client")?;
    let base = args.url.trim_end_matches('/').to_string();
    let mut last_id = args.last_event_id.unwrap_or(0);
    let mut retry = Duration::from_secs(1);
    let mut failures = 0u32;
    loop {
        match follow_once(
            &client,
            &base,
            &args,
            &mut last_id,
            &mut retry,
            &mut renderer,
        )
        .await
        {
            Ok(Ended::Done) => return Ok(ExitCode::SUCCESS),
            Ok(Ended::Dropped(why)) => {
                failures = 0;
                tracing::info!(%why, last_id, "stream ended; reconnecting");
            }
            Err(TailError::Fatal(msg)) => {
                eprintln!("looopy tail: {msg}");
                return Ok(ExitCode::from(2));
            }
            Err(TailError::Retry(msg)) => {
                failures += 1;
                crate::render::note(&format!("[tail] {msg}; reconnecting after event {last_id}"));
            }
        }
        // Back off on repeated failures, up to 30 s.
        let wait = retry
            .saturating_mul(1 << failures.min(5))
            .min(Duration::from_secs(30));
        tokio::select! {
            _ = tokio::time::sleep(wait) => {}
            _ = tokio::signal::ctrl_c() => return Ok(ExitCode::from(130)),
        }
    }
}

enum TailError {
    Fatal(String),
    Retry(String),
}

async fn follow_once(
    client: &reqwest::Client,
    base: &str,
    args: &TailArgs,
    last_id: &mut u64,
    retry: &mut Duration,
    renderer: &mut Renderer,
) -> Result<Ended, TailError> {
    let mut req = client
        .get(format!("{base}/v1/contexts/{}/events", args.context))
        .header("Accept", "text/event-stream")
        .header("Last-Event-ID", last_id.to_string());
    if let Some(task) = &args.task {
        req = req.query(&[("taskId", task)]);
    }
    if let Some(token) = &args.token {
        req = req.bearer_auth(token);
    }
    let resp = req.send().await.map_err(|e| {
        // The cause (`Connection refused`), not only reqwest's "error sending request".
        TailError::Retry(format!(
            "cannot reach {base}: {}",
            crate::errors::chain_text(&e)
        ))
    })?;
    let status = resp.status();
    if !status.is_success() {
        let body = resp.text().await.unwrap_or_default();
        let msg = format!("HTTP {status}: {}", body.trim());
        return Err(if status.is_server_error() || status.as_u16() == 429 {
            TailError::Retry(msg)
        } else {
            TailError::Fatal(msg)
        });
    }
    let mut decoder = SseDecoder::new();
    let mut body = resp.bytes_stream();
    let mut stdout = std::io::stdout();
    loop {
        let chunk = tokio::select! {
            c = body.next() => c,
            _ = tokio::signal::ctrl_c() => return Err(TailError::Fatal("interrupted".into())),
        };
        let chunk = match chunk {
            None => return Ok(Ended::Dropped("server closed the stream".into())),
            Some(Err(e)) => {
                return Err(TailError::Retry(format!(
                    "reading the stream: {}",
                    crate::errors::chain_text(&e)
                )));
            }
            Some(Ok(c)) => c,
        };
        for frame in decoder.push(&chunk) {
            let event: Event = match serde_json::from_str(&frame.data) {
                Ok(e) => e,
                Err(e) => {
                    tracing::warn!(error = %e, "skipping an event that is not a Looopy event");
                    continue;
                }
            };
            if let Ok(id) = frame.id.parse::<u64>() {
                *last_id = id;
            }
            renderer
                .render(&event, &mut stdout)
                .map_err(|e| TailError::Fatal(format!("writing output: {e}")))?;
            // Without --task, any top-level task's end: a sub-agent's child task ending is
            // only a step of its parent's turn.
            let followed = match &args.task {
                Some(task) => Some(task.as_str()),
                None => event.path.is_empty().then_some(event.task_id.as_str()),
            };
            if args.until_done && followed.is_some_and(|t| looopy_agent::settles(&event, t)) {
                renderer
                    .flush_held(&mut stdout)
                    .map_err(|e| TailError::Fatal(format!("writing output: {e}")))?;
                return Ok(Ended::Done);
            }
        }
        if let Some(ms) = decoder.retry() {
            *retry = Duration::from_millis(ms.clamp(100, 60_000));
        }
    }
}
