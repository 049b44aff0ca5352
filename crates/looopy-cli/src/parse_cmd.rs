//! `looopy parse`: the streaming parsers as a Unix filter. Each stdin line is one JSON
//! string — a chunk exactly as a provider delivered it — and each stdout line one event.
//!
//! For `--protocol thinking` the events are the protocol's contextless `content-delta` and
//! `thought-stream` payloads (no ids or timestamps, so output is reproducible); for
//! `--protocol wire` they are the wire protocol's `{"type": …}` events.

mod json_in;
mod json_out;
mod lines;

use std::io::{Read, Write};
use std::str::Utf8Error;

#[cfg(test)]
use looopy_protocol::EventPayload;
#[cfg(test)]
use looopy_protocol::event::{ContentDelta, ThoughtStream};
use looopy_protocol::event::{ThoughtType, Verbosity};
use looopy_stream::thought::{SplitEvent, Thought, ThoughtConfig, ThoughtSplitter};
use looopy_stream::wire::{WireEvent, WireParser};

use crate::cli::{ParseArgs, ParseProtocol};
use lines::Output;

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
    /// The payload of `event` as a protocol value: the reference that the hand-written
    /// serialisation in [`write`](Self::write) is tested against.
    #[cfg(test)]
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
                let (kind, verbosity) = Self::kind(&t);
                let mut done = ThoughtStream::complete(t.id, index, t.content, kind, verbosity);
                done.confidence = t.confidence;
                done.truncated = t.truncated;
                Some(EventPayload::ThoughtStream(done))
            }
            _ => None,
        }
    }

    /// The type and verbosity a closing thought reports: from its attributes, else its tag.
    fn kind(t: &Thought) -> (ThoughtType, Verbosity) {
        let kind = ThoughtType::from_name(t.thought_type.as_deref().unwrap_or(&t.tag));
        let verbosity = t
            .verbosity
            .as_deref()
            .and_then(Verbosity::parse)
            .unwrap_or_default();
        (kind, verbosity)
    }

    /// Writes an event's payload without taking the event apart: it is serialised from
    /// borrowed text, so the buffers of deltas can be reused (see [`recycle`]).
    fn write<W: Write>(&mut self, event: &SplitEvent, out: &mut Output<W>) -> std::io::Result<()> {
        match event {
            SplitEvent::Text(delta) if !delta.is_empty() => {
                let index = self.content_index;
                self.content_index += 1;
                out.write_with(|buf| json_out::content_delta(buf, delta, index))
            }
            SplitEvent::ThoughtDelta { id, delta } if !delta.is_empty() => {
                let index = self.next_thought();
                out.write_with(|buf| json_out::thought_delta(buf, id, delta, index))
            }
            SplitEvent::ThoughtEnd(t) => {
                let (thought_type, verbosity) = Self::kind(t);
                let end = json_out::ThoughtEnd {
                    id: &t.id,
                    index: self.next_thought(),
                    content: &t.content,
                    thought_type,
                    verbosity,
                    confidence: t.confidence,
                    truncated: t.truncated,
                };
                out.write_with(|buf| json_out::thought_complete(buf, &end))
            }
            _ => Ok(()),
        }
    }

    fn next_thought(&mut self) -> u64 {
        let i = self.thought_index;
        self.thought_index += 1;
        i
    }
}

enum Parser {
    Thinking {
        splitter: Box<ThoughtSplitter>,
        mapper: ThoughtMapper,
        events: Vec<SplitEvent>,
    },
    Wire {
        parser: WireParser,
        events: Vec<WireEvent>,
    },
}

impl Parser {
    fn new(args: &ParseArgs) -> Self {
        match args.protocol {
            ParseProtocol::Thinking => {
                let config = match &args.tags {
                    Some(tags) => ThoughtConfig::with_tags(
                        tags.iter().map(|t| t.trim()).filter(|t| !t.is_empty()),
                    ),
                    None => ThoughtConfig::default(),
                };
                Self::Thinking {
                    splitter: Box::new(ThoughtSplitter::new(config)),
                    mapper: ThoughtMapper::default(),
                    events: Vec::new(),
                }
            }
            ParseProtocol::Wire => Self::Wire {
                parser: WireParser::new(),
                events: Vec::new(),
            },
        }
    }

