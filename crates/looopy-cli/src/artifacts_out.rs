//! Where `looopy artifacts --out DIR` puts each artifact: a safe, unique file name in
//! `DIR`, written under a hidden temporary name and renamed into place when complete, so a
//! failed or interrupted save never leaves a half file under the real name.

use std::collections::HashSet;
use std::fs::{File, OpenOptions};
use std::io;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use crate::artifacts_cmd::Entry;

/// Longest saved file name in bytes (file systems allow 255; room for a `-N` suffix).
const MAX_NAME_BYTES: usize = 200;

/// Creates `part` for writing, refusing to follow or reuse anything already there.
pub(crate) fn create_part(part: &Path) -> io::Result<File> {
    match std::fs::remove_file(part) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    OpenOptions::new().write(true).create_new(true).open(part)
}

/// The output directory of `--out`, and the names already given out in it.
pub(crate) struct OutDir {
    dir: PathBuf,
    taken: HashSet<String>,
}

impl OutDir {
    pub fn create(dir: &Path) -> Result<Self> {
        std::fs::create_dir_all(dir)
            .with_context(|| format!("creating the output directory {}", dir.display()))?;
        Ok(Self {
            dir: dir.to_path_buf(),
            taken: HashSet::new(),
        })
    }

    /// A file name for `entry`, unique among this run's (compared case-insensitively, for
    /// file systems that do): `poem.txt`, then `poem-2.txt`, `poem-3.txt`, …
    pub fn claim(&mut self, entry: &Entry) -> String {
        let base = file_name(entry.name.as_deref(), &entry.id, &entry.kind);
        let (stem, ext) = split_extension(&base);
        let mut candidate = base.clone();
        let mut n = 2;
        while !self.taken.insert(candidate.to_lowercase()) {
            candidate = format!("{stem}-{n}{ext}");
            n += 1;
        }
        candidate
    }

    /// Where `name` is written before it is complete (hidden, this process's own).
    pub fn part_path(&self, name: &str) -> PathBuf {
        self.dir
            .join(format!(".{name}.part-{}", std::process::id()))
    }

    /// Moves a finished part into place under `name` (replacing a file of that name; a
    /// symlink there is replaced, never followed).
    pub fn finish(&self, part: &Path, name: &str) -> Result<PathBuf> {
        let path = self.dir.join(name);
        if let Err(error) = std::fs::rename(part, &path) {
            let _ = std::fs::remove_file(part);
            return Err(anyhow::Error::new(error).context(format!("saving {}", path.display())));
        }
        Ok(path)
    }
}

/// A safe file name from an artifact name: its last path component only (so `../../x` is
/// `x` and `poems/poem.txt` is `poem.txt`), characters file systems refuse or shells trip
/// on replaced by `_`, at most [`MAX_NAME_BYTES`]; the artifact id when nothing is left.
/// Data gets `.json` and datasets `.jsonl` when the name has no extension.
pub(crate) fn file_name(name: Option<&str>, id: &str, kind: &str) -> String {
    let last = name.unwrap_or("").rsplit(['/', '\\']).next().unwrap_or("");
    let cleaned: String = last
        .chars()
        .map(|c| {
            if c.is_control() || matches!(c, '<' | '>' | ':' | '"' | '|' | '?' | '*') {
                '_'
            } else {
                c
            }
        })
        .collect();
    let cleaned = cleaned
        .trim_matches(|c: char| c.is_whitespace())
        .trim_end_matches('.');
    let mut base = if cleaned.is_empty() || cleaned.chars().all(|c| c == '.') {
        file_name_of_id(id)
    } else {
        cleaned.to_string()
    };
    if split_extension(&base).1.is_empty() {
        match kind {
            "data" => base.push_str(".json"),
            "dataset" => base.push_str(".jsonl"),
            _ => {}
        }
    }
    shorten(&base)
}

/// An artifact id as a file name (ids are `[A-Za-z0-9._-]`, but be sure).
fn file_name_of_id(id: &str) -> String {
    let safe: String = id
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if safe.is_empty() {
        "artifact".into()
    } else {
        safe
    }
}

/// `name` cut to [`MAX_NAME_BYTES`] on a character boundary, keeping a short extension.
fn shorten(name: &str) -> String {
    if name.len() <= MAX_NAME_BYTES {
        return name.to_string();
    }
    let (stem, ext) = split_extension(name);
    let ext = if ext.len() <= 16 { ext } else { "" };
    let mut cut = MAX_NAME_BYTES - ext.len();
    while !stem.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}{ext}", &stem[..cut])
}

/// `("poem", ".txt")`; a leading dot is not an extension (`.env` has none).
fn split_extension(name: &str) -> (&str, &str) {
    match name.rfind('.') {
        Some(i) if i > 0 => name.split_at(i),
        _ => (name, ""),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_names_cannot_leave_the_output_directory() {
        assert_eq!(file_name(Some("../../x"), "art-1", "file"), "x");
        assert_eq!(file_name(Some("/etc/passwd"), "art-1", "file"), "passwd");
        assert_eq!(
            file_name(Some("..\\..\\win.ini"), "art-1", "file"),
            "win.ini"
        );
        assert_eq!(
            file_name(Some("poems/poem.txt"), "art-1", "file"),
            "poem.txt"
        );
        assert_eq!(file_name(Some(".."), "art-1", "file"), "art-1");
        assert_eq!(file_name(Some("a/.."), "art-1", "file"), "art-1");
        assert_eq!(file_name(Some("dir/"), "art-1", "file"), "art-1");
        assert_eq!(file_name(None, "art-1", "file"), "art-1");
        assert_eq!(
            file_name(Some("a\nb:c?.txt"), "art-1", "file"),
            "a_b_c_.txt"
        );
        assert_eq!(file_name(Some(".env"), "art-1", "file"), ".env");
    }

    #[test]
    fn data_and_datasets_get_an_extension_when_they_have_none() {
        assert_eq!(file_name(Some("summary"), "a", "data"), "summary.json");
        assert_eq!(file_name(Some("summary.txt"), "a", "data"), "summary.txt");
        assert_eq!(file_name(Some("rows"), "a", "dataset"), "rows.jsonl");
        assert_eq!(file_name(None, "art-9", "dataset"), "art-9.jsonl");
        assert_eq!(file_name(Some("notes"), "a", "file"), "notes");
    }

    #[test]
    fn long_names_are_cut_on_a_character_boundary_keeping_the_extension() {
        let name = format!("{}.txt", "é".repeat(300));
        let short = file_name(Some(&name), "a", "file");
        assert!(short.len() <= MAX_NAME_BYTES, "{}", short.len());
        assert!(short.ends_with("é.txt"));
    }

    #[test]
    fn clashing_names_get_a_numbered_suffix() {
        let dir = tempfile::tempdir().unwrap();
        let mut out = OutDir::create(dir.path()).unwrap();
        let entry = |name: &str| Entry {
            id: "a".into(),
            name: Some(name.into()),
            kind: "file".into(),
            ..Entry::default()
        };
        assert_eq!(out.claim(&entry("x/poem.txt")), "poem.txt");
        assert_eq!(out.claim(&entry("y/poem.txt")), "poem-2.txt");
        assert_eq!(out.claim(&entry("POEM.txt")), "POEM-3.txt");
        assert_eq!(out.claim(&entry("poem-2.txt")), "poem-2-2.txt");
        assert_eq!(out.claim(&entry("README")), "README");
        assert_eq!(out.claim(&entry("README")), "README-2");
    }
}
