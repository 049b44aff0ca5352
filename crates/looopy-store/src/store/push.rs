//! A2A push-notification configs: the webhooks a client registered for a task, and how far
//! each one's deliveries got.
//!
//! Deliveries are driven from the event log, so the only delivery state kept here is a
//! cursor per config — the `seq` of the last event whose notifications the webhook
//! acknowledged. A restarted server resumes every unfinished config from its cursor, which
//! makes delivery at-least-once across crashes without queueing anything in memory.

use chrono::{DateTime, Utc};
use rusqlite::{Connection, OptionalExtension, params};

use super::Store;
use crate::StoreError;
use crate::db::{decode_time, encode_time, to_i64, to_u64};

const COLUMNS: &str = "task_id, config_id, context_id, owner, protocol, url, token, \
     auth_scheme, credentials, from_seq, cursor, done, created_at";

/// One webhook of a task. Its `token` and `credentials` are secrets: [`Debug`] hides them,
/// and nothing in the store logs them.
#[derive(Clone, PartialEq, Eq)]
pub struct PushConfigRecord {
    pub task_id: String,
    /// Unique within the task.
    pub config_id: String,
    pub context_id: String,
    /// The principal that created it; `None` when authentication is off.
    pub owner: Option<String>,
    /// The A2A protocol version the config was created with (`"1.0"`, `"0.3"`): the
    /// shape its notifications take.
    pub protocol: String,
    pub url: String,
    /// Sent as `X-A2A-Notification-Token`.
    pub token: Option<String>,
    /// Sent as `Authorization: <scheme> <credentials>`.
    pub auth_scheme: Option<String>,
    pub credentials: Option<String>,
    /// Deliveries map the task's events logged after this `seq` (before the task's first
    /// event, so the mapping sees the whole task).
    pub from_seq: u64,
    /// The last event `seq` whose notifications were delivered (or skipped); only later
    /// events are sent.
    pub cursor: u64,
    /// Set once the task's last notification was delivered or given up on.
    pub done: bool,
    pub created_at: DateTime<Utc>,
}

impl std::fmt::Debug for PushConfigRecord {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let hidden = |v: &Option<String>| v.as_ref().map(|_| "***");
        f.debug_struct("PushConfigRecord")
            .field("task_id", &self.task_id)
            .field("config_id", &self.config_id)
            .field("context_id", &self.context_id)
            .field("owner", &self.owner)
            .field("protocol", &self.protocol)
            .field("token", &hidden(&self.token))
            .field("auth_scheme", &self.auth_scheme)
            .field("credentials", &hidden(&self.credentials))
            .field("from_seq", &self.from_seq)
            .field("cursor", &self.cursor)
            .field("done", &self.done)
            .finish_non_exhaustive()
    }
}

type Raw = (
    String,
    String,
    String,
    Option<String>,
    String,
    String,
    Option<String>,
    Option<String>,
    Option<String>,
    i64,
    i64,
    bool,
    String,
);

fn raw(row: &rusqlite::Row<'_>) -> rusqlite::Result<Raw> {
    Ok((
        row.get(0)?,
        row.get(1)?,
        row.get(2)?,
        row.get(3)?,
        row.get(4)?,
        row.get(5)?,
        row.get(6)?,
        row.get(7)?,
        row.get(8)?,
        row.get(9)?,
        row.get(10)?,
        row.get(11)?,
        row.get(12)?,
    ))
}

fn decode(r: Raw) -> Result<PushConfigRecord, StoreError> {
    let key = format!("{}/{}", r.0, r.1);
    Ok(PushConfigRecord {
        from_seq: to_u64(r.9, "push_configs", &key)?,
        cursor: to_u64(r.10, "push_configs", &key)?,
        done: r.11,
        created_at: decode_time(&r.12, "push_configs", &key, "created_at")?,
        task_id: r.0,
        config_id: r.1,
        context_id: r.2,
        owner: r.3,
        protocol: r.4,
        url: r.5,
        token: r.6,
        auth_scheme: r.7,
        credentials: r.8,
    })
}

impl PushConfigRecord {
    /// The stored columns, in the order [`from_stored`](Self::from_stored) takes them (the
    /// PostgreSQL table has the same ones).
    pub(crate) const COLUMNS: &str = COLUMNS;

    /// A stored row (`COLUMNS`, in order, `done` as a boolean) as a record; shared by both
    /// backends.
    pub(crate) fn from_stored(raw: Raw) -> Result<Self, StoreError> {
        decode(raw)
    }
}