    /// Feeds one chunk and writes the events it produced (one push, one batch of events, as
    /// a provider forwarding each chunk would see them). The event vectors are kept, and
    /// their last delta too (see [`recycle`]), so buffers are reused from chunk to chunk.
    fn push<W: Write>(&mut self, chunk: &str, out: &mut Output<W>) -> std::io::Result<()> {
        match self {
            Self::Thinking {
                splitter,
                mapper,
                events,
            } => {
                splitter.push_into(chunk, events);
                write_thoughts(events, mapper, out)
            }
            Self::Wire { parser, events } => {
                parser.push_into(chunk, events);
                write_wire(events, out)
            }
        }
    }

    fn finish<W: Write>(&mut self, out: &mut Output<W>) -> std::io::Result<()> {
        match self {
            Self::Thinking {
                splitter,
                mapper,
                events,
            } => {
                splitter.finish_into(events);
                write_thoughts(events, mapper, out)
            }
            Self::Wire { parser, events } => {
                events.extend(parser.finish());
                write_wire(events, out)
            }
        }
    }
}

fn write_thoughts<W: Write>(
    events: &mut Vec<SplitEvent>,
    mapper: &mut ThoughtMapper,
    out: &mut Output<W>,
) -> std::io::Result<()> {
    for event in events.iter() {
        mapper.write(event, out)?;
    }
    recycle(events, |last| match last {
        SplitEvent::Text(text) | SplitEvent::ThoughtDelta { delta: text, .. } => {
            text.clear();
            true
        }
        _ => false,
    });
    Ok(())
}

fn write_wire<W: Write>(events: &mut Vec<WireEvent>, out: &mut Output<W>) -> std::io::Result<()> {
    for event in events.iter() {
        match event {
            // Emptied by `recycle` (the parser never emits an empty untruncated delta).
            WireEvent::Think {
                content,
                truncated: false,
            }
            | WireEvent::Respond {
                content,
                truncated: false,
            } if content.is_empty() => Ok(()),
            WireEvent::Think {
                content,
                truncated: false,
            } => out.write_with(|buf| json_out::wire_text(buf, "think", content)),
            WireEvent::Respond {
                content,
                truncated: false,
            } => out.write_with(|buf| json_out::wire_text(buf, "respond", content)),
            other => out.event(other),
        }?;
    }
    recycle(events, |last| match last {
        WireEvent::Think { content, .. } | WireEvent::Respond { content, .. } => {
            content.clear();
            true
        }
        _ => false,
    });
    Ok(())
}

/// Empties `events` after they were written, except that a trailing text delta stays, with
/// its text cleared (`clear` returns false for events that cannot stay), so the parser's next
/// push extends it in place: its buffer is reused instead of a `String` being allocated and
/// freed for every chunk. An emptied delta left in front of other events writes nothing.
fn recycle<E>(events: &mut Vec<E>, clear: impl FnOnce(&mut E) -> bool) {
    let keep = events
        .pop()
        .and_then(|mut last| clear(&mut last).then_some(last));
    events.clear();
    events.extend(keep);
}

/// Runs the filter over `input`, writing events to `out`. Output is buffered and written
/// whenever the input read so far is used up (see [`lines`]), so a live pipe stays prompt.
pub fn run(args: &ParseArgs, input: impl Read, out: impl Write) -> Result<(), ParseCmdError> {
    let mut filter = Filter {
        parser: Parser::new(args),
        out: Output::new(out),
        chunk: String::new(),
    };
    if let Err(e) = lines::for_each_line(input, &mut filter) {
        // The events of the lines before a bad one are still written, as they would have
        // been on a live pipe; the bad line's error is what counts.
        if let Err(flush) = filter.out.flush() {
            tracing::debug!(error = %flush, "output lost after an input error");
        }
        return Err(e);
    }
    filter.parser.finish(&mut filter.out)?;
    filter.out.flush()?;
    Ok(())
}

/// The filter's state between lines.
struct Filter<W: Write> {
    parser: Parser,
    out: Output<W>,
    /// Where a chunk with escapes is decoded (the same buffer every line).
    chunk: String,
}

impl<W: Write> lines::LineHandler for Filter<W> {
    type Error = ParseCmdError;

    fn line(&mut self, number: usize, line: Result<&str, Utf8Error>) -> Result<(), ParseCmdError> {
        let bad = |message| ParseCmdError::BadLine {
            line: number,
            message,
        };
        let line = line.map_err(|e| bad(format!("not valid UTF-8 ({e})")))?;
        let chunk = json_in::decode_line(line, &mut self.chunk)
            .map_err(|e| bad(format!("expected a JSON string ({e})")))?;
        if let Some(chunk) = chunk {
            self.parser.push(chunk, &mut self.out)?;
        }
        Ok(())
    }

