//! `GET /` over a real socket: the page is public (even with tokens), self-contained, and
//! served with headers that keep its token-bearing URL and its content safe. (The page's
//! behaviour in a browser is `browser_chat`.)

#[path = "e2e/support.rs"]
mod support;

use support::*;

#[tokio::test]
async fn the_page_is_served_publicly_with_protective_headers() {
    let server = TestServer::with_config(|c| c.tokens = vec!["page-token".into()]).await;
    let r = server.client.get(server.url("/")).send().await.unwrap();
    assert_eq!(r.status(), 200);
    let h = r.headers().clone();
    assert_eq!(h["content-type"], "text/html; charset=utf-8");
    assert_eq!(h["referrer-policy"], "no-referrer");
    assert_eq!(h["x-content-type-options"], "nosniff");
    assert_eq!(h["x-frame-options"], "DENY");
    let csp = h["content-security-policy"].to_str().unwrap();
    assert!(csp.starts_with("default-src 'none'"), "{csp}");
    assert!(csp.contains("connect-src 'self'"), "{csp}");
    assert!(csp.contains("script-src 'sha256-"), "{csp}");
    assert_eq!(csp, looopy_server::web::content_security_policy());
    let body = r.text().await.unwrap();
    assert_eq!(body, looopy_server::web::page());
    assert!(
        body.contains(looopy_server::web::MARKDOWN_JS),
        "the renderer is inlined"
    );
    assert!(body.contains("<title>Looopy</title>"));

    // The API behind it still needs the token.
    let r = server
        .client
        .get(server.url("/v1/contexts"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    // The token may ride on the event-stream URL (EventSource cannot send headers)…
    let r = server
        .client
        .get(server.url("/v1/contexts/ctx-none/events?access_token=page-token"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404, "authenticated; the context does not exist");
    // …but not on other requests.
    let r = server
        .client
        .get(server.url("/v1/contexts?access_token=page-token"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    server.shutdown().await;
}
