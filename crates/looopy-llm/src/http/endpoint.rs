//! Where a provider sends its requests: the base URL joined with the API path, with any
//! `user:password@` moved out of the URL into [`BasicAuth`], so URLs can be logged, kept in
//! `Debug` output and quoted in errors without a password.

use std::fmt;

use crate::{LlmError, Redactor};

/// Credentials taken out of a base URL's userinfo (`http://user:pass@host`), sent as
/// `Authorization: Basic` instead. `Debug` never shows the password.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct BasicAuth {
    pub user: String,
    pub password: Option<String>,
}

impl fmt::Debug for BasicAuth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BasicAuth")
            .field("user", &self.user)
            .field("password", &self.password.as_ref().map(|_| "<redacted>"))
            .finish()
    }
}

/// Where a provider sends requests: the URL without userinfo, and the credentials that
/// were in it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Endpoint {
    pub url: reqwest::Url,
    pub basic_auth: Option<BasicAuth>,
}

/// `base` for display: its userinfo replaced by `***` (also when it does not parse).
pub fn display_base_url(base: &str) -> String {
    match reqwest::Url::parse(base.trim()) {
        Ok(mut url)
            if url.has_authority() && (!url.username().is_empty() || url.password().is_some()) =>
        {
            let _ = url.set_password(None);
            let _ = url.set_username(crate::redact::REDACTED);
            url.to_string()
        }
        Ok(_) => base.to_string(),
        Err(_) => Redactor::new().redact(base).into_owned(),
    }
}

/// `base` with `path` appended to its path (a query string, as Azure-style gateways use,
/// is kept), and its userinfo moved out of the URL into [`BasicAuth`] — so the URL that
/// is logged at debug level, kept in `Debug` output and quoted in connection errors
/// never carries a password. (reqwest would do the same move per request, but only after
/// our own log line and inside its own types.)
pub(crate) fn join_url(base: &str, path: &str) -> Result<Endpoint, LlmError> {
    let shown = || display_base_url(base);
    let mut url = reqwest::Url::parse(base.trim())
        .map_err(|e| LlmError::Config(format!("invalid base URL {:?}: {e}", shown())))?;
    if url.cannot_be_a_base() || !matches!(url.scheme(), "http" | "https") {
        return Err(LlmError::Config(format!(
            "base URL {:?} must be an http(s) URL",
            shown()
        )));
    }
    let basic_auth = take_userinfo(&mut url)?;
    let joined = format!("{}{path}", url.path().trim_end_matches('/'));
    url.set_path(&joined);
    Ok(Endpoint { url, basic_auth })
}

/// Removes `user:password@` from `url`, returning it percent-decoded.
fn take_userinfo(url: &mut reqwest::Url) -> Result<Option<BasicAuth>, LlmError> {
    let decode = |text: &str| {
        percent_encoding::percent_decode_str(text)
            .decode_utf8()
            .map(|s| s.into_owned())
            .map_err(|_| LlmError::Config("the base URL's userinfo is not valid UTF-8".into()))
    };
    if url.username().is_empty() && url.password().is_none() {
        return Ok(None);
    }
    let auth = BasicAuth {
        user: decode(url.username())?,
        password: url.password().map(decode).transpose()?,
    };
    let cleared = url.set_username("").is_ok() && url.set_password(None).is_ok();
    if !cleared {
        return Err(LlmError::Config(
            "cannot remove the userinfo from the base URL".into(),
        ));
    }
    Ok(Some(auth))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::HttpSettings;

    #[test]
    fn urls_join_without_double_slashes() {
        assert_eq!(
            join_url("http://h:1/v1/", "/chat/completions")
                .unwrap()
                .url
                .as_str(),
            "http://h:1/v1/chat/completions"
        );
        assert!(matches!(
            join_url("not a url", "/x"),
            Err(LlmError::Config(_))
        ));
    }

    #[test]
    fn userinfo_moves_out_of_the_url_and_out_of_every_message() {
        let endpoint = join_url("http://us%40er:p%3Ass@127.0.0.1:9/v1", "/chat").unwrap();
        assert_eq!(endpoint.url.as_str(), "http://127.0.0.1:9/v1/chat");
        let auth = endpoint.basic_auth.clone().unwrap();
        assert_eq!(
            (auth.user.as_str(), auth.password.as_deref()),
            ("us@er", Some("p:ss"))
        );
        assert!(!format!("{endpoint:?}").contains("p:ss"));
        assert_eq!(display_base_url("http://user:pass@h/v1"), "http://***@h/v1");
        assert_eq!(display_base_url("http://h/v1"), "http://h/v1");
        let bad = join_url("ftp://user:topsecret@h/", "/x")
            .unwrap_err()
            .to_string();
        assert!(!bad.contains("topsecret"), "{bad}");
        let unparsable = join_url("http://user:topsecret@[::1/", "/x")
            .unwrap_err()
            .to_string();
        assert!(!unparsable.contains("topsecret"), "{unparsable}");

        let settings = HttpSettings {
            headers: vec![
                ("X-Gateway-Token".into(), "Bearer gw-token-value".into()),
                ("X-Team".into(), "core".into()),
            ],
            ..HttpSettings::default()
        };
        let redactor = settings.redactor(Some("the-api-key"), &endpoint);
        let text = "the-api-key p:ss gw-token-value core";
        assert_eq!(redactor.redact(text), "*** *** *** core");
        let map = settings.header_map(&[("accept", "x")]).unwrap();
        assert!(map["x-team"].is_sensitive() && !map["accept"].is_sensitive());
    }
}
