//! Looopy's durable store: one SQLite file (WAL mode) holding conversations, their
//! messages, task records, artifacts, and the append-only event log that SSE replay reads.
//!
//! The event log is written before delivery with group commit: [`EventLog::append`] only
//! queues; a writer thread commits whatever is queued in one transaction, then broadcasts
//! the batch. [`EventLog::tail`] replays a context from any `seq` and follows live events.
//!
//! Durability: `synchronous=NORMAL` in WAL mode — committed data survives a process crash
//! or SIGKILL; a power loss may lose the last few commits (never corrupting the file).
//! Everything async runs on tokio's blocking pool or the writer thread, never on the
//! runtime's workers.
//!
//! One process writes a database at a time: [`Store::open`] takes an OS lock on `<db>.lock`
//! (released however the process ends) and a second writer gets [`StoreError::Locked`]
//! naming the holder; [`Store::open_read_only`] reads beside a writer. A damaged file is
//! refused at open ([`StoreError::CorruptDatabase`], from `PRAGMA quick_check`). When writes
//! start failing (disk full), the failure is attributed to the context whose events were
//! refused ([`EventLog::flush_context`], [`EventLog::subscribe_failures`]) and
//! [`Store::check_writable`] probes for recovery.
//!
//! ```
//! use futures::StreamExt;
//! use looopy_protocol::{EventPayload, Message, Sequencer, Stamp, TaskState, event::ContentDelta};
//! use looopy_store::{Store, TaskRecord};
//!
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! let dir = tempfile::tempdir().unwrap();
//! let store = Store::open(dir.path().join("data/looopy.db")).unwrap();
//!
//! store.ensure_context("ctx-1", None).await.unwrap();
//! store.append_messages("ctx-1", &[Message::user("hi")]).await.unwrap();
//! store.put_task(&TaskRecord::new("task-1", "ctx-1", TaskState::Working)).await.unwrap();
//!
//! let log = store.event_log();
//! let seq = Sequencer::starting_after(log.last_seq("ctx-1").await.unwrap());
//! let stamp = Stamp::new("ctx-1", "task-1");
//! for (i, piece) in ["Hel", "lo"].into_iter().enumerate() {
//!     let payload = EventPayload::ContentDelta(ContentDelta { delta: piece.into(), index: i as u64 });
//!     log.append(stamp.stamp(&seq, payload)).await.unwrap();
//! }
//! log.flush().await.unwrap(); // both events are durable now
//!
//! let replayed: Vec<_> = log.tail("ctx-1", 0).take(2).collect().await;
//! assert_eq!(replayed.iter().map(|e| e.as_ref().unwrap().seq).collect::<Vec<_>>(), [1, 2]);
//! store.close().await.unwrap();
//! # });
//! ```
#![cfg_attr(
    not(test),
    deny(clippy::unwrap_used, clippy::expect_used, clippy::panic)
)]

mod bus;
mod db;
mod error;
mod event_log;
mod health;
mod lock;
mod postgres;
mod records;
mod schema;
mod store;

pub use bus::{Bus, BusOptions, Control};
pub use error::{LockHolder, RejectedEvent, StoreError};
pub use event_log::{Batch, Doorbell, EventLog, EventLogStats, LiveBatches, Watch, Watcher};
pub use health::StorageFailure;
pub use lock::current_holder as lock_holder;
pub use postgres::{is_postgres_url, redact_url};
pub use records::{ArtifactRecord, ContextRecord, TaskRecord};
pub use schema::SCHEMA_VERSION;
pub use store::{ArtifactBody, ArtifactContent, DatabaseLock, SealedSecretRecord};
pub use store::{ContextCursor, Lease, PushConfigRecord, PushLease, Store, StoreOptions};
pub use store::{TaskPage, TaskQuery};
