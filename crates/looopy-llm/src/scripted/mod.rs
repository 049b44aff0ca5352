//! The built-in **scripted model**: a deterministic [`Provider`] that replays a script, so
//! every command runs offline and every layer above the provider can be tested against a
//! stream that behaves like a real model's (chunked text, inline thoughts, tool calls, usage,
//! pauses, failures).
//!
//! # Script format
//!
//! A script is YAML or JSON (JSON is valid YAML; text starting with `{`/`[` is tried as JSON
//! first for precise error positions). The top level is a list of **turns**, or a mapping
//! `{turns: [...], chunk_size: N, delay_ms: N}` that also sets streaming defaults.
//!
//! ```yaml
//! - name: calculator                    # optional, for logs
//!   when:                               # optional; all given conditions must hold
//!     user_matches_calculation: true    # last user message has an expression like 6*7
//!     tool_available: calculator        # the request offers this tool (string or list)
//!     # agent: researcher               # the calling agent (ChatRequest::agent): a
//!                                       # sub-agent's name or the root agent's id
//!     # user_contains: [time, clock]    # any of these words/phrases (case-insensitive,
//!                                       # whole words) in the last user message
//!   responses:                          # one per model call within the user turn
//!     - steps:
//!         - text: "<thinking>I should use the calculator.</thinking>"
//!         - tool_call: {name: calculator, arguments: {expression: "{{calculation}}"}}
//!     - "[scripted model] The result is {{last_tool_result}}."
//! ```
//!
//! **Which turn and response play.** The first turn whose `when` holds for the request is
//! chosen. Response `i` of that turn answers the call that sees `i` assistant messages after
//! the last user message: the first call after the user spoke gets response 0, the call after
//! the tool results gets response 1, and so on. The choice depends only on the request's
//! history, so a conversation resumed after a restart continues deterministically. When no
//! turn matches, or the turn has no response left, the model echoes the last user message
//! (`[scripted model] You said: …`), which ends any tool loop. The echo repeats the user's
//! words literally (markup in them is not split into thoughts: it is what the user said,
//! not what a model thought), so however large or tag-laden the message, the echo costs
//! at most [`MAX_TEXT_CHUNKS`] deltas.
//!
//! **Responses** are a list of steps, a bare string (one text step), or a mapping
//! `{steps: [...], chunk_size: N, delay_ms: N}`.
//!
//! **Steps** (a bare string is a `text` step):
//!
//! | step | effect |
//! |---|---|
//! | `text: "…"` (+ `chunk_size`, `delay_ms`) | streamed in chunks of `chunk_size` characters (default 4; larger for long texts, so there are at most [`MAX_TEXT_CHUNKS`]) with `delay_ms` between chunks (default 0); inline thoughts (`<thinking>…</thinking>`, attribute and self-closing forms) become reasoning events via the same thought splitter the real providers use |
//! | `tool_call: {name, arguments, id}` | `arguments` is a mapping, or a string sent verbatim (invalid JSON gives `ToolCallInvalid`); `id` defaults to `call_scripted_<messages>_<index>`; a value `{$repeat: {text, times}}` in the mapping is the string `text` repeated `times` times (see below) |
//! | `repeat_text: {text, times}` | `times` text deltas of exactly `text`, no splitting, no pauses (load tests) |
//! | `usage: {input_tokens, output_tokens, total_tokens}` | reported instead of the estimate (characters / 4) emitted otherwise |
//! | `delay_ms: N` (alone) | pause before the next step |
//! | `fail: "message"` or `{message, retryable}` | the stream ends with [`LlmError::Provider`] of kind `scripted_failure` |
//! | `finish: length` | finish reason instead of `tool_calls` (when the response called tools) or `stop` |
//!
//! **Templates** in text and tool arguments: `{{user}}` (last user message),
//! `{{last_tool_result}}` (content of the most recent tool message), `{{calculation}}` (the
//! first arithmetic expression in the last user message). A missing value is the empty
//! string. Values are inserted once and never expanded again; an unknown `{{name}}` is a load
//! error.
//!
//! **Large arguments.** Inside a `tool_call`'s `arguments` mapping, a value that is a
//! mapping with the single key `$repeat` — `content: {$repeat: {text: "ab\n", times: 100000}}`
//! — becomes the string `text` repeated `times` times when the call plays (its `text` is
//! literal: no templates). It lets a script of a few lines make a tool write a file of many
//! megabytes, so end-to-end tests of chunked artifacts need no real model. All `$repeat`
//! values of a script together may expand to at most [`MAX_REPEAT_BYTES`] (256 MiB); a
//! script over that, or a malformed `$repeat`, is a load error. The expanded arguments are
//! streamed like any others (at most [`MAX_TEXT_CHUNKS`] deltas).
//!
//! **Streaming details.** One thought splitter serves the whole response; it is flushed before
//! each tool call, before `repeat_text` and at the end, so a thought left open there is closed
//! with `truncated: true`. A response splits out at most [`MAX_THOUGHTS_PER_RESPONSE`]
//! thoughts (user text put in by a template cannot multiply its events); the rest of its
//! text is delivered as is. Thought ids without an `id` attribute are
//! `thought-<messages>-<n>` (unique within a conversation, stable across runs). Unless a
//! `usage` step says otherwise, an estimated [`crate::LlmEvent::Usage`] precedes `Finish`.
//! Nothing is computed until the stream is first polled; pauses are `tokio::time::sleep`, so
//! dropping the stream stops playback at once.
//!
//! **From Rust**, the same script is built with [`Script`], [`Turn`], [`Matcher`] and
//! [`Response`], or with [`ScriptedProvider::from_responses`] for one unconditional turn.
//!
//! # Example
//!
//! ```
//! use futures::StreamExt;
//! use looopy_llm::scripted::{Response, ScriptedProvider};
//! use looopy_llm::{ChatRequest, LlmEvent, Provider};
//! use looopy_protocol::Message;
//!
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! let provider = ScriptedProvider::from_responses(vec![
//!     Response::new().thought("plan").text("Hello, {{user}}!"),
//! ]);
//! let request = ChatRequest { messages: vec![Message::user("Ada")], ..Default::default() };
//! let mut text = String::new();
//! let mut stream = provider.stream(request);
//! while let Some(event) = stream.next().await {
//!     if let LlmEvent::TextDelta(delta) = event.unwrap() {
//!         text.push_str(&delta);
//!     }
//! }
//! assert_eq!(text, "Hello, Ada!");
//! # });
//! ```

mod context;
mod parse;
mod player;
mod repeat;
mod script;
mod step_parse;

use std::path::Path;
use std::str::FromStr;
use std::sync::Arc;

pub use player::{MAX_TEXT_CHUNKS, MAX_THOUGHTS_PER_RESPONSE, SCRIPTED_FAILURE_KIND};
pub use repeat::MAX_REPEAT_BYTES;
pub use script::{DEFAULT_CHUNK_SIZE, Matcher, Response, Script, Step, ToolArguments, Turn};

use context::Conversation;
use player::Player;

use crate::{ChatRequest, LlmError, LlmStream, Provider};

/// The bundled default script (`scripts/default.yaml`).
pub(crate) const DEFAULT_SCRIPT: &str = include_str!("../../scripts/default.yaml");

/// A deterministic, offline [`Provider`] that replays a [`Script`].
#[derive(Debug, Clone)]
pub struct ScriptedProvider {
    script: Arc<Script>,
    model: String,
}

impl ScriptedProvider {
    /// The provider name used in logs and events.
    pub const NAME: &'static str = "scripted";
    /// The default model name, so transcripts show plainly that no real LLM answered.
    pub const DEFAULT_MODEL: &'static str = "looopy-scripted";
    /// A human-readable label for banners and `--help`.
    pub const LABEL: &'static str =
        "built-in scripted model (offline, deterministic — not a real LLM)";

    pub fn new(script: Script) -> Self {
        Self {
            script: Arc::new(script),
            model: Self::DEFAULT_MODEL.to_string(),
        }
    }

    /// The provider running the bundled default script.
    pub fn builtin() -> Self {
        Self::new(Script::builtin())
    }

    /// The bundled default script's source text (YAML), e.g. to print as a starting point.
    pub fn default_script() -> &'static str {
        DEFAULT_SCRIPT
    }

    /// Reads a YAML or JSON script file; errors are [`LlmError::Config`] naming the problem.
    pub fn from_path(path: impl AsRef<Path>) -> Result<Self, LlmError> {
        Script::from_path(path).map(Self::new)
    }

    /// One unconditional turn whose responses answer the 1st, 2nd, … call after each user
    /// message.
    pub fn from_responses(responses: Vec<Response>) -> Self {
        Self::new(responses.into_iter().fold(Script::new(), Script::response))
    }

    /// Reports `model` as the default model name instead of `looopy-scripted`.
    pub fn with_model(mut self, model: impl Into<String>) -> Self {
        self.model = model.into();
        self
    }

    pub fn script(&self) -> &Script {
        &self.script
    }

    /// The response for `conversation`, or the echo fallback (`true` when echoing).
    fn select(&self, conversation: &Conversation) -> (Response, bool) {
        let index = conversation.response_index;
        let chosen = self
            .script
            .turns
            .iter()
            .enumerate()
            .find(|(_, t)| conversation.matches(&t.when));
        match chosen {
            Some((t, turn)) => match turn.responses.get(index) {
                Some(response) => {
                    tracing::debug!(
                        turn = t,
                        name = turn.name.as_deref(),
                        response = index,
                        "scripted model: playing"
                    );
                    (response.clone(), false)
                }
                None => {
                    tracing::debug!(
                        turn = t,
                        name = turn.name.as_deref(),
                        response = index,
                        "scripted model: turn has no response left; echoing"
                    );
                    (echo_response(), true)
                }
            },
            None => {
                tracing::debug!(response = index, "scripted model: no turn matches; echoing");
                (echo_response(), true)
            }
        }
    }
}

impl Default for ScriptedProvider {
    fn default() -> Self {
        Self::builtin()
    }
}

impl FromStr for ScriptedProvider {
    type Err = LlmError;

    /// Parses a YAML or JSON script.
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        text.parse().map(Self::new)
    }
}

