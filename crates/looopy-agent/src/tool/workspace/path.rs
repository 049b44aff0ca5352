//! Confining paths to the workspace.
//!
//! Three checks, because each alone has a hole: the path's text (no absolute path, no
//! `..`), its resolution (every existing prefix is canonicalized, so a symlink — or a
//! symlinked parent directory — leading out is refused before anything is opened), and the
//! opened file itself (opened with `O_NOFOLLOW`, then its real path read back from
//! `/proc/self/fd` where available), which closes most of the window where a file is
//! replaced by a symlink between the check and the use.

use std::fs::{File, OpenOptions};
use std::path::{Component, Path, PathBuf};

use super::{Workspace, WorkspaceError};

impl Workspace {
    /// Resolves `relative` (a path inside the workspace; empty or `.` is the workspace
    /// itself) to an absolute path inside it, or [`WorkspaceError::Escape`]. The path need
    /// not exist; its existing part is resolved through symlinks and must stay inside.
    pub fn resolve(&self, relative: &str) -> Result<PathBuf, WorkspaceError> {
        let escape = || WorkspaceError::Escape(relative.to_string());
        let mut parts = Vec::new();
        for component in Path::new(relative).components() {
            match component {
                Component::Normal(part) => parts.push(part),
                Component::CurDir => {}
                Component::ParentDir | Component::RootDir | Component::Prefix(_) => {
                    return Err(escape());
                }
            }
        }
        // Walk the existing prefix; from the first missing component on nothing can be a
        // symlink yet, so the rest is appended as is.
        let mut resolved = self.root().to_path_buf();
        let mut rest = parts.into_iter();
        for part in rest.by_ref() {
            let next = resolved.join(part);
            match std::fs::symlink_metadata(&next) {
                Ok(_) => {
                    let real = next.canonicalize().map_err(|_| escape())?;
                    if !real.starts_with(self.root()) {
                        tracing::warn!(path = relative, "workspace path escapes through a symlink");
                        return Err(escape());
                    }
                    resolved = real;
                }
                Err(_) => {
                    resolved = next;
                    break;
                }
            }
        }
        for part in rest {
            resolved.push(part);
        }
        Ok(resolved)
    }

    /// Opens the file at `relative` for reading, confined to the workspace.
    pub(crate) fn open_read(&self, relative: &str) -> Result<File, WorkspaceError> {
        let path = self.resolve(relative)?;
        let mut options = OpenOptions::new();
        options.read(true);
        no_follow(&mut options);
        let file = options
            .open(&path)
            .map_err(|error| WorkspaceError::io(relative, error))?;
        self.verify(&file, relative)?;
        Ok(file)
    }

    /// Opens (creating it and its parent directories) the file at `relative` for writing
    /// and empties it — only after the opened file is known to be inside the workspace.
    pub(crate) fn open_write(&self, relative: &str) -> Result<File, WorkspaceError> {
        let path = self.resolve(relative)?;
        if path == self.root() {
            return Err(WorkspaceError::Io {
                path: relative.to_string(),
                source: std::io::Error::other("is a directory"),
            });
        }
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(|error| WorkspaceError::io(relative, error))?;
            // The directories may have been swapped for symlinks meanwhile: resolve again.
            self.resolve(relative)?;
        }
        let mut options = OpenOptions::new();
        options.write(true).create(true).truncate(false);
        no_follow(&mut options);
        let file = options
            .open(&path)
            .map_err(|error| WorkspaceError::io(relative, error))?;
        self.verify(&file, relative)?;
        file.set_len(0)
            .map_err(|error| WorkspaceError::io(relative, error))?;
        Ok(file)
    }

    /// Checks where an opened file really is, where the platform tells (Linux `/proc`).
    fn verify(&self, file: &File, relative: &str) -> Result<(), WorkspaceError> {
        if let Some(real) = real_path(file) {
            if !real.starts_with(self.root()) {
                tracing::warn!(
                    path = relative,
                    "opened workspace file is outside the workspace"
                );
                return Err(WorkspaceError::Escape(relative.to_string()));
            }
        }
        Ok(())
    }
}

#[cfg(unix)]
fn no_follow(options: &mut OpenOptions) {
    use std::os::unix::fs::OpenOptionsExt;
    options.custom_flags(libc::O_NOFOLLOW);
}

#[cfg(not(unix))]
fn no_follow(_options: &mut OpenOptions) {}

#[cfg(target_os = "linux")]
fn real_path(file: &File) -> Option<PathBuf> {
    use std::os::fd::AsRawFd;
    std::fs::read_link(format!("/proc/self/fd/{}", file.as_raw_fd())).ok()
}

#[cfg(not(target_os = "linux"))]
fn real_path(_file: &File) -> Option<PathBuf> {
    None
}
