//! Unit tests of the snapshot folding (moved beside it to keep the module short).

use super::*;
use looopy_protocol::event::{ContentDelta, FileEncoding, FileWrite, TaskComplete, TaskStatus};
use looopy_protocol::{Metadata, Sequencer, Stamp};

fn file(index: u64, data: &str, complete: bool) -> EventPayload {
    EventPayload::FileWrite(FileWrite {
        artifact_id: "f1".into(),
        name: Some("notes.txt".into()),
        description: None,
        mime_type: Some("text/plain".into()),
        data: data.into(),
        encoding: Some(FileEncoding::Utf8),
        index,
        complete,
        metadata: Metadata::new(),
    })
}

#[test]
fn fold_joins_answer_and_artifact_chunks_and_tracks_state() {
    let seq = Sequencer::default();
    let stamp = Stamp::new("c", "t");
    let other = Stamp::new("c", "t2");
    let mut f = Folded::default();
    let events = [
        stamp.stamp(
            &seq,
            EventPayload::ContentDelta(ContentDelta {
                delta: "Hel".into(),
                index: 0,
            }),
        ),
        other.stamp(
            &seq,
            EventPayload::ContentDelta(ContentDelta {
                delta: "no".into(),
                index: 0,
            }),
        ),
        stamp.stamp(
            &seq,
            EventPayload::ContentDelta(ContentDelta {
                delta: "lo".into(),
                index: 1,
            }),
        ),
        stamp.stamp(&seq, file(0, "a", false)),
        stamp.stamp(&seq, file(1, "b", true)),
        stamp.stamp(
            &seq,
            EventPayload::TaskStatus(TaskStatus {
                status: TaskState::Completed,
                message: None,
                error: None,
                metadata: Metadata::new(),
            }),
        ),
        stamp.stamp(
            &seq,
            EventPayload::TaskComplete(TaskComplete {
                status: TaskState::Completed,
                content: Some("ignored: deltas were streamed".into()),
                artifacts: vec![],
                metadata: Metadata::new(),
            }),
        ),
    ];
    for e in events.iter().filter(|e| e.task_id == "t") {
        f.apply(e);
    }
    assert_eq!(f.answer, "Hello");
    assert_eq!(f.state, Some(TaskState::Completed));
    assert_eq!(f.artifacts.len(), 1);
    let file = &f.artifacts[0];
    assert_eq!((file.id.as_str(), file.bytes, file.closed), ("f1", 2, true));
    assert_eq!(file.mime_type.as_deref(), Some("text/plain"));
}

#[test]
fn histories_split_at_user_messages_or_not_at_all() {
    let tasks = vec![
        TaskRecord::new("t1", "c", TaskState::Completed),
        TaskRecord::new("t2", "c", TaskState::Working),
    ];
    let messages = vec![
        Message::system("sys"),
        Message::user("one"),
        Message::assistant("1"),
        Message::user("two"),
    ];
    let h = split_histories(&tasks, messages.clone());
    assert_eq!(h["t1"].len(), 2);
    assert_eq!(h["t2"][0].content, "two");
    assert!(split_histories(&tasks[..1], messages).is_empty());
}

#[test]
fn answered_input_requests_join_the_history_where_they_were_asked() {
    let call = looopy_protocol::ToolCall {
        id: "call-1".into(),
        name: "ask_user".into(),
        arguments: serde_json::json!({}),
    };
    let history = vec![
        Message::user("ask me").with_id("m-1"),
        Message::assistant_with_tools("Let me ask.", vec![call]),
        Message::tool_result("call-1", "ask_user", "Ada", false),
        Message::assistant("Thanks, Ada!"),
    ];
    let asked = Exchange {
        input_id: "in-1".into(),
        tool_call_id: Some("call-1".into()),
        prompt: "Name?".into(),
        answer: Some((Value::from("Ada"), Some("m-2".into()))),
    };
    let merged = with_exchanges("t", history.clone(), std::slice::from_ref(&asked));
    let seen: Vec<_> = merged
        .iter()
        .map(|m| (m.id.as_deref(), m.content.as_str()))
        .collect();
    assert_eq!(
        seen,
        [
            (Some("m-1"), "ask me"),
            (None, "Let me ask."),
            (Some("t-input-in-1"), "Name?"),
            (Some("m-2"), "Ada"),
            (None, "Ada"),
            (None, "Thanks, Ada!"),
        ]
    );
    // Not stored yet: at the end. Unanswered: not at all. No history: none.
    let pending = Exchange {
        answer: None,
        ..asked.clone()
    };
    let merged = with_exchanges("t", history[..1].to_vec(), &[asked.clone(), pending]);
    assert_eq!(merged.len(), 3);
    assert_eq!(merged[2].id.as_deref(), Some("m-2"));
    assert!(with_exchanges("t", vec![], &[asked]).is_empty());
}

