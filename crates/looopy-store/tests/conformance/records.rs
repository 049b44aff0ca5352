//! Conformance: the records besides the event log — contexts (ownership, activity order,
//! keyset pages, titles) and sealed secrets here; message history, tasks and push configs
//! in the submodules.

mod messages;
mod push;
mod tasks;

use chrono::Duration;
use looopy_protocol::Message;
use looopy_store::{ContextCursor, Store, StoreError};

crate::conformance!(
    ensure_context_creates_once_and_never_changes_the_owner,
    contexts_list_newest_activity_first_and_filter_by_owner,
    context_pages_walk_every_context_once_and_filter_by_owner,
    context_cursor_ties_break_by_id_in_byte_order,
    sealed_secrets_round_trip_per_principal_and_provider,
);

async fn ensure_context_creates_once_and_never_changes_the_owner(store: Store) {
    let first = store.ensure_context("ctx-1", Some("alice")).await.unwrap();
    assert_eq!(first.context_id, "ctx-1");
    assert_eq!(first.owner.as_deref(), Some("alice"));
    assert_eq!(first.title, None);
    assert_eq!(first.created_at, first.updated_at);
    let again = store
        .ensure_context("ctx-1", Some("mallory"))
        .await
        .unwrap();
    assert_eq!(again, first);
    assert_eq!(store.get_context("ctx-1").await.unwrap(), Some(first));
    assert_eq!(store.get_context("missing").await.unwrap(), None);
    let anonymous = store.ensure_context("ctx-2", None).await.unwrap();
    assert_eq!(anonymous.owner, None);

    store
        .set_context_title("ctx-1", Some("Trip planning"))
        .await
        .unwrap();
    let titled = store.get_context("ctx-1").await.unwrap().unwrap();
    assert_eq!(titled.title.as_deref(), Some("Trip planning"));
    store.set_context_title("ctx-1", None).await.unwrap();
    assert_eq!(
        store.get_context("ctx-1").await.unwrap().unwrap().title,
        None
    );
    let err = store
        .set_context_title("missing", Some("x"))
        .await
        .unwrap_err();
    assert!(
        matches!(err, StoreError::NotFound { what: "context", ref id } if id == "missing"),
        "{err:?}"
    );
    assert_eq!(store.get_context("missing").await.unwrap(), None);
}

async fn contexts_list_newest_activity_first_and_filter_by_owner(store: Store) {
    store.ensure_context("a", Some("alice")).await.unwrap();
    store.ensure_context("b", Some("bob")).await.unwrap();
    store.ensure_context("c", None).await.unwrap();
    // Activity on `a` moves it to the front.
    store
        .append_messages("a", &[Message::user("hi")])
        .await
        .unwrap();

    let all = store.list_contexts(None).await.unwrap();
    let ids: Vec<_> = all.iter().map(|c| c.context_id.as_str()).collect();
    assert_eq!(ids, ["a", "c", "b"]);
    assert!(all[0].updated_at > all[0].created_at);
    // A title is not activity.
    store.set_context_title("b", Some("t")).await.unwrap();
    let ids: Vec<_> = store
        .list_contexts(None)
        .await
        .unwrap()
        .into_iter()
        .map(|c| c.context_id)
        .collect();
    assert_eq!(ids, ["a", "c", "b"]);

    let alice = store.list_contexts(Some("alice")).await.unwrap();
    assert_eq!(alice.len(), 1);
    assert_eq!(alice[0].context_id, "a");
    assert!(
        store
            .list_contexts(Some("nobody"))
            .await
            .unwrap()
            .is_empty()
    );
}

