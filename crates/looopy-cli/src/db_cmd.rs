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

/// What one store holds, as verification reads it back: the database's own counts, the
/// counts of what was read (with breakdowns), and the checksum of it all.
struct Side {
    /// `Store::row_counts`: counted by the database.
    rows: BTreeMap<&'static str, u64>,
    /// Counted while reading: the same names as `rows`, plus `tasks.<state>`,
    /// `artifacts.<kind>`, `events.<kind>` and `artifact_bytes`.
    read: BTreeMap<String, u64>,
    /// SHA-256 (hex) of the canonical serialization of everything read.
    checksum: String,
}

/// A SHA-256 over framed records: each is its section's name and its bytes, both preceded
/// by their length, so no two different sequences of records hash alike.
struct Hasher {
    sha: Sha256,
    counts: BTreeMap<String, u64>,
}

impl Hasher {
    fn new() -> Self {
        Self {
            sha: Sha256::new(),
            counts: BTreeMap::new(),
        }
    }

    fn frame(&mut self, section: &str, bytes: &[u8]) {
        self.head(section, bytes.len() as u64);
        self.sha.update(bytes);
    }

    /// A frame's header; its `len` bytes follow through `self.sha`.
    fn head(&mut self, section: &str, len: u64) {
        self.sha.update((section.len() as u64).to_le_bytes());
        self.sha.update(section.as_bytes());
        self.sha.update(len.to_le_bytes());
    }

    fn json(&mut self, section: &str, value: &impl serde::Serialize) -> Result<()> {
        let bytes = serde_json::to_vec(value).context("serializing a record")?;
        self.frame(section, &bytes);
        Ok(())
    }

    fn count(&mut self, key: &str, by: u64) {
        *self.counts.entry(key.to_string()).or_default() += by;
    }
}

fn push_json(c: &PushConfigRecord) -> serde_json::Value {
    json!({
        "taskId": c.task_id,
        "configId": c.config_id,
        "contextId": c.context_id,
        "owner": c.owner,
        "protocol": c.protocol,
        "url": c.url,
        "token": c.token,
        "authScheme": c.auth_scheme,
        "credentials": c.credentials,
        "fromSeq": c.from_seq,
        "cursor": c.cursor,
        "done": c.done,
        "createdAt": c.created_at.to_rfc3339_opts(SecondsFormat::Nanos, true),
    })
}

impl Side {
    /// Reads everything `store` holds, in key order, through its public API.
    async fn read(store: &Store) -> Result<Side> {
        let rows = store.row_counts().await.context("counting records")?;
        let mut h = Hasher::new();
        Self::contexts(store, &mut h).await?;
        Self::tasks(store, &mut h).await?;
        Self::artifacts(store, &mut h).await?;
        Self::push_and_secrets(store, &mut h).await?;
        Self::events(store, &mut h).await?;
        let checksum = h
            .sha
            .finalize()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        Ok(Side {
            rows,
            read: h.counts,
            checksum,
        })
    }

    async fn contexts(store: &Store, h: &mut Hasher) -> Result<()> {
        h.count("contexts", 0);
        h.count("messages", 0);
        let mut after: Option<String> = None;
        loop {
            let page = store.contexts_after(after.as_deref(), PAGE).await?;
            for context in &page {
                h.json("context", context)?;
                h.count("contexts", 1);
                let id = context.context_id.as_str();
                let mut position = None;
                loop {
                    let chunk = store.load_messages_page(id, position, PAGE).await?;
                    for (at, message) in &chunk {
                        h.json(
                            "message",
                            &json!({ "contextId": id, "position": at, "message": message }),
                        )?;
                        h.count("messages", 1);
                    }
                    match chunk.last() {
                        Some((last, _)) if chunk.len() == PAGE => position = Some(*last),
                        _ => break,
                    }
                }
            }
            match page.last() {
                Some(last) if page.len() == PAGE => after = Some(last.context_id.clone()),
                _ => return Ok(()),
            }
        }
    }

