use std::time::Duration;

use proptest::prelude::*;

use super::*;

const KEY: &str = "sk-test-SECRET-0123456789abcdef";

#[test]
fn configured_key_is_removed_wherever_it_appears() {
    let r = Redactor::new().with_secret(KEY);
    let text = format!("bad key {KEY}; again:{KEY}. x{KEY}y");
    let out = r.redact(&text);
    assert!(!out.contains(KEY), "{out}");
    assert!(!out.contains("SECRET"), "{out}");
    assert!(out.starts_with("bad key ***; again:***."), "{out}");
}

#[test]
fn credential_shapes_are_removed_without_configuration() {
    let r = Redactor::new();
    let cases = [
        (
            "Authorization: Bearer abcdefgh12345678",
            "Authorization: ***",
        ),
        (
            "got bearer abcdefgh12345678 from you",
            "got bearer *** from you",
        ),
        ("header Basic dXNlcjpwYXNzd29yZA==", "header Basic ***"),
        ("x-api-key: sk-ant-api03-abcdEFGH_1234", "x-api-key: ***"),
        ("X-Api-Key=foo123456", "X-Api-Key=***"),
        (
            "GET /v1?api_key=abc123&model=x",
            "GET /v1?api_key=***&model=x",
        ),
        ("key sk-proj-ABCDEFGH12345678 invalid", "key sk-*** invalid"),
        (
            "Incorrect API key provided: sk-ant-api03-xyzXYZ123456.",
            "Incorrect API key provided: sk-***.",
        ),
        (
            r#"{"headers":{"authorization":"Bearer abc","x-api-key":"k1"}}"#,
            r#"{"headers":{"authorization":"***","x-api-key":"***"}}"#,
        ),
        (
            r#"{"Authorization" : "tok\"en"}"#,
            r#"{"Authorization" : "***"}"#,
        ),
        (
            "error sending request for url (http://user:pa55@127.0.0.1:9/v1)",
            "error sending request for url (http://***@127.0.0.1:9/v1)",
        ),
        ("password=hunter22 next", "password=*** next"),
        (
            "url (https://h/v1/models/m:generate?key=AbC123&alt=sse)",
            "url (https://h/v1/models/m:generate?key=***&alt=sse)",
        ),
        (
            "https://acct.blob/x?sv=1&sig=abc%2Fdef",
            "https://acct.blob/x?sv=1&sig=***",
        ),
        (
            "key AIzaSyA-1234567890abcdefghijklmnopqrstu end",
            "key AIza*** end",
        ),
    ];
    for (input, expected) in cases {
        assert_eq!(r.redact(input), expected, "input: {input}");
    }
}

#[test]
fn ordinary_text_is_left_alone() {
    let r = Redactor::new().with_secret(KEY);
    for text in [
        "Invalid model [invalid_request_error]",
        "a valid Bearer token is required",
        "basic arithmetic failed: 6*7",
        "max_tokens=4096 is too large",
        "see https://example.com/docs#errors",
        "mask-wearing is risky",
    ] {
        assert!(
            matches!(r.redact(text), Cow::Borrowed(_)),
            "changed: {text} -> {}",
            r.redact(text)
        );
    }
}

#[test]
fn short_and_star_only_secrets_are_ignored_but_encoded_forms_are_added() {
    let r = Redactor::new()
        .with_secret("")
        .with_secret("ab")
        .with_secret("****")
        .with_secret("p@ss/word");
    assert_eq!(r.redact("ab cab"), "ab cab");
    assert_eq!(r.redact("u:p%40ss%2Fword and p@ss/word"), "u:*** and ***");
    assert!(!format!("{r:?}").contains("p@ss"));
}