fn select(
    conn: &Connection,
    filter: &str,
    args: impl rusqlite::Params,
) -> Result<Vec<PushConfigRecord>, StoreError> {
    let rows = conn
        .prepare_cached(&format!("SELECT {COLUMNS} FROM push_configs {filter}"))?
        .query_map(args, raw)?
        .collect::<Result<Vec<_>, _>>()?;
    rows.into_iter().map(decode).collect()
}

impl Store {
    /// Creates or replaces (same task and id) a webhook config, exactly as given.
    pub async fn put_push_config(&self, config: &PushConfigRecord) -> Result<(), StoreError> {
        if let Some(pg) = self.pg() {
            return pg.put_push_config(config).await;
        }
        let c = config.clone();
        self.pool()?
            .run(move |conn| {
                conn.prepare_cached(&format!(
                    "INSERT OR REPLACE INTO push_configs ({COLUMNS})
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)"
                ))?
                .execute(params![
                    c.task_id,
                    c.config_id,
                    c.context_id,
                    c.owner,
                    c.protocol,
                    c.url,
                    c.token,
                    c.auth_scheme,
                    c.credentials,
                    to_i64(c.from_seq, "from_seq")?,
                    to_i64(c.cursor, "cursor")?,
                    c.done,
                    encode_time(&c.created_at),
                ])?;
                Ok(())
            })
            .await
    }

    /// One config of a task, if it exists.
    pub async fn get_push_config(
        &self,
        task_id: &str,
        config_id: &str,
    ) -> Result<Option<PushConfigRecord>, StoreError> {
        if let Some(pg) = self.pg() {
            return pg.get_push_config(task_id, config_id).await;
        }
        let (task_id, config_id) = (task_id.to_owned(), config_id.to_owned());
        self.pool()?
            .run(move |conn| {
                let raw = conn
                    .prepare_cached(&format!(
                        "SELECT {COLUMNS} FROM push_configs WHERE task_id = ?1 AND config_id = ?2"
                    ))?
                    .query_row([&task_id, &config_id], raw)
                    .optional()?;
                raw.map(decode).transpose()
            })
            .await
    }

    /// A task's configs, oldest first.
    pub async fn list_push_configs(
        &self,
        task_id: &str,
    ) -> Result<Vec<PushConfigRecord>, StoreError> {
        if let Some(pg) = self.pg() {
            return pg.list_push_configs(task_id).await;
        }
        let task_id = task_id.to_owned();
        self.pool()?
            .run(move |conn| {
                select(
                    conn,
                    "WHERE task_id = ?1 ORDER BY created_at, config_id",
                    [&task_id],
                )
            })
            .await
    }

    /// Every config whose deliveries are not finished, oldest first: what a starting
    /// server resumes.
    pub async fn pending_push_configs(&self) -> Result<Vec<PushConfigRecord>, StoreError> {
        if let Some(pg) = self.pg() {
            return pg.pending_push_configs().await;
        }
        self.pool()?
            .run(move |conn| {
                select(
                    conn,
                    "WHERE done = 0 ORDER BY created_at, task_id, config_id",
                    [],
                )
            })
            .await
    }

    /// Deletes a config; `false` when there was none (deleting is idempotent).
    pub async fn delete_push_config(
        &self,
        task_id: &str,
        config_id: &str,
    ) -> Result<bool, StoreError> {
        if let Some(pg) = self.pg() {
            return pg.delete_push_config(task_id, config_id).await;
        }
        let (task_id, config_id) = (task_id.to_owned(), config_id.to_owned());
        self.pool()?
            .run(move |conn| {
                let n = conn
                    .prepare_cached(
                        "DELETE FROM push_configs WHERE task_id = ?1 AND config_id = ?2",
                    )?
                    .execute([&task_id, &config_id])?;
                Ok(n > 0)
            })
            .await
    }

    /// Records delivery progress: the cursor moves to `cursor` (never back), and `done`
    /// marks the config finished. `false` when the config no longer exists (deleted).
    pub async fn advance_push_cursor(
        &self,
        task_id: &str,
        config_id: &str,
        cursor: u64,
        done: bool,
    ) -> Result<bool, StoreError> {
        if let Some(pg) = self.pg() {
            return pg
                .advance_push_cursor(task_id, config_id, cursor, done)
                .await;
        }
        let (task_id, config_id) = (task_id.to_owned(), config_id.to_owned());
        let cursor = to_i64(cursor, "cursor")?;
        self.pool()?
            .run(move |conn| {
                let n = conn
                    .prepare_cached(
                        "UPDATE push_configs SET cursor = max(cursor, ?3), done = (done OR ?4)
                         WHERE task_id = ?1 AND config_id = ?2",
                    )?
                    .execute(params![task_id, config_id, cursor, done])?;
                Ok(n > 0)
            })
            .await
    }
}
