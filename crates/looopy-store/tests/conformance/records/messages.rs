//! Conformance: message history — order and content kept exactly, pages by position,
//! replace and clear, and appends from many writers at once.

use std::collections::HashSet;

use looopy_protocol::{Message, ToolCall};
use looopy_store::Store;
use serde_json::json;

crate::conformance!(
    messages_round_trip_with_tool_calls_in_order,
    message_pages_follow_positions_renumbered_by_replace,
    concurrent_appends_get_consecutive_positions,
);

async fn messages_round_trip_with_tool_calls_in_order(store: Store) {
    let ctx = store.ensure_context("ctx", None).await.unwrap();
    let call = ToolCall {
        id: "call-1".into(),
        name: "calculator".into(),
        arguments: json!({"expression": "6*7", "nested": {"list": [1, 2.5, null]}}),
    };
    let first = vec![
        Message::system("be brief"),
        Message::user("what is 6*7?"),
        Message::assistant_with_tools("", vec![call]),
    ];
    let second = vec![
        Message::tool_result("call-1", "calculator", "42", false),
        Message::tool_result("call-2", "search", "boom", true),
        Message::assistant("42 — ünïcödé ✓ \u{0} 'quotes' \"and\" \\ backslash"),
    ];
    store.append_messages("ctx", &first).await.unwrap();
    let touched = store.get_context("ctx").await.unwrap().unwrap();
    assert!(touched.updated_at > ctx.updated_at, "appending is activity");
    store.append_messages("ctx", &second).await.unwrap();
    store.append_messages("ctx", &[]).await.unwrap();
    // History without a context record is kept too.
    store
        .append_messages("other", &[Message::user("elsewhere")])
        .await
        .unwrap();
    assert_eq!(store.get_context("other").await.unwrap(), None);

    let loaded = store.load_messages("ctx").await.unwrap();
    assert_eq!(loaded, [first.clone(), second.clone()].concat());
    assert!(store.load_messages("empty").await.unwrap().is_empty());

    store.replace_messages("ctx", &second).await.unwrap();
    assert_eq!(store.load_messages("ctx").await.unwrap(), second);
    // Appending after a replace continues after the new last position.
    store.append_messages("ctx", &first[..1]).await.unwrap();
    assert_eq!(
        store.load_messages("ctx").await.unwrap(),
        [second.clone(), first[..1].to_vec()].concat()
    );

    store.clear_messages("ctx").await.unwrap();
    assert!(store.load_messages("ctx").await.unwrap().is_empty());
    assert_eq!(store.load_messages("other").await.unwrap().len(), 1);
    assert!(
        store.get_context("ctx").await.unwrap().is_some(),
        "the context stays"
    );
    // After a clear, positions start again from 0.
    store.append_messages("ctx", &second[..1]).await.unwrap();
    let page = store.load_messages_page("ctx", None, 10).await.unwrap();
    assert_eq!(page, vec![(0, second[0].clone())]);
    // Replacing with nothing empties the history.
    store.replace_messages("ctx", &[]).await.unwrap();
    assert!(store.load_messages("ctx").await.unwrap().is_empty());
}

async fn message_pages_follow_positions_renumbered_by_replace(store: Store) {
    let messages: Vec<Message> = (0..10).map(|i| Message::user(format!("m{i}"))).collect();
    store.append_messages("ctx", &messages[..4]).await.unwrap();
    store.append_messages("ctx", &messages[4..]).await.unwrap();

    let mut walked = Vec::new();
    let mut after = None;
    loop {
        let page = store.load_messages_page("ctx", after, 3).await.unwrap();
        assert!(page.len() <= 3);
        let Some((last, _)) = page.last() else { break };
        after = Some(*last);
        walked.extend(page);
        // Appends land after every boundary.
        if walked.len() == 3 {
            store
                .append_messages("ctx", &[Message::assistant("late")])
                .await
                .unwrap();
        }
    }
    let positions: Vec<u64> = walked.iter().map(|(p, _)| *p).collect();
    assert_eq!(positions, (0..11).collect::<Vec<_>>());
    let expected = [messages.clone(), vec![Message::assistant("late")]].concat();
    assert_eq!(
        walked.into_iter().map(|(_, m)| m).collect::<Vec<_>>(),
        expected
    );
    assert!(
        store
            .load_messages_page("ctx", Some(10), 5)
            .await
            .unwrap()
            .is_empty()
    );
    assert!(
        store
            .load_messages_page("ctx", None, 0)
            .await
            .unwrap()
            .is_empty()
    );
    assert!(
        store
            .load_messages_page("missing", None, 5)
            .await
            .unwrap()
            .is_empty()
    );
    let tail = store.load_messages_page("ctx", Some(7), 100).await.unwrap();
    assert_eq!(tail.iter().map(|(p, _)| *p).collect::<Vec<_>>(), [8, 9, 10]);

    // A replace renumbers from 0.
    store
        .replace_messages("ctx", &messages[5..7])
        .await
        .unwrap();
    let page = store.load_messages_page("ctx", None, 10).await.unwrap();
    assert_eq!(
        page,
        vec![(0, messages[5].clone()), (1, messages[6].clone())]
    );
}

async fn concurrent_appends_get_consecutive_positions(store: Store) {
    store.ensure_context("busy", None).await.unwrap();
    let mut writers = tokio::task::JoinSet::new();
    for writer in 0..8 {
        let store = store.clone();
        writers.spawn(async move {
            for round in 0..5 {
                let pair = [
                    Message::user(format!("{writer}/{round}/a")),
                    Message::user(format!("{writer}/{round}/b")),
                ];
                store.append_messages("busy", &pair).await.unwrap();
            }
        });
    }
    while let Some(done) = writers.join_next().await {
        done.unwrap();
    }
    let page = store.load_messages_page("busy", None, 1000).await.unwrap();
    let positions: Vec<u64> = page.iter().map(|(p, _)| *p).collect();
    assert_eq!(positions, (0..80).collect::<Vec<_>>());
    let texts: Vec<String> = page.iter().map(|(_, m)| m.content.clone()).collect();
    let unique: HashSet<&String> = texts.iter().collect();
    assert_eq!(unique.len(), 80, "every message once");
    // Each append is one transaction: its two messages are adjacent.
    for pair in texts.chunks(2) {
        assert!(
            pair[0].ends_with("/a") && pair[1] == format!("{}b", pair[0].trim_end_matches('a')),
            "{pair:?}"
        );
    }
}
