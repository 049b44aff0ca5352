//! `looopy artifacts TASK --server URL [--token T]`: the same listing and saving as from the
//! database, through a running server — `GET /v1/tasks/{id}/artifacts`, then each
//! artifact's content from `GET /v1/tasks/{id}/artifacts/{artifactId}`, streamed to its file.

use std::process::ExitCode;

use anyhow::{Context, Result};
use futures::StreamExt;
use serde::Deserialize;
use tokio::io::AsyncWriteExt;

use crate::artifacts_cmd::{Entry, OutDir, Report, Tally, create_part};
use crate::cli::ArtifactsArgs;

/// One artifact as `GET /v1/tasks/{id}/artifacts` lists it.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Listed {
    artifact_id: String,
    name: Option<String>,
    kind: String,
    mime_type: Option<String>,
    size: u64,
    sha256: Option<String>,
    #[serde(default = "yes")]
    complete: bool,
    error: Option<String>,
}

fn yes() -> bool {
    true
}

#[derive(Debug, Deserialize)]
struct Listing {
    artifacts: Vec<Listed>,
}

impl From<Listed> for Entry {
    fn from(a: Listed) -> Self {
        Entry {
            id: a.artifact_id,
            name: a.name,
            kind: a.kind,
            mime_type: a.mime_type,
            size: Some(a.size),
            sha256: a.sha256,
            rows: None,
            complete: a.complete,
            error: a.error,
        }
    }
}

/// The server's `{"error": {"message"}}`, or the status line.
async fn error_text(response: reqwest::Response) -> String {
    let status = response.status();
    let body: serde_json::Value = response.json().await.unwrap_or_default();
    match body["error"]["message"].as_str() {
        Some(message) => format!("{status}: {message}"),
        None => status.to_string(),
    }
}

pub async fn run(args: &ArtifactsArgs, server: &str) -> Result<ExitCode> {
    let base = server.trim_end_matches('/');
    let task = args.task.as_str();
    let client = reqwest::Client::new();
    let get = |url: String| {
        let request = client.get(url);
        match &args.token {
            Some(token) => request.bearer_auth(token),
            None => request,
        }
    };
    let response = get(format!("{base}/v1/tasks/{task}/artifacts"))
        .send()
        .await
        .with_context(|| format!("asking {base} for the artifacts of task {task}"))?;
    if response.status() == reqwest::StatusCode::NOT_FOUND {
        eprintln!("looopy artifacts: no task {task} on {base}");
        return Ok(ExitCode::from(2));
    }
    if !response.status().is_success() {
        anyhow::bail!(
            "{base} refused the artifact listing of task {task}: {}",
            error_text(response).await
        );
    }
    let listing: Listing = response
        .json()
        .await
        .with_context(|| format!("reading the artifact listing from {base}"))?;
    if listing.artifacts.is_empty() {
        eprintln!("looopy artifacts: task {task} has no artifacts");
        return Ok(ExitCode::SUCCESS);
    }
    let mut out = args.out.as_deref().map(OutDir::create).transpose()?;
    let mut report = Report::new(args.json);
    for listed in listing.artifacts {
        let entry = Entry::from(listed);
        let Some(dir) = &mut out else {
            report.line(&entry, None, None)?;
            continue;
        };
        let name = dir.claim(&entry);
        let part = dir.part_path(&name);
        let url = format!("{base}/v1/tasks/{task}/artifacts/{}", entry.id);
        let saved = download(get(url), &part).await;
        let tally = match saved {
            Ok(tally) => tally,
            Err(error) => {
                let _ = tokio::fs::remove_file(&part).await;
                return Err(error.context(format!("saving artifact {} from {base}", entry.id)));
            }
        };
        let path = dir.finish(&part, &name)?;
        // The listing's size was measured before the download; what arrived is what
        // was saved (an artifact still streaming grows in between).
        let entry = Entry {
            size: entry.size.filter(|_| entry.complete),
            ..entry
        };
        report.line(&entry, Some(&tally), Some(&path))?;
    }
    Ok(report.exit_code())
}

/// Streams one download into the new file `part`.
async fn download(request: reqwest::RequestBuilder, part: &std::path::Path) -> Result<Tally> {
    let response = request.send().await?;
    if !response.status().is_success() {
        anyhow::bail!("{}", error_text(response).await);
    }
    let file = {
        let part = part.to_path_buf();
        tokio::task::spawn_blocking(move || create_part(&part)).await??
    };
    let mut file = tokio::io::BufWriter::new(tokio::fs::File::from_std(file));
    let mut tally = Tally::new();
    let mut body = response.bytes_stream();
    while let Some(chunk) = body.next().await {
        let chunk = chunk?;
        tally.add(&chunk);
        file.write_all(&chunk).await?;
    }
    file.flush().await?;
    file.into_inner().sync_all().await?;
    Ok(tally)
}
