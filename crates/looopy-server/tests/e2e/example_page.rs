//! An `examples/*` page for the browser tests: its packages (from `target/e2e-node`, where
//! `.ci/run` installs them, or `$LOOOPY_NODE_MODULES`), its bundle (esbuild, as the example's
//! `npm run build` does) and its own `serve.mjs` in front of a test server.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};
use std::process::Stdio;

use looopy_testkit::wait::within;
use tokio::io::{AsyncBufReadExt, BufReader};

use super::webdriver::browser_missing;

/// `examples/<name>`.
pub fn example(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples")
        .join(name)
}

/// The node_modules holding `packages`, or why the page cannot be tested here.
pub fn node_modules(packages: &[&str]) -> Result<PathBuf, String> {
    if let Some(missing) = browser_missing() {
        return Err(missing);
    }
    let dir = match std::env::var_os("LOOOPY_NODE_MODULES") {
        Some(dir) => PathBuf::from(dir),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/e2e-node/node_modules"),
    };
    for package in packages {
        if !dir.join(package).join("package.json").exists() {
            return Err(format!(
                "{package} is not in {}; .ci/run installs the example's packages there",
                dir.display()
            ));
        }
    }
    match std::process::Command::new("node").arg("--version").output() {
        Ok(out) if out.status.success() => Ok(dir),
        _ => Err("node is not installed".into()),
    }
}

/// `node_modules(packages)`, or `None` after saying why the test is skipped (a failure
/// when `LOOOPY_REQUIRE_E2E=1`).
pub fn node_modules_or_skip(packages: &[&str]) -> Option<PathBuf> {
    match node_modules(packages) {
        Ok(dir) => Some(dir),
        Err(why) if std::env::var("LOOOPY_REQUIRE_E2E").as_deref() == Ok("1") => {
            panic!("LOOOPY_REQUIRE_E2E=1 but {why}")
        }
        Err(why) => {
            eprintln!("SKIPPED: {why} (set LOOOPY_REQUIRE_E2E=1 to make this an error)");
            None
        }
    }
}

/// Bundles the example's `src/main.jsx` into `out`.
pub async fn bundle(example: &Path, modules: &Path, out: &Path) {
    let status = within(
        "esbuild",
        tokio::process::Command::new(modules.join(".bin/esbuild"))
            .current_dir(example)
            .args([
                "src/main.jsx",
                "--bundle",
                "--format=esm",
                "--jsx=automatic",
                "--log-level=warning",
            ])
            .arg(format!("--outfile={}", out.display()))
            .env("NODE_PATH", modules)
            .status(),
    )
    .await
    .unwrap();
    assert!(status.success(), "esbuild failed");
}

/// The example's `serve.mjs` (page plus `/v1` proxy) in front of `upstream`; the child and
/// the page's address once it listens.
pub async fn serve(
    example: &Path,
    upstream: &str,
    bundle: &Path,
) -> (tokio::process::Child, String) {
    let mut child = tokio::process::Command::new("node")
        .arg(example.join("serve.mjs"))
        .env("LOOOPY_URL", upstream)
        .env("PORT", "0")
        .env("BUNDLE", bundle)
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let url = within("the page server", async {
        loop {
            let line = lines.next_line().await.unwrap().expect("serve.mjs ended");
            if let Some(url) = line.strip_prefix("listening on ") {
                return url.to_string();
            }
        }
    })
    .await;
    (child, url)
}
