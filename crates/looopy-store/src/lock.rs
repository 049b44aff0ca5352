//! One writer per database, across processes.
//!
//! SQLite itself happily lets two processes write one file, but Looopy cannot: each process
//! numbers a context's events from its own memory of the log, and each one's start-up
//! recovery would fail the other's running tasks. So a process that opens a database for
//! writing takes an exclusive OS lock (`flock`) on a lock file beside it, `<db>.lock`, and
//! keeps it until the store is dropped. The lock belongs to the open file, so the kernel
//! releases it when the process dies however it dies (SIGKILL included): a stale lock file
//! is never a problem, only a live holder is. The file's content is informational — the
//! holder's pid, what it is and where it can be reached — so a refused second process can
//! say who is in the way.
//!
//! SQLite's own `locking_mode=EXCLUSIVE` was the alternative; in WAL mode it keeps every
//! other connection out, readers included, which would break read-only users (`looopy
//! tail`, history listings) and the store's own reader pool.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use crate::StoreError;
use crate::error::LockHolder;

/// The lock file of database `db`: `<db>.lock` in the same directory.
pub(crate) fn lock_path(db: &Path) -> PathBuf {
    let mut name = db.as_os_str().to_owned();
    name.push(".lock");
    PathBuf::from(name)
}

/// The held writer lock of one database; released when dropped (or when the process ends).
#[derive(Debug)]
pub(crate) struct WriterLock {
    file: Mutex<File>,
    path: PathBuf,
    command: String,
}

impl WriterLock {
    /// Takes the lock of database `db` for `command`, or says who holds it.
    pub(crate) fn acquire(db: &Path, command: &str) -> Result<Self, StoreError> {
        let path = lock_path(db);
        let io = |action: &'static str| {
            let path = path.clone();
            move |source| StoreError::Io {
                action,
                path,
                source,
            }
        };
        // Never truncate before holding the lock: the content belongs to the holder.
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(io("opening the lock file"))?;
        match try_lock(&file) {
            Ok(true) => {}
            Ok(false) => {
                let mut text = String::new();
                // The holder may be between taking the lock and writing its name.
                let _ = file.read_to_string(&mut text);
                return Err(StoreError::Locked {
                    path: db.to_path_buf(),
                    holder: parse_holder(&text),
                });
            }
            Err(source) => return Err(io("locking")(source)),
        }
        let lock = Self {
            file: Mutex::new(file),
            path,
            command: command.to_string(),
        };
        lock.write(None)?;
        tracing::debug!(lock = %lock.path.display(), "database writer lock taken");
        Ok(lock)
    }

    /// Records where the holder can be reached (e.g. a server's URL), for the message a
    /// refused second process prints.
    pub(crate) fn set_address(&self, address: &str) -> Result<(), StoreError> {
        self.write(Some(address))
    }

    fn write(&self, address: Option<&str>) -> Result<(), StoreError> {
        let mut text = format!(
            "pid={}\ncommand={}\n",
            std::process::id(),
            one_line(&self.command)
        );
        if let Some(address) = address {
            text.push_str(&format!("address={}\n", one_line(address)));
        }
        let mut file = self
            .file
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let result = file
            .set_len(0)
            .and_then(|()| file.seek(SeekFrom::Start(0)))
            .and_then(|_| file.write_all(text.as_bytes()))
            .and_then(|()| file.flush());
        result.map_err(|source| StoreError::Io {
            action: "writing the lock file",
            path: self.path.clone(),
            source,
        })
    }
}

/// Who holds the writer lock of database `db` right now, without taking it for longer than
/// a probe: `None` when nobody does (no lock file, or a stale one whose holder died). A
/// client uses it to find a running server to talk to instead of the file.
///
/// The lock file's content is read first and the lock probed only when it names an address
/// (a server): in the common case nothing is locked, even for an instant, so a process
/// starting at the same moment is never refused because of the probe.
pub fn current_holder(db: &Path) -> Result<Option<LockHolder>, StoreError> {
    let path = lock_path(db);
    let io = |action: &'static str, source| StoreError::Io {
        action,
        path: path.clone(),
        source,
    };
    let mut file = match OpenOptions::new().read(true).open(&path) {
        Ok(file) => file,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(source) => return Err(io("opening the lock file", source)),
    };
    let mut text = String::new();
    file.read_to_string(&mut text)
        .map_err(|source| io("reading the lock file", source))?;
    let recorded = parse_holder(&text);
    if recorded.address.is_none() {
        return Ok(None);
    }
    match try_lock(&file) {
        // Taken: the recorded holder is gone; closing the file releases the probe's lock.
        Ok(true) => Ok(None),
        Ok(false) => Ok(Some(recorded)),
        Err(source) => Err(io("locking", source)),
    }
}

