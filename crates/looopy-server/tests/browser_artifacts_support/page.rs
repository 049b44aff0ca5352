//! The page side of the browser artifact tests: the artifact cards per turn as the page
//! shows them (read through its DOM test hooks), downloads fetched and digested in the page
//! (`crypto.subtle.digest`), waits for cards and turns, and the checks that a turn's six
//! cards and their download links match what the tool wrote and the server holds.

use serde_json::{Value, json};

use super::{DATASET_ROWS, PAYLOAD_BYTES, TOKEN, payload, png, rows, schema, sha256, summary};
use crate::support::eventually;
use crate::webdriver::Browser;

/// The page's artifact cards, per turn, read through the DOM test hooks.
pub const PAGE_STATE: &str = r#"
const card = (c) => {
  const a = c.querySelector('a.download');
  const img = c.querySelector('img.preview');
  const json = c.querySelector('details.json');
  const table = c.querySelector('table');
  const text = c.querySelector('details.text-preview pre');
  const num = (v) => v == null ? null : Number(v);
  return {
    id: c.dataset.artifactId, kind: c.dataset.kind, state: c.dataset.state,
    name: c.querySelector('.name').textContent, type: c.querySelector('.type').textContent,
    status: c.querySelector('.status').textContent,
    bytes: num(c.dataset.bytes), chunks: num(c.dataset.chunks), size: num(c.dataset.size),
    rows: num(c.dataset.rows), verified: c.dataset.verified || null, source: c.dataset.source || null,
    progress: !!c.querySelector('progress'),
    href: a ? a.href : null, download: a ? a.download : null, linkSource: a ? a.dataset.source : null,
    image: img ? { width: img.naturalWidth, height: img.naturalHeight, loaded: img.dataset.loaded || null } : null,
    json: json ? { open: json.open, summary: json.querySelector('summary').textContent,
                   text: json.querySelector('pre').textContent } : null,
    table: table ? { head: [...table.querySelectorAll('thead th')].map((th) => th.textContent),
                     rows: [...table.querySelectorAll('tbody tr')].map((tr) => [...tr.children].map((td) => td.textContent)) } : null,
    text: text ? text.textContent : null,
  };
};
return {
  status: document.getElementById('status').dataset.status,
  reconnects: Number(document.body.dataset.reconnects),
  notice: document.getElementById('notice').textContent,
  allCards: document.querySelectorAll('.artifact').length,
  turns: [...document.querySelectorAll('section.turn')].map((s) => ({
    taskId: s.dataset.taskId,
    state: s.dataset.state,
    answer: (document.getElementById('answer-' + s.dataset.taskId) || { textContent: '' }).textContent,
    cards: [...s.querySelectorAll('.artifact')].map(card),
  })),
};
"#;

/// Fetches `href` in the page (with the bearer header when `token` is given) and digests it.
pub const DIGEST: &str = r#"
const [href, token] = arguments;
const res = await fetch(href, token ? { headers: { Authorization: 'Bearer ' + token } } : {});
const buf = await res.arrayBuffer();
const digest = new Uint8Array(await crypto.subtle.digest('SHA-256', buf));
return { status: res.status, type: res.headers.get('content-type'), bytes: buf.byteLength,
         sha256: Array.from(digest, (b) => b.toString(16).padStart(2, '0')).join('') };
"#;

pub async fn page(browser: &Browser) -> Value {
    browser.eval(PAGE_STATE).await
}

/// Waits until turn `n`'s card named `name` satisfies `ok`; returns that card.
pub async fn wait_card(
    browser: &Browser,
    n: usize,
    name: &str,
    what: &str,
    ok: impl Fn(&Value) -> bool,
) -> Value {
    eventually(what, || async {
        let state = page(browser).await;
        state["turns"].get(n)?["cards"]
            .as_array()?
            .iter()
            .find(|c| c["name"] == name && ok(c))
            .cloned()
    })
    .await
}

pub async fn digest(browser: &Browser, href: &str, token: Option<&str>) -> Value {
    let v = browser
        .eval_async(DIGEST, vec![json!(href), json!(token)])
        .await;
    assert!(v.get("error").is_none(), "fetching {href} in the page: {v}");
    v
}

pub async fn send(browser: &Browser, text: &str) {
    browser.type_into("#message", text).await;
    browser.click("#send").await;
}

/// Whether turn `t` shows `n` cards, all complete, their image previews decoded.
pub fn settled(t: &Value, n: usize) -> bool {
    let Some(cards) = t["cards"].as_array() else {
        return false;
    };
    t["state"] == "completed"
        && cards.len() == n
        && cards.iter().all(|c| {
            c["state"] == "complete"
                && (c["image"].is_null() || c["image"]["width"].as_u64() > Some(0))
        })
}

pub fn by_name<'a>(cards: &'a Value, name: &str) -> &'a Value {
    cards
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == name)
        .unwrap_or_else(|| panic!("no card {name}: {cards}"))
}

