//! Context assembly: persisted conversation events to chat turns and back.
//!
//! Only conversation is persisted (user, think, call, result, respond); control flow
//! (execute, end, error) is not. To send history to a model, events are rebuilt into turns
//! that use the wire protocol's own markers, so the model sees the format it must write.

use super::markers::contains_marker;
use super::parser::{Machine, Sink, TextKind};
use super::{WireCall, WireEvent};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A persisted conversation event (`{"type": …, "content": …}`).
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", content = "content", rename_all = "lowercase")]
pub enum ConversationEvent {
    /// What the user said.
    User(String),
    /// One whole reasoning block.
    Think(String),
    /// One tool call; consecutive calls form one batch.
    Call(WireCall),
    /// One tool result, shaped `{"tool": name, "status": "success"|"failure", "content": …}`.
    Result(Value),
    /// One whole block of user-facing text.
    Respond(String),
}

/// The chat roles the protocol targets. Tool results travel as user turns, so no tool role
/// is needed (that is the point of a text protocol).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    System,
    User,
    Assistant,
}

/// One chat message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChatTurn {
    pub role: Role,
    pub content: String,
}

/// A chat history that cannot be turned back into conversation events.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    /// An assistant turn holds something the parser rejects (e.g. a malformed batch).
    #[error("assistant turn {turn}: {message}")]
    InvalidAssistantTurn { turn: usize, message: String },
    /// A user turn is a `<results>` block whose body is not a JSON array.
    #[error("user turn {turn}: invalid <results> block: {message}")]
    InvalidResults { turn: usize, message: String },
}

/// Builds chat turns from persisted events.
///
/// Consecutive think/call/respond events form one assistant turn: think blocks become
/// `<think>…</think>`, the calls of one batch (consecutive calls) one `<execute>\n[…]\n</execute>`,
/// respond text is written bare when that parses back unchanged and as `<respond>…</respond>`
/// otherwise; parts are separated by a blank line. Consecutive results become one user turn
/// `<results>\n[…]\n</results>`. Order is kept, so calls and their results stay adjacent.
///
/// Round trip: [`from_messages`] gives the events back, except for content the protocol
/// cannot carry: think text containing `</think>`, respond text containing `</respond>`,
/// `<execute>` or `<end>`, and user text that is itself a `<results>` block.
///
/// ```
/// use looopy_stream::wire::{ConversationEvent, Role, from_messages, to_messages};
/// use serde_json::json;
///
/// let events = vec![
///     ConversationEvent::User("What's in main.py?".into()),
///     ConversationEvent::Call(serde_json::from_value(json!({"name": "read", "args": {"file": "main.py"}}))?),
///     ConversationEvent::Result(json!({"tool": "read", "status": "success", "content": "print(1)"})),
///     ConversationEvent::Respond("It prints 1.".into()),
/// ];
/// let turns = to_messages(&events);
/// assert_eq!(turns[1].role, Role::Assistant);
/// assert_eq!(turns[1].content, "<execute>\n[{\"name\":\"read\",\"args\":{\"file\":\"main.py\"}}]\n</execute>");
/// assert!(turns[2].content.starts_with("<results>\n["));
/// assert_eq!(from_messages(&turns)?, events);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn to_messages(events: &[ConversationEvent]) -> Vec<ChatTurn> {
    let mut turns = Vec::new();
    let mut assistant = AssistantTurn::default();
    let mut results: Vec<&Value> = Vec::new();
    for event in events {
        match event {
            ConversationEvent::User(text) => {
                assistant.flush(&mut turns);
                flush_results(&mut results, &mut turns);
                turns.push(ChatTurn {
                    role: Role::User,
                    content: text.clone(),
                });
            }
            ConversationEvent::Result(value) => {
                assistant.flush(&mut turns);
                results.push(value);
            }
            ConversationEvent::Think(text) => {
                flush_results(&mut results, &mut turns);
                assistant.think(text);
            }
            ConversationEvent::Respond(text) => {
                flush_results(&mut results, &mut turns);
                assistant.respond(text);
            }
            ConversationEvent::Call(call) => {
                flush_results(&mut results, &mut turns);
                assistant.calls.push(call);
            }
        }
    }
    assistant.flush(&mut turns);
    flush_results(&mut results, &mut turns);
    turns
}

/// The assistant turn being assembled.
#[derive(Default)]
struct AssistantTurn<'a> {
    parts: Vec<String>,
    calls: Vec<&'a WireCall>,
    last_part_bare: bool,
}

