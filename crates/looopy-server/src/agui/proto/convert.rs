//! One AG-UI event (the JSON object the mapping builds, [`AguiEvent`]) as the protobuf
//! `Event` envelope, field by field, the way `@ag-ui/proto`'s own encoder lays it out: the
//! common fields (`type`, `timestamp`, `rawEvent`, `metadata`) in `base_event`; JSON-valued
//! fields as `google.protobuf.Value` / `Struct`; `RUN_FINISHED.outcome` (an object in JSON)
//! as its `type` string with its `interrupts` / `pendingToolCallIds` beside it, and
//! `SUBAGENT_FINISHED.outcome` likewise with its `interruptIds`.
//!
//! Every key of the JSON event must land in a protobuf field: a key that has none is an
//! error ([`ProtoError::Unmapped`]), never a silently shorter event, so the two framings
//! cannot drift apart unnoticed.

use prost_types::value::Kind;
use prost_types::{ListValue, Struct};
use serde_json::{Map, Value};

use super::ProtoError;
use super::generated::{self as pb, EventType, event::Event as Arm};
use crate::agui::mapping::AguiEvent;

/// A JSON value as `google.protobuf.Value` (numbers become doubles, as in JSON).
pub(super) fn value(json: &Value) -> prost_types::Value {
    let kind = match json {
        Value::Null => Kind::NullValue(0),
        Value::Bool(b) => Kind::BoolValue(*b),
        Value::Number(n) => Kind::NumberValue(n.as_f64().unwrap_or(0.0)),
        Value::String(s) => Kind::StringValue(s.clone()),
        Value::Array(items) => Kind::ListValue(ListValue {
            values: items.iter().map(value).collect(),
        }),
        Value::Object(map) => Kind::StructValue(structure(map)),
    };
    prost_types::Value { kind: Some(kind) }
}

/// A JSON object as `google.protobuf.Struct`.
pub(super) fn structure(map: &Map<String, Value>) -> Struct {
    Struct {
        fields: map.iter().map(|(k, v)| (k.clone(), value(v))).collect(),
    }
}

/// The keys of one JSON object, read once each; [`Fields::finish`] fails on any left.
struct Fields<'a> {
    kind: &'a str,
    map: &'a Map<String, Value>,
    used: Vec<&'a str>,
}

impl<'a> Fields<'a> {
    fn new(kind: &'a str, map: &'a Map<String, Value>) -> Self {
        Self {
            kind,
            map,
            used: Vec::new(),
        }
    }

    fn get(&mut self, key: &str) -> Option<&'a Value> {
        let (key, found) = self.map.get_key_value(key)?;
        self.used.push(key);
        Some(found)
    }

    fn wrong(&self, field: &str) -> ProtoError {
        ProtoError::WrongType {
            kind: self.kind.to_owned(),
            field: field.to_owned(),
        }
    }

    fn opt_string(&mut self, key: &str) -> Result<Option<String>, ProtoError> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(_) => Err(self.wrong(key)),
        }
    }

    /// A proto3 plain string: absent is `""`, as AG-UI's decoder reads it back.
    fn string(&mut self, key: &str) -> Result<String, ProtoError> {
        Ok(self.opt_string(key)?.unwrap_or_default())
    }

    fn opt_i64(&mut self, key: &str) -> Result<Option<i64>, ProtoError> {
        match self.get(key) {
            None => Ok(None),
            Some(v) => v.as_i64().map(Some).ok_or_else(|| self.wrong(key)),
        }
    }

    fn opt_bool(&mut self, key: &str) -> Result<Option<bool>, ProtoError> {
        match self.get(key) {
            None => Ok(None),
            Some(v) => v.as_bool().map(Some).ok_or_else(|| self.wrong(key)),
        }
    }

    fn value(&mut self, key: &str) -> Option<prost_types::Value> {
        self.get(key).map(value)
    }

    fn structure(&mut self, key: &str) -> Result<Option<Struct>, ProtoError> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::Object(map)) => Ok(Some(structure(map))),
            Some(_) => Err(self.wrong(key)),
        }
    }

    fn list(&mut self, key: &str) -> Result<&'a [Value], ProtoError> {
        match self.get(key) {
            None => Ok(&[]),
            Some(Value::Array(items)) => Ok(items),
            Some(_) => Err(self.wrong(key)),
        }
    }

    fn strings(&mut self, key: &str) -> Result<Vec<String>, ProtoError> {
        self.list(key)?
            .iter()
            .map(|v| v.as_str().map(str::to_owned).ok_or_else(|| self.wrong(key)))
            .collect()
    }

    fn object(&mut self, key: &str) -> Result<Option<&'a Map<String, Value>>, ProtoError> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::Object(map)) => Ok(Some(map)),
            Some(_) => Err(self.wrong(key)),
        }
    }

    /// Fails on the first key no field took.
    fn finish(self) -> Result<(), ProtoError> {
        match self.map.keys().find(|k| !self.used.contains(&k.as_str())) {
            None => Ok(()),
            Some(field) => Err(ProtoError::Unmapped {
                kind: self.kind.to_owned(),
                field: field.clone(),
            }),
        }
    }

    /// The common fields (`type` was read by the caller).
    fn base(&mut self, kind: EventType) -> Result<Option<pb::BaseEvent>, ProtoError> {
        Ok(Some(pb::BaseEvent {
            r#type: kind as i32,
            timestamp: self.opt_i64("timestamp")?,
            raw_event: self.value("rawEvent"),
            metadata: self.structure("metadata")?,
        }))
    }
}

