//! # Delivery guarantees
//!
//! The event protocol's open questions on ordering, backpressure, reconnection and errors,
//! answered the way this server behaves (and its tests check).
//!
//! ## Ordering and ids
//!
//! - **Per context, a total order.** Every event of a context — all its tasks, sub-agent
//!   tasks included — carries `seq`, strictly increasing from 1, handed out by the
//!   context's one sequencer and seeded from the log after a restart. The log refuses a
//!   non-increasing `seq`, and commits a context's events in `seq` order; every subscriber
//!   receives them in that order. Per-task order follows (a task's events are a
//!   subsequence).
//! - **Across contexts, none.** Contexts are independent streams; nothing relates the
//!   `seq` of one to another's.
//! - **The SSE `id` is the `seq`**, also inside `data`. A filtered stream (`taskId`,
//!   `kinds`, internal events hidden) keeps the real ids, so the gaps are the filtered
//!   events and `Last-Event-ID` resumes it exactly.
//!
//! ## Durability before delivery
//!
//! An event reaches no client before it is committed to the SQLite event log: the agent
//! appends, the log commits a batch (group commit) and only then broadcasts it to the
//! [`EventRouter`](crate::events::EventRouter). What a client saw is always in the log.
//!
//! ## Backpressure
//!
//! - **The agent never waits for clients.** (It waits only for the log, through the log's
//!   bounded queue, when the database cannot keep up.)
//! - **Nothing is dropped silently either.** Each subscriber has a buffer bounded in
//!   events ([`ServerConfig::subscriber_buffer`](crate::ServerConfig::subscriber_buffer),
//!   1024 by default; an empty buffer always accepts the next committed batch, so one
//!   large group commit never cuts off a client that keeps up). A subscriber that would go
//!   over is **disconnected**: its stream ends after what it has buffered, with a comment
//!   saying why (`: subscriber fell behind; reconnect with Last-Event-ID to resume`), and
//!   a connection that is not even being read is closed a second later. The client
//!   reconnects with its last id and is served from the log: nothing lost, and one slow
//!   client costs the others and the agent nothing.
//! - If the router itself falls behind the log's broadcast, every live subscriber is
//!   disconnected the same way.
//! - A client that disconnects does not cancel its turn; it can come back for the rest.
//!
//! ## Reconnection
//!
//! - **Resume from any id**: `Last-Event-ID` (what `EventSource` sends) or
//!   `?lastEventId=`; the header wins, since `EventSource` keeps the original URL when it
//!   reconnects. Replay comes from the durable log (so it survives restarts and is never
//!   evicted), then live events follow with no gap and no duplicate at the seam: the
//!   subscriber is registered — buffering live events — before the log is read, and live
//!   events up to the last replayed `seq` are skipped.
//! - A `Last-Event-ID` that is not a number, or is ahead of the log, is a **400** with a
//!   clear error, never a silently empty stream.
//! - Streams start with `retry: 3000` (configurable) and send a `: keep-alive` comment
//!   every 15 s while idle.
//! - A turn's own stream (`POST …/messages` with `Accept: text/event-stream`) ends once the
//!   task settles (after `task-complete`, or after the `task-status` that pauses it for
//!   input or authentication). To resume one cut short, open
//!   `GET /v1/contexts/{contextId}/events?taskId=…` with the last id.
//! - On shutdown (SIGINT/SIGTERM) open streams end (with a comment) and running turns get
//!   a grace period to finish, then are canceled cleanly. After a crash (even SIGKILL), the
//!   restarted server marks tasks the dead process left running `failed` (code
//!   `interrupted`, message `server restarted`) and logs their `task-status` and
//!   `task-complete`, so a reconnecting client sees every logged event and how the task
//!   ended.
//!
//! ## Errors
//!
//! - **A failed task is a state change, not a separate event kind**: `task-status` with
//!   `status: failed` and `error: {code, message, retryable}`, then `task-complete` with
//!   `status: failed`. Codes are stable (`llm_http`, `llm_provider`, `max_iterations`,
//!   `interrupted`, `store_error`, `storage_unavailable`, `turn_too_large`, …; see
//!   `looopy_protocol::ErrorCode`) and `retryable` says whether trying again may help.
//!   A turn that fails at once still sends both, and its stream closes.
//! - **When storage fails** (disk full, I/O errors) the turn whose events cannot be written
//!   stops and fails `storage_unavailable`. Its terminal events cannot be logged then, so
//!   its context's streams end with `: storage unavailable` instead (after the events they
//!   had; a reconnecting client replays what was logged); `GET /v1/tasks/{id}` says
//!   `failed` from memory, and the record and terminal events are written once a write
//!   succeeds again. A context's log stays a gapless prefix of what was appended: after a
//!   failed write nothing later of that run is written. Other contexts are not affected
//!   unless their own writes fail.
//! - A failing tool does not fail the turn: its `tool-complete` has `success: false` and
//!   an `error`, and the model sees the error as the tool's result.
//! - HTTP errors are `{"error": {"code", "message"}}`: 400 (malformed JSON `malformed_json`,
//!   wrong fields `invalid_body`, bad ids `invalid_id`, bad `Last-Event-ID`, unknown
//!   `kinds`), 401 `unauthorized`, 404 `not_found` (also for other principals' contexts),
//!   409 (`busy`, `waiting_input`, `not_waiting`, `wrong_input`, `not_running`), 413
//!   `payload_too_large` / `message_too_large`, 415 `unsupported_media_type`, 429 `too_many_streams` (the
//!   caller's share of event streams is in use), 503 `shutting_down`, 503 `server_busy`
//!   (the server holds its maximum of event streams; see the `limits` module), 503
//!   `storage_unavailable` (turns and input answers while the database cannot be
//!   written; each such request first probes with a tiny write, so the first one after
//!   the disk has room again goes through).
//! - A message (or input answer) sent the moment the previous turn's final event arrives
//!   is not refused `busy`: the run lets go of its context once that event is durable, an
//!   instant later, and the server waits for the agent's release notification
//!   (`Agent::run_released`) when the task holding the context has already settled. A
//!   409 `busy` means a turn of the context is really running.
//! - Problems of a stream itself (fell behind, shutdown, a failed log read, its optional
//!   maximum lifetime) end it with a comment naming the reason; the client resumes with
//!   `Last-Event-ID`.