/// The answer when the script has nothing for this call.
fn echo_response() -> Response {
    Response::text_only("[scripted model] You said: {{user}}")
}

enum PlayState {
    NotStarted(ScriptedProvider, Box<ChatRequest>),
    Playing(Box<Player>),
}

impl Provider for ScriptedProvider {
    fn name(&self) -> &str {
        Self::NAME
    }

    fn default_model(&self) -> &str {
        &self.model
    }

    /// Nothing is computed until the first poll; dropping the stream stops playback.
    fn stream(&self, request: ChatRequest) -> LlmStream {
        let start = PlayState::NotStarted(self.clone(), Box::new(request));
        Box::pin(futures::stream::unfold(Some(start), |state| async move {
            let mut player = match state? {
                PlayState::Playing(player) => player,
                PlayState::NotStarted(provider, request) => {
                    let conversation = Conversation::from_request(&request);
                    let (response, echo) = provider.select(&conversation);
                    let player = Player::new(&provider.script, response, conversation);
                    Box::new(if echo { player.literal() } else { player })
                }
            };
            let item = player.next_event().await?;
            let next = item.is_ok().then_some(PlayState::Playing(player));
            Some((item, next))
        }))
    }
}

#[cfg(test)]
mod tests {
    use futures::StreamExt;
    use looopy_protocol::Message;

