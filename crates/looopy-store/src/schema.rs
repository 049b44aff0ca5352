//! Versioned migrations. The version lives in `PRAGMA user_version`; each migration runs once,
//! in order, inside one transaction with the version bump, so a crash mid-migration leaves the
//! previous version intact. Never edit a released migration — append a new one.

use rusqlite::{Connection, TransactionBehavior};

use crate::StoreError;

/// Migration `i` (0-based) brings the schema from version `i` to `i + 1`.
const MIGRATIONS: &[&str] = &[
    // v1: contexts, messages, tasks, artifacts and the event log.
    r#"
    CREATE TABLE contexts (
        context_id TEXT PRIMARY KEY NOT NULL,
        owner      TEXT,
        title      TEXT,
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL
    ) WITHOUT ROWID;
    CREATE INDEX contexts_by_updated ON contexts(updated_at);
    CREATE INDEX contexts_by_owner ON contexts(owner, updated_at);

    CREATE TABLE messages (
        context_id TEXT NOT NULL,
        position   INTEGER NOT NULL,
        data       TEXT NOT NULL,
        PRIMARY KEY (context_id, position)
    ) WITHOUT ROWID;

    CREATE TABLE tasks (
        task_id        TEXT PRIMARY KEY NOT NULL,
        context_id     TEXT NOT NULL,
        parent_task_id TEXT,
        state          TEXT NOT NULL,
        created_at     TEXT NOT NULL,
        updated_at     TEXT NOT NULL,
        error          TEXT,
        result         TEXT,
        pending        TEXT
    ) WITHOUT ROWID;
    CREATE INDEX tasks_by_context ON tasks(context_id, created_at);
    CREATE INDEX tasks_by_state ON tasks(state);

    CREATE TABLE artifacts (
        artifact_id TEXT PRIMARY KEY NOT NULL,
        context_id  TEXT NOT NULL,
        task_id     TEXT NOT NULL,
        kind        TEXT NOT NULL,
        name        TEXT,
        mime_type   TEXT,
        content     TEXT NOT NULL,
        metadata    TEXT NOT NULL,
        created_at  TEXT NOT NULL,
        updated_at  TEXT NOT NULL
    );
    CREATE INDEX artifacts_by_context ON artifacts(context_id, created_at);

    -- Appended pieces of an artifact, kept apart so appending is O(chunk), not a rewrite
    -- of the whole content.
    CREATE TABLE artifact_chunks (
        artifact_id TEXT NOT NULL,
        position    INTEGER NOT NULL,
        data        TEXT NOT NULL,
        PRIMARY KEY (artifact_id, position)
    ) WITHOUT ROWID;

    CREATE TABLE events (
        context_id TEXT NOT NULL,
        seq        INTEGER NOT NULL,
        task_id    TEXT NOT NULL,
        kind       TEXT NOT NULL,
        ts         TEXT NOT NULL,
        data       TEXT NOT NULL,
        PRIMARY KEY (context_id, seq)
    ) WITHOUT ROWID;
    "#,
    // v2: the event log's rows carry only what reads need. Each context gets a small
    // integer key (so the text id is not repeated in every row and index entry), and the
    // rows live in a rowid table: appends take SQLite's append fast path and fill pages
    // completely, where the WITHOUT ROWID table rebalanced a leaf on every split. task_id,
    // kind and ts were copies of fields inside `data`; the `events` view still shows them
    // (and accepts inserts) for people and tools looking at the file directly.
    // `tasks_active` serves `Store::active_task` without scanning a context's history.
    r#"
    CREATE TABLE event_contexts (
        context_key INTEGER PRIMARY KEY,
        context_id  TEXT NOT NULL UNIQUE
    );
    CREATE TABLE event_log (
        context_key INTEGER NOT NULL,
        seq         INTEGER NOT NULL,
        data        TEXT NOT NULL
    );
    CREATE UNIQUE INDEX event_log_by_context ON event_log(context_key, seq);

    INSERT INTO event_contexts (context_id)
        SELECT DISTINCT context_id FROM events ORDER BY context_id;
    INSERT INTO event_log (context_key, seq, data)
        SELECT c.context_key, e.seq, e.data
        FROM events AS e JOIN event_contexts AS c USING (context_id)
        ORDER BY e.context_id, e.seq;
    DROP TABLE events;

    CREATE VIEW events (context_id, seq, task_id, kind, ts, data) AS
        SELECT c.context_id, l.seq,
               CASE WHEN json_valid(l.data) THEN json_extract(l.data, '$.taskId') END,
               CASE WHEN json_valid(l.data) THEN json_extract(l.data, '$.kind') END,
               CASE WHEN json_valid(l.data) THEN json_extract(l.data, '$.timestamp') END,
               l.data
        FROM event_log AS l JOIN event_contexts AS c USING (context_key);
    CREATE TRIGGER events_insert INSTEAD OF INSERT ON events BEGIN
        INSERT OR IGNORE INTO event_contexts (context_id) VALUES (NEW.context_id);
        INSERT INTO event_log (context_key, seq, data) VALUES (
            (SELECT context_key FROM event_contexts WHERE context_id = NEW.context_id),
            NEW.seq,
            NEW.data
        );
    END;

    CREATE INDEX tasks_active ON tasks(context_id, created_at, task_id)
        WHERE state IN ('submitted', 'working', 'waiting-input', 'waiting-auth', 'waiting-subtask');
    "#,
    // v3: A2A push-notification configs (webhooks) per task, with each one's delivery
    // cursor (the last event `seq` delivered), so deliveries resume after a restart.
    r#"
    CREATE TABLE push_configs (
        task_id     TEXT NOT NULL,
        config_id   TEXT NOT NULL,
        context_id  TEXT NOT NULL,
        owner       TEXT,
        protocol    TEXT NOT NULL,
        url         TEXT NOT NULL,
        token       TEXT,
        auth_scheme TEXT,
        credentials TEXT,
        from_seq    INTEGER NOT NULL,
        cursor      INTEGER NOT NULL,
        done        INTEGER NOT NULL DEFAULT 0,
        created_at  TEXT NOT NULL,
        PRIMARY KEY (task_id, config_id)
    ) WITHOUT ROWID;
    CREATE INDEX push_configs_pending ON push_configs(done, created_at);
    "#,
    // v4: credentials users gave tools (API keys, OAuth tokens), per principal and
    // provider, sealed by the layer above (an AEAD): the store only ever sees ciphertext.
    r#"
    CREATE TABLE sealed_secrets (
        principal  TEXT NOT NULL,
        provider   TEXT NOT NULL,
        sealed     BLOB NOT NULL,
        updated_at TEXT NOT NULL,
        PRIMARY KEY (principal, provider)
    ) WITHOUT ROWID;
    "#,
    // v5: which process runs a context's turn (see `Store::acquire_lease`). One process
    // writes a SQLite file, so here a lease only records intent; PostgreSQL's replicas also
    // fence their appends with the token.
    r#"
    CREATE TABLE context_leases (
        context_id TEXT PRIMARY KEY NOT NULL,
        owner      TEXT NOT NULL,
        token      INTEGER NOT NULL,
        expires_at TEXT NOT NULL,
        released   INTEGER NOT NULL DEFAULT 0
    ) WITHOUT ROWID;
    "#,
    // v6: which process delivers a push config's notifications (see
    // `Store::acquire_push_lease`); the same semantics as the context leases.
    r#"
    CREATE TABLE push_leases (
        task_id    TEXT NOT NULL,
        config_id  TEXT NOT NULL,
        owner      TEXT NOT NULL,
        token      INTEGER NOT NULL,
        expires_at TEXT NOT NULL,
        released   INTEGER NOT NULL DEFAULT 0,
        PRIMARY KEY (task_id, config_id)
    ) WITHOUT ROWID;
    "#,
];

/// The schema version this build writes.
pub const SCHEMA_VERSION: i64 = MIGRATIONS.len() as i64;

/// Brings the database to [`SCHEMA_VERSION`]; a no-op when it is already there.
pub(crate) fn migrate(conn: &mut Connection) -> Result<(), StoreError> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let found: i64 = tx.pragma_query_value(None, "user_version", |row| row.get(0))?;
    if found > SCHEMA_VERSION {
        return Err(StoreError::SchemaTooNew {
            found,
            supported: SCHEMA_VERSION,
        });
    }
    let start = usize::try_from(found.max(0)).unwrap_or(0);
    for (index, sql) in MIGRATIONS.iter().enumerate().skip(start) {
        tracing::info!(version = index + 1, "applying store migration");
        tx.execute_batch(sql)?;
    }
    if found != SCHEMA_VERSION {
        tx.pragma_update(None, "user_version", SCHEMA_VERSION)?;
    }
    tx.commit()?;
    Ok(())
}

/// The version recorded in the file.
pub(crate) fn current_version(conn: &Connection) -> Result<i64, StoreError> {
    Ok(conn.pragma_query_value(None, "user_version", |row| row.get(0))?)
}
