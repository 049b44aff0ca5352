//! How `looopy a2a` shows an agent's events to people: the answer streamed, one `▣` line
//! per file or data artifact, prompts and final states on their own lines.

use std::collections::HashMap;
use std::io::Write;
use std::process::ExitCode;

use looopy_a2a::client::StreamEvent;
use looopy_a2a::v1;

use super::print_json;
use crate::artifact_line::{ArtifactLine, format_size, incomplete_of};
use crate::render::note;

/// How an exchange ended.
pub(super) enum Outcome {
    Completed,
    Failed,
    Canceled,
    Paused {
        task: String,
        context: String,
        prompt: String,
    },
}

impl Outcome {
    pub(super) fn exit_code(&self) -> ExitCode {
        ExitCode::from(match self {
            Self::Completed => 0,
            Self::Failed => 1,
            Self::Canceled => 130,
            Self::Paused { .. } => 3,
        })
    }
}

/// Prints events as they come: answer text streamed to stdout, one `▣` line per file or
/// data artifact, states and prompts on their own lines; or JSON lines.
pub(super) struct View {
    json: bool,
    at_line_start: bool,
    /// Bytes of files still streaming, by artifact id.
    files: HashMap<String, (String, u64)>,
    task: Option<(String, String)>,
    state: Option<v1::TaskState>,
    prompt: String,
    direct: bool,
}

impl View {
    pub(super) fn new(json: bool) -> Self {
        Self {
            json,
            at_line_start: true,
            files: HashMap::new(),
            task: None,
            state: None,
            prompt: String::new(),
            direct: false,
        }
    }

    fn out(&mut self, text: &str) {
        if text.is_empty() {
            return;
        }
        let mut out = std::io::stdout().lock();
        let _ = out.write_all(text.as_bytes());
        let _ = out.flush();
        self.at_line_start = text.ends_with('\n');
    }

    pub(super) fn finish_line(&mut self) {
        if !self.at_line_start {
            self.out("\n");
        }
    }

    fn line(&mut self, text: &str) {
        self.finish_line();
        self.out(&format!("{text}\n"));
    }

    pub(super) fn event(&mut self, event: &StreamEvent) {
        if self.json {
            let _ = print_json(event);
        }
        match event {
            StreamEvent::Task(t) => {
                self.task = Some((t.id.clone(), t.context_id.clone()));
                if !self.json && self.state.is_none() {
                    note(&format!("context {} · task {}", t.context_id, t.id));
                }
                self.status(&t.status);
            }
            StreamEvent::StatusUpdate(s) => {
                self.task = Some((s.task_id.clone(), s.context_id.clone()));
                self.status(&s.status);
            }
            StreamEvent::ArtifactUpdate(a) => {
                if !self.json {
                    self.artifact(a);
                }
            }
            StreamEvent::Message(m) => {
                self.direct = true;
                if !self.json {
                    let text = text_of(&m.parts);
                    self.line(&text);
                }
            }
        }
    }

    fn status(&mut self, status: &v1::TaskStatus) {
        let changed = self.state != Some(status.state);
        self.state = Some(status.state);
        let text = status
            .message
            .as_ref()
            .map(|m| prompt_of(&m.parts))
            .unwrap_or_default();
        if status.state.is_interrupted() {
            self.prompt = text.clone();
        }
        if self.json || !changed {
            return;
        }
        match status.state {
            v1::TaskState::InputRequired => self.line(&format!("? {text}")),
            v1::TaskState::AuthRequired => self.line(&format!("🔒 {text}")),
            v1::TaskState::Failed => {
                self.line(&format!("error: {}", nonempty(&text, "the task failed")))
            }
            v1::TaskState::Rejected => self.line(&format!(
                "rejected: {}",
                nonempty(&text, "the agent rejected the task")
            )),
            v1::TaskState::Canceled => self.line("(canceled)"),
            v1::TaskState::Completed => self.finish_line(),
            _ => {}
        }
    }

    /// Text without a file name is the answer and streams; anything else is a file or
    /// data, shown as one line when its last chunk arrives.
    fn artifact(&mut self, a: &v1::TaskArtifactUpdateEvent) {
        for part in &a.artifact.parts {
            match (&part.content, &part.filename) {
                (v1::PartContent::Text(t), None) => self.out(&terminal_safe(t)),
                (content, _) => {
                    let bytes = match content {
                        v1::PartContent::Text(t) => t.len() as u64,
                        v1::PartContent::Raw(b) => (b.len() / 4 * 3) as u64,
                        v1::PartContent::Data(d) => d.to_string().len() as u64,
                        v1::PartContent::Url(_) => 0,
                    };
                    let name = part
                        .filename
                        .clone()
                        .or_else(|| a.artifact.name.clone())
                        .unwrap_or_else(|| a.artifact.artifact_id.clone());
                    let entry = self
                        .files
                        .entry(a.artifact.artifact_id.clone())
                        .or_insert((name, 0));
                    if !a.append {
                        entry.1 = 0;
                    }
                    entry.1 += bytes;
                }
            }
        }
        if a.last_chunk {
            if let Some((name, bytes)) = self.files.remove(&a.artifact.artifact_id) {
                let meta = a.artifact.metadata.clone().unwrap_or_default();
                let line = ArtifactLine {
                    name,
                    size: meta
                        .get("size")
                        .and_then(serde_json::Value::as_u64)
                        .unwrap_or(bytes),
                    rows: None,
                    incomplete: incomplete_of(&meta),
                };
                self.line(&line.to_string());
            }
        }
    }

