//! The chat page served at `GET /`: one self-contained HTML page with no external
//! resources, assembled once from files embedded at compile time — `index.html` (the
//! skeleton), `style.css` (its one inline style) and the script modules of [`MODULES`]
//! (its one inline script, in order: words, code highlighting, Markdown, artifact cards,
//! inline forms, turns, the conversation list, the app). Nothing is fetched from a CDN, so
//! the page works offline and the CSP can name its script and style by hash. It sends
//! with the REST API, watches the context with the browser's `EventSource` (named events
//! per kind, resuming with `Last-Event-ID`, de-duplicating by `seq`), renders streamed
//! content as Markdown, collapsible thoughts, tool progress, artifacts and inline answers to
//! input and authorization requests, and shows the connection's state.
//!
//! Artifacts show as they stream, one card per `artifactId` (a rewrite or a replay updates
//! the card in place): a file card with its name, MIME type and bytes received, then its
//! size, sha256 and a download link; images previewed, text files with a collapsed preview,
//! data records as collapsible pretty JSON, datasets as a table of their first 20 rows. The
//! page keeps a file's decoded chunks as `Blob` parts while the file stays under 16 MiB (64
//! MiB for the whole page; `<body data-keep-bytes>` overrides the first), checks them against
//! the streamed sha256 and links a `blob:` URL (typed `application/octet-stream`, so an
//! HTML or SVG artifact is saved, never rendered as a document of this origin): the
//! download is instant, works while the server is unreachable and puts no token in any URL. Past the limit the chunks are only
//! counted, and the link is the content route `GET /v1/tasks/{taskId}/artifacts/{artifactId}`,
//! fetched with the bearer header into a `Blob` when clicked — the route takes no
//! `?access_token=` (only the event stream does, since `EventSource` cannot send headers), so
//! a token never lands in a URL, a download history or a log. Data and dataset downloads
//! are built from the streamed values (compact JSON / JSON Lines).
//!
//! Each model call's text ("iteration") is its own block, in order with the thoughts and
//! tool lines around it, so the text before a tool call and the answer after it are never
//! glued together. A block is re-rendered from its whole text at most once per animation
//! frame while it streams (a burst of deltas costs one render), and once more from the
//! `content-complete` text. The renderer (`markdown.js`) builds DOM nodes and inserts the
//! model's text only as text nodes, so no markup in an answer is ever interpreted; links
//! are made only for absolute `http`/`https`/`mailto` URLs.
//!
//! Sub-agents' child tasks (events with a `path`) render inside their top-level task's
//! turn, each as a collapsible `<details>` block in its parent's flow — right after the
//! parent's delegating tool call, nested for deeper delegation — with the sub-agent's name,
//! the message it was given, its own status badge, and its own thoughts, tools, text,
//! artifacts and input forms (an answer goes to the child's task). A block is open while
//! its child works, folds away when it completes (unless the user opened or closed it by
//! hand) and reopens when the child waits for the user or fails. Its `cancel` stops that
//! child alone (`POST /v1/tasks/{childTaskId}/cancel`: the parent gets an error result and
//! goes on). Blocks are keyed by task id, so a replay (reconnect or reload) never makes one
//! twice.
//!
//! An authorization request (`auth-required`) shows its prompt and provider and, for OAuth
//! with an `authUrl`, an Authorize link that opens the authorization server in a new tab
//! (`target=_blank`, `rel="noopener noreferrer"`): the server's callback completes it, so
//! the page only watches. Any other request (API key, bearer, custom, or OAuth without a
//! URL) gets a password field whose value is posted as `{"authId", "credentials":
//! {"apiKey"|"token": …}}` to `POST /v1/tasks/{taskId}/auth` with the page's bearer token;
//! the field is emptied as it is sent and the value never goes anywhere else (no DOM text,
//! no log, no storage). `auth-completed` replaces the widget with "authorized (provider)".
//! A conversation reopened while a task waits shows the request again from the replay.
//!
//! With tokens configured, open the page as `/?token=<token>`: it sends the token as a
//! bearer header on `fetch` and as `access_token` on the event stream (which cannot carry
//! headers). The page's `Referrer-Policy: no-referrer` keeps that URL from leaking.
//!
//! The response's Content-Security-Policy allows exactly the page's own inline script and
//! style (by hash) and connections to this origin, so even a bug that rendered event text
//! as HTML could not run anything. It also carries `X-Frame-Options: DENY` and
//! `X-Content-Type-Options: nosniff`, like every HTML page of the server ([`protect_html`]). `blob:` is allowed for images (previews of streamed
//! images) and connections (reading back a download link's content, as the browser test
//! does): a `blob:` URL can only be minted by this origin's own script.
//!
//! Around the conversation (issue 25): a list of the caller's conversations (`GET
//! /v1/contexts`, titled by their first message, newest first, each with a delete button
//! calling `DELETE /v1/contexts/{id}`); the URL's `#ctx=<id>` always names the conversation
//! shown (opening one from the list is a navigation, so Back returns; an unknown id falls
//! back to a new chat at the bare URL); a Stop button in the composer while a turn holds
//! the conversation; the message box answers a pending question (`input-required`) when
//! there is one; copy buttons on messages, answers and code blocks, whose code is
//! highlighted by `highlight.js`; tool cards list their arguments; states are words
//! ("waiting for your answer") with the machine name in `data-state`; each turn's footer
//! shows model, tokens and duration, and a failed or stopped turn a readable error and
//! Retry. The user's guide is `docs/web-page.md`.
//!
//! Test hooks in the DOM: `#status[data-status]` (`idle`, `connecting`, `open`,
//! `reconnecting`), `body[data-last-seq]`, `body[data-reconnects]`,
//! `body[data-context-id]`, and per turn `section.turn[data-task-id][data-state]`, its
//! text blocks `.part[data-index][data-complete]` (in `.activity`, one per model call
//! that wrote text) of which the latest is `#answer-<taskId>`. A turn continued after
//! its process died shows `.resumed[data-from-iteration]` (and `data-replica`) in its
//! `.activity`, after the dead run's unfinished block, which is `.part[data-superseded]`. The renderer is the global
//! `LooopyMarkdown.render(text)` (a `DocumentFragment`). Artifact cards are
//! `.artifact[data-artifact-id][data-kind=file|data|dataset][data-state=streaming|verifying|complete|incomplete]`
//! with `data-bytes` and `data-chunks` (received so far), `data-size` (final), `data-rows`
//! (datasets), `data-verified` (`true`/`false`/`unavailable`: the kept bytes against the
//! streamed sha256) and `data-source` (`stream`: a `blob:` link; `server`: the content
//! route), holding `a.download`, `img.preview[data-loaded]`, `details.json` and `table`.
//! Authorization widgets are `form.auth[data-auth-id][data-auth-type][data-provider]
//! [data-closed]` (holding `.prompt`, `.provider`, `input[type=password]` or
//! `a.authorize`), replaced by `.authorized[data-auth-id]` once authorized.
//! Sub-task blocks are `details.subtask[data-task-id][data-parent-task-id][data-agent]
//! [data-depth][data-state]` (`data-tool-call-id`, `data-remote-task-id` when known) with
//! `summary .who`, `.prompt`, `.state`, `.cancel` and their own `.activity`.
//! The list is `#contexts[data-count]` of `.context[data-context-id][aria-current]` holding
//! `a.open` (`.title`, `.when`) and `button.delete`; the composer has `#stop[hidden]`,
//! `#composer[data-answering=<inputId>]` and `body[data-running]`. A turn carries
//! `data-model`, `data-tokens` and `data-duration-ms`, its `.foot` holds `.stats`,
//! `button.copy` and `button.retry`, a failure is `.error[data-code] .failure`; a tool card
//! has `dl.args`; highlighted code is `code[data-highlighted] span.tok-*`.

