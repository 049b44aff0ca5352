//! Diagnostics and traces: the `RUST_LOG` log lines on stderr, and — only when asked for —
//! the turn's spans exported over OTLP/HTTP protobuf (`--otlp-endpoint`,
//! `OTEL_EXPORTER_OTLP_ENDPOINT`) or drawn as a waterfall after the run (`run --verbose`).
//!
//! Neither is installed unless asked for: without them the spans' callsites are disabled
//! (the log filter defaults to `warn`, spans are `INFO`) and cost a branch each.

use std::io::IsTerminal as _;
use std::time::Duration;

use anyhow::Context as _;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_http::{Bytes, HttpClient, HttpError, Request, Response};
use opentelemetry_otlp::{Protocol, WithExportConfig as _, WithHttpConfig as _};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing::{Level, Metadata};
use tracing_subscriber::Layer as _;
use tracing_subscriber::filter::FilterFn;
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;

use crate::waterfall::Waterfall;

/// What to install besides the log lines.
#[derive(Debug, Default)]
pub struct Options {
    /// OTLP/HTTP base URL (`http://collector:4318`); traces go to `<base>/v1/traces`.
    pub otlp_endpoint: Option<String>,
    /// Record the spans of this process for [`Telemetry::waterfall`].
    pub waterfall: bool,
    /// A command whose stderr a person reads beside the answer (`run`, `chat`, `resume`):
    /// log lines only when asked for (`-v`, `RUST_LOG`); a provider's retries are one dim
    /// status line each instead (see [`crate::status`]).
    pub interactive: bool,
    /// `-v`: log lines (warnings) on stderr even for an interactive command.
    pub verbose: bool,
}

/// The installed telemetry; [`Telemetry::shutdown`] sends what is still buffered.
pub struct Telemetry {
    provider: Option<SdkTracerProvider>,
    waterfall: Option<Waterfall>,
}

/// How long the exporter may take for one batch, and at exit for the last one.
const EXPORT_TIMEOUT: Duration = Duration::from_secs(10);

/// Only the runtime's own spans (not log events, not dependencies' spans) are traced.
fn runtime_spans(meta: &Metadata<'_>) -> bool {
    meta.is_span() && *meta.level() <= Level::INFO && meta.target().starts_with("looopy_")
}

/// Installs the global subscriber. Must run inside the tokio runtime that outlives the
/// export (the exporter sends its requests on it).
pub fn init(options: Options) -> anyhow::Result<Telemetry> {
    // Diagnostics go to stderr so stdout stays a clean event stream; RUST_LOG controls them.
    // An interactive command logs only when asked (`-v`, RUST_LOG), and colour codes are
    // written only to a terminal, never into a file or a pipe.
    let from_env = tracing_subscriber::EnvFilter::try_from_default_env().ok();
    let logs_on = !options.interactive || options.verbose || from_env.is_some();
    let filter = from_env.unwrap_or_else(|| tracing_subscriber::EnvFilter::new("warn"));
    let log = logs_on.then(|| {
        tracing_subscriber::fmt::layer()
            .with_writer(std::io::stderr)
            .with_ansi(std::io::stderr().is_terminal())
            .with_filter(filter)
    });
    let status = (!logs_on).then(crate::status::RetryStatus::layer);
    let provider = options
        .otlp_endpoint
        .as_deref()
        .filter(|url| !url.trim().is_empty())
        .map(otlp_provider)
        .transpose()?;
    let otel = provider.as_ref().map(|provider| {
        // No busy/idle timings and no OpenTelemetry context attached on every enter: a run's
        // span is entered at each poll of its task, and nothing inside reads the context.
        tracing_opentelemetry::layer()
            .with_tracer(provider.tracer("looopy"))
            .with_tracked_inactivity(false)
            .with_context_activation(false)
            .with_filter(FilterFn::new(runtime_spans))
    });
    let waterfall = options.waterfall.then(Waterfall::default);
    let recorder = waterfall
        .as_ref()
        .map(|w| w.layer().with_filter(FilterFn::new(runtime_spans)));
    tracing_subscriber::registry()
        .with(log)
        .with(status)
        .with(otel)
        .with(recorder)
        .try_init()
        .context("installing the tracing subscriber")?;
    Ok(Telemetry {
        provider,
        waterfall,
    })
}

impl Telemetry {
    /// The recorded spans, when `--verbose` asked for them.
    pub fn waterfall(&self) -> Option<&Waterfall> {
        self.waterfall.as_ref()
    }

    /// Sends the spans still buffered and stops the exporter. Call from outside the
    /// runtime's worker threads (the export runs on them while this waits).
    pub fn shutdown(self) {
        if let Some(provider) = self.provider {
            if let Err(error) = provider.shutdown_with_timeout(EXPORT_TIMEOUT) {
                eprintln!("looopy: exporting traces failed: {error}");
            }
        }
    }
}

/// `base` + `/v1/traces`, as the OTLP exporter specification says for the generic endpoint.
fn traces_url(base: &str) -> String {
    format!("{}/v1/traces", base.trim_end_matches('/'))
}

fn otlp_provider(base: &str) -> anyhow::Result<SdkTracerProvider> {
    let client = RuntimeClient {
        client: reqwest::Client::builder()
            .timeout(EXPORT_TIMEOUT)
            .build()
            .context("building the OTLP HTTP client")?,
        runtime: tokio::runtime::Handle::try_current()
            .context("the OTLP exporter needs the async runtime")?,
    };
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_http_client(client)
        .with_protocol(Protocol::HttpBinary)
        .with_endpoint(traces_url(base))
        .with_timeout(EXPORT_TIMEOUT)
        .build()
        .with_context(|| format!("the OTLP endpoint {base:?}"))?;
    Ok(SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_resource(Resource::builder().with_service_name("looopy").build())
        .build())
}

/// The workspace's reqwest client, driven on the CLI's tokio runtime: the SDK's batch
/// processor exports from a thread of its own with no runtime, so each request is spawned
/// onto the runtime and awaited from there.
#[derive(Debug, Clone)]
struct RuntimeClient {
    client: reqwest::Client,
    runtime: tokio::runtime::Handle,
}

#[async_trait::async_trait]
impl HttpClient for RuntimeClient {
    async fn send_bytes(&self, request: Request<Bytes>) -> Result<Response<Bytes>, HttpError> {
        let client = self.client.clone();
        let sent = self.runtime.spawn(async move {
            let (parts, body) = request.into_parts();
            let response = client
                .request(parts.method, parts.uri.to_string())
                .headers(parts.headers)
                .body(body)
                .send()
                .await?;
            let status = response.status();
            let headers = response.headers().clone();
            let body = response.bytes().await?;
            let mut out = Response::new(body);
            *out.status_mut() = status;
            *out.headers_mut() = headers;
            Ok::<_, reqwest::Error>(out)
        });
        Ok(sent.await??)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_generic_endpoint_gets_the_traces_path() {
        assert_eq!(
            traces_url("http://127.0.0.1:4318"),
            "http://127.0.0.1:4318/v1/traces"
        );
        assert_eq!(
            traces_url("http://collector:4318/"),
            "http://collector:4318/v1/traces"
        );
    }
}
