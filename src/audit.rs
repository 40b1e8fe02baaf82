//! `ctxpack audit`: what the policy keeps out of every output, per file and
//! line, with each secret masked, so a user can check a vault before
//! pointing an agent at it.

use std::path::Path;

use rayon::prelude::*;
use serde::Serialize;

use crate::parse::{frontmatter, parse_note};
use crate::privacy::{Policy, comments, secrets};
use crate::vault::{MAX_FILE_BYTES, walk};

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub(crate) struct AuditReport {
    /// Notes the walk found.
    pub notes: usize,
    /// Notes the policy keeps out whole.
    pub private_notes: usize,
    pub redactions: usize,
    pub comments: usize,
    pub private_sections: usize,
    /// Every file with something kept out, sorted by path.
    pub files: Vec<FileAudit>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub(crate) struct FileAudit {
    pub path: String,
    /// Why the whole note is kept out, if it is.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub private: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub redactions: Vec<AuditedSecret>,
    /// Lines where a comment starts.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub comments: Vec<u32>,
    /// Private sections cut: the heading and its line.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub private_sections: Vec<AuditedSection>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub(crate) struct AuditedSecret {
    pub line: u32,
    pub kind: String,
    /// The secret's first characters (at most 4) and `…`.
    pub masked: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub(crate) struct AuditedSection {
    pub line: u32,
    pub heading: String,
}

/// Audits every note the walk of `root` (canonical) finds.
pub(crate) fn audit(root: &Path, policy: &Policy, hidden: &[String]) -> AuditReport {
    let walked = walk::walk(root, hidden);
    let notes: Vec<&walk::Found> = walked
        .files
        .iter()
        .filter(|f| f.rel_path != crate::vault::log::LOG_FILE && !walk::is_base(&f.rel_path))
        .collect();
    let mut files: Vec<FileAudit> = notes
        .par_iter()
        .filter_map(|found| {
            let (text, _) = walk::read_text(&found.read_path(root), MAX_FILE_BYTES).ok()?;
            let mut audited = audit_text(policy, &found.rel_path, &text);
            if let Some(target) = found
                .target
                .as_deref()
                .filter(|t| policy.is_private_path(t))
            {
                let file = audited.get_or_insert_with(|| FileAudit::new(&found.rel_path));
                file.private = Some(format!("a link to {target}, in a private folder"));
            }
            audited
        })
        .collect();
    // Bases files are shown as data when a note embeds one: their secrets
    // are redacted too.
    files.extend(
        walked
            .files
            .par_iter()
            .filter(|f| walk::is_base(&f.rel_path) && !policy.is_private_path(&f.rel_path))
            .filter_map(|found| {
                let (text, _) = walk::read_text(&found.read_path(root), MAX_FILE_BYTES).ok()?;
                let mut file = FileAudit::new(&found.rel_path);
                file.redactions = audited_secrets(policy, &text);
                (!file.redactions.is_empty()).then_some(file)
            })
            .collect::<Vec<_>>(),
    );
    files.sort_by(|a, b| a.path.cmp(&b.path));
    AuditReport {
        notes: notes.len(),
        private_notes: files.iter().filter(|f| f.private.is_some()).count(),
        redactions: files.iter().map(|f| f.redactions.len()).sum(),
        comments: files.iter().map(|f| f.comments.len()).sum(),
        private_sections: files.iter().map(|f| f.private_sections.len()).sum(),
        files,
    }
}

impl FileAudit {
    fn new(path: &str) -> FileAudit {
        FileAudit {
            path: path.to_string(),
            private: None,
            redactions: Vec::new(),
            comments: Vec::new(),
            private_sections: Vec::new(),
        }
    }
}

/// What `policy` keeps out of the file at `path`, or `None` when nothing.
pub(crate) fn audit_text(policy: &Policy, path: &str, raw: &str) -> Option<FileAudit> {
    // A canvas is audited as what the notes' reading makes of it: the
    // Markdown of its nodes, or private when it does not parse.
    let canvas_text;
    let mut card_reason = None;
    let raw = if crate::parse::canvas::is_canvas(path) && !policy.is_private_path(path) {
        match crate::parse::canvas::to_markdown(raw) {
            Ok(text) => {
                card_reason = policy.private_card_reason(raw);
                canvas_text = text;
                canvas_text.as_str()
            }
            Err(_) => {
                let mut file = FileAudit::new(path);
                file.private = Some(crate::privacy::UNREADABLE_CANVAS.into());
                return Some(file);
            }
        }
    } else {
        raw
    };
    let mut file = FileAudit::new(path);
    let (note, _) = parse_note(path, raw, None);
    // The same order as the policy applies: the path, then the frontmatter
    // as written (broken or not), then the note as parsed.
    file.private = if policy.is_private_path(path) {
        Some("in a private folder".into())
    } else {
        policy
            .frontmatter_reason(raw)
            .or_else(|| policy.private_reason(&note))
            .or_else(|| policy.flag_in_a_comment(raw))
            .or(card_reason)
    };
    let line_of = |text: &str, offset: usize| Lines::of(text).line(offset);
    // Secrets are looked for as the notes' reading does: once comments are
    // out (a secret split by one reads whole).
    file.redactions = audited_secrets(policy, &policy.strip_comments(raw));
    file.redactions.extend(decoded_field_secrets(policy, raw));
    if file.private.is_none() {
        let text = raw.strip_prefix('\u{feff}').unwrap_or(raw);
        let body = frontmatter::split(text).body;
        let body_line = line_of(text, text.len() - body.len()) - 1;
        let rules = &policy.file.strip;
        let body_lines = Lines::of(body);
        file.comments = comments::find(body, rules.obsidian_comments, rules.html_comments)
            .into_iter()
            .map(|range| body_line + body_lines.line(range.start))
            .collect();
        let note_lines = Lines::of(&note.body);
        file.private_sections = note
            .headings
            .iter()
            .filter(|heading| policy.is_private_heading(&heading.text))
            .map(|heading| AuditedSection {
                line: body_line + note_lines.line(heading.range.start),
                heading: heading.text.clone(),
            })
            .collect();
    }
    let empty = file.private.is_none()
        && file.redactions.is_empty()
        && file.comments.is_empty()
        && file.private_sections.is_empty();
    (!empty).then_some(file)
}

/// The secrets `policy` redacts in `raw`, as the notes' reading finds them
/// (through inline markup too), each with its line and masked.
fn audited_secrets(policy: &Policy, raw: &str) -> Vec<AuditedSecret> {
    let lines = Lines::of(raw);
    let line_of = |offset: usize| lines.line(offset);
    policy
        .findings_through_markup(raw)
        .into_iter()
        .map(|finding| AuditedSecret {
            line: line_of(finding.range.start),
            kind: finding.kind.to_string(),
            masked: secrets::mask(&raw[finding.range]),
        })
        .collect()
}

/// The secrets a frontmatter's double-quoted values hold once decoded
/// (`"ghp\u005f…"`) that its text does not show whole: the line of the
/// key, as the notes' reading redacts them in the values it reads.
fn decoded_field_secrets(policy: &Policy, raw: &str) -> Vec<AuditedSecret> {
    let text = raw.strip_prefix('\u{feff}').unwrap_or(raw);
    let Some(yaml) = frontmatter::split(text)
        .yaml
        .filter(|yaml| yaml.contains('\\'))
    else {
        return Vec::new();
    };
    let Ok(fields) = frontmatter::parse(yaml) else {
        return Vec::new();
    };
    fn strings<'v>(value: &'v yaml_serde::Value, out: &mut Vec<&'v str>) {
        match value {
            yaml_serde::Value::String(text) => out.push(text),
            yaml_serde::Value::Sequence(items) => items.iter().for_each(|item| strings(item, out)),
            yaml_serde::Value::Mapping(fields) => fields.values().for_each(|v| strings(v, out)),
            yaml_serde::Value::Tagged(tagged) => strings(&tagged.value, out),
            _ => {}
        }
    }
    // Each top-level key's line, read once (looking each key up in the
    // text was quadratic in a long frontmatter).
    let mut key_lines: std::collections::HashMap<&str, u32> = std::collections::HashMap::new();
    for (index, line) in yaml.lines().enumerate() {
        if let Some((key, _)) = line.split_once(':')
            && !key.starts_with([' ', '\t', '-', '#'])
        {
            key_lines
                .entry(key.trim().trim_matches(['"', '\'']))
                .or_insert(index as u32 + 2);
        }
    }
    // What the text shows whole is reported by the text's own scan.
    let seen: std::collections::HashSet<&str> = policy
        .findings_through_markup(text)
        .into_iter()
        .map(|finding| &text[finding.range])
        .collect();
    let mut found = Vec::new();
    for (key, value) in &fields {
        let key = key.as_str().unwrap_or("");
        let line = key_lines.get(key).copied().unwrap_or(2);
        let mut values = Vec::new();
        strings(value, &mut values);
        for value in values {
            let assigned = format!("{key}: {value}");
            for finding in policy.findings_through_markup(&assigned) {
                let secret = &assigned[finding.range];
                if !secret.is_empty() && !seen.contains(secret) {
                    found.push(AuditedSecret {
                        line,
                        kind: finding.kind.to_string(),
                        masked: secrets::mask(secret),
                    });
                }
            }
        }
    }
    found
}

/// The report as text: one line per finding.
pub(crate) fn render(report: &AuditReport) -> String {
    let mut out = String::new();
    for file in &report.files {
        if let Some(reason) = &file.private {
            out.push_str(&format!(
                "{}: private ({reason}); never read into any output\n",
                file.path
            ));
        }
        for secret in &file.redactions {
            out.push_str(&format!(
                "{}:{}: secret {} {} redacted\n",
                file.path, secret.line, secret.kind, secret.masked
            ));
        }
        for line in &file.comments {
            out.push_str(&format!("{}:{line}: comment left out\n", file.path));
        }
        for section in &file.private_sections {
            out.push_str(&format!(
                "{}:{}: private section '{}' cut\n",
                file.path, section.line, section.heading
            ));
        }
    }
    out.push_str(&format!(
        "{} files read (notes, canvases and the role files index.md and hot.md): {} private, {} \
         secrets redacted, {} comments and {} private sections left out\n",
        report.notes,
        report.private_notes,
        report.redactions,
        report.comments,
        report.private_sections
    ));
    out
}

/// Where a text's lines start, to number many offsets in it (counting the
/// line breaks before each one was quadratic in a note of many comments).
struct Lines(Vec<usize>);

impl Lines {
    fn of(text: &str) -> Lines {
        Lines(memchr::memchr_iter(b'\n', text.as_bytes()).collect())
    }

    /// The 1-based line of the byte at `offset`.
    fn line(&self, offset: usize) -> u32 {
        self.0.partition_point(|&newline| newline < offset) as u32 + 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_lists_what_is_kept_out_with_lines() {
        let policy = Policy::default();
        let raw = "---\ntitle: K\n---\n# K\n\nsee %%note to self%%\n\n## Private\n\ndiary\n";
        let audited = audit_text(&policy, "k.md", raw).unwrap();
        assert_eq!(audited.private, None);
        assert_eq!(audited.comments, [6]);
        assert_eq!(
            audited.private_sections,
            [AuditedSection {
                line: 8,
                heading: "Private".into()
            }]
        );
        let private = audit_text(&policy, "p.md", "---\nai: false\n---\nx").unwrap();
        assert_eq!(private.private.as_deref(), Some("frontmatter 'ai'"));
        assert_eq!(audit_text(&policy, "plain.md", "# Plain\n\ntext\n"), None);
    }
}
