//! An MCP server's tool as a Looopy tool: `{server}__{tool}`, the server's JSON Schema, and
//! a call that maps progress to `tool-progress`, the turn's cancellation to
//! `notifications/cancelled`, text content to the result, binary content (images, audio,
//! blob resources) to artifacts, and `isError` to an error result.

use std::sync::Arc;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use looopy_agent::tool::{DynTool, ToolContext, ToolFailure, ToolFuture};
use looopy_protocol::Metadata;
use serde_json::Value;
use tokio::sync::mpsc;

use crate::McpError;
use crate::server::{McpServer, Progress};

/// Most bytes of text a call returns to the model; the rest is cut with a note.
pub const MAX_RESULT_BYTES: usize = 256 * 1024;

/// One tool of one server.
pub struct McpTool {
    server: Arc<McpServer>,
    /// The tool's own name on the server.
    tool: String,
    /// `{server}__{tool}`.
    name: String,
    description: String,
    schema: Value,
    /// For a server that needs each user's authorization: calls go through the caller's
    /// session.
    auth: Option<Arc<crate::authorize::Authorizer>>,
}

impl std::fmt::Debug for McpTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpTool").field("name", &self.name).finish()
    }
}

impl McpTool {
    /// The tool described by `listed` (a `tools/list` entry), or `None` when it has no
    /// usable name.
    pub(crate) fn from_listing(server: &Arc<McpServer>, listed: &Value) -> Option<Self> {
        let tool = listed.get("name")?.as_str()?.to_owned();
        let valid = !tool.is_empty()
            && tool.len() <= 64
            && tool
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
        if !valid {
            tracing::warn!(server = %server.name(), tool = %tool, "MCP tool skipped: its name is not [A-Za-z0-9_-]{{1,64}}");
            return None;
        }
        let schema = match listed.get("inputSchema") {
            Some(Value::Object(schema)) => Value::Object(schema.clone()),
            _ => serde_json::json!({"type": "object"}),
        };
        Some(Self {
            server: Arc::clone(server),
            name: format!("{}__{tool}", server.name()),
            description: listed
                .get("description")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned(),
            tool,
            schema,
            auth: server.authorizer(),
        })
    }

    /// A call to `tool` of an authorizing server that is not (yet) in the agent's set.
    pub(crate) fn routed(
        server: &Arc<McpServer>,
        tool: &str,
        auth: Arc<crate::authorize::Authorizer>,
    ) -> Self {
        Self {
            server: Arc::clone(server),
            tool: tool.to_owned(),
            name: format!("{}__{tool}", server.name()),
            description: String::new(),
            schema: serde_json::json!({"type": "object"}),
            auth: Some(auth),
        }
    }

    async fn run(&self, args: Value, ctx: ToolContext) -> Result<Value, ToolFailure> {
        let server = match &self.auth {
            Some(auth) => auth.session(&ctx).await?,
            None => Arc::clone(&self.server),
        };
        let (tx, mut rx) = mpsc::channel::<Progress>(32);
        let call = server.call(&self.tool, args, tx, ctx.cancellation());
        tokio::pin!(call);
        let report = |p: Progress| {
            let fraction = match p.total {
                Some(total) if total > 0.0 => p.progress / total,
                _ => 0.0,
            };
            ctx.progress(fraction, p.message.unwrap_or_default())
        };
        let result = loop {
            tokio::select! {
                result = &mut call => break result,
                Some(p) = rx.recv() => report(p).await,
            }
        };
        // What the server reported before answering is in the channel already.
        while let Ok(p) = rx.try_recv() {
            report(p).await;
        }
        if let (Some(auth), Err(McpError::Unauthorized { .. })) = (&self.auth, &result) {
            return Err(auth.reauthorize(&ctx).await);
        }
        if self.auth.is_none() && !matches!(result, Err(McpError::Canceled)) {
            // A change to the tools the server announced before answering is in place
            // before the model sees this result.
            self.server.settle_tools().await;
        }
        let result = match result {
            Ok(result) => result,
            Err(McpError::Canceled) => return Err(ToolFailure::failed("canceled")),
            Err(error) => return Err(ToolFailure::failed(error.to_string())),
        };
        let text = content_to_result(&self.tool, &result, &ctx).await;
        if result.get("isError").and_then(Value::as_bool) == Some(true) {
            return Err(ToolFailure::Failed(if text.is_empty() {
                "the tool reported an error".into()
            } else {
                text
            }));
        }
        Ok(Value::String(text))
    }
}

