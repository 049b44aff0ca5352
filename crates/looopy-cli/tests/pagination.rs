//! The list routes of a real `looopy serve` return pages: `?limit=N&cursor=C` in,
//! `{"…": [...], "nextCursor": "…" | null}` out, 50 by default, at most 100, with keyset
//! cursors that stay put while new contexts are created — where `GET /v1/contexts` used
//! to return every context at once (300k contexts: 3 GB of RSS over 20 requests).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::collections::HashSet;
use std::path::Path;

use looopy_protocol::Message;
use looopy_server::auth::principal_id;
use looopy_store::Store;
use serde_json::{Value, json};

/// Fills a fresh database before the server opens it: `count` contexts owned in turn by
/// each of `owners`, each made active by a message, and `messages` history messages in
/// context `ctx-0`. Returns every context id, most recently active first.
async fn populate(
    db: &Path,
    count: usize,
    owners: &[Option<&str>],
    messages: usize,
) -> Vec<String> {
    let store = Store::open(db).unwrap();
    for i in 0..count {
        let id = format!("ctx-{i}");
        store
            .ensure_context(&id, owners[i % owners.len()])
            .await
            .unwrap();
        store
            .append_messages(&id, &[Message::user(format!("hello {i}"))])
            .await
            .unwrap();
    }
    let history: Vec<Message> = (1..messages)
        .map(|i| Message::user(format!("message {i}")))
        .collect();
    store.append_messages("ctx-0", &history).await.unwrap();
    let ids = store
        .list_contexts_page(None, None, usize::MAX)
        .await
        .unwrap()
        .into_iter()
        .map(|c| c.context_id)
        .collect();
    store.close().await.unwrap();
    ids
}

async fn get(url: &str, token: Option<&str>) -> (u16, Value) {
    let mut request = reqwest::Client::new().get(url);
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    let response = request.send().await.unwrap();
    (response.status().as_u16(), response.json().await.unwrap())
}

fn ids(page: &Value, list: &str, field: &str) -> Vec<String> {
    page[list]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c[field].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test]
async fn walking_context_pages_while_contexts_are_created_skips_and_repeats_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("looopy.db");
    let existing = populate(&db, 230, &[None], 1).await;
    let server = support::start_default(&db, &[]);
    let base = server.base.clone();
    let client = reqwest::Client::new();

    let mut seen = Vec::new();
    let mut cursor: Option<String> = None;
    let mut pages = 0;
    loop {
        let url = match &cursor {
            Some(c) => format!("{base}/v1/contexts?limit=7&cursor={c}"),
            None => format!("{base}/v1/contexts?limit=7"),
        };
        let (status, page) = get(&url, None).await;
        assert_eq!(status, 200, "{page}");
        let page_ids = ids(&page, "contexts", "contextId");
        assert!(page_ids.len() <= 7);
        seen.extend(page_ids);
        pages += 1;
        // A new conversation between every two pages: it is more recently active than
        // every page boundary, so it must not disturb the rest of the walk.
        let r = client
            .post(format!("{base}/v1/contexts/new-{pages}/messages"))
            .json(&json!({"message": "hi"}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 202);
        match page["nextCursor"].as_str() {
            Some(next) => cursor = Some(next.to_string()),
            None => {
                assert!(page["nextCursor"].is_null(), "{page}");
                break;
            }
        }
        assert!(pages < 100, "the walk does not end");
    }
    let unique: HashSet<&String> = seen.iter().collect();
    assert_eq!(unique.len(), seen.len(), "a context was listed twice");
    let old: Vec<&String> = seen.iter().filter(|id| id.starts_with("ctx-")).collect();
    assert_eq!(
        old,
        existing.iter().collect::<Vec<_>>(),
        "pre-existing contexts skipped or out of order"
    );
    assert_eq!(pages, 230usize.div_ceil(7));

    // A fresh first page starts with the newest conversations.
    let (_, first) = get(&format!("{base}/v1/contexts?limit=3"), None).await;
    assert!(
        ids(&first, "contexts", "contextId")
            .iter()
            .all(|id| id.starts_with("new-"))
    );
}

