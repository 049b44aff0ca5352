//! Whole-store keyset listings, in id order, the same on both backends.

use super::*;

impl Store {
    /// At most `limit` contexts with ids after `after` (from the first when `None`), in id
    /// order.
    pub async fn contexts_after(
        &self,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<ContextRecord>, StoreError> {
        let columns = ContextRecord::COLUMNS;
        let limit = sql_limit(limit);
        let after = after.map(str::to_string);
        if let Some(pg) = self.pg() {
            return pg
                .run(async |client| {
                    let keyset = if after.is_some() {
                        "context_id > $1"
                    } else {
                        "$1::TEXT IS NULL"
                    };
                    let statement = client
                        .prepare_cached(&format!(
                            "SELECT {columns} FROM contexts WHERE {keyset} \
                             ORDER BY context_id LIMIT $2"
                        ))
                        .await?;
                    let rows = client.query(&statement, &[&after, &limit]).await?;
                    rows.iter()
                        .map(|row| {
                            ContextRecord::from_stored((
                                row.try_get(0)?,
                                row.try_get(1)?,
                                row.try_get(2)?,
                                row.try_get(3)?,
                                row.try_get(4)?,
                            ))
                        })
                        .collect()
                })
                .await;
        }
        self.pool()?
            .run(move |conn| {
                let keyset = if after.is_some() {
                    "context_id > ?1"
                } else {
                    "?1 IS NULL"
                };
                let raws = conn
                    .prepare_cached(&format!(
                        "SELECT {columns} FROM contexts WHERE {keyset} ORDER BY context_id LIMIT ?2"
                    ))?
                    .query_map(params![after, limit], |row| {
                        Ok((
                            row.get(0)?,
                            row.get(1)?,
                            row.get(2)?,
                            row.get(3)?,
                            row.get(4)?,
                        ))
                    })?
                    .collect::<Result<Vec<_>, _>>()?;
                raws.into_iter().map(ContextRecord::from_stored).collect()
            })
            .await
    }

    /// At most `limit` tasks with ids after `after` (from the first when `None`), in id
    /// order.
    pub async fn tasks_after(
        &self,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<TaskRecord>, StoreError> {
        let columns = TaskRecord::COLUMNS;
        let limit = sql_limit(limit);
        let after = after.map(str::to_string);
        if let Some(pg) = self.pg() {
            return pg
                .run(async |client| {
                    let keyset = if after.is_some() {
                        "task_id > $1"
                    } else {
                        "$1::TEXT IS NULL"
                    };
                    let statement = client
                        .prepare_cached(&format!(
                            "SELECT {columns} FROM tasks WHERE {keyset} ORDER BY task_id LIMIT $2"
                        ))
                        .await?;
                    let rows = client.query(&statement, &[&after, &limit]).await?;
                    rows.iter()
                        .map(|row| {
                            TaskRecord::from_stored((
                                row.try_get(0)?,
                                row.try_get(1)?,
                                row.try_get(2)?,
                                row.try_get(3)?,
                                row.try_get(4)?,
                                row.try_get(5)?,
                                row.try_get(6)?,
                                row.try_get(7)?,
                                row.try_get(8)?,
                            ))
                        })
                        .collect()
                })
                .await;
        }
        self.pool()?
            .run(move |conn| {
                let keyset = if after.is_some() {
                    "task_id > ?1"
                } else {
                    "?1 IS NULL"
                };
                let raws = conn
                    .prepare_cached(&format!(
                        "SELECT {columns} FROM tasks WHERE {keyset} ORDER BY task_id LIMIT ?2"
                    ))?
                    .query_map(params![after, limit], tasks::raw)?
                    .collect::<Result<Vec<_>, _>>()?;
                raws.into_iter().map(tasks::decode).collect()
            })
            .await
    }

    /// At most `limit` artifacts with ids after `after` (from the first when `None`), in id
    /// order, *without* their content (`content` is empty): read each one's with
    /// [`artifact_content`](Self::artifact_content), which streams any size.
    pub async fn artifact_headers_after(
        &self,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<ArtifactRecord>, StoreError> {
        let limit = sql_limit(limit);
        let after = after.map(str::to_string);
        if let Some(pg) = self.pg() {
            return pg
                .run(async |client| {
                    let keyset = if after.is_some() {
                        "artifact_id > $1"
                    } else {
                        "$1::TEXT IS NULL"
                    };
                    let statement = client
                        .prepare_cached(&format!(
                            "SELECT {HEADER_COLUMNS} FROM artifacts WHERE {keyset} \
                             ORDER BY artifact_id LIMIT $2"
                        ))
                        .await?;
                    let rows = client.query(&statement, &[&after, &limit]).await?;
                    rows.iter()
                        .map(|row| {
                            header(
                                row.try_get(0)?,
                                row.try_get(1)?,
                                row.try_get(2)?,
                                row.try_get(3)?,
                                row.try_get(4)?,
                                row.try_get(5)?,
                                row.try_get(6)?,
                                row.try_get(7)?,
                                row.try_get(8)?,
                            )
                        })
                        .collect()
                })
                .await;
        }
        type Raw = (
            String,
            String,
            String,
            String,
            Option<String>,
            Option<String>,
            String,
            String,
            String,
        );
        self.pool()?
            .run(move |conn| {
                let keyset = if after.is_some() {
                    "artifact_id > ?1"
                } else {
                    "?1 IS NULL"
                };
                let raws: Vec<Raw> = conn
                    .prepare_cached(&format!(
                        "SELECT {HEADER_COLUMNS} FROM artifacts WHERE {keyset} \
                         ORDER BY artifact_id LIMIT ?2"
                    ))?
                    .query_map(params![after, limit], |row| {
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
                        ))
                    })?
                    .collect::<Result<Vec<_>, _>>()?;
                raws.into_iter()
                    .map(|r| header(r.0, r.1, r.2, r.3, r.4, r.5, &r.6, &r.7, &r.8))
                    .collect()
            })
            .await
    }

    /// At most `limit` push configs after `after` (`(task id, config id)`; from the first
    /// when `None`), in `(task id, config id)` order, whatever their state.
    pub async fn push_configs_after(
        &self,
        after: Option<(&str, &str)>,
        limit: usize,
    ) -> Result<Vec<PushConfigRecord>, StoreError> {
        let columns = PushConfigRecord::COLUMNS;
        let limit = sql_limit(limit);
        let keyed = after.is_some();
        let (task_id, config_id) = after.map(|(t, c)| (t.to_string(), c.to_string())).unzip();
        if let Some(pg) = self.pg() {
            return pg
                .run(async |client| {
                    let keyset = if keyed {
                        "(task_id, config_id) > ($1, $2)"
                    } else {
                        "$1::TEXT IS NULL AND $2::TEXT IS NULL"
                    };
                    let statement = client
                        .prepare_cached(&format!(
                            "SELECT {columns} FROM push_configs WHERE {keyset} \
                             ORDER BY task_id, config_id LIMIT $3"
                        ))
                        .await?;
                    let rows = client
                        .query(&statement, &[&task_id, &config_id, &limit])
                        .await?;
                    rows.iter()
                        .map(|row| {
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
                        })
                        .collect()
                })
                .await;
        }
        self.pool()?
            .run(move |conn| {
                let keyset = if keyed {
                    "(task_id, config_id) > (?1, ?2)"
                } else {
                    "?1 IS NULL AND ?2 IS NULL"
                };
                let raws = conn
                    .prepare_cached(&format!(
                        "SELECT {columns} FROM push_configs WHERE {keyset} \
                         ORDER BY task_id, config_id LIMIT ?3"
                    ))?
                    .query_map(params![task_id, config_id, limit], |row| {
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
                    })?
                    .collect::<Result<Vec<_>, _>>()?;
                raws.into_iter()
                    .map(PushConfigRecord::from_stored)
                    .collect()
            })
            .await
    }

    /// At most `limit` sealed secrets after `after` (`(principal, provider)`; from the
    /// first when `None`), in `(principal, provider)` order, as stored (still sealed).
    pub async fn sealed_secrets_after(
        &self,
        after: Option<(&str, &str)>,
        limit: usize,
    ) -> Result<Vec<SealedSecretRecord>, StoreError> {
        let limit = sql_limit(limit);
        let keyed = after.is_some();
        let (principal, provider) = after.map(|(p, q)| (p.to_string(), q.to_string())).unzip();
        let decode = |principal: String,
                      provider: String,
                      sealed: Vec<u8>,
                      updated_at: &str|
         -> Result<SealedSecretRecord, StoreError> {
            let key = format!("{principal}/{provider}");
            Ok(SealedSecretRecord {
                updated_at: decode_time(updated_at, "sealed_secrets", &key, "updated_at")?,
                principal,
                provider,
                sealed,
            })
        };
        if let Some(pg) = self.pg() {
            return pg
                .run(async |client| {
                    let keyset = if keyed {
                        "(principal, provider) > ($1, $2)"
                    } else {
                        "$1::TEXT IS NULL AND $2::TEXT IS NULL"
                    };
                    let statement = client
                        .prepare_cached(&format!(
                            "SELECT principal, provider, sealed, updated_at FROM sealed_secrets \
                             WHERE {keyset} ORDER BY principal, provider LIMIT $3"
                        ))
                        .await?;
                    let rows = client
                        .query(&statement, &[&principal, &provider, &limit])
                        .await?;
                    rows.iter()
                        .map(|row| {
                            decode(
                                row.try_get(0)?,
                                row.try_get(1)?,
                                row.try_get(2)?,
                                row.try_get(3)?,
                            )
                        })
                        .collect()
                })
                .await;
        }
        self.pool()?
            .run(move |conn| {
                let keyset = if keyed {
                    "(principal, provider) > (?1, ?2)"
                } else {
                    "?1 IS NULL AND ?2 IS NULL"
                };
                let raws: Vec<(String, String, Vec<u8>, String)> = conn
                    .prepare_cached(&format!(
                        "SELECT principal, provider, sealed, updated_at FROM sealed_secrets \
                         WHERE {keyset} ORDER BY principal, provider LIMIT ?3"
                    ))?
                    .query_map(params![principal, provider, limit], |row| {
                        Ok((row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?))
                    })?
                    .collect::<Result<Vec<_>, _>>()?;
                raws.into_iter()
                    .map(|(principal, provider, sealed, updated_at)| {
                        decode(principal, provider, sealed, &updated_at)
                    })
                    .collect()
            })
            .await
    }

    /// At most `limit` ids, after `after` (from the first when `None`) and in id order, of
    /// the contexts that have an event log (read each with
    /// [`EventLog::read_after`](crate::EventLog::read_after)); a context listed may have no
    /// event yet.
    pub async fn event_contexts_after(
        &self,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<String>, StoreError> {
        let limit = sql_limit(limit);
        let after = after.map(str::to_string);
        if let Some(pg) = self.pg() {
            return pg
                .run(async |client| {
                    let keyset = if after.is_some() {
                        "context_id > $1"
                    } else {
                        "$1::TEXT IS NULL"
                    };
                    let statement = client
                        .prepare_cached(&format!(
                            "SELECT context_id FROM event_heads WHERE {keyset} \
                             ORDER BY context_id LIMIT $2"
                        ))
                        .await?;
                    let rows = client.query(&statement, &[&after, &limit]).await?;
                    Ok(rows
                        .iter()
                        .map(|row| row.try_get(0))
                        .collect::<Result<Vec<String>, _>>()?)
                })
                .await;
        }
        self.pool()?
            .run(move |conn| {
                let keyset = if after.is_some() {
                    "context_id > ?1"
                } else {
                    "?1 IS NULL"
                };
                Ok(conn
                    .prepare_cached(&format!(
                        "SELECT context_id FROM event_contexts WHERE {keyset} \
                         ORDER BY context_id LIMIT ?2"
                    ))?
                    .query_map(params![after, limit], |row| row.get(0))?
                    .collect::<Result<Vec<String>, _>>()?)
            })
            .await
    }
}
