//! The resume state of a turn paused for input, kept in `TaskRecord.pending` so the turn
//! can continue in another process.
//!
//! The batch that paused is *not* in the stored history yet: its assistant message and
//! results are held here until the batch is complete, so the stored conversation is always
//! valid (every tool call followed by its result).

use looopy_protocol::{Message, ReasoningBlock, ToolCall};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::tool::InputRequest;
use crate::tool::exec::{CallSpec, ToolOutcome};

/// The version of this format; a record with another version is refused, not misread.
pub(crate) const PENDING_VERSION: u32 = 1;

/// Everything needed to resume a paused turn.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct PendingTurn {
    pub(crate) version: u32,
    pub(crate) counters: Counters,
    /// The assistant message of the paused batch (its text, reasoning and calls).
    pub(crate) content: String,
    #[serde(default)]
    pub(crate) reasoning: Vec<ReasoningBlock>,
    pub(crate) calls: Vec<PendingCall>,
    /// Indices into `calls` still waiting for input, in call order; the first is the one
    /// `input` asks about.
    pub(crate) paused: Vec<usize>,
    pub(crate) input: PendingInput,
    /// Set when the paused turn is a sub-agent's child task: which sub-agent, and its own
    /// conversation (not in the context's history).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) child: Option<crate::subagent::ChildState>,
    /// The turn's client-side tools ([`crate::tool::ClientTools`]), offered again when it
    /// resumes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) client_tools: Vec<looopy_llm::ToolDefinition>,
}

/// Running totals of a turn, carried across a pause.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Counters {
    /// Model calls made so far.
    pub(crate) iteration: u32,
    /// Next `content-delta` index.
    pub(crate) content_index: u64,
    /// Next `thought-stream` index.
    pub(crate) thought_index: u64,
    pub(crate) tokens_used: u64,
    /// Events and bytes of event text the turn has produced, for its size limits
    /// (absent in records written before the limits existed: counted from the resume on).
    #[serde(default)]
    pub(crate) events: u64,
    #[serde(default)]
    pub(crate) bytes: u64,
}

/// One call of the paused batch and, once known, its result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct PendingCall {
    pub(crate) call: ToolCall,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) invalid: Option<String>,
    /// The tool message answering the call; `None` while it waits for input.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) result: Option<Message>,
    /// A sub-agent call waiting for its paused child task (this id), not for input.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) subtask: Option<String>,
}

/// The open question of the pause: an input request or, with `auth` set, an
/// authorization request (then `input_id` is its `authId`, and `request` only carries
/// its message).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct PendingInput {
    pub(crate) input_id: String,
    pub(crate) request: InputRequest,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) auth: Option<PendingAuth>,
}

/// An open authorization request: what the tool asked for, whose credential it will be,
/// and — for an OAuth flow the agent runs — what the callback must match.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct PendingAuth {
    pub(crate) request: looopy_auth::AuthRequest,
    /// The principal the credential is kept for (the context's owner).
    #[serde(default)]
    pub(crate) principal: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) oauth: Option<OAuthPending>,
}

/// The half of an OAuth authorization-code flow kept server-side: the `state` the
/// callback must bring back, the PKCE verifier, and the redirect URI the code is bound to.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct OAuthPending {
    pub(crate) state: String,
    pub(crate) verifier: looopy_auth::Secret,
    pub(crate) redirect_uri: String,
}

/// What a paused call asked for.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Ask {
    Input(InputRequest),
    Auth(looopy_auth::AuthRequest),
}

impl PendingTurn {
    /// Reads the saved state; `None` if it is missing or of another version.
    pub(crate) fn from_value(value: &Value) -> Option<Self> {
        let mut pending: Self = serde_json::from_value(value.clone()).ok()?;
        if pending.version != PENDING_VERSION {
            return None;
        }
        // Stored data is outside input: indices that point nowhere are dropped.
        let calls = pending.calls.len();
        pending.paused.retain(|&i| i < calls);
        Some(pending)
    }

