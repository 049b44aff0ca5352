//! `{"$repeat": {"text": "…", "times": N}}` in tool-call arguments: a string value of `text`
//! repeated `times` times, so a script of a few lines can make a tool write a file of many
//! megabytes (end-to-end tests of chunked artifacts need no real model).
//!
//! The directive is checked when the script loads (shape, and the total expanded size of
//! the whole script against [`MAX_REPEAT_BYTES`]) and expanded only when the call plays, so a
//! loaded script stays small however large the arguments it produces.

use serde_json::{Map, Value};

/// The key that marks a repeated string: a mapping whose only key is this one.
pub(crate) const REPEAT_KEY: &str = "$repeat";

/// Most bytes all `$repeat` values of one script may expand to, together: 256 MiB (a turn's
/// default event-log limit), far beyond any test and far below exhausting memory.
pub const MAX_REPEAT_BYTES: u64 = 256 * 1024 * 1024;

/// The `$repeat` body of `value`, if `value` is a `$repeat` directive.
fn directive(value: &Value) -> Option<&Value> {
    match value {
        Value::Object(map) if map.len() == 1 => map.get(REPEAT_KEY),
        _ => None,
    }
}

/// `text` and `times` of a directive body, or why it is malformed.
fn parts(body: &Value) -> Result<(&str, u64), String> {
    let fields = body
        .as_object()
        .ok_or_else(|| format!("`{REPEAT_KEY}` needs a mapping {{text, times}}, not {body}"))?;
    if let Some(other) = fields.keys().find(|k| *k != "text" && *k != "times") {
        return Err(format!(
            "`{REPEAT_KEY}` has unknown key `{other}` (expected `text` and `times`)"
        ));
    }
    let text = fields
        .get("text")
        .and_then(Value::as_str)
        .ok_or_else(|| format!("`{REPEAT_KEY}` needs `text`, a string"))?;
    let times = fields
        .get("times")
        .and_then(Value::as_u64)
        .ok_or_else(|| format!("`{REPEAT_KEY}` needs `times`, a whole number 0 or more"))?;
    Ok((text, times))
}

/// The bytes the `$repeat` directives inside `value` expand to, or why one is malformed.
/// Saturates rather than overflowing, so an absurd `times` is reported as too large.
pub(crate) fn expanded_bytes(value: &Value) -> Result<u64, String> {
    if let Some(body) = directive(value) {
        let (text, times) = parts(body)?;
        return Ok((text.len() as u64).saturating_mul(times));
    }
    match value {
        Value::Array(items) => items
            .iter()
            .try_fold(0u64, |sum, v| Ok(sum.saturating_add(expanded_bytes(v)?))),
        Value::Object(map) => map
            .values()
            .try_fold(0u64, |sum, v| Ok(sum.saturating_add(expanded_bytes(v)?))),
        _ => Ok(0),
    }
}

/// Whether `value` is a `$repeat` directive (its text is literal: no templates inside).
pub(crate) fn is_directive(value: &Value) -> bool {
    directive(value).is_some()
}

/// `value` with a `$repeat` directive replaced by its string, or `None` when `value` is not
/// one. A malformed directive cannot reach here (the script was checked when it loaded);
/// should one anyway, it is left as it is.
pub(crate) fn expand(value: &Value) -> Option<Value> {
    let (text, times) = parts(directive(value)?).ok()?;
    let times = usize::try_from(times).ok()?;
    Some(Value::String(text.repeat(times)))
}

/// Refuses arguments whose top level is itself a directive: arguments are a mapping of
/// named values, and a string there would only fail as an invalid call later.
pub(crate) fn check_arguments(arguments: &Map<String, Value>) -> Result<(), String> {
    if arguments.len() == 1 && arguments.contains_key(REPEAT_KEY) {
        return Err(format!(
            "`arguments` must be a mapping of values; put `{REPEAT_KEY}` under an argument name, \
             e.g. {{content: {{{REPEAT_KEY}: {{text: \"ab\", times: 3}}}}}}"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn directives_are_measured_wherever_they_are() {
        let value = json!({
            "a": {"$repeat": {"text": "ab", "times": 3}},
            "b": [1, {"$repeat": {"text": "é", "times": 2}}],
            "c": "plain",
        });
        assert_eq!(expanded_bytes(&value), Ok(6 + 4));
        assert_eq!(expand(&value["a"]), Some(Value::String("ababab".into())));
        assert_eq!(expand(&value["c"]), None);
        // A mapping with other keys beside `$repeat` is plain data.
        let other = json!({"$repeat": {"text": "x", "times": 2}, "more": 1});
        assert!(!is_directive(&other));
        assert_eq!(expanded_bytes(&other), Ok(0));
    }

    #[test]
    fn malformed_directives_say_what_is_wrong() {
        let err = |v: Value| expanded_bytes(&json!({"a": {"$repeat": v}})).unwrap_err();
        assert!(err(json!("x")).contains("mapping"));
        assert!(err(json!({"times": 2})).contains("`text`"));
        assert!(err(json!({"text": "x", "times": -1})).contains("`times`"));
        assert!(err(json!({"text": "x", "times": 2, "sep": ","})).contains("`sep`"));
    }

    #[test]
    fn absurd_sizes_saturate_instead_of_overflowing() {
        let value = json!({"a": {"$repeat": {"text": "xx", "times": u64::MAX}}});
        assert_eq!(expanded_bytes(&value), Ok(u64::MAX));
    }
}
