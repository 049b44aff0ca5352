//! Versioned migrations for PostgreSQL, embedded in the binary and applied at open. The
//! tables mirror the SQLite schema (same columns, timestamps as fixed-width RFC 3339 text)
//! so both backends read and order records identically; every text column that is sorted or
//! compared as a cursor uses the `"C"` collation (byte order, as SQLite compares).
//!
//! Replicas that start together take a transaction-scoped advisory lock first, so exactly one
//! of them applies a migration and the others find it done. Never edit a released migration.

use crate::StoreError;

/// Key of the advisory lock held while migrating (any fixed number unique to Looopy).
const MIGRATION_LOCK: i64 = 0x6c6f_6f6f_7079_0001;

/// Migration `i` (0-based) brings the schema from version `i` to `i + 1`.
const MIGRATIONS: &[&str] = &[
    // v1: everything the SQLite schema v4 has, plus the context leases of scale-out.
    r#"
    CREATE TABLE contexts (
        context_id TEXT COLLATE "C" PRIMARY KEY,
        owner      TEXT COLLATE "C",
        title      TEXT,
        created_at TEXT COLLATE "C" NOT NULL,
        updated_at TEXT COLLATE "C" NOT NULL
    );
    CREATE INDEX contexts_by_updated ON contexts(updated_at);
    CREATE INDEX contexts_by_owner ON contexts(owner, updated_at);

    CREATE TABLE messages (
        context_id TEXT COLLATE "C" NOT NULL,
        position   BIGINT NOT NULL,
        data       TEXT NOT NULL,
        PRIMARY KEY (context_id, position)
    );

    CREATE TABLE tasks (
        task_id        TEXT COLLATE "C" PRIMARY KEY,
        context_id     TEXT COLLATE "C" NOT NULL,
        parent_task_id TEXT COLLATE "C",
        state          TEXT COLLATE "C" NOT NULL,
        created_at     TEXT COLLATE "C" NOT NULL,
        updated_at     TEXT COLLATE "C" NOT NULL,
        error          TEXT,
        result         TEXT,
        pending        TEXT
    );
    CREATE INDEX tasks_by_context ON tasks(context_id, created_at);
    CREATE INDEX tasks_by_state ON tasks(state);
    CREATE INDEX tasks_by_created ON tasks(created_at, task_id);
    CREATE INDEX tasks_active ON tasks(context_id, created_at, task_id)
        WHERE state IN ('submitted', 'working', 'waiting-input', 'waiting-auth', 'waiting-subtask');

    CREATE TABLE artifacts (
        artifact_id TEXT COLLATE "C" PRIMARY KEY,
        context_id  TEXT COLLATE "C" NOT NULL,
        task_id     TEXT COLLATE "C" NOT NULL,
        kind        TEXT COLLATE "C" NOT NULL,
        name        TEXT,
        mime_type   TEXT,
        -- Content columns are the UTF-8 bytes of the text: unlike SQLite's TEXT,
        -- PostgreSQL's cannot hold U+0000, which a text file may contain.
        content     BYTEA NOT NULL,
        metadata    TEXT NOT NULL,
        created_at  TEXT COLLATE "C" NOT NULL,
        updated_at  TEXT COLLATE "C" NOT NULL
    );
    CREATE INDEX artifacts_by_context ON artifacts(context_id, created_at);
    CREATE INDEX artifacts_by_task ON artifacts(task_id, created_at);

    -- Appended pieces of an artifact, so appending is O(chunk), not a rewrite.
    CREATE TABLE artifact_chunks (
        artifact_id TEXT COLLATE "C" NOT NULL,
        position    BIGINT NOT NULL,
        data        BYTEA NOT NULL,
        PRIMARY KEY (artifact_id, position)
    );

    -- Artifact content too big to keep in a row of `artifacts` (the SQLite backend keeps it
    -- in files beside the database; replicas share nothing but the database), in pieces of
    -- at most 256 KiB so a reader streams it in bounded memory. Rows here mean the content
    -- lives here: the artifact's row content is then empty and it has no chunks.
    CREATE TABLE artifact_blobs (
        artifact_id TEXT COLLATE "C" NOT NULL,
        position    BIGINT NOT NULL,
        data        BYTEA NOT NULL,
        PRIMARY KEY (artifact_id, position)
    );

    -- The event log. `event_heads` holds each context's highest seq: the append transaction
    -- locks a context's head row, so writers on different replicas are serialised per
    -- context and its seqs stay strictly increasing and gapless.
    CREATE TABLE event_heads (
        context_id TEXT COLLATE "C" PRIMARY KEY,
        last_seq   BIGINT NOT NULL
    );
    CREATE TABLE event_log (
        context_id TEXT COLLATE "C" NOT NULL,
        seq        BIGINT NOT NULL,
        data       TEXT NOT NULL,
        PRIMARY KEY (context_id, seq)
    );

    CREATE TABLE push_configs (
        task_id     TEXT COLLATE "C" NOT NULL,
        config_id   TEXT COLLATE "C" NOT NULL,
        context_id  TEXT COLLATE "C" NOT NULL,
        owner       TEXT,
        protocol    TEXT NOT NULL,
        url         TEXT NOT NULL,
        token       TEXT,
        auth_scheme TEXT,
        credentials TEXT,
        from_seq    BIGINT NOT NULL,
        cursor      BIGINT NOT NULL,
        done        BIGINT NOT NULL DEFAULT 0,
        created_at  TEXT COLLATE "C" NOT NULL,
        PRIMARY KEY (task_id, config_id)
    );
    CREATE INDEX push_configs_pending ON push_configs(done, created_at);

    CREATE TABLE sealed_secrets (
        principal  TEXT COLLATE "C" NOT NULL,
        provider   TEXT COLLATE "C" NOT NULL,
        sealed     BYTEA NOT NULL,
        updated_at TEXT NOT NULL,
        PRIMARY KEY (principal, provider)
    );

    -- Which replica runs a context's turn: the holder writes only while its token is the
    -- row's (fencing), and anyone may take a lease whose time is up (token + 1).
    CREATE TABLE context_leases (
        context_id TEXT COLLATE "C" PRIMARY KEY,
        owner      TEXT NOT NULL,
        token      BIGINT NOT NULL,
        expires_at TIMESTAMPTZ NOT NULL,
        -- Given back by its holder: free, but the row stays so tokens only ever grow.
        released   BOOLEAN NOT NULL DEFAULT FALSE
    );
    CREATE INDEX context_leases_by_expiry ON context_leases(expires_at);
    "#,
    // v2: which replica delivers a push config's notifications (`Store::acquire_push_lease`):
    // the same semantics as the context leases, apart from them so that neither their expiry
    // sweep nor the event log's fencing ever sees these.
    r#"
    CREATE TABLE push_leases (
        task_id    TEXT COLLATE "C" NOT NULL,
        config_id  TEXT COLLATE "C" NOT NULL,
        owner      TEXT NOT NULL,
        token      BIGINT NOT NULL,
        expires_at TIMESTAMPTZ NOT NULL,
        released   BOOLEAN NOT NULL DEFAULT FALSE,
        PRIMARY KEY (task_id, config_id)
    );
    "#,
];

