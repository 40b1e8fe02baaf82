//! What never leaves the machine: private notes, comments, private sections
//! and secrets. Every note's text passes through [`Policy::prepare`] right
//! after it is read, before it is parsed, indexed, embedded, counted or shown,
//! so nothing downstream ever holds what the policy hides.

pub(crate) mod comments;
pub(crate) mod policy;
pub(crate) mod secrets;

use chrono::{DateTime, Utc};

use crate::note::Note;
pub(crate) use crate::note::Redaction;
use crate::parse::{frontmatter, parse_note_with_fields};
use crate::text::INVISIBLE;
pub(super) use crate::text::is_invisible;
pub use policy::Policy;
pub(crate) use policy::{LogMode, POLICY_FILE, PolicyError};

/// The diagnostic of a note kept out because its frontmatter cannot be
/// read: it may say the note is private, so the note is treated as such.
pub(crate) const UNREADABLE_NOTE: &str = "the frontmatter cannot be read (it expands past the YAML bound), so the note is treated as private and left out";
/// Why a canvas that does not parse is left out: what it says cannot be
/// read, so whether it is private cannot be told either.
pub(crate) const UNREADABLE_CANVAS: &str = "the canvas cannot be read whole (not JSON Canvas, or past 10,000 nodes or edges), so it is treated as private and left out";

