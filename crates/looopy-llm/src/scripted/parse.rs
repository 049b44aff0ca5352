//! Reading scripts from YAML or JSON, with shorthands (a bare string is a text step or a
//! text-only response) and errors that say which key is wrong and where.

use std::fmt;

use serde::Deserialize;
use serde::de::value::{MapAccessDeserializer, SeqAccessDeserializer};
use serde::de::{self, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::Value;

use super::context::unknown_template;
use super::repeat::{self, MAX_REPEAT_BYTES};
use super::script::{MAX_SCRIPT_BYTES, Response, Script, Step, ToolArguments, Turn};
use super::step_parse::positive_chunk_size;

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
    let mut repeated: u64 = 0;
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
                        repeated = repeated.saturating_add(repeat::expanded_bytes(value)?);
                        if repeated > MAX_REPEAT_BYTES {
                            return Err(format!(
                                "{turn_label}, response {r}, step {s}: `$repeat` values of the \
                                 script expand to more than {MAX_REPEAT_BYTES} bytes in total"
                            ));
                        }
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

/// The strings of `value` that templates apply to (a `$repeat` text is literal).
fn collect_strings<'a>(value: &'a Value, out: &mut Vec<&'a str>) {
    if repeat::is_directive(value) {
        return;
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{FinishReason, TokenUsage};

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
