//! What the script needs to know about a request: where in the turn the conversation is,
//! what the user said, the latest tool result — and the `{{…}}` templates built from them.

use looopy_protocol::Role;

use super::script::Matcher;
use crate::ChatRequest;

/// Template names a script may use inside `{{…}}`.
pub(crate) const TEMPLATE_NAMES: [&str; 3] = ["user", "last_tool_result", "calculation"];

/// The facts about one request that select and fill in a scripted response.
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct Conversation {
    /// Content of the last user message (empty when there is none).
    pub last_user: String,
    /// Content of the most recent tool message anywhere in the conversation.
    pub last_tool_result: String,
    /// Number of assistant messages after the last user message: which response of the
    /// turn this call is. Derived from the history alone, so a resumed conversation picks up
    /// exactly where it stopped.
    pub response_index: usize,
    /// The first arithmetic expression in the last user message.
    pub calculation: Option<String>,
    /// Names of the tools the request offers.
    pub tools: Vec<String>,
    /// Number of messages in the request (used for deterministic tool-call ids).
    pub message_count: usize,
    /// Characters of all message contents and tool-call arguments (for the usage estimate).
    pub input_chars: u64,
    /// The request uses the text wire protocol (no tool definitions, a system prompt that
    /// teaches `<execute>`): tool calls are written as an `<execute>` block and tool results
    /// arrive as `<results>` user messages.
    pub wire: bool,
    /// The calling agent's name ([`ChatRequest::agent`]), for `when.agent`.
    pub agent: Option<String>,
}

/// Whether a user message is a wire-protocol tool result rather than something the user said.
fn is_wire_results(m: &looopy_protocol::Message) -> bool {
    m.role == Role::User && m.content.trim_start().starts_with("<results>")
}

/// The `content` of the last result in a `<results>[…]</results>` message (the raw body
/// when it is not the expected JSON).
fn last_wire_result(content: &str) -> String {
    let body = content
        .trim()
        .trim_start_matches("<results>")
        .trim_end_matches("</results>")
        .trim();
    match serde_json::from_str::<serde_json::Value>(body) {
        Ok(serde_json::Value::Array(items)) => match items.last().map(|i| &i["content"]) {
            Some(serde_json::Value::String(s)) => s.clone(),
            Some(serde_json::Value::Null) | None => String::new(),
            Some(other) => other.to_string(),
        },
        _ => body.to_string(),
    }
}

/// Tool names listed as `## name` headings in a wire-protocol system prompt.
fn wire_tool_names(system: &str) -> Vec<String> {
    system
        .lines()
        .filter_map(|l| l.strip_prefix("## "))
        .map(|name| name.trim().to_string())
        .filter(|name| !name.is_empty() && !name.contains(' '))
        .collect()
}

impl Conversation {
    pub fn from_request(request: &ChatRequest) -> Self {
        let messages = &request.messages;
        let wire = request.tools.is_empty()
            && messages
                .iter()
                .any(|m| m.role == Role::System && m.content.contains("<execute>"));
        let last_user_pos = messages
            .iter()
            .rposition(|m| m.role == Role::User && !is_wire_results(m));
        let last_user = last_user_pos
            .map(|i| messages[i].content.clone())
            .unwrap_or_default();
        let after_user = last_user_pos.map_or(0, |i| i + 1);
        let response_index = messages[after_user..]
            .iter()
            .filter(|m| m.role == Role::Assistant)
            .count();
        let last_tool_result = messages
            .iter()
            .rev()
            .find_map(|m| match m.role {
                Role::Tool => Some(m.content.clone()),
                _ if is_wire_results(m) => Some(last_wire_result(&m.content)),
                _ => None,
            })
            .unwrap_or_default();
        let tools = if wire {
            messages
                .iter()
                .filter(|m| m.role == Role::System)
                .flat_map(|m| wire_tool_names(&m.content))
                .collect()
        } else {
            request.tools.iter().map(|t| t.name.clone()).collect()
        };
        let input_chars = messages
            .iter()
            .map(|m| {
                let args: usize = m
                    .tool_calls
                    .iter()
                    .map(|c| c.name.len() + c.arguments.to_string().len())
                    .sum();
                (m.content.chars().count() + args) as u64
            })
            .sum();
        Self {
            calculation: find_calculation(&last_user),
            last_user,
            last_tool_result,
            response_index,
            tools,
            message_count: messages.len(),
            input_chars,
            wire,
            agent: request.agent.clone(),
        }
    }

    /// Whether every condition of `matcher` holds.
    pub fn matches(&self, matcher: &Matcher) -> bool {
        let contains = matcher.user_contains.is_empty()
            || matcher
                .user_contains
                .iter()
                .any(|phrase| contains_phrase(&self.last_user, phrase));
        let calculation = matcher
            .user_matches_calculation
            .is_none_or(|expected| expected == self.calculation.is_some());
        let tools = matcher
            .tool_available
            .iter()
            .all(|name| self.tools.iter().any(|t| t == name));
        let agent = matcher.agent.is_empty()
            || self
                .agent
                .as_deref()
                .is_some_and(|name| matcher.agent.iter().any(|a| a == name));
        contains && calculation && tools && agent
    }

