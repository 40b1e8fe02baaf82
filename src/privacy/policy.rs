//! The vault's privacy policy: which notes are private (never read into any
//! output), which parts of a note are cut (comments, private sections), and
//! whether secrets are redacted. It lives in `.ctxpack.yaml` at the vault
//! root, which ctxpack reads and never writes; a file that does not parse is
//! an error, never "no policy".

use std::collections::BTreeMap;
use std::path::Path;

use ignore::gitignore::{Gitignore, GitignoreBuilder};
use serde::{Deserialize, Serialize};

use crate::note::Note;

/// The policy file, at the vault root.
pub const POLICY_FILE: &str = ".ctxpack.yaml";
const MAX_POLICY_BYTES: u64 = 256 * 1024;

/// A policy file that cannot be read or does not parse: the run stops,
/// since going on would mean going on without the protection asked for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PolicyError(pub String);

impl std::fmt::Display for PolicyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for PolicyError {}

/// The policy as written in `.ctxpack.yaml`; every key optional, unknown
/// keys refused (a typo must not turn protection off).
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct PolicyFile {
    pub private: PrivateRules,
    pub strip: StripRules,
    pub redact: RedactRules,
}

#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct PrivateRules {
    /// Frontmatter keys and the values that make a note private.
    pub fields: BTreeMap<String, Vec<yaml_serde::Value>>,
    /// Tags (nested ones included) that make a note private.
    pub tags: Vec<String>,
    /// Folders or files (gitignore patterns, relative to the vault root).
    pub folders: Vec<String>,
    /// Headings whose sections are cut from every note.
    pub headings: Vec<String>,
}

#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct StripRules {
    /// Obsidian comments, `%%…%%`.
    pub obsidian_comments: bool,
    /// HTML comments, `<!-- … -->`.
    pub html_comments: bool,
}

#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct RedactRules {
    /// API keys, tokens, private keys, passwords in URLs and assignments.
    pub secrets: bool,
    /// E-mail addresses and phone numbers.
    pub personal_data: bool,
}

impl Default for PrivateRules {
    fn default() -> Self {
        let truthy = |value: yaml_serde::Value| vec![value];
        PrivateRules {
            fields: BTreeMap::from([
                ("private".to_string(), truthy(yaml_serde::Value::Bool(true))),
                ("visibility".to_string(), truthy("private".into())),
                ("ai".to_string(), truthy(yaml_serde::Value::Bool(false))),
            ]),
            tags: vec!["private".to_string()],
            folders: Vec::new(),
            headings: vec!["Private".to_string()],
        }
    }
}

impl Default for StripRules {
    fn default() -> Self {
        StripRules {
            obsidian_comments: true,
            html_comments: true,
        }
    }
}

impl Default for RedactRules {
    fn default() -> Self {
        RedactRules {
            secrets: true,
            personal_data: false,
        }
    }
}

/// A policy ready to apply.
#[derive(Clone, Debug)]
pub struct Policy {
    pub file: PolicyFile,
    folders: Option<Gitignore>,
    /// Folded names of the private headings.
    headings: Vec<String>,
    /// Folded private tags.
    tags: Vec<String>,
    fingerprint: String,
}

impl Default for Policy {
    fn default() -> Self {
        Policy::from_file(PolicyFile::default()).expect("the default policy is valid")
    }
}

impl Policy {
    /// The policy of the vault at `root` (canonical): its `.ctxpack.yaml`,
    /// or the defaults when there is none.
    pub fn load(root: &Path) -> Result<Policy, PolicyError> {
        Policy::load_text(root).map_err(PolicyError)
    }

    fn load_text(root: &Path) -> Result<Policy, String> {
        let path = root.join(POLICY_FILE);
        if std::fs::symlink_metadata(&path).is_err() {
            return Ok(Policy::default());
        }
        let real = path
            .canonicalize()
            .map_err(|err| format!("cannot read {}: {err}", path.display()))?;
        if !real.starts_with(root) {
            return Err(format!(
                "{} leads outside the vault; a policy must be the vault's own file",
                path.display()
            ));
        }
        let (text, _) = crate::safe_fs::read_text(&real, MAX_POLICY_BYTES)
            .map_err(|err| format!("cannot read {}: {err}", path.display()))?;
        Policy::parse(&text).map_err(|err| format!("{}: {err}", path.display()))
    }

    /// Parses a policy file's text.
    pub fn parse(text: &str) -> Result<Policy, String> {
        let file: PolicyFile = if text.trim().is_empty() {
            PolicyFile::default()
        } else {
            yaml_serde::from_str(text).map_err(|err| format!("not a valid policy: {err}"))?
        };
        Policy::from_file(file)
    }

    pub fn from_file(file: PolicyFile) -> Result<Policy, String> {
        let folders = if file.private.folders.is_empty() {
            None
        } else {
            let mut builder = GitignoreBuilder::new("/");
            for pattern in &file.private.folders {
                builder
                    .add_line(None, pattern)
                    .map_err(|err| format!("private folder pattern '{pattern}': {err}"))?;
            }
            Some(
                builder
                    .build()
                    .map_err(|err| format!("private folder patterns: {err}"))?,
            )
        };
        let headings = file
            .private
            .headings
            .iter()
            .map(|h| crate::text::fold(h))
            .collect();
        let tags = file
            .private
            .tags
            .iter()
            .map(|t| t.trim_start_matches('#').to_lowercase())
            .collect();
        let canonical = serde_json::to_string(&file).unwrap_or_default();
        let versioned = format!("{canonical}\n{}", super::secrets::DETECTORS_VERSION);
        let fingerprint = blake3::hash(versioned.as_bytes()).to_hex()[..16].to_string();
        Ok(Policy {
            file,
            folders,
            headings,
            tags,
            fingerprint,
        })
    }

