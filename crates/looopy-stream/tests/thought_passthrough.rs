//! Ordinary text must pass through exactly and promptly — the reference implementation's
//! failures: `Vec<String>` stalled, `a < b … c > d` mangled, `<br>` and comments vanished,
//! words around a thought glued together.

mod thought_support;

use looopy_stream::thought::ThoughtSplitter;
use thought_support::*;

const ORDINARY: &[&str] = &[
    "Vec<String>",
    "let v: Vec<String> = Vec::new();",
    "a < b and c > d",
    "x<3",
    "if x<3 && y>2 { z => w }",
    "=>",
    "<br>",
    "line<br/>break",
    "<!-- c -->",
    "<div class=\"x\">hi</div>",
    "<thinkingcap>",
    "<think, about it>",
    "I <think it's fine>",
    "<thinking:x>",
    "</thinking>",
    "stray </think > closer",
    "<<thinking",
    "<",
    ">",
    "<>",
    "< thinking>",
    "<thinking a=>",
    "<thinking a=\"x\"b>",
    "<thinking / >",
    "fn f<T: Into<String>>(t: T) -> Option<Box<dyn Fn()>> { None }",
    "```rust\nfn main() { if a < b { println!(\"{}\", a >> 2); } }\n```",
    "HashMap<String, Vec<Option<u8>>> <Strat> <thoughts> <Reason> Vec<Thought> <THINK>",
    "unicode <é> <日本> <thinking\u{1F600}> ✓",
];

#[test]
fn ordinary_text_passes_through_exactly() {
    for input in ORDINARY {
        check(input, &[text(input)]);
    }
}

#[test]
fn whitespace_around_a_thought_is_kept() {
    let mut expected = vec![text("a ")];
    expected.extend(whole("thought-1", "thinking", "x"));
    expected.push(text(" b"));
    check("a <thinking>x</thinking> b", &expected);

    let mut expected = vec![text("\n\n  ")];
    expected.extend(whole("thought-1", "thinking", "\n x \n"));
    expected.push(text("\n\nanswer\n"));
    check("\n\n  <thinking>\n x \n</thinking>\n\nanswer\n", &expected);
}

#[test]
fn text_is_released_as_soon_as_it_cannot_be_a_tag() {
    let mut s = ThoughtSplitter::default();
    // No configured tag starts with `S` (names are case-sensitive): released at once.
    assert_eq!(s.push("Vec<S"), vec![text("Vec<S")]);
    assert_eq!(s.buffered_len(), 0);
    // `<s` could still become `<strategy`: held until it cannot.
    assert_eq!(s.push("tring> x<s"), vec![text("tring> x")]);
    assert_eq!(s.buffered_len(), 2);
    // `<stri` matches no tag: the held `<st` and the rest go out together.
    assert_eq!(s.push("tri"), vec![text("<stri")]);
    assert_eq!(s.buffered_len(), 0);
    for input in [
        "a < b",
        "x<3",
        "=>",
        "<br>",
        "<!--",
        "</thinking>",
        "<thinkingcap",
    ] {
        let mut s = ThoughtSplitter::default();
        assert_eq!(
            s.push(input),
            vec![text(input)],
            "{input:?} must not be held"
        );
        assert_eq!(s.buffered_len(), 0);
    }
}

#[test]
fn one_char_at_a_time_never_holds_more_than_the_open_marker() {
    let input = "let v: Vec<String> = a<b; // x <br> y </thinking> <!-- z -->";
    let mut s = ThoughtSplitter::default();
    let mut released = String::new();
    for (i, c) in input.char_indices() {
        released.push_str(&text_of(&s.push(c.encode_utf8(&mut [0; 4]))));
        // Everything pushed so far is out, except what is held.
        assert_eq!(released.len() + s.buffered_len(), i + c.len_utf8());
        assert!(s.buffered_len() <= "<thinking".len());
    }
    assert!(s.finish().is_empty());
    assert_eq!(released, input);
}

#[test]
fn a_stray_closing_tag_is_text() {
    let mut expected = vec![text("x</thinking>y")];
    expected.extend(whole("thought-1", "think", "z"));
    check("x</thinking>y<think>z</think>", &expected);
}

#[test]
fn push_into_extends_the_last_event() {
    let mut s = ThoughtSplitter::default();
    let mut out = Vec::new();
    for chunk in ["ab", "c<th", "ink>d", "e</think>", "f"] {
        s.push_into(chunk, &mut out);
    }
    s.finish_into(&mut out);
    let mut expected = vec![text("abc")];
    expected.extend(whole("thought-1", "think", "de"));
    expected.push(text("f"));
    assert_eq!(out, expected);
}
