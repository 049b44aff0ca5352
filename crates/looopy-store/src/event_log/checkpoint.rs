//! WAL checkpoints off the commit path. SQLite normally checkpoints inside whichever commit
//! pushes the WAL past 1000 pages, and that checkpoint (copying pages back and fsyncing the
//! database) stalls the event-log writer for tens of milliseconds — measured as the p99 of
//! append→broadcast latency. So the writer's connection has automatic checkpoints off and a
//! thread with its own connection does the bulk of the work concurrently (`PASSIVE` never
//! blocks the writer).
//!
//! A checkpoint that runs while the writer keeps committing can never cover the newest
//! frames, and SQLite only rewinds the WAL once every frame is checkpointed, so under
//! continuous load the WAL would grow without bound. Hence once the thread reports a WAL
//! of `wal_rewind_pages` or more, the writer itself runs a `PASSIVE` checkpoint between two
//! transactions, after delivering the batch: the thread has already copied nearly
//! everything, so this costs about two fsyncs, and the next commit rewinds the WAL
//! (`journal_size_limit` then trims the file). Under continuous load that is one such pause
//! per `wal_rewind_pages` pages written.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, TrySendError, sync_channel};
use std::thread::JoinHandle;

use rusqlite::Connection;

/// Bytes per WAL page assumed when converting the writer's byte estimate to pages.
const PAGE_BYTES: u64 = 4096;

/// The writer's handle: request checkpoints; dropping it stops and joins the thread.
pub(super) struct Checkpointer {
    requests: Option<SyncSender<()>>,
    thread: Option<JoinHandle<()>>,
    /// Estimated bytes appended to the WAL since the last request.
    pending: u64,
    /// Request a checkpoint after this many bytes.
    checkpoint_bytes: u64,
    /// Complete a checkpoint on the writer once the WAL has this many pages.
    rewind_pages: i64,
    shared: Arc<Shared>,
}

/// What the writer and the thread tell each other.
#[derive(Default)]
struct Shared {
    /// Frames in the WAL as of the thread's last checkpoint.
    wal_frames: AtomicI64,
    /// The writer wants to run the rewinding checkpoint: the thread starts no new one
    /// (two checkpoints cannot run at once, and the thread would otherwise always win).
    writer_waiting: AtomicBool,
}

impl Checkpointer {
    /// Starts the thread on `conn`. When the thread cannot be spawned, checkpoints fall back
    /// to SQLite's automatic ones on the writer's connection (`None` is returned and the
    /// caller keeps autocheckpoint on).
    pub(super) fn start(
        conn: Connection,
        checkpoint_pages: u32,
        rewind_pages: u32,
    ) -> Option<Self> {
        let (requests, incoming) = sync_channel(1);
        let shared = Arc::new(Shared::default());
        let thread_shared = Arc::clone(&shared);
        let thread = std::thread::Builder::new()
            .name("looopy-checkpoint".into())
            .spawn(move || run(&conn, &incoming, &thread_shared));
        match thread {
            Ok(thread) => Some(Self {
                requests: Some(requests),
                thread: Some(thread),
                pending: 0,
                checkpoint_bytes: u64::from(checkpoint_pages.max(1)) * PAGE_BYTES,
                rewind_pages: i64::from(rewind_pages.max(1)),
                shared,
            }),
            Err(error) => {
                tracing::warn!(%error, "no checkpoint thread; checkpointing inside commits");
                None
            }
        }
    }

    /// Records that a commit appended about `bytes` to the WAL; asks for a checkpoint once
    /// enough has accumulated. Never blocks: a request already pending covers this one.
    pub(super) fn wrote(&mut self, bytes: u64) {
        self.pending += bytes;
        if self.pending < self.checkpoint_bytes {
            return;
        }
        self.pending = 0;
        if let Some(requests) = &self.requests {
            match requests.try_send(()) {
                Ok(()) | Err(TrySendError::Full(())) => {}
                Err(TrySendError::Disconnected(())) => {
                    tracing::warn!("checkpoint thread is gone; WAL will grow until reopen");
                    self.requests = None;
                }
            }
        }
    }

    /// Called by the writer between transactions: once the WAL is `rewind_pages` long,
    /// completes a checkpoint on the writer's own connection so the next commit rewinds it.
    /// While the thread is mid-checkpoint this returns at once (busy) and is retried after
    /// the next batch; meanwhile the thread starts no new checkpoint. True when a
    /// checkpoint ran.
    pub(super) fn catch_up_if_due(&mut self, conn: &Connection) -> bool {
        if self.shared.wal_frames.load(Ordering::Relaxed) < self.rewind_pages {
            return false;
        }
        self.shared.writer_waiting.store(true, Ordering::SeqCst);
        match checkpoint(conn, "PASSIVE") {
            // -1: the thread's checkpoint still holds the lock; try again after the next batch.
            Ok((_, -1, _)) => return false,
            Ok((_, wal_frames, done)) => {
                tracing::debug!(wal_frames, done, "writer completed a WAL checkpoint");
            }
            Err(error) => tracing::warn!(%error, "WAL checkpoint failed"),
        }
        self.shared.wal_frames.store(0, Ordering::Relaxed);
        self.shared.writer_waiting.store(false, Ordering::SeqCst);
        true
    }
}

impl Drop for Checkpointer {
    fn drop(&mut self) {
        self.requests = None;
        if let Some(thread) = self.thread.take() {
            if thread.join().is_err() {
                tracing::error!("checkpoint thread panicked");
            }
        }
    }
}

fn run(conn: &Connection, requests: &Receiver<()>, shared: &Shared) {
    while requests.recv().is_ok() {
        if shared.writer_waiting.load(Ordering::SeqCst) {
            continue;
        }
        match checkpoint(conn, "PASSIVE") {
            Ok((_, -1, _)) => {}
            Ok((_, frames, _)) => shared.wal_frames.store(frames, Ordering::Relaxed),
            Err(error) => tracing::warn!(%error, "WAL checkpoint failed"),
        }
    }
}

/// Runs `PRAGMA wal_checkpoint(mode)`: (busy, frames in the WAL, frames checkpointed).
fn checkpoint(conn: &Connection, mode: &str) -> rusqlite::Result<(i64, i64, i64)> {
    conn.query_row(&format!("PRAGMA wal_checkpoint({mode})"), [], |row| {
        Ok((row.get(0)?, row.get(1)?, row.get(2)?))
    })
}
