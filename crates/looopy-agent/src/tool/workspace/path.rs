//! Confining paths to the workspace.
//!
//! Three checks, because each alone has a hole: the path's text (no absolute path, no
//! `..`), its resolution (every existing prefix is canonicalized, so a symlink — or a
//! symlinked parent directory — leading out is refused before anything is opened), and the
//! opened file itself (opened with `O_NOFOLLOW`, then its real path read back from
//! `/proc/self/fd` where available), which closes most of the window where a file is
//! replaced by a symlink between the check and the use.
//!
//! Two more holes are closed on the opened descriptor (`fstat`, so nothing can be swapped
//! in between the check and the use):
//!
//! - **Hard links.** A hard link is the file itself, not a pointer to it: a link inside the
//!   workspace to a file outside passes every path check. A regular file with more than one
//!   link is refused ([`WorkspaceError::HardLinked`]), since its other names may be outside.
//! - **Special files.** Opening a FIFO with no writer blocks (a blocking-pool thread lost
//!   for good; cancelling the call does not free it), and opening a device can have effects.
//!   Files are opened with `O_NONBLOCK`, and anything that is not a regular file is refused
//!   ([`WorkspaceError::NotRegular`]). Special files are also refused by `lstat` *before*
//!   opening, so a device is normally not even opened; the `fstat` check covers a swap in
//!   between. `O_NONBLOCK` stays set on the regular files that pass: it has no effect on
//!   them (and clearing it would take `fcntl`, i.e. `unsafe`, which the workspace forbids).
//!
//! A file on another device than the workspace root is *not* refused: a hard link cannot
//! cross devices, a mount inside the workspace was put there by its owner, and overlayfs or
//! btrfs subvolumes report other device numbers for files that are really inside.

use std::fs::{File, FileType, Metadata, OpenOptions};
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

    /// Opens the regular file at `relative` for reading, confined to the workspace; with
    /// its metadata (from the opened descriptor).
    pub(crate) fn open_read(&self, relative: &str) -> Result<(File, Metadata), WorkspaceError> {
        let path = self.resolve(relative)?;
        refuse_special(&path, relative)?;
        let mut options = OpenOptions::new();
        options.read(true);
        confine(&mut options);
        let file = options
            .open(&path)
            .map_err(|error| WorkspaceError::io(relative, error))?;
        let meta = self.verify(&file, relative)?;
        Ok((file, meta))
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
        refuse_special(&path, relative)?;
        let mut options = OpenOptions::new();
        options.write(true).create(true).truncate(false);
        confine(&mut options);
        let file = options
            .open(&path)
            .map_err(|error| WorkspaceError::io(relative, error))?;
        self.verify(&file, relative)?;
        file.set_len(0)
            .map_err(|error| WorkspaceError::io(relative, error))?;
        Ok(file)
    }

    /// Checks an opened file: where it really is, where the platform tells (Linux
    /// `/proc`), and — from its descriptor — that it is a regular file with one link.
    fn verify(&self, file: &File, relative: &str) -> Result<Metadata, WorkspaceError> {
        if let Some(real) = real_path(file) {
            if !real.starts_with(self.root()) {
                tracing::warn!(
                    path = relative,
                    "opened workspace file is outside the workspace"
                );
                return Err(WorkspaceError::Escape(relative.to_string()));
            }
        }
        let meta = file
            .metadata()
            .map_err(|error| WorkspaceError::io(relative, error))?;
        check_regular(&meta, relative)?;
        Ok(meta)
    }
}

/// Refuses `meta` unless it is a regular file with a single link (on Unix, where a link
/// count is known).
pub(crate) fn check_regular(meta: &Metadata, relative: &str) -> Result<(), WorkspaceError> {
    if !meta.is_file() {
        // Usually a model's mistake (reading a directory), not an attack: no warning.
        tracing::debug!(
            path = relative,
            kind = kind_name(&meta.file_type()),
            "workspace path is not a regular file"
        );
        return Err(WorkspaceError::NotRegular {
            path: relative.to_string(),
            kind: kind_name(&meta.file_type()),
        });
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        if meta.nlink() > 1 {
            tracing::warn!(
                path = relative,
                links = meta.nlink(),
                "workspace file is hard-linked"
            );
            return Err(WorkspaceError::HardLinked {
                path: relative.to_string(),
                links: meta.nlink(),
            });
        }
    }
    Ok(())
}

/// Refuses an existing `path` that is not a regular file *before* it is opened, so a FIFO
/// or a device is not even opened (opening some devices has effects). Advisory: the
/// descriptor is checked again after opening ([`Workspace::verify`]).
fn refuse_special(path: &Path, relative: &str) -> Result<(), WorkspaceError> {
    match std::fs::symlink_metadata(path) {
        Ok(meta) if !meta.is_file() => Err(WorkspaceError::NotRegular {
            path: relative.to_string(),
            kind: kind_name(&meta.file_type()),
        }),
        _ => Ok(()),
    }
}

