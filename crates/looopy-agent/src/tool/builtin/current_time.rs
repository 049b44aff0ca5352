//! `current_time`: the current time as RFC 3339, in UTC or a fixed offset.

use chrono::{FixedOffset, SecondsFormat, Utc};
use schemars::JsonSchema;
use serde::Deserialize;

use crate::tool::{Tool, ToolContext, ToolFailure};

/// Arguments of `current_time`.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
pub struct CurrentTimeArgs {
    /// "UTC" (the default) or a fixed offset such as "+02:00".
    #[serde(default)]
    pub timezone: Option<String>,
}

/// Tells the model what time it is.
#[derive(Debug, Clone, Copy, Default)]
pub struct CurrentTime;

impl Tool for CurrentTime {
    const NAME: &'static str = "current_time";
    type Args = CurrentTimeArgs;
    type Output = String;
    type Error = ToolFailure;

    fn description(&self) -> String {
        "Returns the current date and time in RFC 3339 format (UTC unless a fixed offset \
         like +02:00 is given)."
            .into()
    }

    async fn call(&self, args: CurrentTimeArgs, _ctx: ToolContext) -> Result<String, ToolFailure> {
        let now = Utc::now();
        match parse_zone(args.timezone.as_deref())? {
            None => Ok(now.to_rfc3339_opts(SecondsFormat::Secs, true)),
            Some(offset) => Ok(now
                .with_timezone(&offset)
                .to_rfc3339_opts(SecondsFormat::Secs, true)),
        }
    }
}

/// `None` means UTC; `Some` is a fixed offset. Named zones other than UTC are refused
/// rather than guessed.
fn parse_zone(zone: Option<&str>) -> Result<Option<FixedOffset>, ToolFailure> {
    let zone = zone.map(str::trim).unwrap_or("");
    if zone.is_empty()
        || ["utc", "z", "gmt", "etc/utc", "etc/gmt"].contains(&zone.to_ascii_lowercase().as_str())
    {
        return Ok(None);
    }
    let unsupported = || {
        ToolFailure::failed(format!(
            "unsupported timezone {zone:?}: use \"UTC\" or a fixed offset like \"+02:00\""
        ))
    };
    let (sign, rest) = match zone.as_bytes().first() {
        Some(b'+') => (1, &zone[1..]),
        Some(b'-') => (-1, &zone[1..]),
        _ => return Err(unsupported()),
    };
    if rest.is_empty() || !rest.bytes().all(|b| b.is_ascii_digit() || b == b':') {
        return Err(unsupported());
    }
    let (hours, minutes) = rest.split_once(':').unwrap_or((rest, "0"));
    let hours: i32 = hours.parse().map_err(|_| unsupported())?;
    let minutes: i32 = minutes.parse().map_err(|_| unsupported())?;
    if !(0..=14).contains(&hours) || !(0..60).contains(&minutes) {
        return Err(unsupported());
    }
    FixedOffset::east_opt(sign * (hours * 3600 + minutes * 60))
        .map(Some)
        .ok_or_else(unsupported)
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn run(zone: Option<&str>) -> Result<String, ToolFailure> {
        let args = CurrentTimeArgs {
            timezone: zone.map(String::from),
        };
        CurrentTime.call(args, ToolContext::new("t")).await
    }

    #[tokio::test]
    async fn utc_by_default_and_by_name() {
        for zone in [None, Some("UTC"), Some("z"), Some("Etc/UTC")] {
            let text = run(zone).await.unwrap();
            assert!(text.ends_with('Z'), "{text}");
            assert!(chrono::DateTime::parse_from_rfc3339(&text).is_ok());
        }
    }

    #[tokio::test]
    async fn fixed_offsets_and_refusals() {
        let text = run(Some("+05:30")).await.unwrap();
        assert!(text.ends_with("+05:30"), "{text}");
        assert!(run(Some("-08")).await.unwrap().ends_with("-08:00"));
        for bad in ["Europe/Paris", "+25:00", "+1:99", "++1"] {
            assert!(run(Some(bad)).await.is_err(), "{bad}");
        }
    }
}
