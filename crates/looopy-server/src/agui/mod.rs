//! AG-UI 1.0 (the protocol of `@ag-ui/client` / CopilotKit) as a front door: a *view* of
//! the durable event log, not a second runtime. A run's AG-UI events are mapped from the
//! log ([`mapping`]), so a live stream, a replay and a resumed stream are the same bytes.
//!
//! | route | |
//! |---|---|
//! | `POST /v1/agui` | a `RunAgentInput` (module `input`): starts a turn with the new user message, or answers an interrupt (`resume`); answers the run as `text/event-stream`, or in AG-UI's protobuf framing ([`proto`]) when `Accept` prefers `application/vnd.ag-ui.event+proto` |
//! | `GET /v1/agui/{threadId}/runs/{runId}` | the run again from the log, in either framing: from its start, or after `Last-Event-ID` / `?after=` with a join prelude ([`prelude`]) |
//! | `POST /v1/agui/{threadId}/runs/{runId}/cancel` | stops the run's task (202); a disconnect does not |
//!
//! - `threadId` is the Looopy context: created for the caller on first use, owned like
//!   every context (another principal's thread is a 404, as in the rest of the API).
//! - `runId` is the client's; `RUN_STARTED` echoes it and names the Looopy task in
//!   `metadata.looopy.taskId`. How a run id is found again is in the `runs` module.
//! - Every SSE frame is `id: …` + `data: {event}`; ids are log seqs (`N`), or `N.k` for
//!   the k-th of several AG-UI events mapped from log event `N` ([`prelude::Cursor`]). A
//!   protobuf frame carries the same id in the envelope's field 1000 ([`proto`]).
//! - `Accept` chooses the framing (module `framing`); one that takes neither is a 406.
//! - A question to the user (`input-required`) or a sign-in (`auth-required`) ends the
//!   run with `RUN_FINISHED` outcome `interrupt`; the next run's `resume` entry answers it
//!   (`resolved` + `payload`) or declines it (`cancelled`: the paused task is cancelled).
//!   The pause is stored, so this works across a server restart.
//! - Same authentication, isolation and limits as the rest of the API: bearer tokens,
//!   stream slots, body and message size limits.
//!
//! - Frontend tools (`tools`) are offered to the model for the run
//!   ([`looopy_agent::tool::ClientTools`]): a call to one ends the run with its
//!   `TOOL_CALL_*` events and `RUN_FINISHED` `{type: "success", pendingToolCallIds}`; the
//!   next run's trailing `tool` message carries the result and the turn goes on.
//!
//! Not (yet) supported: `context`, `state` and `forwardedProps` (accepted, not used).
//! The event-by-event table is in `docs/front-doors.md`.

mod activity;
mod framing;
pub(crate) mod input;
mod interrupts;
pub mod mapping;
pub mod prelude;
pub mod proto;
mod routes;
pub(crate) mod runs;
mod stream;

use axum::Router;
use axum::extract::Extension;
use axum::routing::post;

use crate::AppState;

/// The AG-UI routes (see the module docs), with this server's run registry.
pub(crate) fn routes() -> Router<AppState> {
    Router::new()
        .route("/v1/agui", post(routes::post_run))
        .route(
            "/v1/agui/{thread_id}/runs/{run_id}",
            axum::routing::get(routes::get_run),
        )
        .route(
            "/v1/agui/{thread_id}/runs/{run_id}/cancel",
            post(routes::cancel_run),
        )
        .layer(Extension(runs::Runs::default()))
}
