//! `search_files`: a regular expression over the contents of workspace files.

use std::io::Read;
use std::path::Path;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{Workspace, WorkspaceError, blocking};
use crate::tool::{Tool, ToolContext};

/// Longest line text a match carries; the model gets the gist, not a minified bundle.
const LINE_CHARS: usize = 300;
/// A file with a NUL byte in its first bytes is taken as binary and skipped.
const BINARY_SNIFF: usize = 8 * 1024;

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

/// The result of `search_files`.
#[derive(Debug, Serialize)]
pub struct SearchResult {
    /// The matches, in path order.
    pub matches: Vec<Match>,
    /// Whether the match limit was reached (there may be more).
    pub truncated: bool,
}

impl Tool for SearchFiles {
    const NAME: &'static str = "search_files";
    type Args = SearchFilesArgs;
    type Output = SearchResult;
    type Error = WorkspaceError;

    fn description(&self) -> String {
        "Searches workspace files for lines matching a regular expression. Binary files are \
         skipped; results are bounded."
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
            let start = workspace.resolve(args.path.as_deref().unwrap_or_default())?;
            let mut result = SearchResult {
                matches: Vec::new(),
                truncated: false,
            };
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
                } else if meta.is_file() {
                    search_file(&workspace, &path, &regex, &mut result);
                }
            }
            Ok(result)
        })
        .await
    }
}

fn search_file(
    workspace: &Workspace,
    path: &Path,
    regex: &regex::Regex,
    result: &mut SearchResult,
) {
    let Ok(relative) = path.strip_prefix(workspace.root()) else {
        return;
    };
    let relative = relative.to_string_lossy().into_owned();
    let limits = workspace.limits();
    let Ok(file) = workspace.open_read(&relative) else {
        return;
    };
    let mut bytes = Vec::new();
    if file
        .take(limits.search_file_bytes)
        .read_to_end(&mut bytes)
        .is_err()
    {
        return;
    }
    if bytes[..bytes.len().min(BINARY_SNIFF)].contains(&0) {
        return;
    }
    let text = String::from_utf8_lossy(&bytes);
    for (number, line) in text.lines().enumerate() {
        if !regex.is_match(line) {
            continue;
        }
        if result.matches.len() == limits.search_matches {
            result.truncated = true;
            return;
        }
        result.matches.push(Match {
            path: relative.clone(),
            line: number + 1,
            text: line.chars().take(LINE_CHARS).collect(),
        });
    }
}
