//! Answers rendered as Markdown at a terminal: bold and italics, inline code, links,
//! headings, bullet and numbered lists, quotes and fenced code blocks. Lines are parsed as
//! CommonMark (pulldown-cmark), so a lone `*` as in `6*7` stays as written.
//!
//! The answer streams: each piece of text is shown as it arrives, plain, and once its line
//! is complete the line is drawn again, styled (the cursor goes back over the rows the
//! plain text took). So the answer never waits for a newline to appear, and what stays on
//! the screen is the rendered text. Lines are rendered one at a time; a fence line switches
//! code blocks on and off, so a code block's lines are styled as code as they arrive.

use std::io::Write;

use pulldown_cmark::{Event, Options, Parser, Tag, TagEnd};

const RESET: &str = "\x1b[0m";
const BOLD: &str = "\x1b[1m";
const DIM: &str = "\x1b[2m";
const ITALIC: &str = "\x1b[3m";
const UNDERLINE: &str = "\x1b[4m";
const STRIKE: &str = "\x1b[9m";
const CODE: &str = "\x1b[36m";

/// Renders streamed Markdown text for a terminal.
pub(crate) struct Markdown {
    /// The current line's text, shown plain so far.
    line: String,
    /// Inside a fenced code block, and the fence that closes it (``` or ~~~).
    fence: Option<&'static str>,
}

impl Markdown {
    pub(crate) fn new() -> Self {
        Self {
            line: String::new(),
            fence: None,
        }
    }

    /// Whether a line is open (text shown plain, waiting for its end).
    pub(crate) fn mid_line(&self) -> bool {
        !self.line.is_empty()
    }

    /// A piece of the answer: shown now, each completed line drawn again styled.
    pub(crate) fn push(&mut self, text: &str, out: &mut impl Write) -> std::io::Result<()> {
        for piece in text.split_inclusive('\n') {
            match piece.strip_suffix('\n') {
                Some(rest) => {
                    out.write_all(rest.as_bytes())?;
                    self.line.push_str(rest);
                    self.end_line(out)?;
                }
                None => {
                    out.write_all(piece.as_bytes())?;
                    self.line.push_str(piece);
                }
            }
        }
        out.flush()
    }

    /// Ends the open line (if any) as if a newline had come: before other output, and at
    /// the end of the answer.
    pub(crate) fn finish(&mut self, out: &mut impl Write) -> std::io::Result<()> {
        if self.mid_line() {
            self.end_line(out)?;
        }
        Ok(())
    }

    /// The answer is over: the next one starts outside any code block.
    pub(crate) fn reset(&mut self) {
        self.line.clear();
        self.fence = None;
    }

    /// Replaces the plain line just shown with its rendering, and moves to the next line.
    fn end_line(&mut self, out: &mut impl Write) -> std::io::Result<()> {
        let line = std::mem::take(&mut self.line);
        let width = terminal_width();
        let rows = rows_of(&line, width);
        // Back to the start of the line's first row, and clear from there down.
        write!(out, "\r")?;
        if rows > 1 {
            write!(out, "\x1b[{}A", rows - 1)?;
        }
        write!(out, "\x1b[J")?;
        out.write_all(self.render(&line).as_bytes())
    }

    /// One complete line, styled, ending with a newline.
    pub(crate) fn render(&mut self, line: &str) -> String {
        let trimmed = line.trim_start();
        let fence = ["```", "~~~"].into_iter().find(|f| trimmed.starts_with(f));
        match (self.fence, fence) {
            (None, Some(open)) => {
                self.fence = Some(open);
                return format!("{DIM}{line}{RESET}\n");
            }
            (Some(open), Some(close)) if open == close && trimmed.trim_end() == close => {
                self.fence = None;
                return format!("{DIM}{line}{RESET}\n");
            }
            (Some(_), _) => return format!("{CODE}{line}{RESET}\n"),
            (None, None) => {}
        }
        let mut out = inline(line);
        out.push('\n');
        out
    }

