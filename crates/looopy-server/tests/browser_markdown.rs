//! The chat page renders answers as Markdown in headless Chromium (Debian's `chromium` +
//! `chromedriver`): a scripted turn speaks, calls the calculator, pauses in the middle of a
//! code block, then answers with a code block, lists, a table, links and injection
//! attempts. The page shows the two model calls as two text blocks around the tool line,
//! an unclosed code fence as code while it streams, the finished Markdown as elements (and
//! the same after a reload replays the turn), and nothing injected runs or becomes an
//! element or attribute. A second test feeds the renderer itself tricky inputs in the
//! browser and compares the exact HTML it builds.
//!
//! Skipped (with a message) when chromium or chromedriver is missing, unless
//! `LOOOPY_REQUIRE_E2E=1`, which makes that a failure. Leaves a screenshot in
//! `/tmp/looopy-markdown.png`.

#[path = "e2e/support.rs"]
mod support;
#[path = "e2e/webdriver.rs"]
mod webdriver;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use looopy_agent::tool::ToolRegistry;
use looopy_agent::{Agent, AgentConfig};
use looopy_llm::scripted::{Matcher, Response, Script, ScriptedProvider, Turn};
use looopy_server::ServerConfig;
use looopy_store::Store;
use serde_json::{Value, json};
use support::*;
use webdriver::{Browser, browser_missing};

/// The first model call: a sentence, then a calculator call.
const PLAN: &str = "Let me check the numbers.";

/// The answer's first half ends inside an open code fence; the model pauses there.
const ANSWER_HEAD: &str = "## Result\n\nThe product is **{{last_tool_result}}**, \
see [the docs](https://example.com/docs?a=1&b=2 \"Docs\") or https://example.org/faq.\n\n\
```rust\nfn main() {\n";

/// The rest: the fence closes, then lists, a table, a quote, a rule and injection attempts.
const ANSWER_TAIL: &str = "    println!(\"<b>42</b>\");\n}\n```\n\n\
- first *point*\n- second\n  - nested `code`\n\n\
1. one\n2. two\n\n\
| name | value |\n|:-----|------:|\n| six | 6 |\n| seven | 7 |\n\n\
> quoted\n\n---\n\
Injections: <script>window.__pwned = 1</script> <img src=x onerror=\"window.__pwned = 2\"> \
[click](javascript:window.__pwned=3) [again](JaVaScRiPt:alert(1)) <javascript:alert(4)> \
[data](data:text/html,hi) [t](https://example.net/\"onmouseover=\"window.__pwned=5)";

/// How long the model pauses inside the open code fence.
const PAUSE_MS: u64 = 2000;

fn markdown_script() -> Script {
    Script::new().turn(
        Turn::new()
            .named("markdown")
            .when(Matcher::any().user_contains("markdown"))
            .response(
                Response::new()
                    .text_chunked(PLAN, 5, 10)
                    .tool_call("calculator", json!({"expression": "6*7"})),
            )
            .response(
                Response::new()
                    .text_chunked(ANSWER_HEAD, 7, 10)
                    .pause_ms(PAUSE_MS)
                    .text_chunked(ANSWER_TAIL, 9, 5),
            ),
    )
}

/// A real server on loopback playing [`markdown_script`].
struct Server {
    addr: SocketAddr,
    _dir: tempfile::TempDir,
    stop: tokio::sync::oneshot::Sender<()>,
    running: tokio::task::JoinHandle<Result<(), looopy_server::ServerError>>,
}

impl Server {
    async fn start() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path().join("looopy.db")).unwrap();
        let agent = Agent::new(
            Arc::new(ScriptedProvider::new(markdown_script())),
            store,
            ToolRegistry::builtin(),
            AgentConfig::default(),
        );
        let config = ServerConfig {
            addr: "127.0.0.1:0".parse().unwrap(),
            shutdown_grace: Duration::from_secs(2),
            ..ServerConfig::default()
        };
        let bound = looopy_server::bind(config, agent).await.unwrap();
        let addr = bound.local_addr();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let running = tokio::spawn(bound.serve(async {
            let _ = stopped.await;
        }));
        Self {
            addr,
            _dir: dir,
            stop,
            running,
        }
    }

    async fn shutdown(self) {
        let _ = self.stop.send(());
        within("server shutdown", self.running)
            .await
            .unwrap()
            .unwrap();
    }
}