    pub(crate) fn to_value(&self) -> Value {
        // Plain data with string keys: serialization cannot fail.
        serde_json::to_value(self).unwrap_or(Value::Null)
    }

    /// The paused call that `input` is about.
    pub(crate) fn current(&self) -> Option<&PendingCall> {
        self.paused
            .iter()
            .filter_map(|&i| self.calls.get(i))
            .find(|c| c.subtask.is_none())
    }

    /// Whether a paused call waits for input (not only for child tasks).
    pub(crate) fn needs_input(&self) -> bool {
        self.current().is_some()
    }

    /// The child tasks paused calls wait for, in call order.
    pub(crate) fn subtasks(&self) -> impl Iterator<Item = &str> {
        self.paused
            .iter()
            .filter_map(|&i| self.calls.get(i))
            .filter_map(|c| c.subtask.as_deref())
    }

    /// The call as the tool runner takes it.
    pub(crate) fn spec(call: &PendingCall) -> CallSpec {
        CallSpec {
            call: call.call.clone(),
            invalid: call.invalid.clone(),
            shown_arguments: call.call.arguments.clone(),
        }
    }

    /// The assistant message and the results, with `outcome` standing in for calls that
    /// are still waiting (used when the pause ends by cancellation).
    pub(crate) fn messages_with(&self, outcome: &ToolOutcome) -> Vec<Message> {
        let calls = self.calls.iter().map(|c| c.call.clone()).collect();
        let mut assistant = Message::assistant_with_tools(self.content.clone(), calls);
        assistant.reasoning = self.reasoning.clone();
        let mut messages = vec![assistant];
        for call in &self.calls {
            match &call.result {
                Some(result) => messages.push(result.clone()),
                None => messages.extend(outcome.to_message(&call.call)),
            }
        }
        messages
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn sample() -> PendingTurn {
        let call = |id: &str| ToolCall {
            id: id.into(),
            name: "ask_user".into(),
            arguments: json!({"question": "?"}),
        };
        PendingTurn {
            version: PENDING_VERSION,
            counters: Counters {
                iteration: 2,
                content_index: 5,
                thought_index: 1,
                tokens_used: 40,
                events: 12,
                bytes: 3000,
            },
            content: "let me ask".into(),
            reasoning: vec![],
            client_tools: vec![],
            calls: vec![
                PendingCall {
                    call: call("a"),
                    invalid: None,
                    result: Some(Message::tool_result("a", "calculator", "42", false)),
                    subtask: None,
                },
                PendingCall {
                    call: call("b"),
                    invalid: None,
                    result: None,
                    subtask: None,
                },
            ],
            paused: vec![1],
            input: PendingInput {
                input_id: "input-1".into(),
                request: InputRequest::clarification("?"),
                auth: None,
            },
            child: None,
        }
    }

    #[test]
    fn round_trips_and_refuses_other_versions() {
        let p = sample();
        let value = p.to_value();
        assert_eq!(PendingTurn::from_value(&value), Some(p.clone()));
        let mut other = value.clone();
        other["version"] = json!(99);
        assert_eq!(PendingTurn::from_value(&other), None);
        assert_eq!(PendingTurn::from_value(&json!({"x": 1})), None);
        let mut broken = value.clone();
        broken["paused"] = json!([1, 7]);
        assert_eq!(PendingTurn::from_value(&broken).unwrap().paused, [1]);
        assert_eq!(p.current().map(|c| c.call.id.as_str()), Some("b"));
    }

    #[test]
    fn cancelled_pause_still_answers_every_call() {
        let msgs = sample().messages_with(&ToolOutcome::Canceled);
        assert_eq!(msgs.len(), 3);
        assert_eq!(msgs[0].tool_calls.len(), 2);
        assert_eq!(msgs[2].tool_call_id.as_deref(), Some("b"));
        assert!(msgs[2].is_error);
    }
}
