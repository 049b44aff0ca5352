//! Property test for the wire protocol's text rule: the `think` and `respond` contents,
//! concatenated in order, are the input with the recognised markers removed — whitespace and
//! everything else kept byte for byte — under any chunking. A marker is recognised only where
//! the protocol gives it meaning (inside `<think>` only `</think>` is; inside `<respond>`
//! `<think>` is literal text), so the documents put markers both where they count and where
//! they are just text.

use looopy_stream::wire::{WireEvent, WireParser};
use looopy_testkit::chunks::cut_str as chunk_at;
use proptest::prelude::*;

/// Text that can never complete a marker on its own or glued to its neighbours: the only
/// letters are `a`–`c`, and the fixed fragments stop at least one letter short of a marker.
fn text() -> impl Strategy<Value = String> {
    let fragment = prop_oneof![
        4 => "[a-c <>/\n\t é世🦀]{1,6}",
        1 => prop::sample::select(&[
            "<thi", "</thin", "<respon", "</respo", "<en", "<execu", "</resul", "< think>",
            "<Think>", "</ respond>", "a < b", "x<3", "<br>", "  ", "\n\n", " \t", "<", "</",
        ][..])
        .prop_map(str::to_owned),
    ];
    prop::collection::vec(fragment, 0..6).prop_map(|parts| parts.concat())
}

/// Text inside a block, with markers that are literal there mixed in.
fn block_text(literal_markers: &'static [&'static str]) -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        3 => text(),
        1 => prop::sample::select(literal_markers).prop_map(str::to_owned),
    ];
    prop::collection::vec(piece, 0..5).prop_map(|parts| parts.concat())
}

const LITERAL_IN_THINK: &[&str] = &[
    "<think>",
    "<respond>",
    "</respond>",
    "<execute>",
    "</execute>",
    "<results>",
    "<end>",
];
const LITERAL_IN_RESPOND: &[&str] = &[
    "<think>",
    "</think>",
    "<respond>",
    "</execute>",
    "<results>",
    "</results>",
];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Think,
    Respond,
}

/// One piece of a document: its raw text and the content it contributes.
#[derive(Debug, Clone)]
struct Piece {
    raw: String,
    content: Option<(Kind, String)>,
}

fn piece() -> impl Strategy<Value = Piece> {
    prop_oneof![
        3 => text().prop_map(|t| Piece { raw: t.clone(), content: Some((Kind::Respond, t)) }),
        2 => block_text(LITERAL_IN_THINK).prop_map(|t| Piece {
            raw: format!("<think>{t}</think>"),
            content: Some((Kind::Think, t)),
        }),
        2 => block_text(LITERAL_IN_RESPOND).prop_map(|t| Piece {
            raw: format!("<respond>{t}</respond>"),
            content: Some((Kind::Respond, t)),
        }),
        // Stray closing markers outside blocks are recognised (and dropped).
        1 => prop::sample::select(&["</think>", "</respond>", "</execute>", "</results>"][..])
            .prop_map(|m| Piece { raw: m.to_owned(), content: None }),
    ]
}

/// How a document ends: nothing more, a block left open, or a marker that stops the parser
/// (after which nothing counts, so junk follows).
fn ending() -> impl Strategy<Value = Piece> {
    const JUNK: &str = " after <think>ignored</think> <respond>no";
    prop_oneof![
        Just(Piece {
            raw: String::new(),
            content: None
        }),
        block_text(LITERAL_IN_THINK).prop_map(|t| Piece {
            raw: format!("<think>{t}"),
            content: Some((Kind::Think, t)),
        }),
        block_text(LITERAL_IN_RESPOND).prop_map(|t| Piece {
            raw: format!("<respond>{t}"),
            content: Some((Kind::Respond, t)),
        }),
        block_text(LITERAL_IN_RESPOND).prop_map(|t| Piece {
            raw: format!("<respond>{t}<end>{JUNK}"),
            content: Some((Kind::Respond, t)),
        }),
        Just(Piece {
            raw: format!("<end>{JUNK}"),
            content: None
        }),
        Just(Piece {
            raw: format!("<execute>[{{\"name\": \"x\"}}]</execute>{JUNK}"),
            content: None,
        }),
    ]
}

/// The content the parser produced, as (kind, text) runs with adjacent same-kind runs joined.
fn content_runs<'a>(chunks: impl IntoIterator<Item = &'a str>) -> Vec<(Kind, String)> {
    let mut parser = WireParser::new();
    let mut events = Vec::new();
    for chunk in chunks {
        parser.push_into(chunk, &mut events);
    }
    events.extend(parser.finish());
    runs(events.into_iter().filter_map(|event| match event {
        WireEvent::Think { content, .. } => Some((Kind::Think, content)),
        WireEvent::Respond { content, .. } => Some((Kind::Respond, content)),
        _ => None,
    }))
}

fn runs(pieces: impl IntoIterator<Item = (Kind, String)>) -> Vec<(Kind, String)> {
    let mut runs: Vec<(Kind, String)> = Vec::new();
    for (kind, text) in pieces {
        if text.is_empty() {
            continue;
        }
        match runs.last_mut() {
            Some((last, run)) if *last == kind => run.push_str(&text),
            _ => runs.push((kind, text)),
        }
    }
    runs
}

proptest! {
    #[test]
    fn content_is_the_input_minus_recognised_markers(
        pieces in prop::collection::vec(piece(), 0..10),
        end in ending(),
        cuts in prop::collection::vec(any::<usize>(), 0..24),
    ) {
        let all: Vec<&Piece> = pieces.iter().chain([&end]).collect();
        let input: String = all.iter().map(|p| p.raw.as_str()).collect();
        let expected = runs(all.iter().filter_map(|p| p.content.clone()));

        let whole = content_runs([input.as_str()]);
        prop_assert_eq!(&whole, &expected, "input {:?}", input);
        // The plain statement of the rule: joined content == input minus markers.
        let joined: String = whole.iter().map(|(_, t)| t.as_str()).collect();
        let minus: String = all.iter().filter_map(|p| p.content.as_ref()).map(|(_, t)| t.as_str()).collect();
        prop_assert_eq!(joined, minus);

        prop_assert_eq!(content_runs(chunk_at(&input, &cuts)), expected.clone());
        let chars: Vec<String> = input.chars().map(String::from).collect();
        prop_assert_eq!(content_runs(chars.iter().map(String::as_str)), expected);
    }
}
