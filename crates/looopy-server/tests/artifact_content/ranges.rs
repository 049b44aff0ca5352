//! Byte ranges: 206, 416 or everything; If-Range and If-None-Match; ranges checked
//! exhaustively around base64 quad and read-block boundaries, by a property test, and with
//! the real `curl` (`-r` and a resumed `-C -`).

use reqwest::StatusCode;
use serde_json::Value;

use super::fixture::{BLOB, BLOCK_BYTES, Fixture, ROWS, blob, h, text};

#[tokio::test]
async fn byte_ranges_answer_206_416_or_everything() {
    let fx = Fixture::start().await;
    let (url, all) = (fx.url("blob.bin"), blob());
    let size = all.len();

    for (range, first, last) in [
        ("bytes=0-99", 0, 99),
        ("bytes=100-", 100, size - 1),
        ("bytes=-10", size - 10, size - 1),
        ("bytes=1000-99999999", 1000, size - 1),
    ] {
        let (status, headers, body) = fx.get(&url, &[("range", range)]).await;
        assert_eq!(status, 206, "{range}");
        assert_eq!(
            h(&headers, "content-range"),
            format!("bytes {first}-{last}/{size}")
        );
        assert_eq!(
            h(&headers, "content-length"),
            (last - first + 1).to_string()
        );
        assert!(body == all[first..=last], "{range}: wrong bytes");
    }
    // The text file answers ranges from its file, no decoding.
    let (status, _, body) = fx
        .get(&fx.url("notes/poème.txt"), &[("range", "bytes=3-12")])
        .await;
    assert_eq!(status, 206);
    assert_eq!(body, text().as_bytes()[3..=12]);
    let (status, _, body) = fx
        .get(
            &fx.url("notes/poème.txt"),
            &[("range", "bytes=1000000-1000099")],
        )
        .await;
    assert_eq!(status, 206);
    assert_eq!(body, text().as_bytes()[1_000_000..=1_000_099]);
    // A dataset kept in SQLite answers ranges from memory.
    let (status, headers, body) = fx.get(&fx.url("table"), &[("range", "bytes=2-5")]).await;
    assert_eq!(status, 206);
    assert_eq!(
        h(&headers, "content-range"),
        format!("bytes 2-5/{}", ROWS.len())
    );
    assert_eq!(body, ROWS.as_bytes()[2..=5]);

    for range in [
        format!("bytes={size}-"),
        format!("bytes={size}-{}", size + 5),
        "bytes=-0".into(),
    ] {
        let (status, headers, body) = fx.get(&url, &[("range", &range)]).await;
        assert_eq!(status, 416, "{range}");
        assert_eq!(h(&headers, "content-range"), format!("bytes */{size}"));
        let error: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(error["error"]["code"], "range_not_satisfiable");
    }
    // Multi-range and malformed ranges are ignored: the whole file, 200.
    for range in ["bytes=0-1,5-6", "bytes=9-3", "bytes=x-", "lines=1-2"] {
        let (status, headers, body) = fx.get(&url, &[("range", range)]).await;
        assert_eq!(status, 200, "{range}");
        assert!(headers.get("content-range").is_none());
        assert_eq!(body.len(), size, "{range}");
    }

    // If-Range: the current ETag keeps the range; any other validator gets everything.
    let etag = format!("\"{}\"", fx.listed["blob.bin"]["sha256"].as_str().unwrap());
    let (status, _, body) = fx
        .get(&url, &[("range", "bytes=5-9"), ("if-range", &etag)])
        .await;
    assert_eq!(
        (status, body.as_slice()),
        (StatusCode::PARTIAL_CONTENT, &all[5..=9])
    );
    let (status, _, body) = fx
        .get(&url, &[("range", "bytes=5-9"), ("if-range", "\"stale\"")])
        .await;
    assert_eq!((status, body.len()), (StatusCode::OK, size));
    // If-None-Match with it: 304, no body.
    let (status, headers, body) = fx.get(&url, &[("if-none-match", &etag)]).await;
    assert_eq!(status, 304);
    assert_eq!(h(&headers, "etag"), etag);
    assert!(body.is_empty());

    fx.stop().await;
}

