//! `looopy db migrate --from PATH.db --to postgres://…`: copies a SQLite database into an
//! empty PostgreSQL database — every context, message, task, artifact (content included,
//! streamed whatever its size), push config, sealed secret and event (each with its `seq`) —
//! then verifies the copy and prints a summary.
//!
//! Decisions:
//!
//! - **The source is only read** ([`Store::open_read_only`]: no migration, nothing written
//!   to the file), but its writer lock is held for the whole run, so no `looopy serve` can
//!   write it meanwhile and the copy is a complete, verifiable cut-over. A running server
//!   makes the command refuse (naming it): stop it first.
//! - **The target must be empty**: no contexts, messages, tasks, artifacts, push configs,
//!   sealed secrets or events (the tables are created if missing). There is no `--force`:
//!   copying into a store that already holds data would mix two histories.
//! - **No resume**: a copy that stops half-way (connection lost) leaves a partial copy, and a
//!   second run refuses it as non-empty. Empty the target (drop its schema or database) and
//!   run again; the copy itself is deterministic, so running again is always safe.
//! - **Verification** reads both stores again from scratch: the counts the databases report
//!   per table (and per task state, artifact kind and event kind, counted while reading) must
//!   be equal, and so must a SHA-256 over a canonical serialization of every record — each
//!   record as JSON in key order (ids in byte order, events in `(context, seq)` order),
//!   artifact content as its stored bytes, sealed secrets as their ciphertext.
//!
//! Exit status: 0 copied and verified; 1 the copy failed or the verification found a
//! difference; 2 refused before anything was written (bad arguments, source in use, target
//! unreachable or not empty).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result};
use chrono::SecondsFormat;
use clap::{Args, Subcommand};
use looopy_store::{ArtifactBody, PushConfigRecord, Store, StoreError, StoreOptions};
use serde_json::json;
use sha2::{Digest as _, Sha256};
use tokio::io::AsyncReadExt as _;

/// What the migration is, in the source's lock file and the target's connections.
const HOLDER: &str = "looopy db migrate";

/// Records read per page from either store.
const PAGE: usize = 500;

/// Events read per page.
const EVENT_PAGE: usize = 2000;

/// Bytes of artifact content hashed per read.
const BLOCK: usize = 256 * 1024;

/// Copy progress is reported every this many events.
const EVENT_PROGRESS: u64 = 100_000;

#[derive(Debug, Args)]
pub struct DbArgs {
    #[command(subcommand)]
    pub command: DbCommand,
}

#[derive(Debug, Subcommand)]
pub enum DbCommand {
    /// Copy a SQLite database into an empty PostgreSQL database and verify the copy
    /// (counts per table and a SHA-256 of everything, on both sides).
    Migrate(MigrateArgs),
}

#[derive(Debug, Args)]
pub struct MigrateArgs {
    /// The SQLite database to copy. It is only read, but its writer lock is held meanwhile:
    /// stop `looopy serve` first.
    #[arg(long, value_name = "PATH.db")]
    pub from: PathBuf,
    /// The PostgreSQL database to copy into, `postgres://user@host/db` (a schema of it:
    /// add `?options=-csearch_path%3DNAME`). It must hold no Looopy data yet.
    #[arg(long, value_name = "URL")]
    pub to: String,
}

/// Refused before anything was written: exit status 2.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
struct Refused(String);

fn refuse<T>(message: impl Into<String>) -> Result<T> {
    Err(Refused(message.into()).into())
}

pub async fn run(args: DbArgs) -> Result<ExitCode> {
    match args.command {
        DbCommand::Migrate(args) => match migrate(args).await {
            Err(error) if error.downcast_ref::<Refused>().is_some() => {
                eprintln!("looopy db migrate: {error:#}");
                Ok(ExitCode::from(2))
            }
            other => other,
        },
    }
}