impl AssistantTurn<'_> {
    fn think(&mut self, text: &str) {
        self.close_batch();
        self.parts.push(format!("<think>{text}</think>"));
        self.last_part_bare = false;
    }

    fn respond(&mut self, text: &str) {
        self.close_batch();
        // Bare text is read back trimmed and ends at a marker, and two bare parts would merge.
        let bare = !text.is_empty()
            && text.trim() == text
            && !contains_marker(text)
            && !self.last_part_bare;
        if bare {
            self.parts.push(text.to_owned());
        } else {
            self.parts.push(format!("<respond>{text}</respond>"));
        }
        self.last_part_bare = bare;
    }

    fn close_batch(&mut self) {
        if self.calls.is_empty() {
            return;
        }
        let json = serde_json::to_string(&self.calls).unwrap_or_else(|_| "[]".into());
        self.parts.push(format!("<execute>\n{json}\n</execute>"));
        self.calls.clear();
        self.last_part_bare = false;
    }

    fn flush(&mut self, turns: &mut Vec<ChatTurn>) {
        self.close_batch();
        if !self.parts.is_empty() {
            turns.push(ChatTurn {
                role: Role::Assistant,
                content: self.parts.join("\n\n"),
            });
        }
        self.parts.clear();
        self.last_part_bare = false;
    }
}

fn flush_results(results: &mut Vec<&Value>, turns: &mut Vec<ChatTurn>) {
    if results.is_empty() {
        return;
    }
    let json = serde_json::to_string(&results).unwrap_or_else(|_| "[]".into());
    turns.push(ChatTurn {
        role: Role::User,
        content: format!("<results>\n{json}\n</results>"),
    });
    results.clear();
}

/// Rebuilds conversation events from chat turns (the reverse of [`to_messages`]).
///
/// System turns are skipped (they are configuration, not conversation). A user turn that is
/// a `<results>` block yields one result per array element; any other user turn is user
/// text. Assistant turns go through the wire parser, reading past `</execute>` (history may
/// hold anything the turn held) and yielding one event per block; `execute` and `end` are
/// control flow and yield nothing. Unlike the live parser, which keeps every byte of text,
/// bare text here is trimmed and whitespace-only bare text between blocks yields nothing:
/// that whitespace is the layout [`to_messages`] puts between parts. Malformed batches or
/// results are errors, not dropped.
pub fn from_messages(turns: &[ChatTurn]) -> Result<Vec<ConversationEvent>, WireError> {
    let mut events = Vec::new();
    for (turn, message) in turns.iter().enumerate() {
        match message.role {
            Role::System => {}
            Role::User => match results_body(&message.content) {
                Some(body) => {
                    let items: Vec<Value> =
                        serde_json::from_str(body).map_err(|error| WireError::InvalidResults {
                            turn,
                            message: error.to_string(),
                        })?;
                    events.extend(items.into_iter().map(ConversationEvent::Result));
                }
                None => events.push(ConversationEvent::User(message.content.clone())),
            },
            Role::Assistant => {
                let mut sink = HistorySink {
                    events: &mut events,
                    text: String::new(),
                    error: None,
                };
                let mut machine = Machine::new(false);
                machine.feed(&message.content, &mut sink);
                machine.finish(&mut sink);
                if let Some(message) = sink.error {
                    return Err(WireError::InvalidAssistantTurn { turn, message });
                }
            }
        }
    }
    Ok(events)
}

/// The JSON between `<results>` and `</results>` if the whole turn is one results block.
fn results_body(content: &str) -> Option<&str> {
    content
        .trim()
        .strip_prefix("<results>")?
        .strip_suffix("</results>")
}

/// Collects whole blocks as conversation events.
struct HistorySink<'a> {
    events: &'a mut Vec<ConversationEvent>,
    text: String,
    error: Option<String>,
}

impl Sink for HistorySink<'_> {
    fn text(&mut self, _kind: TextKind, text: &str) {
        self.text.push_str(text);
    }

    fn close(&mut self, kind: TextKind, _truncated: bool) {
        let text = std::mem::take(&mut self.text);
        self.events.push(match kind {
            TextKind::Think => ConversationEvent::Think(text),
            TextKind::Respond => ConversationEvent::Respond(text),
            // `to_messages` writes bare text only when it is already trimmed and separates
            // parts with blank lines, so whitespace around bare text is its layout.
            TextKind::Bare => match text.trim() {
                "" => return,
                trimmed if trimmed.len() == text.len() => ConversationEvent::Respond(text),
                trimmed => ConversationEvent::Respond(trimmed.to_owned()),
            },
        });
    }

    fn event(&mut self, event: WireEvent) {
        match event {
            WireEvent::Call { content } => self.events.push(ConversationEvent::Call(content)),
            WireEvent::Error { content } => {
                self.error.get_or_insert(content);
            }
            _ => {}
        }
    }
}
