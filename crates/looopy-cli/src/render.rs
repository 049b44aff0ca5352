//! Rendering events for people (streamed text, dimmed thoughts, tool progress) or for
//! programs (one protocol JSON object per line).

use std::collections::{HashMap, VecDeque};
use std::io::Write;

use looopy_protocol::event::{DataWrite, DatasetWrite, FileEncoding, FileWrite};
use looopy_protocol::{Event, EventPayload, TaskState};

use crate::artifact_line::{ArtifactLine, format_size, incomplete_of, printable};

#[cfg(test)]
mod artifact_tests;
mod files;
#[cfg(test)]
mod tests;
mod tree;
#[cfg(test)]
mod tree_tests;

pub use files::WorkspaceDir;
use tree::Tree;

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
    /// Files and datasets being streamed, by artifact id, until their last chunk.
    artifacts: HashMap<String, Streaming>,
    /// The open progress line (terminal only) is a file's running size, not a tool's bar.
    artifact_progress_open: bool,
    /// Sub-agents: who is who, and whether their output is collapsed.
    tree: Tree,
    /// The task of the event being rendered, and what its lines start with.
    task: String,
    prefix: String,
    /// The task whose line is open (mid-line, a thought or a bar): another task's output
    /// starts on a fresh line rather than mid-way through it.
    line_owner: Option<String>,
    /// Events of other tasks that arrived while a task was mid-line, in arrival order:
    /// shown once that line ends, so parallel children's lines are never cut in pieces.
    held: VecDeque<Event>,
    /// Where the workspace tools write, to say where a written file is on disk.
    workspace: Option<WorkspaceDir>,
    /// End each top-level task with a dim `task ID` line (and how to get its artifacts).
    task_ids: bool,
    /// Artifacts each top-level task wrote itself, for that line.
    own_artifacts: HashMap<String, u32>,
}

/// Most events held back behind another task's open line; past it, the line is broken.
const MAX_HELD: usize = 4096;

/// What is known of an artifact still streaming: its name arrives on the first chunk, its
/// size and row count add up chunk by chunk.
#[derive(Debug, Default)]
struct Streaming {
    name: Option<String>,
    bytes: u64,
    rows: u64,
}

/// The bytes `data` stands for: its own length, or the decoded length of base64 (every
/// chunk is whole base64 quanta, padded only at the end).
fn chunk_bytes(data: &str, encoding: Option<FileEncoding>) -> u64 {
    match encoding {
        Some(FileEncoding::Base64) => {
            let padding = data.bytes().rev().take(2).filter(|b| *b == b'=').count();
            ((data.len() / 4 * 3).saturating_sub(padding)) as u64
        }
        _ => data.len() as u64,
    }
}

fn meta_u64(metadata: &looopy_protocol::Metadata, key: &str) -> Option<u64> {
    metadata.get(key).and_then(serde_json::Value::as_u64)
}

impl Renderer {
    pub fn new(style: Style) -> Self {
        Self {
            style,
            in_thought: false,
            at_line_start: true,
            tool_names: HashMap::new(),
            progress_line_open: false,
            artifacts: HashMap::new(),
            artifact_progress_open: false,
            tree: Tree::new(false),
            task: String::new(),
            prefix: String::new(),
            line_owner: None,
            held: VecDeque::new(),
            workspace: None,
            task_ids: false,
            own_artifacts: HashMap::new(),
        }
    }

    /// Says where each file `write_file`/`edit_file` wrote is (a dim line under the call).
    pub fn workspace(mut self, dir: Option<WorkspaceDir>) -> Self {
        self.workspace = dir;
        self
    }

    /// Sub-agents' output collapsed to their `↳` line and a summary line (see
    /// [`tree`]); requests for the user's input always show.
    pub fn collapsed(mut self, collapsed: bool) -> Self {
        self.tree.set_collapsed(collapsed);
        // `looopy chat`'s mode: there the context/task line of `run` is not printed, so
        // each turn ends with its task id (for `looopy artifacts`, `looopy resume`).
        self.task_ids = collapsed;
        self
    }

    /// Learns the tree from `event` (sub-agents' names, what they did) without showing it:
    /// for a renderer that starts in the middle of a turn.
    pub fn learn(&mut self, event: &Event) {
        self.tree.observe(event);
    }