impl DynTool for McpTool {
    fn name(&self) -> &str {
        &self.name
    }

    fn description(&self) -> String {
        self.description.clone()
    }

    fn parameters(&self) -> Value {
        self.schema.clone()
    }

    fn call_json<'a>(&'a self, args: Value, ctx: ToolContext) -> ToolFuture<'a> {
        Box::pin(self.run(args, ctx))
    }

    fn metadata(&self) -> Metadata {
        let mut metadata = Metadata::new();
        metadata.insert("provider".into(), Value::from("mcp"));
        metadata.insert("server".into(), Value::from(self.server.name()));
        metadata
    }
}

/// The model's view of a result: its text parts joined by newlines (cut at
/// [`MAX_RESULT_BYTES`]), binary parts saved as artifacts and named in the text, the
/// structured content when there is no text.
async fn content_to_result(tool: &str, result: &Value, ctx: &ToolContext) -> String {
    let mut parts: Vec<String> = Vec::new();
    let blocks = result
        .get("content")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    for (i, block) in blocks.iter().enumerate() {
        let kind = block
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let text_of = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).map(str::to_owned);
        match kind {
            "text" => parts.extend(text_of(block, "text")),
            "image" | "audio" => {
                let mime =
                    text_of(block, "mimeType").unwrap_or_else(|| "application/octet-stream".into());
                let name = format!("{tool}-{}.{}", i + 1, extension(&mime));
                let data = text_of(block, "data").unwrap_or_default();
                parts.push(save(ctx, &name, &mime, &data, kind).await);
            }
            "resource" => {
                let Some(resource) = block.get("resource") else {
                    continue;
                };
                let uri = text_of(resource, "uri").unwrap_or_default();
                if let Some(text) = text_of(resource, "text") {
                    parts.push(format!("[resource {uri}]\n{text}"));
                } else if let Some(blob) = text_of(resource, "blob") {
                    let mime = text_of(resource, "mimeType")
                        .unwrap_or_else(|| "application/octet-stream".into());
                    let last = uri.rsplit('/').next().filter(|s| !s.is_empty());
                    let name = last
                        .map(str::to_owned)
                        .unwrap_or_else(|| format!("{tool}-{}", i + 1));
                    parts.push(save(ctx, &name, &mime, &blob, "resource").await);
                }
            }
            "resource_link" => {
                let uri = text_of(block, "uri").unwrap_or_default();
                parts.push(format!("[resource link {uri}]"));
            }
            other => parts.push(format!("[{other} content]")),
        }
    }
    if parts.is_empty()
        && let Some(structured) = result.get("structuredContent")
    {
        parts.push(structured.to_string());
    }
    let mut text = parts.join("\n");
    if text.len() > MAX_RESULT_BYTES {
        let mut cut = MAX_RESULT_BYTES;
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        let total = text.len();
        text.truncate(cut);
        text.push_str(&format!(
            "\n[cut: the result was {total} bytes; the first {cut} are shown]"
        ));
    }
    text
}

/// Saves base64 `data` as artifact `name`; the line that names it in the result.
async fn save(ctx: &ToolContext, name: &str, mime: &str, data: &str, kind: &str) -> String {
    let bytes = match BASE64.decode(data.as_bytes()) {
        Ok(bytes) => bytes,
        Err(error) => return format!("[{kind} {name}: not valid base64 ({error})]"),
    };
    let mut file = ctx.file(name, mime);
    if let Err(error) = file.write(&bytes).await {
        return format!("[{kind} {name}: not saved ({error})]");
    }
    match file.finish().await {
        Ok(info) => format!(
            "[{kind} saved as artifact {} ({name}, {mime}, {} bytes)]",
            info.artifact_id, info.size
        ),
        Err(error) => format!("[{kind} {name}: not saved ({error})]"),
    }
}

fn extension(mime: &str) -> &'static str {
    match mime.split(';').next().unwrap_or_default().trim() {
        "image/png" => "png",
        "image/jpeg" => "jpg",
        "image/gif" => "gif",
        "image/webp" => "webp",
        "image/svg+xml" => "svg",
        "audio/wav" | "audio/x-wav" => "wav",
        "audio/mpeg" => "mp3",
        "audio/ogg" => "ogg",
        _ => "bin",
    }
}
