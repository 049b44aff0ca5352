//! Property tests: any chunking of the same input gives the same (merged) events, held text
//! stays under the cap, and for well-formed transcripts the text events are exactly the input
//! minus the recognised tags (opening tags with quoted, unquoted and boolean attributes).

mod thought_support;

use looopy_stream::thought::{SplitEvent, ThoughtConfig, ThoughtSplitter};
use proptest::prelude::*;
use proptest::sample::Index;
use thought_support::*;

/// Cuts `input` at the char boundaries at or before the chosen points.
fn cut<'a>(input: &'a str, points: &[Index]) -> Vec<&'a str> {
    let at: Vec<usize> = points.iter().map(|p| p.index(input.len() + 1)).collect();
    looopy_testkit::chunks::cut_str(input, &at)
}

/// Fragments that, glued at random, hit every state: names and their prefixes, attribute
/// syntax, quotes, entities, whitespace, multi-byte chars.
const FRAGMENTS: &[&str] = &[
    "<",
    ">",
    "/",
    "=",
    "\"",
    "'",
    " ",
    "\n",
    "\t",
    "&",
    ";",
    "&amp;",
    "&quot;",
    "&#x41;",
    "&q",
    "thinking",
    "think",
    "thought",
    "th",
    "Think",
    "THINKING",
    "thinkingcap",
    "reflection",
    "strategy",
    "str",
    "id",
    "thought=",
    "content=",
    "thought_type",
    "confidence=0.5",
    "x",
    "word",
    "Vec<String>",
    "a < b",
    "c > d",
    "<br>",
    "<!-- c -->",
    "</",
    "/>",
    "é",
    "日本",
    "😀",
];

fn random_input() -> impl Strategy<Value = String> {
    prop::collection::vec(prop::sample::select(FRAGMENTS), 0..80).prop_map(|f| f.concat())
}

fn configs() -> [ThoughtConfig; 2] {
    [
        ThoughtConfig::default(),
        ThoughtConfig {
            max_tag_len: 24,
            ..ThoughtConfig::default()
        },
    ]
}

proptest! {
    #[test]
    fn any_chunking_gives_the_same_events(
        input in random_input(),
        points in prop::collection::vec(any::<Index>(), 0..16),
    ) {
        for config in configs() {
            let whole = merge(split_chunks(&config, [input.as_str()]));
            let chunked = merge(split_chunks(&config, cut(&input, &points)));
            prop_assert_eq!(&chunked, &whole);
            let singles = merge(split_chunks(&config, char_chunks(&input, 1)));
            prop_assert_eq!(&singles, &whole);
        }
    }

    #[test]
    fn every_small_fixed_chunk_size_gives_the_same_events(input in random_input()) {
        // Chunks of 1..=16 bytes take the per-length fast paths; 17 takes the general loop.
        for config in configs() {
            let whole = merge(split_chunks(&config, [input.as_str()]));
            for size in 1..=17 {
                let chunked = merge(split_chunks(&config, char_chunks(&input, size)));
                prop_assert_eq!(&chunked, &whole, "chunk size {}", size);
            }
        }
    }

    #[test]
    fn held_text_stays_under_the_cap_and_nothing_is_empty(
        input in random_input(),
        points in prop::collection::vec(any::<Index>(), 0..16),
    ) {
        let config = ThoughtConfig { max_tag_len: 24, ..ThoughtConfig::default() };
        let mut s = ThoughtSplitter::new(config);
        let mut events = Vec::new();
        for piece in cut(&input, &points) {
            s.push_into(piece, &mut events);
            prop_assert!(s.buffered_len() <= 24);
        }
        s.finish_into(&mut events);
        prop_assert_eq!(s.buffered_len(), 0);
        let mut open = None;
        for e in &events {
            match e {
                SplitEvent::Text(t) => prop_assert!(!t.is_empty() && open.is_none()),
                SplitEvent::ThoughtStart { id, .. } => {
                    prop_assert!(open.is_none());
                    open = Some(id.clone());
                }
                SplitEvent::ThoughtDelta { id, delta } => {
                    prop_assert!(!delta.is_empty());
                    prop_assert_eq!(Some(id), open.as_ref());
                }
                SplitEvent::ThoughtEnd(t) => {
                    prop_assert_eq!(Some(&t.id), open.as_ref());
                    open = None;
                }
                _ => prop_assert!(false, "unknown event"),
            }
        }
        prop_assert!(open.is_none(), "every thought is closed");
    }

    #[test]
    fn well_formed_transcripts_keep_text_exact(
        segments in prop::collection::vec(segment(), 0..12),
        points in prop::collection::vec(any::<Index>(), 0..16),
    ) {
        let input: String = segments.iter().map(|s| s.raw.as_str()).collect();
        let expected_text: String = segments.iter().filter(|s| !s.is_thought).map(|s| s.raw.as_str()).collect();
        let expected_thoughts: Vec<&str> = segments.iter().filter(|s| s.is_thought).map(|s| s.content.as_str()).collect();
        let config = ThoughtConfig::default();
        let whole = merge(split_chunks(&config, [input.as_str()]));
        prop_assert_eq!(text_of(&whole), expected_text);
        let thoughts = thoughts_of(&whole);
        prop_assert_eq!(thoughts.iter().map(|t| t.content.as_str()).collect::<Vec<_>>(), expected_thoughts);
        prop_assert!(thoughts.iter().all(|t| !t.truncated));
        let chunked = merge(split_chunks(&config, cut(&input, &points)));
        prop_assert_eq!(chunked, whole);
    }
}