    /// Before writing for the current task: if another task's line is open, end it.
    fn switch(&mut self, out: &mut impl Write) -> std::io::Result<()> {
        let open = !self.at_line_start || self.in_thought || self.progress_line_open;
        if open && self.line_owner.as_deref() != Some(self.task.as_str()) {
            self.break_line(out)?;
        }
        self.line_owner = Some(self.task.clone());
        Ok(())
    }

    /// Starts a line of the current task: a fresh line, and the task's prefix.
    fn begin_line(&mut self, out: &mut impl Write) -> std::io::Result<()> {
        self.switch(out)?;
        self.break_line(out)?;
        out.write_all(self.prefix.as_bytes())?;
        Ok(())
    }

    /// A `file-write` chunk: on the last one, the artifact's line (size from the metadata,
    /// else counted); before it, on a terminal, the running size of a multi-chunk file. A
    /// rewrite of the same artifact starts again at chunk 0 and gets a line of its own.
    fn file_write(&mut self, f: &FileWrite, out: &mut impl Write) -> std::io::Result<()> {
        if f.index == 0 {
            self.artifacts
                .insert(f.artifact_id.clone(), Streaming::default());
        }
        let entry = self.artifacts.entry(f.artifact_id.clone()).or_default();
        if let Some(name) = &f.name {
            entry.name = Some(name.clone());
        }
        entry.bytes += chunk_bytes(&f.data, f.encoding);
        if !f.complete {
            let color = matches!(self.style, Style::Human { color: true });
            if color && f.index > 0 {
                let name = entry.name.clone().unwrap_or_else(|| f.artifact_id.clone());
                let size = format_size(entry.bytes);
                if !self.artifact_progress_open || self.line_owner.as_deref() != Some(&self.task) {
                    self.switch(out)?;
                    self.break_line(out)?;
                }
                write!(
                    out,
                    "\r\x1b[2K{}{DIM}▣ {} · {size} …{RESET}",
                    self.prefix,
                    printable(&name)
                )?;
                self.progress_line_open = true;
                self.artifact_progress_open = true;
            }
            return Ok(());
        }
        let done = self.artifacts.remove(&f.artifact_id).unwrap_or_default();
        let line = ArtifactLine {
            name: done.name.unwrap_or_else(|| f.artifact_id.clone()),
            size: meta_u64(&f.metadata, "size").unwrap_or(done.bytes),
            rows: None,
            incomplete: incomplete_of(&f.metadata),
        };
        self.artifact_line(&line, out)
    }

    /// A `dataset-write` batch: the line comes with the last batch, with the row count.
    fn dataset_write(&mut self, d: &DatasetWrite, out: &mut impl Write) -> std::io::Result<()> {
        if d.index == 0 {
            self.artifacts
                .insert(d.artifact_id.clone(), Streaming::default());
        }
        let entry = self.artifacts.entry(d.artifact_id.clone()).or_default();
        if let Some(name) = &d.name {
            entry.name = Some(name.clone());
        }
        entry.rows += d.rows.len() as u64;
        // Stored and downloaded as JSON Lines: each row's compact JSON and a newline.
        entry.bytes += d
            .rows
            .iter()
            .map(|r| r.to_string().len() as u64 + 1)
            .sum::<u64>();
        if !d.complete {
            return Ok(());
        }
        let done = self.artifacts.remove(&d.artifact_id).unwrap_or_default();
        let line = ArtifactLine {
            name: done.name.unwrap_or_else(|| d.artifact_id.clone()),
            size: meta_u64(&d.metadata, "size").unwrap_or(done.bytes),
            rows: Some(meta_u64(&d.metadata, "rowCount").unwrap_or(done.rows)),
            incomplete: incomplete_of(&d.metadata),
        };
        self.artifact_line(&line, out)
    }

    /// A `data-write`: the whole record at once, so its line right away.
    fn data_write(&mut self, d: &DataWrite, out: &mut impl Write) -> std::io::Result<()> {
        let line = ArtifactLine {
            name: d.name.clone().unwrap_or_else(|| d.artifact_id.clone()),
            size: meta_u64(&d.metadata, "size").unwrap_or_else(|| d.data.to_string().len() as u64),
            rows: None,
            incomplete: incomplete_of(&d.metadata),
        };
        self.artifact_line(&line, out)
    }

