//! The script data model and its builder API.
//!
//! The same types are produced by parsing a YAML/JSON script (see [`super::parse`]) and by the
//! builder methods here, so tests of other crates can describe a conversation in a few lines
//! of Rust without a script file.

use std::path::Path;
use std::str::FromStr;

use serde::Deserialize;
use serde_json::Value;

use crate::{FinishReason, LlmError, TokenUsage};

/// Text chunk size (in characters) used when neither the step, the response nor the script
/// sets one: small enough that every answer arrives as many deltas and inline thought tags
/// are cut across chunk boundaries, which is what the streaming layers must cope with.
pub const DEFAULT_CHUNK_SIZE: usize = 4;

/// Scripts larger than this are refused: a script is a hand-written file, not a data set.
pub(crate) const MAX_SCRIPT_BYTES: usize = 16 * 1024 * 1024;

/// A whole script: turns tried in order, plus defaults for text streaming.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Script {
    pub(crate) turns: Vec<Turn>,
    pub(crate) chunk_size: Option<usize>,
    pub(crate) delay_ms: Option<u64>,
}

/// One scripted user turn: when it applies and the model responses it plays, one per model
/// call (response `i` answers the call that sees `i` assistant messages after the last user
/// message).
#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Turn {
    #[serde(default)]
    pub(crate) name: Option<String>,
    #[serde(default)]
    pub(crate) when: Matcher,
    pub(crate) responses: Vec<Response>,
}

/// Conditions on the conversation; all given conditions must hold. An empty matcher matches
/// every conversation.
#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Matcher {
    /// Holds when the last user message contains any of these words or phrases
    /// (case-insensitive, at word boundaries).
    #[serde(deserialize_with = "super::parse::one_or_many")]
    pub(crate) user_contains: Vec<String>,
    /// Holds when the presence of an arithmetic expression in the last user message equals
    /// this value.
    pub(crate) user_matches_calculation: Option<bool>,
    /// Holds when the request offers every one of these tools.
    #[serde(deserialize_with = "super::parse::one_or_many")]
    pub(crate) tool_available: Vec<String>,
    /// Holds when the request comes from one of these agents (the request's
    /// [`agent`](crate::ChatRequest::agent): the root agent's id or a sub-agent's name), so
    /// one script drives a parent and its sub-agents independently.
    #[serde(deserialize_with = "super::parse::one_or_many")]
    pub(crate) agent: Vec<String>,
}

/// One model response: steps played in order, plus streaming defaults for its text.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Response {
    pub(crate) steps: Vec<Step>,
    pub(crate) chunk_size: Option<usize>,
    pub(crate) delay_ms: Option<u64>,
}

/// One thing a response does.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Step {
    /// Text (templates expanded, inline thoughts split out) streamed in chunks, with an
    /// optional pause between chunks.
    Text {
        text: String,
        chunk_size: Option<usize>,
        delay_ms: Option<u64>,
    },
    /// A tool call; `id` defaults to a deterministic id derived from the conversation.
    ToolCall {
        id: Option<String>,
        name: String,
        arguments: ToolArguments,
    },
    /// `times` text deltas of `text` each, emitted verbatim (no thought splitting, no
    /// chunking, no delay) — for load tests that need millions of deltas.
    RepeatText { text: String, times: u64 },
    /// Token usage to report instead of the estimate.
    Usage(TokenUsage),
    /// Wait this long before the next step.
    Pause { ms: u64 },
    /// End the stream with an error (events before it are delivered first).
    Fail { message: String, retryable: bool },
    /// Finish with this reason instead of `stop`/`tool_calls`.
    Finish(FinishReason),
}

/// Arguments of a scripted tool call.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum ToolArguments {
    /// A JSON object; string values may contain templates.
    Json(Value),
    /// Raw argument text as a model would stream it; may be invalid JSON on purpose, in which
    /// case the call is reported as [`crate::LlmEvent::ToolCallInvalid`].
    Raw(String),
}

impl Script {
    /// An empty script: every call gets the echo fallback until turns are added.
    pub fn new() -> Self {
        Self::default()
    }

    /// The bundled default script (`scripts/default.yaml`), parsed.
    ///
    /// The bundled script is checked by the crate's tests; should it ever fail to parse, the
    /// error is logged and an empty script (echo fallback) is returned rather than panicking.
    pub fn builtin() -> Self {
        match super::DEFAULT_SCRIPT.parse() {
            Ok(script) => script,
            Err(err) => {
                tracing::error!(%err, "bundled scripted-model script is invalid; using echo fallback");
                Self::new()
            }
        }
    }