async fn migrate(args: MigrateArgs) -> Result<ExitCode> {
    let started = Instant::now();
    let to = args.to.trim();
    let target_name = looopy_store::redact_url(to);
    if !looopy_store::is_postgres_url(to) {
        return refuse(format!(
            "--to must be a PostgreSQL URL (postgres://user@host/db), not {target_name:?}"
        ));
    }
    let from = args.from;
    if looopy_store::is_postgres_url(&from.to_string_lossy()) {
        return refuse("--from must be a SQLite database file, not a PostgreSQL URL");
    }
    if !from.is_file() {
        return refuse(format!("no SQLite database at {}", from.display()));
    }

    let source = open_source(&from).await?;
    // Held until the end: no server can write the source while it is copied and verified.
    let _lock = match Store::lock_database(&from, HOLDER) {
        Ok(lock) => lock,
        Err(error @ StoreError::Locked { .. }) => {
            return refuse(format!(
                "{error}. Stop it first: the migration copies a database nobody writes, so the copy is complete and can be verified"
            ));
        }
        Err(error) => {
            return refuse(format!(
                "cannot take the writer lock of {} (so that nothing writes it while it is copied): {error}",
                from.display()
            ));
        }
    };

    let mut options = StoreOptions::default();
    options.lock_holder = HOLDER.to_string();
    options.replica_id = format!("looopy-db-migrate-{}", std::process::id());
    let target = match Store::connect_with(to, options).await {
        Ok(store) => store,
        Err(error) => return refuse(format!("cannot open the target {target_name}: {error}")),
    };
    let target_counts = target
        .row_counts()
        .await
        .context("counting the target's records")?;
    let held: Vec<String> = target_counts
        .iter()
        .filter(|(name, n)| **n > 0 && **name != "event_logs")
        .map(|(name, n)| format!("{} {n}", name.replace('_', " ")))
        .collect();
    if !held.is_empty() {
        return refuse(format!(
            "the target {target_name} already holds Looopy data ({}); `db migrate` copies into an empty database only. \
             Use a new database or schema (…?options=-csearch_path%3DNAME), or empty this one \
             (DROP SCHEMA … CASCADE) if it holds an earlier, unfinished copy",
            held.join(", ")
        ));
    }
    let source_counts = source
        .row_counts()
        .await
        .context("counting the source's records")?;
    eprintln!(
        "looopy db migrate: copying {} → {target_name} ({})",
        from.display(),
        count_line(&source_counts)
    );

    let copy_started = Instant::now();
    if let Err(error) = copy(&source, &target).await {
        let _ = target.close().await;
        return Err(error.context(format!(
            "the copy stopped; {target_name} now holds a partial copy: empty it (drop its schema or database) before running again"
        )));
    }
    target
        .event_log()
        .flush()
        .await
        .context("committing the copied events")?;
    let copy_time = copy_started.elapsed();

    eprintln!("looopy db migrate: verifying…");
    let verify_started = Instant::now();
    let (source_side, target_side) = tokio::join!(Side::read(&source), Side::read(&target));
    let source_side = source_side.context("reading the source back")?;
    let target_side = target_side.context("reading the target back")?;
    let verify_time = verify_started.elapsed();
    target.close().await.context("closing the target")?;

    let problems = compare(&source_side, &target_side);
    if !problems.is_empty() {
        eprintln!(
            "looopy db migrate: VERIFICATION FAILED — {target_name} does not hold exactly what {} holds:",
            from.display()
        );
        for problem in &problems {
            eprintln!("  {problem}");
        }
        eprintln!(
            "Do not use this copy: empty the target (drop its schema or database) and run again."
        );
        return Ok(ExitCode::FAILURE);
    }
    print_summary(
        &from,
        &target_name,
        &target_side,
        [copy_time, verify_time, started.elapsed()],
    );
    Ok(ExitCode::SUCCESS)
}

/// The source, read-only (no lock, no migration; see the module docs).
async fn open_source(from: &Path) -> Result<Store> {
    let path = from.to_path_buf();
    let opened = tokio::task::spawn_blocking(move || Store::open_read_only(&path))
        .await
        .context("opening the source")?;
    match opened {
        Ok(store) => Ok(store),
        Err(error) => refuse(format!("cannot read {}: {error}", from.display())),
    }
}

/// Copies everything, section by section; a failure names what was being copied.
async fn copy(source: &Store, target: &Store) -> Result<()> {
    let (contexts, messages) = copy_contexts(source, target).await?;
    eprintln!("  contexts: {contexts} ({messages} messages)");
    let tasks = copy_tasks(source, target).await?;
    eprintln!("  tasks: {tasks}");
    let (artifacts, bytes) = copy_artifacts(source, target).await?;
    eprintln!("  artifacts: {artifacts} ({})", human_bytes(bytes));
    let (push, secrets) = copy_push_and_secrets(source, target).await?;
    eprintln!("  push configs: {push}; sealed secrets: {secrets}");
    let (events, logs) = copy_events(source, target).await?;
    eprintln!("  events: {events} in {logs} logs");
    Ok(())
}

async fn copy_contexts(source: &Store, target: &Store) -> Result<(u64, u64)> {
    let (mut contexts, mut messages) = (0u64, 0u64);
    let mut after: Option<String> = None;
    loop {
        let page = source
            .contexts_after(after.as_deref(), PAGE)
            .await
            .context("reading contexts")?;
        for context in &page {
            let id = context.context_id.as_str();
            target
                .import_context(context)
                .await
                .with_context(|| format!("writing context {id}"))?;
            let mut position = None;
            loop {
                let chunk = source
                    .load_messages_page(id, position, PAGE)
                    .await
                    .with_context(|| format!("reading the messages of context {id}"))?;
                let Some((last, _)) = chunk.last() else {
                    break;
                };
                position = Some(*last);
                target
                    .import_messages(id, &chunk)
                    .await
                    .with_context(|| format!("writing the messages of context {id}"))?;
                messages += chunk.len() as u64;
                if chunk.len() < PAGE {
                    break;
                }
            }
            contexts += 1;
        }
        match page.last() {
            Some(last) if page.len() == PAGE => after = Some(last.context_id.clone()),
            _ => return Ok((contexts, messages)),
        }
    }
}

