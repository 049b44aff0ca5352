//! The three thought formats, their attributes, ids and nesting — each input checked whole,
//! split at every char boundary, and fed one char at a time.

mod thought_support;

use looopy_stream::thought::{SplitEvent, Thought, ThoughtConfig, ThoughtSplitter};
use thought_support::*;

fn concat(parts: Vec<Vec<SplitEvent>>) -> Vec<SplitEvent> {
    parts.into_iter().flatten().collect()
}

#[test]
fn body_format_streams_the_body() {
    check(
        "<thinking>This is my thought</thinking>",
        &whole("thought-1", "thinking", "This is my thought"),
    );
    // The body arrives as deltas while it streams, before the closing tag exists.
    let mut s = ThoughtSplitter::default();
    assert_eq!(
        s.push("<thinking>I should "),
        vec![
            start("thought-1", "thinking"),
            delta("thought-1", "I should ")
        ]
    );
    assert_eq!(s.push("verify"), vec![delta("thought-1", "verify")]);
    assert_eq!(s.push(" first</thin"), vec![delta("thought-1", " first")]);
    assert_eq!(
        s.push("king> The"),
        vec![
            end(thought("thought-1", "thinking", "I should verify first")),
            text(" The")
        ]
    );
}

#[test]
fn attribute_format_with_closing_tag() {
    let t = Thought {
        thought_type: Some("reflection".into()),
        confidence: Some(0.7),
        ..thought("thought-1", "thinking", "This is my thought")
    };
    check(
        r#"<thinking thought="This is my thought" thought_type="reflection" confidence="0.7"></thinking>"#,
        &[
            start("thought-1", "thinking"),
            delta("thought-1", "This is my thought"),
            end(t),
        ],
    );
}

#[test]
fn self_closing_format() {
    let t = Thought {
        thought_type: Some("reflection".into()),
        confidence: Some(0.7),
        ..thought("thought-1", "thinking", "This is my thought")
    };
    let expected = [
        text("a "),
        start("thought-1", "thinking"),
        delta("thought-1", "This is my thought"),
        end(t),
        text(" b"),
    ];
    check(
        r#"a <thinking thought="This is my thought" thought_type="reflection" confidence="0.7" /> b"#,
        &expected,
    );
    check(
        r#"a <thinking thought="This is my thought" thought_type="reflection" confidence="0.7"/> b"#,
        &expected,
    );
    check(
        "<thinking/>x",
        &concat(vec![whole("thought-1", "thinking", ""), vec![text("x")]]),
    );
}

#[test]
fn content_alias_camel_case_verbosity_and_id() {
    let t = Thought {
        thought_type: Some("planning".into()),
        verbosity: Some("brief".into()),
        confidence: Some(0.9),
        ..thought("abc", "planning", "Querying sales database")
    };
    check(
        r#"<planning id='abc' content='Querying sales database' thoughtType=planning verbosity=brief confidence=0.9/>"#,
        &[
            start("abc", "planning"),
            delta("abc", "Querying sales database"),
            end(t),
        ],
    );
}

