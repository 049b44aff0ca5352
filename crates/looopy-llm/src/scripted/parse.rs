//! Reading scripts from YAML or JSON, with shorthands (a bare string is a text step or a
//! text-only response) and errors that say which key is wrong and where.

use std::fmt;

use serde::Deserialize;
use serde::de::value::{MapAccessDeserializer, SeqAccessDeserializer};
use serde::de::{self, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::Value;

use super::context::unknown_template;
use super::script::{MAX_SCRIPT_BYTES, Response, Script, Step, ToolArguments, Turn};
use crate::{FinishReason, TokenUsage};

/// Parses and validates a script; the error is a human-readable message.
///
/// Text that looks like JSON (starts with `{` or `[`) is parsed as JSON first so JSON
/// scripts get JSON's precise error positions; if that fails the text is tried as YAML (a
/// flow-style YAML list also starts with `[`), and the JSON error is reported if both fail.
pub(crate) fn parse_script(text: &str) -> Result<Script, String> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    if text.len() > MAX_SCRIPT_BYTES {
        return Err(format!(
            "the script is {} bytes; the limit is {MAX_SCRIPT_BYTES}",
            text.len()
        ));
    }
    if text.trim().is_empty() {
        return Err("the script is empty; expected a list of turns".into());
    }
    let trimmed = text.trim_start();
    let script: Script = if trimmed.starts_with('{') || trimmed.starts_with('[') {
        match serde_json::from_str(text) {
            Ok(script) => script,
            Err(json_err) => serde_yaml::from_str(text).map_err(|_| format!("{json_err}"))?,
        }
    } else {
        serde_yaml::from_str(text).map_err(|err| err.to_string())?
    };
    validate(&script)?;
    Ok(script)
}

/// Checks what serde cannot: every turn has a response and every template name exists.
fn validate(script: &Script) -> Result<(), String> {
    for (t, turn) in script.turns.iter().enumerate() {
        let turn_label = match &turn.name {
            Some(name) => format!("turn {t} ({name:?})"),
            None => format!("turn {t}"),
        };
        if turn.responses.is_empty() {
            return Err(format!("{turn_label} has no responses"));
        }
        for (r, response) in turn.responses.iter().enumerate() {
            for (s, step) in response.steps.iter().enumerate() {
                let texts: Vec<&str> = match step {
                    Step::Text { text, .. } => vec![text],
                    Step::ToolCall {
                        arguments: ToolArguments::Raw(raw),
                        ..
                    } => vec![raw],
                    Step::ToolCall {
                        arguments: ToolArguments::Json(value),
                        ..
                    } => {
                        let mut strings = Vec::new();
                        collect_strings(value, &mut strings);
                        strings
                    }
                    _ => Vec::new(),
                };
                if let Some(name) = texts.into_iter().find_map(unknown_template) {
                    return Err(format!(
                        "{turn_label}, response {r}, step {s}: unknown template `{{{{{name}}}}}` \
                         (known: {{{{user}}}}, {{{{last_tool_result}}}}, {{{{calculation}}}})"
                    ));
                }
            }
        }
    }
    Ok(())
}

fn collect_strings<'a>(value: &'a Value, out: &mut Vec<&'a str>) {
    match value {
        Value::String(s) => out.push(s),
        Value::Array(items) => items.iter().for_each(|v| collect_strings(v, out)),
        Value::Object(map) => map.values().for_each(|v| collect_strings(v, out)),
        _ => {}
    }
}

/// `key: value` or `key: [values]` for matcher lists.
pub(crate) fn one_or_many<'de, D: Deserializer<'de>>(de: D) -> Result<Vec<String>, D::Error> {
    struct OneOrMany;
    impl<'de> Visitor<'de> for OneOrMany {
        type Value = Vec<String>;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("a string or a list of strings")
        }
        fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
            Ok(vec![v.to_string()])
        }
        fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
            Vec::deserialize(SeqAccessDeserializer::new(seq))
        }
    }
    de.deserialize_any(OneOrMany)
}