/// What the first turn shows, read from the DOM.
const TURN_STATE: &str = r#"
const turn = document.querySelector('section.turn');
if (!turn) return null;
const flow = turn.querySelector('.agent > .activity');
const kind = (c) => c.classList.contains('part') ? 'text' : c.classList.contains('tool') ? 'tool' : c.className;
const parts = [...flow.querySelectorAll(':scope > .part')];
const last = parts[parts.length - 1] || document.createElement('div');
const text = (e) => (e ? e.textContent : null);
return {
  taskId: turn.dataset.taskId,
  state: turn.dataset.state,
  order: [...flow.children].map(kind),
  parts: parts.map((p) => ({ index: p.dataset.index, complete: p.dataset.complete, id: p.id })),
  first: text(parts[0]),
  heading: text(last.querySelector('h2')),
  strong: text(last.querySelector('p strong')),
  code: [...last.querySelectorAll('pre code')].map((c) => [c.className, c.textContent]),
  items: [...last.querySelectorAll('li')].map((li) => text(li.querySelector('p'))),
  nested: [...last.querySelectorAll('ul li ul li')].map((li) => li.textContent),
  ordered: [...last.querySelectorAll('ol > li')].map((li) => li.textContent),
  th: [...last.querySelectorAll('table th')].map((c) => c.textContent),
  td: [...last.querySelectorAll('table td')].map((c) => [c.textContent, c.dataset.align || '']),
  quote: text(last.querySelector('blockquote')),
  rules: last.querySelectorAll('hr').length,
  links: [...turn.querySelectorAll('.part a')].map((a) =>
    [a.getAttribute('href'), a.textContent, a.rel, a.target]),
  scripts: document.scripts.length,
  images: document.querySelectorAll('img, iframe, object, embed').length,
  handlers: [...document.querySelectorAll('*')].filter((e) =>
    [...e.attributes].some((a) => a.name.startsWith('on') || /^\s*javascript:/i.test(a.value))).length,
  pwned: window.__pwned === undefined ? null : window.__pwned,
  shown: last.textContent.includes('<script>window.__pwned = 1</script> <img src=x onerror="window.__pwned = 2">'),
};
"#;

#[tokio::test]
async fn answers_render_as_safe_markdown_with_one_block_per_model_call() {
    if skip_without(browser_missing()) {
        return;
    }
    let server = Server::start().await;
    let browser = Browser::start().await;
    browser.goto(&format!("http://{}/", server.addr)).await;
    browser
        .type_into("#message", "markdown with numbers please")
        .await;
    browser.click("#send").await;

    // While the model pauses inside the code fence, the open fence is already code, in a
    // second block after the tool line.
    let streaming = eventually("the open code fence", || async {
        let s = browser.eval(TURN_STATE).await;
        let code = s["code"][0][1].as_str().unwrap_or_default();
        code.starts_with("fn main() {").then_some(s)
    })
    .await;
    assert_eq!(streaming["state"], "working", "{streaming}");
    assert_eq!(streaming["code"], json!([["language-rust", "fn main() {"]]));
    assert_eq!(streaming["parts"][1]["complete"], "false");
    assert_eq!(streaming["parts"][0]["complete"], "true");

    let done = eventually("the completed turn", || async {
        let s = browser.eval(TURN_STATE).await;
        (s["state"] == "completed").then_some(s)
    })
    .await;
    let task = done["taskId"].as_str().unwrap();
    // Two model calls, two blocks, the tool line between them; the latest is the answer.
    assert_eq!(done["order"], json!(["text", "tool", "text"]), "{done}");
    assert_eq!(
        done["parts"],
        json!([
            {"index": "1", "complete": "true", "id": ""},
            {"index": "2", "complete": "true", "id": format!("answer-{task}")},
        ])
    );
    assert_eq!(done["first"], PLAN);
    let answer_text = browser
        .eval(&format!(
            "return document.getElementById('answer-{task}').textContent"
        ))
        .await;
    assert!(answer_text.as_str().unwrap().starts_with("Result"));

    // The Markdown became elements.
    assert_eq!(done["heading"], "Result");
    assert_eq!(done["strong"], "42", "the calculator's result, in bold");
    assert_eq!(
        done["code"],
        json!([[
            "language-rust",
            "fn main() {\n    println!(\"<b>42</b>\");\n}"
        ]])
    );
    assert_eq!(
        done["items"],
        json!(["first point", "second", "nested code", "one", "two"])
    );
    assert_eq!(done["nested"], json!(["nested code"]));
    assert_eq!(done["ordered"], json!(["one", "two"]));
    assert_eq!(done["th"], json!(["name", "value"]));
    assert_eq!(
        done["td"],
        json!([
            ["six", "left"],
            ["6", "right"],
            ["seven", "left"],
            ["7", "right"]
        ])
    );
    assert_eq!(done["quote"], "quoted");
    assert_eq!(done["rules"], 1);
    // Only absolute http(s) links, opened safely; the attribute-breaking quote is encoded.
    let safe = |href: &str, text: &str| json!([href, text, "noopener noreferrer", "_blank"]);
    assert_eq!(
        done["links"],
        json!([
            safe("https://example.com/docs?a=1&b=2", "the docs"),
            safe("https://example.org/faq", "https://example.org/faq"),
            safe(
                "https://example.net/%22onmouseover=%22window.__pwned=5",
                "t"
            ),
        ])
    );
    // Nothing injected ran or became an element or an attribute; it shows as text.
    assert_eq!(done["scripts"], 1, "only the page's own script");
    assert_eq!(done["images"], 0);
    assert_eq!(done["handlers"], 0);
    assert_eq!(done["pwned"], Value::Null);
    assert_eq!(done["shown"], true);
    let png = browser.screenshot().await;
    assert!(png.starts_with(b"\x89PNG"), "a PNG screenshot");
    std::fs::write("/tmp/looopy-markdown.png", &png).unwrap();

    // A reload replays the turn from the log and renders the same page.
    browser.refresh().await;
    let replayed = eventually("the replayed turn", || async {
        let s = browser.eval(TURN_STATE).await;
        (s["state"] == "completed").then_some(s)
    })
    .await;
    assert_eq!(replayed, done);

    browser.close().await;
    server.shutdown().await;
}

