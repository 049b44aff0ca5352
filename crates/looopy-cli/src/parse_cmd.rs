//! `looopy parse`: the streaming parsers as a Unix filter. Each stdin line is one JSON
//! string — a chunk exactly as a provider delivered it — and each stdout line one event.
//!
//! For `--protocol thinking` the events are the protocol's contextless `content-delta` and
//! `thought-stream` payloads (no ids or timestamps, so output is reproducible); for
//! `--protocol wire` they are the wire protocol's `{"type": …}` events.

use std::io::{BufRead, Write};

use looopy_protocol::EventPayload;
use looopy_protocol::event::{ContentDelta, ThoughtStream, ThoughtType, Verbosity};
use looopy_stream::thought::{SplitEvent, ThoughtConfig, ThoughtSplitter};
use looopy_stream::wire::WireParser;

use crate::cli::{ParseArgs, ParseProtocol};

/// A failure with the exit status it maps to.
#[derive(Debug, thiserror::Error)]
pub enum ParseCmdError {
    #[error("line {line}: {message}")]
    BadLine { line: usize, message: String },
    #[error("I/O error: {0}")]
    Io(#[from] std::io::Error),
}

/// Turns thought-splitter events into protocol payloads, numbering deltas as the agent does.
#[derive(Default)]
pub struct ThoughtMapper {
    content_index: u64,
    thought_index: u64,
}

impl ThoughtMapper {
    pub fn map(&mut self, event: SplitEvent) -> Option<EventPayload> {
        match event {
            SplitEvent::Text(delta) if !delta.is_empty() => {
                let index = self.content_index;
                self.content_index += 1;
                Some(EventPayload::ContentDelta(ContentDelta { delta, index }))
            }
            SplitEvent::ThoughtDelta { id, delta } if !delta.is_empty() => {
                let index = self.next_thought();
                Some(EventPayload::ThoughtStream(ThoughtStream::delta(
                    id, index, delta,
                )))
            }
            SplitEvent::ThoughtEnd(t) => {
                let index = self.next_thought();
                let kind = ThoughtType::from_name(t.thought_type.as_deref().unwrap_or(&t.tag));
                let verbosity = t
                    .verbosity
                    .as_deref()
                    .and_then(Verbosity::parse)
                    .unwrap_or_default();
                let mut done = ThoughtStream::complete(t.id, index, t.content, kind, verbosity);
                done.confidence = t.confidence;
                done.truncated = t.truncated;
                Some(EventPayload::ThoughtStream(done))
            }
            _ => None,
        }
    }

    fn next_thought(&mut self) -> u64 {
        let i = self.thought_index;
        self.thought_index += 1;
        i
    }
}

enum Parser {
    Thinking(Box<ThoughtSplitter>, ThoughtMapper),
    Wire(WireParser),
}

impl Parser {
    fn push(&mut self, chunk: &str, out: &mut impl Write) -> std::io::Result<()> {
        match self {
            Self::Thinking(p, m) => write_thoughts(p.push(chunk), m, out),
            Self::Wire(p) => write_all(p.push(chunk), out),
        }
    }

    fn finish(&mut self, out: &mut impl Write) -> std::io::Result<()> {
        match self {
            Self::Thinking(p, m) => write_thoughts(p.finish(), m, out),
            Self::Wire(p) => write_all(p.finish(), out),
        }
    }
}

fn write_thoughts(
    events: Vec<SplitEvent>,
    mapper: &mut ThoughtMapper,
    out: &mut impl Write,
) -> std::io::Result<()> {
    write_all(events.into_iter().filter_map(|e| mapper.map(e)), out)
}

fn write_all<T: serde::Serialize>(
    events: impl IntoIterator<Item = T>,
    out: &mut impl Write,
) -> std::io::Result<()> {
    for e in events {
        serde_json::to_writer(&mut *out, &e)?;
        out.write_all(b"\n")?;
    }
    Ok(())
}

/// Runs the filter over `input`, writing events to `out`.
pub fn run(
    args: &ParseArgs,
    input: impl BufRead,
    out: &mut impl Write,
) -> Result<(), ParseCmdError> {
    let mut parser = match args.protocol {
        ParseProtocol::Thinking => {
            let config = match &args.tags {
                Some(tags) => ThoughtConfig::with_tags(
                    tags.iter().map(|t| t.trim()).filter(|t| !t.is_empty()),
                ),
                None => ThoughtConfig::default(),
            };
            Parser::Thinking(
                Box::new(ThoughtSplitter::new(config)),
                ThoughtMapper::default(),
            )
        }
        ParseProtocol::Wire => Parser::Wire(WireParser::new()),
    };
    for (i, line) in input.split(b'\n').enumerate() {
        let line_no = i + 1;
        let line = line?;
        let text = std::str::from_utf8(&line).map_err(|e| ParseCmdError::BadLine {
            line: line_no,
            message: format!("not valid UTF-8 ({e})"),
        })?;
        let text = text.trim_end_matches('\r');
        if text.trim().is_empty() {
            continue;
        }
        let chunk: String = serde_json::from_str(text).map_err(|e| ParseCmdError::BadLine {
            line: line_no,
            message: format!("expected a JSON string ({e})"),
        })?;
        parser.push(&chunk, out)?;
        out.flush()?;
    }
    parser.finish(out)?;
    out.flush()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(
        protocol: ParseProtocol,
        input: &str,
    ) -> Result<Vec<serde_json::Value>, ParseCmdError> {
        let args = ParseArgs {
            protocol,
            tags: None,
        };
        let mut out = Vec::new();
        run(&args, input.as_bytes(), &mut out)?;
        Ok(String::from_utf8(out)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect())
    }

    #[test]
    fn thinking_chunks_become_deltas_and_a_closing_thought() {
        let input = "\"Let me \"\n\"analyze <thinking id=\\\"abc\\\">I should \"\n\"verify first</thinking> The \"\n\"answer is 4\"\n";
        let events = parse(ParseProtocol::Thinking, input).unwrap();
        let content: String = events
            .iter()
            .filter(|e| e["kind"] == "content-delta")
            .map(|e| e["delta"].as_str().unwrap())
            .collect();
        assert_eq!(content, "Let me analyze  The answer is 4");
        let closing = events.iter().find(|e| e["isComplete"] == true).unwrap();
        assert_eq!(closing["thoughtId"], "abc");
        assert_eq!(closing["content"], "I should verify first");
        let streamed: String = events
            .iter()
            .filter_map(|e| {
                e["delta"]
                    .as_str()
                    .filter(|_| e["kind"] == "thought-stream")
            })
            .collect();
        assert_eq!(streamed, "I should verify first");
    }

    #[test]
    fn bad_line_names_its_number() {
        let err = parse(ParseProtocol::Wire, "\"ok\"\n{not json}\n").unwrap_err();
        assert!(err.to_string().starts_with("line 2:"), "{err}");
        let err = parse(ParseProtocol::Wire, "\"ok\"\n42\n").unwrap_err();
        assert!(err.to_string().starts_with("line 2:"), "{err}");
    }
}
