//! Rendering events for people (streamed text, dimmed thoughts, tool progress) or for
//! programs (one protocol JSON object per line).

use std::collections::HashMap;
use std::io::Write;

use looopy_protocol::{Event, EventPayload, TaskState};

const DIM: &str = "\x1b[2m";
const BOLD: &str = "\x1b[1m";
const RED: &str = "\x1b[31m";
const GREEN: &str = "\x1b[32m";
const CYAN: &str = "\x1b[36m";
const RESET: &str = "\x1b[0m";

/// A dimmed side note on stderr (plain text when stderr is not a terminal).
pub fn note(text: &str) {
    use std::io::IsTerminal;
    if std::io::stderr().is_terminal() {
        eprintln!("{DIM}{text}{RESET}");
    } else {
        eprintln!("{text}");
    }
}

/// Output style.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Style {
    /// One event per line, exactly as the protocol defines it.
    Json,
    /// Streamed text for a terminal.
    Human { color: bool },
}

/// Keeps what is needed to lay out a stream of events on a terminal.
pub struct Renderer {
    style: Style,
    in_thought: bool,
    at_line_start: bool,
    tool_names: HashMap<String, String>,
    progress_line_open: bool,
}

impl Renderer {
    pub fn new(style: Style) -> Self {
        Self {
            style,
            in_thought: false,
            at_line_start: true,
            tool_names: HashMap::new(),
            progress_line_open: false,
        }
    }

    fn paint<'a>(&self, code: &'a str) -> &'a str {
        match self.style {
            Style::Human { color: true } => code,
            _ => "",
        }
    }

    /// Starts a fresh line if the cursor is mid-line (and closes an open thought or bar).
    fn break_line(&mut self, out: &mut impl Write) -> std::io::Result<()> {
        if self.in_thought {
            write!(out, "{}", self.paint(RESET))?;
            self.in_thought = false;
        }
        if !self.at_line_start || self.progress_line_open {
            writeln!(out)?;
            self.at_line_start = true;
            self.progress_line_open = false;
        }
        Ok(())
    }

    fn text(&mut self, out: &mut impl Write, s: &str) -> std::io::Result<()> {
        if s.is_empty() {
            return Ok(());
        }
        out.write_all(s.as_bytes())?;
        self.at_line_start = s.ends_with('\n');
        Ok(())
    }

    pub fn render(&mut self, event: &Event, out: &mut impl Write) -> std::io::Result<()> {
        if self.style == Style::Json {
            serde_json::to_writer(&mut *out, event)?;
            out.write_all(b"\n")?;
            return out.flush();
        }
        if event.is_internal() {
            return Ok(());
        }
        match &event.payload {
            EventPayload::ContentDelta(d) => {
                if self.in_thought || self.progress_line_open {
                    self.break_line(out)?;
                }
                self.text(out, &d.delta)?;
            }
            EventPayload::ThoughtStream(t) => {
                if let Some(delta) = &t.delta {
                    if !self.in_thought {
                        self.break_line(out)?;
                        let (dim, _) = (self.paint(DIM), ());
                        write!(out, "{dim}💭 ")?;
                        self.in_thought = true;
                        self.at_line_start = false;
                    }
                    out.write_all(delta.as_bytes())?;
                } else if t.is_complete && self.in_thought {
                    self.break_line(out)?;
                }
            }
            EventPayload::ToolStart(t) => {
                self.break_line(out)?;
                self.tool_names
                    .insert(t.tool_call_id.clone(), t.tool_name.clone());
                let args = serde_json::to_string(&t.arguments).unwrap_or_default();
                writeln!(
                    out,
                    "{}⚙ {}{} {}{}",
                    self.paint(CYAN),
                    t.tool_name,
                    self.paint(RESET),
                    self.paint(DIM),
                    truncate(&args, 120)
                )?;
                write!(out, "{}", self.paint(RESET))?;
            }
            EventPayload::ToolProgress(p) => {
                self.break_line(out)?;
                let pct = (p.progress.clamp(0.0, 1.0) * 100.0).round() as usize;
                let filled = pct / 5;
                write!(
                    out,
                    "\r  [{}{}] {:>3}% {}",
                    "#".repeat(filled),
                    " ".repeat(20 - filled),
                    pct,
                    p.message.as_deref().unwrap_or("")
                )?;
                self.progress_line_open = true;
            }
            EventPayload::ToolComplete(t) => {
                self.break_line(out)?;
                if t.success {
                    let result = t.result.as_ref().map(|r| match r {
                        serde_json::Value::String(s) => s.clone(),
                        other => other.to_string(),
                    });
                    writeln!(
                        out,
                        "{}✓ {}{} → {}",
                        self.paint(GREEN),
                        t.tool_name,
                        self.paint(RESET),
                        truncate(result.as_deref().unwrap_or(""), 200)
                    )?;
                } else {
                    writeln!(
                        out,
                        "{}✗ {}{}: {}",
                        self.paint(RED),
                        t.tool_name,
                        self.paint(RESET),
                        t.error.as_deref().unwrap_or("failed")
                    )?;
                }
            }
            EventPayload::InputRequired(i) => {
                self.break_line(out)?;
                writeln!(
                    out,
                    "{}? {}{}",
                    self.paint(BOLD),
                    i.prompt,
                    self.paint(RESET)
                )?;
            }
            EventPayload::AuthRequired(a) => {
                self.break_line(out)?;
                writeln!(
                    out,
                    "{}🔒 {}{} {}",
                    self.paint(BOLD),
                    a.prompt,
                    self.paint(RESET),
                    a.auth_url.as_deref().unwrap_or("")
                )?;
            }
            EventPayload::TaskStatus(s) => match s.status {
                TaskState::Failed => {
                    self.break_line(out)?;
                    let why = s
                        .error
                        .as_ref()
                        .map(|e| format!("{} ({})", e.message, e.code))
                        .or_else(|| s.message.clone())
                        .unwrap_or_else(|| "unknown error".into());
                    writeln!(out, "{}error:{} {why}", self.paint(RED), self.paint(RESET))?;
                }
                TaskState::Canceled => {
                    self.break_line(out)?;
                    writeln!(out, "{}(canceled){}", self.paint(DIM), self.paint(RESET))?;
                }
                _ => {}
            },
            EventPayload::TaskComplete(_) => self.break_line(out)?,
            EventPayload::FileWrite(f) if f.index == 0 => {
                self.break_line(out)?;
                writeln!(
                    out,
                    "{}📄 {}{}",
                    self.paint(DIM),
                    f.name.as_deref().unwrap_or(&f.artifact_id),
                    self.paint(RESET)
                )?;
            }
            _ => {}
        }
        out.flush()
    }
}

