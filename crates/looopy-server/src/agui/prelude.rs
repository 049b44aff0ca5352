//! The join prelude of a resumed AG-UI stream, and the cursor it resumes from.
//!
//! `@ag-ui/client` checks that every `…_END` / `…_FINISHED` closes something its stream
//! opened. A stream resumed in the middle of a run would fail that check, so it starts
//! with a prelude: `RUN_STARTED` again, then the opening event of every sub-agent, step,
//! reasoning span and message, text message and tool call that was open at the cursor —
//! the very events the first stream sent, same ids. [`OpenSet`] tracks what is open by
//! watching the AG-UI events themselves, so it works for any cursor, also one that falls
//! between the several AG-UI events of one log event.

use serde_json::Value;

use super::mapping::AguiEvent;

/// Where a client resumes: after the log event `seq`, or after its first `part` AG-UI
/// events when one log event became several.
///
/// Frame ids are `"{seq}"` on the last AG-UI event of a log event and `"{seq}.{part}"`
/// (1-based) on the ones before it, so `Last-Event-ID` always names an exact frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Cursor {
    pub seq: u64,
    pub part: Option<usize>,
}

impl Cursor {
    /// Parses `"N"` or `"N.k"`; `None` when malformed.
    pub fn parse(raw: &str) -> Option<Self> {
        let raw = raw.trim();
        let (seq, part) = match raw.split_once('.') {
            Some((seq, part)) => (seq, Some(part)),
            None => (raw, None),
        };
        let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
        if !digits(seq) || part.is_some_and(|p| !digits(p)) {
            return None;
        }
        Some(Self {
            seq: seq.parse().ok()?,
            part: match part {
                Some(p) => Some(p.parse().ok()?),
                None => None,
            },
        })
    }

    /// The frame id of the `part`-th (1-based) of `of` AG-UI events of log event `seq`.
    pub fn frame_id(seq: u64, part: usize, of: usize) -> String {
        if part >= of {
            seq.to_string()
        } else {
            format!("{seq}.{part}")
        }
    }

    pub fn id(&self) -> String {
        match self.part {
            Some(part) => format!("{}.{part}", self.seq),
            None => self.seq.to_string(),
        }
    }
}

/// What is open in an AG-UI event stream, with the event that opened each, in order.
#[derive(Debug, Default)]
pub struct OpenSet {
    run_started: Option<AguiEvent>,
    finished: bool,
    open: Vec<(String, AguiEvent)>,
}

fn field<'a>(event: &'a AguiEvent, key: &str) -> &'a str {
    event.get(key).and_then(Value::as_str).unwrap_or_default()
}

impl OpenSet {
    /// Takes note of one AG-UI event of the stream.
    pub fn observe(&mut self, event: &AguiEvent) {
        let kind = field(event, "type");
        let scope = field(event, "subagentRunId");
        let key = |what: &str, id: &str| format!("{what}\u{0}{scope}\u{0}{id}");
        match kind {
            "RUN_STARTED" => self.run_started = Some(event.clone()),
            "RUN_FINISHED" | "RUN_ERROR" => self.finished = true,
            "SUBAGENT_STARTED" => self.open.push((
                format!("subagent\u{0}{}", field(event, "subagentRunId")),
                event.clone(),
            )),
            "SUBAGENT_FINISHED" | "SUBAGENT_ERROR" => {
                let gone = format!("subagent\u{0}{}", field(event, "subagentRunId"));
                self.open.retain(|(k, _)| *k != gone);
            }
            "STEP_STARTED" => self
                .open
                .push((key("step", field(event, "stepName")), event.clone())),
            "STEP_FINISHED" => self.close(&key("step", field(event, "stepName"))),
            "TEXT_MESSAGE_START" => self
                .open
                .push((key("text", field(event, "messageId")), event.clone())),
            "TEXT_MESSAGE_END" => self.close(&key("text", field(event, "messageId"))),
            "REASONING_START" => self
                .open
                .push((key("span", field(event, "messageId")), event.clone())),
            "REASONING_END" => self.close(&key("span", field(event, "messageId"))),
            "REASONING_MESSAGE_START" => self
                .open
                .push((key("thought", field(event, "messageId")), event.clone())),
            "REASONING_MESSAGE_END" => self.close(&key("thought", field(event, "messageId"))),
            "TOOL_CALL_START" => self
                .open
                .push((key("tool", field(event, "toolCallId")), event.clone())),
            "TOOL_CALL_END" => self.close(&key("tool", field(event, "toolCallId"))),
            _ => {}
        }
    }