#[test]
fn snapshot_prefers_the_log_and_falls_back_to_the_record() {
    let mut record = TaskRecord::new("t", "c", TaskState::Completed);
    record.result = Some("final".into());
    let s = snapshot(&record, None, vec![]);
    assert_eq!(
        (s.state, s.answer.as_deref()),
        (TaskState::Completed, Some("final"))
    );
    let folded = Folded {
        state: Some(TaskState::Working),
        answer: "par".into(),
        ..Folded::default()
    };
    let s = snapshot(&record, Some(&folded), vec![]);
    assert_eq!(
        (s.state, s.answer.as_deref()),
        (TaskState::Working, Some("par"))
    );
}

#[test]
fn an_authorization_request_stands_in_the_status_until_the_task_moves_on() {
    use looopy_protocol::event::{AuthCompleted, AuthRequired, AuthType};
    let seq = Sequencer::default();
    let stamp = Stamp::new("c", "t");
    let request = EventPayload::AuthRequired(AuthRequired {
        auth_id: "auth-1".into(),
        auth_type: AuthType::ApiKey,
        provider: Some("stripe".into()),
        scopes: vec![],
        prompt: "Key?".into(),
        auth_url: None,
        metadata: Metadata::new(),
    });
    let status = |status| {
        EventPayload::TaskStatus(TaskStatus {
            status,
            message: None,
            error: None,
            metadata: Metadata::new(),
        })
    };
    let mut f = Folded::default();
    f.apply(&stamp.stamp(&seq, request.clone()));
    f.apply(&stamp.stamp(&seq, status(TaskState::WaitingAuth)));
    let record = TaskRecord::new("t", "c", TaskState::WaitingAuth);
    let s = snapshot(&record, Some(&f), vec![]);
    assert_eq!(s.status_message.as_deref(), Some("Key?"));
    let data = s.status_data.unwrap();
    assert_eq!(
        (data["authId"].as_str(), data["provider"].as_str()),
        (Some("auth-1"), Some("stripe"))
    );
    assert!(data.get("prompt").is_none() && data.get("metadata").is_none());
    f.apply(&stamp.stamp(&seq, status(TaskState::Working)));
    assert_eq!(snapshot(&record, Some(&f), vec![]).status_data, None);

    // A sub-agent's request is its parent's, as AUTH_REQUIRED, until it is answered.
    let child = Stamp::new("c", "child");
    let mut parent = Folded::default();
    parent.apply(&stamp.stamp(&seq, status(TaskState::WaitingSubtask)));
    parent.apply_descendant(&child.stamp(&seq, request));
    let s = snapshot(&record, Some(&parent), vec![]);
    assert_eq!(s.state, TaskState::WaitingAuth);
    assert_eq!(s.status_data.unwrap()["authType"], "api-key");
    parent.apply_descendant(&child.stamp(
        &seq,
        EventPayload::AuthCompleted(AuthCompleted {
            auth_id: "auth-1".into(),
            user_id: "u".into(),
            metadata: Metadata::new(),
        }),
    ));
    let s = snapshot(&record, Some(&parent), vec![]);
    assert_eq!((s.state, s.status_data), (TaskState::WaitingSubtask, None));
}
