//! Trimming conversation history to a message budget without breaking it: an assistant
//! message that calls tools and the tool results answering it are kept or dropped together,
//! because a provider rejects a tool result whose call is missing (and a call without its
//! result).
//!
//! This is the agent's policy, not the store's: the store keeps every message of a
//! conversation; what part of it the model sees on the next call ([`AgentConfig::history_limit`])
//! is decided here.
//!
//! [`AgentConfig::history_limit`]: crate::AgentConfig::history_limit

use std::collections::HashMap;

use looopy_protocol::{Message, Role};

/// The most recent messages of `messages`, about `max_messages` of them, as a valid
/// conversation:
///
/// * a leading system message is always kept (it counts toward the budget);
/// * the cut is made only where no tool call before it has its result after it;
/// * when no such cut keeps at least one message within the budget (the newest tool
///   exchange alone is bigger than the budget), the cut moves back to the nearest valid
///   place, so the result can exceed `max_messages` — a valid history is worth more than
///   the exact count.
///
/// `max_messages == 0` gives an empty history.
pub(crate) fn trim_history(messages: &[Message], max_messages: usize) -> Vec<Message> {
    if messages.len() <= max_messages {
        return messages.to_vec();
    }
    if max_messages == 0 {
        return Vec::new();
    }
    let head = usize::from(messages.first().is_some_and(|m| m.role == Role::System));
    let budget = max_messages - head;
    let cut = if budget == 0 {
        messages.len()
    } else {
        let safe = safe_cuts(messages);
        let target = messages.len() - budget;
        (target..messages.len())
            .find(|&s| safe[s])
            .or_else(|| (head..target).rev().find(|&s| safe[s]))
            .unwrap_or(head)
    };
    let mut kept = Vec::with_capacity(head + messages.len() - cut);
    kept.extend_from_slice(&messages[..head]);
    kept.extend_from_slice(&messages[cut..]);
    kept
}