/// Takes an exclusive lock on `file` without waiting: true if taken, false if another open
/// file holds it.
#[cfg(unix)]
fn try_lock(file: &File) -> std::io::Result<bool> {
    use rustix::fs::{FlockOperation, flock};
    match flock(file, FlockOperation::NonBlockingLockExclusive) {
        Ok(()) => Ok(true),
        Err(rustix::io::Errno::WOULDBLOCK) => Ok(false),
        Err(errno) => Err(errno.into()),
    }
}

#[cfg(not(unix))]
fn try_lock(file: &File) -> std::io::Result<bool> {
    match file.try_lock() {
        Ok(()) => Ok(true),
        Err(std::fs::TryLockError::WouldBlock) => Ok(false),
        Err(std::fs::TryLockError::Error(error)) => Err(error),
    }
}

fn one_line(text: &str) -> String {
    text.replace(['\n', '\r'], " ")
}

/// Reads a lock file's `key=value` lines; anything unreadable is left out.
fn parse_holder(text: &str) -> LockHolder {
    let mut holder = LockHolder::default();
    for line in text.lines() {
        match line.split_once('=') {
            Some(("pid", pid)) => holder.pid = pid.trim().parse().ok(),
            Some(("command", command)) if !command.trim().is_empty() => {
                holder.command = Some(command.trim().to_string());
            }
            Some(("address", address)) if !address.trim().is_empty() => {
                holder.address = Some(address.trim().to_string());
            }
            _ => {}
        }
    }
    holder
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_lock_is_refused_naming_the_holder_until_the_first_is_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("a.db");
        let first = WriterLock::acquire(&db, "looopy serve").unwrap();
        first.set_address("http://127.0.0.1:1234").unwrap();
        match WriterLock::acquire(&db, "looopy run") {
            Err(StoreError::Locked { path, holder }) => {
                assert_eq!(path, db);
                assert_eq!(holder.pid, Some(std::process::id()));
                assert_eq!(holder.command.as_deref(), Some("looopy serve"));
                assert_eq!(holder.address.as_deref(), Some("http://127.0.0.1:1234"));
            }
            other => panic!("expected Locked, got {other:?}"),
        }
        drop(first);
        let second = WriterLock::acquire(&db, "looopy run").unwrap();
        let text = std::fs::read_to_string(lock_path(&db)).unwrap();
        assert!(text.contains("command=looopy run\n"), "{text}");
        assert!(!text.contains("address="), "{text}");
        drop(second);
    }

    #[test]
    fn the_current_holder_is_a_live_server_only() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("a.db");
        assert_eq!(current_holder(&db).unwrap(), None, "no lock file");
        let first = WriterLock::acquire(&db, "looopy chat").unwrap();
        assert_eq!(
            current_holder(&db).unwrap(),
            None,
            "no address: not a server"
        );
        first.set_address("http://127.0.0.1:1234").unwrap();
        let holder = current_holder(&db).unwrap().unwrap();
        assert_eq!(holder.address.as_deref(), Some("http://127.0.0.1:1234"));
        assert_eq!(holder.pid, Some(std::process::id()));
        drop(first);
        // The file stays with the dead holder's address; the probe sees through it.
        assert!(
            std::fs::read_to_string(lock_path(&db))
                .unwrap()
                .contains("address=")
        );
        assert_eq!(current_holder(&db).unwrap(), None, "stale");
        // And the probe did not keep the lock.
        drop(WriterLock::acquire(&db, "looopy run").unwrap());
    }

    #[test]
    fn holder_text_is_parsed_leniently() {
        assert_eq!(parse_holder(""), LockHolder::default());
        let holder = parse_holder("pid=12\ncommand=looopy serve\ngarbage\naddress=\n");
        assert_eq!(holder.pid, Some(12));
        assert_eq!(holder.command.as_deref(), Some("looopy serve"));
        assert_eq!(holder.address, None);
        assert_eq!(holder.to_string(), "`looopy serve` (pid 12)");
    }
}
