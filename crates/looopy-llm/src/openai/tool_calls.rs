//! Reassembles streamed tool-call fragments into whole calls, tolerating what real
//! gateways send: parallel calls sharing `index` 0, missing ids, repeated names,
//! arguments as objects, empty arguments, and arguments that are not JSON at all.

use std::collections::{HashMap, VecDeque};

use looopy_protocol::ToolCall;
use looopy_protocol::ids::new_tool_call_id;
use serde_json::{Map, Value};

use crate::LlmEvent;

/// One call being assembled; `position` in the assembler is its event `index`.
#[derive(Debug, Default)]
struct Slot {
    id: String,
    /// `id` came from the server (not generated): a different id means a different call.
    server_id: bool,
    name: String,
    arguments: String,
    started: bool,
}

/// The streamed pieces of one fragment, already decoded.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Fragment<'a> {
    pub wire_index: u64,
    pub id: Option<&'a str>,
    pub name: Option<&'a str>,
    pub arguments: Option<&'a str>,
}

/// Tool calls of one response, in the order they first appeared.
#[derive(Debug, Default)]
pub(crate) struct ToolCallAssembler {
    slots: Vec<Slot>,
    /// The call a wire `index` currently refers to.
    by_index: HashMap<u64, usize>,
    by_id: HashMap<String, usize>,
}

impl ToolCallAssembler {
    /// Applies one fragment, queueing `ToolCallStart` once the call's name is known and
    /// `ToolCallDelta` for argument text from then on.
    pub(crate) fn push(&mut self, fragment: Fragment<'_>, out: &mut VecDeque<LlmEvent>) {
        let id = fragment.id.filter(|id| !id.is_empty());
        let name = fragment.name.filter(|name| !name.is_empty());
        let position = self.slot_for(fragment.wire_index, id, name);
        self.by_index.insert(fragment.wire_index, position);
        let slot = &mut self.slots[position];

        if let (Some(name), true) = (name, slot.name.is_empty()) {
            slot.name = name.to_string();
        }
        if let Some(arguments) = fragment.arguments.filter(|a| !a.is_empty()) {
            slot.arguments.push_str(arguments);
            if slot.started {
                out.push_back(LlmEvent::ToolCallDelta {
                    id: slot.id.clone(),
                    arguments: arguments.to_string(),
                });
            }
        }
        if !slot.started && !slot.name.is_empty() {
            if slot.id.is_empty() {
                slot.id = new_tool_call_id();
            }
            slot.started = true;
            out.push_back(LlmEvent::ToolCallStart {
                index: position,
                id: slot.id.clone(),
                name: slot.name.clone(),
            });
            if !slot.arguments.is_empty() {
                out.push_back(LlmEvent::ToolCallDelta {
                    id: slot.id.clone(),
                    arguments: slot.arguments.clone(),
                });
            }
        }
    }

    /// Which call a fragment belongs to, creating a new one when it starts a call.
    fn slot_for(&mut self, wire_index: u64, id: Option<&str>, name: Option<&str>) -> usize {
        let current = self.by_index.get(&wire_index).copied();
        match id {
            Some(id) => {
                if let Some(&position) = self.by_id.get(id) {
                    return position;
                }
                if let Some(position) = current {
                    let slot = &mut self.slots[position];
                    if !slot.server_id && !slot.started {
                        // The id came after other fragments of the same call.
                        slot.id = id.to_string();
                        slot.server_id = true;
                        self.by_id.insert(id.to_string(), position);
                        return position;
                    }
                }
                // A new id at a used index: another parallel call (gateways reusing index 0).
                self.new_slot(Some(id))
            }
            None => match current {
                // Without ids, a different name at the same index can only be a new call.
                Some(position)
                    if name.is_none_or(|n| {
                        self.slots[position].name.is_empty() || self.slots[position].name == n
                    }) =>
                {
                    position
                }
                _ => self.new_slot(None),
            },
        }
    }

    fn new_slot(&mut self, id: Option<&str>) -> usize {
        let position = self.slots.len();
        let mut slot = Slot::default();
        if let Some(id) = id {
            slot.id = id.to_string();
            slot.server_id = true;
            self.by_id.insert(id.to_string(), position);
        }
        self.slots.push(slot);
        position
    }

    /// Whether any call has been seen.
    pub(crate) fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// Queues `ToolCallComplete` or `ToolCallInvalid` for every call, in order.
    pub(crate) fn finish(&mut self, out: &mut VecDeque<LlmEvent>) {
        for (index, slot) in std::mem::take(&mut self.slots).into_iter().enumerate() {
            let id = if slot.id.is_empty() {
                new_tool_call_id()
            } else {
                slot.id
            };
            if slot.name.is_empty() {
                out.push_back(LlmEvent::ToolCallInvalid {
                    index,
                    id,
                    name: String::new(),
                    raw_arguments: slot.arguments,
                    error: "the tool call has no function name".into(),
                });
                continue;
            }
            out.push_back(match parse_arguments(&slot.arguments) {
                Ok(arguments) => LlmEvent::ToolCallComplete {
                    index,
                    call: ToolCall {
                        id,
                        name: slot.name,
                        arguments,
                    },
                },
                Err(error) => LlmEvent::ToolCallInvalid {
                    index,
                    id,
                    name: slot.name,
                    raw_arguments: slot.arguments,
                    error,
                },
            });
        }
        self.by_index.clear();
        self.by_id.clear();
    }
}