#[tokio::test]
async fn ranges_starting_and_ending_anywhere_in_a_quad_or_read_block_are_exact() {
    let fx = Fixture::start().await;
    let (url, all) = (fx.url("blob.bin"), blob());
    let size = all.len() as u64;
    // Every start % 3 and end % 3, at the file's start, across read-block boundaries
    // (where one block's decoded bytes end and the next begin) and at its padded end.
    let starts = [
        0,
        1,
        2,
        BLOCK_BYTES - 2,
        BLOCK_BYTES - 1,
        BLOCK_BYTES,
        BLOCK_BYTES + 1,
    ];
    let ends = [
        BLOCK_BYTES - 1,
        BLOCK_BYTES,
        BLOCK_BYTES + 1,
        2 * BLOCK_BYTES + 1,
        size - 3,
        size - 2,
        size - 1,
    ];
    let mut checked = 0;
    for first in starts {
        for last in ends {
            let (status, _, body) = fx
                .get(&url, &[("range", &format!("bytes={first}-{last}"))])
                .await;
            if first > last {
                assert_eq!(
                    (status, body.len()),
                    (StatusCode::OK, all.len()),
                    "backwards"
                );
                continue;
            }
            assert_eq!(status, 206);
            assert!(
                body == all[first as usize..=last as usize],
                "bytes={first}-{last}: wrong bytes"
            );
            checked += 1;
        }
    }
    let mut residues: Vec<_> = starts.iter().map(|s| s % 3).collect();
    residues.sort_unstable();
    residues.dedup();
    assert_eq!((checked, residues), (46, vec![0, 1, 2]));
    fx.stop().await;
}

#[test]
fn any_range_gives_exactly_those_bytes() {
    use proptest::prelude::*;
    use proptest::test_runner::{Config, TestRunner};

    let rt = tokio::runtime::Runtime::new().unwrap();
    let fx = rt.block_on(Fixture::start());
    let (url, all) = (fx.url("blob.bin"), blob());
    let mut runner = TestRunner::new(Config {
        cases: 96,
        ..Config::default()
    });
    let strategy = (0..BLOB, 0..BLOB).prop_map(|(a, b)| (a.min(b), a.max(b)));
    runner
        .run(&strategy, |(first, last)| {
            let (status, headers, body) =
                rt.block_on(fx.get(&url, &[("range", &format!("bytes={first}-{last}"))]));
            prop_assert_eq!(status, StatusCode::PARTIAL_CONTENT);
            prop_assert_eq!(
                h(&headers, "content-range"),
                format!("bytes {first}-{last}/{BLOB}")
            );
            prop_assert!(body == all[first..=last], "bytes={}-{}", first, last);
            Ok(())
        })
        .unwrap();
    rt.block_on(fx.stop());
}

/// The real `curl -r` and a resumed `curl -C -` against the server: the bytes on disk match.
#[tokio::test]
async fn curl_range_requests_and_resume_get_the_right_bytes() {
    if std::process::Command::new("curl")
        .arg("--version")
        .output()
        .is_err()
    {
        if std::env::var("LOOOPY_REQUIRE_E2E").as_deref() == Ok("1") {
            panic!("curl is required (LOOOPY_REQUIRE_E2E=1) but not installed");
        }
        eprintln!("skipped: curl is not installed");
        return;
    }
    let fx = Fixture::start().await;
    let (url, all) = (fx.url("blob.bin"), blob());
    let out = tempfile::tempdir().unwrap();
    let part = out.path().join("part");
    let curl = |args: Vec<String>| async move {
        let status = tokio::process::Command::new("curl")
            .args(["-sS", "--fail", "-H", "Authorization: Bearer tok-a"])
            .args(args)
            .status()
            .await
            .unwrap();
        assert!(status.success(), "curl failed: {status}");
    };
    let path = part.display().to_string();
    curl(vec![
        "-r".into(),
        "1000-300001".into(),
        "-o".into(),
        path.clone(),
        url.clone(),
    ])
    .await;
    assert!(std::fs::read(&part).unwrap() == all[1000..=300_001]);

    // Half a download, then `-C -` resumes it from the file's size with a Range request.
    let whole = out.path().join("blob.bin");
    let path = whole.display().to_string();
    curl(vec![
        "-r".into(),
        "0-700000".into(),
        "-o".into(),
        path.clone(),
        url.clone(),
    ])
    .await;
    curl(vec!["-C".into(), "-".into(), "-o".into(), path, url]).await;
    let got = std::fs::read(&whole).unwrap();
    assert_eq!(got.len(), all.len());
    assert!(got == all, "the resumed download differs");
    fx.stop().await;
}