    /// A non-streamed reply: the task's answer and state, or the agent's message.
    pub(super) fn reply(&mut self, reply: &v1::SendMessageResponse) {
        if self.json {
            let _ = print_json(reply);
        }
        match reply {
            v1::SendMessageResponse::Task(t) => {
                let json = self.json;
                self.json = true; // state and prompt only; the task prints below
                self.status(&t.status);
                self.json = json;
                self.task = Some((t.id.clone(), t.context_id.clone()));
                if !self.json {
                    self.task(t, false);
                }
            }
            v1::SendMessageResponse::Message(m) => {
                self.direct = true;
                if !self.json {
                    let text = text_of(&m.parts);
                    self.line(&text);
                }
            }
        }
    }

    /// A whole task for people: its answer, its files, its state.
    pub(super) fn task(&mut self, t: &v1::Task, header: bool) {
        if header {
            self.line(&format!(
                "task {} · context {} · {}",
                t.id, t.context_id, t.status.state
            ));
        } else {
            note(&format!("context {} · task {}", t.context_id, t.id));
        }
        for a in t.artifacts.iter().flatten() {
            let update = v1::TaskArtifactUpdateEvent {
                task_id: t.id.clone(),
                context_id: t.context_id.clone(),
                artifact: a.clone(),
                append: false,
                last_chunk: true,
                metadata: None,
            };
            self.artifact(&update);
        }
        self.finish_line();
        let text = t
            .status
            .message
            .as_ref()
            .map(|m| prompt_of(&m.parts))
            .unwrap_or_default();
        match t.status.state {
            v1::TaskState::InputRequired => self.line(&format!("? {text}")),
            v1::TaskState::AuthRequired => self.line(&format!("🔒 {text}")),
            v1::TaskState::Failed => {
                self.line(&format!("error: {}", nonempty(&text, "the task failed")))
            }
            v1::TaskState::Canceled => self.line("(canceled)"),
            v1::TaskState::Rejected => self.line(&format!("rejected: {text}")),
            _ => {}
        }
    }

    pub(super) fn outcome(&mut self) -> Outcome {
        self.finish_line();
        if self.direct {
            return Outcome::Completed;
        }
        let (task, context) = self.task.clone().unwrap_or_default();
        match self.state {
            Some(v1::TaskState::Completed) => Outcome::Completed,
            Some(v1::TaskState::Canceled) => Outcome::Canceled,
            Some(s) if s.is_interrupted() => Outcome::Paused {
                task,
                context,
                prompt: nonempty(&self.prompt, "no prompt").to_owned(),
            },
            _ => Outcome::Failed,
        }
    }
}

/// Text from the network made safe for a terminal: control characters other than newline
/// and tab (escape sequences could rewrite the screen) become `\u{…}` escapes.
fn terminal_safe(text: &str) -> std::borrow::Cow<'_, str> {
    if !text
        .chars()
        .any(|c| c.is_control() && c != '\n' && c != '\t')
    {
        return std::borrow::Cow::Borrowed(text);
    }
    text.chars()
        .map(|c| {
            if c.is_control() && c != '\n' && c != '\t' {
                c.escape_unicode().to_string()
            } else {
                c.to_string()
            }
        })
        .collect::<String>()
        .into()
}

fn nonempty<'a>(text: &'a str, otherwise: &'a str) -> &'a str {
    if text.trim().is_empty() {
        otherwise
    } else {
        text
    }
}

/// The text parts of a status message (a prompt's data part, e.g. Looopy's `inputId`, is for
/// programs: `--json` shows it).
fn prompt_of(parts: &[v1::Part]) -> String {
    parts
        .iter()
        .filter_map(|p| p.as_text())
        .map(|t| terminal_safe(t).into_owned())
        .collect::<Vec<_>>()
        .join("\n")
}

fn text_of(parts: &[v1::Part]) -> String {
    parts
        .iter()
        .map(|p| match &p.content {
            v1::PartContent::Text(t) => terminal_safe(t).into_owned(),
            v1::PartContent::Data(d) => d.to_string(),
            v1::PartContent::Url(u) => u.clone(),
            v1::PartContent::Raw(r) => format!("[{}]", format_size((r.len() / 4 * 3) as u64)),
        })
        .collect::<Vec<_>>()
        .join("\n")
}