    /// Everything read so far is handled: write its events out before the next read can
    /// block, so a consumer of a live pipe sees them now.
    fn before_read(&mut self) -> Result<(), ParseCmdError> {
        Ok(self.out.flush()?)
    }
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

    /// What `looopy parse` did before its I/O was buffered: one line at a time, a new
    /// `String` per chunk, one `Vec` of events per push, one serialisation per event.
    fn line_by_line(protocol: ParseProtocol, input: &str) -> String {
        fn write<T: serde::Serialize>(out: &mut String, events: impl IntoIterator<Item = T>) {
            for e in events {
                out.push_str(&serde_json::to_string(&e).unwrap());
                out.push('\n');
            }
        }
        let mut out = String::new();
        let mut splitter = ThoughtSplitter::new(ThoughtConfig::default());
        let mut mapper = ThoughtMapper::default();
        let mut wire = WireParser::new();
        let lines = input
            .split('\n')
            .map(|l| l.trim_end_matches('\r'))
            .filter(|l| !l.trim().is_empty());
        for line in lines {
            let chunk: String = serde_json::from_str(line).unwrap();
            match protocol {
                ParseProtocol::Thinking => write(
                    &mut out,
                    splitter
                        .push(&chunk)
                        .into_iter()
                        .filter_map(|e| mapper.map(e)),
                ),
                ParseProtocol::Wire => write(&mut out, wire.push(&chunk)),
            }
        }
        match protocol {
            ParseProtocol::Thinking => write(
                &mut out,
                splitter.finish().into_iter().filter_map(|e| mapper.map(e)),
            ),
            ParseProtocol::Wire => write(&mut out, wire.finish()),
        }
        out
    }

    #[test]
    fn buffered_output_equals_the_line_by_line_reference() {
        let text = "Prose with \"quotes\", a < b, Vec<String>, tabs\t and é 世界 🦀.\n\
                    <thinking id=\"t1\" confidence=0.5>Plan: check \\ and \u{1}</thinking> \
                    <think>x</think> we go <reflection>long enough to span chunks</reflection> \
                    <respond>ok</respond> <think>more thinking</think> and an answer <thinking>\
                    open at the end <execute>[{\"name\":\"a\"}]</execute>";
        let chars: Vec<char> = text.chars().collect();
        for size in [1, 2, 3, 5, 8, 64] {
            let mut input = String::new();
            for (i, chunk) in chars.chunks(size).enumerate() {
                let chunk: String = chunk.iter().collect();
                input.push_str(&serde_json::to_string(&chunk).unwrap());
                // Line endings and blank lines of every kind.
                input.push_str(["\n", "\r\n", "\n\n", "\n  \n"][i % 4]);
            }
            for protocol in [ParseProtocol::Thinking, ParseProtocol::Wire] {
                let args = ParseArgs {
                    protocol,
                    tags: None,
                };
                let mut out = Vec::new();
                run(&args, input.as_bytes(), &mut out).unwrap();
                let expected = line_by_line(protocol, &input);
                assert!(expected.lines().count() > 5);
                assert_eq!(
                    String::from_utf8(out).unwrap(),
                    expected,
                    "{protocol:?}, {size}-char chunks"
                );
            }
        }
    }

    #[test]
    fn bad_line_names_its_number() {
        let err = parse(ParseProtocol::Wire, "\"ok\"\n{not json}\n").unwrap_err();
        assert!(err.to_string().starts_with("line 2:"), "{err}");
        let err = parse(ParseProtocol::Wire, "\"ok\"\n42\n").unwrap_err();
        assert!(err.to_string().starts_with("line 2:"), "{err}");
        // Invalid UTF-8 is found per 64 KiB block, then reported for its own line.
        let args = ParseArgs {
            protocol: ParseProtocol::Thinking,
            tags: None,
        };
        let mut out = Vec::new();
        let input: &[u8] = b"\"a\"\n\n\"\xff\"\n\"b\"\n";
        let err = run(&args, input, &mut out).unwrap_err();
        assert!(
            err.to_string().starts_with("line 3: not valid UTF-8"),
            "{err}"
        );
        assert!(out.starts_with(br#"{"kind":"content-delta","delta":"a""#));
    }
}