/// The objects of a JSON array field, each converted by `one`, which reads their keys.
fn each<T>(
    fields: &mut Fields<'_>,
    key: &str,
    one: impl Fn(&mut Fields<'_>) -> Result<T, ProtoError>,
) -> Result<Vec<T>, ProtoError> {
    let kind = format!("{}.{key}", fields.kind);
    fields
        .list(key)?
        .iter()
        .map(|item| {
            let Value::Object(map) = item else {
                return Err(fields.wrong(key));
            };
            let mut inner = Fields::new(&kind, map);
            let converted = one(&mut inner)?;
            inner.finish()?;
            Ok(converted)
        })
        .collect()
}

fn usage(f: &mut Fields<'_>) -> Result<pb::Usage, ProtoError> {
    Ok(pb::Usage {
        provider: f.opt_string("provider")?,
        model: f.opt_string("model")?,
        input_tokens: f.opt_i64("inputTokens")?,
        output_tokens: f.opt_i64("outputTokens")?,
        total_tokens: f.opt_i64("totalTokens")?,
        reasoning_tokens: f.opt_i64("reasoningTokens")?,
        cached_input_tokens: f.opt_i64("cachedInputTokens")?,
        cache_write_input_tokens: f.opt_i64("cacheWriteInputTokens")?,
    })
}

fn interrupt(f: &mut Fields<'_>) -> Result<pb::Interrupt, ProtoError> {
    Ok(pb::Interrupt {
        id: f.string("id")?,
        reason: f.string("reason")?,
        message: f.opt_string("message")?,
        tool_call_id: f.opt_string("toolCallId")?,
        response_schema: f.value("responseSchema"),
        expires_at: f.opt_string("expiresAt")?,
        metadata: f.value("metadata"),
        subagent_run_id: f.opt_string("subagentRunId")?,
    })
}

fn run_finished(f: &mut Fields<'_>) -> Result<Arm, ProtoError> {
    let base_event = f.base(EventType::RunFinished)?;
    let mut finished = pb::RunFinishedEvent {
        base_event,
        thread_id: f.string("threadId")?,
        run_id: f.string("runId")?,
        result: f.value("result"),
        usage: each(f, "usage", usage)?,
        ..Default::default()
    };
    if let Some(outcome) = f.object("outcome")? {
        let kind = format!("{}.outcome", f.kind);
        let mut o = Fields::new(&kind, outcome);
        finished.outcome = o.string("type")?;
        finished.pending_tool_call_ids = o.strings("pendingToolCallIds")?;
        finished.interrupts = each(&mut o, "interrupts", interrupt)?;
        o.finish()?;
    }
    Ok(Arm::RunFinished(finished))
}

fn subagent_finished(f: &mut Fields<'_>) -> Result<Arm, ProtoError> {
    let base_event = f.base(EventType::SubagentFinished)?;
    let mut finished = pb::SubagentFinishedEvent {
        base_event,
        subagent_run_id: f.string("subagentRunId")?,
        result: f.value("result"),
        ..Default::default()
    };
    if let Some(outcome) = f.object("outcome")? {
        let kind = format!("{}.outcome", f.kind);
        let mut o = Fields::new(&kind, outcome);
        finished.outcome = o.string("type")?;
        finished.interrupt_ids = o.strings("interruptIds")?;
        o.finish()?;
    }
    Ok(Arm::SubagentFinished(finished))
}

/// The envelope arm of one event; see the module docs.
fn arm(kind: &str, f: &mut Fields<'_>) -> Result<Arm, ProtoError> {
    use EventType as T;
    let arm = match kind {
        "RUN_STARTED" => Arm::RunStarted(pb::RunStartedEvent {
            base_event: f.base(T::RunStarted)?,
            thread_id: f.string("threadId")?,
            run_id: f.string("runId")?,
            parent_run_id: f.opt_string("parentRunId")?,
            protocol_version: f.opt_string("protocolVersion")?,
        }),
        "RUN_FINISHED" => run_finished(f)?,
        "RUN_ERROR" => Arm::RunError(pb::RunErrorEvent {
            base_event: f.base(T::RunError)?,
            code: f.opt_string("code")?,
            message: f.string("message")?,
            usage: each(f, "usage", usage)?,
        }),
        "STEP_STARTED" => Arm::StepStarted(pb::StepStartedEvent {
            base_event: f.base(T::StepStarted)?,
            step_name: f.string("stepName")?,
            subagent_run_id: f.opt_string("subagentRunId")?,
        }),
        "STEP_FINISHED" => Arm::StepFinished(pb::StepFinishedEvent {
            base_event: f.base(T::StepFinished)?,
            step_name: f.string("stepName")?,
            subagent_run_id: f.opt_string("subagentRunId")?,
        }),
        "TEXT_MESSAGE_START" => Arm::TextMessageStart(pb::TextMessageStartEvent {
            base_event: f.base(T::TextMessageStart)?,
            message_id: f.string("messageId")?,
            role: f.opt_string("role")?,
            name: f.opt_string("name")?,
            subagent_run_id: f.opt_string("subagentRunId")?,
        }),
        "TEXT_MESSAGE_CONTENT" => Arm::TextMessageContent(pb::TextMessageContentEvent {
            base_event: f.base(T::TextMessageContent)?,
            message_id: f.string("messageId")?,
            delta: f.string("delta")?,
            subagent_run_id: f.opt_string("subagentRunId")?,
        }),
        "TEXT_MESSAGE_END" => Arm::TextMessageEnd(pb::TextMessageEndEvent {
            base_event: f.base(T::TextMessageEnd)?,
            message_id: f.string("messageId")?,
            subagent_run_id: f.opt_string("subagentRunId")?,
        }),
        "TOOL_CALL_START" => Arm::ToolCallStart(pb::ToolCallStartEvent {
            base_event: f.base(T::ToolCallStart)?,
            tool_call_id: f.string("toolCallId")?,
            tool_call_name: f.string("toolCallName")?,
            parent_message_id: f.opt_string("parentMessageId")?,
            subagent_run_id: f.opt_string("subagentRunId")?,
        }),
        "TOOL_CALL_ARGS" => Arm::ToolCallArgs(pb::ToolCallArgsEvent {
            base_event: f.base(T::ToolCallArgs)?,
            tool_call_id: f.string("toolCallId")?,
            delta: f.string("delta")?,
            subagent_run_id: f.opt_string("subagentRunId")?,
        }),
        "TOOL_CALL_END" => Arm::ToolCallEnd(pb::ToolCallEndEvent {
            base_event: f.base(T::ToolCallEnd)?,
            tool_call_id: f.string("toolCallId")?,
            subagent_run_id: f.opt_string("subagentRunId")?,
        }),
        "TOOL_CALL_RESULT" => Arm::ToolCallResult(pb::ToolCallResultEvent {
            base_event: f.base(T::ToolCallResult)?,
            subagent_run_id: f.opt_string("subagentRunId")?,
            message_id: f.string("messageId")?,
            tool_call_id: f.string("toolCallId")?,
            // Looopy's results are text; a list of parts would need `content_parts`.
            content: f.opt_string("content")?,
            role: f.opt_string("role")?,
        }),
        "ACTIVITY_SNAPSHOT" => Arm::ActivitySnapshot(pb::ActivitySnapshotEvent {
            base_event: f.base(T::ActivitySnapshot)?,
            subagent_run_id: f.opt_string("subagentRunId")?,
            message_id: f.string("messageId")?,
            activity_type: f.string("activityType")?,
            content: f.structure("content")?,
            replace: f.opt_bool("replace")?,
        }),
        "REASONING_START" => Arm::ReasoningStart(pb::ReasoningStartEvent {
            base_event: f.base(T::ReasoningStart)?,
            subagent_run_id: f.opt_string("subagentRunId")?,
            message_id: f.string("messageId")?,
        }),
        "REASONING_MESSAGE_START" => Arm::ReasoningMessageStart(pb::ReasoningMessageStartEvent {
            base_event: f.base(T::ReasoningMessageStart)?,
            subagent_run_id: f.opt_string("subagentRunId")?,
            message_id: f.string("messageId")?,
            role: f.string("role")?,
        }),
        "REASONING_MESSAGE_CONTENT" => {
            Arm::ReasoningMessageContent(pb::ReasoningMessageContentEvent {
                base_event: f.base(T::ReasoningMessageContent)?,
                subagent_run_id: f.opt_string("subagentRunId")?,
                message_id: f.string("messageId")?,
                delta: f.string("delta")?,
            })
        }
        "REASONING_MESSAGE_END" => Arm::ReasoningMessageEnd(pb::ReasoningMessageEndEvent {
            base_event: f.base(T::ReasoningMessageEnd)?,
            subagent_run_id: f.opt_string("subagentRunId")?,
            message_id: f.string("messageId")?,
        }),
        "REASONING_END" => Arm::ReasoningEnd(pb::ReasoningEndEvent {
            base_event: f.base(T::ReasoningEnd)?,
            subagent_run_id: f.opt_string("subagentRunId")?,
            message_id: f.string("messageId")?,
        }),
        "SUBAGENT_STARTED" => Arm::SubagentStarted(pb::SubagentStartedEvent {
            base_event: f.base(T::SubagentStarted)?,
            subagent_run_id: f.string("subagentRunId")?,
            name: f.string("name")?,
            description: f.opt_string("description")?,
            parent_subagent_run_id: f.opt_string("parentSubagentRunId")?,
            parent_tool_call_id: f.opt_string("parentToolCallId")?,
            parent_message_id: f.opt_string("parentMessageId")?,
        }),
        "SUBAGENT_FINISHED" => subagent_finished(f)?,
        "SUBAGENT_ERROR" => Arm::SubagentError(pb::SubagentErrorEvent {
            base_event: f.base(T::SubagentError)?,
            subagent_run_id: f.string("subagentRunId")?,
            message: f.string("message")?,
            code: f.opt_string("code")?,
        }),
        other => return Err(ProtoError::UnknownType(other.to_owned())),
    };
    Ok(arm)
}

/// `event` as the protobuf envelope, carrying Looopy's frame id `id`.
pub(super) fn envelope(event: &AguiEvent, id: &str) -> Result<pb::Event, ProtoError> {
    let kind = match event.get("type") {
        Some(Value::String(kind)) => kind.as_str(),
        _ => return Err(ProtoError::UnknownType(String::new())),
    };
    let mut fields = Fields::new(kind, event);
    fields.get("type");
    let arm = arm(kind, &mut fields)?;
    fields.finish()?;
    Ok(pb::Event {
        event: Some(arm),
        looopy_event_id: id.to_owned(),
    })
}
