//! `looopy db migrate --from PATH.db --to postgres://…` through the real binary: a SQLite
//! database with contexts (more than a page of them), messages, tasks in every kind of
//! state, artifacts (one streamed past the spill size into a content file, one put whole at
//! more than 1 MiB), push configs, sealed secrets and thousands of events is copied into a
//! PostgreSQL schema of the test's own, and everything must read back exactly; the source
//! file is left untouched; a source in use, a second run into the now non-empty target and
//! bad targets are refused with exit status 2. Needs the machine's PostgreSQL for the copy:
//! skips without it unless `LOOOPY_REQUIRE_E2E=1`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::process::{Command, Output, Stdio};

use looopy_protocol::event::{ContentComplete, ContentDelta, ErrorInfo, TaskStatus};
use looopy_protocol::{Event, EventPayload, Message, Sequencer, Stamp, TaskState};
use looopy_store::{ArtifactBody, ArtifactRecord, PushConfigRecord, Store, TaskRecord};
use looopy_testkit::services::TestSchema;
use serde_json::json;

/// More contexts than one page of the migration's listings (500).
const EMPTY_CONTEXTS: usize = 510;

/// Events per context of the three busy ones: one log spans two pages of 2000.
const EVENTS: [(&str, u64); 3] = [("ctx-a", 3100), ("ctx-b", 1500), ("ctx-c", 7)];

