//! Reading one step: a bare string is text, a mapping names exactly one action, and a
//! mapping that mixes actions or options is refused with a message saying why.

use std::fmt;

use serde::Deserialize;
use serde::de::value::MapAccessDeserializer;
use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde_json::Value;

use super::script::{Step, ToolArguments};
use crate::{FinishReason, TokenUsage};

/// A step: a bare string (text) or a mapping with exactly one action key.
impl<'de> Deserialize<'de> for Step {
    fn deserialize<D: Deserializer<'de>>(de: D) -> Result<Self, D::Error> {
        struct StepVisitor;
        impl<'de> Visitor<'de> for StepVisitor {
            type Value = Step;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a step: a string, or a mapping with one of `text`, `tool_call`, `repeat_text`, `usage`, `delay_ms`, `fail`, `finish`")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Step, E> {
                Ok(Step::Text {
                    text: v.to_string(),
                    chunk_size: None,
                    delay_ms: None,
                })
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Step, A::Error> {
                let raw = RawStep::deserialize(MapAccessDeserializer::new(map))?;
                raw.into_step().map_err(de::Error::custom)
            }
        }
        de.deserialize_any(StepVisitor)
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawStep {
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    chunk_size: Option<usize>,
    #[serde(default)]
    delay_ms: Option<u64>,
    #[serde(default)]
    tool_call: Option<RawToolCall>,
    #[serde(default)]
    repeat_text: Option<RawRepeat>,
    #[serde(default)]
    usage: Option<RawUsage>,
    #[serde(default)]
    fail: Option<RawFail>,
    #[serde(default)]
    finish: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawToolCall {
    name: String,
    #[serde(default)]
    arguments: Option<Value>,
    #[serde(default)]
    id: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRepeat {
    text: String,
    times: u64,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawUsage {
    #[serde(default)]
    input_tokens: u64,
    #[serde(default)]
    output_tokens: u64,
    #[serde(default)]
    total_tokens: Option<u64>,
}

/// `fail: "message"` or `fail: {message, retryable}`.
struct RawFail {
    message: String,
    retryable: bool,
}

impl<'de> Deserialize<'de> for RawFail {
    fn deserialize<D: Deserializer<'de>>(de: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct FailMap {
            message: String,
            #[serde(default)]
            retryable: bool,
        }
        struct FailVisitor;
        impl<'de> Visitor<'de> for FailVisitor {
            type Value = RawFail;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an error message, or a mapping with `message` and `retryable`")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<RawFail, E> {
                Ok(RawFail {
                    message: v.to_string(),
                    retryable: false,
                })
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<RawFail, A::Error> {
                let m = FailMap::deserialize(MapAccessDeserializer::new(map))?;
                Ok(RawFail {
                    message: m.message,
                    retryable: m.retryable,
                })
            }
        }
        de.deserialize_any(FailVisitor)
    }
}

pub(super) fn positive_chunk_size(size: Option<usize>) -> Result<Option<usize>, String> {
    match size {
        Some(0) => Err("`chunk_size` must be at least 1".into()),
        other => Ok(other),
    }
}

impl RawStep {
    fn into_step(self) -> Result<Step, String> {
        let actions: Vec<&str> = [
            ("text", self.text.is_some()),
            ("tool_call", self.tool_call.is_some()),
            ("repeat_text", self.repeat_text.is_some()),
            ("usage", self.usage.is_some()),
            ("fail", self.fail.is_some()),
            ("finish", self.finish.is_some()),
        ]
        .into_iter()
        .filter_map(|(name, present)| present.then_some(name))
        .collect();
        if actions.len() > 1 {
            return Err(format!(
                "a step does one thing, but this one has `{}`; split it into several steps",
                actions.join("` and `")
            ));
        }
        let chunk_size = positive_chunk_size(self.chunk_size)?;
        if actions.first() != Some(&"text") && chunk_size.is_some() {
            return Err("`chunk_size` only goes with `text`".into());
        }
        if let Some(text) = self.text {
            return Ok(Step::Text {
                text,
                chunk_size,
                delay_ms: self.delay_ms,
            });
        }
        if !actions.is_empty() && self.delay_ms.is_some() {
            return Err(format!(
                "`delay_ms` goes with `text` or stands alone as a pause, not with `{}`",
                actions[0]
            ));
        }
        if let Some(call) = self.tool_call {
            return tool_call_step(call);
        }
        if let Some(repeat) = self.repeat_text {
            return Ok(Step::RepeatText {
                text: repeat.text,
                times: repeat.times,
            });
        }
        if let Some(usage) = self.usage {
            let total = usage
                .total_tokens
                .unwrap_or(usage.input_tokens + usage.output_tokens);
            return Ok(Step::Usage(TokenUsage {
                input_tokens: usage.input_tokens,
                output_tokens: usage.output_tokens,
                total_tokens: total,
            }));
        }
        if let Some(fail) = self.fail {
            return Ok(Step::Fail {
                message: fail.message,
                retryable: fail.retryable,
            });
        }
        if let Some(finish) = self.finish {
            return FinishReason::parse(finish.trim())
                .map(Step::Finish)
                .ok_or_else(|| "`finish` needs a reason such as `stop` or `length`".to_string());
        }
        match self.delay_ms {
            Some(ms) => Ok(Step::Pause { ms }),
            None => Err(
                "empty step: expected one of `text`, `tool_call`, `repeat_text`, \
                         `usage`, `delay_ms`, `fail`, `finish`"
                    .into(),
            ),
        }
    }
}

fn tool_call_step(call: RawToolCall) -> Result<Step, String> {
    let name = call.name.trim();
    if name.is_empty() {
        return Err("`tool_call` needs a non-empty `name`".into());
    }
    let arguments = match call.arguments {
        None | Some(Value::Null) => ToolArguments::Json(Value::Object(Default::default())),
        Some(Value::String(raw)) => ToolArguments::Raw(raw),
        Some(Value::Object(map)) => {
            // `$repeat` values are checked here, where the error can name the call; their
            // total size is checked for the whole script (`parse::validate`).
            super::repeat::check_arguments(&map)
                .and_then(|()| {
                    map.values()
                        .try_for_each(|v| super::repeat::expanded_bytes(v).map(|_| ()))
                })
                .map_err(|e| format!("tool call `{name}`: {e}"))?;
            ToolArguments::Json(Value::Object(map))
        }
        Some(other) => {
            return Err(format!(
                "tool call `{name}`: `arguments` must be a mapping (or a JSON string), not {other}"
            ));
        }
    };
    Ok(Step::ToolCall {
        id: call.id,
        name: name.to_string(),
        arguments,
    })
}