/// The detector kinds that are personal data rather than secrets.
pub(crate) const PERSONAL_KINDS: &[&str] = &["email", "phone"];

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
    /// Names the note a daily when Obsidian's daily-notes settings say so
    /// (a format other than the file name's leading `YYYY-MM-DD`), dated
    /// by its name when nothing in it gives a date.
    fn date_daily(&self, note: &mut Note) {
        if note.meta.daily.is_some() {
            return;
        }
        let Some(date) = self.obsidian().daily_date(&note.meta.path) else {
            return;
        };
        if matches!(
            note.meta.updated_source,
            crate::note::UpdatedSource::FileMtime | crate::note::UpdatedSource::Unknown
        ) && let Some(at) = crate::parse::parse_datetime(&date)
        {
            note.meta.updated = Some(at.timestamp());
            note.meta.updated_source = crate::note::UpdatedSource::Created;
        }
        note.meta.daily = Some(date);
    }

    /// Applies the policy to the text of the file at `path`: `None` when the
    /// note is private.
    pub fn prepare(&self, path: &str, raw: &str, mtime: Option<DateTime<Utc>>) -> Option<Prepared> {
        if self.is_private_path(path) {
            return None;
        }
        // A canvas is read as the Markdown of its nodes, and from there on
        // as any note (so its text is redacted and stripped like one).
        // One that does not parse is private (see [`Policy::unreadable`]).
        let canvas_text;
        let raw = if crate::parse::canvas::is_canvas(path) {
            canvas_text = crate::parse::canvas::to_markdown(raw).ok()?;
            if self.private_card_reason(raw).is_some() {
                return None;
            }
            canvas_text.as_str()
        } else {
            raw
        };
        // Whether the note is private is decided from what its author
        // wrote, before redaction or anything else can change it.
        let (reason, fields) = self.read_frontmatter(raw);
        if reason.is_some() {
            return None;
        }
        let keyed_secrets = fields
            .as_ref()
            .map(|fields| self.secrets_under_keys(fields))
            .unwrap_or_default();
        // The policy reads a frontmatter behind invisible characters; the
        // note's own reading does not take it as one (its lines stay body
        // text, redacted as such), so neither are its fields the note's.
        let fields = fields.filter(|_| frontmatter_yaml(raw).is_some());
        // Comments go before secrets are looked for, so a secret split by a
        // comment is seen whole and no secret can swallow a comment's opener.
        let stripped = self.strip_comments(raw);
        // A secret written in a comment leaves with it, not where the text
        // repeats it (`%% password: X %%` … `the box uses X`).
        let in_comments = if stripped.len() != raw.len() {
            secret_values(raw, &self.findings_through_markup(raw))
        } else {
            Vec::new()
        };
        let (text, redactions) = self.redact_knowing(&stripped, &in_comments);
        // Comments are cut from the body only: unless a secret was redacted
        // in it, the frontmatter read above is the note's, not read again.
        // When one was, the redacted YAML is read; if the placeholder broke
        // it, the fields read above stand, their secrets redacted.
        let fields = match (frontmatter_yaml(&text), frontmatter_yaml(raw)) {
            (redacted, original) if redacted == original => fields,
            (Some(redacted), original) => match frontmatter::parse(redacted) {
                Ok(parsed) => Some(parsed),
                Err(_) => {
                    fields.map(|fields| self.redacted_fields(&fields, original.unwrap_or("")))
                }
            },
            (None, _) => None,
        };
        // A double-quoted YAML value is decoded (`\u005f`, `\x67`, a
        // `\` line break): a secret written so is whole only once read,
        // so each value is redacted as read, as well as the text.
        let fields = match frontmatter_yaml(&text) {
            Some(yaml) if yaml.contains('\\') => {
                fields.map(|fields| self.redacted_fields(&fields, ""))
            }
            _ => fields,
        };
        let (text, fields) = match fields {
            Some(fields) => {
                let (text, fields) = self.redacted_structured_values(text, fields);
                (text, Some(fields))
            }
            None => (text, None),
        };
        // A frontmatter that does not parse cannot be read as YAML: under a
        // key that names a secret, a block, a list, a flow collection or an
        // alias is redacted whole, line by line (fail closed).
        let (text, redactions) = match fields {
            None => redacted_unparsed_frontmatter(text, redactions),
            Some(_) => (text, redactions),
        };
        let (text, fields, redactions) = redacted_copies(text, fields, redactions, &keyed_secrets);
        let parse = |text: &str| parse_note_with_fields(path, text, mtime, fields.clone());
        let (note, problems) = parse(&text);
        if self.is_private(&note)
            || self.has_a_tag_a_comment_ends(raw)
            || self.flag_in_a_comment(raw).is_some()
        {
            return None;
        }
        let (text, mut note, problems) = match self.cut_private_sections(&text, &note) {
            Some(cut) => {
                let (cut_note, cut_problems) = parse(&cut);
                (cut, cut_note, cut_problems)
            }
            None => (text, note, problems),
        };
        note.redactions = redactions;
        // A title taken from the file name is shown as the note's name in
        // every list; a secret typed into a file name is redacted there as
        // in the text (the path itself stays the note's address).
        if note.meta.title_source == crate::note::TitleSource::FileName {
            // …and one the text holds, named again in the file name.
            let known = if note.redactions.is_empty() && in_comments.is_empty() {
                Vec::new()
            } else {
                let mut known =
                    secret_values(&stripped, &self.findings_knowing(&stripped, &in_comments));
                known.extend(in_comments.iter().cloned());
                known
            };
            let (title, found) = self.redact_knowing(&note.meta.title, &known);
            if !found.is_empty() {
                note.meta.title = title;
            }
        }
        self.date_daily(&mut note);
        Some(Prepared {
            text,
            note,
            problems,
        })
    }

    /// Why a canvas is private through one of its cards read by itself, as
    /// Obsidian shows it: joined, an unclosed fence or comment in one card
    /// would swallow the next card's `#private`.
    pub(crate) fn private_card_reason(&self, canvas_json: &str) -> Option<String> {
        crate::parse::canvas::text_cards(canvas_json)
            .iter()
            .any(|card| self.prepare("card.md", card, None).is_none())
            .then(|| "a card of the canvas is private by itself".to_string())
    }

    /// Values the text's scan cannot see as `key: value` on one line (the
    /// items of `passwords:` written as a list, a `password: |` block, a
    /// mapping under a key), each read as `key: value` and, where that
    /// holds a secret, redacted in the fields and in the frontmatter's
    /// text alike: a search snippet, `get_note` and `--where` read those.
    fn redacted_structured_values(
        &self,
        mut text: String,
        fields: yaml_serde::Mapping,
    ) -> (String, yaml_serde::Mapping) {
        use yaml_serde::Value;
        // Only under a key that may name a secret, at any depth: a token
        // with a prefix of its own is found in the text whatever its key,
        // and `tags: [raft]` need not be read again.
        fn names_a_secret(key: &Value, value: &Value) -> bool {
            let structured = match value {
                Value::Sequence(_) | Value::Mapping(_) | Value::Tagged(_) => true,
                Value::String(text) => text.contains('\n'),
                _ => false,
            };
            let nested = match value {
                Value::Mapping(pairs) => pairs.iter().any(|(k, v)| names_a_secret(k, v)),
                Value::Sequence(items) => {
                    items.iter().any(|item| names_a_secret(&Value::Null, item))
                }
                _ => false,
            };
            structured && key_names_a_secret(key.as_str().unwrap_or("")) || nested
        }
        if !fields.iter().any(|(key, value)| names_a_secret(key, value)) {
            return (text, fields);
        }
        let mut replaced: Vec<(String, String)> = Vec::new();
        let fields: yaml_serde::Mapping = fields
            .into_iter()
            .map(|(key, value)| {
                if !names_a_secret(&key, &value) {
                    return (key, value);
                }
                let name = key.as_str().unwrap_or("").to_string();
                let redacted = self.redact_value(&name, value.clone(), &[]);
                collect_replaced(&value, &redacted, &mut replaced);
                (key, redacted)
            })
            .collect();
        if !replaced.is_empty() {
            let end = frontmatter_yaml(&text).map_or(0, |yaml| {
                yaml.as_ptr() as usize - text.as_ptr() as usize + yaml.len()
            });
            let mut head = text[..end].to_string();
            // Longest first: a value inside another is replaced inside it.
            replaced.sort_by_key(|(original, _)| std::cmp::Reverse(original.len()));
            for (original, redacted) in &replaced {
                for line in original.lines().map(str::trim).filter(|l| !l.is_empty()) {
                    if let Some(placeholder) = redacted
                        .lines()
                        .map(str::trim)
                        .find(|l| l.contains("[REDACTED"))
                    {
                        head = head.replace(line, placeholder);
                    }
                }
            }
            text.replace_range(..end, &head);
        }
        (text, fields)
    }

    /// The secrets the frontmatter's values hold under a key that names
    /// one (`password: X`, at any depth), as YAML reads them: through an
    /// alias (`password: *p`) the text shows only the alias's name.
    fn secrets_under_keys(&self, fields: &yaml_serde::Mapping) -> Vec<(String, &'static str)> {
        use yaml_serde::Value;
        fn walk(
            policy: &Policy,
            key: &str,
            value: &Value,
            depth: usize,
            out: &mut Vec<(String, &'static str)>,
        ) {
            if depth > 16 || out.len() >= MAX_REPEATED_VALUES {
                return;
            }
            match value {
                Value::String(_) | Value::Number(_) => {
                    if !key_names_a_secret(key) {
                        return;
                    }
                    let text = match value {
                        Value::String(text) => text.clone(),
                        Value::Number(number) => number.to_string(),
                        _ => return,
                    };
                    let line = format!("{key}: {}", text.trim());
                    for finding in policy.findings_through_markup(&line) {
                        let secret = &line[finding.range];
                        if repeatable_secret(secret) && !out.iter().any(|(seen, _)| seen == secret)
                        {
                            out.push((secret.to_string(), finding.kind));
                        }
                    }
                }
                Value::Sequence(items) => items
                    .iter()
                    .for_each(|item| walk(policy, key, item, depth + 1, out)),
                Value::Mapping(pairs) => pairs
                    .iter()
                    .for_each(|(k, v)| walk(policy, inner_key(key, k.as_str()), v, depth + 1, out)),
                Value::Tagged(tagged) => walk(policy, key, &tagged.value, depth + 1, out),
                _ => {}
            }
        }
        let mut out = Vec::new();
        for (key, value) in fields {
            walk(self, key.as_str().unwrap_or(""), value, 0, &mut out);
        }
        out
    }

    /// The fields of a frontmatter that parsed before redaction, each value
    /// redacted as the line `key: value` would be, and every secret found in
    /// the frontmatter's text (`yaml`) replaced wherever a value holds it: a
    /// note keeps its fields when a placeholder breaks the YAML (`aws_key:
    /// [REDACTED:…] (prod)`), and no secret the text lost stays in them.
    fn redacted_fields(&self, fields: &yaml_serde::Mapping, yaml: &str) -> yaml_serde::Mapping {
        let secrets: Vec<(&str, &str)> = self
            .findings_through_markup(yaml)
            .into_iter()
            .map(|finding| (&yaml[finding.range], finding.kind))
            .filter(|(secret, _)| !secret.is_empty())
            .collect();
        fields
            .iter()
            .map(|(key, value)| {
                let name = key.as_str().unwrap_or("").to_string();
                (
                    key.clone(),
                    self.redact_value(&name, value.clone(), &secrets),
                )
            })
            .collect()
    }

    fn redact_value(
        &self,
        key: &str,
        value: yaml_serde::Value,
        secrets: &[(&str, &str)],
    ) -> yaml_serde::Value {
        use yaml_serde::Value;
        match value {
            // A number can be a PIN or a numeric password: kept as a number
            // unless it reads as a secret.
            Value::Number(number) => {
                let text = number.to_string();
                match self.redact_value(key, Value::String(text.clone()), secrets) {
                    Value::String(redacted) if redacted != text => Value::String(redacted),
                    _ => Value::Number(number),
                }
            }
            Value::String(text) => {
                let line = format!("{key}: {text}");
                let (redacted, _) = self.redact(&line);
                let mut value = match redacted.strip_prefix(&format!("{key}: ")) {
                    Some(value) => value.to_string(),
                    None if redacted == line => text,
                    None => "[REDACTED]".to_string(),
                };
                for (secret, kind) in secrets {
                    if value.contains(secret) {
                        value = value.replace(secret, &format!("[REDACTED:{kind}]"));
                    }
                }
                Value::String(value)
            }
            Value::Sequence(items) => Value::Sequence(
                items
                    .into_iter()
                    .map(|item| self.redact_value(key, item, secrets))
                    .collect(),
            ),
            Value::Mapping(fields) => Value::Mapping(
                fields
                    .into_iter()
                    .map(|(k, v)| {
                        let name = inner_key(key, k.as_str()).to_string();
                        (k, self.redact_value(&name, v, secrets))
                    })
                    .collect(),
            ),
            Value::Tagged(mut tagged) => {
                tagged.value = self.redact_value(key, tagged.value, secrets);
                Value::Tagged(tagged)
            }
            other => other,
        }
    }

    /// Every secret in `raw` replaced by its placeholder, and where each was.
    pub fn redact(&self, raw: &str) -> (String, Vec<Redaction>) {
        self.redact_knowing(raw, &[])
    }

    /// [`redact`](Self::redact), with `known` secrets looked for as repeats
    /// too (see [`findings_knowing`](Self::findings_knowing)).
    fn redact_knowing(
        &self,
        raw: &str,
        known: &[(String, &'static str)],
    ) -> (String, Vec<Redaction>) {
        let findings = self.findings_knowing(raw, known);
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

    /// `text` with every secret the policy redacts replaced, or `None` when
    /// it has none: the last check on what is printed (a pack in any
    /// style, a topic), whatever transformations came before.
    pub fn redact_printed(&self, text: &str) -> Option<String> {
        let findings = self.findings_through_markup(text);
        if findings.is_empty() {
            return None;
        }
        let mut out = String::with_capacity(text.len());
        let mut cursor = 0;
        for finding in findings {
            out.push_str(&text[cursor..finding.range.start]);
            out.push_str(&format!("[REDACTED:{}]", finding.kind));
            cursor = finding.range.end;
        }
        out.push_str(&text[cursor..]);
        Some(out)
    }

    /// The findings in `text`, and those that only appear once inline HTML
    /// tags are taken out (`ghp_ab<wbr>cd…`, `<span></span>` inside a
    /// token) and Markdown's escapes read (`ghp\_…`, which Obsidian shows
    /// as `ghp_…`), each covering the tags and backslashes inside it: a
    /// reader, and a pack that renders HTML as its text, sees the token
    /// whole. A secret found once is found wherever its value is written
    /// again (see [`with_repeats`]).
    pub fn findings_through_markup(&self, text: &str) -> Vec<secrets::Finding> {
        self.findings_knowing(text, &[])
    }

    /// [`findings_through_markup`](Self::findings_through_markup), with
    /// `known` secrets (found where the text no longer shows them: a
    /// comment left out) looked for as repeats too.
    fn findings_knowing(
        &self,
        text: &str,
        known: &[(String, &'static str)],
    ) -> Vec<secrets::Finding> {
        let findings = self.findings(text);
        let Some(view) = MarkupView::new(text) else {
            return with_repeats(text, findings, known);
        };
        // Found whole only once the markup is read (`Xq7<wbr>vL`,
        // `Xq7vL&#8203;m29`): the whole covers what the text's own scan
        // found of it.
        let in_view = self.findings(&view.text);
        let whole = in_view.iter().map(|finding| secrets::Finding {
            range: view.original(finding.range.clone()),
            kind: finding.kind,
        });
        let findings = union_of(findings, whole.collect());
        let findings = with_repeats(text, findings, known);
        // Repeats the markup splits (`again Xq7vL<span></span>m29…`):
        // each distinct value once, at most as many as the text's repeats.
        let mut values: Vec<(&str, &'static str)> = Vec::new();
        let found = findings.iter().map(|f| (&text[f.range.clone()], f.kind));
        let seen = in_view
            .iter()
            .map(|f| (&view.text[f.range.clone()], f.kind));
        let known_values = known.iter().map(|(value, kind)| (value.as_str(), *kind));
        for (value, kind) in found.chain(seen).chain(known_values) {
            if repeatable_secret(value) && !values.iter().any(|(other, _)| *other == value) {
                values.push((value, kind));
                if values.len() == MAX_REPEATED_VALUES {
                    break;
                }
            }
        }
        let mut repeats = Vec::new();
        for (value, kind) in values {
            for (at, _) in view.text.match_indices(value) {
                repeats.push(secrets::Finding {
                    range: view.original(at..at + value.len()),
                    kind,
                });
            }
        }
        union_of(findings, repeats)
    }

    /// The text with comments left out of its body (never its frontmatter).
    pub fn strip_comments(&self, text: &str) -> String {
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

    /// Whether a private tag is ended by a comment (`#private%%x%%-draft`):
    /// with the comment gone the words join into another tag, so the
    /// tags are read once more with a space in its place.
    fn has_a_tag_a_comment_ends(&self, raw: &str) -> bool {
        let rules = &self.file.strip;
        if !raw.contains("%%") && !raw.contains("<!--") {
            return false;
        }
        let body_start = body_offset(raw);
        comments::with_tags_ended(
            &raw[body_start..],
            rules.obsidian_comments,
            rules.html_comments,
        )
        .is_some_and(|spaced| {
            let (note, _) = parse_note_with_fields("x.md", &spaced, None, None);
            note.meta.tags.iter().any(|tag| self.is_private_tag(tag))
        })
    }

    /// Whether a Dataview flag written inside a comment (`%%private::
    /// true%%`, `<!-- ai:: false -->`) makes the note private: Dataview
    /// reads fields there, so the policy does too (fail closed), though
    /// the comment itself is never printed. A flag in a code block is an
    /// example, not the note's.
    pub(crate) fn flag_in_a_comment(&self, raw: &str) -> Option<String> {
        let rules = &self.file.strip;
        if !raw.contains("::") || !raw.contains("%%") && !raw.contains("<!--") {
            return None;
        }
        let body = &raw[body_offset(raw)..];
        let mut inside = String::new();
        for range in comments::find(body, rules.obsidian_comments, rules.html_comments) {
            let comment = &body[range];
            let comment = comment
                .strip_prefix("%%")
                .or_else(|| comment.strip_prefix("<!--"))
                .unwrap_or(comment);
            let comment = comment
                .strip_suffix("%%")
                .or_else(|| comment.strip_suffix("-->"))
                .unwrap_or(comment);
            inside.push_str(comment);
            inside.push('\n');
        }
        crate::parse::reader::inline_fields(&inside, &[])
            .into_iter()
            .find_map(|(key, value)| {
                let mut field = yaml_serde::Mapping::new();
                field.insert(key.into(), value.into());
                self.fields_reason(&field)
            })
            .map(|reason| format!("{reason}, written in a comment"))
    }

    /// The text without the sections under private headings, or `None` when
    /// it has none.
    fn cut_private_sections(&self, text: &str, note: &Note) -> Option<String> {
        // Markdown headings and HTML ones (`<h2>Private</h2>`) alike.
        // Each heading, and whether it may end a private section: only an
        // ATX heading at the start of a line (or an HTML one) does. A
        // heading inside a quote, list, callout or footnote, or a line that
        // a `---` under it makes a heading, is part of the section (fail
        // closed: a quoted mail or a rule must not end it).
        // A `#` line inside display math (`$$`) is math, not a heading.
        let code: Vec<std::ops::Range<usize>> = note
            .blocks
            .iter()
            .filter(|b| b.kind == crate::parse::markdown::BlockKind::Code)
            .map(|b| b.range.clone())
            .collect();
        let math = display_math(&note.body, &code);
        // In order and apart: the first range not behind `at` is the only
        // one that can hold it.
        let in_math = |at: usize| {
            let next = math.partition_point(|range| range.end <= at);
            math.get(next).is_some_and(|range| range.contains(&at))
        };
        let mut headings: Vec<(u8, &str, std::ops::Range<usize>, bool)> = note
            .headings
            .iter()
            .map(|h| {
                let closes = starts_a_line(&note.body, h.range.start)
                    && note.body[h.range.start..].starts_with('#')
                    && !in_math(h.range.start);
                (h.level, h.text.as_str(), h.range.clone(), closes)
            })
            .collect();
        for block in &note.blocks {
            if block.kind != crate::parse::markdown::BlockKind::Html {
                continue;
            }
            // Every heading of the block, each from its tag (one block
            // runs on to a blank line: `<h2>Private</h2>` then `<p>…</p>`).
            let html = &note.body[block.range.clone()];
            for (offset, level, text) in html_headings(html) {
                let start = block.range.start + offset;
                headings.push((level, text, start..block.range.end, true));
            }
        }
        headings.sort_by_key(|(_, _, range, _)| range.start);
        // Where each heading's section ends: the next closing heading of
        // its level or above, found in one pass from the end (per level,
        // the nearest such heading seen), not by a scan from each heading.
        let mut section_end = vec![note.body.len(); headings.len()];
        let mut next_at_most = [note.body.len(); 7];
        for (index, (level, _, range, closes)) in headings.iter().enumerate().rev() {
            let level = usize::from(*level).clamp(1, 6);
            section_end[index] = next_at_most[level];
            if *closes {
                for end in &mut next_at_most[level..] {
                    *end = range.start;
                }
            }
        }
        let cut: Vec<std::ops::Range<usize>> = headings
            .iter()
            .enumerate()
            .filter(|(_, (_, text, _, _))| self.is_private_heading(text))
            .map(|(index, (_, _, range, _))| range.start..section_end[index])
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

/// The byte ranges of display math blocks: from a line starting with `$$`
/// to the next line holding `$$` (or the end: unclosed, the rest is math,
/// which for a private section is the closed side). Lines inside `code`
/// blocks neither open nor close one.
fn display_math(body: &str, code: &[std::ops::Range<usize>]) -> Vec<std::ops::Range<usize>> {
    let mut blocks = Vec::new();
    if !body.contains("$$") {
        return blocks;
    }
    let mut open: Option<usize> = None;
    let mut at = 0;
    // Lines come in order, so the code ranges are walked once (sorted by
    // start, the first one not yet behind the line is the only one that
    // can hold it): checking each line against every range was quadratic.
    let mut code = code.to_vec();
    code.sort_by_key(|range| range.start);
    let mut next_code = 0;
    for line in body.split_inclusive('\n') {
        let trimmed = line.trim_start();
        while next_code < code.len() && code[next_code].end <= at {
            next_code += 1;
        }
        if code.get(next_code).is_some_and(|range| range.contains(&at)) {
            at += line.len();
            continue;
        }
        match open {
            None => {
                if let Some(rest) = trimmed.strip_prefix("$$")
                    && !rest.contains("$$")
                {
                    open = Some(at);
                }
            }
            Some(start) => {
                if line.contains("$$") {
                    blocks.push(start..at + line.len());
                    open = None;
                }
            }
        }
        at += line.len();
    }
    if let Some(start) = open {
        blocks.push(start..body.len());
    }
    blocks
}

/// Whether `at` is the first byte of a line of `text`.
fn starts_a_line(text: &str, at: usize) -> bool {
    at == 0 || text.as_bytes().get(at - 1) == Some(&b'\n')
}

/// Each heading element of an HTML block (`<h2>Private</h2>`, `<h3
/// id="x">Private</h3>`): where its tag starts, its level and its text.
fn html_headings(block: &str) -> Vec<(usize, u8, &str)> {
    let lower = block.to_ascii_lowercase();
    let mut found = Vec::new();
    let mut from = 0;
    while let Some(at) = lower[from..].find("<h").map(|offset| from + offset) {
        from = at + 2;
        let Some(level) = lower[from..]
            .bytes()
            .next()
            .filter(|b| (b'1'..=b'6').contains(b))
            .map(|b| b - b'0')
        else {
            continue;
        };
        // `<h2>` or `<h2 id=…>`, not `<hr>` or `<header>`.
        if !lower[from + 1..].starts_with(['>', ' ', '\t', '\n']) {
            continue;
        }
        let Some(open_end) = lower[from..].find('>').map(|offset| from + offset + 1) else {
            break;
        };
        // The heading's own closing tag; unclosed, its text runs to the
        // block's end (read as the heading, failing closed).
        let close = lower[open_end..]
            .find(&format!("</h{level}>"))
            .map_or(block.len(), |offset| open_end + offset);
        found.push((at, level, block[open_end..close].trim()));
        from = close.max(open_end);
    }
    found
}

/// An invisible character, or what may be a character reference
/// (`&#95;`, `&shy;`): where a token may hide from the detectors.
static HIDING: std::sync::LazyLock<Option<regex::Regex>> = std::sync::LazyLock::new(|| {
    let class: String = INVISIBLE
        .iter()
        .map(|&(first, last)| format!("\\x{{{:x}}}-\\x{{{:x}}}", first as u32, last as u32))
        .collect();
    regex::Regex::new(&format!("[{class}]|&[#A-Za-z0-9]{{1,32}};")).ok()
});

/// Whether `text` has an invisible character or a character reference.
fn hides_characters(text: &str) -> bool {
    // Most text is ASCII without `&`: two fast scans say so.
    if text.is_ascii() && memchr::memchr(b'&', text.as_bytes()).is_none() {
        return false;
    }
    match HIDING.as_ref() {
        Some(pattern) => pattern.find_iter(text).any(|found| {
            !found.as_str().starts_with('&') || reference_at(text, found.start()).is_some()
        }),
        None => text.contains(is_invisible) || text.contains('&'),
    }
}

/// The character reference at `at` (`&#95;`, `&#x5F;`, `&lowbar;`): its
/// length and what it shows.
pub(super) fn reference_at(text: &str, at: usize) -> Option<(usize, String)> {
    let rest = text.get(at..)?.strip_prefix('&')?;
    let name_len = rest
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '#'))
        .filter(|&len| len > 0 && len <= 32 && rest[len..].starts_with(';'))?;
    let reference = &text[at..at + name_len + 2];
    let shown: String = pulldown_cmark::Parser::new(reference)
        .filter_map(|event| match event {
            pulldown_cmark::Event::Text(text) => Some(text.into_string()),
            _ => None,
        })
        .collect();
    (shown != reference).then_some((reference.len(), shown))
}

/// A text with its inline HTML tags, escapes, character references,
/// invisible characters and the inline marks inside a word taken out, and
/// where each of its bytes came from.
struct MarkupView {
    text: String,
    /// For each byte of `text`, its offset in the original…
    origin: Vec<usize>,
    /// …and where what it stands for ends there.
    origin_end: Vec<usize>,
}

/// Whether `text` holds a full-width Latin letter (`ｐａｓｓ`, U+FF21–FF3A,
/// U+FF41–FF5A): typed so, a key reads as ASCII to a reader. Full-width
/// punctuation alone (`：`, `，`, common in Chinese) is no reason to read
/// the text again.
fn has_full_width_letter(bytes: &[u8]) -> bool {
    memchr::memchr_iter(0xEF, bytes).any(|at| {
        matches!(
            (bytes.get(at + 1), bytes.get(at + 2)),
            (Some(0xBC), Some(0xA1..=0xBA)) | (Some(0xBD), Some(0x81..=0x9A))
        )
    })
}

/// The ASCII character a full-width form stands for (`ａ` → `a`, `：` →
/// `:`, the ideographic space → a space).
fn full_width_ascii(c: char) -> Option<char> {
    match c {
        '\u{FF01}'..='\u{FF5E}' => char::from_u32(c as u32 - 0xFEE0),
        '\u{3000}' => Some(' '),
        _ => None,
    }
}

impl MarkupView {
    /// `None` when no tag (`<` then a letter or `/`, up to `>` on its line)
    /// joins two runs of text: taking tags out then changes no word, and
    /// the text is not scanned a second time.
    fn new(original: &str) -> Option<MarkupView> {
        let bytes = original.as_bytes();
        // The length of the tag starting at `at`, if one does.
        let tag_at = |at: usize| -> Option<usize> {
            if bytes[at] != b'<'
                || !bytes
                    .get(at + 1)
                    .is_some_and(|b| b.is_ascii_alphabetic() || *b == b'/')
            {
                return None;
            }
            original[at + 1..]
                .find(['>', '\n', '<'].as_slice())
                .filter(|&end| bytes[at + 1 + end] == b'>')
                .map(|end| end + 2)
        };
        // A backslash escaping punctuation (`\_`), read as the punctuation.
        let escape_at = |at: usize| {
            bytes[at] == b'\\' && bytes.get(at + 1).is_some_and(u8::is_ascii_punctuation)
        };
        // The length of a run of inline marks (`**`, `*`, `==`, `~~`, a
        // backtick) at `at` between two word characters, as in
        // `ghp_abc**def**`: the reading view shows one unbroken token. A
        // lone `=` is an assignment, not a mark.
        let is_word = |b: u8| b.is_ascii_alphanumeric() || b == b'_' || b == b'-';
        let is_mark = |b: u8| matches!(b, b'*' | b'=' | b'~' | b'`');
        let marks_at = |at: usize| -> Option<usize> {
            if !is_mark(bytes[at]) || at == 0 || !is_word(bytes[at - 1]) {
                return None;
            }
            let len = bytes[at..].iter().take_while(|&&b| is_mark(b)).count();
            (&bytes[at..at + len] != b"=" && bytes.get(at + len).is_some_and(|&b| is_word(b)))
                .then_some(len)
        };
        let full_width = has_full_width_letter(bytes);
        let joins = hides_characters(original)
            || full_width
            // A tag touching text on either side: it may join two runs
            // (`ghp_ab<wbr>cd`) or wrap a value (`password: <b>X</b>`,
            // which reads `password: X`).
            || memchr::memchr_iter(b'<', bytes).any(|at| {
                tag_at(at).is_some_and(|len| {
                    (at > 0 && !bytes[at - 1].is_ascii_whitespace())
                        || bytes
                            .get(at + len)
                            .is_some_and(|b| !b.is_ascii_whitespace())
                })
            })
            || memchr::memchr_iter(b'\\', bytes)
                .any(|at| escape_at(at) && at > 0 && !bytes[at - 1].is_ascii_whitespace())
            || memchr::memchr3_iter(b'*', b'~', b'`', bytes)
                .chain(memchr::memchr_iter(b'=', bytes))
                .any(|at| marks_at(at).is_some());
        if !joins {
            return None;
        }
        let mut text = String::with_capacity(original.len());
        let mut origin = Vec::with_capacity(original.len());
        let mut origin_end = Vec::with_capacity(original.len());
        let mut at = 0;
        while at < bytes.len() {
            if let Some(len) = tag_at(at) {
                at += len;
                continue;
            }
            if escape_at(at) {
                at += 1;
                text.push(char::from(bytes[at]));
                origin.push(at);
                origin_end.push(at + 1);
                at += 1;
                continue;
            }
            if let Some(len) = marks_at(at) {
                at += len;
                continue;
            }
            if let Some((len, shown)) = reference_at(original, at) {
                // Shown as what it shows (nothing, for an invisible
                // character), which stands for the whole reference.
                let shown: String = shown.chars().filter(|c| !is_invisible(*c)).collect();
                if !shown.is_empty() {
                    text.push_str(&shown);
                    origin.resize(text.len(), at);
                    origin_end.resize(text.len(), at + len);
                }
                at += len;
                continue;
            }
            let c = original[at..].chars().next().expect("a char boundary");
            let len = c.len_utf8();
            if is_invisible(c) {
                at += len;
                continue;
            }
            if let Some(ascii) = full_width.then(|| full_width_ascii(c)).flatten() {
                text.push(ascii);
                origin.push(at);
                origin_end.push(at + len);
                at += len;
                continue;
            }
            text.push_str(&original[at..at + len]);
            origin.extend(at..at + len);
            origin_end.extend(at + 1..at + len + 1);
            at += len;
        }
        Some(MarkupView {
            text,
            origin,
            origin_end,
        })
    }

    /// The original range of `range` in the view (tags, invisible
    /// characters, references and full-width forms inside it included).
    fn original(&self, range: std::ops::Range<usize>) -> std::ops::Range<usize> {
        self.origin[range.start]..self.origin_end[range.end - 1]
    }
}

/// Words in a key that may name a secret (lower case), besides the other
/// languages' words for a password ([`secrets::FOREIGN_PASSWORD_WORDS`]):
/// its value is read as `key: value` wherever the YAML puts it.
const SECRET_KEY_WORDS: &[&str] = &[
    "pass",
    "pw",
    "secret",
    "token",
    "key",
    "credential",
    "auth",
    "salt",
    "pin",
    "密码",
    "密碼",
    "口令",
    "密钥",
    "密鑰",
];

/// Whether a frontmatter key may name a secret (see [`SECRET_KEY_WORDS`]).
fn key_names_a_secret(key: &str) -> bool {
    let lower = key.to_lowercase();
    SECRET_KEY_WORDS
        .iter()
        .chain(secrets::FOREIGN_PASSWORD_WORDS.iter())
        .any(|word| lower.contains(word))
}

/// Whether a key read from a frontmatter that does not parse names a
/// secret: narrower than [`key_names_a_secret`] (`keywords` or `author`
/// hold a word of it but name nothing secret), since all its value goes.
fn unparsed_key_names_a_secret(key: &str) -> bool {
    let lower = key.trim().to_lowercase();
    [
        "pass",
        "pw",
        "secret",
        "token",
        "credential",
        "密码",
        "密碼",
        "口令",
        "密钥",
        "密鑰",
    ]
    .iter()
    .chain(secrets::FOREIGN_PASSWORD_WORDS.iter())
    .any(|word| lower.contains(word))
        || ["key", "auth", "pin", "salt"]
            .iter()
            .any(|word| lower == *word || lower.ends_with(&format!("_{word}")))
}

/// The text with the structured values of a frontmatter that does not
/// parse redacted under keys that name a secret (see the call).
fn redacted_unparsed_frontmatter(
    text: String,
    mut redactions: Vec<Redaction>,
) -> (String, Vec<Redaction>) {
    let Some(yaml) = frontmatter_yaml(&text) else {
        return (text, redactions);
    };
    let start = yaml.as_ptr() as usize - text.as_ptr() as usize;
    let end = start + yaml.len();
    let first_line = text[..start].matches('\n').count() as u32 + 1;
    // Anchors whose value an alias under a secret's key takes (`password: *p`).
    let aliased: Vec<&str> = yaml
        .lines()
        .filter_map(|line| line.trim().split_once(':'))
        .filter(|(key, _)| unparsed_key_names_a_secret(key.trim_start_matches("- ")))
        .filter_map(|(_, value)| value.trim().strip_prefix('*'))
        .filter(|name| !name.is_empty())
        .collect();
    let mut out = String::with_capacity(text.len());
    out.push_str(&text[..start]);
    // Inside a secret key's block: the key's indent and kind.
    let mut block: Option<(usize, &'static str)> = None;
    for (number, line) in yaml.split_inclusive('\n').enumerate() {
        let indent = line.len() - line.trim_start_matches([' ', '\t']).len();
        let content = line.trim();
        let newline = if line.ends_with('\n') { "\n" } else { "" };
        let mut redact = |kind: &'static str, kept: &str, out: &mut String| {
            out.push_str(kept);
            out.push_str(&format!("[REDACTED:{kind}]{newline}"));
            redactions.push(Redaction {
                line: first_line + number as u32,
                kind: kind.to_string(),
            });
        };
        if let Some((key_indent, kind)) = block {
            let inside = indent > key_indent || (indent == key_indent && content.starts_with('-'));
            if content.is_empty() || content.starts_with('#') {
                out.push_str(line);
                continue;
            }
            if inside {
                if !content.starts_with("[REDACTED") {
                    redact(kind, &line[..indent], &mut out);
                } else {
                    out.push_str(line);
                }
                continue;
            }
            block = None;
        }
        let Some((key, value)) = content.split_once(':') else {
            out.push_str(line);
            continue;
        };
        let key = key.trim_start_matches("- ").trim();
        let value = value.trim();
        let anchored = value
            .strip_prefix('&')
            .and_then(|rest| rest.split_whitespace().next())
            .is_some_and(|name| aliased.contains(&name));
        if !unparsed_key_names_a_secret(key) && !anchored {
            out.push_str(line);
            continue;
        }
        let kind = if ["pass", "pw"]
            .iter()
            .any(|w| key.to_lowercase().contains(w))
            || secrets::FOREIGN_PASSWORD_WORDS
                .iter()
                .any(|w| key.to_lowercase().contains(w))
        {
            "password_assignment"
        } else {
            "secret_assignment"
        };
        if value.is_empty() || value.starts_with(['|', '>']) {
            block = Some((indent, kind));
            out.push_str(line);
        } else if anchored
            || value.starts_with(['[', '{', '*', '&', '!'])
                && !(value.starts_with("[REDACTED:") && value.find(']') == Some(value.len() - 1))
        {
            let kept = &line[..line.find(':').map_or(0, |colon| colon + 1)];
            redact(kind, &format!("{kept} "), &mut out);
        } else {
            out.push_str(line);
        }
    }
    out.push_str(&text[end..]);
    (out, redactions)
}

/// The key a value nested under `outer` is read with: its own, unless only
/// the outer one names a secret (`password:` then `prod: X` is a password).
fn inner_key<'k>(outer: &'k str, own: Option<&'k str>) -> &'k str {
    match own {
        Some(own) if key_names_a_secret(own) || !key_names_a_secret(outer) => own,
        _ => outer,
    }
}

/// The shortest secret value looked for again wherever it is repeated: a
/// shorter one (`1234`, a PIN) is common text elsewhere in a note.
const MIN_REPEATED_SECRET: usize = 6;
/// The longest: a key block is found by its own markers, not repeated.
const MAX_REPEATED_SECRET: usize = 512;
/// How many distinct values one text's repeats are looked for: each is a
/// pass over the text.
const MAX_REPEATED_VALUES: usize = 64;

/// Whether `value`, found as a secret, is looked for again elsewhere: one
/// line of 6 to 512 bytes, and at 6 or 7 bytes not only letters (`secret`
/// or `letmein` as a password would take the word out of the note's prose).
fn repeatable_secret(value: &str) -> bool {
    let long_enough = value.len() >= 8
        || (value.len() >= MIN_REPEATED_SECRET && !value.chars().all(char::is_alphabetic));
    long_enough
        && value.len() <= MAX_REPEATED_SECRET
        && !value.contains('\n')
        && !value.trim().is_empty()
        && !value.starts_with("[REDACTED")
}

/// `findings` (sorted, apart) with every other place the text repeats one
/// of their values: a password written after its key and again in a
/// sentence (`log in with X`), or pasted twice, is the same secret without
/// a key the second time.
fn with_repeats(
    text: &str,
    mut findings: Vec<secrets::Finding>,
    known: &[(String, &'static str)],
) -> Vec<secrets::Finding> {
    let mut values: Vec<(&str, &'static str)> = Vec::new();
    let found = findings
        .iter()
        .map(|finding| (&text[finding.range.clone()], finding.kind));
    let known = known.iter().map(|(value, kind)| (value.as_str(), *kind));
    for (value, kind) in found.chain(known) {
        if repeatable_secret(value) && !values.iter().any(|(seen, _)| *seen == value) {
            values.push((value, kind));
        }
        if values.len() == MAX_REPEATED_VALUES {
            break;
        }
    }
    if values.is_empty() {
        return findings;
    }
    // Longest first: a value inside another is taken with the longer one.
    values.sort_by_key(|(value, _)| std::cmp::Reverse(value.len()));
    let mut taken: std::collections::BTreeMap<usize, usize> = findings
        .iter()
        .map(|finding| (finding.range.start, finding.range.end))
        .collect();
    let mut added = false;
    // A repeat in another case (`XQ7V…` after `password: Xq7v…`) gives the
    // secret away as well: ASCII case folding keeps every byte offset.
    let folded = text.to_ascii_lowercase();
    for (value, kind) in values {
        let value = value.to_ascii_lowercase();
        for (at, _) in folded.match_indices(&value) {
            let range = at..at + value.len();
            let overlaps = taken
                .range(..range.end)
                .next_back()
                .is_some_and(|(_, end)| *end > range.start);
            if !overlaps {
                taken.insert(range.start, range.end);
                findings.push(secrets::Finding { range, kind });
                added = true;
            }
        }
    }
    if added {
        findings.sort_by_key(|f| f.range.start);
    }
    findings
}

/// The values of `findings` in `text` that are looked for where repeated.
fn secret_values(text: &str, findings: &[secrets::Finding]) -> Vec<(String, &'static str)> {
    let mut values: Vec<(String, &'static str)> = Vec::new();
    for finding in findings {
        let value = &text[finding.range.clone()];
        if repeatable_secret(value) && !values.iter().any(|(seen, _)| seen == value) {
            values.push((value.to_string(), finding.kind));
        }
    }
    values.truncate(MAX_REPEATED_VALUES);
    values
}

/// `findings` (sorted, apart) and `extra` as one sorted list of apart
/// findings: those that overlap become their union, named by the widest.
/// One sort, however many there are (a note of 30,000 tokens and a tag).
fn union_of(
    findings: Vec<secrets::Finding>,
    extra: Vec<secrets::Finding>,
) -> Vec<secrets::Finding> {
    if extra.is_empty() {
        return findings;
    }
    let mut all = findings;
    all.extend(extra);
    all.sort_by_key(|f| (f.range.start, std::cmp::Reverse(f.range.end)));
    let mut merged: Vec<(secrets::Finding, usize)> = Vec::with_capacity(all.len());
    for finding in all {
        match merged.last_mut() {
            Some((last, widest)) if finding.range.start < last.range.end => {
                if finding.range.len() > *widest {
                    *widest = finding.range.len();
                    last.kind = finding.kind;
                }
                last.range.end = last.range.end.max(finding.range.end);
            }
            _ => {
                let len = finding.range.len();
                merged.push((finding, len));
            }
        }
    }
    merged.into_iter().map(|(finding, _)| finding).collect()
}

/// The text and fields with every copy of `secrets` (found under a key
/// that names a secret) replaced: a YAML alias copies a password under a
/// key that names nothing (`other: *p`), or the anchor sits there and the
/// alias under `password:`, and the text may repeat it anywhere.
fn redacted_copies(
    mut text: String,
    mut fields: Option<yaml_serde::Mapping>,
    mut redactions: Vec<Redaction>,
    secrets: &[(String, &'static str)],
) -> (String, Option<yaml_serde::Mapping>, Vec<Redaction>) {
    if secrets.is_empty() {
        return (text, fields, redactions);
    }
    let mut secrets: Vec<&(String, &'static str)> = secrets.iter().collect();
    secrets.sort_by_key(|(secret, _)| std::cmp::Reverse(secret.len()));
    for (secret, kind) in secrets {
        let placeholder = format!("[REDACTED:{kind}]");
        if text.contains(secret.as_str()) {
            for (at, _) in text.match_indices(secret.as_str()) {
                let line = text[..at].matches('\n').count() as u32 + 1;
                redactions.push(Redaction {
                    line,
                    kind: kind.to_string(),
                });
            }
            text = text.replace(secret.as_str(), &placeholder);
        }
        if let Some(fields) = fields.as_mut() {
            replace_in_values(fields, secret, &placeholder);
        }
    }
    redactions.sort_by_key(|redaction| redaction.line);
    (text, fields, redactions)
}

/// Every string in `fields`, at any depth, with `secret` replaced.
fn replace_in_values(fields: &mut yaml_serde::Mapping, secret: &str, placeholder: &str) {
    use yaml_serde::Value;
    fn replace(value: &mut Value, secret: &str, placeholder: &str) {
        match value {
            Value::String(text) if text.contains(secret) => {
                *text = text.replace(secret, placeholder);
            }
            Value::Number(number) if number.to_string() == secret => {
                *value = Value::String(placeholder.to_string());
            }
            Value::Sequence(items) => items
                .iter_mut()
                .for_each(|item| replace(item, secret, placeholder)),
            Value::Mapping(pairs) => pairs
                .iter_mut()
                .for_each(|(_, v)| replace(v, secret, placeholder)),
            Value::Tagged(tagged) => replace(&mut tagged.value, secret, placeholder),
            _ => {}
        }
    }
    fields
        .iter_mut()
        .for_each(|(_, value)| replace(value, secret, placeholder));
}

/// Each string of `original` that redaction changed in `redacted` (the
/// two of the same shape), with what it became.
fn collect_replaced(
    original: &yaml_serde::Value,
    redacted: &yaml_serde::Value,
    out: &mut Vec<(String, String)>,
) {
    use yaml_serde::Value;
    match (original, redacted) {
        (Value::String(before), Value::String(after)) if before != after => {
            out.push((before.clone(), after.clone()));
        }
        (Value::Number(before), Value::String(after)) => {
            out.push((before.to_string(), after.clone()))
        }
        (Value::Sequence(before), Value::Sequence(after)) => before
            .iter()
            .zip(after)
            .for_each(|(b, a)| collect_replaced(b, a, out)),
        (Value::Mapping(before), Value::Mapping(after)) => before
            .values()
            .zip(after.values())
            .for_each(|(b, a)| collect_replaced(b, a, out)),
        (Value::Tagged(before), Value::Tagged(after)) => {
            collect_replaced(&before.value, &after.value, out)
        }
        _ => {}
    }
}

/// The YAML of a note's frontmatter block, if it has one.
fn frontmatter_yaml(text: &str) -> Option<&str> {
    frontmatter::split(text.strip_prefix('\u{feff}').unwrap_or(text)).yaml
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
    fn a_password_written_as_a_list_or_block_is_redacted_in_text_and_fields() {
        let policy = Policy::default();
        for raw in [
            "---\npassword: [Xq7vLm29Rt41]\n---\nbody\n",
            "---\npasswords:\n  - Xq7vLm29Rt41\n  - Yq7vLm29Rt42\n---\nbody\n",
            "---\npassword: |\n  Xq7vLm29Rt41\n---\nbody\n",
            "---\nwifi:\n  password: Xq7vLm29Rt41\n---\nbody\n",
        ] {
            let prepared = policy.prepare("f.md", raw, None).unwrap();
            assert!(
                !prepared.text.contains("q7vLm29Rt4"),
                "{raw} -> {}",
                prepared.text
            );
            assert!(
                prepared.text.contains("[REDACTED:"),
                "{raw} -> {}",
                prepared.text
            );
            let fields = format!("{:?}", prepared.note.frontmatter);
            assert!(!fields.contains("q7vLm29Rt4"), "{raw} -> {fields}");
        }
        // A list of ordinary values is left as it was.
        let plain = "---\ntags: [raft, paxos]\nsteps:\n  - one\n  - two\n---\nbody\n";
        assert_eq!(policy.prepare("p.md", plain, None).unwrap().text, plain);
    }

    #[test]
    fn a_password_copied_by_a_yaml_alias_is_redacted_under_every_key() {
        let policy = Policy::default();
        for raw in [
            "---\npassword: &p Xq7vLm29Rt51\nother: *p\n---\nbody\n",
            "---\nother: &p Xq7vLm29Rt51\npassword: *p\n---\nbody\n",
            "---\nbase: &b Xq7vLm29Rt51\nwifi:\n  password: *b\n  note: [*b]\n---\nbody\n",
        ] {
            let prepared = policy.prepare("a.md", raw, None).unwrap();
            let fields = format!("{:?}", prepared.note.frontmatter);
            assert!(!fields.contains("q7vLm29Rt5"), "{raw} -> {fields}");
            assert!(
                !prepared.text.contains("q7vLm29Rt5"),
                "{raw} -> {}",
                prepared.text
            );
            assert!(
                fields.contains("[REDACTED:password_assignment]"),
                "{fields}"
            );
            assert!(!prepared.note.redactions.is_empty(), "{raw}");
        }
        // An alias of an ordinary value is left as it was.
        let plain = "---\nbase: &b raft\nother: *b\n---\nbody\n";
        assert_eq!(policy.prepare("p.md", plain, None).unwrap().text, plain);
    }

    #[test]
    fn a_secret_found_once_is_redacted_where_the_note_repeats_it() {
        let policy = Policy::default();
        let raw = "password: Xq7vLm29Rt61\n\nLog in with Xq7vLm29Rt61 (or `Xq7vLm29Rt61`).\n";
        assert_eq!(
            policy.redact(raw).0,
            "password: [REDACTED:password_assignment]\n\nLog in with \
             [REDACTED:password_assignment] (or `[REDACTED:password_assignment]`).\n"
        );
        assert_eq!(policy.redact(raw).1.len(), 3);
        // In another case too.
        let raw = "password: Xq7vLm29Rt62\n\nlower xq7vlm29rt62, upper XQ7VLM29RT62.\n";
        assert_eq!(policy.redact(raw).1.len(), 3, "{}", policy.redact(raw).0);
        // The printed pack is checked the same way.
        assert!(!policy.redact_printed(raw).unwrap().contains("q7vLm"));
        // A short or all-letter password is not looked for in the prose.
        for raw in [
            "pin: 4921\n\nRoom 4921 is on the left.\n",
            "password: letmein\n\nletmein is a weak password.\n",
        ] {
            let redacted = policy.redact(raw).0;
            assert!(redacted.contains("REDACTED"), "{raw} -> {redacted}");
            assert_eq!(
                redacted.matches("REDACTED").count(),
                1,
                "{raw} -> {redacted}"
            );
        }
    }

    #[test]
    fn a_secret_split_or_hidden_by_markup_or_a_comment_is_redacted_whole_where_repeated() {
        let policy = Policy::default();
        for (raw, kept) in [
            // A character reference inside the value: no tail is left.
            (
                "password: Xq7vL&#8203;m29Rt91\n",
                "password: [REDACTED:password_assignment]\n",
            ),
            // A repeat the markup splits or encodes.
            (
                "password: Xq7vLm29Rt92\n\nagain Xq7vL<wbr>m29Rt92 and &#88;q7vLm29Rt92\n",
                "password: [REDACTED:password_assignment]\n\nagain \
                 [REDACTED:password_assignment] and [REDACTED:password_assignment]\n",
            ),
            // A value first written in a comment, repeated in the text.
            (
                "zebra\n\n%% password: Xq7vLm29Rt93 %%\n\nThe box uses Xq7vLm29Rt93.\n",
                "zebra\n\n\nThe box uses [REDACTED:password_assignment].\n",
            ),
            (
                "zebra\n\n<!-- token: Xq7vLm29Rt94 -->\nuse Xq7vLm29Rt94\n",
                "zebra\n\nuse [REDACTED:secret_assignment]\n",
            ),
        ] {
            let prepared = policy.prepare("m.md", raw, None).unwrap();
            assert_eq!(prepared.text, kept, "{raw}");
        }
        // The file name's title repeats a password the text holds.
        for raw in [
            "password: Xq7vLm29Rt95\n",
            "body\n\n%% password: Xq7vLm29Rt95 %%\n",
        ] {
            let prepared = policy.prepare("Router Xq7vLm29Rt95.md", raw, None).unwrap();
            assert_eq!(
                prepared.note.meta.title, "Router [REDACTED:password_assignment]",
                "{raw}"
            );
        }
    }

    #[test]
    fn a_private_key_is_read_as_shown_in_full_width_or_across_invisible_characters() {
        let policy = Policy::default();
        for raw in [
            "---\nｐｒｉｖａｔｅ: ｔｒｕｅ\n---\nbody\n",
            "---\npri\u{ad}vate: true\n---\nbody\n",
            "body\n\nｐｒｉｖａｔｅ:: ｔｒｕｅ\n",
            "body\n\npri\u{ad}vate:: true\n",
            "body\n\n[pri\u{200b}vate:: true]\n",
            "body with #pri\u{ad}vate inside\n",
            "body with #pri\u{2063}vate and #pri\u{202e}vate inside\n",
            "body\n\npri\u{2063}vate:: true\n",
            "---\nvisibility: pri\u{ad}vate\n---\nbody\n",
            "body\n\nvisibility:: pri\u{200b}vate\n",
        ] {
            assert!(policy.prepare("k.md", raw, None).is_none(), "{raw}");
        }
    }

    #[test]
    fn structured_secrets_in_a_frontmatter_that_does_not_parse_are_redacted_whole() {
        let policy = Policy::default();
        for raw in [
            "---\ntitle: a: b\npassword: [Xq7vLm29Rt71]\n---\nbody\n",
            "---\ntitle: a: b\npasswords:\n  - Xq7vLm29Rt72\n  - Yq7vLm29Rt73\n---\nbody\n",
            "---\ntitle: a: b\npassword: |\n  Xq7vLm29Rt74\nnext: ok\n---\nbody\n",
            "---\ntitle: a: b\npassword:\n  prod: Xq7vLm29Rt75\n---\nbody\n",
            "---\ntitle: a: b\npassword: {prod: Xq7vLm29Rt76}\n---\nbody\n",
            "---\ntitle: a: b\nother: &p Xq7vLm29Rt77\npassword: *p\n---\nbody\n",
        ] {
            let prepared = policy.prepare("u.md", raw, None).unwrap();
            assert!(
                !prepared.text.contains("q7vLm29Rt7"),
                "{raw} -> {}",
                prepared.text
            );
            assert!(!prepared.note.redactions.is_empty(), "{raw}");
        }
        // Other keys of a broken frontmatter stay as written.
        let raw = "---\ntitle: a: b\nkeywords: [raft, paxos]\nauthor: {name: Ana}\n---\nbody\n";
        assert_eq!(policy.prepare("u.md", raw, None).unwrap().text, raw);
        let raw = "---\ntitle: a: b\npassword:\n  prod: Xq7vLm29Rt78\nnext: ok\n---\nbody\n";
        let text = policy.prepare("u.md", raw, None).unwrap().text;
        assert!(text.contains("next: ok"), "{text}");
    }

    #[test]
    fn a_placeholder_is_never_read_as_a_key_or_value_again() {
        let policy = Policy::default();
        let printed = "La contraseña es [REDACTED:password_statement].\n\
                       Das Passwort für den Router ist [REDACTED:password_statement].\n\
                       password: [REDACTED:password_assignment], [REDACTED:password_assignment]\n";
        assert_eq!(policy.redact_printed(printed), None);
    }

    #[test]
    fn an_html_heading_starts_a_private_section_inside_a_longer_html_block() {
        let policy = Policy::default();
        let raw = "zebra\n\n<h2>Private</h2>\n<p>PRIVA8x</p>\n<h2>Public</h2>\nok\n";
        let text = policy.prepare("h.md", raw, None).unwrap().text;
        assert_eq!(text, "zebra\n\n<h2>Public</h2>\nok\n");
        let raw = "zebra\n\n<div>\n<h3 id=\"p\">Private</h3>\n<p>PRIVA9x</p>\n</div>\n";
        let text = policy.prepare("h.md", raw, None).unwrap().text;
        assert!(!text.contains("PRIVA9x"), "{text}");
    }

    #[test]
    fn a_secret_wrapped_in_inline_html_is_found_at_preparation() {
        let policy = Policy::default();
        for (raw, kept) in [
            (
                "password: <b>Xq7vLm29Rt31</b>\n",
                "password: <b>[REDACTED:password_assignment]</b>\n",
            ),
            (
                "<mark>The admin password is Xq7vLm29Rt32</mark>\n",
                "<mark>The admin password is [REDACTED:password_statement]</mark>\n",
            ),
        ] {
            let prepared = policy.prepare("h.md", raw, None).unwrap();
            assert_eq!(prepared.text, kept, "{raw}");
        }
    }

    #[test]
    fn a_key_or_secret_typed_in_full_width_letters_is_read_as_ascii() {
        let policy = Policy::default();
        for (text, redacted) in [
            (
                "ｐａｓｓｗｏｒｄ: Xq7vLm29Rt22\n",
                "ｐａｓｓｗｏｒｄ: [REDACTED:password_assignment]\n",
            ),
            (
                "ＰＡＳＳＷＯＲＤ：Ｘｑ７ｖＬｍ２９Ｒｔ 分布式\n",
                "ＰＡＳＳＷＯＲＤ：[REDACTED:password_assignment] 分布式\n",
            ),
        ] {
            assert_eq!(policy.redact(text).0, redacted, "{text}");
        }
        // Full-width punctuation alone, as Chinese is written, reads as is.
        let chinese = "分布式：一致性，共识。\n";
        assert_eq!(policy.redact(chinese).0, chinese);
    }

    #[test]
    fn a_canvas_card_is_read_by_itself_for_what_makes_it_private() {
        let policy = Policy::default();
        let canvas = |cards: &[&str]| {
            let nodes: Vec<serde_json::Value> = cards
                .iter()
                .enumerate()
                .map(|(at, text)| {
                    serde_json::json!({"id": at.to_string(), "type": "text", "text": text,
                        "x": 0, "y": at * 100, "width": 10, "height": 10})
                })
                .collect();
            serde_json::json!({"nodes": nodes, "edges": []}).to_string()
        };
        // An unclosed fence or comment in one card swallowed the next
        // card's tag when the cards were read joined.
        for opener in ["```\nx\n", "<!--", "%%", "~~~~"] {
            let raw = canvas(&["zebra CV6", opener, "#private"]);
            assert!(policy.prepare("c.canvas", &raw, None).is_none(), "{opener}");
            let audited = crate::audit::audit_text(&policy, "c.canvas", &raw).unwrap();
            assert!(audited.private.is_some(), "{opener}");
        }
        let public = canvas(&["zebra CV6", "```\nx\n", "#publicity"]);
        assert!(policy.prepare("c.canvas", &public, None).is_some());
    }

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
    fn redaction_that_breaks_the_yaml_keeps_the_fields_and_the_flag() {
        let policy = Policy::default();
        let raw =
            "---\ntitle: Keys\naws_key: AKIA29326ML64LG2TJF8 (prod)\ntags: [ops]\n---\nbody\n";
        let prepared = policy.prepare("k.md", raw, None).unwrap();
        assert!(!prepared.text.contains("AKIA29326ML64LG2TJF8"));
        assert_eq!(prepared.note.meta.title, "Keys");
        assert_eq!(prepared.note.meta.tags, ["ops"]);
        assert_eq!(
            frontmatter::get(&prepared.note.frontmatter, "aws_key")
                .and_then(frontmatter::scalar)
                .as_deref(),
            Some("[REDACTED:aws_access_key_id] (prod)")
        );
        assert!(prepared.problems.is_empty(), "{:?}", prepared.problems);
        let private = "---\naws_key: AKIA29326ML64LG2TJF8 (prod)\nprivate: true\n---\nbody\n";
        assert!(policy.prepare("p.md", private, None).is_none());
        let key_block = "---\nkey: -----BEGIN OPENSSH PRIVATE KEY-----\nprivate: true\n---\nbody\n";
        assert!(policy.prepare("p.md", key_block, None).is_none());
    }

    #[test]
    fn a_secret_found_through_its_neighbours_leaves_the_kept_fields_too() {
        // The Mailgun key is one only near the word "mailgun", on another
        // line; the placeholder breaks the YAML, so the fields are those
        // read before redaction, and must not keep the key.
        let key = "key-3f9a1c7e5b2d4f6a8c0e1b3d5f7a9c2e";
        let raw = format!("---\nservice: mailgun\napi: {key} (old)\npin: 73915246\n---\nbody\n");
        let prepared = Policy::default().prepare("m.md", &raw, None).unwrap();
        assert!(!prepared.text.contains(key), "{}", prepared.text);
        let shown = format!("{:?}", prepared.note.frontmatter);
        assert!(!shown.contains(key), "{shown}");
        assert_eq!(
            frontmatter::get(&prepared.note.frontmatter, "api")
                .and_then(frontmatter::scalar)
                .as_deref(),
            Some("[REDACTED:mailgun_api_key] (old)")
        );
        assert_eq!(
            frontmatter::get(&prepared.note.frontmatter, "service")
                .and_then(frontmatter::scalar)
                .as_deref(),
            Some("mailgun")
        );
    }

    #[test]
    fn secrets_split_by_comments_or_markup_are_seen_whole() {
        let policy = Policy::default();
        let token = "ghp_Q7wE9rT2yU4iO6pA8sD1fG3hJ5kL0zX9cV7b";
        for split in ["%%x%%", "<!-- x -->", "<span></span>", "<wbr>", "<b></b>"] {
            let raw = format!("# K\n\nkey {}{split}{} here\n", &token[..12], &token[12..]);
            let prepared = policy.prepare("k.md", &raw, None).unwrap();
            assert_eq!(
                prepared.text, "# K\n\nkey [REDACTED:github_token] here\n",
                "{split}"
            );
        }
        // Markdown escapes inside a token (Obsidian shows `ghp_…`).
        let escaped = format!("# K\n\nkey {}\\_{} here\n", &token[..3], &token[4..]);
        let prepared = policy.prepare("k.md", &escaped, None).unwrap();
        assert_eq!(prepared.text, "# K\n\nkey [REDACTED:github_token] here\n");
        // Escapes elsewhere are kept as written.
        let kept = "# K\n\npath C:\\_dir and \\*emph\\*\n";
        assert_eq!(policy.prepare("k.md", kept, None).unwrap().text, kept);
        // A value running into a comment does not take the comment with it.
        let raw = "# K\n\npassword = h8Kq2vZ9xW4m%%never shown%% after\n";
        let prepared = policy.prepare("k.md", raw, None).unwrap();
        assert!(!prepared.text.contains("never shown"), "{}", prepared.text);
    }

    #[test]
    fn private_sections_under_every_kind_of_heading_are_cut() {
        let policy = Policy::default();
        let raw = "# T\n\nshown\n\n## Private ^diary\n\ncut one\n\n## [[Private]]\n\ncut two\n\n\
                   <h2>Private</h2>\n\ncut three\n\n## Public\n\nkept\n";
        let prepared = policy.prepare("t.md", raw, None).unwrap();
        assert_eq!(prepared.text, "# T\n\nshown\n\n## Public\n\nkept\n");
    }

    #[test]
    fn a_frontmatter_list_of_mappings_is_scanned_for_privacy() {
        let policy = Policy::default();
        for raw in [
            "---\n- private: true\n---\nbody\n",
            "---\n- title: x\n- tags: [private]\n---\nbody\n",
        ] {
            assert!(policy.prepare("l.md", raw, None).is_none(), "{raw}");
        }
        assert!(
            policy
                .prepare("l.md", "---\n- a\n- b\n---\nbody\n", None)
                .is_some()
        );
    }

    #[test]
    fn private_spelt_as_a_number_a_bracketed_field_or_a_wrapped_tag_is_private() {
        let policy = Policy::default();
        for raw in [
            "---\nprivate: 1.0\n---\nbody\n",
            "Status [private:: true] here.\n",
            "Status (private:: yes) here.\n",
            "**private**:: true\n",
            "Filed under <mark>#private</mark> for now.\n",
            "Filed under **#private**.\n",
        ] {
            assert!(policy.prepare("n.md", raw, None).is_none(), "{raw}");
        }
        for raw in [
            "---\nprivate: 0.0\n---\nbody\n",
            "See C#private and x.org/#private.\n",
            "* [Install](#install)\n* [Private](#private)\n\n## Private\n\nmine\n",
            "Use `[private:: true]` to hide a note.\n",
        ] {
            assert!(policy.prepare("n.md", raw, None).is_some(), "{raw}");
        }
    }

    #[test]
    fn a_private_heading_is_known_however_it_is_decorated() {
        let policy = Policy::default();
        for heading in [
            "## Private:",
            "## Private #diary",
            "## [[Private|Notes]]",
            "## Private\u{200b}",
            "## **Private**",
            "## Private (do not share)",
            "## Private - personal",
            "## Private: personal",
            "## Private, do not share",
            "## Private [do not share]",
            "## Private/personal",
        ] {
            let raw = format!("# T\n\nshown\n\n{heading}\n\ncut\n\n## Next\n\nkept\n");
            let prepared = policy.prepare("t.md", &raw, None).unwrap();
            assert_eq!(
                prepared.text, "# T\n\nshown\n\n## Next\n\nkept\n",
                "{heading}"
            );
        }
        for heading in [
            "## Private equity: notes",
            "## Privacy (policy)",
            "## Not private - at all",
            "## Private equity, funds",
            "## [[Private equity]]",
        ] {
            let raw = format!("# T\n\n{heading}\n\nkept\n");
            assert_eq!(policy.prepare("t.md", &raw, None).unwrap().text, raw);
        }
    }

    #[test]
    fn only_a_heading_that_starts_a_line_ends_a_private_section() {
        let policy = Policy::default();
        for inside in [
            "> ## Public\n> in a quote\n\nafter the quote",
            "- ## Public\n  in a list",
            "> [!note]\n> ## Public\n> in a callout",
            "[^1]: ## Public\n    in a footnote",
            "a line a rule makes a heading\n---\nafter the rule",
        ] {
            let raw = format!("# T\n\nshown\n\n## Private\n\n{inside}\n\n## Next\n\nkept\n");
            let prepared = policy.prepare("t.md", &raw, None).unwrap();
            assert_eq!(
                prepared.text, "# T\n\nshown\n\n## Next\n\nkept\n",
                "{inside}"
            );
        }
    }

    #[test]
    fn many_private_headings_and_code_blocks_are_cut_in_one_pass() {
        // Each private heading looked for its section's end among all the
        // headings after it, and each line of a note with `$$` was checked
        // against every code block: quadratic (7 s and 12 s at 1 MB).
        let policy = Policy::default();
        let quoted = "> # Private\n\n".repeat(30_000);
        let raw = format!("# T\n\nshown\n\n## Private\n\n{quoted}## Next\n\nkept\n");
        let prepared = policy.prepare("t.md", &raw, None).unwrap();
        assert_eq!(prepared.text, "# T\n\nshown\n\n## Next\n\nkept\n");
        let code = "```\n# x\n```\n".repeat(30_000);
        let raw = format!("# T\n\n$$\n\n{code}\n$$\n\n## Private\n\nhidden\n\n## Next\n\nkept\n");
        let prepared = policy.prepare("m.md", &raw, None).unwrap();
        assert!(!prepared.text.contains("hidden"));
        assert!(prepared.text.ends_with("## Next\n\nkept\n"));
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
