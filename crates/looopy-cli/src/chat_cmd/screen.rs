//! Where a chat turn is drawn: stdout, and at a terminal also the "thinking…" indicator and
//! the answer rendered as Markdown. Piped output is the renderer's plain text, unchanged.
//!
//! The renderer writes through [`Screen`]; the turn's own answer text (its `content-delta`s)
//! goes to [`Screen::answer`] instead, which streams it into the Markdown renderer. Any
//! other output first ends the answer's open line, as the renderer would have.

use std::io::Write;
use std::time::{Duration, Instant};

use super::markdown::Markdown;

const DIM: &str = "\x1b[2m";
const RESET: &str = "\x1b[0m";
/// The indicator's frames, one per tick.
const FRAMES: [char; 10] = ['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏'];
/// Time between the indicator's frames.
pub(crate) const TICK: Duration = Duration::from_millis(100);
/// How long a running turn may be silent (at the start of a line) before the indicator
/// shows again: while a tool works, or the model is called again after it.
const IDLE: Duration = Duration::from_millis(600);

/// stdout, knowing where its cursor is and whether the indicator is on it.
struct Raw {
    stdout: std::io::Stdout,
    at_line_start: bool,
    indicator: bool,
    last_write: Instant,
}

impl Write for Raw {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        if self.indicator {
            self.indicator = false;
            self.stdout.write_all(b"\r\x1b[2K")?;
        }
        let n = self.stdout.write(buf)?;
        if n > 0 {
            self.at_line_start = buf[n - 1] == b'\n';
            self.last_write = Instant::now();
        }
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.stdout.flush()
    }
}

pub(crate) struct Screen {
    raw: Raw,
    /// Markdown for the answer: at a terminal only.
    markdown: Option<Markdown>,
    /// The "thinking…" indicator may show (a terminal, and a turn running).
    thinking: bool,
    frame: usize,
}

impl Screen {
    /// `terminal`: stdout is a terminal, so colour, Markdown and the indicator are on.
    pub(crate) fn new(terminal: bool) -> Self {
        Self {
            raw: Raw {
                stdout: std::io::stdout(),
                at_line_start: true,
                indicator: false,
                last_write: Instant::now(),
            },
            markdown: terminal.then(Markdown::new),
            thinking: false,
            frame: 0,
        }
    }

    pub(crate) fn terminal(&self) -> bool {
        self.markdown.is_some()
    }

    /// A piece of the turn's own answer.
    pub(crate) fn answer(&mut self, text: &str) -> std::io::Result<()> {
        let Some(markdown) = &mut self.markdown else {
            self.raw.write_all(text.as_bytes())?;
            return self.raw.flush();
        };
        if !markdown.mid_line() && !self.raw.at_line_start {
            // The renderer left a line open (a thought without its end): end it here.
            writeln!(self.raw, "{RESET}")?;
        }
        markdown.push(text, &mut self.raw)
    }

    /// A turn runs from now on (the cursor is at the start of a line, below the prompt):
    /// show "thinking…" until its first output.
    pub(crate) fn start_thinking(&mut self) -> std::io::Result<()> {
        self.raw.at_line_start = true;
        self.thinking = self.terminal();
        self.frame = 0;
        self.draw_indicator()
    }

    /// The turn stopped (it ended or paused): no indicator, and the answer's line ended.
    pub(crate) fn stop_thinking(&mut self) -> std::io::Result<()> {
        self.thinking = false;
        if let Some(markdown) = &mut self.markdown {
            markdown.finish(&mut self.raw)?;
            markdown.reset();
        }
        if self.raw.indicator {
            self.raw.indicator = false;
            self.raw.stdout.write_all(b"\r\x1b[2K")?;
        }
        self.raw.flush()
    }

    /// Called every [`TICK`] while a turn runs: the indicator turns, or shows again after
    /// a silence at the start of a line.
    pub(crate) fn tick(&mut self) -> std::io::Result<()> {
        if !self.thinking {
            return Ok(());
        }
        if self.raw.indicator || self.raw.last_write.elapsed() >= IDLE {
            self.frame = (self.frame + 1) % FRAMES.len();
            self.draw_indicator()?;
        }
        Ok(())
    }

    fn draw_indicator(&mut self) -> std::io::Result<()> {
        let open_answer = self.markdown.as_ref().is_some_and(Markdown::mid_line);
        if !self.thinking || !self.raw.at_line_start || open_answer {
            return Ok(());
        }
        let frame = FRAMES[self.frame];
        // Written past `Raw::write`, which would take it for output and clear it.
        write!(self.raw.stdout, "\r\x1b[2K{DIM}{frame} thinking…{RESET}")?;
        self.raw.indicator = true;
        self.raw.stdout.flush()
    }

    /// A whole stored answer, rendered like a streamed one (plain when piped).
    pub(crate) fn block(&mut self, text: &str) -> std::io::Result<()> {
        match &mut self.markdown {
            Some(markdown) => {
                let rendered = markdown.render_block(text);
                self.raw.write_all(rendered.as_bytes())?;
            }
            None => writeln!(self.raw, "{text}")?,
        }
        self.raw.flush()
    }
}

/// The renderer's output: it ends the answer's open line first.
impl Write for Screen {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if let Some(markdown) = &mut self.markdown {
            if markdown.mid_line() && !buf.is_empty() {
                markdown.finish(&mut self.raw)?;
            }
        }
        self.raw.write(buf)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.raw.flush()
    }
}
