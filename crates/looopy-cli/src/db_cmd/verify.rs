//! Verifying a copy: counts and a checksum read independently from both stores, compared,
//! and the summary printed.

use super::*;

/// What one store holds, as verification reads it back: the database's own counts, the
/// counts of what was read (with breakdowns), and the checksum of it all.
pub(super) struct Side {
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
    pub(super) async fn read(store: &Store) -> Result<Side> {
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
pub(super) fn compare(source: &Side, target: &Side) -> Vec<String> {
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
pub(super) fn count_line(counts: &BTreeMap<&'static str, u64>) -> String {
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

pub(super) fn human_bytes(bytes: u64) -> String {
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

pub(super) fn print_summary(
    from: &Path,
    target: &str,
    side: &Side,
    [copy, verify, total]: [Duration; 3],
) {
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
