//! Just enough W3C WebDriver (JSON over HTTP, spoken with reqwest) to drive headless
//! Chromium through `chromedriver`, plus a loopback TCP proxy whose connections can be cut
//! for real.
#![allow(dead_code)]

use std::net::SocketAddr;
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::AbortHandle;

use super::support::within;

/// The key W3C WebDriver uses for element references (its value is the element id).
const ELEMENT_PREFIX: &str = "element-6066-11e4-a52e-";

pub const CHROMIUM: &str = "/usr/bin/chromium";
pub const CHROMEDRIVER: &str = "chromedriver";

/// What is missing to run a browser test, if anything.
pub fn browser_missing() -> Option<String> {
    if !std::path::Path::new(CHROMIUM).exists() {
        return Some(format!(
            "{CHROMIUM} is not installed (apt-get install chromium chromium-driver)"
        ));
    }
    match std::process::Command::new(CHROMEDRIVER)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
    {
        Ok(s) if s.success() => None,
        _ => Some("chromedriver is not installed (apt-get install chromium-driver)".into()),
    }
}

/// A chromedriver process and one browser session; both end when dropped.
pub struct Browser {
    http: reqwest::Client,
    base: String,
    session: String,
    driver: tokio::process::Child,
    _profile: tempfile::TempDir,
}

impl Browser {
    pub async fn start() -> Self {
        Self::start_with(&[]).await
    }

    /// [`start`](Self::start) with more Chromium switches (e.g. `--js-flags=--expose-gc`).
    pub async fn start_with(extra: &[&str]) -> Self {
        let port = {
            let probe = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            probe.local_addr().unwrap().port()
        };
        let driver = tokio::process::Command::new(CHROMEDRIVER)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let http = reqwest::Client::new();
        let base = format!("http://127.0.0.1:{port}");
        within("chromedriver to start", async {
            loop {
                if let Ok(r) = http.get(format!("{base}/status")).send().await {
                    if let Ok(v) = r.json::<Value>().await {
                        if v["value"]["ready"] == true {
                            return;
                        }
                    }
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        })
        .await;
        let profile = tempfile::tempdir().unwrap();
        let mut args = vec![
            "--headless".to_string(),
            "--no-sandbox".into(),
            "--disable-gpu".into(),
            "--disable-quic".into(),
            "--no-first-run".into(),
            "--disable-background-networking".into(),
            "--disable-component-update".into(),
            "--disable-sync".into(),
            "--disable-dev-shm-usage".into(),
            "--window-size=1000,900".into(),
            format!("--user-data-dir={}", profile.path().display()),
        ];
        args.extend(extra.iter().map(|a| a.to_string()));
        let caps = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {"binary": CHROMIUM, "args": args},
        }}});
        let created: Value = within(
            "a browser session",
            http.post(format!("{base}/session")).json(&caps).send(),
        )
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
        let session = created["value"]["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("no session: {created}"))
            .to_owned();
        Self {
            http,
            base,
            session,
            driver,
            _profile: profile,
        }
    }

    async fn command(&self, method: reqwest::Method, path: &str, body: Option<Value>) -> Value {
        let url = format!("{}/session/{}{}", self.base, self.session, path);
        let mut req = self.http.request(method, url);
        if let Some(body) = body {
            req = req.json(&body);
        }
        let r: Value = within(&format!("WebDriver {path}"), req.send())
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        if r["value"].get("error").is_some() {
            panic!("WebDriver {path} failed: {}", r["value"]);
        }
        r["value"].clone()
    }

    pub async fn goto(&self, url: &str) {
        self.command(reqwest::Method::POST, "/url", Some(json!({"url": url})))
            .await;
    }

    /// Reloads the page.
    pub async fn refresh(&self) {
        self.command(reqwest::Method::POST, "/refresh", Some(json!({})))
            .await;
    }

    /// The first element matching a CSS selector.
    pub async fn find(&self, css: &str) -> String {
        let v = self
            .command(
                reqwest::Method::POST,
                "/element",
                Some(json!({"using": "css selector", "value": css})),
            )
            .await;
        let reference = v.as_object().and_then(|o| {
            o.iter()
                .find(|(k, _)| k.starts_with(ELEMENT_PREFIX))
                .and_then(|(_, id)| id.as_str())
        });
        reference
            .unwrap_or_else(|| panic!("no element reference for {css}: {v}"))
            .to_owned()
    }

    pub async fn type_into(&self, css: &str, text: &str) {
        let id = self.find(css).await;
        self.command(
            reqwest::Method::POST,
            &format!("/element/{id}/value"),
            Some(json!({"text": text})),
        )
        .await;
    }

    pub async fn click(&self, css: &str) {
        let id = self.find(css).await;
        self.command(
            reqwest::Method::POST,
            &format!("/element/{id}/click"),
            Some(json!({})),
        )
        .await;
    }

    /// Runs `script` (a function body; `return` a JSON-able value) in the page.
    pub async fn eval(&self, script: &str) -> Value {
        self.command(
            reqwest::Method::POST,
            "/execute/sync",
            Some(json!({"script": script, "args": []})),
        )
        .await
    }

    /// Runs `body` (the body of an `async` function; `return` a JSON-able value, read
    /// `args` as `arguments`) in the page and waits for its promise. A rejection comes back
    /// as `{"error": "…"}`.
    pub async fn eval_async(&self, body: &str, args: Vec<Value>) -> Value {
        let script = format!(
            "const done = arguments[arguments.length - 1];\n\
             (async function () {{ {body} }}).apply(null, Array.prototype.slice.call(arguments, 0, -1))\n\
             .then(done, (e) => done({{ error: String(e) }}));"
        );
        self.command(
            reqwest::Method::POST,
            "/execute/async",
            Some(json!({"script": script, "args": args})),
        )
        .await
    }

    /// A PNG of the viewport.
    pub async fn screenshot(&self) -> Vec<u8> {
        let v = self
            .command(reqwest::Method::GET, "/screenshot", None)
            .await;
        base64_decode(v.as_str().unwrap())
    }

    pub async fn close(mut self) {
        let url = format!("{}/session/{}", self.base, self.session);
        let _ = self.http.delete(url).send().await;
        let _ = self.driver.kill().await;
    }
}

