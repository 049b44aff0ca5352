//! `search_files`: a regular expression over the contents of workspace files.

use std::io::Read;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::path::check_regular;
use super::{Workspace, WorkspaceError, blocking};
use crate::tool::{Tool, ToolContext};

/// Longest line text a match carries; the model gets the gist, not a minified bundle.
const LINE_CHARS: usize = 300;
/// A file with a NUL byte in its first bytes is taken as binary and skipped.
const BINARY_SNIFF: usize = 8 * 1024;
/// Most refused files a result names (the walk goes on past them either way).
const SKIPPED_LISTED: usize = 50;

/// `search_files`: regex search over file contents, bounded in matches and bytes.
#[derive(Debug, Clone)]
pub struct SearchFiles(pub Workspace);

/// Arguments of `search_files`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct SearchFilesArgs {
    /// Regular expression (Rust `regex` syntax), matched line by line.
    pub pattern: String,
    /// File or directory inside the workspace to search (default: all of it).
    #[serde(default)]
    pub path: Option<String>,
}

/// One matching line.
#[derive(Debug, Serialize)]
pub struct Match {
    /// Workspace-relative file path.
    pub path: String,
    /// 1-based line number.
    pub line: usize,
    /// The line (cut to a few hundred characters).
    pub text: String,
}

/// A file a directory search did not search because the tools refuse it.
#[derive(Debug, Serialize)]
pub struct Skipped {
    /// Workspace-relative file path.
    pub path: String,
    /// Why: the refusal `read_file` would give.
    pub reason: String,
}

/// The result of `search_files`.
#[derive(Debug, Serialize)]
pub struct SearchResult {
    /// The matches, in path order.
    pub matches: Vec<Match>,
    /// Whether the match limit was reached (there may be more).
    pub truncated: bool,
    /// Files the walk passed over because the tools refuse them (hard-linked files, FIFOs,
    /// sockets, devices), at most 50, so the model knows why they never match. Binary files
    /// and symlinks (never followed) are skipped silently, as before. Absent when empty.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub skipped: Vec<Skipped>,
}

impl Tool for SearchFiles {
    const NAME: &'static str = "search_files";
    type Args = SearchFilesArgs;
    type Output = SearchResult;
    type Error = WorkspaceError;

    fn description(&self) -> String {
        "Searches workspace files for lines matching a regular expression. Binary files are \
         skipped, and so are hard-linked and special files (listed in `skipped`); results are \
         bounded."
            .into()
    }

    async fn call(
        &self,
        args: SearchFilesArgs,
        ctx: ToolContext,
    ) -> Result<SearchResult, Self::Error> {
        let workspace = self.0.for_call(&ctx)?;
        let cancel = ctx.cancellation().clone();
        blocking(move || {
            let regex = regex::Regex::new(&args.pattern)
                .map_err(|e| WorkspaceError::Pattern(e.to_string()))?;
            let relative = args.path.as_deref().unwrap_or_default();
            let start = workspace.resolve(relative)?;
            let mut result = SearchResult {
                matches: Vec::new(),
                truncated: false,
                skipped: Vec::new(),
            };
            // A single file named by the call is refused like `read_file` refuses it; only
            // files met while walking a directory are skipped.
            let meta =
                std::fs::symlink_metadata(&start).map_err(|e| WorkspaceError::io(relative, e))?;
            if !meta.is_dir() {
                // Matches name the file by its resolved path, as a walk names them.
                let resolved = start.strip_prefix(workspace.root()).unwrap_or(&start);
                let resolved = resolved.to_string_lossy();
                check_regular(&meta, relative)?;
                search_file(&workspace, &resolved, &regex, &mut result)?;
                return Ok(result);
            }
            let mut pending = vec![start];
            while let Some(path) = pending.pop() {
                if result.truncated || cancel.is_cancelled() {
                    break;
                }
                // `symlink_metadata`: links are never followed, so the walk stays inside.
                let Ok(meta) = std::fs::symlink_metadata(&path) else {
                    continue;
                };
                if meta.is_dir() {
                    let Ok(read) = std::fs::read_dir(&path) else {
                        continue;
                    };
                    let mut children: Vec<_> =
                        read.filter_map(|e| e.ok().map(|e| e.path())).collect();
                    children.sort();
                    // Popped from the end: reverse so files come out in path order.
                    pending.extend(children.into_iter().rev());
                } else if !meta.is_symlink() {
                    let Ok(relative) = path.strip_prefix(workspace.root()) else {
                        continue;
                    };
                    let relative = relative.to_string_lossy().into_owned();
                    let searched = check_regular(&meta, &relative)
                        .and_then(|()| search_file(&workspace, &relative, &regex, &mut result));
                    if let Err(refused) = searched {
                        skip(relative, refused, &mut result);
                    }
                }
            }
            Ok(result)
        })
        .await
    }
}

/// Notes a file the walk passed over, when the refusal is one the model should hear of
/// (a hard-linked or special file); other failures (vanished, unreadable) stay silent.
fn skip(relative: String, refused: WorkspaceError, result: &mut SearchResult) {
    let listed = matches!(
        refused,
        WorkspaceError::HardLinked { .. } | WorkspaceError::NotRegular { .. }
    );
    if listed && result.skipped.len() < SKIPPED_LISTED {
        result.skipped.push(Skipped {
            path: relative,
            reason: refused.to_string(),
        });
    }
}

/// Searches one file (opened and checked like `read_file` opens it); its matches go into
/// `result`. A binary file is no error, just no matches.
fn search_file(
    workspace: &Workspace,
    relative: &str,
    regex: &regex::Regex,
    result: &mut SearchResult,
) -> Result<(), WorkspaceError> {
    let limits = workspace.limits();
    let (file, _) = workspace.open_read(relative)?;
    let mut bytes = Vec::new();
    file.take(limits.search_file_bytes)
        .read_to_end(&mut bytes)
        .map_err(|e| WorkspaceError::io(relative, e))?;
    if bytes[..bytes.len().min(BINARY_SNIFF)].contains(&0) {
        return Ok(());
    }
    let text = String::from_utf8_lossy(&bytes);
    for (number, line) in text.lines().enumerate() {
        if !regex.is_match(line) {
            continue;
        }
        if result.matches.len() == limits.search_matches {
            result.truncated = true;
            return Ok(());
        }
        result.matches.push(Match {
            path: relative.to_string(),
            line: number + 1,
            text: line.chars().take(LINE_CHARS).collect(),
        });
    }
    Ok(())
}
