//! What never leaves the machine: private notes, comments, private sections
//! and secrets. Every note's text passes through [`Policy::prepare`] right
//! after it is read, before it is parsed, indexed, embedded, counted or shown,
//! so nothing downstream ever holds what the policy hides.

pub mod comments;
pub mod policy;
pub mod secrets;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::note::Note;
use crate::parse::{frontmatter, parse_note};
pub use policy::{POLICY_FILE, Policy, PolicyError, PolicyFile};

/// The detector kinds that are personal data rather than secrets.
pub const PERSONAL_KINDS: &[&str] = &["email", "phone"];

/// One secret taken out of a note: where it was and what kind, never the
/// secret itself.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Redaction {
    /// 1-based line in the file.
    pub line: u32,
    pub kind: String,
}

/// A note's text as the policy lets it be seen.
#[derive(Clone, Debug)]
pub struct Prepared {
    /// The file's text with secrets replaced, comments and private sections
    /// cut.
    pub text: String,
    pub note: Note,
    pub problems: Vec<String>,
}

impl Policy {
    /// Applies the policy to the text of the file at `path`: `None` when the
    /// note is private.
    pub fn prepare(&self, path: &str, raw: &str, mtime: Option<DateTime<Utc>>) -> Option<Prepared> {
        if self.is_private_path(path) {
            return None;
        }
        // A canvas is read as the Markdown of its nodes, and from there on
        // as any note (so its text is redacted and stripped like one).
        let mut canvas_problem = None;
        let canvas_text;
        let raw = if crate::parse::canvas::is_canvas(path) {
            canvas_text = crate::parse::canvas::to_markdown(raw).unwrap_or_else(|problem| {
                canvas_problem = Some(problem);
                String::new()
            });
            canvas_text.as_str()
        } else {
            raw
        };
        let (text, redactions) = self.redact(raw);
        let text = self.strip_comments(&text);
        let (note, mut problems) = parse_note(path, &text, mtime);
        problems.extend(canvas_problem.clone());
        if self.is_private(&note) {
            return None;
        }
        let (text, mut note, problems) = match self.cut_private_sections(&text, &note) {
            Some(cut) => {
                let (cut_note, mut cut_problems) = parse_note(path, &cut, mtime);
                cut_problems.extend(canvas_problem);
                (cut, cut_note, cut_problems)
            }
            None => (text, note, problems),
        };
        note.redactions = redactions;
        Some(Prepared {
            text,
            note,
            problems,
        })
    }

    /// Every secret in `raw` replaced by its placeholder, and where each was.
    pub fn redact(&self, raw: &str) -> (String, Vec<Redaction>) {
        let findings = self.findings(raw);
        if findings.is_empty() {
            return (raw.to_string(), Vec::new());
        }
        let mut text = String::with_capacity(raw.len());
        let mut cursor = 0;
        let mut line = 1u32;
        let mut redactions = Vec::with_capacity(findings.len());
        for finding in &findings {
            line += raw[cursor..finding.range.start].matches('\n').count() as u32;
            text.push_str(&raw[cursor..finding.range.start]);
            text.push_str(&format!("[REDACTED:{}]", finding.kind));
            redactions.push(Redaction {
                line,
                kind: finding.kind.to_string(),
            });
            line += raw[finding.range.clone()].matches('\n').count() as u32;
            cursor = finding.range.end;
        }
        text.push_str(&raw[cursor..]);
        (text, redactions)
    }

    /// The secrets (and, when asked for, personal data) the policy redacts
    /// in `text`, in order.
    pub fn findings(&self, text: &str) -> Vec<secrets::Finding> {
        let rules = &self.file.redact;
        if !rules.secrets && !rules.personal_data {
            return Vec::new();
        }
        let options = secrets::DetectorOptions {
            personal_data: rules.personal_data,
        };
        let mut findings = secrets::find(text, &options);
        if !rules.secrets {
            findings.retain(|f| PERSONAL_KINDS.contains(&f.kind));
        }
        findings
    }

    /// The text with comments left out of its body (never its frontmatter).
    fn strip_comments(&self, text: &str) -> String {
        let rules = &self.file.strip;
        if !rules.obsidian_comments && !rules.html_comments {
            return text.to_string();
        }
        let body_start = body_offset(text);
        let body = comments::strip(
            &text[body_start..],
            rules.obsidian_comments,
            rules.html_comments,
        );
        let mut out = String::with_capacity(text.len());
        out.push_str(&text[..body_start]);
        out.push_str(&body);
        out
    }

    /// The text without the sections under private headings, or `None` when
    /// it has none.
    fn cut_private_sections(&self, text: &str, note: &Note) -> Option<String> {
        let cut: Vec<std::ops::Range<usize>> = note
            .headings
            .iter()
            .enumerate()
            .filter(|(_, heading)| self.is_private_heading(&heading.text))
            .map(|(index, heading)| {
                let end = note.headings[index + 1..]
                    .iter()
                    .find(|next| next.level <= heading.level)
                    .map_or(note.body.len(), |next| next.range.start);
                heading.range.start..end
            })
            .collect();
        if cut.is_empty() {
            return None;
        }
        let body_start = body_offset(text);
        let mut out = text[..body_start].to_string();
        let mut cursor = 0;
        for range in cut {
            if range.start < cursor {
                continue;
            }
            out.push_str(&note.body[cursor..range.start]);
            cursor = range.end;
        }
        out.push_str(&note.body[cursor..]);
        Some(out)
    }
}

/// Where the body starts in a note's text (after the BOM and frontmatter).
fn body_offset(text: &str) -> usize {
    let body = frontmatter::split(text.strip_prefix('\u{feff}').unwrap_or(text)).body;
    body.as_ptr() as usize - text.as_ptr() as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_note_comes_out_without_what_the_policy_hides() {
        let policy = Policy::default();
        let raw = "---\ntitle: T\n---\n# T\n\nvisible %%hidden%% text <!-- also hidden -->\n\n\
                   ## Private\n\nmy diary\n\n### Deeper\n\nstill private\n\n## Public\n\nshown\n";
        let prepared = policy.prepare("t.md", raw, None).unwrap();
        assert_eq!(
            prepared.text,
            "---\ntitle: T\n---\n# T\n\nvisible  text \n\n## Public\n\nshown\n"
        );
        assert_eq!(
            prepared.note.body,
            "# T\n\nvisible  text \n\n## Public\n\nshown\n"
        );
        assert!(
            policy
                .prepare("p.md", "---\nprivate: true\n---\nsecret", None)
                .is_none()
        );
    }

    #[test]
    fn redactions_say_the_line_and_kind() {
        let policy = Policy::default();
        let raw = "# Keys\n\nline two\nkey ghp_Q7wE9rT2yU4iO6pA8sD1fG3hJ5kL0zX9cV7b here\n";
        let prepared = policy.prepare("k.md", raw, None).unwrap();
        assert!(
            !prepared
                .text
                .contains("ghp_Q7wE9rT2yU4iO6pA8sD1fG3hJ5kL0zX9cV7b")
        );
        assert!(prepared.text.contains("[REDACTED:github_token]"));
        assert_eq!(
            prepared.note.redactions,
            [Redaction {
                line: 4,
                kind: "github_token".into()
            }]
        );
    }
}
