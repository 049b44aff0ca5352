//! One webhook POST: the HTTP client (no redirects, no proxy, timeouts, a resolver that
//! refuses non-public addresses) and [`post`], which sends one notification and reads at
//! most a capped response.

use std::net::SocketAddr;
use std::sync::Arc;

use futures::StreamExt;
use looopy_a2a::push::{
    NOTIFICATION_ID_HEADER, NOTIFICATION_TOKEN_HEADER, WebhookUrlError, is_forbidden_ip,
    resolve_public,
};
use looopy_store::PushConfigRecord;
use reqwest::dns::{Addrs, Name, Resolve, Resolving};

use super::PushOptions;

/// Why one POST failed. Messages never contain the URL's path or query, the token or the
/// credentials.
#[derive(Debug, thiserror::Error)]
pub(super) enum DeliveryError {
    /// The URL is not deliverable at all (malformed, a forbidden literal address): no
    /// retry helps.
    #[error("{0}")]
    Refused(#[from] WebhookUrlError),
    /// The webhook answered with a status other than 2xx (redirects included).
    #[error("webhook answered {0}")]
    Status(u16),
    /// Connecting, sending or reading failed (including a host that now resolves to a
    /// refused address, and timeouts).
    #[error("{0}")]
    Transport(String),
}

impl DeliveryError {
    /// Whether retrying cannot help.
    pub(super) fn is_permanent(&self) -> bool {
        matches!(self, Self::Refused(_))
    }
}

/// Resolves webhook hosts and refuses the lookup when any address is not public — at
/// connect time, so the address checked is the address used (no DNS-rebinding window).
struct GuardedResolver;

impl Resolve for GuardedResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let host = name.as_str().to_owned();
        Box::pin(async move {
            // The port is the connector's business; 0 only satisfies the lookup API.
            let addrs: Vec<SocketAddr> = resolve_public(&host, 0).await?;
            Ok(Box::new(addrs.into_iter()) as Addrs)
        })
    }
}

/// The client every worker shares.
pub(super) fn client(options: &PushOptions) -> reqwest::Result<reqwest::Client> {
    let mut builder = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .no_proxy()
        .timeout(options.request_timeout)
        .connect_timeout(options.connect_timeout)
        .user_agent(concat!("looopy/", env!("CARGO_PKG_VERSION"), " (A2A push)"));
    if !options.allow_private {
        builder = builder.dns_resolver(Arc::new(GuardedResolver));
    }
    builder.build()
}

/// `scheme://host:port` of a webhook, for logs (its path and query may carry secrets).
pub(super) fn display_target(url: &str) -> String {
    match looopy_a2a::push::url::parse_webhook_url(url) {
        Ok(t) => format!(
            "{}://{}:{}",
            t.uri.scheme_str().unwrap_or("http"),
            t.host,
            t.port
        ),
        Err(_) => "<invalid url>".to_owned(),
    }
}

/// POSTs one notification `body` to the config's webhook with its authentication, and
/// reads at most `max_response_bytes` of the answer.
pub(super) async fn post(
    client: &reqwest::Client,
    options: &PushOptions,
    config: &PushConfigRecord,
    content_type: &'static str,
    notification_id: &str,
    body: Vec<u8>,
) -> Result<(), DeliveryError> {
    let target = looopy_a2a::push::url::parse_webhook_url(&config.url)?;
    if !options.allow_private {
        // A literal address never reaches the resolver: check it here.
        if let Ok(ip) = target.host.parse::<std::net::IpAddr>() {
            if is_forbidden_ip(ip) {
                return Err(WebhookUrlError::Private {
                    host: target.host.clone(),
                    addr: ip,
                }
                .into());
            }
        }
    }
    let mut request = client
        .post(config.url.as_str())
        .header(reqwest::header::CONTENT_TYPE, content_type)
        .header(NOTIFICATION_ID_HEADER, notification_id)
        .body(body);
    if let Some(token) = &config.token {
        request = request.header(NOTIFICATION_TOKEN_HEADER, token.as_str());
    }
    if let Some(scheme) = &config.auth_scheme {
        match &config.credentials {
            Some(credentials) => {
                request = request.header(
                    reqwest::header::AUTHORIZATION,
                    format!("{scheme} {credentials}"),
                );
            }
            None => {
                tracing::debug!(
                    task_id = %config.task_id,
                    config_id = %config.config_id,
                    "push config names an authentication scheme without credentials; no Authorization header sent"
                );
            }
        }
    }
    let response = request
        .send()
        .await
        .map_err(|e| DeliveryError::Transport(describe(e)))?;
    let status = response.status();
    // Read (a bounded part of) the answer so the connection can be reused.
    let mut read = 0usize;
    let mut body = response.bytes_stream();
    while let Some(chunk) = body.next().await {
        match chunk {
            Ok(chunk) => {
                read += chunk.len();
                if read >= options.max_response_bytes {
                    break;
                }
            }
            Err(_) => break,
        }
    }
    if status.is_success() {
        Ok(())
    } else {
        Err(DeliveryError::Status(status.as_u16()))
    }
}

/// A transport error without its URL, and with its cause chain (a refused address, a
/// timeout) so the log says why.
fn describe(error: reqwest::Error) -> String {
    let kind = if error.is_timeout() {
        "timed out"
    } else if error.is_connect() {
        "could not connect"
    } else {
        "request failed"
    };
    let mut text = kind.to_owned();
    let error = error.without_url();
    let mut source = std::error::Error::source(&error);
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}
