//! What the person types into `looopy chat`: at a terminal, a line editor (rustyline) with
//! arrow-key editing, history (Up/Down, Ctrl+R search) kept in `~/.looopy/chat_history`;
//! from a pipe, plain lines read ahead on a thread, as `looopy run` reads them.
//!
//! The editor runs on a thread of its own and reads only when asked: the terminal is in raw
//! mode only while a prompt is open, so a turn's output between prompts is written to an
//! ordinary terminal, and Ctrl+C there reaches the turn (as SIGINT) rather than the editor.

use std::path::PathBuf;

use rustyline::error::ReadlineError;
use rustyline::history::DefaultHistory;
use rustyline::{Config, Editor};
use tokio::sync::oneshot;

use crate::run_cmd::Lines;

/// What one prompt got.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Read {
    Line(String),
    /// Ctrl+C at the prompt (the editor's, or a signal while a pipe was read).
    Interrupted,
    /// Ctrl+D, or the end of piped input.
    Eof,
}

/// A prompt: the text and, at a terminal, the same text with colour.
pub(crate) struct Prompt {
    pub plain: &'static str,
    pub styled: &'static str,
}

pub(crate) const YOU: Prompt = Prompt {
    plain: "you › ",
    styled: "\x1b[1myou ›\x1b[0m ",
};

pub(crate) const ANSWER: Prompt = Prompt {
    plain: "> ",
    styled: "\x1b[1m>\x1b[0m ",
};

type Request = (&'static Prompt, oneshot::Sender<Read>);

pub(crate) enum Input {
    /// A terminal: the line editor's thread, asked for one line at a time.
    Editor(std::sync::mpsc::Sender<Request>),
    /// A pipe (or a test): lines as they come.
    Piped(Lines),
}

impl Input {
    /// The line editor when stdin and stdout are a terminal, else piped lines.
    pub(crate) fn open(terminal: bool) -> Self {
        if terminal {
            match editor() {
                Ok(tx) => return Self::Editor(tx),
                Err(error) => tracing::warn!(%error, "no line editor; reading plain lines"),
            }
        }
        Self::Piped(Lines::stdin())
    }

    /// The next line after showing `prompt`.
    pub(crate) async fn read(&mut self, prompt: &'static Prompt) -> Read {
        match self {
            Self::Editor(requests) => {
                let (tx, rx) = oneshot::channel();
                if requests.send((prompt, tx)).is_err() {
                    return Read::Eof;
                }
                rx.await.unwrap_or(Read::Eof)
            }
            Self::Piped(lines) => {
                use std::io::Write;
                print!("{}", prompt.plain);
                let _ = std::io::stdout().flush();
                tokio::select! {
                    line = lines.next() => line.map_or(Read::Eof, Read::Line),
                    _ = tokio::signal::ctrl_c() => Read::Interrupted,
                }
            }
        }
    }

    /// Piped lines, for the authorization prompt (which reads a terminal by itself).
    pub(crate) fn lines(&mut self) -> Option<&mut Lines> {
        match self {
            Self::Editor(_) => None,
            Self::Piped(lines) => Some(lines),
        }
    }
}

/// Where the typed lines are kept between sessions: `~/.looopy/chat_history`.
fn history_file() -> Option<PathBuf> {
    let home = std::env::var_os("HOME").filter(|h| !h.is_empty())?;
    Some(PathBuf::from(home).join(".looopy").join("chat_history"))
}

/// Starts the editor's thread; it ends when the sender is dropped.
fn editor() -> rustyline::Result<std::sync::mpsc::Sender<Request>> {
    let config = Config::builder()
        .max_history_size(2000)?
        .history_ignore_dups(true)?
        .history_ignore_space(true)
        .auto_add_history(false)
        .build();
    let mut editor: Editor<(), DefaultHistory> = Editor::with_config(config)?;
    // The `()` helper shows the coloured prompt (rustyline prints `Prompt::styled` only
    // through a highlighter).
    editor.set_helper(Some(()));
    let file = history_file();
    if let Some(file) = &file {
        // A missing file is a first session; an unreadable one starts an empty history.
        if let Err(error) = editor.load_history(file) {
            if !matches!(&error, ReadlineError::Io(e) if e.kind() == std::io::ErrorKind::NotFound) {
                tracing::warn!(%error, file = %file.display(), "chat history not loaded");
            }
        }
    }
    let (tx, rx) = std::sync::mpsc::channel::<Request>();
    std::thread::Builder::new()
        .name("chat-editor".into())
        .spawn(move || {
            while let Ok((prompt, reply)) = rx.recv() {
                let read = match editor.readline(&(prompt.plain, prompt.styled)) {
                    Ok(line) => {
                        remember(&mut editor, &line, file.as_deref());
                        Read::Line(line)
                    }
                    Err(ReadlineError::Interrupted) => Read::Interrupted,
                    Err(ReadlineError::Eof) => Read::Eof,
                    Err(error) => {
                        tracing::warn!(%error, "reading a line");
                        Read::Eof
                    }
                };
                if reply.send(read).is_err() {
                    break;
                }
            }
        })
        .map_err(ReadlineError::Io)?;
    Ok(tx)
}

/// Adds a typed line to the history and appends it to the file (readable by its owner
/// only: it holds what was typed, answers included).
fn remember(editor: &mut Editor<(), DefaultHistory>, line: &str, file: Option<&std::path::Path>) {
    if line.trim().is_empty() || !matches!(editor.add_history_entry(line), Ok(true)) {
        return;
    }
    let Some(file) = file else { return };
    if let Some(dir) = file.parent() {
        let _ = std::fs::create_dir_all(dir);
    }
    if let Err(error) = editor.append_history(file) {
        tracing::warn!(%error, file = %file.display(), "chat history not saved");
        return;
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let _ = std::fs::set_permissions(file, std::fs::Permissions::from_mode(0o600));
    }
}