use std::sync::OnceLock;

use axum::Router;
use axum::http::HeaderValue;
use axum::http::header::{
    CACHE_CONTROL, CONTENT_SECURITY_POLICY, CONTENT_TYPE, REFERRER_POLICY, X_CONTENT_TYPE_OPTIONS,
    X_FRAME_OPTIONS,
};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use sha2::{Digest, Sha256};

use crate::AppState;

/// The page's skeleton with two slots; [`page`] is what is served.
const TEMPLATE: &str = include_str!("index.html");

/// The page's styles, inserted into its one `<style>` element.
const STYLE: &str = include_str!("style.css");

/// The Markdown renderer, kept apart from the page so each can be read on its own.
pub const MARKDOWN_JS: &str = include_str!("markdown.js");

/// The artifact cards (files, data records, datasets), kept apart like the renderer.
pub const ARTIFACTS_JS: &str = include_str!("artifacts.js");

/// The script's modules, in the order they are inserted (each uses only those before it,
/// except that a module's functions may call later ones once the page runs).
pub const MODULES: &[(&str, &str)] = &[
    ("words.js", include_str!("words.js")),
    ("highlight.js", include_str!("highlight.js")),
    ("markdown.js", MARKDOWN_JS),
    ("artifacts.js", ARTIFACTS_JS),
    ("forms.js", include_str!("forms.js")),
    ("turns.js", include_str!("turns.js")),
    ("contexts.js", include_str!("contexts.js")),
    ("app.js", include_str!("app.js")),
];

/// Where the styles go.
const STYLE_SLOT: &str = "/* style.css */";

/// Where the modules go: a comment at the start of the page's inline script.
const SCRIPTS_SLOT: &str = "/* scripts */";

/// The page as served: the skeleton with the styles and the modules in their slots (built
/// once).
pub fn page() -> &'static str {
    static PAGE: OnceLock<String> = OnceLock::new();
    PAGE.get_or_init(|| {
        let scripts: Vec<&str> = MODULES.iter().map(|(_, js)| *js).collect();
        TEMPLATE.replacen(STYLE_SLOT, STYLE.trim_end(), 1).replacen(
            SCRIPTS_SLOT,
            &scripts.join("\n"),
            1,
        )
    })
}

/// The web routes, merged into the server's router.
pub fn routes() -> Router<AppState> {
    Router::new().route("/", get(index))
}

