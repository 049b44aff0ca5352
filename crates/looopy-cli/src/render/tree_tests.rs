//! The delegation tree on a terminal, from synthetic event sequences shaped like the
//! agent core's: `subtask-created` in the parent's stream, then the child's events stamped
//! with `parentTaskId` and `path`.

use looopy_protocol::{Event, EventPayload, Sequencer, Stamp};
use serde_json::{Value, json};

use super::{Renderer, Style};

const PLAIN: Style = Style::Human { color: false };

/// A payload from its JSON form (`kind` and fields), as the wire has it.
fn payload(v: Value) -> EventPayload {
    serde_json::from_value(v).unwrap()
}

struct Script {
    seq: Sequencer,
    events: Vec<Event>,
}

impl Script {
    fn new() -> Self {
        Self {
            seq: Sequencer::default(),
            events: Vec::new(),
        }
    }

    fn at(&mut self, stamp: &Stamp, v: Value) -> &mut Self {
        self.events.push(stamp.stamp(&self.seq, payload(v)));
        self
    }

    fn text(&mut self, stamp: &Stamp, s: &str) -> &mut Self {
        self.at(
            stamp,
            json!({"kind": "content-delta", "delta": s, "index": 0}),
        )
    }

    fn delegate(&mut self, parent: &Stamp, child: &Stamp, name: &str, msg: &str) -> &mut Self {
        let call = format!("call-{}", child.task_id);
        self.at(
            parent,
            json!({"kind": "tool-start", "toolCallId": call, "toolName": name,
                   "arguments": {"message": msg}}),
        )
        .at(
            parent,
            json!({"kind": "subtask-created", "subtaskId": child.task_id, "agentId": name,
                   "prompt": msg, "toolCallId": call}),
        )
        .at(
            child,
            json!({"kind": "task-created", "initiator": "agent",
                   "metadata": {"agentId": name}}),
        )
        .at(child, json!({"kind": "task-status", "status": "working"}))
    }

    fn tool(&mut self, stamp: &Stamp, name: &str, result: &str) -> &mut Self {
        let call = format!("{}-{name}", stamp.task_id);
        self.at(
            stamp,
            json!({"kind": "tool-start", "toolCallId": call, "toolName": name, "arguments": {}}),
        )
        .at(
            stamp,
            json!({"kind": "tool-complete", "toolCallId": call, "toolName": name,
                   "success": true, "result": result}),
        )
    }

    fn finish(&mut self, stamp: &Stamp, answer: &str) -> &mut Self {
        self.at(stamp, json!({"kind": "task-status", "status": "completed"}))
            .at(
                stamp,
                json!({"kind": "task-complete", "status": "completed", "content": answer}),
            )
    }

    fn answered(&mut self, parent: &Stamp, child: &Stamp, name: &str, answer: &str) -> &mut Self {
        self.at(
            parent,
            json!({"kind": "tool-complete", "toolCallId": format!("call-{}", child.task_id),
                   "toolName": name, "success": true, "result": answer}),
        )
    }

    fn render(&self, renderer: Renderer) -> String {
        let mut renderer = renderer;
        let mut out = Vec::new();
        for e in &self.events {
            renderer.render(e, &mut out).unwrap();
        }
        String::from_utf8(out).unwrap()
    }
}

