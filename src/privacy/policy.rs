//! The vault's privacy policy: which notes are private (never read into any
//! output), which parts of a note are cut (comments, private sections), and
//! whether secrets are redacted. It lives in `.ctxpack.yaml` at the vault
//! root, which ctxpack reads and never writes; a file that does not parse is
//! an error, never "no policy".

use std::collections::BTreeMap;
use std::path::Path;
use unicode_normalization::UnicodeNormalization;

use ignore::gitignore::{Gitignore, GitignoreBuilder};
use serde::{Deserialize, Serialize};

use crate::note::Note;
use crate::parse::frontmatter::{self, FrontmatterError};
use crate::vault::obsidian::{ObsidianRules, ObsidianSettings};

/// The policy file, at the vault root.
pub(crate) const POLICY_FILE: &str = ".ctxpack.yaml";
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

/// The problems found while reading a policy are worded where they are
/// found; `?` carries them out as the policy's error.
impl From<String> for PolicyError {
    fn from(message: String) -> PolicyError {
        PolicyError(message)
    }
}

/// The policy as written in `.ctxpack.yaml`; every key optional, unknown
/// keys refused (a typo must not turn protection off).
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct PolicyFile {
    pub private: PrivateRules,
    pub strip: StripRules,
    pub redact: RedactRules,
    /// When a pack appends its line to the vault's `log.md`. Never part of
    /// the serialized form (the policy's fingerprint): it decides what a
    /// pack writes, not what may be read, so changing it must not rebuild
    /// the index.
    #[serde(skip_serializing)]
    pub log: LogMode,
    /// Notes every topic pack opens with (`pins:`), in order. Never part
    /// of the serialized form: pins decide what a pack opens with, not
    /// what may be read, so changing them must not rebuild the index.
    #[serde(skip_serializing)]
    pub pins: Vec<String>,
    /// Which of Obsidian's own settings (`.obsidian/`) are followed; left
    /// out of the serialized form at its default, as `log` is.
    #[serde(skip_serializing_if = "ObsidianRules::is_default")]
    pub obsidian: ObsidianRules,
}

/// When a pack appends a line to the vault's `log.md` (`log:` in
/// `.ctxpack.yaml`).
#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum LogMode {
    /// Create `log.md` if it is absent.
    Always,
    /// Only where a `log.md` already exists (an obsidian-wiki vault): a
    /// plain vault is never written to unasked.
    #[default]
    IfPresent,
    /// Never.
    Never,
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

impl PrivateRules {
    /// Adds the default fields, tags and headings to what a policy file
    /// lists: a file that names its own (`status: [confidential]`) keeps
    /// `private: true` and the rest private too. No policy turns them off:
    /// a note someone marked private stays private under every policy.
    fn keep_the_defaults(&mut self) {
        let defaults = PrivateRules::default();
        for (key, values) in defaults.fields {
            let listed = self.fields.entry(key).or_default();
            for value in values {
                if !listed.contains(&value) {
                    listed.push(value);
                }
            }
        }
        for tag in defaults.tags {
            if !self.tags.iter().any(|t| t.eq_ignore_ascii_case(&tag)) {
                self.tags.push(tag);
            }
        }
        for heading in defaults.headings {
            if !self
                .headings
                .iter()
                .any(|h| h.eq_ignore_ascii_case(&heading))
            {
                self.headings.push(heading);
            }
        }
    }
}