    /// Expands `{{user}}`, `{{last_tool_result}}` and `{{calculation}}` in one pass, so text
    /// coming from the conversation is never expanded again. Unknown names stay verbatim.
    pub fn render(&self, template: &str) -> String {
        let mut out = String::with_capacity(template.len());
        let mut rest = template;
        while let Some(open) = rest.find("{{") {
            out.push_str(&rest[..open]);
            let after = &rest[open + 2..];
            let Some(close) = after.find("}}") else {
                out.push_str(&rest[open..]);
                return out;
            };
            match self.value_of(after[..close].trim()) {
                Some(value) => out.push_str(value),
                None => out.push_str(&rest[open..open + 2 + close + 2]),
            }
            rest = &after[close + 2..];
        }
        out.push_str(rest);
        out
    }

    fn value_of(&self, name: &str) -> Option<&str> {
        match name {
            "user" => Some(&self.last_user),
            "last_tool_result" => Some(&self.last_tool_result),
            "calculation" => Some(self.calculation.as_deref().unwrap_or("")),
            _ => None,
        }
    }
}

/// The first `{{name}}` in `text` whose name looks like a template name but is not one.
pub(crate) fn unknown_template(text: &str) -> Option<&str> {
    let mut rest = text;
    while let Some(open) = rest.find("{{") {
        let after = &rest[open + 2..];
        let close = after.find("}}")?;
        let name = after[..close].trim();
        let identifier =
            !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if identifier && !TEMPLATE_NAMES.contains(&name) {
            return Some(name);
        }
        rest = &after[close + 2..];
    }
    None
}

/// Case-insensitive search for `phrase` in `text` at word boundaries, so `time` matches
/// "what time is it" but not "sometimes".
fn contains_phrase(text: &str, phrase: &str) -> bool {
    let phrase = phrase.trim().to_lowercase();
    if phrase.is_empty() {
        return false;
    }
    let text = text.to_lowercase();
    let is_word = |c: char| c.is_alphanumeric() || c == '_';
    let mut from = 0;
    while let Some(found) = text[from..].find(&phrase) {
        let start = from + found;
        let end = start + phrase.len();
        let before_ok = text[..start]
            .chars()
            .next_back()
            .is_none_or(|c| !is_word(c));
        let after_ok = text[end..].chars().next().is_none_or(|c| !is_word(c));
        if before_ok && after_ok {
            return true;
        }
        // Advance by one character past this occurrence's start.
        from = start + text[start..].chars().next().map_or(1, char::len_utf8);
    }
    false
}

const OPERATORS: &[char] = &['+', '-', '*', '/', '%', '^'];

/// The first arithmetic expression in `text` (digits joined by at least one binary
/// operator, with parentheses and spaces), trimmed of surrounding punctuation: "What is
/// 6*7?" gives `6*7`.
pub(crate) fn find_calculation(text: &str) -> Option<String> {
    let allowed = |c: char| {
        c.is_ascii_digit() || c == '.' || c == ' ' || c == '(' || c == ')' || OPERATORS.contains(&c)
    };
    text.split(|c: char| !allowed(c)).find_map(|run| {
        let run = run.trim_start_matches(|c: char| {
            !(c.is_ascii_digit() || c == '(' || c == '-' || c == '.')
        });
        let run = run.trim_end_matches(|c: char| !(c.is_ascii_digit() || c == ')'));
        has_binary_operator(run).then(|| run.to_string())
    })
}

/// Whether some operator in `expr` has an operand on both sides.
fn has_binary_operator(expr: &str) -> bool {
    let chars: Vec<char> = expr.chars().filter(|c| *c != ' ').collect();
    chars.iter().enumerate().any(|(i, c)| {
        OPERATORS.contains(c)
            && i > 0
            && matches!(chars[i - 1], '0'..='9' | ')' | '.')
            && chars
                .get(i + 1)
                .is_some_and(|n| n.is_ascii_digit() || matches!(n, '(' | '-' | '.'))
    })
}

#[cfg(test)]
mod tests {
    use looopy_protocol::Message;

    use super::*;
    use crate::ToolDefinition;

    fn request(messages: Vec<Message>) -> ChatRequest {
        ChatRequest {
            messages,
            ..ChatRequest::default()
        }
    }

    #[test]
    fn response_index_counts_assistant_messages_after_the_last_user_message() {
        let conv = Conversation::from_request(&request(vec![
            Message::system("sys"),
            Message::user("first"),
            Message::assistant("a"),
            Message::user("second"),
            Message::assistant_with_tools("", vec![]),
            Message::tool_result("c1", "calculator", "42", false),
            Message::assistant("b"),
        ]));
        assert_eq!(conv.last_user, "second");
        assert_eq!(conv.response_index, 2);
        assert_eq!(conv.last_tool_result, "42");
        assert_eq!(conv.message_count, 7);
    }