/// The top level: a list of turns, or a mapping with `turns` and streaming defaults.
impl<'de> Deserialize<'de> for Script {
    fn deserialize<D: Deserializer<'de>>(de: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct ScriptFile {
            turns: Vec<Turn>,
            #[serde(default)]
            chunk_size: Option<usize>,
            #[serde(default)]
            delay_ms: Option<u64>,
        }
        struct ScriptVisitor;
        impl<'de> Visitor<'de> for ScriptVisitor {
            type Value = Script;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a list of turns, or a mapping with `turns`, `chunk_size`, `delay_ms`")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Script, A::Error> {
                let turns = Vec::deserialize(SeqAccessDeserializer::new(seq))?;
                Ok(Script {
                    turns,
                    ..Script::default()
                })
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Script, A::Error> {
                let file = ScriptFile::deserialize(MapAccessDeserializer::new(map))?;
                let chunk_size = positive_chunk_size(file.chunk_size).map_err(de::Error::custom)?;
                Ok(Script {
                    turns: file.turns,
                    chunk_size,
                    delay_ms: file.delay_ms,
                })
            }
        }
        de.deserialize_any(ScriptVisitor)
    }
}

/// A response: a list of steps, a bare string (one text step), or a mapping with `steps`
/// and streaming defaults.
impl<'de> Deserialize<'de> for Response {
    fn deserialize<D: Deserializer<'de>>(de: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct ResponseMap {
            steps: Vec<Step>,
            #[serde(default)]
            chunk_size: Option<usize>,
            #[serde(default)]
            delay_ms: Option<u64>,
        }
        struct ResponseVisitor;
        impl<'de> Visitor<'de> for ResponseVisitor {
            type Value = Response;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a response: a list of steps, a string, or a mapping with `steps`")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Response, E> {
                Ok(Response::text_only(v))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Response, A::Error> {
                let steps = Vec::deserialize(SeqAccessDeserializer::new(seq))?;
                Ok(Response {
                    steps,
                    ..Response::default()
                })
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Response, A::Error> {
                let raw = ResponseMap::deserialize(MapAccessDeserializer::new(map))?;
                let chunk_size = positive_chunk_size(raw.chunk_size).map_err(de::Error::custom)?;
                Ok(Response {
                    steps: raw.steps,
                    chunk_size,
                    delay_ms: raw.delay_ms,
                })
            }
        }
        de.deserialize_any(ResponseVisitor)
    }
}

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

