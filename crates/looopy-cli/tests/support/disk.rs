//! A small file system a test can fill: a tmpfs mounted for the test (needs root), and
//! [`fill`], which takes every free block of it. How the disk-full tests run a server out
//! of space without touching the machine's own disks.

use std::io::Write;
use std::path::Path;
use std::process::Command;

/// A tmpfs mounted for one test, unmounted when dropped.
pub struct Tmpfs {
    dir: tempfile::TempDir,
}

impl Tmpfs {
    /// Mounts a tmpfs of `size` (e.g. `24m`), or says why it cannot.
    pub fn mount(size: &str) -> Result<Self, String> {
        let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir.path())
            .output()
            .map_err(|e| format!("cannot run mount: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "mount -t tmpfs failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        Ok(Self { dir })
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount")
            .arg("-l")
            .arg(self.dir.path())
            .status();
    }
}

/// Fills the file system holding `path` until it has no whole block left.
pub fn fill(path: &Path) -> std::fs::File {
    let mut file = std::fs::File::create(path).unwrap();
    for chunk in [1 << 20, 64 << 10, 4 << 10, 512] {
        let block = vec![0x5a_u8; chunk];
        while file.write_all(&block).is_ok() {}
    }
    let _ = file.flush();
    file
}
