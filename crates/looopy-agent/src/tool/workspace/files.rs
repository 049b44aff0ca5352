//! `list_files`, `read_file`, `write_file` and `edit_file`.

use std::io::{Read, Seek, SeekFrom, Write};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::path::kind_name;
use super::{Workspace, WorkspaceError, blocking};
use crate::tool::{Tool, ToolContext};

/// `list_files`: the entries of a workspace directory.
#[derive(Debug, Clone)]
pub struct ListFiles(pub Workspace);

/// Arguments of `list_files`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct ListFilesArgs {
    /// Directory inside the workspace (default: the workspace itself).
    #[serde(default)]
    pub path: Option<String>,
}

/// One directory entry.
#[derive(Debug, Serialize)]
pub struct Entry {
    name: String,
    /// `file`, `dir`, `symlink` (not followed), `fifo`, `socket`, `block_device`,
    /// `char_device` or `other`: the model learns a FIFO is not a file it can read.
    kind: &'static str,
    size: u64,
}

/// The result of `list_files`.
#[derive(Debug, Serialize)]
pub struct Listing {
    entries: Vec<Entry>,
    truncated: bool,
}

impl Tool for ListFiles {
    const NAME: &'static str = "list_files";
    type Args = ListFilesArgs;
    type Output = Listing;
    type Error = WorkspaceError;

    fn description(&self) -> String {
        "Lists the files and directories in a workspace directory (paths are relative to the \
         workspace)."
            .into()
    }

    async fn call(&self, args: ListFilesArgs, ctx: ToolContext) -> Result<Listing, Self::Error> {
        let workspace = self.0.for_call(&ctx)?;
        blocking(move || {
            let relative = args.path.unwrap_or_default();
            let dir = workspace.resolve(&relative)?;
            let read = std::fs::read_dir(&dir).map_err(|e| WorkspaceError::io(&relative, e))?;
            let max = workspace.limits().list_entries;
            let mut entries = Vec::new();
            let mut truncated = false;
            for entry in read {
                let entry = entry.map_err(|e| WorkspaceError::io(&relative, e))?;
                if entries.len() == max {
                    truncated = true;
                    break;
                }
                // `DirEntry::metadata` does not follow symlinks: the entry's own type.
                let meta = entry
                    .metadata()
                    .map_err(|e| WorkspaceError::io(&relative, e))?;
                entries.push(Entry {
                    name: entry.file_name().to_string_lossy().into_owned(),
                    kind: kind_name(&meta.file_type()),
                    size: meta.len(),
                });
            }
            entries.sort_by(|a, b| a.name.cmp(&b.name));
            Ok(Listing { entries, truncated })
        })
        .await
    }
}

/// `read_file`: a bounded slice of a workspace file.
#[derive(Debug, Clone)]
pub struct ReadFile(pub Workspace);

/// Arguments of `read_file`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct ReadFileArgs {
    /// File inside the workspace.
    pub path: String,
    /// Byte offset to start at (default 0).
    #[serde(default)]
    pub offset: Option<u64>,
    /// Most bytes to return (default and maximum: the workspace's read limit, 256 KiB).
    #[serde(default)]
    pub limit: Option<u64>,
}

/// The result of `read_file`.
#[derive(Debug, Serialize)]
pub struct FileSlice {
    /// The bytes read, as UTF-8 (invalid sequences replaced).
    pub content: String,
    /// Where the slice starts.
    pub offset: u64,
    /// The file's size in bytes.
    pub size: u64,
    /// Where to continue reading, when the file goes on.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_offset: Option<u64>,
}

impl Tool for ReadFile {
    const NAME: &'static str = "read_file";
    type Args = ReadFileArgs;
    type Output = FileSlice;
    type Error = WorkspaceError;

    fn description(&self) -> String {
        "Reads a workspace file. Large files come in slices: continue with `offset` = the \
         returned `next_offset`."
            .into()
    }

    async fn call(&self, args: ReadFileArgs, ctx: ToolContext) -> Result<FileSlice, Self::Error> {
        let workspace = self.0.for_call(&ctx)?;
        blocking(move || {
            let max = workspace.limits().read_bytes;
            let limit = args.limit.unwrap_or(max).min(max);
            let offset = args.offset.unwrap_or(0);
            let (mut file, meta) = workspace.open_read(&args.path)?;
            let io = |e| WorkspaceError::io(&args.path, e);
            let size = meta.len();
            file.seek(SeekFrom::Start(offset)).map_err(io)?;
            let mut bytes = Vec::new();
            file.take(limit).read_to_end(&mut bytes).map_err(io)?;
            let end = offset.saturating_add(bytes.len() as u64);
            Ok(FileSlice {
                content: String::from_utf8_lossy(&bytes).into_owned(),
                offset,
                size,
                next_offset: (end < size).then_some(end),
            })
        })
        .await
    }
}

/// `write_file`: creates or replaces a workspace file.
#[derive(Debug, Clone)]
pub struct WriteFile(pub Workspace);

