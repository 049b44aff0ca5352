//! Normalisers for insta snapshots: generated ids, timestamps and durations replaced by
//! stable placeholders, so a snapshot records the shape and order of events, not one run.

use looopy_protocol::Event;
use serde_json::Value;

/// Events as JSON with generated ids (`task-…`, `input-…`, `call-…` followed by 32 hex
/// digits, named `[task-1]`, `[task-2]`, … in order of first appearance), timestamps and
/// durations replaced. `seq` is kept: the order is part of the contract.
pub fn normalised(events: &[Event]) -> Vec<Value> {
    let mut ids = IdNames::default();
    events
        .iter()
        .map(|e| {
            let mut v = serde_json::to_value(e).unwrap();
            scrub(&mut v, &mut ids);
            v
        })
        .collect()
}

/// [`normalised`] for any JSON value (ids are numbered within this one value).
pub fn normalised_value(mut value: Value) -> Value {
    scrub(&mut value, &mut IdNames::default());
    value
}

#[derive(Default)]
struct IdNames {
    seen: Vec<(String, String)>,
}

impl IdNames {
    fn name(&mut self, id: &str, prefix: &str) -> String {
        if let Some((_, name)) = self.seen.iter().find(|(seen, _)| seen == id) {
            return name.clone();
        }
        let n = self
            .seen
            .iter()
            .filter(|(s, _)| s.starts_with(prefix))
            .count()
            + 1;
        let name = format!("[{prefix}-{n}]");
        self.seen.push((id.to_string(), name.clone()));
        name
    }
}

fn scrub(v: &mut Value, ids: &mut IdNames) {
    match v {
        Value::Object(map) => {
            for (key, value) in map.iter_mut() {
                match key.as_str() {
                    "timestamp" => *value = Value::from("[timestamp]"),
                    "duration" | "durationMs" => *value = Value::from("[duration]"),
                    _ => scrub(value, ids),
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|i| scrub(i, ids)),
        Value::String(s) => *s = replace_ids(s, ids),
        _ => {}
    }
}

/// Replaces `task-…`, `input-…`, `call-…` ids (prefix + 32 hex digits) in `s`.
fn replace_ids(s: &str, ids: &mut IdNames) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    'outer: while !rest.is_empty() {
        for prefix in ["task", "input", "call"] {
            let tag = format!("{prefix}-");
            if rest.starts_with(&tag) {
                let hex = &rest[tag.len()..];
                if hex.len() >= 32 && hex.as_bytes()[..32].iter().all(u8::is_ascii_hexdigit) {
                    let id = &rest[..tag.len() + 32];
                    out.push_str(&ids.name(id, prefix));
                    rest = &rest[tag.len() + 32..];
                    continue 'outer;
                }
            }
        }
        let c = rest.chars().next().unwrap();
        out.push(c);
        rest = &rest[c.len_utf8()..];
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_timestamps_and_durations_become_placeholders() {
        let a = format!("task-{}", "a".repeat(32));
        let b = format!("task-{}", "b".repeat(32));
        let value = serde_json::json!({
            "taskId": a, "other": b, "again": format!("{a}/1"),
            "timestamp": "2026-01-01T00:00:00Z", "metadata": {"duration": 12},
            "short": "task-abc",
        });
        assert_eq!(
            normalised_value(value),
            serde_json::json!({
                "taskId": "[task-1]", "other": "[task-2]", "again": "[task-1]/1",
                "timestamp": "[timestamp]", "metadata": {"duration": "[duration]"},
                "short": "task-abc",
            })
        );
    }
}