async fn copy_tasks(source: &Store, target: &Store) -> Result<u64> {
    let mut copied = 0u64;
    let mut after: Option<String> = None;
    loop {
        let page = source
            .tasks_after(after.as_deref(), PAGE)
            .await
            .context("reading tasks")?;
        for task in &page {
            target
                .put_task(task)
                .await
                .with_context(|| format!("writing task {}", task.task_id))?;
            copied += 1;
        }
        match page.last() {
            Some(last) if page.len() == PAGE => after = Some(last.task_id.clone()),
            _ => return Ok(copied),
        }
    }
}

/// One artifact at a time: its content goes over as the source hands it out (a spilled
/// one as an open file, streamed into the target in pieces).
async fn copy_artifacts(source: &Store, target: &Store) -> Result<(u64, u64)> {
    let (mut copied, mut bytes) = (0u64, 0u64);
    let mut after: Option<String> = None;
    loop {
        let page = source
            .artifact_headers_after(after.as_deref(), PAGE)
            .await
            .context("reading artifacts")?;
        for header in &page {
            let id = header.artifact_id.as_str();
            let content = source
                .artifact_content(id)
                .await
                .with_context(|| format!("reading artifact {id}"))?
                .with_context(|| format!("artifact {id} disappeared while it was copied"))?;
            bytes += content.body.stored_len();
            target
                .import_artifact(&content.header, content.body)
                .await
                .with_context(|| format!("writing artifact {id}"))?;
            copied += 1;
        }
        match page.last() {
            Some(last) if page.len() == PAGE => after = Some(last.artifact_id.clone()),
            _ => return Ok((copied, bytes)),
        }
    }
}

async fn copy_push_and_secrets(source: &Store, target: &Store) -> Result<(u64, u64)> {
    let mut push = 0u64;
    let mut after: Option<(String, String)> = None;
    loop {
        let key = after.as_ref().map(|(t, c)| (t.as_str(), c.as_str()));
        let page = source
            .push_configs_after(key, PAGE)
            .await
            .context("reading push configs")?;
        for config in &page {
            target.put_push_config(config).await.with_context(|| {
                format!(
                    "writing push config {} of task {}",
                    config.config_id, config.task_id
                )
            })?;
            push += 1;
        }
        match page.last() {
            Some(last) if page.len() == PAGE => {
                after = Some((last.task_id.clone(), last.config_id.clone()));
            }
            _ => break,
        }
    }
    let mut secrets = 0u64;
    let mut after: Option<(String, String)> = None;
    loop {
        let key = after.as_ref().map(|(p, q)| (p.as_str(), q.as_str()));
        let page = source
            .sealed_secrets_after(key, PAGE)
            .await
            .context("reading sealed secrets")?;
        for secret in &page {
            target.import_sealed_secret(secret).await.with_context(|| {
                format!(
                    "writing the sealed secret of {} for {}",
                    secret.principal, secret.provider
                )
            })?;
            secrets += 1;
        }
        match page.last() {
            Some(last) if page.len() == PAGE => {
                after = Some((last.principal.clone(), last.provider.clone()));
            }
            _ => return Ok((push, secrets)),
        }
    }
}

/// Every context's log, page by page, appended with the same `seq`s; each context's events
/// are flushed (committed) before the next context starts.
async fn copy_events(source: &Store, target: &Store) -> Result<(u64, u64)> {
    let (mut events, mut logs) = (0u64, 0u64);
    let mut reported = 0u64;
    let mut after: Option<String> = None;
    let log = target.event_log();
    loop {
        let page = source
            .event_contexts_after(after.as_deref(), PAGE)
            .await
            .context("reading the event logs' contexts")?;
        for context_id in &page {
            let mut seq = 0u64;
            loop {
                let chunk = source
                    .event_log()
                    .read_after(context_id, seq, EVENT_PAGE)
                    .await
                    .with_context(|| format!("reading the events of context {context_id}"))?;
                let full = chunk.len() == EVENT_PAGE;
                for event in chunk {
                    seq = event.seq;
                    log.append(event)
                        .await
                        .with_context(|| format!("writing event {seq} of context {context_id}"))?;
                    events += 1;
                }
                if events >= reported + EVENT_PROGRESS {
                    reported = events;
                    eprintln!("  events: {events}…");
                }
                if !full {
                    break;
                }
            }
            log.flush_context(context_id)
                .await
                .with_context(|| format!("committing the events of context {context_id}"))?;
            if seq > 0 {
                logs += 1;
            }
        }
        match page.last() {
            Some(last) if page.len() == PAGE => after = Some(last.clone()),
            _ => return Ok((events, logs)),
        }
    }
}

mod verify;

use verify::{Side, compare, count_line, human_bytes, print_summary};