/// Renders each input with the page's own renderer and returns the HTML it built.
async fn rendered(browser: &Browser, inputs: &[&str]) -> Vec<String> {
    let script = format!(
        "return {}.map((src) => {{ const d = document.createElement('div'); \
         d.append(LooopyMarkdown.render(src)); return d.innerHTML; }});",
        serde_json::to_string(inputs).unwrap()
    );
    serde_json::from_value(browser.eval(&script).await).unwrap()
}

#[tokio::test]
async fn the_renderer_builds_exactly_the_expected_safe_html() {
    if skip_without(browser_missing()) {
        return;
    }
    let server = Server::start().await;
    let browser = Browser::start().await;
    browser.goto(&format!("http://{}/", server.addr)).await;
    const A: &str = r#"rel="noopener noreferrer" target="_blank""#;
    let cases: Vec<(&str, String)> = vec![
        // Links only to absolute http(s)/mailto URLs, whatever the spelling.
        ("[x](javascript:alert(1))", "<p>x</p>".into()),
        ("[x](JaVaScRiPt:alert(1))", "<p>x</p>".into()),
        ("[x]( javascript:alert(1))", "<p>x</p>".into()),
        ("[x](vbscript:msgbox)", "<p>x</p>".into()),
        ("[x](data:text/html,hi)", "<p>x</p>".into()),
        ("[x](//evil.example/a)", "<p>x</p>".into()),
        ("[x](/relative)", "<p>x</p>".into()),
        ("<javascript:alert(1)>", "<p>&lt;javascript:alert(1)&gt;</p>".into()),
        ("![i](javascript:alert(1))", "<p>i</p>".into()),
        (
            "[m](mailto:a@example.com)",
            format!(r#"<p><a href="mailto:a@example.com" {A}>m</a></p>"#),
        ),
        (
            "<https://example.com>",
            format!(r#"<p><a href="https://example.com/" {A}>https://example.com</a></p>"#),
        ),
        (
            "see https://example.com/a_(b).",
            format!(r#"<p>see <a href="https://example.com/a_(b)" {A}>https://example.com/a_(b)</a>.</p>"#),
        ),
        (
            r#"[t](https://e.example/"onclick="x "T<b>")"#,
            format!(r#"<p><a href="https://e.example/%22onclick=%22x" {A} title="T&lt;b&gt;">t</a></p>"#),
        ),
        (
            "[**bold** [nested](https://a.example)](https://b.example)",
            format!(r#"<p><a href="https://b.example/" {A}><strong>bold</strong> [nested](https://a.example)</a></p>"#),
        ),
        // Raw HTML is text.
        (
            "<script>alert(1)</script><img src=x onerror=alert(1)>",
            "<p>&lt;script&gt;alert(1)&lt;/script&gt;&lt;img src=x onerror=alert(1)&gt;</p>".into(),
        ),
        ("&lt;b&gt; &amp;", "<p>&amp;lt;b&amp;gt; &amp;amp;</p>".into()),
        // Code: fences with a language (only a plain one becomes a class), unclosed while
        // streaming, inline spans.
        (
            "```rust\nlet a = \"<b>\";\n```",
            r#"<pre data-lang="rust"><code class="language-rust">let a = "&lt;b&gt;";</code></pre>"#.into(),
        ),
        ("```js\" onload=\"x\nhi\n```", "<pre><code>hi</code></pre>".into()),
        (
            "~~~py\nprint(1)\n\n",
            r#"<pre data-lang="py"><code class="language-py">print(1)</code></pre>"#.into(),
        ),
        ("a `<i>` b ``x ` y``", "<p>a <code>&lt;i&gt;</code> b <code>x ` y</code></p>".into()),
        // Emphasis.
        (
            "**b** *i* _u_ ~~s~~ ***bi*** snake_case_name 2*3*4 \\*lit\\* **open",
            "<p><strong>b</strong> <em>i</em> <em>u</em> <del>s</del> <strong><em>bi</em></strong> \
             snake_case_name 2<em>3</em>4 *lit* **open</p>"
                .into(),
        ),
        // Blocks.
        ("# One\n###### Six ##\n#tag", "<h1>One</h1><h6>Six</h6><p>#tag</p>".into()),
        ("a\nb\n\nc", "<p>a<br>b</p><p>c</p>".into()),
        ("x\n\n---\n* * *", "<p>x</p><hr><hr>".into()),
        (
            "> q\n> > qq",
            "<blockquote><p>q</p><blockquote><p>qq</p></blockquote></blockquote>".into(),
        ),
        (
            "- a\n  - b\n    - c\n- d",
            "<ul class=\"tight\"><li><p>a</p><ul class=\"tight\"><li><p>b</p><ul class=\"tight\">\
             <li><p>c</p></li></ul></li></ul></li><li><p>d</p></li></ul>"
                .into(),
        ),
        (
            "1. a\n  - b\n\n3. c",
            "<ol><li><p>a</p><ul class=\"tight\"><li><p>b</p></li></ul></li><li><p>c</p></li></ol>".into(),
        ),
        (
            "7) x\n8) y",
            "<ol start=\"7\" class=\"tight\"><li><p>x</p></li><li><p>y</p></li></ol>".into(),
        ),
        ("Year:\n2024. was long", "<p>Year:<br>2024. was long</p>".into()),
        (
            "| a | b | c |\n|:--|:-:|--:|\n| 1 | `x\\|y` | **z** |\n| only |",
            "<div class=\"table-wrap\"><table><thead><tr><th data-align=\"left\">a</th>\
             <th data-align=\"center\">b</th><th data-align=\"right\">c</th></tr></thead><tbody>\
             <tr><td data-align=\"left\">1</td><td data-align=\"center\"><code>x|y</code></td>\
             <td data-align=\"right\"><strong>z</strong></td></tr><tr><td data-align=\"left\">only</td>\
             <td data-align=\"center\"></td><td data-align=\"right\"></td></tr></tbody></table></div>"
                .into(),
        ),
        ("a | b\n--- | ---", "<div class=\"table-wrap\"><table><thead><tr><th>a</th><th>b</th></tr></thead></table></div>".into()),
        ("a | b\n---", "<p>a | b</p><hr>".into()),
    ];
    let inputs: Vec<&str> = cases.iter().map(|(input, _)| *input).collect();
    let html = rendered(&browser, &inputs).await;
    for ((input, expected), got) in cases.iter().zip(&html) {
        assert_eq!(got, expected, "rendering {input:?}");
    }

    // Hostile shapes stay bounded: deep nesting is cut off, long runs stay text.
    let counts = browser
        .eval(
            "const deep = document.createElement('div'); \
             deep.append(LooopyMarkdown.render('>'.repeat(5000) + ' x\\n' + '- '.repeat(5000) + 'y')); \
             const runs = document.createElement('div'); \
             runs.append(LooopyMarkdown.render('*a '.repeat(20000) + '['.repeat(20000) + '`'.repeat(3))); \
             return [deep.querySelectorAll('blockquote').length, deep.querySelectorAll('li').length, \
                     runs.querySelectorAll('em, a, code').length, runs.textContent.length];",
        )
        .await;
    assert_eq!(counts[0], 12, "quotes nest at most 12 deep: {counts}");
    assert!(counts[1].as_u64().unwrap() <= 12, "{counts}");
    assert_eq!(counts[2], 0, "{counts}");
    assert_eq!(counts[3], 60_000 + 20_000 + 3, "{counts}");
    // Lines shaped to make a backtracking pattern take quadratic time finish (the call
    // would time out otherwise) and stay what they are.
    let shapes = browser
        .eval(
            "const shapes = ['```' + 'a'.repeat(100000) + '`', '# a' + ' '.repeat(100000) + 'b', \
             'a|b\\n---' + ' '.repeat(100000) + 'x', 'a|b\\n|' + '-|'.repeat(50000) + 'x', \
             ('https://a.example/' + ')'.repeat(2000) + '.'.repeat(2000) + ' ').repeat(25)]; \
             return shapes.map((src) => { const d = document.createElement('div'); \
             d.append(LooopyMarkdown.render(src)); \
             return [d.firstElementChild.tagName, d.querySelectorAll('a').length]; });",
        )
        .await;
    assert_eq!(
        shapes,
        json!([["P", 0], ["H1", 0], ["P", 0], ["P", 0], ["P", 25]]),
        "{shapes}"
    );

    browser.close().await;
    server.shutdown().await;
}
