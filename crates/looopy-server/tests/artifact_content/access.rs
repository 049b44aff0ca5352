//! Auth and isolation: the content route answers like `GET /v1/tasks/{taskId}` — 401
//! without a token, 404 for another principal's task, another task's artifact or an
//! unknown id, 400 `invalid_id` for a malformed id.

use reqwest::StatusCode;
use serde_json::Value;

use super::fixture::{DATA, Fixture};

#[tokio::test]
async fn auth_and_isolation_are_those_of_tasks() {
    let fx = Fixture::start().await;
    let url = fx.url("blob.bin");

    let r = fx.client.get(&url).send().await.unwrap();
    assert_eq!(r.status(), 401);
    let r = fx
        .client
        .get(&url)
        .bearer_auth("tok-b")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404, "another principal's task looks missing");
    let error: Value = r.json().await.unwrap();
    assert_eq!(error["error"]["code"], "not_found");

    // Another task's artifact, an unknown id: 404 with the usual error shape.
    assert_eq!(fx.other_ids.len(), 4);
    for id in fx
        .other_ids
        .iter()
        .map(String::as_str)
        .chain(["art-0000000000000000"])
    {
        let (status, _, body) = fx
            .get(
                &format!("{}/v1/tasks/{}/artifacts/{id}", fx.base, fx.task),
                &[],
            )
            .await;
        assert_eq!(status, 404, "{id}");
        let error: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(error["error"]["code"], "not_found", "{id}");
    }
    // Its own task serves it.
    let (status, _, body) = fx
        .get(
            &format!(
                "{}/v1/tasks/{}/artifacts/{}",
                fx.base, fx.other_task, fx.other_ids[2]
            ),
            &[],
        )
        .await;
    assert_eq!(
        (status, String::from_utf8(body).unwrap().as_str()),
        (StatusCode::OK, DATA)
    );

    // Ids of the wrong shape are 400 invalid_id, like every other path id.
    for path in [
        format!("{}/artifacts/bad%20id", fx.task),
        format!("{}/artifacts/{}", "bad%20task", fx.id("blob.bin")),
    ] {
        let (status, _, body) = fx.get(&format!("{}/v1/tasks/{path}", fx.base), &[]).await;
        assert_eq!(status, 400, "{path}");
        let error: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(error["error"]["code"], "invalid_id", "{path}");
    }
    fx.stop().await;
}