    use super::*;
    use crate::{FinishReason, LlmEvent};

    async fn collect(provider: &ScriptedProvider, messages: Vec<Message>) -> Vec<LlmEvent> {
        let request = ChatRequest {
            messages,
            ..ChatRequest::default()
        };
        provider.stream(request).map(|e| e.unwrap()).collect().await
    }

    fn text_of(events: &[LlmEvent]) -> String {
        events
            .iter()
            .filter_map(|e| match e {
                LlmEvent::TextDelta(t) => Some(t.as_str()),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn the_bundled_script_parses() {
        let script: Script = DEFAULT_SCRIPT.parse().unwrap();
        assert!(script.turns().len() >= 4);
        assert_eq!(ScriptedProvider::builtin().script(), &script);
    }

    #[test]
    fn provider_is_clearly_labelled() {
        let provider = ScriptedProvider::builtin();
        assert_eq!(provider.name(), "scripted");
        assert_eq!(provider.default_model(), "looopy-scripted");
        assert_eq!(provider.with_model("m").default_model(), "m");
    }

    #[tokio::test]
    async fn responses_follow_the_position_in_the_user_turn() {
        let provider = ScriptedProvider::from_responses(vec![
            Response::text_only("first"),
            Response::text_only("second"),
        ]);
        let events = collect(&provider, vec![Message::user("hi")]).await;
        assert_eq!(text_of(&events), "first");
        let events = collect(
            &provider,
            vec![Message::user("hi"), Message::assistant("first")],
        )
        .await;
        assert_eq!(text_of(&events), "second");
        let history = vec![
            Message::user("hi"),
            Message::assistant("first"),
            Message::assistant("second"),
        ];
        assert_eq!(
            text_of(&collect(&provider, history).await),
            "[scripted model] You said: hi"
        );
        let next_turn = vec![
            Message::user("hi"),
            Message::assistant("x"),
            Message::user("again"),
        ];
        assert_eq!(text_of(&collect(&provider, next_turn).await), "first");
    }

    #[tokio::test]
    async fn unmatched_requests_echo_and_stop() {
        let provider = ScriptedProvider::new(
            Script::new().turn(
                Turn::new()
                    .when(Matcher::any().user_contains("x"))
                    .response(Response::text_only("X")),
            ),
        );
        let events = collect(&provider, vec![Message::user("hello there")]).await;
        assert_eq!(text_of(&events), "[scripted model] You said: hello there");
        assert_eq!(
            events.last(),
            Some(&LlmEvent::Finish {
                reason: Some(FinishReason::Stop)
            })
        );
    }

    #[tokio::test]
    async fn a_huge_message_is_echoed_whole_in_few_deltas_and_literally() {
        // 1 MiB of text laced with thought markup: echoed as the user wrote it.
        let message = "<think>not a thought</think> a < b, ".repeat((1 << 20) / 36 + 1);
        let message = &message[..1 << 20];
        let events = collect(
            &ScriptedProvider::new(Script::new()),
            vec![Message::user(message)],
        )
        .await;
        assert!(events.len() < 2_000, "{} events", events.len());
        assert!(
            events.len() <= MAX_TEXT_CHUNKS + 2,
            "{} events",
            events.len()
        );
        assert_eq!(
            text_of(&events),
            format!("[scripted model] You said: {message}")
        );
        assert!(
            !events.iter().any(|e| matches!(
                e,
                LlmEvent::ReasoningDelta { .. } | LlmEvent::ReasoningEnd(_)
            )),
            "the echo must not turn the user's markup into thoughts"
        );
    }

    #[tokio::test]
    async fn user_markup_in_a_scripted_response_cannot_multiply_its_events() {
        // The built-in script quotes the user inside a thought and in its answer; a
        // message that closes that thought and then opens thousands of its own must not
        // become one event per tag.
        let bomb = format!("</thinking>{}", "<think/>".repeat(131_000));
        let events = collect(&ScriptedProvider::builtin(), vec![Message::user(bomb)]).await;
        assert!(events.len() < 2_000, "{} events", events.len());
        let thoughts = events
            .iter()
            .filter(|e| matches!(e, LlmEvent::ReasoningEnd(_)))
            .count();
        assert!(
            thoughts <= MAX_THOUGHTS_PER_RESPONSE + 600,
            "{thoughts} thoughts"
        );
        assert!(text_of(&events).contains("<think/><think/>"));
    }

    #[tokio::test]
    async fn long_scripted_texts_and_arguments_are_cut_into_bounded_chunks() {
        let long = "x".repeat(100_000);
        let provider = ScriptedProvider::from_responses(vec![
            Response::new()
                .text("{{user}}")
                .tool_call("echo", serde_json::json!({"text": "{{user}}"})),
        ]);
        let events = collect(&provider, vec![Message::user(long.clone())]).await;
        let texts = events
            .iter()
            .filter(|e| matches!(e, LlmEvent::TextDelta(_)))
            .count();
        let args = events
            .iter()
            .filter(|e| matches!(e, LlmEvent::ToolCallDelta { .. }))
            .count();
        assert!(
            texts <= MAX_TEXT_CHUNKS && args <= MAX_TEXT_CHUNKS,
            "{texts} {args}"
        );
        assert_eq!(text_of(&events), long);
        // Short texts keep their small chunks (what the streaming layers are tested with).
        let short = collect(&provider, vec![Message::user("abcdefgh")]).await;
        assert_eq!(
            short
                .iter()
                .filter(|e| matches!(e, LlmEvent::TextDelta(_)))
                .count(),
            2
        );
    }

    #[tokio::test]
    async fn nothing_happens_before_the_first_poll() {
        // A failing response would yield its error on the first poll; building and dropping
        // the stream without polling must be harmless.
        let provider = ScriptedProvider::from_responses(vec![Response::new().fail("boom")]);
        let stream = provider.stream(ChatRequest::default());
        drop(stream);
        let mut stream = provider.stream(ChatRequest::default());
        assert!(matches!(
            stream.next().await,
            Some(Err(LlmError::Provider { .. }))
        ));
        assert!(stream.next().await.is_none());
    }
}