#[tokio::test]
async fn page_sizes_default_to_50_clamp_at_100_and_bad_queries_are_400() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("looopy.db");
    populate(&db, 120, &[None], 3).await;
    let server = support::start_default(&db, &[]);
    let base = server.base.clone();

    let (status, page) = get(&format!("{base}/v1/contexts"), None).await;
    assert_eq!(status, 200);
    assert_eq!(page["contexts"].as_array().unwrap().len(), 50);
    assert!(page["nextCursor"].is_string());
    let (_, page) = get(&format!("{base}/v1/contexts?limit=100000"), None).await;
    assert_eq!(page["contexts"].as_array().unwrap().len(), 100);
    let (_, rest) = get(
        &format!(
            "{base}/v1/contexts?limit=100&cursor={}",
            page["nextCursor"].as_str().unwrap()
        ),
        None,
    )
    .await;
    assert_eq!(rest["contexts"].as_array().unwrap().len(), 20);
    assert!(rest["nextCursor"].is_null());

    let (_, messages) = get(&format!("{base}/v1/contexts/ctx-0/messages?limit=1"), None).await;
    let messages_cursor = messages["nextCursor"].as_str().unwrap().to_string();
    for (query, code) in [
        ("limit=0", "invalid_query"),
        ("limit=-1", "invalid_query"),
        ("limit=many", "invalid_query"),
        ("cursor=not-a-cursor", "invalid_cursor"),
        ("cursor=%2F%2F%2F", "invalid_cursor"),
        // A cursor of another list is not a cursor of this one.
        (
            &format!("cursor={messages_cursor}") as &str,
            "invalid_cursor",
        ),
    ] {
        let (status, body) = get(&format!("{base}/v1/contexts?{query}"), None).await;
        assert_eq!(
            (status, body["error"]["code"].as_str()),
            (400, Some(code)),
            "{query}: {body}"
        );
    }
}

#[tokio::test]
async fn conversation_history_pages_oldest_first() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("looopy.db");
    populate(&db, 1, &[None], 23).await;
    let server = support::start_default(&db, &[]);
    let base = server.base.clone();

    let mut texts = Vec::new();
    let mut url = format!("{base}/v1/contexts/ctx-0/messages?limit=5");
    let mut pages = 0;
    loop {
        let (status, page) = get(&url, None).await;
        assert_eq!(status, 200, "{page}");
        assert!(page["lastEventId"].is_u64());
        texts.extend(ids(&page, "messages", "content"));
        pages += 1;
        match page["nextCursor"].as_str() {
            Some(c) => url = format!("{base}/v1/contexts/ctx-0/messages?limit=5&cursor={c}"),
            None => break,
        }
        assert!(pages < 10, "the walk does not end");
    }
    let expected: Vec<String> = std::iter::once("hello 0".to_string())
        .chain((1..23).map(|i| format!("message {i}")))
        .collect();
    assert_eq!(texts, expected);
    assert_eq!(pages, 5);
    let (status, body) = get(
        &format!("{base}/v1/contexts/ctx-0/messages?cursor=xyz"),
        None,
    )
    .await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (400, Some("invalid_cursor"))
    );
}

#[tokio::test]
async fn each_principal_pages_through_its_own_contexts_only() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("looopy.db");
    let (alice, bob) = (principal_id("alice-token"), principal_id("bob-token"));
    let existing = populate(&db, 40, &[Some(&alice), Some(&bob)], 1).await;
    let server = support::start_default(&db, &["--token", "alice-token", "--token", "bob-token"]);
    let base = server.base.clone();

    let mut seen = Vec::new();
    let mut url = format!("{base}/v1/contexts?limit=6");
    loop {
        let (status, page) = get(&url, Some("alice-token")).await;
        assert_eq!(status, 200, "{page}");
        seen.extend(ids(&page, "contexts", "contextId"));
        match page["nextCursor"].as_str() {
            Some(c) => url = format!("{base}/v1/contexts?limit=6&cursor={c}"),
            None => break,
        }
    }
    // ctx-0, ctx-2, … are alice's.
    let expected: Vec<&String> = existing
        .iter()
        .filter(|id| id.trim_start_matches("ctx-").parse::<usize>().unwrap() % 2 == 0)
        .collect();
    assert_eq!(seen.iter().collect::<Vec<_>>(), expected);
}
