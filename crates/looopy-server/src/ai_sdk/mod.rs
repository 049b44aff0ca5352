//! The Vercel AI SDK front door: `useChat` / `DefaultChatTransport` (npm `ai` 7) talk to
//! Looopy directly. Like every front door it is a *view* of the durable event log — a
//! request adapter plus a pure mapping from event kinds to the UI message stream
//! protocol `v1` — not a runtime of its own; streams are read from the log like the native
//! SSE stream, so they replay exactly.
//!
//! # Routes
//!
//! | route | |
//! |---|---|
//! | `POST /v1/ai-sdk/chat` | `DefaultChatTransport`'s body `{id, messages, trigger, messageId}`; `id` is the Looopy context id (created for the caller if new, owned like every context). Answers the UI message stream (`x-vercel-ai-ui-message-stream: v1`, SSE `data:` chunks, `data: [DONE]`). |
//! | `GET /v1/ai-sdk/chat/{id}/stream` | resume (`useChat({resume: true})`): `204` when no turn runs, else the running turn's message **from its first chunk**, replayed from the log, then live |
//! | `POST /v1/ai-sdk/chat/{id}/stop` | cancel the chat's open turn: `202 {contextId, taskId}`, `204` when there is none |
//!
//! Authentication, ownership, stream slots and body limits are the rest of the API's.
//!
//! # Requests
//!
//! The client resends the whole conversation on every request; Looopy's stored history
//! stays the truth (`GET /v1/contexts/{id}/messages` shows the same conversation), so only
//! the **last** message is read ([`request`]): a user message's text parts are the new
//! turn's input (its id, when valid, is kept as the stored message's id); an assistant
//! message's tool part in state `output-available` answers the open question. Refused
//! with a 400 that changes nothing: a malformed body or `id`, no messages, an empty user
//! message, `trigger: "regenerate-message"` (the history is kept as it happened), an
//! answer when nothing is asked or one that answers another question.
//!
//! # Questions: the AI SDK's human-in-the-loop shape
//!
//! An `input-required` is **a tool part awaiting its output** (rather than
//! `tool-approval-request`, which can only say yes or no, while a question wants a value):
//! the root task's tool call that asked (`ask_user`) is announced again with
//! `toolMetadata: {looopyInputId, prompt}`; a question with no such call (a sub-agent's)
//! gets a dynamic tool part `looopy_input` whose `toolCallId` is the input id and whose
//! input is `{prompt, inputType, schema?, options?}`. A `data-looopy-input` part carries
//! the whole request. The message finishes with `finishReason: "tool-calls"`. The client
//! answers with `addToolOutput` and the next request (automatic with
//! `sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithToolCalls`) carries it; a
//! plain user message is taken as the answer too. The pause is in the store, so this works
//! across a server restart.
//!
//! # The message of a turn
//!
//! `start` (`messageId` = the task id; `messageMetadata: {contextId, taskId}`), a
//! `start-step` … `finish-step` per model call (a step ends with the call's
//! `content-complete`), then `finish` (`messageMetadata` adds summed `usage`) and
//! `data: [DONE]`. A canceled turn ends with `abort` instead, a failed one with `error`
//! then `finish` (`error`). The per-kind mapping is in [`mapping`] and in
//! `docs/front-doors.md`.
//!
//! # Resume and stop
//!
//! A resumed stream always starts at the turn's first event: `DefaultChatTransport`
//! (`resumeStreamIsReplay`) drops what it had when a resumed stream starts, so a partial
//! replay would lose text, and a stream cut mid-part can never be continued. A paused turn
//! is not running (`204`): its message ended with the question. A client that leaves does
//! not stop its turn; only the stop route (or the native cancel) does.

mod chunk;
mod frames;
pub mod mapping;
mod request;
mod routes;

#[cfg(test)]
mod tests;

pub use chunk::{Chunk, DONE, DataPart, FinishReason, Part, STREAM_HEADER, encode};
pub use frames::ChunkFrames;
pub use mapping::{Mapper, Progress};

use axum::Router;
use axum::routing::{get, post};

use crate::AppState;

/// The AI SDK routes (see the module docs).
pub(crate) fn routes() -> Router<AppState> {
    Router::new()
        .route("/v1/ai-sdk/chat", post(routes::post_chat))
        .route(
            "/v1/ai-sdk/chat/{context_id}/stream",
            get(routes::resume_stream),
        )
        .route("/v1/ai-sdk/chat/{context_id}/stop", post(routes::stop))
}