#[test]
fn a_two_level_tree_is_indented_under_each_subtask_line() {
    let root = Stamp::new("c", "root");
    let researcher = root.child("r1");
    let analyst = researcher.child("a1");
    let mut s = Script::new();
    s.text(&root, "Let me ask.")
        .delegate(&root, &researcher, "researcher", "find X")
        .at(
            &researcher,
            json!({"kind": "thought-stream", "thoughtId": "t", "index": 0, "delta": "which source?"}),
        )
        .tool(&researcher, "clock", "12:00")
        .delegate(&researcher, &analyst, "analyst", "check X")
        .text(&analyst, "X holds.\nSure.")
        .finish(&analyst, "X holds. Sure.")
        .answered(&researcher, &analyst, "analyst", "X holds. Sure.")
        .text(&researcher, "X is true.")
        .finish(&researcher, "X is true.")
        .answered(&root, &researcher, "researcher", "X is true.")
        .text(&root, "Done: X.")
        .finish(&root, "Done: X.");
    let out = s.render(Renderer::new(PLAIN));
    // Each sub-agent's answer shows once, in its own lines: the `✓` line of the call that
    // delegated to it does not repeat it.
    assert_eq!(
        out,
        "Let me ask.\n\
         ⚙ researcher {\"message\":\"find X\"}\n\
         ↳ researcher: find X\n\
         \x20 researcher │ 💭 which source?\n\
         \x20 researcher │ ⚙ clock {}\n\
         \x20 researcher │ ✓ clock → 12:00\n\
         \x20 researcher │ ⚙ analyst {\"message\":\"check X\"}\n\
         \x20 researcher │ ↳ analyst: check X\n\
         \x20   analyst │ X holds.\n\
         \x20   analyst │ Sure.\n\
         \x20   └ analyst completed\n\
         \x20 researcher │ ✓ analyst\n\
         \x20 researcher │ X is true.\n\
         \x20 └ researcher completed\n\
         ✓ researcher\n\
         Done: X.\n"
    );
}

#[test]
fn parallel_children_never_share_a_line() {
    let root = Stamp::new("c", "root");
    let a = root.child("ca");
    let b = root.child("cb");
    let mut s = Script::new();
    s.delegate(&root, &a, "alpha", "one")
        .delegate(&root, &b, "beta", "two")
        .text(&a, "al")
        .text(&b, "be")
        .text(&a, "pha says hi")
        .text(&b, "ta says\nhello")
        .finish(&b, "beta says hello")
        .text(&a, "!")
        .finish(&a, "alpha says hi!")
        .answered(&root, &b, "beta", "beta says hello")
        .answered(&root, &a, "alpha", "alpha says hi!");
    let out = s.render(Renderer::new(PLAIN));
    // Beta's output waits behind alpha's open line, so neither line is cut in pieces.
    assert_eq!(
        out,
        "⚙ alpha {\"message\":\"one\"}\n\
         ↳ alpha: one\n\
         ⚙ beta {\"message\":\"two\"}\n\
         ↳ beta: two\n\
         \x20 alpha │ alpha says hi!\n\
         \x20 └ alpha completed\n\
         \x20 beta │ beta says\n\
         \x20 beta │ hello\n\
         \x20 └ beta completed\n\
         ✓ beta\n\
         ✓ alpha\n"
    );
    // Every line of a child's output names it: one grep pulls it out.
    let alpha: Vec<&str> = out.lines().filter(|l| l.contains("alpha │")).collect();
    assert_eq!(alpha, ["  alpha │ alpha says hi!"]);
}

fn pausing_child() -> Script {
    let root = Stamp::new("c", "root");
    let child = root.child("k1");
    let mut s = Script::new();
    s.delegate(&root, &child, "booker", "book a table")
        .tool(&child, "search", "3 places")
        .at(
            &child,
            json!({"kind": "input-required", "inputId": "in-1", "inputType": "clarification",
                   "prompt": "Which city?"}),
        )
        .at(
            &child,
            json!({"kind": "task-status", "status": "waiting-input"}),
        )
        .at(
            &root,
            json!({"kind": "task-status", "status": "waiting-subtask",
                   "message": "waiting for sub-agent booker",
                   "metadata": {"blockedBy": "k1"}}),
        );
    s
}

/// A child that stays mid-line for ever cannot hold the others back without bound.
#[test]
fn held_output_is_bounded_and_flushed() {
    let root = Stamp::new("c", "root");
    let a = root.child("ca");
    let b = root.child("cb");
    let mut s = Script::new();
    s.delegate(&root, &a, "alpha", "one")
        .delegate(&root, &b, "beta", "two")
        .text(&a, "still talking");
    for _ in 0..(super::MAX_HELD + 10) {
        s.text(&b, "x");
    }
    let mut renderer = Renderer::new(PLAIN);
    let mut out = Vec::new();
    for event in &s.events {
        renderer.render(event, &mut out).unwrap();
    }
    renderer.flush_held(&mut out).unwrap();
    let out = String::from_utf8(out).unwrap();
    let xs = out.matches('x').count();
    assert_eq!(xs, super::MAX_HELD + 10, "nothing lost");
    assert!(out.contains("  alpha │ still talking\n"));
}