    #[test]
    fn wire_protocol_results_count_as_tool_results_not_user_messages() {
        let mut req = request(vec![
            Message::system("Use <execute>[…]</execute>.\n# Tools\n\n## calculator\nEvaluates.\n"),
            Message::user("What is 6*7?"),
            Message::assistant("<execute>\n[{\"name\":\"calculator\",\"args\":{}}]\n</execute>"),
            Message::user(
                "<results>\n[{\"tool\":\"calculator\",\"status\":\"success\",\"content\":\"42\"}]\n</results>",
            ),
        ]);
        req.tools.clear();
        let conv = Conversation::from_request(&req);
        assert!(conv.wire);
        assert_eq!(conv.last_user, "What is 6*7?");
        assert_eq!(conv.response_index, 1);
        assert_eq!(conv.last_tool_result, "42");
        assert_eq!(conv.tools, vec!["calculator".to_string()]);
    }

    #[test]
    fn empty_conversation_is_response_zero_with_empty_texts() {
        let conv = Conversation::from_request(&request(vec![]));
        assert_eq!(conv, Conversation::default());
    }

    #[test]
    fn render_expands_known_names_once_and_keeps_the_rest() {
        let conv = Conversation {
            last_user: "say {{last_tool_result}}".into(),
            last_tool_result: "42".into(),
            calculation: Some("6*7".into()),
            ..Conversation::default()
        };
        assert_eq!(
            conv.render("{{ user }} / {{last_tool_result}} / {{calculation}} / {{other}} / {{open"),
            "say {{last_tool_result}} / 42 / 6*7 / {{other}} / {{open"
        );
        assert_eq!(conv.render("no templates"), "no templates");
        assert_eq!(
            conv.render("ünïcödé {{user}}!"),
            "ünïcödé say {{last_tool_result}}!"
        );
    }

    #[test]
    fn unknown_template_finds_misspelled_names_only() {
        assert_eq!(unknown_template("{{user}} {{usr}}"), Some("usr"));
        assert_eq!(unknown_template("{{ last_tool_result }}"), None);
        assert_eq!(unknown_template("json {{\"a\": 1}} and {{ }}"), None);
        assert_eq!(unknown_template("{{unclosed"), None);
    }

    #[test]
    fn phrases_match_case_insensitively_at_word_boundaries() {
        assert!(contains_phrase("What TIME is it?", "time"));
        assert!(contains_phrase("time", "time"));
        assert!(!contains_phrase("sometimes", "time"));
        assert!(contains_phrase("sometimes, at time of day", "time"));
        assert!(contains_phrase("please ask me something", "Ask me"));
        assert!(!contains_phrase("anything", ""));
        assert!(contains_phrase("ÄÖ time", "time"));
    }

    #[test]
    fn calculations_are_found_and_trimmed() {
        assert_eq!(find_calculation("What is 6*7?").as_deref(), Some("6*7"));
        assert_eq!(find_calculation("what's 2 + 2.").as_deref(), Some("2 + 2"));
        assert_eq!(
            find_calculation("compute (1+2)*3 please").as_deref(),
            Some("(1+2)*3")
        );
        assert_eq!(find_calculation("-3 - -4").as_deref(), Some("-3 - -4"));
        assert_eq!(find_calculation("GPT-4 is a model"), None);
        assert_eq!(find_calculation("I have 3 apples"), None);
        assert_eq!(find_calculation("a/b and c*d"), None);
        assert_eq!(find_calculation(""), None);
        assert_eq!(find_calculation("+-*/"), None);
    }

    #[test]
    fn matcher_conditions_all_hold() {
        let conv = Conversation::from_request(&ChatRequest {
            messages: vec![Message::user("what is 6*7")],
            tools: vec![ToolDefinition {
                name: "calculator".into(),
                description: String::new(),
                parameters: serde_json::json!({}),
            }],
            ..ChatRequest::default()
        });
        assert!(conv.matches(&Matcher::any()));
        assert!(conv.matches(&Matcher::any().user_matches_calculation(true)));
        assert!(!conv.matches(&Matcher::any().user_matches_calculation(false)));
        assert!(conv.matches(&Matcher::any().tool_available("calculator")));
        assert!(
            !conv.matches(
                &Matcher::any()
                    .tool_available("calculator")
                    .tool_available("x")
            )
        );
        assert!(conv.matches(&Matcher::any().user_contains("nope").user_contains("WHAT")));
        assert!(!conv.matches(&Matcher::any().user_contains("nope")));
        // `agent` holds only for a request that names one of the agents.
        assert!(!conv.matches(&Matcher::any().agent("researcher")));
        let researcher = Conversation {
            agent: Some("researcher".into()),
            ..conv.clone()
        };
        assert!(researcher.matches(&Matcher::any().agent("writer").agent("researcher")));
        assert!(!researcher.matches(&Matcher::any().agent("writer")));
    }
}