    fn artifact_line(&mut self, line: &ArtifactLine, out: &mut impl Write) -> std::io::Result<()> {
        if self.artifact_progress_open {
            // Replace the running size with the final line.
            write!(out, "\r\x1b[2K")?;
            self.progress_line_open = false;
            self.artifact_progress_open = false;
            self.at_line_start = true;
        }
        self.begin_line(out)?;
        let color = if line.incomplete.is_some() {
            RED
        } else {
            GREEN
        };
        writeln!(out, "{}{line}{}", self.paint(color), self.paint(RESET))
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
            self.artifact_progress_open = false;
        }
        Ok(())
    }

    /// A whole line of the current task; a multi-line text (a tool's result, a prompt)
    /// keeps the task's prefix on every line, so a child's block stays one block.
    fn line(&mut self, out: &mut impl Write, text: &str) -> std::io::Result<()> {
        self.begin_line(out)?;
        if self.prefix.is_empty() {
            writeln!(out, "{text}")
        } else {
            writeln!(out, "{}", text.replace('\n', &format!("\n{}", self.prefix)))
        }
    }

    /// Streamed text of the current task; each line it starts gets the task's prefix (and,
    /// inside a thought, the dimming back after a coloured prefix).
    fn text(&mut self, out: &mut impl Write, s: &str) -> std::io::Result<()> {
        if s.is_empty() {
            return Ok(());
        }
        for piece in s.split_inclusive('\n') {
            if self.at_line_start && !self.prefix.is_empty() {
                out.write_all(self.prefix.as_bytes())?;
                if self.in_thought {
                    write!(out, "{}", self.paint(DIM))?;
                }
            }
            out.write_all(piece.as_bytes())?;
            self.at_line_start = piece.ends_with('\n');
        }
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
        self.tree.observe(event);
        if !self.tree.visible(event) {
            return Ok(());
        }
        // Another task is mid-line (streaming text or a thought): hold this event until
        // that line ends, and keep each task's events in order behind it.
        let mid_line = !self.at_line_start || self.in_thought;
        let other = self.line_owner.as_deref() != Some(event.task_id.as_str());
        let queued = self.held.iter().any(|e| e.task_id == event.task_id);
        if (mid_line && other || queued) && self.held.len() < MAX_HELD {
            self.held.push_back(event.clone());
        } else {
            self.show(event, out)?;
        }
        self.release(out)
    }

    /// Shows held events whose turn has come: the open line's task's own (the first held
    /// of a task is its oldest), or — while no line is open — the oldest of all.
    fn release(&mut self, out: &mut impl Write) -> std::io::Result<()> {
        loop {
            let mid_line = !self.at_line_start || self.in_thought;
            let next = if mid_line {
                let owner = self.line_owner.as_deref();
                self.held
                    .iter()
                    .position(|e| Some(e.task_id.as_str()) == owner)
            } else {
                (!self.held.is_empty()).then_some(0)
            };
            match next.and_then(|i| self.held.remove(i)) {
                Some(event) => self.show(&event, out)?,
                None => return Ok(()),
            }
        }
    }

    /// Shows every held event (the stream ended or paused): nothing is left unsaid.
    pub fn flush_held(&mut self, out: &mut impl Write) -> std::io::Result<()> {
        while let Some(event) = self.held.pop_front() {
            self.show(&event, out)?;
        }
        out.flush()
    }

    /// `task ID`, and with the artifacts the task wrote, how to list or save them.
    fn task_id_line(&mut self, task: &str) -> String {
        match self.own_artifacts.remove(task).unwrap_or(0) {
            0 => format!("task {task}"),
            n => format!(
                "task {task} · {n} artifact{}: looopy artifacts {task}",
                if n == 1 { "" } else { "s" }
            ),
        }
    }

    /// Writes one visible event.
    fn show(&mut self, event: &Event, out: &mut impl Write) -> std::io::Result<()> {
        let artifact = match &event.payload {
            EventPayload::FileWrite(f) => f.complete,
            EventPayload::DatasetWrite(d) => d.complete,
            EventPayload::DataWrite(_) => true,
            _ => false,
        };
        if artifact && event.path.is_empty() {
            *self.own_artifacts.entry(event.task_id.clone()).or_default() += 1;
        }
        if self.task != event.task_id {
            self.task = event.task_id.clone();
            self.prefix = self
                .tree
                .prefix(event, matches!(self.style, Style::Human { color: true }));
        }
        match &event.payload {
            EventPayload::ContentDelta(d) => {
                self.switch(out)?;
                if self.in_thought || self.progress_line_open {
                    self.break_line(out)?;
                }
                self.text(out, &d.delta)?;
            }
            EventPayload::ThoughtStream(t) => {
                self.switch(out)?;
                if let Some(delta) = &t.delta {
                    if !self.in_thought {
                        self.begin_line(out)?;
                        let (dim, _) = (self.paint(DIM), ());
                        write!(out, "{dim}💭 ")?;
                        self.in_thought = true;
                        self.at_line_start = false;
                    }
                    self.text(out, delta)?;
                } else if t.is_complete && self.in_thought {
                    self.break_line(out)?;
                }
            }
            EventPayload::SubtaskCreated(s) if self.tree.announces(event) => {
                self.begin_line(out)?;
                let color = matches!(self.style, Style::Human { color: true });
                writeln!(out, "{}", self.tree.subtask_line(s, color))?;
            }
            EventPayload::ToolStart(t) => {
                self.begin_line(out)?;
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
                self.switch(out)?;
                self.break_line(out)?;
                let pct = (p.progress.clamp(0.0, 1.0) * 100.0).round() as usize;
                let filled = pct / 5;
                write!(
                    out,
                    "\r{}  [{}{}] {:>3}% {}",
                    self.prefix,
                    "#".repeat(filled),
                    " ".repeat(20 - filled),
                    pct,
                    p.message.as_deref().unwrap_or("")
                )?;
                self.progress_line_open = true;
            }
            EventPayload::ToolComplete(t)
                if t.success && self.tree.answer_shown(&t.tool_call_id) =>
            {
                // A sub-agent's answer: its lines above already said it.
                let text = format!(
                    "{}✓ {}{}",
                    self.paint(GREEN),
                    t.tool_name,
                    self.paint(RESET)
                );
                self.line(out, &text)?;
            }
            EventPayload::ToolComplete(t) => {
                let text = if t.success {
                    let result = t.result.as_ref().map(|r| match r {
                        serde_json::Value::String(s) => s.clone(),
                        other => other.to_string(),
                    });
                    format!(
                        "{}✓ {}{} → {}",
                        self.paint(GREEN),
                        t.tool_name,
                        self.paint(RESET),
                        truncate(result.as_deref().unwrap_or(""), 200)
                    )
                } else {
                    format!(
                        "{}✗ {}{}: {}",
                        self.paint(RED),
                        t.tool_name,
                        self.paint(RESET),
                        t.error.as_deref().unwrap_or("failed")
                    )
                };
                self.line(out, &text)?;
                let written = self
                    .workspace
                    .as_ref()
                    .and_then(|w| w.written(&event.context_id, t));
                if let Some(path) = written {
                    let text = format!(
                        "{}  saved {}{}",
                        self.paint(DIM),
                        path.display(),
                        self.paint(RESET)
                    );
                    self.line(out, &text)?;
                }
            }
            EventPayload::InputRequired(i) => {
                let text = format!("{}? {}{}", self.paint(BOLD), i.prompt, self.paint(RESET));
                self.line(out, &text)?;
            }
            EventPayload::AuthRequired(a) => {
                self.begin_line(out)?;
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
                    self.begin_line(out)?;
                    let why = s
                        .error
                        .as_ref()
                        .map(|e| format!("{} ({})", e.message, e.code))
                        .or_else(|| s.message.clone())
                        .unwrap_or_else(|| "unknown error".into());
                    writeln!(out, "{}error:{} {why}", self.paint(RED), self.paint(RESET))?;
                }
                TaskState::Canceled => {
                    self.begin_line(out)?;
                    writeln!(out, "{}(canceled){}", self.paint(DIM), self.paint(RESET))?;
                }
                TaskState::WaitingSubtask => {
                    self.begin_line(out)?;
                    let why = s.message.as_deref().unwrap_or("waiting for a sub-agent");
                    writeln!(out, "{}… {why}{}", self.paint(DIM), self.paint(RESET))?;
                }
                _ => {}
            },
            EventPayload::TaskComplete(done) => {
                let color = matches!(self.style, Style::Human { color: true });
                match self.tree.close_line(event, done, color) {
                    Some(line) => {
                        self.switch(out)?;
                        self.break_line(out)?;
                        writeln!(out, "{line}")?;
                    }
                    None => {
                        self.break_line(out)?;
                        if self.task_ids {
                            let line = self.task_id_line(&event.task_id);
                            writeln!(out, "{}{line}{}", self.paint(DIM), self.paint(RESET))?;
                        }
                    }
                }
            }
            EventPayload::FileWrite(f) => self.file_write(f, out)?,
            EventPayload::DatasetWrite(d) => self.dataset_write(d, out)?,
            EventPayload::DataWrite(d) => self.data_write(d, out)?,
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