    /// Reads and parses a script file (YAML or JSON).
    pub fn from_path(path: impl AsRef<Path>) -> Result<Self, LlmError> {
        let path = path.as_ref();
        let bytes = std::fs::read(path).map_err(|err| {
            LlmError::Config(format!("cannot read script {}: {err}", path.display()))
        })?;
        let text = String::from_utf8(bytes).map_err(|err| {
            LlmError::Config(format!("script {} is not UTF-8: {err}", path.display()))
        })?;
        super::parse::parse_script(&text)
            .map_err(|msg| LlmError::Config(format!("invalid script {}: {msg}", path.display())))
    }

    /// Adds a turn after the existing ones (turns are tried in order).
    pub fn turn(mut self, turn: Turn) -> Self {
        self.turns.push(turn);
        self
    }

    /// Adds a response to the last turn, creating an unconditional turn when there is none.
    pub fn response(mut self, response: Response) -> Self {
        match self.turns.last_mut() {
            Some(turn) => turn.responses.push(response),
            None => self.turns.push(Turn::new().response(response)),
        }
        self
    }

    /// Default text chunk size in characters (at least 1).
    pub fn chunk_size(mut self, chars: usize) -> Self {
        self.chunk_size = Some(chars.max(1));
        self
    }

    /// Default pause between text chunks.
    pub fn delay_ms(mut self, ms: u64) -> Self {
        self.delay_ms = Some(ms);
        self
    }

    /// The turns, in the order they are tried.
    pub fn turns(&self) -> &[Turn] {
        &self.turns
    }
}

impl FromStr for Script {
    type Err = LlmError;

    /// Parses a script from YAML or JSON text.
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        super::parse::parse_script(text)
            .map_err(|msg| LlmError::Config(format!("invalid script: {msg}")))
    }
}

impl Turn {
    /// An unconditional turn with no responses yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// A name for logs.
    pub fn named(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// When this turn applies.
    pub fn when(mut self, matcher: Matcher) -> Self {
        self.when = matcher;
        self
    }

    /// Adds the response for the next model call of this turn.
    pub fn response(mut self, response: Response) -> Self {
        self.responses.push(response);
        self
    }

    pub fn name(&self) -> Option<&str> {
        self.name.as_deref()
    }

    pub fn responses(&self) -> &[Response] {
        &self.responses
    }
}

impl Matcher {
    /// Matches every conversation.
    pub fn any() -> Self {
        Self::default()
    }

    /// Also require the last user message to contain `phrase` (any of the phrases given by
    /// repeated calls), case-insensitively at word boundaries.
    pub fn user_contains(mut self, phrase: impl Into<String>) -> Self {
        self.user_contains.push(phrase.into());
        self
    }

    /// Also require that the last user message does (or does not) contain an arithmetic
    /// expression such as `6*7`.
    pub fn user_matches_calculation(mut self, expected: bool) -> Self {
        self.user_matches_calculation = Some(expected);
        self
    }

    /// Also require the request to offer tool `name`.
    pub fn tool_available(mut self, name: impl Into<String>) -> Self {
        self.tool_available.push(name.into());
        self
    }

    /// Also require the request to come from agent `name` (any of the names given by
    /// repeated calls): a sub-agent's name, or the root agent's id.
    pub fn agent(mut self, name: impl Into<String>) -> Self {
        self.agent.push(name.into());
        self
    }
}

impl Response {
    pub fn new() -> Self {
        Self::default()
    }

    /// A response that only says `text`.
    pub fn text_only(text: impl Into<String>) -> Self {
        Self::new().text(text)
    }

    /// Streams `text` (templates expanded, inline thought tags split out).
    pub fn text(self, text: impl Into<String>) -> Self {
        self.step(Step::Text {
            text: text.into(),
            chunk_size: None,
            delay_ms: None,
        })
    }

    /// Streams `text` in chunks of `chunk_size` characters, pausing `delay_ms` between them.
    pub fn text_chunked(self, text: impl Into<String>, chunk_size: usize, delay_ms: u64) -> Self {
        self.step(Step::Text {
            text: text.into(),
            chunk_size: Some(chunk_size.max(1)),
            delay_ms: Some(delay_ms),
        })
    }