impl Default for PrivateRules {
    fn default() -> Self {
        let truthy = |value: yaml_serde::Value| vec![value];
        PrivateRules {
            fields: BTreeMap::from([
                ("private".to_string(), truthy(yaml_serde::Value::Bool(true))),
                (
                    "visibility".to_string(),
                    ["private", "secret", "hidden", "confidential"]
                        .map(yaml_serde::Value::from)
                        .to_vec(),
                ),
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
    /// What the vault's `.obsidian` settings say (empty unless read by
    /// [`Policy::load`]).
    obsidian: ObsidianSettings,
    /// Frontmatter keys that make a note private whatever their value: a
    /// writing project's fields hidden from some purpose, as [`field_name_key`] reads them.
    restricted_keys: Vec<String>,
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
    fn load_file(root: &Path) -> Result<Policy, PolicyError> {
        let path = root.join(POLICY_FILE);
        if std::fs::symlink_metadata(&path).is_err() {
            return Ok(Policy::default());
        }
        let real = path
            .canonicalize()
            .map_err(|err| format!("cannot read {}: {err}", path.display()))?;
        if !real.starts_with(root) {
            return Err(PolicyError(format!(
                "{} leads outside the vault; a policy must be the vault's own file",
                path.display()
            )));
        }
        let (text, _) = crate::safe_fs::read_text(&real, MAX_POLICY_BYTES)
            .map_err(|err| format!("cannot read {}: {}", path.display(), err.reason()))?;
        Policy::parse(&text).map_err(|err| PolicyError(format!("{}: {err}", path.display())))
    }

    /// The policy of the vault at `root` (canonical) with what its
    /// `.obsidian` settings say under the policy's `obsidian:` rules, and,
    /// in a writing project, what its schemas hide from some purpose (see
    /// [`crate::assemble::ProjectRestrictions`]): the vault's tools serve
    /// no purpose, so they show only what every purpose may see.
    pub fn load(root: &Path) -> Result<Policy, PolicyError> {
        let policy = Policy::load_without_project(root)?;
        let restrictions = crate::assemble::project_restrictions(root).map_err(|err| match err {
            crate::assemble::AssembleError::Unservable { root, problem } => PolicyError(format!(
                "{} cannot be read as a writing project: {problem}; which fields its schemas \
                 hide and which libraries no work binds are unknown, so nothing is read until \
                 that is fixed",
                root.display()
            )),
            other => PolicyError(other.to_string()),
        })?;
        if restrictions.is_empty() {
            return Ok(policy);
        }
        let mut file = policy.file.clone();
        file.private.headings.extend(restrictions.headings);
        file.private.folders.extend(restrictions.files);
        for (key, type_name) in restrictions.types {
            file.private
                .fields
                .entry(key)
                .or_default()
                .push(yaml_serde::Value::String(type_name));
        }
        let mut restricted = Policy::from_file(file)?;
        restricted.set_restricted_keys(restrictions.keys);
        restricted.set_obsidian(policy.obsidian.clone());
        Ok(restricted)
    }

    /// [`Policy::load`] without a writing project's restrictions: what the
    /// assembler reads under, since it shows each purpose its own fields,
    /// and all the walk needs (the Obsidian settings).
    pub fn load_without_project(root: &Path) -> Result<Policy, PolicyError> {
        let mut policy = Policy::load_file(root)?;
        let settings = ObsidianSettings::read(root, &policy.file.obsidian);
        policy.set_obsidian(settings);
        Ok(policy)
    }

    /// Makes a note with any of `keys` in its frontmatter (with a value)
    /// private; they are part of the fingerprint.
    fn set_restricted_keys(&mut self, mut keys: Vec<String>) {
        keys.sort();
        keys.dedup();
        if keys.is_empty() {
            return;
        }
        let text = format!(
            "{}\nrestricted keys: {}",
            self.fingerprint,
            keys.join("\u{1f}")
        );
        self.fingerprint = blake3::hash(text.as_bytes()).to_hex()[..16].to_string();
        self.restricted_keys = keys.iter().map(|key| field_name_key(key)).collect();
    }

    /// What the vault's `.obsidian` settings say.
    pub fn obsidian(&self) -> &ObsidianSettings {
        &self.obsidian
    }

    /// Follows `settings` from now on. What they name (templates, excluded
    /// files, dailies) changes what the index holds, so it is part of the
    /// fingerprint; settings that say nothing leave it as it was.
    pub fn set_obsidian(&mut self, settings: ObsidianSettings) {
        let said = settings.fingerprint_text();
        if !said.is_empty() {
            let text = format!("{}\n{said}", self.fingerprint);
            self.fingerprint = blake3::hash(text.as_bytes()).to_hex()[..16].to_string();
        }
        self.obsidian = settings;
    }

    /// Parses a policy file's text.
    pub fn parse(text: &str) -> Result<Policy, PolicyError> {
        let file: PolicyFile = if text.trim().is_empty() {
            PolicyFile::default()
        } else {
            crate::parse::yaml::from_str(text)
                .map_err(|err| format!("not a valid policy: {err}"))?
        };
        Policy::from_file(file)
    }

    /// The policy a parsed file describes (its patterns compiled).
    pub fn from_file(mut file: PolicyFile) -> Result<Policy, PolicyError> {
        file.private.keep_the_defaults();
        let folders = if file.private.folders.is_empty() {
            None
        } else {
            let mut builder = GitignoreBuilder::new("/");
            // `journal/` hides `Journal/` too (fail closed): the folder a
            // person names is the one they meant, and macOS and Windows
            // see one folder there.
            builder
                .case_insensitive(true)
                .map_err(|err| format!("private folder patterns: {err}"))?;
            for pattern in &file.private.folders {
                for line in folder_pattern_lines(pattern)? {
                    builder
                        .add_line(None, &line)
                        .map_err(|err| format!("private folder pattern '{pattern}': {err}"))?;
                }
            }
            Some(
                builder
                    .build()
                    .map_err(|err| format!("private folder patterns: {err}"))?,
            )
        };
        // `## Private` names the heading `Private`, as the tags' `#` is
        // read as no part of the tag.
        let headings = file
            .private
            .headings
            .iter()
            .map(|h| crate::text::fold(h.trim().trim_start_matches('#').trim()))
            .collect();
        let tags = file
            .private
            .tags
            .iter()
            .map(|t| tag_key(t.trim().trim_start_matches('#')))
            .collect();
        let canonical = serde_json::to_string(&file).unwrap_or_default();
        // The analysis version too: a note indexed under other texts is
        // re-analysed by both stores, as under another policy.
        let versioned = format!(
            "{canonical}\n{}\n{}",
            super::secrets::DETECTORS_VERSION,
            crate::analysis::PARTS_VERSION
        );
        let fingerprint = blake3::hash(versioned.as_bytes()).to_hex()[..16].to_string();
        Ok(Policy {
            file,
            folders,
            headings,
            tags,
            obsidian: ObsidianSettings::default(),
            restricted_keys: Vec::new(),
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
        self.is_private_entry(rel_path, false)
    }

    /// Whether the folder at `rel_path` is private, or lies in one.
    pub fn is_private_folder(&self, rel_path: &str) -> bool {
        self.is_private_entry(rel_path, true)
    }

    fn is_private_entry(&self, rel_path: &str, is_folder: bool) -> bool {
        self.folders.as_ref().is_some_and(|folders| {
            // As git reads its ignore rules: nothing under a private folder
            // is made public again by a `!` rule (`["journal/", "!*.md"]`).
            let matches = |path: &str| {
                let path = Path::new("/").join(path);
                path.ancestors()
                    .skip(1)
                    .take_while(|folder| *folder != Path::new("/"))
                    .any(|folder| folders.matched(folder, true).is_ignore())
                    || folders.matched(&path, is_folder).is_ignore()
            };
            // A name synced from macOS is decomposed (NFD) where the rule
            // was typed composed, or the other way round: both are read
            // composed, as the rules were added in both forms.
            matches(rel_path)
                || (!rel_path.is_ascii() && matches(&rel_path.nfc().collect::<String>()))
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
        self.fields_reason(&note.frontmatter).or_else(|| {
            note.meta
                .tags
                .iter()
                .find(|tag| self.is_private_tag(tag))
                .map(|tag| format!("tag #{tag}"))
        })
    }

    /// Why a note is private judged from its unredacted frontmatter alone,
    /// before anything else reads the note. A frontmatter that does not
    /// parse is scanned line by line for the policy's keys and tags; one
    /// that cannot be read at all (it expands past the YAML bound) makes the
    /// note private, since nothing in it can be checked.
    pub fn frontmatter_reason(&self, raw: &str) -> Option<String> {
        self.read_frontmatter(raw).0
    }

    /// [`frontmatter_reason`](Self::frontmatter_reason), and the fields
    /// when the frontmatter parsed (so the note's parse need not read the
    /// YAML again).
    pub(crate) fn read_frontmatter(
        &self,
        raw: &str,
    ) -> (Option<String>, Option<yaml_serde::Mapping>) {
        // Invisible characters before the opening line (a zero-width
        // space, a second BOM) hide the properties from Obsidian, not the
        // author's `private: true` from the policy.
        let text = raw.trim_start_matches(|c| c == '\u{feff}' || super::is_invisible(c));
        let split = frontmatter::split(text);
        match split.yaml {
            Some(yaml) => match frontmatter::parse(yaml) {
                Ok(fields) => {
                    let reason = self.fields_reason(&fields).or_else(|| {
                        ["tags", "tag"]
                            .iter()
                            .filter_map(|key| frontmatter::get(&fields, key))
                            .flat_map(|value| frontmatter::list(value, &[',', ' ']))
                            .find(|tag| self.is_private_tag(tag))
                            .map(|tag| format!("tag #{}", tag.trim_start_matches('#')))
                    });
                    (reason, Some(fields))
                }
                Err(FrontmatterError::Broken(_)) => (
                    self.lenient_reason(yaml)
                        .map(|reason| format!("{reason}, in a frontmatter that does not parse")),
                    None,
                ),
                Err(FrontmatterError::Unreadable(_)) => (Some(UNREADABLE_FRONTMATTER.into()), None),
            },
            // An unterminated block is read as body text, but its leading
            // `key: value` lines may still say the note is private.
            None if split.problem.is_some() => {
                let after_opening = text.find('\n').map_or("", |end| &text[end + 1..]);
                let reason = self
                    .lenient_reason(leading_yaml_lines(after_opening))
                    .map(|reason| format!("{reason}, in a frontmatter with no closing line"));
                (reason, None)
            }
            None => (None, None),
        }
    }

    /// Whether the frontmatter of `raw` cannot be read at all.
    /// Why the file at `path` is private because it cannot be read (a
    /// frontmatter past the YAML bound, a canvas that does not parse): the
    /// diagnostic its readers give, where the policy leaves it out.
    pub(crate) fn unreadable(path: &str, raw: &str) -> Option<&'static str> {
        if crate::parse::canvas::is_canvas(path) {
            return crate::parse::canvas::to_markdown(raw)
                .is_err()
                .then_some(super::UNREADABLE_CANVAS);
        }
        Policy::is_unreadable_frontmatter(raw).then_some(super::UNREADABLE_NOTE)
    }

    pub fn is_unreadable_frontmatter(raw: &str) -> bool {
        let text = raw.strip_prefix('\u{feff}').unwrap_or(raw);
        frontmatter::split(text).yaml.is_some_and(|yaml| {
            matches!(
                frontmatter::parse(yaml),
                Err(FrontmatterError::Unreadable(_))
            )
        })
    }

    /// The policy field among `fields` that makes a note private.
    pub(super) fn fields_reason(&self, fields: &yaml_serde::Mapping) -> Option<String> {
        for (k, v) in fields {
            if let Some(k) = k.as_str()
                && !v.is_null()
                && self.is_restricted_key(k)
            {
                return Some(format!(
                    "frontmatter '{}', a field the project's schemas hide from some purpose",
                    k.trim()
                ));
            }
        }
        for (key, values) in &self.file.private.fields {
            for (k, v) in fields {
                // Compared as shown: `ｐｒｉｖａｔｅ` and `pri\u{ad}vate` are
                // the key `private`.
                if k.as_str()
                    .is_none_or(|k| tag_key(k.trim()) != tag_key(key.trim()))
                {
                    continue;
                }
                if values.iter().any(|wanted| same_value(v, wanted)) {
                    return Some(format!("frontmatter '{key}'"));
                }
                if !v.is_null()
                    && let Some(reason) = unclear_flag_reason(key, values, v)
                {
                    return Some(reason);
                }
            }
        }
        self.tags_field_reason(fields)
    }

    /// A private tag in a `tags:` value of any shape, read as loosely as
    /// a person wrote it: nested lists (`tags: [[private]]`), a mapping's
    /// keys and values (`tags: {private: 1}`), `;` between tags. The
    /// note's own reading takes only plain lists and strings as its tags.
    fn tags_field_reason(&self, fields: &yaml_serde::Mapping) -> Option<String> {
        fn words(value: &yaml_serde::Value, out: &mut Vec<String>) {
            match value {
                yaml_serde::Value::Sequence(items) => {
                    items.iter().for_each(|item| words(item, out))
                }
                yaml_serde::Value::Mapping(pairs) => pairs.iter().for_each(|(key, value)| {
                    words(key, out);
                    words(value, out);
                }),
                yaml_serde::Value::Tagged(tagged) => words(&tagged.value, out),
                yaml_serde::Value::String(text) => {
                    out.extend(text.split([',', ';', ' ', '、', '，', '；']).map(|word| {
                        word.trim()
                            .trim_matches(['[', ']', '(', ')', '{', '}', '"', '\'', '“', '”'])
                            .trim_start_matches(['#', '＃'])
                            .to_string()
                    }))
                }
                _ => {}
            }
        }
        let mut found = Vec::new();
        for (key, value) in fields {
            if key
                .as_str()
                .is_some_and(|key| ["tags", "tag"].contains(&key.trim().to_lowercase().as_str()))
            {
                words(value, &mut found);
            }
        }
        found
            .into_iter()
            .find(|tag| !tag.is_empty() && self.is_private_tag(tag))
            .map(|tag| format!("tag #{tag}"))
    }

    /// The policy's keys and private tags found in YAML that does not
    /// parse, read as loosely as a person wrote them: any indentation,
    /// quotes, flow lists or block lists, trailing comments.
    fn lenient_reason(&self, yaml: &str) -> Option<String> {
        let mut key = String::new();
        for raw in yaml.lines() {
            let indented = raw.starts_with([' ', '\t']);
            let trimmed = raw.trim();
            // `{title: x, private: true` (a flow mapping left open): each
            // pair is read on its own.
            let pieces: Vec<&str> = if trimmed.starts_with('{') && trimmed.matches(':').count() > 1
            {
                trimmed.split(',').collect()
            } else {
                vec![trimmed]
            };
            for line in pieces {
                let line = line.trim();
                // A list item may itself be `key: value` (a frontmatter that is
                // a list of mappings): read as the key it names.
                let line = match line.strip_prefix('-') {
                    Some(item)
                        if item.split_once(':').is_some_and(|(name, _)| {
                            let name = name.trim().trim_matches(['"', '\'']);
                            !name.is_empty() && !name.contains([' ', '[', '{', '/'])
                        }) =>
                    {
                        item.trim()
                    }
                    _ => line,
                };
                let value = if let Some(item) = line.strip_prefix('-') {
                    item
                } else if let Some(name) = line.strip_prefix("? ") {
                    // An explicit key (`? ai`), its value on a `: ` line.
                    key = name.trim().trim_matches(['"', '\'']).to_string();
                    continue;
                } else if let Some(value) = line.strip_prefix(':') {
                    value
                } else if let Some((name, value)) = line.split_once(':') {
                    // `[private: true` and `{private: true`: a flow mapping or
                    // list left open still names the key.
                    key = name
                        .trim()
                        .trim_start_matches(['[', '{'])
                        .trim()
                        .trim_matches(['"', '\''])
                        .to_string();
                    value
                } else if indented && !line.is_empty() {
                    // `private:` with its value on the next, indented line.
                    line
                } else {
                    continue;
                };
                if self.is_restricted_key(&key) && !value.trim().is_empty() {
                    return Some(format!(
                        "frontmatter '{key}', a field the project's schemas hide from some purpose"
                    ));
                }
                let value = value.split(" #").next().unwrap_or(value);
                // An anchor or a tag before a value is not the value
                // (`ai: &no false`, `visibility: !!str private`).
                let value: String = value
                    .split_whitespace()
                    .filter(|word| !word.starts_with(['&', '!']))
                    .collect::<Vec<_>>()
                    .join(" ");
                let tokens = value
                    .split(['[', ']', '{', '}', ','])
                    .map(|token| token.trim().trim_matches(['"', '\'']).trim())
                    .filter(|token| !token.is_empty());
                let is_tags = key.eq_ignore_ascii_case("tags") || key.eq_ignore_ascii_case("tag");
                let tokens: Vec<&str> = tokens.collect();
                for &token in &tokens {
                    if is_tags
                        && let Some(tag) = token
                            .split_whitespace()
                            .find(|tag| self.is_private_tag(tag))
                    {
                        return Some(format!("tag #{}", tag.trim_start_matches('#')));
                    }
                    let found = yaml_serde::Value::String(token.to_string());
                    if let Some((field, _)) =
                        self.file.private.fields.iter().find(|(field, values)| {
                            field.trim().eq_ignore_ascii_case(&key)
                                && values.iter().any(|wanted| same_value(&found, wanted))
                        })
                    {
                        return Some(format!("frontmatter '{field}'"));
                    }
                }
                // Fail closed: a flag whose value cannot be read
                // (`private: {value: true`), or that is written but empty
                // (`ai: []`, `ai: ""`), cannot be told public; YAML's null
                // (`~`) says nothing, as an empty property does.
                let written = value.trim();
                if !written.is_empty()
                    && written != "~"
                    && !written.eq_ignore_ascii_case("null")
                    && let Some(reason) =
                        self.file.private.fields.iter().find_map(|(field, values)| {
                            let read = yaml_serde::Value::Sequence(
                                tokens
                                    .iter()
                                    .map(|token| yaml_serde::Value::String(token.to_string()))
                                    .collect(),
                            );
                            field
                                .trim()
                                .eq_ignore_ascii_case(&key)
                                .then(|| unclear_flag_reason(field, values, &read))
                                .flatten()
                        })
                {
                    return Some(reason);
                }
            }
        }
        None
    }

    fn is_restricted_key(&self, key: &str) -> bool {
        // Compared as shown, as a project's schemas name fields.
        !self.restricted_keys.is_empty() && self.restricted_keys.contains(&field_name_key(key))
    }

    /// Whether `tag` (with or without `#`) is a private tag or nested in one.
    pub(super) fn is_private_tag(&self, tag: &str) -> bool {
        let folded = tag_key(tag.trim_start_matches('#'));
        self.tags.iter().any(|private| {
            folded == *private
                || folded
                    .strip_prefix(private.as_str())
                    .is_some_and(|rest| rest.starts_with('/'))
        })
    }

    /// Whether a heading's text names a private section.
    /// The heading is read as a reader sees it: without a trailing block
    /// id (`^id`), link brackets (`[[Private]]`, `[[x|Private]]`), inline
    /// tags or emphasis.
    pub fn is_private_heading(&self, heading: &str) -> bool {
        // A private heading with a remark after it (`## Private (do not
        // share)`, `## Private: personal`, `## Private - notes`, `## Private,
        // do not share`, `## Private [x]`, `## Private/personal`) is one;
        // `## Private equity` is not.
        if let Some(name) = before_remark(heading)
            && self.is_private_heading(name)
        {
            return true;
        }
        // Read as shown, and (fail closed) as a link's target: `## [[Private|x]]`,
        // and each with the symbols glued to a word's ends left out
        // (`## 🔒Private`, `## Private™`).
        !self.headings.is_empty()
            && [heading_words(heading, false), heading_words(heading, true)]
                .iter()
                .any(|words| {
                    self.headings.contains(&crate::text::fold(words))
                        || (words.contains(|c: char| !c.is_alphanumeric() && c != ' ')
                            && self
                                .headings
                                .contains(&crate::text::fold(&without_glued_symbols(words))))
                })
    }
}

/// A heading's name before a remark written after it (`Private (do not
/// share)`, `Private: personal`, `Private - notes`, `Private, do not share`,
/// `Private [x]`, `Private/personal`), if one is.
pub(crate) fn before_remark(heading: &str) -> Option<&str> {
    const REMARK: &[&str] = &[
        "(", "（", ":", "：", " - ", " – ", " — ", "|", "｜", ",", "，", "[", "/", "／",
    ];
    let at = REMARK.iter().filter_map(|mark| heading.find(mark)).min()?;
    (at > 0).then(|| heading[..at].trim_end())
}

/// How a heading or a key names a field, as a reader sees it: without
/// emphasis, link brackets, a block id, a closing colon, invisible
/// characters or character references, in any case or width
/// (`## **Notes** ^id`, `ＮＯＴＥＳ:` and `no&shy;tes` all name `notes`).
pub(crate) fn field_name_key(name: &str) -> String {
    crate::text::fold(&heading_words(name, false))
}

/// The reason given for a note whose frontmatter cannot be read at all.
pub(crate) const UNREADABLE_FRONTMATTER: &str =
    "a frontmatter that cannot be read (it expands past the YAML bound); treated as private";

/// A heading's words as shown (or, with `targets`, with each link's
/// target for its text): no block id, link brackets, tags, emphasis marks,
/// inline `#tags`, invisible characters or a closing colon.
fn heading_words(heading: &str, targets: bool) -> String {
    // Character references decoded (`&#80;rivate`, `Priva&shy;te`), as a
    // reader sees them: an HTML heading's text comes as written.
    let decoded = decoded_references(heading);
    let mut text = decoded.trim();
    if let Some((before, id)) = text.rsplit_once(" ^")
        && !id.is_empty()
        && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
    {
        text = before.trim_end();
    }
    let mut shown = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(open) = rest.find("[[") {
        shown.push_str(&rest[..open]);
        let inner = &rest[open + 2..];
        let Some(close) = inner.find("]]") else {
            shown.push_str(&rest[open..]);
            rest = "";
            break;
        };
        let link = &inner[..close];
        shown.push_str(match link.split_once('|') {
            Some((target, _)) if targets => target,
            Some((_, alias)) => alias,
            None => link,
        });
        rest = &inner[close + 2..];
    }
    shown.push_str(rest);
    let shown: String = shown
        .chars()
        .filter(|&c| !matches!(c, '*' | '_' | '`' | '=') && !super::is_invisible(c))
        .collect();
    let shown = strip_tags(&shown);
    // Words of no letter or digit (`🔒`, `—`) and a heading attribute
    // (`{#id}`) say nothing a reader reads as the heading's name.
    let words: Vec<&str> = shown
        .split_whitespace()
        .filter(|word| !(word.len() > 1 && word.starts_with('#')))
        .filter(|word| word.chars().any(char::is_alphanumeric))
        .filter(|word| !(word.starts_with('{') && word.ends_with('}')))
        .collect();
    words
        .join(" ")
        .trim_end_matches([':', '：', '.', '。', '!', '！', '\\'])
        .trim()
        .to_string()
}

/// `words` with what is neither a letter, a digit nor an apostrophe cut
/// from each word's ends.
fn without_glued_symbols(words: &str) -> String {
    words
        .split(' ')
        .map(|word| word.trim_matches(|c: char| !c.is_alphanumeric() && c != '\'' && c != '’'))
        .filter(|word| !word.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}

/// `text` with its HTML character references decoded (as
/// [`super::reference_at`] reads one); the text as written when it has
/// none.
pub(crate) fn decoded_references(text: &str) -> std::borrow::Cow<'_, str> {
    if !text.contains('&') {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    while let Some(found) = text[at..].find('&') {
        let amp = at + found;
        out.push_str(&text[at..amp]);
        match super::reference_at(text, amp) {
            Some((len, shown)) => {
                out.push_str(&shown);
                at = amp + len;
            }
            None => {
                out.push('&');
                at = amp + 1;
            }
        }
    }
    out.push_str(&text[at..]);
    std::borrow::Cow::Owned(out)
}

/// `text` without `<…>` tags.
fn strip_tags(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(open) = rest.find('<') {
        out.push_str(&rest[..open]);
        match rest[open..].find('>') {
            Some(close) => rest = &rest[open + close + 1..],
            None => {
                out.push_str(&rest[open..]);
                rest = "";
            }
        }
    }
    out.push_str(rest);
    out
}

/// The leading lines of `text` that look like YAML (`key: value`, list
/// items, indented or blank-free continuations, comments).
fn leading_yaml_lines(text: &str) -> &str {
    let mut end = 0;
    for line in text.split_inclusive('\n') {
        let trimmed = line.trim();
        let yaml_like = !trimmed.is_empty()
            && (trimmed.starts_with('-')
                || trimmed.starts_with('#')
                || line.starts_with([' ', '\t'])
                || trimmed.contains(':'));
        if !yaml_like {
            break;
        }
        end += line.len();
    }
    &text[..end]
}

/// Frontmatter values compare loosely: `true`, `"true"`, `yes`, `y`, `on`
/// and `1` alike (and their opposites); strings ignoring case; a list
/// matches when one of its items does.
fn same_value(found: &yaml_serde::Value, wanted: &yaml_serde::Value) -> bool {
    match found {
        yaml_serde::Value::Sequence(items) => items.iter().any(|item| same_value(item, wanted)),
        yaml_serde::Value::Tagged(tagged) => same_value(&tagged.value, wanted),
        // `{level: private}`, `{draft: true}`: a value or a key that says
        // it, wherever in the mapping (matching more only hides more).
        yaml_serde::Value::Mapping(pairs) => pairs
            .iter()
            .any(|(key, value)| same_value(key, wanted) || same_value(value, wanted)),
        // `private, team`: each item of a list written as one string.
        yaml_serde::Value::String(text) if text.contains(',') => text
            .split(',')
            .any(|item| same_value(&yaml_serde::Value::String(item.to_string()), wanted)),
        _ => match (loose_text(found), loose_text(wanted)) {
            // Compared composed (a decomposed `é`, a full-width letter):
            // matching more can only make more notes private. (Whether a
            // flag reads as yes or no at all is judged as written.)
            (Some(found), Some(wanted)) => {
                let found = composed(&found);
                found == composed(&wanted)
                    || wanted == "false" && matches!(&*found, "none" | "disabled" | "disable")
            }
            _ => false,
        },
    }
}

/// A scalar as a policy compares it: lower case, unquoted, a number by its
/// value, and every spelling of yes or no as `true` or `false`.
fn loose_text(value: &yaml_serde::Value) -> Option<String> {
    let text = match value {
        yaml_serde::Value::Bool(b) => b.to_string(),
        yaml_serde::Value::String(s) => unwrapped_flag(s).to_lowercase(),
        yaml_serde::Value::Number(n) => n.to_string(),
        _ => return None,
    };
    // A number reads as its value: `1.0` is `1` (and so `true`).
    let text = integral_number(&text).unwrap_or(text);
    Some(match text.as_str() {
        "yes" | "y" | "on" | "1" | "allow" | "allowed" | "ok" | "okay" => "true".to_string(),
        "no" | "n" | "off" | "0" | "never" => "false".to_string(),
        _ => text,
    })
}

/// A flag's text as a reader sees it: without the quotes (straight or
/// typographic), link brackets and closing stops around it (`“private”`,
/// `[[draft]]`, `No.`, `Private!`). A question mark stays: `false?` asks.
fn unwrapped_flag(text: &str) -> &str {
    const QUOTES: &[char] = &[
        '"', '\'', '`', '“', '”', '‘', '’', '«', '»', '「', '」', '『', '』',
    ];
    let mut text = text.trim();
    loop {
        let before = text;
        text = text
            .trim_matches(QUOTES)
            .trim_end_matches(['.', '!', '。', '！'])
            .trim();
        if let Some(inner) = text.strip_prefix("[[").and_then(|t| t.strip_suffix("]]")) {
            text = inner.rsplit('|').next().unwrap_or(inner).trim();
        }
        if text == before {
            return text;
        }
    }
}

/// Why a value of a policy field that no rule value matched still makes
/// the note private: it fails closed where it cannot be told public. A
/// yes-or-no rule (`private: true`) hides a value that reads as neither
/// (`private: maybe`); a rule for a no (`ai: false`) hides every value
/// but a yes (`ai: maybe`, `ai: []`, `ai: gpt-4o`: none says AI may read
/// the note). A rule for a word (`visibility: private`) hides only that
/// word: other values (`team`) are what the field is for.
fn unclear_flag_reason(
    key: &str,
    values: &[yaml_serde::Value],
    found: &yaml_serde::Value,
) -> Option<String> {
    if is_yes_or_no_rule(values) && !reads_yes_or_no(found) {
        return Some(format!(
            "frontmatter '{key}' has a value that reads as neither yes nor no; treated as private"
        ));
    }
    if is_no_rule(values) && !reads_yes(found) {
        return Some(format!(
            "frontmatter '{key}' has a value that does not read as yes; treated as private"
        ));
    }
    None
}

/// Whether a rule makes a note private when its field says no (`ai: false`).
fn is_no_rule(values: &[yaml_serde::Value]) -> bool {
    values
        .iter()
        .any(|value| loose_text(value).as_deref() == Some("false"))
}

/// Whether `value` reads as yes, every item of a list included (an empty
/// list says nothing).
fn reads_yes(value: &yaml_serde::Value) -> bool {
    match value {
        yaml_serde::Value::Sequence(items) => !items.is_empty() && items.iter().all(reads_yes),
        yaml_serde::Value::Tagged(tagged) => reads_yes(&tagged.value),
        _ => loose_text(value).is_some_and(|text| text == "true"),
    }
}

/// Whether a rule makes a note private when its field says yes
/// (`private: true`): then a value that reads as neither yes nor no
/// (`private: maybe`) cannot be told public.
fn is_yes_or_no_rule(values: &[yaml_serde::Value]) -> bool {
    values
        .iter()
        .any(|value| loose_text(value).as_deref() == Some("true"))
}

/// Whether `value` reads as yes or no, every item of a list included (an
/// empty list says neither).
fn reads_yes_or_no(value: &yaml_serde::Value) -> bool {
    match value {
        yaml_serde::Value::Sequence(items) => {
            !items.is_empty() && items.iter().all(reads_yes_or_no)
        }
        yaml_serde::Value::Tagged(tagged) => reads_yes_or_no(&tagged.value),
        _ => loose_text(value).is_some_and(|text| text == "true" || text == "false"),
    }
}

/// `text` compatibility-composed (NFKC), unless it is ASCII.
fn composed(text: &str) -> std::borrow::Cow<'_, str> {
    if text.is_ascii() {
        std::borrow::Cow::Borrowed(text)
    } else {
        // As shown: `pri\u{ad}vate` is `private`.
        std::borrow::Cow::Owned(text.nfkc().filter(|&c| !super::is_invisible(c)).collect())
    }
}

/// A tag as the policy compares it: compatibility-composed (NFKC: a
/// decomposed `é`, a full-width letter), lower-cased, and without the
/// marks and invisible characters left over (`#private` followed by a
/// variation selector or a keycap mark is `#private` as shown).
fn tag_key(tag: &str) -> String {
    if tag.is_ascii() {
        return tag.to_ascii_lowercase();
    }
    tag.nfkc()
        .filter(|&c| !super::is_invisible(c) && !unicode_normalization::char::is_combining_mark(c))
        .collect::<String>()
        .to_lowercase()
}

/// The gitignore lines a private folder rule adds: the rule as written
/// and composed (NFC), a leading `./` read as the vault root. A rule that
/// names no place in the vault (`~/journal`, `../x`) is an error, not a
/// rule that quietly matches nothing.
fn folder_pattern_lines(pattern: &str) -> Result<Vec<String>, PolicyError> {
    let trimmed = pattern.trim();
    let mut rule = trimmed;
    while let Some(rest) = rule.strip_prefix("./") {
        rule = rest;
    }
    if rule.is_empty() || rule == "/" {
        return Err(format!(
            "private folder pattern '{pattern}': a blank rule names no folder (a typo must not \
             leave a folder public unseen); write the folder, as `journal/`"
        )
        .into());
    }
    if rule.starts_with('~') || rule.split(['/', '\\']).any(|part| part == "..") {
        return Err(format!(
            "private folder pattern '{pattern}': a folder rule is a path inside the vault (as `journal/`), not `~` or `..`"
        )
        .into());
    }
    let rule = if trimmed.starts_with("./") {
        format!("/{rule}")
    } else {
        rule.to_string()
    };
    let composed: String = rule.nfc().collect();
    Ok(if composed == rule {
        vec![rule]
    } else {
        vec![rule, composed]
    })
}

/// `text` as an integer when it is a number with no fraction (`3.0`,
/// `+3`, `3e0`): the digits a policy's value is compared by.
fn integral_number(text: &str) -> Option<String> {
    let number: f64 = text.parse().ok()?;
    (number.is_finite() && number.fract() == 0.0 && number.abs() < 1e15)
        .then(|| format!("{}", number as i64))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn note(path: &str, text: &str) -> Note {
        crate::parse::parse_note(path, text, None).0
    }

    #[test]
    fn a_folder_rule_matches_its_folder_in_any_case() {
        let policy =
            Policy::parse("private:\n  folders: [\"journal/\", \"Clients/Acme\"]\n").unwrap();
        assert!(policy.is_private_path("Journal/2024-01-01.md"));
        assert!(policy.is_private_path("JOURNAL/x.md"));
        assert!(policy.is_private_path("clients/acme/notes.md"));
        assert!(!policy.is_private_path("Journals/x.md"));
    }

    #[test]
    fn nothing_under_a_private_folder_is_made_public_again_and_blank_rules_are_refused() {
        let policy = Policy::parse("private:\n  folders: [\"journal/\", \"!*.md\"]\n").unwrap();
        assert!(policy.is_private_path("journal/j.md"));
        assert!(policy.is_private_path("journal/2024/j.md"));
        assert!(!policy.is_private_path("notes/j.md"));
        for blank in ["\"\"", "\" \"", "\"/\"", "\"./\""] {
            let error = Policy::parse(&format!("private:\n  folders: [{blank}]\n")).unwrap_err();
            assert!(error.to_string().contains("blank rule"), "{blank}: {error}");
        }
        let policy = Policy::parse("private:\n  tags: [\" diary\"]\n").unwrap();
        assert!(policy.is_private_tag("#diary"));
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
        // Tags in shapes the note's reading does not take as tags.
        for front in [
            "tags: [[private]]",
            "tags:\n- [work, private]",
            "tags: {private: 1}",
            "tags: work;private",
            "tags: work、private",
            "tags: [＃private]",
            "tags: [\"[[private]]\"]",
            "tags: (private)",
            "Tags: [[Private/diary]]",
        ] {
            let raw = format!("---\n{front}\n---\nx");
            assert!(policy.is_private(&note("a.md", &raw)), "{front}");
        }
        assert!(!policy.is_private(&note("a.md", "---\ntags: [[work], {privacy: 1}]\n---\nx")));
        assert!(!policy.is_private(&note("journalism/a.md", "x")));
    }

    #[test]
    fn every_common_spelling_of_the_flag_is_understood() {
        let policy = Policy::default();
        for front in [
            "private: [true]",
            "private: 1",
            "private: y",
            "private: 'on'",
            "PRIVATE: YES",
            "ai: 0",
            "ai: n",
            "ai: [false]",
            "visibility: [Private]",
            "visibility: \"private\"",
            "private: \"true!\"",
            "private: {value: true}",
            "private: \"[[true]]\"",
        ] {
            let raw = format!("---\n{front}\n---\nx");
            assert!(policy.is_private(&note("a.md", &raw)), "{front}");
            assert!(policy.frontmatter_reason(&raw).is_some(), "{front}");
        }
        // A yes-or-no flag that reads as neither cannot be told public.
        for front in [
            "private: maybe",
            "private: ✓",
            "private: 2",
            "private: {value: maybe}",
            "private: []",
            "private: [false, perhaps]",
            "private: \"[[perhaps]]\"",
        ] {
            let raw = format!("---\n{front}\n---\nx");
            assert!(policy.is_private(&note("a.md", &raw)), "{front}");
            assert!(
                policy
                    .frontmatter_reason(&raw)
                    .is_some_and(|why| why.contains("neither yes nor no")),
                "{front}"
            );
        }
        // A rule for a no hides every value but a yes; a rule for a word
        // hides that word however it is wrapped.
        for front in [
            "ai: never",
            "ai: gpt-4o",
            "ai: [summary, tags]",
            "ai: []",
            "ai: {}",
            "ai: maybe",
            "ai: \"false?\"",
            "ai: No.",
            "ai: ‘false’",
            "ai: \"no, never\"",
            "ai: {allow: false}",
            "ai: nein",
            "visibility: “private”",
            "visibility: private.",
            "visibility: Private!",
            "visibility: private, team",
            "visibility: {level: private}",
            "visibility: \"[[private]]\"",
            "visibility: secret",
            "visibility: [team, Hidden]",
        ] {
            let raw = format!("---\n{front}\n---\nx");
            assert!(policy.is_private(&note("a.md", &raw)), "{front}");
            assert!(policy.frontmatter_reason(&raw).is_some(), "{front}");
        }
        for front in [
            "private: 0",
            "private: [false]",
            "private: No.",
            "private:",
            "ai: 1",
            "ai: yes",
            "ai: \"Allowed\"",
            "ai: [true]",
            "ai:",
            "visibility: public",
            "visibility: team",
        ] {
            let raw = format!("---\n{front}\n---\nx");
            assert!(!policy.is_private(&note("a.md", &raw)), "{front}");
            assert_eq!(policy.frontmatter_reason(&raw), None, "{front}");
        }
    }

    #[test]
    fn a_frontmatter_that_does_not_parse_is_read_leniently() {
        let policy = Policy::default();
        let reason = |front: &str| policy.frontmatter_reason(&format!("---\n{front}---\nbody"));
        let broken = ", in a frontmatter that does not parse";
        assert_eq!(
            reason("summary: Note: session two\nprivate: true\n"),
            Some(format!("frontmatter 'private'{broken}"))
        );
        assert_eq!(
            reason("private: true\nprivate: true\n"),
            Some(format!("frontmatter 'private'{broken}"))
        );
        assert_eq!(
            reason("a: 1\n\tb: 2\n  \"Private\" : 'yes' # mine\n"),
            Some(format!("frontmatter 'private'{broken}"))
        );
        assert_eq!(
            reason("tags:\n  - work\n  - '#private/diary'\nx: [\n"),
            Some(format!("tag #private/diary{broken}"))
        );
        assert_eq!(
            reason("ai:\n- false\nx: y: z\n"),
            Some(format!("frontmatter 'ai'{broken}"))
        );
        assert_eq!(reason("summary: Note: two\nprivate: false\n"), None);
        // Written but empty: as `ai: []` in a frontmatter that parses.
        for empty in ["ai: []", "ai: {}", "ai: \"\"", "ai: [ ]", "private: []"] {
            let why = reason(&format!("title: a: b\n{empty}\n"));
            assert!(
                why.as_deref()
                    .is_some_and(|why| why.contains("treated as private")),
                "{empty}: {why:?}"
            );
        }
        assert_eq!(reason("title: a: b\nai: ~\n"), None);
        assert_eq!(reason("title: a: b\nai:\n"), None);
        // Anchors and tags before a value, an explicit key (hostile round 7).
        for front in [
            "x: [\nai: &no false\n",
            "x: [\nai: !!bool false\n",
            "x: [\n? ai\n: false\n",
        ] {
            assert_eq!(
                reason(front),
                Some(format!("frontmatter 'ai'{broken}")),
                "{front}"
            );
        }
        assert_eq!(
            reason("x: [\nvisibility: &v !!str private\n"),
            Some(format!("frontmatter 'visibility'{broken}"))
        );
        assert_eq!(reason("x: [\nai: &yes true\n"), None);
        // A key inside a flow left open, and a value read as neither.
        let neither = "frontmatter 'private' has a value that reads as neither yes nor no; \
                       treated as private";
        assert_eq!(
            reason("[private: true\n"),
            Some(format!("frontmatter 'private'{broken}"))
        );
        assert_eq!(
            reason("private: {value: true\n"),
            Some(format!("{neither}{broken}"))
        );
        // The value on the next, indented line; a flow mapping left open.
        assert_eq!(
            reason("title: [oops\nprivate:\n  true\n"),
            Some(format!("frontmatter 'private'{broken}"))
        );
        assert_eq!(
            reason("title: [oops\nvisibility:\n    private\n"),
            Some(format!("frontmatter 'visibility'{broken}"))
        );
        assert_eq!(
            reason("{title: x, private: true\n"),
            Some(format!("frontmatter 'private'{broken}"))
        );
        assert_eq!(reason("title: [oops\nprivate:\n  false\n"), None);
        // An unterminated block is body text, but its flag still counts.
        assert_eq!(
            policy.frontmatter_reason("---\ntitle: T\nprivate: true\n\n# Body\n"),
            Some("frontmatter 'private', in a frontmatter with no closing line".into())
        );
        assert_eq!(
            policy.frontmatter_reason("---\ntitle: T\n\nprivate: true in prose\n"),
            None
        );
    }

    #[test]
    fn a_frontmatter_that_cannot_be_read_makes_the_note_private() {
        let mut front = format!("l0: &l0 \"{}\"\n", "x".repeat(1024));
        for level in 1..=4 {
            let items = vec![format!("*l{}", level - 1); 32].join(", ");
            front.push_str(&format!("l{level}: &l{level} [{items}]\n"));
        }
        let raw = format!("---\n{front}---\nbody");
        let policy = Policy::default();
        assert_eq!(
            policy.frontmatter_reason(&raw).as_deref(),
            Some(UNREADABLE_FRONTMATTER)
        );
        assert!(Policy::is_unreadable_frontmatter(&raw));
        assert!(policy.prepare("a.md", &raw, None).is_none());
    }

    #[test]
    fn private_headings_are_read_as_shown() {
        let policy = Policy::default();
        for heading in [
            "Private",
            "Private ^block-1",
            "[[Private]]",
            "[[notes/x|Private]]",
            "**Private**",
            "<span id=\"p\">Private</span>",
            "Pri\u{ad}vate",
            "&#80;rivate",
            "Priva&shy;te",
            "<b>&#x50;rivate</b>",
            "🔒 Private",
            "🔒Private",
            "Private🔒",
            "Private 🔒",
            "— Private —",
            "Private {#priv}",
            "Private\\",
            "Private!",
        ] {
            assert!(policy.is_private_heading(heading), "{heading}");
        }
        assert!(!policy.is_private_heading("Private life of bees"));
        assert!(!policy.is_private_heading("🔒 Private keys explained"));
        assert!(!policy.is_private_heading("Public ^private"));
    }

    #[test]
    fn a_policy_that_does_not_parse_is_an_error() {
        assert!(
            Policy::parse("private:\n  tagz: [x]\n")
                .unwrap_err()
                .0
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