/// Parses complete argument text into a JSON object. Empty text and `null` mean no
/// arguments (`{}`); a JSON string holding an object (double-encoded arguments) is
/// unwrapped; anything else is an error the agent reports back to the model.
pub(crate) fn parse_arguments(raw: &str) -> Result<Value, String> {
    if raw.trim().is_empty() {
        return Ok(Value::Object(Map::new()));
    }
    match serde_json::from_str::<Value>(raw) {
        Ok(Value::Object(map)) => Ok(Value::Object(map)),
        Ok(Value::Null) => Ok(Value::Object(Map::new())),
        Ok(Value::String(inner)) => match serde_json::from_str::<Value>(&inner) {
            Ok(Value::Object(map)) => Ok(Value::Object(map)),
            _ => Err("arguments must be a JSON object, got a JSON string".into()),
        },
        Ok(other) => Err(format!(
            "arguments must be a JSON object, got {}",
            json_kind(&other)
        )),
        Err(error) => Err(format!("arguments are not valid JSON: {error}")),
    }
}

fn json_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn frag<'a>(
        wire_index: u64,
        id: Option<&'a str>,
        name: Option<&'a str>,
        arguments: Option<&'a str>,
    ) -> Fragment<'a> {
        Fragment {
            wire_index,
            id,
            name,
            arguments,
        }
    }

    fn run(fragments: &[Fragment<'_>]) -> Vec<LlmEvent> {
        let mut calls = ToolCallAssembler::default();
        let mut out = VecDeque::new();
        for fragment in fragments {
            calls.push(*fragment, &mut out);
        }
        calls.finish(&mut out);
        out.into()
    }

    fn completed(events: &[LlmEvent]) -> Vec<(usize, String, String, Value)> {
        events
            .iter()
            .filter_map(|e| match e {
                LlmEvent::ToolCallComplete { index, call } => Some((
                    *index,
                    call.id.clone(),
                    call.name.clone(),
                    call.arguments.clone(),
                )),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn standard_fragments_assemble_by_index() {
        let events = run(&[
            frag(0, Some("a"), Some("f"), Some("")),
            frag(1, Some("b"), Some("g"), Some("{\"y\":")),
            frag(0, None, None, Some("{\"x\":1}")),
            frag(1, None, None, Some("2}")),
        ]);
        assert_eq!(
            completed(&events),
            vec![
                (0, "a".into(), "f".into(), json!({"x": 1})),
                (1, "b".into(), "g".into(), json!({"y": 2}))
            ]
        );
        assert!(
            matches!(&events[0], LlmEvent::ToolCallStart { index: 0, id, name } if id == "a" && name == "f")
        );
        assert!(
            matches!(&events[2], LlmEvent::ToolCallDelta { id, arguments } if id == "b" && arguments == "{\"y\":")
        );
    }

    #[test]
    fn parallel_calls_reusing_index_zero_are_split_by_id() {
        let events = run(&[
            frag(0, Some("a"), Some("f"), Some("{}")),
            frag(0, Some("b"), Some("g"), Some("{\"q\":")),
            frag(0, None, None, Some("1}")),
            frag(0, Some("b"), None, Some("")),
        ]);
        let done = completed(&events);
        assert_eq!(done.len(), 2);
        assert_eq!(done[1], (1, "b".into(), "g".into(), json!({"q": 1})));
    }

    #[test]
    fn missing_ids_are_generated_and_names_split_idless_calls() {
        let events = run(&[
            frag(0, None, Some("f"), Some("{}")),
            frag(0, None, Some("g"), None),
        ]);
        let done = completed(&events);
        assert_eq!(done.len(), 2);
        assert!(done.iter().all(|(_, id, _, _)| id.starts_with("call-")));
        assert_ne!(done[0].1, done[1].1);
    }

    #[test]
    fn bad_arguments_become_invalid_calls_not_failures() {
        let events = run(&[
            frag(0, Some("a"), Some("f"), Some("{not json")),
            frag(1, Some("b"), None, Some("{}")),
            frag(2, Some("c"), Some("h"), Some("[1]")),
        ]);
        let invalid: Vec<_> = events
            .iter()
            .filter_map(|e| match e {
                LlmEvent::ToolCallInvalid {
                    index,
                    raw_arguments,
                    error,
                    ..
                } => Some((*index, raw_arguments.clone(), error.clone())),
                _ => None,
            })
            .collect();
        assert_eq!(invalid.len(), 3);
        assert_eq!(invalid[0].1, "{not json");
        assert!(invalid[1].2.contains("no function name"));
        assert!(invalid[2].2.contains("an array"));
    }

    #[test]
    fn argument_quirks_parse() {
        assert_eq!(parse_arguments("").unwrap(), json!({}));
        assert_eq!(parse_arguments(" null ").unwrap(), json!({}));
        assert_eq!(parse_arguments(r#""{\"a\":1}""#).unwrap(), json!({"a": 1}));
        assert!(parse_arguments(r#""text""#).is_err());
        assert!(parse_arguments("3").unwrap_err().contains("a number"));
    }
}