fn base64_decode(text: &str) -> Vec<u8> {
    let value = |c: u8| match c {
        b'A'..=b'Z' => Some(c - b'A'),
        b'a'..=b'z' => Some(c - b'a' + 26),
        b'0'..=b'9' => Some(c - b'0' + 52),
        b'+' => Some(62),
        b'/' => Some(63),
        _ => None,
    };
    let digits: Vec<u8> = text.bytes().filter_map(value).collect();
    let mut out = Vec::with_capacity(digits.len() * 3 / 4);
    for chunk in digits.chunks(4) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, d)| n | (u32::from(*d) << (18 - 6 * i)));
        let bytes = n.to_be_bytes();
        out.extend_from_slice(&bytes[1..chunk.len()]);
    }
    out
}

/// A TCP proxy on loopback in front of `target`. [`cut`](Self::cut) closes every
/// connection through it at once; while [`block`](Self::block)ed it accepts connections
/// and closes them immediately, like a network that is down.
pub struct CutProxy {
    pub addr: SocketAddr,
    connections: Arc<Mutex<Vec<AbortHandle>>>,
    blocked: Arc<AtomicBool>,
    accept: AbortHandle,
}

impl CutProxy {
    pub async fn start(target: SocketAddr) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let connections: Arc<Mutex<Vec<AbortHandle>>> = Arc::default();
        let blocked = Arc::new(AtomicBool::new(false));
        let accept = {
            let connections = Arc::clone(&connections);
            let blocked = Arc::clone(&blocked);
            tokio::spawn(async move {
                while let Ok((client, _)) = listener.accept().await {
                    if blocked.load(Ordering::SeqCst) {
                        drop(client);
                        continue;
                    }
                    let forward = tokio::spawn(async move {
                        let Ok(mut server) = TcpStream::connect(target).await else {
                            return;
                        };
                        let mut client = client;
                        let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
                    });
                    let mut open = connections.lock().unwrap();
                    open.retain(|h| !h.is_finished());
                    open.push(forward.abort_handle());
                }
            })
            .abort_handle()
        };
        Self {
            addr,
            connections,
            blocked,
            accept,
        }
    }

    /// Closes every open connection (both sides see the socket close).
    pub fn cut(&self) -> usize {
        let open: Vec<AbortHandle> = std::mem::take(&mut *self.connections.lock().unwrap());
        let live = open.iter().filter(|h| !h.is_finished()).count();
        for h in open {
            h.abort();
        }
        live
    }

    pub fn block(&self, blocked: bool) {
        self.blocked.store(blocked, Ordering::SeqCst);
    }
}

impl Drop for CutProxy {
    fn drop(&mut self) {
        self.accept.abort();
        self.cut();
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn base64_decodes_padded_and_unpadded() {
        assert_eq!(super::base64_decode("Zm9vYmFy"), b"foobar");
        assert_eq!(super::base64_decode("Zm9vYg=="), b"foob");
        assert_eq!(super::base64_decode("Zm8="), b"fo");
    }
}