#[test]
fn attribute_values_decode_entities_and_may_hold_gt() {
    check(
        r#"<thought thought="if a &gt; b &amp;&amp; c > d then &quot;yes&quot; &apos;&#233;&apos;" />"#,
        &whole(
            "thought-1",
            "thought",
            r#"if a > b && c > d then "yes" 'é'"#,
        ),
    );
    check(
        r#"<thought thought='say "hi" > there'></thought>"#,
        &whole("thought-1", "thought", r#"say "hi" > there"#),
    );
}

#[test]
fn attribute_content_comes_before_the_body() {
    check(
        r#"<thinking thought="first. ">then the body</thinking>"#,
        &[
            start("thought-1", "thinking"),
            delta("thought-1", "first. then the body"),
            end(thought("thought-1", "thinking", "first. then the body")),
        ],
    );
}

#[test]
fn id_attribute_and_generated_ids() {
    check(
        r#"<thinking id="abc">I should verify first</thinking><think>x</think><thinking id="">y</thinking>"#,
        &concat(vec![
            whole("abc", "thinking", "I should verify first"),
            whole("thought-1", "think", "x"),
            whole("thought-2", "thinking", "y"),
        ]),
    );
    let mut s = ThoughtSplitter::default().with_id_prefix("t");
    let events = merge([s.push("<think>a</think><think>b</think>"), s.finish()].concat());
    assert_eq!(
        events,
        concat(vec![whole("t1", "think", "a"), whole("t2", "think", "b")])
    );
}

#[test]
fn metadata_first_occurrence_wins_and_bad_confidence_is_dropped() {
    let t = Thought {
        thought_type: Some("decision".into()),
        ..thought("thought-1", "decision", "one")
    };
    check(
        r#"<decision thought="one" content="two" thought_type="decision" thoughtType="x" confidence="85" other="z"/>"#,
        &[
            start("thought-1", "decision"),
            delta("thought-1", "one"),
            end(t),
        ],
    );
}

#[test]
fn tag_names_are_case_sensitive() {
    // Capitalised names are type names in code, not thoughts.
    check(
        "<THINKING>Hm</THINKING>",
        &[text("<THINKING>Hm</THINKING>")],
    );
    check(
        "fn f() -> Vec<Thought> { Box<Strategy> }",
        &[text("fn f() -> Vec<Thought> { Box<Strategy> }")],
    );
    check(
        "<thinking>Hm</Thinking></thinking>",
        &whole("thought-1", "thinking", "Hm</Thinking>"),
    );
    let config = ThoughtConfig::with_tags(["Plan"]);
    assert_split(
        &config,
        "<Plan>p</Plan><plan>",
        &[
            start("thought-1", "Plan"),
            delta("thought-1", "p"),
            end(thought("thought-1", "Plan", "p")),
            text("<plan>"),
        ],
    );
}

#[test]
fn every_default_tag_is_a_thought() {
    for tag in looopy_stream::thought::DEFAULT_TAGS {
        check(
            &format!("<{tag}>body</{tag}>"),
            &whole("thought-1", tag, "body"),
        );
    }
}

#[test]
fn only_configured_tags_are_extracted() {
    let config = ThoughtConfig::with_tags(["scratch"]);
    assert_split(
        &config,
        "<thinking>a</thinking>",
        &[text("<thinking>a</thinking>")],
    );
    assert_split(
        &config,
        "<scratch>a</scratch>",
        &whole("thought-1", "scratch", "a"),
    );
    let none = ThoughtConfig::with_tags(Vec::<String>::new());
    assert_split(
        &none,
        "<thinking>a</thinking>",
        &[text("<thinking>a</thinking>")],
    );
}

#[test]
fn closing_tags_may_carry_whitespace() {
    for close in [
        "</thinking>",
        "</thinking >",
        "</ thinking>",
        "</thinking\n>",
        "</ \tthinking  >",
    ] {
        check(
            &format!("<thinking>x{close}y"),
            &concat(vec![whole("thought-1", "thinking", "x"), vec![text("y")]]),
        );
    }
}

#[test]
fn nested_tags_of_the_same_name_are_depth_counted() {
    let body = "a<thinking>b</thinking>c";
    check(
        &format!("<thinking>{body}</thinking>d"),
        &concat(vec![whole("thought-1", "thinking", body), vec![text("d")]]),
    );
    // A nested self-closing tag does not deepen; a nested tag with attributes does.
    let body = r#"a<thinking thought="q > r"/>b<thinking id='x'>c</thinking >"#;
    check(
        &format!("<thinking>{body}</thinking>"),
        &whole("thought-1", "thinking", body),
    );
}

#[test]
fn other_tags_inside_a_thought_are_body_text() {
    let body = "use <think> or </think> or </thinkingcap> or <br> or Vec<T> or a < b";
    check(
        &format!("<thinking>{body}</thinking>"),
        &whole("thought-1", "thinking", body),
    );
}

#[test]
fn a_closing_tag_must_match_the_open_name() {
    check(
        "<think>a</thinking>b</think>",
        &whole("thought-1", "think", "a</thinking>b"),
    );
}

#[test]
fn consecutive_and_adjacent_thoughts() {
    check(
        "<think>a</think><think>b</think>",
        &concat(vec![
            whole("thought-1", "think", "a"),
            whole("thought-2", "think", "b"),
        ]),
    );
}

#[test]
fn boolean_and_unquoted_attributes_are_markup() {
    // The issue's examples: a boolean attribute before `/>` and after an unquoted id.
    let config = ThoughtConfig::with_tags(["t", "thinking"]);
    assert_split(
        &config,
        "a <t a=1 b /> c",
        &concat(vec![
            vec![text("a ")],
            whole("thought-1", "t", ""),
            vec![text(" c")],
        ]),
    );
    assert_split(
        &config,
        "<thinking id=x verbose>body</thinking>",
        &whole("x", "thinking", "body"),
    );
    // Boolean attributes anywhere, with or without whitespace before `>` or `/>`; the
    // attributes around them are still read.
    let t = Thought {
        verbosity: Some("brief".into()),
        confidence: Some(0.5),
        ..thought("q", "thinking", "c")
    };
    assert_split(
        &config,
        "<thinking hidden id=q\tdraft verbosity=brief open confidence='0.5' thought=c final/>",
        &[start("q", "thinking"), delta("q", "c"), end(t)],
    );
    for tag in [
        "<thinking verbose >",
        "<thinking verbose\n>",
        "<thinking a b c>",
    ] {
        assert_split(
            &config,
            &format!("{tag}x</thinking>y"),
            &concat(vec![whole("thought-1", "thinking", "x"), vec![text("y")]]),
        );
    }
    assert_split(&config, "<t b/>", &whole("thought-1", "t", ""));
    // A nested tag with a boolean attribute deepens the nesting like any other opening tag.
    check(
        "<thinking>a<thinking draft>b</thinking>c</thinking>d",
        &concat(vec![
            whole("thought-1", "thinking", "a<thinking draft>b</thinking>c"),
            vec![text("d")],
        ]),
    );
}

#[test]
fn what_is_still_not_attribute_syntax() {
    for prose in [
        "I <think it's fine>",
        "<think, then>",
        "<thinking a=>",
        "<thinking a=\"x\"b>",
        "<thinking / >",
        "<thinking a b!>",
        "<thinking verbose / >",
        "<thinking a/b>",
    ] {
        check(prose, &[text(prose)]);
    }
}
