//! Where a file the workspace tools wrote is on disk, so `looopy run "write a haiku to
//! poem.txt"` ends with a path the user can open (`~/.looopy/workspaces/<ctx>/poem.txt`, or
//! inside `--workspace`), not only the name the model gave it.

use std::path::{Path, PathBuf};

use looopy_protocol::event::ToolComplete;

/// The workspace tools whose result names the file they wrote (`{"path": …}`).
const WRITING_TOOLS: [&str; 2] = ["write_file", "edit_file"];

/// The workspace the agent's tools work in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WorkspaceDir {
    /// `--workspace DIR`: every conversation works there.
    Fixed(PathBuf),
    /// One directory per conversation under this one (`<base>/<context id>`).
    PerContext(PathBuf),
}

impl WorkspaceDir {
    /// The absolute path of the file a successful `write_file`/`edit_file` call of
    /// context `context` wrote, or `None` for any other tool or result.
    pub fn written(&self, context: &str, tool: &ToolComplete) -> Option<PathBuf> {
        if !tool.success || !WRITING_TOOLS.contains(&tool.tool_name.as_str()) {
            return None;
        }
        let path = tool.result.as_ref()?.get("path")?.as_str()?;
        let dir = match self {
            Self::Fixed(dir) => dir.clone(),
            Self::PerContext(base) => base.join(context),
        };
        let full = dir.join(Path::new(path));
        Some(std::fs::canonicalize(&full).unwrap_or(full))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn complete(tool: &str, result: serde_json::Value) -> ToolComplete {
        serde_json::from_value(serde_json::json!({
            "toolCallId": "c1",
            "toolName": tool,
            "success": true,
            "result": result,
        }))
        .unwrap()
    }

    #[test]
    fn a_written_file_is_found_in_its_contexts_directory() {
        let dir = WorkspaceDir::PerContext(PathBuf::from("/nowhere/workspaces"));
        let done = complete(
            "write_file",
            serde_json::json!({"path": "poem.txt", "bytes": 3}),
        );
        assert_eq!(
            dir.written("ctx-1", &done),
            Some(PathBuf::from("/nowhere/workspaces/ctx-1/poem.txt"))
        );
        let other = complete("calculator", serde_json::json!({"path": "x"}));
        assert_eq!(dir.written("ctx-1", &other), None);
    }
}