/// Arguments of `write_file`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct WriteFileArgs {
    /// File inside the workspace; missing parent directories are created.
    pub path: String,
    /// The file's new content.
    pub content: String,
}

/// The result of `write_file` and `edit_file`.
#[derive(Debug, Serialize)]
pub struct Written {
    /// The workspace-relative path written.
    pub path: String,
    /// The file's size now.
    pub bytes: usize,
    /// The `file-write` artifact that carries the file to clients (stable per path).
    pub artifact_id: String,
}

/// Sends the file just written as a `file-write` artifact named by its workspace path, so a
/// client sees files appear as the agent writes them. Writing the path again replaces it.
async fn publish(ctx: &ToolContext, path: &str, content: &[u8]) -> Result<String, WorkspaceError> {
    let mut file = ctx.file(path, mime_type(path));
    file.write(content).await?;
    Ok(file.finish().await?.artifact_id)
}

/// The MIME type of a text file, by extension (the tools only write UTF-8 text).
fn mime_type(path: &str) -> &'static str {
    let extension = std::path::Path::new(path)
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase);
    match extension.as_deref() {
        Some("md" | "markdown") => "text/markdown",
        Some("html" | "htm") => "text/html",
        Some("css") => "text/css",
        Some("csv") => "text/csv",
        Some("js" | "mjs") => "text/javascript",
        Some("json") => "application/json",
        Some("xml") => "application/xml",
        Some("svg") => "image/svg+xml",
        _ => "text/plain",
    }
}

impl Tool for WriteFile {
    const NAME: &'static str = "write_file";
    type Args = WriteFileArgs;
    type Output = Written;
    type Error = WorkspaceError;

    fn description(&self) -> String {
        "Writes a workspace file, replacing it if it exists.".into()
    }

    async fn call(&self, args: WriteFileArgs, ctx: ToolContext) -> Result<Written, Self::Error> {
        let workspace = self.0.for_call(&ctx)?;
        let path = args.path.clone();
        let content = args.content.clone();
        let bytes =
            blocking(move || write(&workspace, &args.path, args.content.as_bytes())).await?;
        let artifact_id = publish(&ctx, &path, content.as_bytes()).await?;
        Ok(Written {
            path,
            bytes,
            artifact_id,
        })
    }
}

/// Writes `content` to `path`; returns the bytes written.
fn write(workspace: &Workspace, path: &str, content: &[u8]) -> Result<usize, WorkspaceError> {
    let max = workspace.limits().write_bytes;
    if content.len() > max {
        return Err(WorkspaceError::TooLarge(format!(
            "content is {} bytes; at most {max} can be written",
            content.len()
        )));
    }
    let mut file = workspace.open_write(path)?;
    file.write_all(content)
        .and_then(|()| file.flush())
        .map_err(|e| WorkspaceError::io(path, e))?;
    Ok(content.len())
}

/// `edit_file`: replaces one exact, unique piece of text in a workspace file.
#[derive(Debug, Clone)]
pub struct EditFile(pub Workspace);

/// Arguments of `edit_file`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct EditFileArgs {
    /// File inside the workspace.
    pub path: String,
    /// The exact text to replace; it must occur exactly once in the file.
    pub old: String,
    /// The replacement.
    pub new: String,
}

impl Tool for EditFile {
    const NAME: &'static str = "edit_file";
    type Args = EditFileArgs;
    type Output = Written;
    type Error = WorkspaceError;

    fn description(&self) -> String {
        "Replaces the exact text `old` with `new` in a workspace file. `old` must occur exactly \
         once; include surrounding lines to make it unique."
            .into()
    }

    async fn call(&self, args: EditFileArgs, ctx: ToolContext) -> Result<Written, Self::Error> {
        let workspace = self.0.for_call(&ctx)?;
        let path = args.path.clone();
        let text = blocking(move || {
            let max = workspace.limits().write_bytes as u64;
            let (mut file, meta) = workspace.open_read(&args.path)?;
            let io = |e| WorkspaceError::io(&args.path, e);
            if meta.len() > max {
                return Err(WorkspaceError::TooLarge(format!(
                    "{:?} is larger than {max} bytes",
                    args.path
                )));
            }
            let mut text = String::new();
            file.read_to_string(&mut text).map_err(io)?;
            drop(file);
            if args.old.is_empty() {
                return Err(WorkspaceError::Edit("`old` must not be empty".into()));
            }
            match text.matches(args.old.as_str()).count() {
                0 => Err(WorkspaceError::Edit(format!(
                    "`old` was not found in {:?}; nothing changed",
                    args.path
                ))),
                1 => {
                    let text = text.replacen(&args.old, &args.new, 1);
                    write(&workspace, &args.path, text.as_bytes())?;
                    Ok(text)
                }
                n => Err(WorkspaceError::Edit(format!(
                    "`old` occurs {n} times in {:?}; include more context so it is unique; \
                     nothing changed",
                    args.path
                ))),
            }
        })
        .await?;
        let artifact_id = publish(&ctx, &path, text.as_bytes()).await?;
        Ok(Written {
            path,
            bytes: text.len(),
            artifact_id,
        })
    }
}