    /// A whole stored message, rendered (for the conversation shown on opening it).
    pub(crate) fn render_block(&mut self, text: &str) -> String {
        let mut out = String::new();
        for line in text.lines() {
            out.push_str(&self.render(line));
        }
        self.reset();
        out
    }
}

/// One line outside code blocks, styled: its block (heading, list item, quote, rule) and
/// its inline spans. What the parser does not style is kept as written.
fn inline(line: &str) -> String {
    let indent = &line[..line.len() - line.trim_start().len()];
    let mut out = String::new();
    // The styles open now, re-applied after one of them closes.
    let mut open: Vec<&'static str> = Vec::new();
    let mut list_number: Option<u64> = None;
    let mut link: Vec<String> = Vec::new();
    let restyle = |out: &mut String, open: &[&'static str]| {
        out.push_str(RESET);
        open.iter().for_each(|s| out.push_str(s));
    };
    for event in Parser::new_ext(line, Options::ENABLE_STRIKETHROUGH) {
        match event {
            Event::Start(tag) => {
                let style = match tag {
                    Tag::Heading { .. } => Some(BOLD),
                    Tag::Strong => Some(BOLD),
                    Tag::Emphasis => Some(ITALIC),
                    Tag::Strikethrough => Some(STRIKE),
                    Tag::CodeBlock(_) => Some(CODE),
                    Tag::Link { dest_url, .. } => {
                        link.push(dest_url.to_string());
                        Some(UNDERLINE)
                    }
                    Tag::List(start) => {
                        list_number = start;
                        None
                    }
                    Tag::Item => {
                        out.push_str(indent);
                        match list_number.as_mut() {
                            Some(n) => {
                                out.push_str(&format!("{n}. "));
                                *n += 1;
                            }
                            None => out.push_str("• "),
                        }
                        None
                    }
                    Tag::BlockQuote(_) => {
                        out.push_str(&format!("{DIM}▌{RESET} "));
                        None
                    }
                    _ => None,
                };
                if let Some(style) = style {
                    open.push(style);
                    out.push_str(style);
                }
            }
            Event::End(tag) => {
                let styled = matches!(
                    tag,
                    TagEnd::Heading(_)
                        | TagEnd::Strong
                        | TagEnd::Emphasis
                        | TagEnd::Strikethrough
                        | TagEnd::CodeBlock
                        | TagEnd::Link
                );
                if styled {
                    open.pop();
                    restyle(&mut out, &open);
                }
                if tag == TagEnd::Link {
                    if let Some(url) = link.pop().filter(|u| !u.is_empty()) {
                        out.push_str(&format!(" {DIM}({url}){RESET}"));
                        restyle(&mut out, &open);
                    }
                }
            }
            Event::Text(text) | Event::Html(text) | Event::InlineHtml(text) => {
                out.push_str(&text);
            }
            Event::Code(code) => {
                out.push_str(CODE);
                out.push_str(&code);
                restyle(&mut out, &open);
            }
            Event::SoftBreak | Event::HardBreak => out.push(' '),
            Event::Rule => out.push_str(&format!("{DIM}{}{RESET}", "─".repeat(40))),
            Event::TaskListMarker(done) => out.push_str(if done { "[x] " } else { "[ ] " }),
            _ => {}
        }
    }
    if out.is_empty() {
        // Nothing the parser kept (a link reference definition, say): as written.
        return line.to_string();
    }
    if !open.is_empty() || out.contains('\x1b') {
        out.push_str(RESET);
    }
    out
}

/// The terminal's width in columns (80 when it cannot be told).
fn terminal_width() -> usize {
    terminal_size::terminal_size()
        .map(|(w, _)| usize::from(w.0))
        .filter(|w| *w > 0)
        .unwrap_or(80)
}