fn truncate(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_string();
    }
    let cut: String = s.chars().take(max).collect();
    format!("{cut}…")
}

#[cfg(test)]
mod tests {
    use super::*;
    use looopy_protocol::event::{ContentDelta, ThoughtStream, ThoughtType, Verbosity};
    use looopy_protocol::{Sequencer, Stamp};

    fn render_all(style: Style, payloads: Vec<EventPayload>) -> String {
        let seq = Sequencer::default();
        let stamp = Stamp::new("c", "t");
        let mut r = Renderer::new(style);
        let mut out = Vec::new();
        for p in payloads {
            r.render(&stamp.stamp(&seq, p), &mut out).unwrap();
        }
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn human_output_streams_text_and_puts_thoughts_on_their_own_line() {
        let out = render_all(
            Style::Human { color: false },
            vec![
                EventPayload::ThoughtStream(ThoughtStream::delta("th", 0, "hmm")),
                EventPayload::ThoughtStream(ThoughtStream::complete(
                    "th",
                    1,
                    "hmm",
                    ThoughtType::Reasoning,
                    Verbosity::Normal,
                )),
                EventPayload::ContentDelta(ContentDelta {
                    delta: "Hel".into(),
                    index: 0,
                }),
                EventPayload::ContentDelta(ContentDelta {
                    delta: "lo".into(),
                    index: 1,
                }),
            ],
        );
        assert_eq!(out, "💭 hmm\nHello");
    }

    #[test]
    fn json_output_is_one_protocol_event_per_line() {
        let out = render_all(
            Style::Json,
            vec![EventPayload::ContentDelta(ContentDelta {
                delta: "x".into(),
                index: 0,
            })],
        );
        let v: serde_json::Value = serde_json::from_str(out.trim_end()).unwrap();
        assert_eq!(v["kind"], "content-delta");
        assert_eq!(v["contextId"], "c");
    }
}