/// One piece of a well-formed transcript.
#[derive(Debug, Clone)]
struct Segment {
    raw: String,
    is_thought: bool,
    content: String,
}

/// Prose and code that contains `<` and `>` but never a configured tag.
const TEXT_TOKENS: &[&str] = &[
    "word",
    " ",
    "\n",
    "  ",
    "Vec<String>",
    "a < b",
    "c > d",
    "x<3",
    "=>",
    "<br>",
    "<div class=\"x\">",
    "<!-- c -->",
    "</thinking>",
    "<thinkingcap>",
    "<think it's>",
    "&amp;",
    "é",
    "日本",
    "😀",
    "'",
    "\"",
];

/// Thought bodies: markup and code, stray closers of other names, never this tag.
const BODY_TOKENS: &[&str] = &[
    "word",
    " ",
    "\n",
    "  ",
    "Vec<String>",
    "a < b",
    "c > d",
    "x<3",
    "=>",
    "<br>",
    "<div class=\"x\">",
    "<!-- c -->",
    "&amp;",
    "é",
    "日本",
    "😀",
    "'",
    "\"",
    "<thinkingcap>",
    "</Thinking>",
    "<Think>",
    "</reasoning>",
];

fn tokens(alphabet: &'static [&'static str]) -> impl Strategy<Value = String> {
    prop::collection::vec(prop::sample::select(alphabet), 0..20).prop_map(|t| t.concat())
}

fn escape_attr(raw: &str) -> String {
    raw.replace('&', "&amp;").replace('"', "&quot;")
}

/// Attributes a thought does not read, in every syntax HTML allows: boolean (`verbose`),
/// unquoted (`a=1`), quoted, with any whitespace around them (`<t a=1 b />`).
fn extra_attrs() -> impl Strategy<Value = String> {
    let name = prop::sample::select(&["a", "b", "verbose", "draft", "data-x", "x:y", "_n"][..]);
    let space = prop::sample::select(&[" ", "  ", "\n", "\t"][..]);
    let attr =
        (space, name, 0..4u8, "[a-z0-9.]{1,5}").prop_map(|(space, name, form, value)| match form {
            0 | 1 => format!("{space}{name}"),
            2 => format!("{space}{name}={value}"),
            _ => format!("{space}{name} = '{value}'"),
        });
    (
        prop::collection::vec(attr, 0..4),
        prop::sample::select(&["", " ", "\n"][..]),
    )
        .prop_map(|(attrs, trailing)| attrs.concat() + trailing)
}

fn segment() -> impl Strategy<Value = Segment> {
    let tag = prop::sample::select(&["thinking", "think", "reflection", "planning"][..]);
    prop_oneof![
        tokens(TEXT_TOKENS).prop_map(|raw| Segment {
            raw,
            is_thought: false,
            content: String::new()
        }),
        (tag.clone(), extra_attrs(), tokens(BODY_TOKENS)).prop_filter_map(
            "body must not close or nest",
            |(tag, attrs, body)| {
                let clash = body.contains(&format!("</{tag}"))
                    || body.contains(&format!("<{tag}>"))
                    || body.contains(&format!("<{tag} "));
                (!clash).then(|| Segment {
                    raw: format!("<{tag}{attrs}>{body}</{tag}>"),
                    is_thought: true,
                    content: body,
                })
            }
        ),
        (
            tag.clone(),
            tokens(TEXT_TOKENS),
            any::<bool>(),
            extra_attrs(),
            extra_attrs()
        )
            .prop_map(|(tag, content, self_closing, before, after)| {
                // `after` may end with whitespace, a boolean name or `confidence=0.5`, each
                // directly followed by `/>` or `>`.
                let attrs = format!(
                    r#"{before} thought="{}" thought_type="reflection" confidence=0.5{after}"#,
                    escape_attr(&content),
                );
                let raw = if self_closing {
                    format!("<{tag}{attrs}/>")
                } else {
                    format!("<{tag}{attrs}></{tag}>")
                };
                Segment {
                    raw,
                    is_thought: true,
                    content,
                }
            }),
    ]
}