#[test]
fn errors_are_redacted_then_truncated() {
    let r = Redactor::new().with_secret(KEY);
    // The key straddles the truncation point: redacting first removes it whole.
    let long = format!(
        "{}{KEY}{}",
        "x".repeat(MAX_MESSAGE_LEN - 10),
        "y".repeat(100)
    );
    let error = r.error(LlmError::Http {
        status: 401,
        message: long,
        retry_after: Some(Duration::from_secs(1)),
    });
    let LlmError::Http {
        status,
        message,
        retry_after,
    } = &error
    else {
        panic!("variant changed: {error:?}");
    };
    assert_eq!((*status, *retry_after), (401, Some(Duration::from_secs(1))));
    assert!(message.len() <= MAX_MESSAGE_LEN + '…'.len_utf8());
    assert!(!message.contains("sk-test"), "{message}");

    let each = [
        LlmError::Config(format!("bad {KEY}")),
        LlmError::connect(format!("bad {KEY}")),
        LlmError::interrupted(format!("bad {KEY}")),
        LlmError::Decode(format!("bad {KEY}")),
        LlmError::Provider {
            kind: KEY.into(),
            message: format!("bad {KEY}"),
            retryable: true,
        },
    ];
    for error in each {
        let shown = r.error(error).to_string();
        assert!(!shown.contains(KEY) && shown.contains("***"), "{shown}");
    }
    assert_eq!(
        r.error(LlmError::IdleTimeout(Duration::from_secs(3))),
        LlmError::IdleTimeout(Duration::from_secs(3))
    );
}

#[test]
fn truncation_respects_char_boundaries() {
    let body = "é".repeat(1000);
    let message = Redactor::new().message(&body);
    assert!(message.len() <= MAX_MESSAGE_LEN + '…'.len_utf8());
    assert!(message.ends_with('…'));
    assert_eq!(truncate("short", 10), "short");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// A configured key embedded anywhere in arbitrary text, any number of times, never
    /// survives — whatever text surrounds it (including text that looks like credentials).
    #[test]
    fn a_configured_key_never_survives(
        key in "[A-Za-z0-9_\\-]{8,48}",
        pieces in proptest::collection::vec(
            prop_oneof![
                any::<String>(),
                "[ -~]{0,20}",
                Just("Bearer ".to_string()),
                Just("x-api-key: ".to_string()),
                Just("\"authorization\": \"".to_string()),
                Just("http://u:".to_string()),
                Just("sk-".to_string()),
                Just("*".to_string()),
            ],
            0..8,
        ),
        cut in any::<prop::sample::Index>(),
    ) {
        let mut text = String::new();
        for piece in &pieces {
            text.push_str(piece);
            text.push_str(&key);
        }
        // Also a key split around arbitrary text does not count, but a whole one inside
        // any piece must go: insert one more at an arbitrary char boundary.
        let boundaries: Vec<usize> = (0..=text.len()).filter(|i| text.is_char_boundary(*i)).collect();
        let at = boundaries[cut.index(boundaries.len())];
        text.insert_str(at, &key);
        let redactor = Redactor::new().with_secret(&key);
        let out = redactor.redact(&text);
        prop_assert!(!out.contains(key.as_str()), "{out:?}");
        let error = redactor.error(LlmError::Http { status: 500, message: text, retry_after: None });
        prop_assert!(!error.to_string().contains(key.as_str()));
    }

    /// Credential-shaped values are removed even when nobody configured them.
    #[test]
    fn shaped_credentials_never_survive(
        prefix in "[ -~]{0,30}",
        token in "[A-Za-z0-9]{16,40}",
        shape in 0usize..5,
    ) {
        let credential = match shape {
            0 => format!("Bearer {token}"),
            1 => format!("sk-{token}"),
            2 => format!("sk-ant-api03-{token}"),
            3 => format!("x-api-key: {token}"),
            _ => format!("\"authorization\":\"{token}\""),
        };
        let text = format!("{prefix} {credential} tail");
        let out = Redactor::new().redact(&text);
        prop_assert!(!out.contains(token.as_str()), "{text:?} -> {out:?}");
    }
}