fn positive_chunk_size(size: Option<usize>) -> Result<Option<usize>, String> {
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
        Some(object @ Value::Object(_)) => ToolArguments::Json(object),
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

#[cfg(test)]
mod tests {
    use super::*;

    fn steps(yaml: &str) -> Vec<Step> {
        let script = parse_script(yaml).unwrap();
        script.turns[0].responses[0].steps.clone()
    }

    #[test]
    fn shorthands_expand() {
        let script =
            parse_script("- responses: [\"hi {{user}}\", [\"a\", {delay_ms: 5}]]").unwrap();
        let responses = &script.turns[0].responses;
        assert_eq!(responses[0], Response::text_only("hi {{user}}"));
        assert_eq!(responses[1].steps[1], Step::Pause { ms: 5 });
    }

    #[test]
    fn every_step_kind_parses() {
        let got = steps(
            r#"
- responses:
  - steps:
      - text: "abc"
        chunk_size: 2
        delay_ms: 3
      - tool_call: {name: calc, arguments: {expression: "6*7"}, id: c1}
      - tool_call: {name: raw, arguments: "{bad"}
      - tool_call: {name: none}
      - repeat_text: {text: x, times: 3}
      - usage: {input_tokens: 1, output_tokens: 2}
      - fail: boom
      - fail: {message: again, retryable: true}
      - finish: length
"#,
        );
        assert_eq!(
            got,
            vec![
                Step::Text {
                    text: "abc".into(),
                    chunk_size: Some(2),
                    delay_ms: Some(3)
                },
                Step::ToolCall {
                    id: Some("c1".into()),
                    name: "calc".into(),
                    arguments: ToolArguments::Json(serde_json::json!({"expression": "6*7"})),
                },
                Step::ToolCall {
                    id: None,
                    name: "raw".into(),
                    arguments: ToolArguments::Raw("{bad".into()),
                },
                Step::ToolCall {
                    id: None,
                    name: "none".into(),
                    arguments: ToolArguments::Json(serde_json::json!({})),
                },
                Step::RepeatText {
                    text: "x".into(),
                    times: 3
                },
                Step::Usage(TokenUsage {
                    input_tokens: 1,
                    output_tokens: 2,
                    total_tokens: 3
                }),
                Step::Fail {
                    message: "boom".into(),
                    retryable: false
                },
                Step::Fail {
                    message: "again".into(),
                    retryable: true
                },
                Step::Finish(FinishReason::Length),
            ]
        );
    }

    #[test]
    fn mapping_form_carries_defaults() {
        let script =
            parse_script("chunk_size: 7\ndelay_ms: 2\nturns:\n  - responses: [hello]\n").unwrap();
        assert_eq!(script.chunk_size, Some(7));
        assert_eq!(script.delay_ms, Some(2));
    }

    #[test]
    fn json_and_flow_yaml_both_parse() {
        let json = r#"[{"responses": [[{"text": "hi"}]]}]"#;
        let yaml_flow = "[{responses: [[{text: hi}]]}]";
        assert_eq!(
            parse_script(json).unwrap(),
            parse_script(yaml_flow).unwrap()
        );
    }

    fn error_of(text: &str) -> String {
        parse_script(text).unwrap_err()
    }

    #[test]
    fn errors_name_the_problem() {
        assert!(error_of("").contains("empty"));
        assert!(
            error_of("- responses: [[{text: a, tool_call: {name: b}}]]")
                .contains("`text` and `tool_call`")
        );
        assert!(error_of("- responses: [[{txt: a}]]").contains("txt"));
        assert!(error_of("- responses: [[{}]]").contains("empty step"));
        assert!(error_of("- responses: [[{text: a, chunk_size: 0}]]").contains("at least 1"));
        assert!(error_of("- responses: [[{fail: x, delay_ms: 3}]]").contains("delay_ms"));
        assert!(error_of("- responses: [[{usage: {}, chunk_size: 3}]]").contains("chunk_size"));
        assert!(error_of("- responses: [[{tool_call: {name: ' '}}]]").contains("non-empty"));
        assert!(
            error_of("- responses: [[{tool_call: {name: a, arguments: 3}}]]").contains("mapping")
        );
        assert!(error_of("- responses: [[{finish: ''}]]").contains("reason"));
        assert!(error_of("- name: x\n  responses: []").contains("turn 0 (\"x\") has no responses"));
        assert!(error_of("- {}").contains("responses"));
        assert!(error_of("- responses: [a]\n  when: {user_has: x}").contains("user_has"));
        assert!(
            error_of("- responses: [[{text: '{{usr}}'}]]").contains("unknown template `{{usr}}`")
        );
        assert!(error_of(r#"[{"responses": [}]"#).contains("line 1"));
        assert!(error_of("just a string").contains("list of turns"));
        assert!(error_of("turns: [] \nextra: 1").contains("extra"));
    }

    #[test]
    fn oversized_scripts_are_refused() {
        let big = " ".repeat(MAX_SCRIPT_BYTES + 1);
        assert!(error_of(&big).contains("limit"));
    }

    #[test]
    fn a_leading_bom_is_ignored() {
        assert!(parse_script("\u{feff}- responses: [hi]").is_ok());
    }
}