/// The schema version this build writes.
pub(crate) const SCHEMA_VERSION: i64 = MIGRATIONS.len() as i64;

/// Brings the database (the connection's `search_path` schema) to [`SCHEMA_VERSION`].
pub(super) async fn migrate(client: &mut tokio_postgres::Client) -> Result<(), StoreError> {
    let tx = client.transaction().await?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])
        .await?;
    tx.batch_execute(
        "CREATE TABLE IF NOT EXISTS looopy_schema (
            singleton BOOLEAN PRIMARY KEY DEFAULT TRUE CHECK (singleton),
            version   BIGINT NOT NULL
        )",
    )
    .await?;
    let found: i64 = tx
        .query_opt("SELECT version FROM looopy_schema", &[])
        .await?
        .map(|row| row.try_get(0))
        .transpose()?
        .unwrap_or(0);
    if found > SCHEMA_VERSION {
        return Err(StoreError::SchemaTooNew {
            found,
            supported: SCHEMA_VERSION,
        });
    }
    let start = usize::try_from(found.max(0)).unwrap_or(0);
    for (index, sql) in MIGRATIONS.iter().enumerate().skip(start) {
        tracing::info!(version = index + 1, "applying PostgreSQL store migration");
        tx.batch_execute(sql).await?;
    }
    if found != SCHEMA_VERSION {
        tx.execute(
            "INSERT INTO looopy_schema (singleton, version) VALUES (TRUE, $1)
             ON CONFLICT (singleton) DO UPDATE SET version = EXCLUDED.version",
            &[&SCHEMA_VERSION],
        )
        .await?;
    }
    tx.commit().await?;
    Ok(())
}

/// The version recorded in the database; 0 before the first migration.
pub(super) async fn current_version(client: &tokio_postgres::Client) -> Result<i64, StoreError> {
    let exists: bool = client
        .query_one("SELECT to_regclass('looopy_schema') IS NOT NULL", &[])
        .await?
        .try_get(0)?;
    if !exists {
        return Ok(0);
    }
    Ok(client
        .query_opt("SELECT version FROM looopy_schema", &[])
        .await?
        .map(|row| row.try_get(0))
        .transpose()?
        .unwrap_or(0))
}
