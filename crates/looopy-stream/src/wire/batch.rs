//! The `<execute>` body: scanning it with JSON-string awareness, and validating the batch.

use super::WireCall;
use super::markers::find_either;
use serde_json::{Map, Value};

/// Cap on an `<execute>` body. A larger body is reported once as an error and discarded
/// while the parser keeps looking for `</execute>`, so memory stays bounded.
pub const MAX_EXECUTE_BODY: usize = 1024 * 1024;

/// Accumulates an `<execute>` body, tracking whether the scan is inside a JSON string so
/// `</execute>` written inside a string argument does not close the block. Each byte is
/// scanned once; the state survives chunk boundaries.
#[derive(Debug, Default)]
pub(super) struct ExecuteBody {
    text: String,
    in_string: bool,
    escaped: bool,
    overflowed: bool,
}

/// What the body scanner reports back to the parser.
pub(super) enum Scan {
    /// The whole input was body text.
    Consumed,
    /// A `<` outside any JSON string at this byte offset: it may start `</execute>`.
    MarkerAt(usize),
}

impl ExecuteBody {
    pub(super) fn reset(&mut self) {
        self.text.clear();
        if self.text.capacity() > 64 * 1024 {
            self.text.shrink_to(64 * 1024);
        }
        self.in_string = false;
        self.escaped = false;
        self.overflowed = false;
    }

    /// Whether the body outgrew [`MAX_EXECUTE_BODY`] (already reported).
    pub(super) fn overflowed(&self) -> bool {
        self.overflowed
    }

    pub(super) fn as_str(&self) -> &str {
        &self.text
    }

    /// Scans `input` up to the first `<` outside a JSON string, appending what precedes it.
    /// Returns `true` in `.1` when this append pushed the body over the cap.
    pub(super) fn scan(&mut self, input: &str) -> (Scan, bool) {
        let bytes = input.as_bytes();
        let mut at = 0;
        while at < bytes.len() {
            if self.in_string {
                if self.escaped {
                    self.escaped = false;
                    at += 1;
                    continue;
                }
                match find_either(b'"', b'\\', &bytes[at..]) {
                    None => break,
                    Some(offset) => {
                        let found = at + offset;
                        if bytes[found] == b'\\' {
                            self.escaped = true;
                        } else {
                            self.in_string = false;
                        }
                        at = found + 1;
                    }
                }
            } else {
                match find_either(b'"', b'<', &bytes[at..]) {
                    None => break,
                    Some(offset) => {
                        let found = at + offset;
                        if bytes[found] == b'"' {
                            self.in_string = true;
                            at = found + 1;
                        } else {
                            let overflow = self.append(&input[..found]);
                            return (Scan::MarkerAt(found), overflow);
                        }
                    }
                }
            }
        }
        let overflow = self.append(input);
        (Scan::Consumed, overflow)
    }

    /// Appends literal body text (a held `<…` that turned out not to be `</execute>`; it
    /// contains no quote, so the string state is unaffected). Returns `true` on overflow.
    pub(super) fn append(&mut self, text: &str) -> bool {
        if self.overflowed {
            return false;
        }
        if self.text.len() + text.len() > MAX_EXECUTE_BODY {
            self.overflowed = true;
            self.text = String::new();
            return true;
        }
        self.text.push_str(text);
        false
    }
}

/// Parses and validates a batch: a non-empty JSON array of `{"name": string, "args": object}`
/// (missing `args` means `{}`; other keys are ignored). The error says what is wrong, with
/// serde_json's line/column for malformed JSON.
pub(super) fn parse_batch(body: &str) -> Result<Vec<WireCall>, String> {
    let value: Value = serde_json::from_str(body)
        .map_err(|error| format!("invalid JSON in <execute> block: {error}"))?;
    let Value::Array(items) = value else {
        return Err(format!(
            "<execute> block must hold a JSON array of calls, found {}",
            json_kind(&value)
        ));
    };
    if items.is_empty() {
        return Err("<execute> block holds an empty array; a batch needs at least one call".into());
    }
    items
        .into_iter()
        .enumerate()
        .map(|(index, item)| parse_call(index, item))
        .collect()
}