    async fn tasks(store: &Store, h: &mut Hasher) -> Result<()> {
        h.count("tasks", 0);
        let mut after: Option<String> = None;
        loop {
            let page = store.tasks_after(after.as_deref(), PAGE).await?;
            for task in &page {
                h.json("task", task)?;
                h.count("tasks", 1);
                h.count(&format!("tasks.{}", task.state.as_str()), 1);
            }
            match page.last() {
                Some(last) if page.len() == PAGE => after = Some(last.task_id.clone()),
                _ => return Ok(()),
            }
        }
    }

    /// Headers as JSON, content as the stored bytes, streamed in blocks.
    async fn artifacts(store: &Store, h: &mut Hasher) -> Result<()> {
        h.count("artifacts", 0);
        h.count("artifact_bytes", 0);
        let mut after: Option<String> = None;
        loop {
            let page = store.artifact_headers_after(after.as_deref(), PAGE).await?;
            for header in &page {
                let id = header.artifact_id.as_str();
                let content = store
                    .artifact_content(id)
                    .await?
                    .with_context(|| format!("artifact {id} disappeared while it was read"))?;
                h.json("artifact", &content.header)?;
                let len = content.body.stored_len();
                h.head("artifact-content", len);
                match content.body {
                    ArtifactBody::Inline(text) => h.sha.update(text.as_bytes()),
                    ArtifactBody::File { file, path, .. } => {
                        hash_file(&mut h.sha, file, &path, len, id).await?;
                    }
                    // A kind of body this build does not know: its content is not compared.
                    _ => anyhow::bail!("artifact {id}: unknown kind of content"),
                }
                h.count("artifacts", 1);
                h.count(&format!("artifacts.{}", header.kind), 1);
                h.count("artifact_bytes", len);
            }
            match page.last() {
                Some(last) if page.len() == PAGE => after = Some(last.artifact_id.clone()),
                _ => return Ok(()),
            }
        }
    }

    async fn push_and_secrets(store: &Store, h: &mut Hasher) -> Result<()> {
        h.count("push_configs", 0);
        h.count("sealed_secrets", 0);
        let mut after: Option<(String, String)> = None;
        loop {
            let key = after.as_ref().map(|(t, c)| (t.as_str(), c.as_str()));
            let page = store.push_configs_after(key, PAGE).await?;
            for config in &page {
                h.json("push-config", &push_json(config))?;
                h.count("push_configs", 1);
            }
            match page.last() {
                Some(last) if page.len() == PAGE => {
                    after = Some((last.task_id.clone(), last.config_id.clone()));
                }
                _ => break,
            }
        }
        let mut after: Option<(String, String)> = None;
        loop {
            let key = after.as_ref().map(|(p, q)| (p.as_str(), q.as_str()));
            let page = store.sealed_secrets_after(key, PAGE).await?;
            for secret in &page {
                h.json(
                    "sealed-secret",
                    &json!({
                        "principal": secret.principal,
                        "provider": secret.provider,
                        "updatedAt": secret.updated_at.to_rfc3339_opts(SecondsFormat::Nanos, true),
                    }),
                )?;
                h.frame("sealed", &secret.sealed);
                h.count("sealed_secrets", 1);
            }
            match page.last() {
                Some(last) if page.len() == PAGE => {
                    after = Some((last.principal.clone(), last.provider.clone()));
                }
                _ => return Ok(()),
            }
        }
    }