fn looopy(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_looopy"))
        .args(args)
        .env_remove("LOOOPY_DB")
        .env_remove("LOOOPY_CONFIG")
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .output()
        .expect("run looopy")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn describe(out: &Output) -> String {
    format!(
        "status {:?}\n--- stdout\n{}\n--- stderr\n{}",
        out.status.code(),
        text(&out.stdout),
        text(&out.stderr)
    )
}

/// Text of `len` bytes with multi-byte characters (so content pieces split inside them).
fn content(seed: &str, len: usize) -> String {
    let line = format!("{seed} — ünïcödé line ✓ 0123456789\n");
    let mut text = line.repeat(len / line.len() + 1);
    while text.len() > len {
        text.pop();
    }
    text
}

fn error(code: &str) -> ErrorInfo {
    ErrorInfo {
        code: code.into(),
        message: format!("{code} happened"),
        retryable: code == "llm_http",
    }
}

/// Builds the source database; returns its task ids and artifact ids.
async fn build_source(path: &Path) -> Store {
    let store = Store::open(path).unwrap();
    store.ensure_context("ctx-a", Some("alice")).await.unwrap();
    store.ensure_context("ctx-b", None).await.unwrap();
    store.ensure_context("ctx-c", Some("bob")).await.unwrap();
    store
        .set_context_title("ctx-a", Some("Alpha"))
        .await
        .unwrap();
    for i in 0..EMPTY_CONTEXTS {
        store
            .ensure_context(&format!("ctx-empty-{i:04}"), Some("carol"))
            .await
            .unwrap();
    }

    // More than a page of messages in one context; a history that was replaced in another.
    let many: Vec<Message> = (0..1_203)
        .map(|i| {
            if i % 2 == 0 {
                Message::user(format!("question {i}"))
            } else {
                Message::assistant(format!("answer {i} ✓"))
            }
        })
        .collect();
    store.append_messages("ctx-a", &many).await.unwrap();
    store
        .append_messages("ctx-b", &[Message::user("one"), Message::assistant("two")])
        .await
        .unwrap();
    store
        .replace_messages(
            "ctx-b",
            &[Message::system("summary"), Message::user("three")],
        )
        .await
        .unwrap();

    // Tasks in every kind of state, a sub-task, and enough of them for two pages.
    let mut completed = TaskRecord::new("task-a1", "ctx-a", TaskState::Completed);
    completed.result = Some("all done".into());
    let mut failed = TaskRecord::new("task-a2", "ctx-a", TaskState::Failed);
    failed.error = Some(error("llm_http"));
    let mut waiting = TaskRecord::new("task-b1", "ctx-b", TaskState::WaitingInput);
    waiting.pending = Some(json!({"inputId": "in-1", "prompt": "which one?", "n": [1, 2.5]}));
    let mut sub = TaskRecord::new("task-b2", "ctx-b", TaskState::Working);
    sub.parent_task_id = Some("task-b1".into());
    let canceled = TaskRecord::new("task-c1", "ctx-c", TaskState::Canceled);
    let auth = TaskRecord::new("task-c2", "ctx-c", TaskState::WaitingAuth);
    for task in [&completed, &failed, &waiting, &sub, &canceled, &auth] {
        store.put_task(task).await.unwrap();
    }
    for i in 0..EMPTY_CONTEXTS {
        let state = [
            TaskState::Completed,
            TaskState::Submitted,
            TaskState::Rejected,
        ][i % 3];
        let task = TaskRecord::new(
            format!("task-empty-{i:04}"),
            format!("ctx-empty-{i:04}"),
            state,
        );
        store.put_task(&task).await.unwrap();
    }

    // Artifacts: streamed past the spill size (a content file beside the database), put
    // whole at more than 1 MiB (stays in its row), appended in small chunks, a data record.
    let mut big = ArtifactRecord::new("art-big", "ctx-a", "task-a1", "file");
    big.name = Some("big.txt".into());
    big.mime_type = Some("text/plain".into());
    big.content = content("head", 1000);
    store.put_artifact(&big).await.unwrap();
    for i in 0..40 {
        store
            .append_artifact("art-big", &content(&format!("chunk {i}"), 64 * 1024 + 7))
            .await
            .unwrap();
    }
    store
        .merge_artifact_metadata("art-big", json!({"complete": true, "size": 12345}))
        .await
        .unwrap();
    let mut whole = ArtifactRecord::new("art-whole", "ctx-a", "task-a1", "file");
    whole.content = content("whole", 1_500_000);
    whole.metadata = json!({"encoding": "utf-8"});
    store.put_artifact(&whole).await.unwrap();
    let mut chunked = ArtifactRecord::new("art-chunks", "ctx-b", "task-b1", "dataset");
    chunked.content = "{\"row\":0}\n".into();
    store.put_artifact(&chunked).await.unwrap();
    for row in 1..5 {
        store
            .append_artifact("art-chunks", &format!("{{\"row\":{row}}}\n"))
            .await
            .unwrap();
    }
    let mut data = ArtifactRecord::new("art-data", "ctx-c", "task-c1", "data");
    data.content = "{\"answer\":42}".into();
    data.name = Some("answer".into());
    store.put_artifact(&data).await.unwrap();

    // Push configs (one finished, one with secrets) and sealed secrets.
    let now = chrono::Utc::now();
    let push = |task_id: &str, config_id: &str, done: bool| PushConfigRecord {
        task_id: task_id.into(),
        config_id: config_id.into(),
        context_id: "ctx-a".into(),
        owner: Some("alice".into()),
        protocol: "1.0".into(),
        url: format!("https://hooks.example/{config_id}"),
        token: Some(format!("token-{config_id}")),
        auth_scheme: (!done).then(|| "Bearer".to_string()),
        credentials: (!done).then(|| "s3cret".to_string()),
        from_seq: 3,
        cursor: if done { 40 } else { 7 },
        done,
        created_at: now,
    };
    store
        .put_push_config(&push("task-a1", "hook-1", true))
        .await
        .unwrap();
    store
        .put_push_config(&push("task-a2", "hook-2", false))
        .await
        .unwrap();
    store
        .put_sealed_secret("alice", "github", vec![0, 1, 2, 250, 255])
        .await
        .unwrap();
    store
        .put_sealed_secret("bob", "gitlab", b"sealed bytes".to_vec())
        .await
        .unwrap();

    // Thousands of events of several kinds.
    let log = store.event_log();
    for (context_id, count) in EVENTS {
        let seq = Sequencer::starting_after(0);
        let stamp = Stamp::new(context_id, format!("task-{context_id}"));
        for i in 0..count {
            let payload = match i % 50 {
                0 => EventPayload::TaskStatus(TaskStatus {
                    status: TaskState::Working,
                    message: Some(format!("step {i}")),
                    error: None,
                    metadata: Default::default(),
                }),
                49 => EventPayload::ContentComplete(ContentComplete {
                    content: format!("complete {i}"),
                    finish_reason: Some("stop".into()),
                }),
                _ => EventPayload::ContentDelta(ContentDelta {
                    delta: format!("δ{i} "),
                    index: i,
                }),
            };
            log.append(stamp.stamp(&seq, payload)).await.unwrap();
        }
    }
    log.flush().await.unwrap();
    store
}

/// Every event of a context's log, page by page.
async fn all_events(store: &Store, context_id: &str) -> Vec<Event> {
    let mut events = Vec::new();
    loop {
        let after = events.last().map_or(0, |e: &Event| e.seq);
        let page = store
            .event_log()
            .read_after(context_id, after, 1000)
            .await
            .unwrap();
        if page.is_empty() {
            return events;
        }
        events.extend(page);
    }
}

/// Asserts that `target` holds exactly what `source` holds, record by record.
async fn assert_same(source: &Store, target: &Store) {
    assert_eq!(
        source.row_counts().await.unwrap(),
        target.row_counts().await.unwrap()
    );
    let contexts = source.list_contexts(None).await.unwrap();
    assert_eq!(contexts.len(), 3 + EMPTY_CONTEXTS);
    assert_eq!(contexts, target.list_contexts(None).await.unwrap());
    for context in &contexts {
        let id = context.context_id.as_str();
        assert_eq!(
            source.get_context(id).await.unwrap(),
            target.get_context(id).await.unwrap()
        );
        assert_eq!(
            source.load_messages(id).await.unwrap(),
            target.load_messages(id).await.unwrap(),
            "messages of {id}"
        );
        assert_eq!(
            source.list_artifacts(id).await.unwrap(),
            target.list_artifacts(id).await.unwrap(),
            "artifacts of {id}"
        );
    }
    assert_eq!(source.load_messages("ctx-a").await.unwrap().len(), 1_203);

    let tasks = source.list_tasks(None).await.unwrap();
    assert_eq!(tasks.len(), 6 + EMPTY_CONTEXTS);
    assert_eq!(tasks, target.list_tasks(None).await.unwrap());
    for task in &tasks {
        assert_eq!(
            source.list_push_configs(&task.task_id).await.unwrap(),
            target.list_push_configs(&task.task_id).await.unwrap()
        );
    }
    assert_eq!(target.list_push_configs("task-a2").await.unwrap().len(), 1);
    assert_eq!(
        source.pending_push_configs().await.unwrap(),
        target.pending_push_configs().await.unwrap()
    );
    for id in ["art-big", "art-whole", "art-chunks", "art-data"] {
        let copied = target.get_artifact(id).await.unwrap().unwrap();
        assert_eq!(
            source.get_artifact(id).await.unwrap().unwrap(),
            copied,
            "{id}"
        );
    }
    let big = source.get_artifact("art-big").await.unwrap().unwrap();
    assert!(big.content.len() > 2 * 1024 * 1024, "{}", big.content.len());
    assert_eq!(big.metadata["complete"], json!(true));
    // The big, streamed artifact is in PostgreSQL's blob pieces and streams back whole.
    let body = target
        .artifact_content("art-big")
        .await
        .unwrap()
        .unwrap()
        .body;
    assert!(
        matches!(body, ArtifactBody::File { len, .. } if len == big.content.len() as u64),
        "{body:?}"
    );

    for (principal, provider) in [("alice", "github"), ("bob", "gitlab"), ("alice", "x")] {
        assert_eq!(
            source.get_sealed_secret(principal, provider).await.unwrap(),
            target.get_sealed_secret(principal, provider).await.unwrap()
        );
    }
    assert_eq!(
        source.sealed_secrets_after(None, 10).await.unwrap(),
        target.sealed_secrets_after(None, 10).await.unwrap()
    );

    let mut total = 0;
    for (context_id, count) in EVENTS {
        let from = all_events(source, context_id).await;
        let to = all_events(target, context_id).await;
        assert_eq!(from.len() as u64, count);
        assert_eq!(from, to, "events of {context_id}");
        for (a, b) in from.iter().zip(&to) {
            assert_eq!(a.seq, b.seq);
            assert_eq!(
                serde_json::to_value(a).unwrap(),
                serde_json::to_value(b).unwrap()
            );
        }
        assert_eq!(
            target.event_log().last_seq(context_id).await.unwrap(),
            count
        );
        total += to.len();
    }
    assert!(total > 4_000);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sqlite_database_is_copied_into_postgres_exactly_and_verified() {
    let Some(schema) = TestSchema::create("db_migrate").await else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("source.db");
    let db_arg = db.to_str().unwrap().to_string();
    let url = schema.url_with_schema();
    let source = build_source(&db).await;

    // While a writer holds the source, the migration refuses (and writes nothing).
    let out = looopy(&["db", "migrate", "--from", &db_arg, "--to", &url]);
    assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
    assert!(
        text(&out.stderr).contains("in use by"),
        "{}",
        describe(&out)
    );
    source.close().await.unwrap();
    drop(source);

    let before = std::fs::read(&db).unwrap();
    let out = looopy(&["db", "migrate", "--from", &db_arg, "--to", &url]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let stdout = text(&out.stdout);
    assert!(stdout.contains("Verified"), "{}", describe(&out));
    assert!(stdout.contains("checksum        sha256:"), "{stdout}");
    let events: u64 = EVENTS.iter().map(|(_, n)| n).sum();
    assert!(
        stdout.contains(&format!("events          {events}  (in 3 logs;")),
        "{stdout}"
    );
    assert!(
        stdout.contains(&format!("contexts        {}", 3 + EMPTY_CONTEXTS)),
        "{stdout}"
    );
    assert!(stdout.contains("sealed secrets  2"), "{stdout}");
    assert_eq!(
        std::fs::read(&db).unwrap(),
        before,
        "the source was modified"
    );

    let source = Store::open_read_only(&db).unwrap();
    let target = Store::connect(&url).await.unwrap();
    assert_same(&source, &target).await;

    // A second run into the now non-empty target is refused, and changes nothing.
    let out = looopy(&["db", "migrate", "--from", &db_arg, "--to", &url]);
    assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
    assert!(
        text(&out.stderr).contains("already holds Looopy data"),
        "{}",
        describe(&out)
    );
    assert_same(&source, &target).await;
    target.close().await.unwrap();
}

#[test]
fn bad_arguments_are_refused_clearly() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("source.db");
    drop(Store::open(&db).unwrap());
    let db_arg = db.to_str().unwrap();

    let refused = |args: &[&str], expected: &str| {
        let out = looopy(args);
        assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
        assert!(
            text(&out.stderr).contains(expected),
            "expected {expected:?} in:\n{}",
            describe(&out)
        );
    };
    let migrate = |to: &'static str| vec!["db", "migrate", "--from", db_arg, "--to", to];

    refused(
        &migrate("mysql://root@127.0.0.1/x"),
        "must be a PostgreSQL URL",
    );
    refused(
        &migrate("postgres://postgres@127.0.0.1:notaport/test"),
        "bad PostgreSQL URL",
    );
    // Nothing listens on port 1: the connection is refused at once.
    refused(
        &migrate("postgres://postgres:hunter2@127.0.0.1:1/test"),
        "cannot open the target postgres://postgres@127.0.0.1:1/test",
    );
    let out = looopy(&migrate("postgres://postgres:hunter2@127.0.0.1:1/test"));
    assert!(!text(&out.stderr).contains("hunter2"), "{}", describe(&out));
    refused(
        &[
            "db",
            "migrate",
            "--from",
            dir.path().join("missing.db").to_str().unwrap(),
            "--to",
            "postgres://postgres@127.0.0.1/test",
        ],
        "no SQLite database at",
    );
}
