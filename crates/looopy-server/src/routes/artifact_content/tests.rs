use super::*;

#[test]
fn single_ranges_of_each_form_are_understood() {
    use Ranged::*;
    let cases = [
        ("bytes=0-99", Part { first: 0, last: 99 }),
        (
            "bytes=100-",
            Part {
                first: 100,
                last: 999,
            },
        ),
        (
            "bytes=-10",
            Part {
                first: 990,
                last: 999,
            },
        ),
        (
            "bytes=-5000",
            Part {
                first: 0,
                last: 999,
            },
        ),
        (
            "bytes=990-5000",
            Part {
                first: 990,
                last: 999,
            },
        ),
        ("Bytes = 5-5", Part { first: 5, last: 5 }),
        (
            "bytes=999-",
            Part {
                first: 999,
                last: 999,
            },
        ),
        ("bytes=99999999999999999999999-", Unsatisfiable),
        ("bytes=1000-", Unsatisfiable),
        ("bytes=1000-1001", Unsatisfiable),
        ("bytes=-0", Unsatisfiable),
        // Malformed or multi-range: ignored, the whole content is sent.
        ("bytes=5-4", Whole),
        ("bytes=0-1,5-6", Whole),
        ("bytes=-", Whole),
        ("bytes=a-b", Whole),
        ("bytes=+1-2", Whole),
        ("bytes 0-1", Whole),
        ("items=0-1", Whole),
        ("", Whole),
    ];
    for (value, expected) in cases {
        assert_eq!(parse_range(value, 1000), expected, "{value}");
    }
    assert_eq!(parse_range("bytes=0-", 0), Unsatisfiable);
    assert_eq!(parse_range("bytes=-1", 0), Unsatisfiable);
}

#[test]
fn two_range_headers_are_ignored() {
    let mut h = HeaderMap::new();
    h.append(header::RANGE, HeaderValue::from_static("bytes=0-1"));
    assert_eq!(requested_range(&h, 10), Ranged::Part { first: 0, last: 1 });
    h.append(header::RANGE, HeaderValue::from_static("bytes=2-3"));
    assert_eq!(requested_range(&h, 10), Ranged::Whole);
}

#[test]
fn if_range_needs_the_exact_strong_tag() {
    let tag = "\"abc\"";
    let mut h = HeaderMap::new();
    assert!(if_range_holds(&h, None));
    h.insert(header::IF_RANGE, HeaderValue::from_static("\"abc\""));
    assert!(if_range_holds(&h, Some(tag)));
    assert!(!if_range_holds(&h, None));
    h.insert(header::IF_RANGE, HeaderValue::from_static("W/\"abc\""));
    assert!(!if_range_holds(&h, Some(tag)));
    h.insert(
        header::IF_RANGE,
        HeaderValue::from_static("Tue, 15 Nov 1994 08:12:31 GMT"),
    );
    assert!(!if_range_holds(&h, Some(tag)));
}

#[test]
fn if_none_match_compares_weakly() {
    let mut h = HeaderMap::new();
    assert!(!none_match(&h, "\"abc\""));
    h.insert(
        header::IF_NONE_MATCH,
        HeaderValue::from_static("\"x\", W/\"abc\""),
    );
    assert!(none_match(&h, "\"abc\""));
    h.insert(header::IF_NONE_MATCH, HeaderValue::from_static("*"));
    assert!(none_match(&h, "\"abc\""));
}

fn record(kind: &str, name: Option<&str>, mime: Option<&str>) -> ArtifactRecord {
    let mut a = ArtifactRecord::new("art-1", "ctx", "task", kind);
    a.name = name.map(str::to_string);
    a.mime_type = mime.map(str::to_string);
    a
}

#[test]
fn download_names_lose_paths_and_control_characters() {
    let name = |kind, n| download_name(&record(kind, n, None));
    assert_eq!(name("file", Some("docs/poem.txt")), "poem.txt");
    assert_eq!(name("file", Some("..\\..\\evil.exe")), "evil.exe");
    assert_eq!(name("file", Some("a\r\nb.txt")), "ab.txt");
    assert_eq!(name("file", Some("dir/")), "art-1");
    assert_eq!(name("file", Some("..")), "art-1");
    assert_eq!(name("file", None), "art-1");
    assert_eq!(name("file", Some("trailing. ")), "trailing");
    assert_eq!(name("data", Some("summary")), "summary.json");
    assert_eq!(name("data", Some("summary.txt")), "summary.txt");
    assert_eq!(name("dataset", Some("rows")), "rows.jsonl");
    assert_eq!(name("dataset", None), "art-1.jsonl");
}

#[test]
fn content_disposition_has_a_safe_fallback_and_the_exact_name() {
    let value = content_disposition("na\"me %ü\\.txt");
    assert_eq!(
        value.to_str().unwrap(),
        "attachment; filename=\"na_me ___.txt\"; filename*=UTF-8''na%22me%20%25%C3%BC%5C.txt"
    );
    let plain = content_disposition("report.md");
    assert_eq!(
        plain.to_str().unwrap(),
        "attachment; filename=\"report.md\"; filename*=UTF-8''report.md"
    );
}

#[test]
fn content_types_follow_kind_and_storage() {
    let ct = |kind, mime, base64| {
        content_type(&record(kind, None, mime), base64)
            .to_str()
            .unwrap()
            .to_string()
    };
    assert_eq!(
        ct("file", Some("text/markdown"), false),
        "text/markdown; charset=utf-8"
    );
    assert_eq!(
        ct("file", Some("text/plain; charset=utf-8"), false),
        "text/plain; charset=utf-8"
    );
    assert_eq!(
        ct("file", Some("image/svg+xml"), false),
        "image/svg+xml; charset=utf-8"
    );
    assert_eq!(
        ct("file", Some("application/json"), false),
        "application/json"
    );
    assert_eq!(ct("file", Some("image/png"), true), "image/png");
    assert_eq!(ct("file", None, true), "application/octet-stream");
    assert_eq!(
        ct("file", Some("not a type"), true),
        "application/octet-stream"
    );
    assert_eq!(
        ct("file", Some("text/plain\u{7f}"), false),
        "application/octet-stream"
    );
    assert_eq!(ct("data", Some("text/plain"), false), "application/json");
    assert_eq!(ct("dataset", None, false), "application/x-ndjson");
}

#[test]
fn entity_tags_only_for_complete_measured_content() {
    let sha = "a".repeat(64);
    let meta = serde_json::json!({"sha256": sha, "size": 10});
    assert_eq!(entity_tag(&meta, 10, true), Some(format!("\"{sha}\"")));
    assert_eq!(entity_tag(&meta, 9, true), None);
    assert_eq!(entity_tag(&meta, 10, false), None);
    assert_eq!(entity_tag(&serde_json::json!({"size": 10}), 10, true), None);
    let odd = serde_json::json!({"sha256": "\"x\"", "size": 10});
    assert_eq!(entity_tag(&odd, 10, true), None);
}