async fn index() -> Response {
    let headers = [
        (
            CONTENT_TYPE,
            HeaderValue::from_static("text/html; charset=utf-8"),
        ),
        (CACHE_CONTROL, HeaderValue::from_static("no-cache")),
    ];
    let mut response = (headers, page()).into_response();
    protect_html(&mut response, content_security_policy());
    response
}

/// What every HTML page of the server carries: its Content-Security-Policy, no framing
/// (`X-Frame-Options: DENY` too, for browsers that predate `frame-ancestors`), no MIME
/// sniffing, and no `Referer` (a page's URL may hold a token or an OAuth code).
pub(crate) fn protect_html(response: &mut Response, csp: &str) {
    let headers = response.headers_mut();
    if let Ok(csp) = HeaderValue::from_str(csp) {
        headers.insert(CONTENT_SECURITY_POLICY, csp);
    }
    headers.insert(X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers.insert(X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    headers.insert(REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
}

/// The page's Content-Security-Policy, computed once from the embedded file.
pub fn content_security_policy() -> &'static str {
    static CSP: OnceLock<String> = OnceLock::new();
    CSP.get_or_init(|| {
        let script = inline_hash(page(), "<script>", "</script>");
        let style = inline_hash(page(), "<style>", "</style>");
        format!(
            "default-src 'none'; script-src {script}; style-src {style}; connect-src 'self' blob:; \
             img-src 'self' data: blob:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
        )
    })
}

/// `'sha256-…'` of the text between the first `open` and the following `close` tag, or
/// `'none'` when the page has no such element.
fn inline_hash(html: &str, open: &str, close: &str) -> String {
    let Some(start) = html.find(open).map(|i| i + open.len()) else {
        return "'none'".into();
    };
    let Some(len) = html[start..].find(close) else {
        return "'none'".into();
    };
    csp_hash(&html[start..start + len])
}

/// `'sha256-…'`: the CSP source that allows an inline element with exactly this text.
pub(crate) fn csp_hash(text: &str) -> String {
    format!("'sha256-{}'", base64(&Sha256::digest(text.as_bytes())))
}

/// Standard base64 with padding (what CSP hashes use).
fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_matches_the_rfc_vectors() {
        for (input, expected) in [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
            ("fooba", "Zm9vYmE="),
            ("foobar", "Zm9vYmFy"),
        ] {
            assert_eq!(base64(input.as_bytes()), expected);
        }
    }

    #[test]
    fn csp_hashes_the_inline_script_and_style() {
        let csp = content_security_policy();
        assert!(csp.contains("script-src 'sha256-"), "{csp}");
        assert!(csp.contains("style-src 'sha256-"), "{csp}");
        assert_eq!(inline_hash("<p>", "<script>", "</script>"), "'none'");
        // The hash covers exactly the element's text.
        let h = inline_hash("<script>alert(1)</script>", "<script>", "</script>");
        assert_eq!(
            h,
            format!("'sha256-{}'", base64(&Sha256::digest(b"alert(1)")))
        );
    }

    #[test]
    fn the_modules_are_inside_the_pages_one_script() {
        let script_start = TEMPLATE.find("<script>").unwrap();
        let script_end = TEMPLATE.find("</script>").unwrap();
        assert_eq!(TEMPLATE.matches(SCRIPTS_SLOT).count(), 1);
        let at = TEMPLATE.find(SCRIPTS_SLOT).unwrap();
        assert!(script_start < at && at < script_end);
        for (name, js) in MODULES {
            // The inserted code cannot end the script element early, nor hold a slot.
            assert!(!js.to_ascii_lowercase().contains("</script"), "{name}");
            assert!(
                !js.contains(SCRIPTS_SLOT) && !js.contains(STYLE_SLOT),
                "{name}"
            );
            assert!(page().contains(js), "{name}");
            assert!(js.lines().count() <= 500, "{name} is over 500 lines");
        }
        for global in [
            "const LooopyMarkdown = ",
            "const LooopyArtifacts = ",
            "const LooopyHighlight = ",
            "const LooopyTurns = ",
        ] {
            assert!(page().contains(global), "{global}");
        }
        assert!(!STYLE.to_ascii_lowercase().contains("</style"));
        assert!(page().contains(STYLE.trim_end()));
        assert!(!page().contains(SCRIPTS_SLOT) && !page().contains(STYLE_SLOT));
    }

    #[test]
    fn the_page_is_self_contained() {
        // No external resources: nothing fetched from another origin.
        for needle in [
            "http://",
            "https://",
            "src=\"//",
            "href=\"//",
            "<script src",
            "@import",
        ] {
            assert!(!page().contains(needle), "the page references {needle}");
        }
        assert_eq!(page().matches("<script>").count(), 1);
        assert_eq!(page().matches("<style>").count(), 1);
        // Content becomes DOM nodes and text nodes, never parsed as HTML.
        for needle in [
            "innerHTML",
            "outerHTML",
            "insertAdjacentHTML",
            "document.write",
            "eval(",
        ] {
            assert!(!page().contains(needle), "the page uses {needle}");
        }
        assert!(page().contains("new EventSource("));
    }
}