/// `safe[s]` is true when cutting before message `s` separates no tool call from its
/// result. A result answers the latest earlier assistant call with its id; results whose
/// call is not in `messages` constrain nothing.
fn safe_cuts(messages: &[Message]) -> Vec<bool> {
    let n = messages.len();
    // +1 where a call/result span opens (just after the call), -1 where it closes.
    let mut depth_change = vec![0i64; n + 1];
    let mut call_at: HashMap<&str, usize> = HashMap::new();
    for (index, message) in messages.iter().enumerate() {
        match message.role {
            Role::Assistant => {
                for call in &message.tool_calls {
                    call_at.insert(call.id.as_str(), index);
                }
            }
            Role::Tool => {
                let call = message
                    .tool_call_id
                    .as_deref()
                    .and_then(|id| call_at.get(id));
                if let Some(&call) = call {
                    // Cuts call+1 ..= index would separate them.
                    depth_change[call + 1] += 1;
                    depth_change[index + 1] -= 1;
                }
            }
            Role::System | Role::User => {}
        }
    }
    let mut depth = 0;
    depth_change
        .iter()
        .take(n)
        .map(|change| {
            depth += change;
            depth == 0
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use looopy_protocol::ToolCall;
    use proptest::prelude::*;

    fn call(id: &str) -> ToolCall {
        ToolCall {
            id: id.into(),
            name: "t".into(),
            arguments: serde_json::json!({}),
        }
    }

    #[test]
    fn short_history_is_unchanged() {
        let msgs = vec![Message::user("a"), Message::assistant("b")];
        assert_eq!(trim_history(&msgs, 2), msgs);
        assert_eq!(trim_history(&msgs, 10), msgs);
        assert!(trim_history(&msgs, 0).is_empty());
    }

    #[test]
    fn keeps_system_and_never_splits_a_tool_exchange() {
        let msgs = vec![
            Message::system("sys"),
            Message::user("q1"),
            Message::assistant_with_tools("", vec![call("a"), call("b")]),
            Message::tool_result("a", "t", "1", false),
            Message::tool_result("b", "t", "2", false),
            Message::assistant("done"),
        ];
        // Budget 3 would start at the first tool result; the cut moves forward past it.
        let out = trim_history(&msgs, 3);
        assert_eq!(out, vec![msgs[0].clone(), msgs[5].clone()]);
        // Budget 5 keeps the whole exchange.
        let out = trim_history(&msgs, 5);
        assert_eq!(out, [&msgs[..1], &msgs[2..]].concat());
    }

    #[test]
    fn an_exchange_bigger_than_the_budget_is_kept_whole() {
        let msgs = vec![
            Message::user("q"),
            Message::assistant_with_tools("", vec![call("a"), call("b"), call("c")]),
            Message::tool_result("a", "t", "1", false),
            Message::tool_result("b", "t", "2", false),
            Message::tool_result("c", "t", "3", false),
        ];
        let out = trim_history(&msgs, 2);
        assert_eq!(out, msgs[1..].to_vec());
    }

    /// Builds a conversation from random operations: user and assistant text, assistant
    /// messages calling 1–3 tools, results answered later (possibly interleaved with other
    /// messages, possibly never).
    fn build(system: bool, ops: &[(u8, u8)]) -> Vec<Message> {
        let mut msgs = Vec::new();
        if system {
            msgs.push(Message::system("sys"));
        }
        let mut pending: Vec<String> = Vec::new();
        let mut next_id = 0;
        for &(op, arg) in ops {
            match op % 4 {
                0 => msgs.push(Message::user("u")),
                1 => msgs.push(Message::assistant("a")),
                2 => {
                    let calls: Vec<ToolCall> = (0..=arg % 3)
                        .map(|_| {
                            next_id += 1;
                            call(&format!("c{next_id}"))
                        })
                        .collect();
                    pending.extend(calls.iter().map(|c| c.id.clone()));
                    msgs.push(Message::assistant_with_tools("", calls));
                }
                _ => {
                    if !pending.is_empty() {
                        let id = pending.remove(usize::from(arg) % pending.len());
                        msgs.push(Message::tool_result(id, "t", "r", false));
                    }
                }
            }
        }
        msgs
    }

    /// Whether `out` pairs every call with its result, judged against the input.
    fn pairs_intact(input: &[Message], out: &[Message]) -> bool {
        let answered: Vec<&str> = input
            .iter()
            .filter_map(|m| m.tool_call_id.as_deref())
            .collect();
        let called: Vec<&str> = input
            .iter()
            .flat_map(|m| m.tool_calls.iter().map(|c| c.id.as_str()))
            .collect();
        let out_calls: Vec<&str> = out
            .iter()
            .flat_map(|m| m.tool_calls.iter().map(|c| c.id.as_str()))
            .collect();
        let out_results: Vec<&str> = out
            .iter()
            .filter_map(|m| m.tool_call_id.as_deref())
            .collect();
        out_results
            .iter()
            .all(|id| !called.contains(id) || out_calls.contains(id))
            && out_calls
                .iter()
                .all(|id| !answered.contains(id) || out_results.contains(id))
    }

    proptest! {
        #[test]
        fn trimming_never_separates_calls_from_results(
            system in any::<bool>(),
            ops in proptest::collection::vec((0u8..4, any::<u8>()), 0..60),
            max in 0usize..40,
        ) {
            let input = build(system, &ops);
            let out = trim_history(&input, max);
            prop_assert!(pairs_intact(&input, &out));
            if input.len() <= max {
                prop_assert_eq!(&out, &input);
                return Ok(());
            }
            if max == 0 {
                prop_assert!(out.is_empty());
                return Ok(());
            }
            // System kept, then a contiguous suffix of the input.
            let head = usize::from(system);
            prop_assert_eq!(&out[..head], &input[..head]);
            let tail = &out[head..];
            prop_assert_eq!(tail, &input[input.len() - tail.len()..]);
            // The suffix is the longest valid one within budget; only when no valid
            // non-empty suffix fits may it be longer, and then it is the shortest valid one.
            let budget = max - head;
            let valid = |len: usize| {
                let suffix = &input[input.len() - len..];
                pairs_intact(&input, &[&input[..head], suffix].concat())
            };
            let best_within = (1..=budget.min(input.len() - head)).rev().find(|&l| valid(l));
            match best_within {
                Some(len) => prop_assert_eq!(tail.len(), len),
                None if budget == 0 => prop_assert!(tail.is_empty()),
                None => {
                    let shortest = (budget + 1..=input.len() - head).find(|&l| valid(l));
                    prop_assert_eq!(Some(tail.len()), shortest);
                }
            }
        }
    }
}