    /// Every event in `(context, seq)` order, checking that `seq`s increase.
    async fn events(store: &Store, h: &mut Hasher) -> Result<()> {
        h.count("events", 0);
        h.count("event_logs", 0);
        let mut after: Option<String> = None;
        loop {
            let page = store.event_contexts_after(after.as_deref(), PAGE).await?;
            for context_id in &page {
                let mut seq = 0u64;
                loop {
                    let chunk = store
                        .event_log()
                        .read_after(context_id, seq, EVENT_PAGE)
                        .await?;
                    let full = chunk.len() == EVENT_PAGE;
                    for event in &chunk {
                        anyhow::ensure!(
                            event.seq > seq && event.context_id == *context_id,
                            "event {} of context {} is out of place in the log of {context_id} after {seq}",
                            event.seq,
                            event.context_id
                        );
                        seq = event.seq;
                        h.json("event", event)?;
                        h.count("events", 1);
                        h.count(&format!("events.{}", event.kind()), 1);
                    }
                    if !full {
                        break;
                    }
                }
                if seq > 0 {
                    h.count("event_logs", 1);
                }
            }
            match page.last() {
                Some(last) if page.len() == PAGE => after = Some(last.clone()),
                _ => return Ok(()),
            }
        }
    }
}

/// Hashes the first `len` bytes of an artifact's content file, a block at a time.
async fn hash_file(
    sha: &mut Sha256,
    file: std::fs::File,
    path: &Path,
    len: u64,
    id: &str,
) -> Result<()> {
    let mut reader = tokio::fs::File::from_std(file).take(len);
    let mut block = vec![0u8; BLOCK];
    let mut read = 0u64;
    loop {
        let n = reader.read(&mut block).await.with_context(|| {
            format!("reading the content of artifact {id} ({})", path.display())
        })?;
        if n == 0 {
            break;
        }
        sha.update(&block[..n]);
        read += n as u64;
    }
    anyhow::ensure!(
        read == len,
        "artifact {id}: its content file held {read} bytes, not {len}"
    );
    Ok(())
}

/// Every difference between the two sides, and every place where a side's reading does not
/// add up to its database's counts; empty when the copy is exact.
fn compare(source: &Side, target: &Side) -> Vec<String> {
    let mut problems = Vec::new();
    let names: std::collections::BTreeSet<&str> = source
        .rows
        .keys()
        .chain(target.rows.keys())
        .copied()
        .collect();
    for name in names {
        let (s, t) = (source.rows.get(name), target.rows.get(name));
        if s != t {
            problems.push(format!(
                "{name} (rows): source {}, target {}",
                shown(s),
                shown(t)
            ));
        }
    }
    let keys: std::collections::BTreeSet<&String> =
        source.read.keys().chain(target.read.keys()).collect();
    for key in keys {
        let (s, t) = (source.read.get(key), target.read.get(key));
        if s != t {
            problems.push(format!(
                "{key} (read): source {}, target {}",
                shown(s),
                shown(t)
            ));
        }
    }
    for (side, which) in [(source, "source"), (target, "target")] {
        for (name, rows) in &side.rows {
            let read = side.read.get(*name).copied().unwrap_or(0);
            if read != *rows {
                problems.push(format!(
                    "{name}: the {which} database counts {rows} but {read} were read"
                ));
            }
        }
    }
    if source.checksum != target.checksum {
        problems.push(format!(
            "checksum: source sha256:{}, target sha256:{}",
            source.checksum, target.checksum
        ));
    }
    problems
}

fn shown(n: Option<&u64>) -> String {
    n.map_or_else(|| "none".to_string(), u64::to_string)
}

/// `contexts 3, messages 12, …` from row counts.
fn count_line(counts: &BTreeMap<&'static str, u64>) -> String {
    [
        "contexts",
        "messages",
        "tasks",
        "artifacts",
        "push_configs",
        "sealed_secrets",
        "events",
    ]
    .iter()
    .map(|name| {
        format!(
            "{} {}",
            name.replace('_', " "),
            counts.get(name).copied().unwrap_or(0)
        )
    })
    .collect::<Vec<_>>()
    .join(", ")
}

/// `completed 2, failed 1` from the `prefix.`-keyed counts.
fn breakdown(read: &BTreeMap<String, u64>, prefix: &str) -> String {
    read.iter()
        .filter_map(|(key, n)| {
            key.strip_prefix(prefix)
                .and_then(|rest| rest.strip_prefix('.'))
                .map(|name| format!("{name} {n}"))
        })
        .collect::<Vec<_>>()
        .join(", ")
}

