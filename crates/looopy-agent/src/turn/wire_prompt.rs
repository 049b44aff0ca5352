//! The text wire protocol's side of a request: the system prompt that teaches the model the
//! protocol and the tools, and the conversion of stored messages into wire-format turns.
//!
//! History is stored as ordinary [`Message`]s in both modes; only the request differs.

use looopy_llm::ToolDefinition;
use looopy_protocol::{Message, Role};
use looopy_stream::wire::{self, ConversationEvent, WireCall};
use serde_json::{Value, json};

/// The system prompt for wire mode: the agent's own prompt, the protocol, the tools.
pub(crate) fn system_prompt(agent_prompt: Option<&str>, tools: &[ToolDefinition]) -> String {
    let mut prompt = String::new();
    if let Some(own) = agent_prompt.filter(|p| !p.trim().is_empty()) {
        prompt.push_str(own.trim_end());
        prompt.push_str("\n\n");
    }
    prompt.push_str(PROTOCOL);
    if tools.is_empty() {
        prompt.push_str("\nNo tools are available: answer directly.\n");
        return prompt;
    }
    prompt.push_str("\n# Tools\n");
    for tool in tools {
        prompt.push_str(&format!(
            "\n## {}\n{}\nArguments (JSON Schema): {}\n",
            tool.name, tool.description, tool.parameters
        ));
    }
    prompt
}

const PROTOCOL: &str = r#"# How to answer

Write your reply using these markers:

- <think>…</think> for private reasoning (optional).
- Text for the user, bare or inside <respond>…</respond>.
- To use tools, write one batch as a JSON array and stop:
  <execute>
  [{"name": "tool_name", "args": {"argument": "value"}}]
  </execute>
  Stop writing after </execute>. The results arrive in the next message as
  <results>[{"tool": …, "status": "success" | "failure", "content": …}]</results>,
  in the order of the calls. Never write <results> yourself.
- Write <end> when you have fully answered.
"#;

/// The stored conversation as wire-format chat messages (system messages excluded: the
/// request's own system prompt comes first).
pub(crate) fn to_wire_messages(history: &[Message]) -> Vec<Message> {
    let events: Vec<ConversationEvent> = history.iter().flat_map(conversation_events).collect();
    wire::to_messages(&events)
        .into_iter()
        .map(|turn| match turn.role {
            wire::Role::System => Message::system(turn.content),
            wire::Role::User => Message::user(turn.content),
            wire::Role::Assistant => Message::assistant(turn.content),
        })
        .collect()
}

/// One stored message as wire conversation events.
fn conversation_events(message: &Message) -> Vec<ConversationEvent> {
    match message.role {
        Role::System => Vec::new(),
        Role::User => vec![ConversationEvent::User(message.content.clone())],
        Role::Assistant => {
            let mut events: Vec<ConversationEvent> = message
                .reasoning
                .iter()
                .filter(|block| !block.text.is_empty())
                .map(|block| ConversationEvent::Think(block.text.clone()))
                .collect();
            if !message.content.is_empty() {
                events.push(ConversationEvent::Respond(message.content.clone()));
            }
            events.extend(message.tool_calls.iter().map(|call| {
                ConversationEvent::Call(WireCall {
                    name: call.name.clone(),
                    args: match &call.arguments {
                        Value::Object(map) => map.clone(),
                        _ => Default::default(),
                    },
                })
            }));
            events
        }
        Role::Tool => {
            let content = if message.is_error {
                Value::String(message.content.clone())
            } else {
                // A JSON result (a number, an object) is sent as JSON, anything else as text.
                serde_json::from_str(&message.content)
                    .unwrap_or_else(|_| Value::String(message.content.clone()))
            };
            vec![ConversationEvent::Result(json!({
                "tool": message.name.clone().unwrap_or_default(),
                "status": if message.is_error { "failure" } else { "success" },
                "content": content,
            }))]
        }
    }
}

/// The transient user message telling the model its last output could not be used.
pub(crate) fn protocol_error_message(errors: &[String]) -> Message {
    Message::user(format!(
        "[system] Your last message could not be used: {}. Follow the protocol: calls go in \
         one <execute>[…]</execute> JSON array of {{\"name\", \"args\"}} objects.",
        errors.join("; ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use looopy_protocol::{ReasoningBlock, ToolCall};

    #[test]
    fn history_becomes_wire_turns() {
        let mut assistant = Message::assistant_with_tools(
            "Let me compute.",
            vec![ToolCall {
                id: "c1".into(),
                name: "calculator".into(),
                arguments: json!({"expression": "6*7"}),
            }],
        );
        assistant.reasoning.push(ReasoningBlock {
            text: "use the tool".into(),
            signature: None,
            redacted: None,
        });
        let history = vec![
            Message::system("ignored"),
            Message::user("what is 6*7?"),
            assistant,
            Message::tool_result("c1", "calculator", "42", false),
            Message::assistant("It is 42."),
        ];
        let turns = to_wire_messages(&history);
        let roles: Vec<Role> = turns.iter().map(|m| m.role).collect();
        assert_eq!(
            roles,
            [Role::User, Role::Assistant, Role::User, Role::Assistant]
        );
        assert!(turns[1].content.contains("<think>use the tool</think>"));
        assert!(turns[1].content.contains("<execute>"));
        assert!(turns[1].content.contains("\"expression\":\"6*7\""));
        assert!(turns[2].content.starts_with("<results>"));
        assert!(turns[2].content.contains("\"content\":42"));
        assert!(turns[2].content.contains("\"status\":\"success\""));
        assert_eq!(turns[3].content, "It is 42.");
    }

    #[test]
    fn system_prompt_lists_tools_with_schemas() {
        let tools = crate::tool::ToolRegistry::builtin().definitions();
        let prompt = system_prompt(Some("You are terse."), &tools);
        assert!(prompt.starts_with("You are terse."));
        assert!(prompt.contains("<execute>"));
        assert!(prompt.contains("## calculator"));
        assert!(prompt.contains("\"expression\""));
        assert!(system_prompt(None, &[]).contains("No tools"));
    }
}