    /// Streams an inline `<thinking>` thought.
    pub fn thought(self, text: impl AsRef<str>) -> Self {
        self.text(format!("<thinking>{}</thinking>", text.as_ref()))
    }

    /// Calls tool `name` with `arguments` (a JSON object; string values may use templates).
    pub fn tool_call(self, name: impl Into<String>, arguments: Value) -> Self {
        self.step(Step::ToolCall {
            id: None,
            name: name.into(),
            arguments: ToolArguments::Json(arguments),
        })
    }

    /// Calls tool `name` with a fixed call id.
    pub fn tool_call_with_id(
        self,
        id: impl Into<String>,
        name: impl Into<String>,
        arguments: Value,
    ) -> Self {
        self.step(Step::ToolCall {
            id: Some(id.into()),
            name: name.into(),
            arguments: ToolArguments::Json(arguments),
        })
    }

    /// Calls tool `name` with raw argument text, which may be invalid JSON on purpose.
    pub fn raw_tool_call(self, name: impl Into<String>, raw_arguments: impl Into<String>) -> Self {
        self.step(Step::ToolCall {
            id: None,
            name: name.into(),
            arguments: ToolArguments::Raw(raw_arguments.into()),
        })
    }

    /// Emits `times` text deltas of `text`, verbatim and without pauses.
    pub fn repeat_text(self, text: impl Into<String>, times: u64) -> Self {
        self.step(Step::RepeatText {
            text: text.into(),
            times,
        })
    }

    /// Reports this usage instead of the estimate.
    pub fn usage(self, usage: TokenUsage) -> Self {
        self.step(Step::Usage(usage))
    }

    /// Waits `ms` milliseconds before the next step.
    pub fn pause_ms(self, ms: u64) -> Self {
        self.step(Step::Pause { ms })
    }

    /// Ends the stream with a non-retryable provider error.
    pub fn fail(self, message: impl Into<String>) -> Self {
        self.step(Step::Fail {
            message: message.into(),
            retryable: false,
        })
    }

    /// Ends the stream with a retryable provider error.
    pub fn fail_retryable(self, message: impl Into<String>) -> Self {
        self.step(Step::Fail {
            message: message.into(),
            retryable: true,
        })
    }

    /// Finishes with `reason` instead of `stop`/`tool_calls`.
    pub fn finish(self, reason: FinishReason) -> Self {
        self.step(Step::Finish(reason))
    }

    /// Default chunk size for this response's text (at least 1).
    pub fn chunk_size(mut self, chars: usize) -> Self {
        self.chunk_size = Some(chars.max(1));
        self
    }

    /// Default pause between this response's text chunks.
    pub fn delay_ms(mut self, ms: u64) -> Self {
        self.delay_ms = Some(ms);
        self
    }

    /// Appends any step.
    pub fn step(mut self, step: Step) -> Self {
        self.steps.push(step);
        self
    }

    pub fn steps(&self) -> &[Step] {
        &self.steps
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn response_on_empty_script_creates_an_unconditional_turn() {
        let script = Script::new()
            .response(Response::text_only("a"))
            .response(Response::text_only("b"));
        assert_eq!(script.turns().len(), 1);
        assert_eq!(script.turns()[0].when, Matcher::any());
        assert_eq!(script.turns()[0].responses().len(), 2);
    }

    #[test]
    fn response_appends_to_the_last_turn() {
        let script = Script::new()
            .turn(
                Turn::new()
                    .named("first")
                    .when(Matcher::any().user_contains("x")),
            )
            .response(Response::text_only("a"));
        assert_eq!(script.turns()[0].name(), Some("first"));
        assert_eq!(script.turns()[0].responses().len(), 1);
    }

    #[test]
    fn chunk_sizes_are_at_least_one() {
        let script = Script::new().chunk_size(0);
        assert_eq!(script.chunk_size, Some(1));
        let response = Response::new().chunk_size(0).text_chunked("x", 0, 0);
        assert_eq!(response.chunk_size, Some(1));
        assert_eq!(
            response.steps()[0],
            Step::Text {
                text: "x".into(),
                chunk_size: Some(1),
                delay_ms: Some(0)
            }
        );
    }

    #[test]
    fn thought_wraps_text_in_thinking_tags() {
        let response = Response::new().thought("hmm");
        assert_eq!(
            response.steps()[0],
            Step::Text {
                text: "<thinking>hmm</thinking>".into(),
                chunk_size: None,
                delay_ms: None
            }
        );
    }
}
