//! One line per artifact, the same in `looopy run`/`chat`/`tail` and `looopy artifacts`:
//! `▣ report.md · 12.4 KB`, `▣ rows.jsonl · 3 rows · 1.2 KB`, and `· incomplete (why)` for
//! an artifact cut off by a cap. Plain text with ` · ` separators, so it greps and cuts.

use std::borrow::Cow;
use std::fmt;

/// The mark that starts every artifact line (easy to grep for).
pub const MARK: &str = "▣";

/// `bytes` for people: `512 B`, `12.4 KB`, `3.0 MB`, `1.2 GB` — decimal units (1 KB = 1000
/// bytes, as the SI prefix says; 1024-based sizes are written KiB elsewhere in Looopy), one
/// decimal from KB up. A value that would round to 1000 of a unit moves to the next one.
pub fn format_size(bytes: u64) -> String {
    const UNITS: [&str; 4] = ["KB", "MB", "GB", "TB"];
    if bytes < 1000 {
        return format!("{bytes} B");
    }
    let mut value = bytes as f64 / 1000.0;
    for (i, unit) in UNITS.iter().enumerate() {
        let rounded = (value * 10.0).round() / 10.0;
        if rounded < 1000.0 || i == UNITS.len() - 1 {
            return format!("{rounded:.1} {unit}");
        }
        value /= 1000.0;
    }
    // Unreachable: the last unit always returns.
    format!("{bytes} B")
}

/// An artifact name made safe to print: control characters (a newline, an escape sequence
/// that would repaint the terminal) are shown escaped instead of acting.
pub fn printable(name: &str) -> Cow<'_, str> {
    if !name.chars().any(char::is_control) {
        return Cow::Borrowed(name);
    }
    Cow::Owned(
        name.chars()
            .map(|c| {
                if c.is_control() {
                    c.escape_default().to_string()
                } else {
                    c.to_string()
                }
            })
            .collect(),
    )
}

/// What one line says about an artifact.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArtifactLine {
    pub name: String,
    /// Bytes as downloaded (a file's bytes, a record's JSON, a dataset's JSON Lines).
    pub size: u64,
    /// Rows, for datasets.
    pub rows: Option<u64>,
    /// Cut off before it was complete; the reason when one is known.
    pub incomplete: Option<Option<String>>,
}

impl fmt::Display for ArtifactLine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{MARK} {}", printable(&self.name))?;
        if let Some(rows) = self.rows {
            let s = if rows == 1 { "" } else { "s" };
            write!(f, " · {rows} row{s}")?;
        }
        write!(f, " · {}", format_size(self.size))?;
        match &self.incomplete {
            None => Ok(()),
            Some(None) => f.write_str(" · incomplete"),
            Some(Some(why)) => write!(f, " · incomplete ({})", printable(why)),
        }
    }
}

/// Whether artifact metadata marks the artifact as cut off, and why: `incomplete: true` (a
/// cap was hit) with its `error`, as the agent's writers record it.
pub fn incomplete_of(
    metadata: &serde_json::Map<String, serde_json::Value>,
) -> Option<Option<String>> {
    let cut = metadata
        .get("incomplete")
        .and_then(serde_json::Value::as_bool)
        == Some(true);
    cut.then(|| {
        metadata
            .get("error")
            .and_then(serde_json::Value::as_str)
            .map(str::to_string)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_use_decimal_units_with_one_decimal() {
        let cases = [
            (0, "0 B"),
            (1, "1 B"),
            (999, "999 B"),
            (1000, "1.0 KB"),
            (1024, "1.0 KB"),
            (1050, "1.1 KB"),
            (12_400, "12.4 KB"),
            (65_536, "65.5 KB"),
            (999_949, "999.9 KB"),
            // Would be "1000.0 KB": the next unit instead.
            (999_950, "1.0 MB"),
            (1_000_000, "1.0 MB"),
            (104_857_600, "104.9 MB"),
            (999_999_999, "1.0 GB"),
            (1_500_000_000, "1.5 GB"),
            (2_000_000_000_000, "2.0 TB"),
            (u64::MAX, "18446744.1 TB"),
        ];
        for (bytes, want) in cases {
            assert_eq!(format_size(bytes), want, "{bytes} bytes");
        }
    }

    #[test]
    fn lines_name_size_rows_and_incompleteness() {
        let mut line = ArtifactLine {
            name: "report.md".into(),
            size: 12_400,
            rows: None,
            incomplete: None,
        };
        assert_eq!(line.to_string(), "▣ report.md · 12.4 KB");
        line.rows = Some(3);
        line.name = "rows.jsonl".into();
        line.size = 1_200;
        assert_eq!(line.to_string(), "▣ rows.jsonl · 3 rows · 1.2 KB");
        line.rows = Some(1);
        line.incomplete = Some(None);
        assert_eq!(
            line.to_string(),
            "▣ rows.jsonl · 1 row · 1.2 KB · incomplete"
        );
        line.incomplete = Some(Some("too large".into()));
        assert!(line.to_string().ends_with(" · incomplete (too large)"));
    }

    #[test]
    fn control_characters_in_names_are_shown_not_obeyed() {
        let line = ArtifactLine {
            name: "a\nb\x1b[2Jc".into(),
            size: 1,
            rows: None,
            incomplete: None,
        };
        let text = line.to_string();
        assert!(!text.contains('\n') && !text.contains('\x1b'), "{text:?}");
        assert_eq!(text, "▣ a\\nb\\u{1b}[2Jc · 1 B");
        assert_eq!(printable("plain"), Cow::Borrowed("plain"));
    }

    #[test]
    fn incompleteness_comes_from_the_metadata() {
        let meta = |v: serde_json::Value| v.as_object().cloned().unwrap();
        assert_eq!(incomplete_of(&meta(serde_json::json!({"size": 3}))), None);
        assert_eq!(
            incomplete_of(&meta(serde_json::json!({"incomplete": true}))),
            Some(None)
        );
        assert_eq!(
            incomplete_of(&meta(
                serde_json::json!({"incomplete": true, "error": "cap"})
            )),
            Some(Some("cap".into()))
        );
    }
}