/// How many rows `line` takes on a terminal `width` columns wide (at least one).
fn rows_of(line: &str, width: usize) -> usize {
    let columns: usize = line
        .chars()
        .map(|c| if c == '\t' { 8 } else { char_width(c) })
        .sum();
    columns.div_ceil(width.max(1)).max(1)
}

/// Columns a character takes: two for wide (East Asian, most emoji), none for control and
/// combining characters.
fn char_width(c: char) -> usize {
    unicode_width::UnicodeWidthChar::width(c).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strip_ansi(s: &str) -> String {
        let mut out = String::new();
        let mut chars = s.chars().peekable();
        while let Some(c) = chars.next() {
            if c == '\x1b' {
                if chars.peek() == Some(&'[') {
                    chars.next();
                    for c in chars.by_ref() {
                        if c.is_ascii_alphabetic() {
                            break;
                        }
                    }
                }
                continue;
            }
            out.push(c);
        }
        out
    }

    #[test]
    fn bold_lists_and_code_blocks_are_styled_and_their_markers_go() {
        let mut md = Markdown::new();
        let bold = md.render("say **hello** now");
        assert!(bold.contains("\x1b["), "styled: {bold:?}");
        assert_eq!(strip_ansi(&bold).trim_end(), "say hello now");
        let item = md.render("- first item");
        assert!(strip_ansi(&item).contains("• first item"), "{item:?}");
        assert_eq!(strip_ansi(&md.render("```rust")).trim_end(), "```rust");
        let code = md.render("let x = **not bold**;");
        assert_eq!(
            strip_ansi(&code).trim_end(),
            "let x = **not bold**;",
            "code is shown as written"
        );
        assert_eq!(strip_ansi(&md.render("```")).trim_end(), "```");
        let after = md.render("**out** again");
        assert_eq!(strip_ansi(&after).trim_end(), "out again");
        let plain =
            |md: &mut Markdown, line: &str| strip_ansi(&md.render(line)).trim_end().to_string();
        // A lone star is no emphasis (CommonMark): the text stays as written.
        assert_eq!(
            plain(&mut md, "The calculator says 6*7 = 42."),
            "The calculator says 6*7 = 42."
        );
        assert_eq!(plain(&mut md, "3. third"), "3. third");
        assert_eq!(plain(&mut md, "  - nested"), "  • nested");
        assert_eq!(plain(&mut md, "# Title"), "Title");
        assert_eq!(
            plain(&mut md, "use `cargo` and *care*"),
            "use cargo and care"
        );
        assert_eq!(
            plain(&mut md, "see [docs](https://x.test/d)"),
            "see docs (https://x.test/d)"
        );
        assert!(md.render("# Title").starts_with(BOLD));
    }

    #[test]
    fn a_streamed_line_is_drawn_again_styled_once_complete() {
        let mut md = Markdown::new();
        let mut out = Vec::new();
        md.push("It is **4", &mut out).unwrap();
        md.push("2**.\nNext", &mut out).unwrap();
        assert!(md.mid_line());
        md.finish(&mut out).unwrap();
        assert!(!md.mid_line());
        let shown = String::from_utf8(out).unwrap();
        // Shown plain as it came, then cleared and drawn again without the markers.
        assert!(shown.starts_with("It is **42**."), "{shown:?}");
        assert!(shown.contains("\r\x1b[J"), "{shown:?}");
        let last_draws: Vec<&str> = shown.split("\r\x1b[J").skip(1).collect();
        let first = strip_ansi(last_draws[0]);
        assert_eq!(first.lines().next().map(str::trim_end), Some("It is 42."));
        assert_eq!(strip_ansi(last_draws[1]).trim_end(), "Next");
    }

    #[test]
    fn rows_count_wrapped_and_wide_text() {
        assert_eq!(rows_of("", 80), 1);
        assert_eq!(rows_of(&"a".repeat(80), 80), 1);
        assert_eq!(rows_of(&"a".repeat(81), 80), 2);
        assert_eq!(rows_of(&"字".repeat(41), 80), 2);
    }
}