/// The turn's six cards, complete, as the page shows them.
pub fn check_cards(cards: &Value, listed: &[Value]) {
    let names: Vec<&str> = cards
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    // One card per artifact, in the order they were first written: the rewritten notes
    // replaced their card rather than adding one.
    assert_eq!(
        names,
        [
            "out/payload.bin",
            "chart.png",
            "summary",
            "ratios",
            "measurements",
            "notes.md"
        ]
    );
    for c in cards.as_array().unwrap() {
        assert_eq!(c["state"], "complete", "{c}");
        assert!(
            !c["progress"].as_bool().unwrap(),
            "no progress bar once complete: {c}"
        );
        assert!(c["href"].is_string(), "a download link: {c}");
        let server = listed
            .iter()
            .find(|a| a["artifactId"] == c["id"])
            .unwrap_or_else(|| panic!("the server lists {c}"));
        assert_eq!(c["size"], server["size"], "{c}");
    }

    let file = by_name(cards, "out/payload.bin");
    assert_eq!(file["kind"], "file");
    assert_eq!(file["type"], "application/octet-stream");
    assert_eq!(file["bytes"], PAYLOAD_BYTES);
    assert_eq!(file["chunks"], 5);
    assert_eq!(file["download"], "payload.bin");
    assert!(
        file["status"].as_str().unwrap().starts_with("293.0 KB"),
        "{file}"
    );

    let image = by_name(cards, "chart.png");
    assert_eq!(image["type"], "image/png");
    // Decoded: the preview has the image's size.
    assert_eq!(image["image"]["width"], 160);
    assert_eq!(image["image"]["height"], 90);

    let data = by_name(cards, "summary");
    assert_eq!(data["kind"], "data");
    assert_eq!(data["download"], "summary.json");
    let json = &data["json"];
    assert_eq!(json["summary"], "JSON · 5 keys");
    let pretty = json["text"].as_str().unwrap();
    assert!(
        pretty.contains("\n  \"total\": 1234"),
        "pretty-printed: {pretty}"
    );
    let shown: Value = serde_json::from_str(pretty).unwrap();
    assert_eq!(shown, summary());
    // Longer than 12 lines: collapsed until the user opens it.
    assert_eq!(json["open"], false);

    // `1.0` and 2^53 + 1 do not survive JSON.parse/stringify: the page's copy fails the
    // streamed sha256, so the link is the content route (the server's exact bytes).
    let ratios = by_name(cards, "ratios");
    assert_eq!(ratios["verified"], "false", "{ratios}");
    assert_eq!(ratios["source"], "server");
    assert_eq!(ratios["json"]["open"], true, "a short record starts open");
    assert!(
        ratios["href"]
            .as_str()
            .unwrap()
            .ends_with(&format!("/artifacts/{}", ratios["id"].as_str().unwrap()))
    );

    let set = by_name(cards, "measurements");
    assert_eq!(set["kind"], "dataset");
    assert_eq!(set["rows"], DATASET_ROWS);
    assert_eq!(set["download"], "measurements.jsonl");
    // The columns are the schema's properties, in the order the event carries them.
    let table = &set["table"];
    let head: Vec<String> = schema()["properties"]
        .as_object()
        .unwrap()
        .keys()
        .cloned()
        .collect();
    assert_eq!(table["head"], json!(head));
    let shown = table["rows"].as_array().unwrap();
    assert_eq!(shown.len(), 20, "the first 20 rows");
    for (row, cells) in rows().iter().zip(shown) {
        let expected: Vec<String> = head
            .iter()
            .map(|k| match &row[k.as_str()] {
                Value::String(s) => s.clone(),
                v => v.to_string(),
            })
            .collect();
        assert_eq!(cells, &json!(expected));
    }
    assert_eq!(
        shown[19][head.iter().position(|k| *k == "city").unwrap()],
        "Osaka"
    );
    assert!(
        set["status"].as_str().unwrap().starts_with("45 rows · "),
        "{set}"
    );

    let notes = by_name(cards, "notes.md");
    assert_eq!(notes["type"], "text/markdown");
    assert_eq!(
        notes["text"],
        "# Notes\n\nfinal: all six artifacts written.\n"
    );
}

/// Every download link of `cards` delivers what the server holds (the sha256 it lists),
/// and the binary file's is the bytes the tool wrote.
pub async fn check_downloads(browser: &Browser, cards: &Value, listed: &[Value]) {
    for c in cards.as_array().unwrap() {
        let href = c["href"].as_str().unwrap();
        let token = (c["linkSource"] == "server").then_some(TOKEN);
        let got = digest(browser, href, token).await;
        assert_eq!(got["status"], 200, "{c}: {got}");
        let server = listed.iter().find(|a| a["artifactId"] == c["id"]).unwrap();
        assert_eq!(got["sha256"], server["sha256"], "{c}: {got}");
        assert_eq!(got["bytes"], server["size"], "{c}: {got}");
    }
    let file = by_name(cards, "out/payload.bin");
    let got = digest(
        browser,
        file["href"].as_str().unwrap(),
        (file["linkSource"] == "server").then_some(TOKEN),
    )
    .await;
    assert_eq!(got["sha256"], sha256(&payload()));
    assert_eq!(got["type"], "application/octet-stream");
    let image = by_name(cards, "chart.png");
    let got = digest(browser, image["href"].as_str().unwrap(), None).await;
    assert_eq!(got["sha256"], sha256(&png(160, 90)));
    // A kept file's link is typed as bytes to save (never a document to render from a
    // blob: URL of this origin); the server's copy has the artifact's own type.
    let expected_type = if image["linkSource"] == "server" {
        "image/png"
    } else {
        "application/octet-stream"
    };
    assert_eq!(got["type"], expected_type);
}
