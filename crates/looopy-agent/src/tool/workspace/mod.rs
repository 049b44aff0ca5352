//! Workspace tools: files and (optionally) a shell, confined to one directory.
//!
//! A [`Workspace`] is a directory the agent may work in. Every path a tool receives is
//! resolved inside it (see [`Workspace::resolve`]): absolute paths, `..` components and
//! symlinks that lead out are error results, never a read or write outside. Hard-linked
//! files (whose other names may be outside) and special files (FIFOs, sockets, devices) are
//! refused on the opened descriptor (see the `path` module). Reads and
//! searches are bounded in bytes so one huge file cannot flood the model's context.
//!
//! ```no_run
//! use looopy_agent::tool::{ToolRegistry, Workspace};
//!
//! let workspace = Workspace::open("/tmp/agent-work").unwrap();
//! let tools = ToolRegistry::builtin().with_workspace(workspace); // no `shell`
//! ```

mod files;
mod path;
mod search;
mod shell;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

pub use files::{EditFile, ListFiles, ReadFile, WriteFile};
pub use files::{EditFileArgs, ListFilesArgs, ReadFileArgs, WriteFileArgs};
pub use search::{SearchFiles, SearchFilesArgs};
pub use shell::{Shell, ShellArgs};

use super::{ToolContext, ToolRegistry};

/// Why a workspace tool call failed; shown to the model as the call's error result.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WorkspaceError {
    /// The path is absolute, has `..`, or resolves (through a symlink) outside the workspace.
    #[error("path {0:?} is outside the workspace")]
    Escape(String),
    /// The path does not exist in the workspace.
    #[error("{0:?} does not exist")]
    NotFound(String),
    /// The path is not a regular file (a directory, FIFO, socket, device): the file tools
    /// read and write regular files only, since opening a FIFO can block for good and
    /// opening a device can have effects.
    #[error(
        "{path:?} is a {kind}, not a regular file; the workspace tools only read and write \
         regular files"
    )]
    NotRegular {
        /// The workspace-relative path.
        path: String,
        /// What it is: `dir`, `fifo`, `socket`, `block_device`, `char_device`, `symlink`, …
        kind: &'static str,
    },
    /// The file has more than one hard link. A hard link is the file itself, so another of
    /// its names may be outside the workspace: reading or writing it could reach that file.
    #[error(
        "{path:?} has {links} hard links, and another of them may be outside the workspace; \
         the workspace tools refuse hard-linked files"
    )]
    HardLinked {
        /// The workspace-relative path.
        path: String,
        /// Its link count.
        links: u64,
    },
    /// `edit_file`'s `old` text is not in the file, or is there more than once.
    #[error("{0}")]
    Edit(String),
    /// The search pattern is not a valid regular expression.
    #[error("invalid pattern: {0}")]
    Pattern(String),
    /// `shell` is not enabled for this workspace.
    #[error("the shell tool is disabled")]
    ShellDisabled,
    /// The file is larger than a tool accepts, or the content too large to write.
    #[error("{0}")]
    TooLarge(String),
    /// The written file could not be sent as an artifact (e.g. a size cap was crossed);
    /// the file itself is written.
    #[error("written, but not sent as an artifact: {0}")]
    Artifact(#[from] crate::tool::ArtifactError),
    /// Any other I/O failure.
    #[error("{path:?}: {source}")]
    Io {
        /// The workspace-relative path.
        path: String,
        /// The underlying error.
        source: std::io::Error,
    },
}

impl WorkspaceError {
    pub(crate) fn io(path: &str, source: std::io::Error) -> Self {
        if source.kind() == std::io::ErrorKind::NotFound {
            Self::NotFound(path.to_string())
        } else {
            Self::Io {
                path: path.to_string(),
                source,
            }
        }
    }
}

/// The bounds the workspace tools keep to. The defaults suit a model's context window.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct WorkspaceLimits {
    /// Most bytes one `read_file` call returns (the model pages with `offset`/`limit`).
    pub read_bytes: u64,
    /// Most matches one `search_files` call returns.
    pub search_matches: usize,
    /// Most bytes scanned per file by `search_files` (the rest of a file is not searched).
    pub search_file_bytes: u64,
    /// Most entries `list_files` returns.
    pub list_entries: usize,
    /// Most bytes `write_file`/`edit_file` write.
    pub write_bytes: usize,
    /// `shell`'s timeout when the call gives none.
    pub shell_timeout: Duration,
    /// The longest timeout a `shell` call may ask for.
    pub shell_max_timeout: Duration,
    /// Most bytes of stdout (and, separately, stderr) `shell` returns.
    pub shell_output_bytes: usize,
}

impl Default for WorkspaceLimits {
    fn default() -> Self {
        Self {
            read_bytes: 256 * 1024,
            search_matches: 200,
            search_file_bytes: 1024 * 1024,
            list_entries: 1000,
            write_bytes: 16 * 1024 * 1024,
            shell_timeout: Duration::from_secs(30),
            shell_max_timeout: Duration::from_secs(600),
            shell_output_bytes: 64 * 1024,
        }
    }
}