fn human_bytes(bytes: u64) -> String {
    const UNITS: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];
    if bytes < 1024 {
        return format!("{bytes} B");
    }
    let mut value = bytes as f64 / 1024.0;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.1} {}", UNITS[unit])
}

fn seconds(d: Duration) -> String {
    format!("{:.2}s", d.as_secs_f64())
}

fn print_summary(from: &Path, target: &str, side: &Side, [copy, verify, total]: [Duration; 3]) {
    let n = |key: &str| side.read.get(key).copied().unwrap_or(0);
    let with = |count: u64, detail: String| {
        if detail.is_empty() {
            count.to_string()
        } else {
            format!("{count}  ({detail})")
        }
    };
    println!("Migrated {} → {target}", from.display());
    println!("  contexts        {}", n("contexts"));
    println!("  messages        {}", n("messages"));
    println!(
        "  tasks           {}",
        with(n("tasks"), breakdown(&side.read, "tasks"))
    );
    let artifacts = breakdown(&side.read, "artifacts");
    let content = human_bytes(n("artifact_bytes"));
    println!(
        "  artifacts       {}",
        with(
            n("artifacts"),
            if artifacts.is_empty() {
                format!("{content} of content")
            } else {
                format!("{artifacts}; {content} of content")
            }
        )
    );
    println!("  push configs    {}", n("push_configs"));
    println!("  sealed secrets  {}", n("sealed_secrets"));
    println!(
        "  events          {}",
        with(
            n("events"),
            format!(
                "in {} logs; {}",
                n("event_logs"),
                breakdown(&side.read, "events")
            )
        )
    );
    println!("  checksum        sha256:{}", side.checksum);
    println!(
        "  time            copy {}, verify {}, total {}",
        seconds(copy),
        seconds(verify),
        seconds(total)
    );
    println!(
        "Verified: the counts of every table and kind and the checksum are equal on both sides."
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    fn side(events: u64, checksum: &str) -> Side {
        let rows = BTreeMap::from([("contexts", 2), ("events", events)]);
        let read = BTreeMap::from([
            ("contexts".to_string(), 2),
            ("events".to_string(), events),
            ("events.content-delta".to_string(), events),
        ]);
        Side {
            rows,
            read,
            checksum: checksum.to_string(),
        }
    }

    #[test]
    fn equal_sides_pass_and_every_difference_is_listed() {
        assert!(compare(&side(10, "ab"), &side(10, "ab")).is_empty());
        let problems = compare(&side(10, "ab"), &side(9, "cd"));
        let all = problems.join("\n");
        assert!(all.contains("events (rows): source 10, target 9"), "{all}");
        assert!(
            all.contains("events.content-delta (read): source 10, target 9"),
            "{all}"
        );
        assert!(
            all.contains("checksum: source sha256:ab, target sha256:cd"),
            "{all}"
        );
        // A side whose reading does not add up to its database's own counts.
        let mut short = side(10, "ab");
        short.read.insert("events".to_string(), 8);
        let problems = compare(&side(10, "ab"), &short);
        assert!(
            problems
                .iter()
                .any(|p| p == "events: the target database counts 10 but 8 were read"),
            "{problems:?}"
        );
    }

    #[test]
    fn the_hash_frames_records() {
        let digest = |parts: &[(&str, &[u8])]| {
            let mut h = Hasher::new();
            for (section, bytes) in parts {
                h.frame(section, bytes);
            }
            h.sha.finalize()
        };
        assert_ne!(
            digest(&[("event", b"ab"), ("event", b"c")]),
            digest(&[("event", b"a"), ("event", b"bc")])
        );
        assert_eq!(human_bytes(512), "512 B");
        assert_eq!(human_bytes(3 * 1024 * 1024 / 2), "1.5 MiB");
    }
}
