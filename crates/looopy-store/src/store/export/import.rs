//! Exact copies into an empty PostgreSQL store (`looopy db migrate`).

use super::*;

impl Store {
    /// Writes a context exactly as given (timestamps included). PostgreSQL only; fails if
    /// the context exists.
    pub async fn import_context(&self, context: &ContextRecord) -> Result<(), StoreError> {
        let pg = import_target(self)?;
        let columns = ContextRecord::COLUMNS;
        let created_at = encode_time(&context.created_at);
        let updated_at = encode_time(&context.updated_at);
        pg.run(async |client| {
            let statement = client
                .prepare_cached(&format!(
                    "INSERT INTO contexts ({columns}) VALUES ($1, $2, $3, $4, $5)"
                ))
                .await?;
            client
                .execute(
                    &statement,
                    &[
                        &context.context_id,
                        &context.owner,
                        &context.title,
                        &created_at,
                        &updated_at,
                    ],
                )
                .await?;
            Ok(())
        })
        .await
    }

    /// Writes messages of a context at the given positions, in one transaction, without
    /// touching the context (its `updated_at` stays as imported). PostgreSQL only; fails if
    /// a position is taken.
    pub async fn import_messages(
        &self,
        context_id: &str,
        messages: &[(u64, Message)],
    ) -> Result<(), StoreError> {
        if messages.is_empty() {
            return Ok(());
        }
        let pg = import_target(self)?;
        let mut positions = Vec::with_capacity(messages.len());
        let mut data = Vec::with_capacity(messages.len());
        for (position, message) in messages {
            positions.push(to_i64(*position, "message position")?);
            data.push(encode_json(message)?);
        }
        pg.run(async |client| {
            let statement = client
                .prepare_cached(
                    "INSERT INTO messages (context_id, position, data) \
                     SELECT $1, p, d FROM UNNEST($2::BIGINT[], $3::TEXT[]) AS t(p, d)",
                )
                .await?;
            client
                .execute(&statement, &[&context_id, &positions, &data])
                .await?;
            Ok(())
        })
        .await
    }

    /// Writes a sealed secret exactly as given. PostgreSQL only; fails if it exists.
    pub async fn import_sealed_secret(
        &self,
        secret: &SealedSecretRecord,
    ) -> Result<(), StoreError> {
        let pg = import_target(self)?;
        let updated_at = encode_time(&secret.updated_at);
        pg.run(async |client| {
            let statement = client
                .prepare_cached(
                    "INSERT INTO sealed_secrets (principal, provider, sealed, updated_at) \
                     VALUES ($1, $2, $3, $4)",
                )
                .await?;
            client
                .execute(
                    &statement,
                    &[
                        &secret.principal,
                        &secret.provider,
                        &secret.sealed,
                        &updated_at,
                    ],
                )
                .await?;
            Ok(())
        })
        .await
    }

    /// Writes an artifact exactly as given — `header` (its `content` is ignored) with the
    /// content of `body`, as [`artifact_content`](Self::artifact_content) hands it over —
    /// in one transaction. Content in a file is streamed into the database in pieces, so any
    /// size costs about a megabyte of memory; of a file, only its first `len` bytes are
    /// copied (what was stored when it was opened). PostgreSQL only; fails if the artifact
    /// exists.
    pub async fn import_artifact(
        &self,
        header: &ArtifactRecord,
        body: ArtifactBody,
    ) -> Result<(), StoreError> {
        let pg = import_target(self)?;
        let metadata = encode_json(&header.metadata)?;
        let created_at = encode_time(&header.created_at);
        let updated_at = encode_time(&header.updated_at);
        let (inline, file) = match body {
            ArtifactBody::Inline(text) => (text, None),
            ArtifactBody::File { file, path, len } => (String::new(), Some((file, path, len))),
        };
        pg.run(async move |client| {
            let tx = client.transaction().await?;
            let insert = tx
                .prepare_cached(
                    "INSERT INTO artifacts (artifact_id, context_id, task_id, kind, name, \
                     mime_type, content, metadata, created_at, updated_at) \
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
                )
                .await?;
            let params: [&(dyn ToSql + Sync); 10] = [
                &header.artifact_id,
                &header.context_id,
                &header.task_id,
                &header.kind,
                &header.name,
                &header.mime_type,
                &inline.as_bytes(),
                &metadata,
                &created_at,
                &updated_at,
            ];
            tx.execute(&insert, &params).await?;
            if let Some((file, path, len)) = file {
                copy_file(&tx, &header.artifact_id, file, &path, len).await?;
            }
            tx.commit().await?;
            Ok(())
        })
        .await
    }
}