    fn close(&mut self, key: &str) {
        if let Some(at) = self.open.iter().rposition(|(k, _)| k == key) {
            self.open.remove(at);
        }
    }

    /// Whether the run has ended (nothing to resume).
    pub fn finished(&self) -> bool {
        self.finished
    }

    /// The join prelude: `RUN_STARTED` and the opening event of everything open, in the
    /// order they were opened. Empty before the run started.
    pub fn prelude(&self) -> Vec<AguiEvent> {
        let Some(started) = &self.run_started else {
            return Vec::new();
        };
        std::iter::once(started.clone())
            .chain(self.open.iter().map(|(_, event)| event.clone()))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ev(value: Value) -> AguiEvent {
        value.as_object().cloned().unwrap_or_default()
    }

    #[test]
    fn cursors_parse_and_name_frames() {
        assert_eq!(
            Cursor::parse("12"),
            Some(Cursor {
                seq: 12,
                part: None
            })
        );
        assert_eq!(
            Cursor::parse("12.3"),
            Some(Cursor {
                seq: 12,
                part: Some(3)
            })
        );
        for bad in ["", "x", "1.", ".1", "1.2.3", "-1", "1.x"] {
            assert_eq!(Cursor::parse(bad), None, "{bad}");
        }
        assert_eq!(Cursor::frame_id(7, 1, 3), "7.1");
        assert_eq!(Cursor::frame_id(7, 3, 3), "7");
        assert_eq!(Cursor::parse("7.1").map(|c| c.id()).as_deref(), Some("7.1"));
    }

    #[test]
    fn the_prelude_reopens_what_is_open_in_order() {
        let mut open = OpenSet::default();
        assert!(open.prelude().is_empty());
        let events = [
            json!({"type": "RUN_STARTED", "threadId": "t", "runId": "r"}),
            json!({"type": "STEP_STARTED", "stepName": "model-call-1"}),
            json!({"type": "REASONING_START", "messageId": "th"}),
            json!({"type": "REASONING_MESSAGE_START", "messageId": "th", "role": "reasoning"}),
            json!({"type": "REASONING_MESSAGE_END", "messageId": "th"}),
            json!({"type": "REASONING_END", "messageId": "th"}),
            json!({"type": "TEXT_MESSAGE_START", "messageId": "m", "role": "assistant"}),
            json!({"type": "SUBAGENT_STARTED", "subagentRunId": "s", "name": "x"}),
            json!({"type": "STEP_STARTED", "stepName": "model-call-1", "subagentRunId": "s"}),
            json!({"type": "TOOL_CALL_START", "toolCallId": "c", "toolCallName": "calc"}),
        ];
        for event in &events {
            open.observe(&ev(event.clone()));
        }
        let kinds: Vec<String> = open
            .prelude()
            .iter()
            .map(|e| field(e, "type").to_owned())
            .collect();
        assert_eq!(
            kinds,
            [
                "RUN_STARTED",
                "STEP_STARTED",
                "TEXT_MESSAGE_START",
                "SUBAGENT_STARTED",
                "STEP_STARTED",
                "TOOL_CALL_START"
            ]
        );
        // The sub-agent's step is closed by its own scope, not the parent's.
        open.observe(&ev(
            json!({"type": "STEP_FINISHED", "stepName": "model-call-1", "subagentRunId": "s"}),
        ));
        open.observe(&ev(
            json!({"type": "SUBAGENT_FINISHED", "subagentRunId": "s"}),
        ));
        open.observe(&ev(json!({"type": "TOOL_CALL_END", "toolCallId": "c"})));
        let kinds: Vec<String> = open
            .prelude()
            .iter()
            .map(|e| field(e, "type").to_owned())
            .collect();
        assert_eq!(kinds, ["RUN_STARTED", "STEP_STARTED", "TEXT_MESSAGE_START"]);
        assert!(!open.finished());
        open.observe(&ev(
            json!({"type": "RUN_FINISHED", "threadId": "t", "runId": "r"}),
        ));
        assert!(open.finished());
    }
}