async fn context_pages_walk_every_context_once_and_filter_by_owner(store: Store) {
    let mut alices = Vec::new();
    for i in 0..9 {
        let owner = if i % 3 == 2 { "bob" } else { "alice" };
        let id = format!("ctx-{i}");
        store.ensure_context(&id, Some(owner)).await.unwrap();
        if owner == "alice" {
            alices.push(id);
        }
    }
    alices.reverse(); // most recently active first

    let mut seen = Vec::new();
    let mut after: Option<ContextCursor> = None;
    let mut added = 0;
    loop {
        let page = store
            .list_contexts_page(Some("alice"), after.as_ref(), 4)
            .await
            .unwrap();
        assert!(page.len() <= 4);
        assert!(page.iter().all(|c| c.owner.as_deref() == Some("alice")));
        let Some(last) = page.last() else { break };
        after = Some(ContextCursor::after(last));
        seen.extend(page.iter().map(|c| c.context_id.clone()));
        // A context created meanwhile is more recent than every boundary: it must not
        // disturb the walk.
        store
            .ensure_context(&format!("new-{added}"), Some("alice"))
            .await
            .unwrap();
        added += 1;
    }
    assert_eq!(seen, alices);

    // Without an owner every context is listed, newest first; the new ones lead.
    let all = store.list_contexts_page(None, None, 100).await.unwrap();
    assert_eq!(all.len(), 9 + added);
    assert_eq!(all[0].context_id, format!("new-{}", added - 1));
    assert_eq!(all, store.list_contexts(None).await.unwrap());
    assert!(
        store
            .list_contexts_page(None, None, 0)
            .await
            .unwrap()
            .is_empty()
    );
    assert!(
        store
            .list_contexts_page(Some("nobody"), None, 10)
            .await
            .unwrap()
            .is_empty()
    );
    // The cursor of the last context leaves nothing after it.
    let cursor = ContextCursor::after(all.last().unwrap());
    assert!(
        store
            .list_contexts_page(None, Some(&cursor), 10)
            .await
            .unwrap()
            .is_empty()
    );
}

async fn context_cursor_ties_break_by_id_in_byte_order(store: Store) {
    let a = store.ensure_context("a", None).await.unwrap();
    let older = store.ensure_context("older", None).await.unwrap();
    // Activity makes `a` the most recent; `older` was last active before it.
    store
        .append_messages("a", &[Message::user("hi")])
        .await
        .unwrap();
    let a_now = store.get_context("a").await.unwrap().unwrap();
    assert!(a_now.updated_at > a.updated_at && a_now.updated_at > older.updated_at);
    let ids = |page: Vec<looopy_store::ContextRecord>| -> Vec<String> {
        page.into_iter().map(|c| c.context_id).collect()
    };
    // Same instant as `a`: contexts with a smaller id come after the cursor. In byte order
    // "A" < "a" < "b" (a linguistic collation would put "a" before "A").
    let at = |id: &str| ContextCursor {
        updated_at: a_now.updated_at,
        context_id: id.to_string(),
    };
    assert_eq!(
        ids(store
            .list_contexts_page(None, Some(&at("b")), 10)
            .await
            .unwrap()),
        ["a", "older"]
    );
    assert_eq!(
        ids(store
            .list_contexts_page(None, Some(&at("a")), 10)
            .await
            .unwrap()),
        ["older"]
    );
    assert_eq!(
        ids(store
            .list_contexts_page(None, Some(&at("A")), 10)
            .await
            .unwrap()),
        ["older"]
    );
    // A nanosecond later, everything is after the cursor.
    let later = ContextCursor {
        updated_at: a_now.updated_at + Duration::nanoseconds(1),
        context_id: String::new(),
    };
    assert_eq!(
        ids(store
            .list_contexts_page(None, Some(&later), 10)
            .await
            .unwrap()),
        ["a", "older"]
    );
}

async fn sealed_secrets_round_trip_per_principal_and_provider(store: Store) {
    let every_byte: Vec<u8> = (0..=255).collect();
    store
        .put_sealed_secret("alice", "github", every_byte.clone())
        .await
        .unwrap();
    store
        .put_sealed_secret("bob", "github", vec![9])
        .await
        .unwrap();
    store
        .put_sealed_secret("alice", "gitlab", Vec::new())
        .await
        .unwrap();
    assert_eq!(
        store.get_sealed_secret("alice", "github").await.unwrap(),
        Some(every_byte)
    );
    assert_eq!(
        store.get_sealed_secret("alice", "gitlab").await.unwrap(),
        Some(Vec::new())
    );
    assert_eq!(
        store.get_sealed_secret("alice", "bitbucket").await.unwrap(),
        None
    );
    assert_eq!(
        store.get_sealed_secret("carol", "github").await.unwrap(),
        None
    );
    // Putting again replaces.
    store
        .put_sealed_secret("alice", "github", vec![4])
        .await
        .unwrap();
    assert_eq!(
        store.get_sealed_secret("alice", "github").await.unwrap(),
        Some(vec![4])
    );
    assert!(store.delete_sealed_secret("alice", "github").await.unwrap());
    assert!(!store.delete_sealed_secret("alice", "github").await.unwrap());
    assert_eq!(
        store.get_sealed_secret("alice", "github").await.unwrap(),
        None
    );
    assert_eq!(
        store.get_sealed_secret("bob", "github").await.unwrap(),
        Some(vec![9])
    );
    assert_eq!(
        store.get_sealed_secret("alice", "gitlab").await.unwrap(),
        Some(Vec::new())
    );
}
