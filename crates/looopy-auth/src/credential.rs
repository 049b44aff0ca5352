//! [`Credential`]: what a principal gave for a provider, and how submitted JSON becomes one.

use chrono::{DateTime, Utc};
use looopy_protocol::event::AuthType;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::{AuthError, OAuthClient, Secret};

/// How long before its expiry a token counts as expired: a call made with it must still
/// reach the server in time.
pub const EXPIRY_MARGIN_SECS: i64 = 30;

/// A credential of one principal for one provider. Its `Debug` shows no secret.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Credential {
    pub provider: String,
    pub kind: AuthType,
    /// The API key or (access) token; empty for a custom credential that has only `fields`.
    pub secret: Secret,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refresh_token: Option<Secret>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<DateTime<Utc>>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub scopes: Vec<String>,
    /// Other values the user gave (custom credentials), each a secret.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fields: Vec<(String, Secret)>,
    /// For OAuth tokens: the client that refreshes them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oauth: Option<OAuthClient>,
}

/// The keys a submitted credential's main secret may come under, in order.
const SECRET_KEYS: &[&str] = &[
    "apiKey",
    "api_key",
    "token",
    "accessToken",
    "access_token",
    "bearer",
    "password",
    "value",
];

impl Credential {
    /// A credential holding just `secret`.
    pub fn new(provider: impl Into<String>, kind: AuthType, secret: impl Into<String>) -> Self {
        Self {
            provider: provider.into(),
            kind,
            secret: Secret::new(secret),
            refresh_token: None,
            expires_at: None,
            scopes: Vec::new(),
            fields: Vec::new(),
            oauth: None,
        }
    }

    /// Reads what a user submitted (`POST /v1/tasks/{id}/auth`'s `credentials`) for a
    /// request of `kind`: a string is the secret itself; an object gives it under `apiKey`,
    /// `token`, `accessToken`… with optional `expiresIn` (seconds) or `expiresAt`
    /// (RFC 3339). Custom requests keep every string value as a field. Errors never
    /// quote the values.
    pub fn from_submitted(
        kind: AuthType,
        provider: &str,
        submitted: &Value,
    ) -> Result<Self, AuthError> {
        let mut credential = Self::new(provider, kind, "");
        match submitted {
            Value::String(s) if !s.trim().is_empty() => {
                credential.secret = Secret::new(s.trim());
                return Ok(credential);
            }
            Value::Object(map) => credential.read_object(map)?,
            _ => {
                return Err(AuthError::Invalid(
                    "credentials must be a non-empty string or an object such as {\"apiKey\": \"…\"}".into(),
                ));
            }
        }
        if credential.secret.is_empty()
            && (kind != AuthType::Custom || credential.fields.is_empty())
        {
            return Err(AuthError::Invalid(format!(
                "credentials hold no secret: give one of {}",
                SECRET_KEYS.join(", ")
            )));
        }
        Ok(credential)
    }

    fn read_object(&mut self, map: &Map<String, Value>) -> Result<(), AuthError> {
        if let Some(secret) = SECRET_KEYS.iter().find_map(|k| {
            map.get(*k)
                .and_then(Value::as_str)
                .filter(|s| !s.trim().is_empty())
        }) {
            self.secret = Secret::new(secret.trim());
        }
        if let Some(refresh) = map
            .get("refreshToken")
            .or_else(|| map.get("refresh_token"))
            .and_then(Value::as_str)
        {
            self.refresh_token = Some(Secret::new(refresh));
        }
        if let Some(seconds) = map.get("expiresIn").or_else(|| map.get("expires_in")) {
            let seconds = seconds.as_i64().filter(|s| *s > 0).ok_or_else(|| {
                AuthError::Invalid("expiresIn must be a positive number of seconds".into())
            })?;
            self.expires_at =
                Some(Utc::now() + chrono::Duration::seconds(seconds.min(10 * 365 * 86_400)));
        } else if let Some(at) = map.get("expiresAt") {
            let at = at
                .as_str()
                .and_then(|s| DateTime::parse_from_rfc3339(s).ok())
                .ok_or_else(|| AuthError::Invalid("expiresAt must be an RFC 3339 time".into()))?;
            self.expires_at = Some(at.with_timezone(&Utc));
        }
        if self.kind == AuthType::Custom {
            self.fields = map
                .iter()
                .filter_map(|(k, v)| Some((k.clone(), Secret::new(v.as_str()?))))
                .collect();
        }
        Ok(())
    }

    /// Whether it has expired (or will within [`EXPIRY_MARGIN_SECS`]) at `now`.
    pub fn is_expired_at(&self, now: DateTime<Utc>) -> bool {
        self.expires_at
            .is_some_and(|at| at <= now + chrono::Duration::seconds(EXPIRY_MARGIN_SECS))
    }

    pub fn is_expired(&self) -> bool {
        self.is_expired_at(Utc::now())
    }

    /// Whether an expired credential can be renewed without the user.
    pub fn can_refresh(&self) -> bool {
        self.refresh_token.is_some() && self.oauth.is_some()
    }

    /// A custom field's value.
    pub fn field(&self, name: &str) -> Option<&Secret> {
        self.fields.iter().find(|(k, _)| k == name).map(|(_, v)| v)
    }

    /// The value of an `Authorization` header carrying it (`Bearer …`).
    pub fn bearer_header(&self) -> String {
        format!("Bearer {}", self.secret.expose())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn submitted_credentials_are_read_without_quoting_them() {
        let c = Credential::from_submitted(AuthType::ApiKey, "stripe", &json!("  sk_1  ")).unwrap();
        assert_eq!(c.secret.expose(), "sk_1");
        let c = Credential::from_submitted(
            AuthType::Bearer,
            "gh",
            &json!({"token": "t", "expiresIn": 60, "refreshToken": "r"}),
        )
        .unwrap();
        assert_eq!(c.secret.expose(), "t");
        assert!(c.expires_at.is_some() && !c.is_expired());
        assert!(!c.can_refresh(), "no client to refresh with");
        let err = Credential::from_submitted(AuthType::ApiKey, "x", &json!({"nope": "sk_secret"}))
            .unwrap_err()
            .to_string();
        assert!(!err.contains("sk_secret"), "{err}");
        assert!(Credential::from_submitted(AuthType::ApiKey, "x", &json!(7)).is_err());
        assert!(
            Credential::from_submitted(
                AuthType::ApiKey,
                "x",
                &json!({"apiKey": "k", "expiresIn": -1})
            )
            .is_err()
        );
        let custom =
            Credential::from_submitted(AuthType::Custom, "db", &json!({"user": "u", "pass": "p"}))
                .unwrap();
        assert_eq!(custom.field("pass").map(Secret::expose), Some("p"));
        assert!(!format!("{custom:?}").contains("\"p\""));
    }

    #[test]
    fn expiry_counts_a_margin() {
        let mut c = Credential::new("p", AuthType::Bearer, "t");
        assert!(!c.is_expired());
        c.expires_at = Some(Utc::now() + chrono::Duration::seconds(5));
        assert!(c.is_expired());
        c.expires_at = Some(Utc::now() + chrono::Duration::seconds(600));
        assert!(!c.is_expired());
    }
}