/// What a file is, in the words `list_files` and the errors use.
pub(crate) fn kind_name(file_type: &FileType) -> &'static str {
    if file_type.is_symlink() {
        return "symlink";
    }
    if file_type.is_dir() {
        return "dir";
    }
    if file_type.is_file() {
        return "file";
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if file_type.is_fifo() {
            return "fifo";
        }
        if file_type.is_socket() {
            return "socket";
        }
        if file_type.is_block_device() {
            return "block_device";
        }
        if file_type.is_char_device() {
            return "char_device";
        }
    }
    "other"
}

/// `O_NOFOLLOW`: the last component is not followed (a symlink swapped in fails the open).
/// `O_NONBLOCK`: opening a FIFO without a writer returns at once instead of blocking.
/// `O_NOCTTY`: a terminal opened by mistake never becomes the controlling terminal.
#[cfg(unix)]
fn confine(options: &mut OpenOptions) {
    use std::os::unix::fs::OpenOptionsExt;
    options.custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY);
}

#[cfg(not(unix))]
fn confine(_options: &mut OpenOptions) {}

#[cfg(target_os = "linux")]
fn real_path(file: &File) -> Option<PathBuf> {
    use std::os::fd::AsRawFd;
    std::fs::read_link(format!("/proc/self/fd/{}", file.as_raw_fd())).ok()
}

#[cfg(not(target_os = "linux"))]
fn real_path(_file: &File) -> Option<PathBuf> {
    None
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    /// A FIFO made by mkfifo(1) (the workspace forbids the `unsafe` mkfifo(3) call).
    fn mkfifo(path: &Path) {
        let status = std::process::Command::new("mkfifo")
            .arg(path)
            .status()
            .unwrap();
        assert!(status.success(), "mkfifo {}", path.display());
    }

    #[test]
    fn kinds_are_named_by_what_they_are() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::write(root.join("f"), "x").unwrap();
        std::fs::create_dir(root.join("d")).unwrap();
        std::os::unix::fs::symlink("f", root.join("l")).unwrap();
        mkfifo(&root.join("p"));
        let _socket = std::os::unix::net::UnixListener::bind(root.join("s")).unwrap();
        let kind = |name: &str| {
            kind_name(
                &std::fs::symlink_metadata(root.join(name))
                    .unwrap()
                    .file_type(),
            )
        };
        assert_eq!(
            ["f", "d", "l", "p", "s"].map(kind),
            ["file", "dir", "symlink", "fifo", "socket"]
        );
        assert_eq!(
            kind_name(&std::fs::symlink_metadata("/dev/null").unwrap().file_type()),
            "char_device"
        );
    }

    #[test]
    fn hard_linked_files_are_refused_for_reading_and_writing() {
        let dir = tempfile::tempdir().unwrap();
        let outside = dir.path().join("outside.txt");
        std::fs::write(&outside, "outside\n").unwrap();
        let ws = Workspace::open(dir.path().join("work")).unwrap();
        std::fs::hard_link(&outside, ws.root().join("inside.txt")).unwrap();
        for refused in [
            ws.open_read("inside.txt").map(|_| ()),
            ws.open_write("inside.txt").map(|_| ()),
        ] {
            match refused {
                Err(WorkspaceError::HardLinked { path, links: 2 }) => {
                    assert_eq!(path, "inside.txt")
                }
                other => panic!("expected a hard-link refusal, got {other:?}"),
            }
        }
        // open_write refused before emptying the file.
        assert_eq!(std::fs::read_to_string(&outside).unwrap(), "outside\n");
        // Once the other name is gone, the file is the workspace's own again.
        std::fs::remove_file(&outside).unwrap();
        let (_, meta) = ws.open_read("inside.txt").unwrap();
        assert_eq!(meta.len(), 8);
    }

    #[test]
    fn special_files_are_refused_before_opening() {
        let dir = tempfile::tempdir().unwrap();
        let ws = Workspace::open(dir.path()).unwrap();
        mkfifo(&ws.root().join("pipe"));
        std::fs::create_dir(ws.root().join("sub")).unwrap();
        for (path, kind) in [("pipe", "fifo"), ("sub", "dir")] {
            for refused in [
                ws.open_read(path).map(|_| ()),
                ws.open_write(path).map(|_| ()),
            ] {
                match refused {
                    Err(WorkspaceError::NotRegular { kind: k, .. }) => assert_eq!(k, kind),
                    other => panic!("{path}: expected a not-regular refusal, got {other:?}"),
                }
            }
        }
    }

    /// The check after opening, for a FIFO swapped in after the `lstat` check: opening it
    /// with the confining flags returns at once (no writer needed) and `verify` refuses it.
    #[test]
    fn a_fifo_opened_with_the_confining_flags_does_not_block_and_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let ws = Workspace::open(dir.path()).unwrap();
        let fifo = ws.root().join("pipe");
        mkfifo(&fifo);
        let mut options = OpenOptions::new();
        options.read(true);
        confine(&mut options);
        let file = options.open(&fifo).unwrap();
        match ws.verify(&file, "pipe") {
            Err(WorkspaceError::NotRegular { kind: "fifo", .. }) => {}
            other => panic!("expected a fifo refusal, got {other:?}"),
        }
    }
}