#[test]
fn a_child_pausing_for_input_asks_under_its_name_and_the_parent_says_it_waits() {
    let out = pausing_child().render(Renderer::new(PLAIN));
    assert_eq!(
        out,
        "⚙ booker {\"message\":\"book a table\"}\n\
         ↳ booker: book a table\n\
         \x20 booker │ ⚙ search {}\n\
         \x20 booker │ ✓ search → 3 places\n\
         \x20 booker │ ? Which city?\n\
         … waiting for sub-agent booker\n"
    );
    // Collapsed, the question still shows: only the user can answer it.
    let collapsed = pausing_child().render(Renderer::new(PLAIN).collapsed(true));
    assert_eq!(
        collapsed,
        "⚙ booker {\"message\":\"book a table\"}\n\
         ↳ booker: book a table\n\
         \x20 booker │ ? Which city?\n\
         … waiting for sub-agent booker\n"
    );
}

#[test]
fn collapsed_children_are_their_subtask_line_and_a_summary() {
    let root = Stamp::new("c", "root");
    let researcher = root.child("r1");
    let analyst = researcher.child("a1");
    let failing = root.child("f1");
    let mut s = Script::new();
    s.delegate(&root, &researcher, "researcher", "find X")
        .delegate(&root, &failing, "critic", "judge X")
        .tool(&researcher, "clock", "12:00")
        .delegate(&researcher, &analyst, "analyst", "check X")
        .tool(&analyst, "search", "hits")
        .at(
            &analyst,
            json!({"kind": "data-write", "artifactId": "d1", "name": "facts", "data": {"x": 1}}),
        )
        .finish(&analyst, "ok")
        .text(&researcher, "X is true.")
        .finish(&researcher, "X is true.")
        .at(
            &failing,
            json!({"kind": "task-status", "status": "failed",
                   "error": {"code": "max_iterations", "message": "too many steps"}}),
        )
        .at(
            &failing,
            json!({"kind": "task-complete", "status": "failed"}),
        )
        .answered(&root, &researcher, "researcher", "X is true.")
        .text(&root, "So: X.");
    let out = s.render(Renderer::new(PLAIN).collapsed(true));
    assert_eq!(
        out,
        "⚙ researcher {\"message\":\"find X\"}\n\
         ↳ researcher: find X\n\
         ⚙ critic {\"message\":\"judge X\"}\n\
         ↳ critic: judge X\n\
         \x20 └ researcher completed · 3 tool calls · 1 artifact\n\
         \x20 └ critic failed · 0 tool calls: too many steps\n\
         ✓ researcher → X is true.\n\
         So: X."
    );
}

#[test]
fn colour_keeps_a_thought_dimmed_after_a_childs_prefix() {
    let root = Stamp::new("c", "root");
    let child = root.child("r1");
    let mut s = Script::new();
    s.delegate(&root, &child, "researcher", "go").at(
        &child,
        json!({"kind": "thought-stream", "thoughtId": "t", "index": 0, "delta": "a\nb"}),
    );
    let out = s.render(Renderer::new(Style::Human { color: true }));
    let prefix = "  \x1b[36mresearcher\x1b[0m\x1b[2m │\x1b[0m ";
    assert!(
        out.ends_with(&format!("{prefix}\x1b[2m💭 a\n{prefix}\x1b[2mb")),
        "{out:?}"
    );
}

#[test]
fn a_child_joined_midway_is_named_by_its_id_until_known() {
    // `looopy tail` with a Last-Event-ID inside a child: no subtask-created seen.
    let root = Stamp::new("c", "root");
    let child = root.child("task-0123456789");
    let mut s = Script::new();
    s.text(&child, "partial answer")
        .finish(&child, "partial answer");
    let out = s.render(Renderer::new(PLAIN));
    assert_eq!(out, "  task-012 │ partial answer\n  └ task-012 completed\n");
}
