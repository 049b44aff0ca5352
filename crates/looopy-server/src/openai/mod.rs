//! The OpenAI-compatible front door: the Responses API (with resume for *every* response)
//! and Chat Completions, so the official `openai` SDKs and everything built on them talk to
//! a Looopy agent as if it were a model. Like every front door it is a *view* of the
//! durable event log — a request adapter plus a pure mapping ([`responses::mapping`]) from
//! event kinds to the Responses API's stream events — not a runtime of its own.
//!
//! # Routes (base URL `http://host/v1`)
//!
//! | route | |
//! |---|---|
//! | `GET /v1/models`, `GET /v1/models/{model}` | the one model, `looopy` ([`models`]) |
//! | `POST /v1/responses` | a turn: `input`, `previous_response_id`, `stream`, `background`, `metadata`, `instructions`, `model` |
//! | `GET /v1/responses/{id}` | the response object, from the log |
//! | `GET /v1/responses/{id}?stream=true&starting_after=N` | the stream again from event `N+1`, out of the log, then live |
//! | `POST /v1/responses/{id}/cancel` | cancels its turn; answers the object (`cancelled`) |
//! | `DELETE /v1/responses/{id}` | forgets it (cancelling its turn if it runs) |
//! | `POST /v1/chat/completions` | a turn answered as a chat completion or its chunks |
//!
//! Authentication, ownership (another principal's response is a 404), stream slots and
//! body and message limits are the rest of the API's. Errors are OpenAI's shape
//! ([`errors`]).
//!
//! # Responses
//!
//! - **A response is a stretch of one task's log.** Its id is `resp_<taskId>_<startSeq>`
//!   ([`responses::ResponseId`]): the turn's root task and the log position just before the
//!   response's first event. That is enough to rebuild the response from the log at any
//!   time, also after a restart: `GET` and `?stream=true` always map the same events, so
//!   `sequence_number`s are the same on every read and `starting_after` is exact.
//! - **Without `previous_response_id`** a response starts a turn in a new context owned by
//!   the caller. **With it**, the turn runs in that response's context (its history is the
//!   conversation); when that context is paused on a question, the input is the answer
//!   and the response continues the paused task (a new id: same task, later start).
//! - **Input**: a string, or message items; the text of the `user` messages is the turn's
//!   input. Other roles and item types are refused with a 400 (the history lives on the
//!   server). `instructions`, `metadata`, `model` and `background` are echoed, not
//!   applied: the agent's own configuration rules. They are kept in memory
//!   ([`responses::Registry`]); after a restart a response is rebuilt without them.
//! - **Client `function` tools** (`tools: [{type: "function", …}]`; other tool types are a
//!   400) are offered to the model for that turn as the client's own tools
//!   ([`looopy_agent::tool::ClientTools`], the mechanism AG-UI's frontend tools use). A
//!   call to one is a `function_call` item (`call_id` = the Looopy tool call id); the turn
//!   pauses durably and the response ends **`completed`** with that item last, as OpenAI's
//!   do. The next request with `previous_response_id` and a `function_call_output` item
//!   for that `call_id` resumes the turn with the output as the call's result; text
//!   instead (`function_call_output_expected`) or another call's output
//!   (`unknown_tool_call`) is a 400 that changes nothing. Chat Completions `tools` are
//!   refused (400).
//! - **`background: true`** answers at once with status `queued` (behind another turn of
//!   the context) or `in_progress`; **`stream: true`** answers the events; otherwise the
//!   request waits for the response to settle and answers the whole object.
//!
//! # The stream
//!
//! `response.created`, `response.in_progress`, then per log event (see
//! `docs/front-doors.md` for every kind):
//! - text: a `message` item with one `output_text` part (`output_item.added`,
//!   `content_part.added`, `output_text.delta`…, `output_text.done`, `content_part.done`,
//!   `output_item.done`); a model call's end closes it;
//! - thoughts: a `reasoning` item whose content is one `reasoning_text` part
//!   (`response.reasoning_text.delta`/`done`), `summary` empty — the agent's own thinking,
//!   not a summary;
//! - the agent's own tool calls: **`mcp_call` items** (`server_label` `looopy`): a tool the
//!   server runs itself, arguments and output in one item
//!   (`response.mcp_call.in_progress`, `mcp_call_arguments.delta`/`done`,
//!   `mcp_call.completed`/`failed`). Never `function_call`, which a client would have to run;
//! - a question to the user: the asking call's item ends `incomplete`, the question is an
//!   assistant `message`, and the response ends **`response.incomplete`**; the next
//!   request with `previous_response_id` answers it (also after a restart: the pause is
//!   stored);
//! - the end: `response.completed`, `response.failed` (`error.code` `server_error`), or —
//!   cancelled — `response.incomplete` with status `cancelled` (the API has no cancelled
//!   stream event). A stream cut by the server ends with an `error` event.
//!
//! SSE frames carry `event: <type>`, `id: <sequence_number>` and the event as `data:`.
//!
//! # Chat Completions
//!
//! Stateless, as the API is: every request is a new turn in a new context of the caller's.
//! The last message must be the user's and is the input; earlier messages (the client
//! resends the conversation every time) are seeded into that message as a transcript
//! ([`chat_completions`]). The answer is the turn's text: `choices[0].delta.content`
//! chunks, thoughts as `reasoning_content`, `finish_reason` `stop`, `usage` in a last chunk
//! with `stream_options.include_usage`, then `data: [DONE]`. The agent's tool activity is
//! not shown as `tool_calls` (the client did not declare those tools and must not run them):
//! a client sees the text the agent writes around its tool use, and a question to the user
//! as the answer's text. A failed turn is a 500 (non-streaming) or an in-stream `error`.

pub mod chat_completions;
pub mod errors;
pub mod models;
pub mod responses;

use axum::Router;
use axum::extract::Extension;
use axum::routing::{get, post};

use crate::AppState;

/// The SSE response of `frames`, without the `retry:` hint (see
/// [`crate::sse::sse_response_without_retry`]).
pub(crate) fn sse<S>(state: &AppState, frames: S) -> axum::response::Response
where
    S: futures::Stream<Item = bytes::Bytes> + Unpin + Send + 'static,
{
    crate::sse::sse_response_without_retry(frames, state.config().keepalive)
}

/// The OpenAI-compatible routes (see the module docs).
pub(crate) fn routes() -> Router<AppState> {
    Router::new()
        .route("/v1/models", get(models::list))
        .route("/v1/models/{model}", get(models::retrieve))
        .route("/v1/responses", post(responses::routes::create))
        .route(
            "/v1/responses/{id}",
            get(responses::routes::retrieve).delete(responses::routes::delete),
        )
        .route("/v1/responses/{id}/cancel", post(responses::routes::cancel))
        .route("/v1/chat/completions", post(chat_completions::create))
        .route_layer(axum::middleware::map_response(errors::openai_errors))
        .layer(Extension(responses::Registry::default()))
}
