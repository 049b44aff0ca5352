//! The text wire protocol for models without native tool calling, and context assembly.
//!
//! A model writes `<think>…</think>` for reasoning, `<execute>[{"name": …, "args": {…}}]</execute>`
//! to call tools, `<respond>…</respond>` (or bare text) for the user, and `<end>` when done.
//! The system answers a batch with a user message `<results>[…]</results>`.
//! [`WireParser`] turns the model's streamed text into [`WireEvent`]s as it arrives;
//! [`to_messages`] and [`from_messages`] convert persisted [`ConversationEvent`]s to chat
//! turns and back.
//!
//! # Parsing rules
//!
//! - `think` and `respond` text streams: each push yields the text known not to be part of a
//!   marker; only a possible partial marker (at most 9 bytes, like `</thi`) is held back.
//! - Inside `<think>` every other marker is literal text; only `</think>` ends it.
//! - Inside `<respond>`, `</respond>` ends the block, and so do `<execute>` and `<end>`
//!   (models often forget `</respond>` before acting); anything else is literal text.
//! - Bare text outside blocks is respond text. All text is exact: the `think` and `respond`
//!   contents, concatenated in order, are the input with the recognised markers removed,
//!   whitespace included (`then <think>x</think> we go` gives respond `then `, think `x`,
//!   respond ` we go`, which join back into `then  we go`, never `thenwe go`). A renderer may
//!   trim; the parser does not. Stray closing markers outside blocks are dropped.
//! - The `<execute>` body is scanned once, with its JSON string/escape state carried across
//!   chunks, so `</execute>` inside a string argument does not end it. On `</execute>` the body
//!   must be a non-empty JSON array of `{"name": string, "args": object}` (`args` may be
//!   omitted; other keys are ignored). A valid batch yields its `call` events in order and then
//!   one `execute`, and the parser **stops**: whatever the model writes after `</execute>` was
//!   written without seeing any result, so it is ignored and [`WireParser::is_stopped`] tells
//!   the caller to cut the stream. An invalid batch yields exactly one `error` event (saying
//!   what is wrong, with serde_json's line/column for malformed JSON) and no `call`/`execute`;
//!   parsing continues.
//! - A body larger than [`MAX_EXECUTE_BODY`] yields one `error` and is discarded; parsing
//!   continues after its `</execute>`.
//! - `<end>` yields `end` and stops the parser too.
//! - `<results>` is only ever written by the system; if the model writes one, an `error`
//!   event reports it and the block's content is skipped up to `</results>`.
//! - At end of stream a held partial marker is released as text; a `think`/`respond` block
//!   still open yields its content and its last event carries `truncated: true` (an empty
//!   event if all text was already streamed); an unclosed `<execute>` whose body is already a
//!   valid batch is accepted (a stop sequence may have eaten `</execute>`), otherwise it is an
//!   `error`.
//!
//! Markers are exact and case-sensitive (`<Think>` or `< think>` are text). Memory is bounded:
//! at most 9 held-back bytes and [`MAX_EXECUTE_BODY`] of batch body. `finish()` resets the
//! parser for the next generation.
//!
//! ```
//! use looopy_stream::wire::{WireEvent, WireParser};
//!
//! let mut parser = WireParser::new();
//! let mut events = Vec::new();
//! for delta in ["<think>check fi", "les</thi", "nk>\n<execute>[{\"name\":\"list\",", "\"args\":{}}]</execute>ignored"] {
//!     events.extend(parser.push(delta));
//! }
//! assert!(parser.is_stopped());
//! let json: Vec<String> = events.iter().map(|e| serde_json::to_string(e).unwrap()).collect();
//! assert_eq!(json, [
//!     r#"{"type":"think","content":"check fi"}"#,
//!     r#"{"type":"think","content":"les"}"#,
//!     r#"{"type":"respond","content":"\n"}"#,
//!     r#"{"type":"call","content":{"name":"list","args":{}}}"#,
//!     r#"{"type":"execute"}"#,
//! ]);
//! ```

mod batch;
mod context;
mod markers;
mod parser;

pub use batch::MAX_EXECUTE_BODY;
pub use context::{ChatTurn, ConversationEvent, Role, WireError, from_messages, to_messages};
pub use parser::WireParser;

use serde::{Deserialize, Serialize};

/// One event of the wire protocol's event stream, serialised as `{"type": …, "content": …}`.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum WireEvent {
    /// A delta of reasoning text.
    Think {
        content: String,
        /// The block was still open when the stream ended.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        truncated: bool,
    },
    /// One tool call of a batch.
    Call { content: WireCall },
    /// The batch is complete: run the calls (the model then waits for `<results>`).
    Execute,
    /// A tool result (produced by the runtime, never by the parser).
    Result { content: serde_json::Value },
    /// A delta of user-facing text.
    Respond {
        content: String,
        /// The block was still open when the stream ended.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        truncated: bool,
    },
    /// The model signalled that the task is complete.
    End,
    /// Something the model wrote could not be used; says what is wrong.
    Error { content: String },
}

/// One tool call: `{"name": …, "args": {…}}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WireCall {
    pub name: String,
    #[serde(default)]
    pub args: serde_json::Map<String, serde_json::Value>,
}