    /// A digest of everything that changes what a note's text becomes:
    /// an index built under another policy is rebuilt.
    pub fn fingerprint(&self) -> &str {
        &self.fingerprint
    }

    /// Whether the file at `rel_path` lies in a private folder.
    pub fn is_private_path(&self, rel_path: &str) -> bool {
        self.folders.as_ref().is_some_and(|folders| {
            folders
                .matched_path_or_any_parents(Path::new("/").join(rel_path), false)
                .is_ignore()
        })
    }

    /// Whether `key` is a frontmatter field the policy reads to decide
    /// privacy (`private`, `visibility`, `ai`, …): never shown as a
    /// property.
    pub fn is_policy_field(&self, key: &str) -> bool {
        self.file
            .private
            .fields
            .keys()
            .any(|field| field.trim().eq_ignore_ascii_case(key.trim()))
    }

    /// Whether `note` is private by its path, frontmatter or tags.
    pub fn is_private(&self, note: &Note) -> bool {
        self.private_reason(note).is_some()
    }

    /// Why `note` is private (a private folder, a frontmatter field or a
    /// tag), or `None`.
    pub fn private_reason(&self, note: &Note) -> Option<String> {
        if self.is_private_path(&note.meta.path) {
            return Some("in a private folder".into());
        }
        for (key, values) in &self.file.private.fields {
            for (k, v) in &note.frontmatter {
                if k.as_str()
                    .is_some_and(|k| k.trim().eq_ignore_ascii_case(key.trim()))
                    && values.iter().any(|wanted| same_value(v, wanted))
                {
                    return Some(format!("frontmatter '{key}'"));
                }
            }
        }
        note.meta.tags.iter().find_map(|tag| {
            let folded = tag.to_lowercase();
            self.tags
                .iter()
                .any(|private| {
                    folded == *private
                        || folded
                            .strip_prefix(private.as_str())
                            .is_some_and(|rest| rest.starts_with('/'))
                })
                .then(|| format!("tag #{tag}"))
        })
    }

    /// Whether a heading's text names a private section.
    pub fn is_private_heading(&self, heading: &str) -> bool {
        !self.headings.is_empty() && self.headings.contains(&crate::text::fold(heading))
    }
}

/// Frontmatter values compare loosely: `true`, `"true"` and `yes` alike;
/// strings ignoring case.
fn same_value(found: &yaml_serde::Value, wanted: &yaml_serde::Value) -> bool {
    fn as_text(value: &yaml_serde::Value) -> Option<String> {
        match value {
            yaml_serde::Value::Bool(b) => Some(b.to_string()),
            yaml_serde::Value::String(s) => Some(match s.trim().to_lowercase().as_str() {
                "yes" | "on" => "true".to_string(),
                "no" | "off" => "false".to_string(),
                other => other.to_string(),
            }),
            yaml_serde::Value::Number(n) => Some(n.to_string()),
            _ => None,
        }
    }
    match (as_text(found), as_text(wanted)) {
        (Some(found), Some(wanted)) => found == wanted,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn note(path: &str, text: &str) -> Note {
        crate::parse::parse_note(path, text, None).0
    }

    #[test]
    fn private_by_field_tag_or_folder() {
        let policy =
            Policy::parse("private:\n  folders: [\"journal/\", \"clients/**/*.md\"]\n").unwrap();
        assert!(policy.is_private(&note("a.md", "---\nprivate: true\n---\nx")));
        assert!(policy.is_private(&note("a.md", "---\nPrivate: \"yes\"\n---\nx")));
        assert!(policy.is_private(&note("a.md", "---\nvisibility: Private\n---\nx")));
        assert!(policy.is_private(&note("a.md", "---\nai: false\n---\nx")));
        assert!(policy.is_private(&note("a.md", "---\ntags: [private/journal]\n---\nx")));
        assert!(policy.is_private(&note("a.md", "body with #private tag")));
        assert!(policy.is_private(&note("journal/2026-01-01.md", "x")));
        assert!(policy.is_private(&note("clients/acme/notes.md", "x")));
        assert!(!policy.is_private(&note("a.md", "---\nprivate: false\nai: true\n---\nx")));
        assert!(!policy.is_private(&note("a.md", "#privateer is not #private-ish")));
        assert!(!policy.is_private(&note("journalism/a.md", "x")));
    }

    #[test]
    fn a_policy_that_does_not_parse_is_an_error() {
        assert!(
            Policy::parse("private:\n  tagz: [x]\n")
                .unwrap_err()
                .contains("tagz")
        );
        assert!(Policy::parse("private: [").is_err());
        assert!(Policy::parse("redact:\n  secrets: maybe\n").is_err());
        assert_eq!(Policy::parse("").unwrap().file, PolicyFile::default());
        assert_ne!(
            Policy::parse("redact:\n  personal_data: true\n")
                .unwrap()
                .fingerprint(),
            Policy::default().fingerprint()
        );
    }
}