/// A directory the workspace tools work in. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Workspace {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    /// Canonical: every resolved path is compared against it.
    root: PathBuf,
    limits: WorkspaceLimits,
    allow_shell: bool,
    /// `root` holds one workspace per conversation (`root/<context id>`).
    per_context: bool,
}

impl Workspace {
    /// The workspace at `dir`, created if missing. `shell` is off.
    pub fn open(dir: impl AsRef<Path>) -> std::io::Result<Self> {
        let dir = dir.as_ref();
        std::fs::create_dir_all(dir)?;
        let root = dir.canonicalize()?;
        Ok(Self {
            inner: Arc::new(Inner {
                root,
                limits: WorkspaceLimits::default(),
                allow_shell: false,
                per_context: false,
            }),
        })
    }

    /// One workspace per conversation under `base`: a call in context `c` works in
    /// `base/c` (created on first use), so conversations on a server do not see each
    /// other's files. A call without a context id is refused.
    pub fn per_context(base: impl AsRef<Path>) -> std::io::Result<Self> {
        let workspace = Self::open(base)?;
        Ok(workspace.rebuild(|inner| inner.per_context = true))
    }

    /// The workspace a call works in: this one, or its context's directory when
    /// [per context](Self::per_context).
    pub(crate) fn for_call(&self, ctx: &ToolContext) -> Result<Workspace, WorkspaceError> {
        if !self.inner.per_context {
            return Ok(self.clone());
        }
        let context = ctx.context_id().unwrap_or_default();
        // Context ids are validated where they enter (`[A-Za-z0-9._:-]`); a separator or a
        // dot-only name must still never pick a directory outside `root`.
        if context.is_empty() || context.contains(['/', '\\']) || context.chars().all(|c| c == '.')
        {
            return Err(WorkspaceError::Escape(context.to_string()));
        }
        let dir = self.root().join(context);
        let opened = Self::open(&dir).map_err(|e| WorkspaceError::io(context, e))?;
        if !opened.root().starts_with(self.root()) {
            return Err(WorkspaceError::Escape(context.to_string()));
        }
        Ok(opened.rebuild(|inner| {
            inner.limits = self.inner.limits.clone();
            inner.allow_shell = self.inner.allow_shell;
        }))
    }

    /// Uses `limits` instead of the defaults.
    pub fn with_limits(self, limits: WorkspaceLimits) -> Self {
        self.rebuild(|inner| inner.limits = limits)
    }

    /// Enables (or disables) the `shell` tool. It runs arbitrary commands with the
    /// workspace as working directory — *not* a sandbox — so it is off by default.
    pub fn allow_shell(self, allow: bool) -> Self {
        self.rebuild(|inner| inner.allow_shell = allow)
    }

    fn rebuild(self, change: impl FnOnce(&mut Inner)) -> Self {
        let mut inner = Inner {
            root: self.inner.root.clone(),
            limits: self.inner.limits.clone(),
            allow_shell: self.inner.allow_shell,
            per_context: self.inner.per_context,
        };
        change(&mut inner);
        Self {
            inner: Arc::new(inner),
        }
    }

    /// The workspace directory (canonical).
    pub fn root(&self) -> &Path {
        &self.inner.root
    }

    /// The limits in force.
    pub fn limits(&self) -> &WorkspaceLimits {
        &self.inner.limits
    }

    /// Whether `shell` is enabled.
    pub fn shell_allowed(&self) -> bool {
        self.inner.allow_shell
    }

    /// The workspace tools: `list_files`, `read_file`, `write_file`, `edit_file`,
    /// `search_files`, and `shell` when [enabled](Self::allow_shell).
    pub fn tools(&self) -> ToolRegistry {
        let registry = ToolRegistry::new()
            .with(ListFiles(self.clone()))
            .with(ReadFile(self.clone()))
            .with(WriteFile(self.clone()))
            .with(EditFile(self.clone()))
            .with(SearchFiles(self.clone()));
        if self.shell_allowed() {
            registry.with(Shell(self.clone()))
        } else {
            registry
        }
    }
}

impl ToolRegistry {
    /// Adds the tools of `workspace` (see [`Workspace::tools`]).
    pub fn with_workspace(mut self, workspace: Workspace) -> Self {
        self.merge(workspace.tools());
        self
    }
}

/// Runs blocking file-system work off the async runtime.
async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, WorkspaceError> + Send + 'static,
) -> Result<T, WorkspaceError> {
    match tokio::task::spawn_blocking(work).await {
        Ok(result) => result,
        Err(join) => Err(WorkspaceError::Io {
            path: String::new(),
            source: std::io::Error::other(join.to_string()),
        }),
    }
}