fn parse_call(index: usize, item: Value) -> Result<WireCall, String> {
    let Value::Object(mut object) = item else {
        return Err(format!(
            "calls[{index}] must be an object with \"name\" and \"args\", found {}",
            json_kind(&item)
        ));
    };
    let name = match object.remove("name") {
        Some(Value::String(name)) => name,
        Some(other) => {
            return Err(format!(
                "calls[{index}].name must be a string, found {}",
                json_kind(&other)
            ));
        }
        None => return Err(format!("calls[{index}] has no \"name\"")),
    };
    let args = match object.remove("args") {
        None => Map::new(),
        Some(Value::Object(args)) => args,
        Some(other) => {
            return Err(format!(
                "calls[{index}].args (tool {name:?}) must be an object, found {}",
                json_kind(&other)
            ));
        }
    };
    Ok(WireCall { name, args })
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
    use super::*;

    fn scan_all(body: &mut ExecuteBody, input: &str) -> Option<usize> {
        match body.scan(input).0 {
            Scan::Consumed => None,
            Scan::MarkerAt(at) => Some(at),
        }
    }

    #[test]
    fn angle_bracket_inside_a_json_string_is_body_text() {
        let mut body = ExecuteBody::default();
        let input = r#"[{"name":"w","args":{"t":"</execute> \"<\\"}}]<"#;
        assert_eq!(scan_all(&mut body, input), Some(input.len() - 1));
        assert!(parse_batch(body.as_str()).is_ok());
    }

    #[test]
    fn string_and_escape_state_survive_chunk_boundaries() {
        let mut body = ExecuteBody::default();
        assert_eq!(scan_all(&mut body, r#"["a\"#), None);
        assert_eq!(
            scan_all(&mut body, r#"" <"#),
            None,
            "escaped quote keeps the string open"
        );
        assert_eq!(scan_all(&mut body, r#"" <"#), Some(2));
        assert_eq!(body.as_str(), r#"["a\" <" "#);
    }

    #[test]
    fn batch_errors_say_what_is_wrong() {
        let cases = [
            (
                "[{\"name\": }]",
                "invalid JSON in <execute> block: expected value at line 1 column 11",
            ),
            (
                "{\"name\": \"x\"}",
                "must hold a JSON array of calls, found an object",
            ),
            ("[]", "empty array"),
            ("[1]", "calls[0] must be an object"),
            ("[{\"args\": {}}]", "calls[0] has no \"name\""),
            (
                "[{\"name\": \"a\"}, {\"name\": 3}]",
                "calls[1].name must be a string, found a number",
            ),
            (
                "[{\"name\": \"a\", \"args\": [1]}]",
                "calls[0].args (tool \"a\") must be an object, found an array",
            ),
            (
                "[{\"name\": \"a\", \"args\": null}]",
                "must be an object, found null",
            ),
        ];
        for (body, expected) in cases {
            let error = parse_batch(body).err().unwrap_or_default();
            assert!(error.contains(expected), "{body}: {error}");
        }
    }

    #[test]
    fn missing_args_is_an_empty_object_and_extra_keys_are_ignored() {
        let calls = parse_batch(r#"[{"name":"a"},{"name":"b","args":{"x":1},"id":"c1"}]"#);
        let calls = calls.unwrap_or_default();
        assert_eq!(calls.len(), 2);
        assert!(calls[0].args.is_empty());
        assert_eq!(calls[1].args.get("x"), Some(&Value::from(1)));
    }

    #[test]
    fn body_over_the_cap_overflows_once_and_frees_memory() {
        let mut body = ExecuteBody::default();
        let big = "x".repeat(MAX_EXECUTE_BODY);
        assert!(!body.scan(&big).1);
        assert!(body.scan("yy").1);
        assert!(body.overflowed());
        assert!(!body.scan("zz").1, "reported only once");
        assert_eq!(body.as_str().len(), 0);
    }
}
