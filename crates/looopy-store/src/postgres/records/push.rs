//! A2A push-notification configs on PostgreSQL: stored exactly as given, listed per task
//! and pending in creation order, cursors that only move forward. `done` is a 0/1 BIGINT,
//! as in the SQLite table.

use tokio_postgres::Row;

use crate::db::{encode_time, to_i64};
use crate::postgres::PgBackend;
use crate::{PushConfigRecord, StoreError};

/// A row of `SELECT PushConfigRecord::COLUMNS` as a record.
fn decode(row: &Row) -> Result<PushConfigRecord, StoreError> {
    let done: i64 = row.try_get(11)?;
    PushConfigRecord::from_stored((
        row.try_get(0)?,
        row.try_get(1)?,
        row.try_get(2)?,
        row.try_get(3)?,
        row.try_get(4)?,
        row.try_get(5)?,
        row.try_get(6)?,
        row.try_get(7)?,
        row.try_get(8)?,
        row.try_get(9)?,
        row.try_get(10)?,
        done != 0,
        row.try_get(12)?,
    ))
}

impl PgBackend {
    /// See [`Store::put_push_config`](crate::Store::put_push_config).
    pub(crate) async fn put_push_config(&self, c: &PushConfigRecord) -> Result<(), StoreError> {
        let from_seq = to_i64(c.from_seq, "from_seq")?;
        let cursor = to_i64(c.cursor, "cursor")?;
        let done = i64::from(c.done);
        let created_at = encode_time(&c.created_at);
        self.run(async |client| {
            let columns = PushConfigRecord::COLUMNS;
            let statement = client
                .prepare_cached(&format!(
                    "INSERT INTO push_configs ({columns})
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)
                     ON CONFLICT (task_id, config_id) DO UPDATE SET
                        context_id = EXCLUDED.context_id, owner = EXCLUDED.owner,
                        protocol = EXCLUDED.protocol, url = EXCLUDED.url,
                        token = EXCLUDED.token, auth_scheme = EXCLUDED.auth_scheme,
                        credentials = EXCLUDED.credentials, from_seq = EXCLUDED.from_seq,
                        cursor = EXCLUDED.cursor, done = EXCLUDED.done,
                        created_at = EXCLUDED.created_at"
                ))
                .await?;
            client
                .execute(
                    &statement,
                    &[
                        &c.task_id,
                        &c.config_id,
                        &c.context_id,
                        &c.owner,
                        &c.protocol,
                        &c.url,
                        &c.token,
                        &c.auth_scheme,
                        &c.credentials,
                        &from_seq,
                        &cursor,
                        &done,
                        &created_at,
                    ],
                )
                .await?;
            Ok(())
        })
        .await
    }

    /// See [`Store::get_push_config`](crate::Store::get_push_config).
    pub(crate) async fn get_push_config(
        &self,
        task_id: &str,
        config_id: &str,
    ) -> Result<Option<PushConfigRecord>, StoreError> {
        self.run(async |client| {
            let columns = PushConfigRecord::COLUMNS;
            let statement = client
                .prepare_cached(&format!(
                    "SELECT {columns} FROM push_configs WHERE task_id = $1 AND config_id = $2"
                ))
                .await?;
            client
                .query_opt(&statement, &[&task_id, &config_id])
                .await?
                .as_ref()
                .map(decode)
                .transpose()
        })
        .await
    }

    /// See [`Store::list_push_configs`](crate::Store::list_push_configs).
    pub(crate) async fn list_push_configs(
        &self,
        task_id: &str,
    ) -> Result<Vec<PushConfigRecord>, StoreError> {
        self.run(async |client| {
            let columns = PushConfigRecord::COLUMNS;
            let statement = client
                .prepare_cached(&format!(
                    "SELECT {columns} FROM push_configs WHERE task_id = $1
                     ORDER BY created_at, config_id"
                ))
                .await?;
            let rows = client.query(&statement, &[&task_id]).await?;
            rows.iter().map(decode).collect()
        })
        .await
    }

    /// See [`Store::pending_push_configs`](crate::Store::pending_push_configs).
    pub(crate) async fn pending_push_configs(&self) -> Result<Vec<PushConfigRecord>, StoreError> {
        self.run(async |client| {
            let columns = PushConfigRecord::COLUMNS;
            let statement = client
                .prepare_cached(&format!(
                    "SELECT {columns} FROM push_configs WHERE done = 0
                     ORDER BY created_at, task_id, config_id"
                ))
                .await?;
            let rows = client.query(&statement, &[]).await?;
            rows.iter().map(decode).collect()
        })
        .await
    }

    /// See [`Store::delete_push_config`](crate::Store::delete_push_config).
    pub(crate) async fn delete_push_config(
        &self,
        task_id: &str,
        config_id: &str,
    ) -> Result<bool, StoreError> {
        self.run(async |client| {
            let statement = client
                .prepare_cached("DELETE FROM push_configs WHERE task_id = $1 AND config_id = $2")
                .await?;
            let n = client.execute(&statement, &[&task_id, &config_id]).await?;
            Ok(n > 0)
        })
        .await
    }

    /// See [`Store::advance_push_cursor`](crate::Store::advance_push_cursor).
    pub(crate) async fn advance_push_cursor(
        &self,
        task_id: &str,
        config_id: &str,
        cursor: u64,
        done: bool,
    ) -> Result<bool, StoreError> {
        let cursor = to_i64(cursor, "cursor")?;
        self.run(async |client| {
            let statement = client
                .prepare_cached(
                    "UPDATE push_configs SET cursor = GREATEST(cursor, $3),
                        done = CASE WHEN done <> 0 OR $4 THEN 1 ELSE 0 END
                     WHERE task_id = $1 AND config_id = $2",
                )
                .await?;
            let n = client
                .execute(&statement, &[&task_id, &config_id, &cursor, &done])
                .await?;
            Ok(n > 0)
        })
        .await
    }
}
