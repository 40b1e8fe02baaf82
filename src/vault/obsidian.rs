//! Obsidian's own settings, read from the vault's `.obsidian` folder: the
//! templates folder (core Templates and Templater), the Excluded files
//! (`userIgnoreFilters`) and the daily notes' folder and date format.
//!
//! `.obsidian` is a hidden folder the walk never lists; these few files
//! are the one exception, read through `safe_fs` (regular files inside the
//! vault, bounded), and they never become notes. A file that is missing
//! says nothing; one that cannot be read or does not parse is a
//! diagnostic, and the settings it would have given are left out.

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::safe_fs;

/// The folder Obsidian keeps a vault's settings in.
pub(crate) const SETTINGS_DIR: &str = ".obsidian";
/// A settings file larger than this is not read.
const MAX_SETTINGS_BYTES: u64 = 256 * 1024;
/// At most this many Excluded-files filters are kept.
const MAX_FILTERS: usize = 256;

const TEMPLATES_FILE: &str = ".obsidian/templates.json";
const TEMPLATER_FILE: &str = ".obsidian/plugins/templater-obsidian/data.json";
const APP_FILE: &str = ".obsidian/app.json";
const DAILY_FILE: &str = ".obsidian/daily-notes.json";

/// Which of Obsidian's settings ctxpack follows (`obsidian:` in
/// `.ctxpack.yaml`); each is followed by default.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct ObsidianRules {
    /// Notes in the templates folder are neither ranked nor packed (the
    /// Bases files there still serve embeds).
    pub templates: bool,
    /// Notes matching Obsidian's Excluded files are not ranked.
    pub excluded_files: bool,
    /// The daily-notes folder and date format name the dailies.
    pub daily_notes: bool,
}

impl Default for ObsidianRules {
    fn default() -> Self {
        ObsidianRules {
            templates: true,
            excluded_files: true,
            daily_notes: true,
        }
    }
}

impl ObsidianRules {
    pub fn is_default(&self) -> bool {
        *self == ObsidianRules::default()
    }
}

/// The daily notes' place and name (`daily-notes.json`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DailyNotes {
    /// The folder, relative, without slashes at either end (empty: the root).
    pub folder: String,
    /// The file name's date format, in Obsidian's (moment.js) tokens.
    pub format: String,
}

/// What the vault's `.obsidian` settings say, under the rules followed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ObsidianSettings {
    /// Template folders (relative, no trailing slash).
    pub templates: Vec<String>,
    /// Excluded-files filters: path prefixes.
    pub excluded: Vec<String>,
    pub daily: Option<DailyNotes>,
    /// The settings files read and what each gave, for `status`.
    pub read: Vec<(String, String)>,
    /// Files that could not be read or parsed, or parts of them ignored.
    pub problems: Vec<(String, String)>,
}

impl ObsidianSettings {
    /// Reads the settings of the vault at `root` (canonical) that `rules`
    /// follows.
    pub fn read(root: &Path, rules: &ObsidianRules) -> ObsidianSettings {
        let mut settings = ObsidianSettings::default();
        if !root.join(SETTINGS_DIR).is_dir() {
            return settings;
        }
        if rules.templates {
            for (file, key) in [
                (TEMPLATES_FILE, "folder"),
                (TEMPLATER_FILE, "templates_folder"),
            ] {
                let Some(json) = settings.json(root, file) else {
                    continue;
                };
                match json.get(key).and_then(|v| v.as_str()).map(folder) {
                    Some(Some(dir)) => {
                        settings
                            .read
                            .push((file.to_string(), format!("templates folder {dir}/")));
                        if !settings.templates.contains(&dir) {
                            settings.templates.push(dir);
                        }
                    }
                    Some(None) => settings.problems.push((
                        file.to_string(),
                        format!("`{key}` names the vault root; ignored"),
                    )),
                    None => settings
                        .read
                        .push((file.to_string(), "no templates folder".to_string())),
                }
            }
        }
        if rules.excluded_files
            && let Some(json) = settings.json(root, APP_FILE)
        {
            let filters = match json.get("userIgnoreFilters") {
                None | Some(serde_json::Value::Null) => Vec::new(),
                Some(serde_json::Value::Array(filters)) => filters.clone(),
                Some(other) => {
                    settings.problems.push((
                        APP_FILE.to_string(),
                        format!(
                            "`userIgnoreFilters` is {}, not a list of filters; no file is \
                             excluded by it",
                            json_kind(other)
                        ),
                    ));
                    Vec::new()
                }
            };
            for filter in filters.iter().take(MAX_FILTERS) {
                match filter.as_str().map(str::trim) {
                    // `/…/` is a regular expression in Obsidian.
                    Some(text)
                        if text.len() > 1 && text.starts_with('/') && text.ends_with('/') =>
                    {
                        settings.problems.push((
                            APP_FILE.to_string(),
                            format!(
                                "excluded-files filter {text} is a regular expression; ignored"
                            ),
                        ))
                    }
                    Some(text) if !text.trim_matches('/').is_empty() => {
                        let text = text.trim_start_matches('/').to_string();
                        if !settings.excluded.contains(&text) {
                            settings.excluded.push(text);
                        }
                    }
                    Some(_) => {}
                    None => settings.problems.push((
                        APP_FILE.to_string(),
                        format!(
                            "excluded-files filter {filter} is {}, not text; ignored",
                            json_kind(filter)
                        ),
                    )),
                }
            }
            settings.read.push((
                APP_FILE.to_string(),
                format!("{} excluded-files filters", settings.excluded.len()),
            ));
        }
        if rules.daily_notes
            && let Some(json) = settings.json(root, DAILY_FILE)
        {
            let text = |key: &str| json.get(key).and_then(|v| v.as_str()).map(str::trim);
            let daily = DailyNotes {
                folder: text("folder").and_then(folder).unwrap_or_default(),
                format: text("format")
                    .filter(|f| !f.is_empty())
                    .unwrap_or("YYYY-MM-DD")
                    .to_string(),
            };
            let shown = if daily.folder.is_empty() {
                format!("dailies {} at the root", daily.format)
            } else {
                format!("dailies {} in {}/", daily.format, daily.folder)
            };
            if chrono_format(&daily.format).is_none() {
                settings.problems.push((
                    DAILY_FILE.to_string(),
                    format!(
                        "the date format '{}' cannot name one day (a week or a time in it, or a \
                         token not known); daily notes are dated by their properties or file time",
                        daily.format
                    ),
                ));
            }
            settings.read.push((DAILY_FILE.to_string(), shown));
            settings.daily = Some(daily);
        }
        settings
    }

    /// Why `folder` (relative, no slashes at the ends) holds no note ctxpack
    /// reads, when these settings leave it out on purpose: a message for a
    /// filter that names it.
    pub fn leaves_out(&self, folder: &str) -> Option<&'static str> {
        let within = |dir: &str| folder == dir || folder.starts_with(&format!("{dir}/"));
        if self.templates.iter().any(|dir| within(dir)) {
            Some(
                "Obsidian's templates folder, which is not searched or packed \
                 (`obsidian: templates: false` in .ctxpack.yaml reads it)",
            )
        } else if self.excluded.iter().any(|prefix| {
            within(prefix.trim_end_matches('/')) || folder.starts_with(prefix.as_str())
        }) {
            Some(
                "in Obsidian's Excluded files, which are not searched or packed \
                 (`obsidian: excluded_files: false` in .ctxpack.yaml reads them)",
            )
        } else {
            None
        }
    }

    /// What the settings say that changes what an index holds, as text
    /// (empty when they say nothing).
    pub fn fingerprint_text(&self) -> String {
        let mut text = String::new();
        for dir in &self.templates {
            text.push_str(&format!("template {dir}\n"));
        }
        for filter in &self.excluded {
            text.push_str(&format!("excluded {filter}\n"));
        }
        if let Some(daily) = &self.daily {
            text.push_str(&format!("daily {}\n{}\n", daily.folder, daily.format));
        }
        text
    }

    /// The date (`YYYY-MM-DD`) of the daily note at `rel_path`: a note in
    /// the daily-notes folder whose path there reads as the date format.
    pub fn daily_date(&self, rel_path: &str) -> Option<String> {
        let daily = self.daily.as_ref()?;
        let stem = rel_path.strip_suffix(".md")?;
        let name = if daily.folder.is_empty() {
            stem
        } else {
            stem.strip_prefix(daily.folder.as_str())?
                .strip_prefix('/')?
        };
        let format = chrono_format(&daily.format)?;
        // An ordinal day (`Do`: 1st, 22nd) is read as its number.
        let name = if daily.format.contains("Do") {
            without_ordinal_suffixes(name)
        } else {
            name.to_string()
        };
        chrono::NaiveDate::parse_from_str(&name, &format)
            .ok()
            .map(|date| date.format("%Y-%m-%d").to_string())
    }

    /// Whether the note at `rel_path` is left out of ranking and packs: a
    /// template, or a file Obsidian's Excluded files match. Bases files are
    /// never left out, since notes embed them from wherever they are.
    pub fn is_left_out(&self, rel_path: &str) -> bool {
        if crate::vault::walk::is_base(rel_path) {
            return false;
        }
        let under = |dir: &String| {
            rel_path
                .strip_prefix(dir.as_str())
                .is_some_and(|rest| rest.starts_with('/'))
        };
        // Obsidian matches a filter as a prefix of the path.
        self.templates.iter().any(under) || self.excluded.iter().any(|f| rel_path.starts_with(f))
    }

    /// The settings file `rel` as JSON, when it exists and parses; a
    /// problem is recorded when it exists and does not.
    fn json(&mut self, root: &Path, rel: &str) -> Option<serde_json::Value> {
        let path = root.join(rel);
        std::fs::symlink_metadata(&path).ok()?;
        let read = (|| {
            let real = path
                .canonicalize()
                .map_err(|err| format!("cannot read: {err}"))?;
            if !real.starts_with(root) {
                return Err("leads outside the vault".to_string());
            }
            let (text, _) =
                safe_fs::read_text(&real, MAX_SETTINGS_BYTES).map_err(|err| err.to_string())?;
            let json: serde_json::Value =
                serde_json::from_str(&text).map_err(|err| format!("not JSON: {err}"))?;
            if json.is_object() {
                Ok(json)
            } else {
                Err("not a JSON object".to_string())
            }
        })();
        match read {
            Ok(json) => Some(json),
            Err(message) => {
                self.problems
                    .push((rel.to_string(), format!("{message}; its settings ignored")));
                None
            }
        }
    }
}

/// A moment.js date format (Obsidian's) as a chrono one; `None` for
/// tokens that cannot name one day (weeks, times) or are unknown.
fn chrono_format(moment: &str) -> Option<String> {
    const TOKENS: [(&str, &str); 12] = [
        ("YYYY", "%Y"),
        ("MMMM", "%B"),
        ("MMM", "%b"),
        ("MM", "%m"),
        ("M", "%-m"),
        ("DD", "%d"),
        ("Do", "%-d"),
        ("D", "%-d"),
        ("dddd", "%A"),
        ("ddd", "%a"),
        ("YY", "%y"),
        ("%", "%%"),
    ];
    let mut out = String::new();
    let mut rest = moment;
    while let Some(c) = rest.chars().next() {
        // `[text]` is literal text in moment.
        if c == '[' {
            let end = rest.find(']')?;
            out.push_str(&rest[1..end].replace('%', "%%"));
            rest = &rest[end + 1..];
            continue;
        }
        if let Some((token, chrono)) = TOKENS.iter().find(|(token, _)| rest.starts_with(token)) {
            // An ordinal day (`Do`) is read once its letters are dropped
            // (see `without_ordinal_suffixes`).
            out.push_str(chrono);
            rest = &rest[token.len()..];
            continue;
        }
        if c.is_ascii_alphabetic() {
            return None;
        }
        out.push(c);
        rest = &rest[c.len_utf8()..];
    }
    Some(out)
}

/// `name` with the letters of ordinal numbers dropped (`March 7th` →
/// `March 7`).
fn without_ordinal_suffixes(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    let mut rest = name;
    while let Some(c) = rest.chars().next() {
        out.push(c);
        rest = &rest[c.len_utf8()..];
        if c.is_ascii_digit() && !rest.starts_with(|d: char| d.is_ascii_digit()) {
            let suffix = rest.get(..2).map(str::to_ascii_lowercase);
            let ends_word = rest[2.min(rest.len())..]
                .chars()
                .next()
                .is_none_or(|after| !after.is_alphabetic());
            if matches!(suffix.as_deref(), Some("st" | "nd" | "rd" | "th")) && ends_word {
                rest = &rest[2..];
            }
        }
    }
    out
}

/// A folder setting as a relative path without slashes at either end;
/// `None` for the vault root.
fn folder(text: &str) -> Option<String> {
    let trimmed = text.trim().trim_matches('/');
    (!trimmed.is_empty() && trimmed != ".").then(|| trimmed.to_string())
}

/// What kind of JSON value `value` is, for a message.
fn json_kind(value: &serde_json::Value) -> &'static str {
    match value {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "true or false",
        serde_json::Value::Number(_) => "a number",
        serde_json::Value::String(_) => "text",
        serde_json::Value::Array(_) => "a list",
        serde_json::Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vault(files: &[(&str, &str)]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for (path, text) in files {
            let path = dir.path().join(path);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }
        dir
    }

    #[test]
    fn templates_excluded_files_and_dailies_are_read() {
        let dir = vault(&[
            (TEMPLATES_FILE, r#"{"folder": "Templates/"}"#),
            (TEMPLATER_FILE, r#"{"templates_folder": "Meta/Templater"}"#),
            (
                APP_FILE,
                r#"{"userIgnoreFilters": ["Archive/", "/^x.*/", "", "old.md"]}"#,
            ),
            (
                DAILY_FILE,
                r#"{"folder": "Journal", "format": "DD.MM.YYYY"}"#,
            ),
        ]);
        let root = dir.path().canonicalize().unwrap();
        let settings = ObsidianSettings::read(&root, &ObsidianRules::default());
        assert_eq!(settings.templates, ["Templates", "Meta/Templater"]);
        assert_eq!(settings.excluded, ["Archive/", "old.md"]);
        assert_eq!(
            settings.daily,
            Some(DailyNotes {
                folder: "Journal".into(),
                format: "DD.MM.YYYY".into()
            })
        );
        assert_eq!(
            settings.read,
            [
                (TEMPLATES_FILE.into(), "templates folder Templates/".into()),
                (
                    TEMPLATER_FILE.into(),
                    "templates folder Meta/Templater/".into()
                ),
                (APP_FILE.into(), "2 excluded-files filters".into()),
                (DAILY_FILE.into(), "dailies DD.MM.YYYY in Journal/".into()),
            ]
        );
        assert_eq!(
            settings.problems,
            [(
                APP_FILE.to_string(),
                "excluded-files filter /^x.*/ is a regular expression; ignored".to_string()
            )]
        );
        assert!(settings.is_left_out("Templates/Book.md"));
        assert!(!settings.is_left_out("Templates/Bases/Books.base"));
        assert!(!settings.is_left_out("Templates.md"));
        assert!(!settings.is_left_out("TemplatesX/a.md"));
        assert!(settings.is_left_out("Meta/Templater/t.md"));
        assert!(settings.is_left_out("Archive/2020/a.md"));
        assert!(settings.is_left_out("old.md"));
        assert!(!settings.is_left_out("Notes/old.md"));
    }

    #[test]
    fn dailies_are_found_by_their_folder_and_format() {
        let daily = |folder: &str, format: &str| ObsidianSettings {
            daily: Some(DailyNotes {
                folder: folder.into(),
                format: format.into(),
            }),
            ..ObsidianSettings::default()
        };
        let journal = daily("Journal", "DD.MM.YYYY");
        assert_eq!(
            journal.daily_date("Journal/14.05.2026.md").as_deref(),
            Some("2026-05-14")
        );
        assert_eq!(journal.daily_date("Journal/31.02.2026.md"), None);
        assert_eq!(journal.daily_date("Other/14.05.2026.md"), None);
        assert_eq!(journal.daily_date("Journal/notes.md"), None);
        let nested = daily("", "YYYY/MM/[Day] D, dddd");
        assert_eq!(
            nested.daily_date("2026/05/Day 4, Monday.md").as_deref(),
            Some("2026-05-04")
        );
        assert_eq!(daily("D", "gggg-[W]ww").daily_date("D/2026-W19.md"), None);
        assert_eq!(chrono_format("YYYY-MM-DD").as_deref(), Some("%Y-%m-%d"));
        let ordinal = daily("Journal", "dddd, MMMM Do YYYY");
        for (name, date) in [
            ("Thursday, March 7th 2024", "2024-03-07"),
            ("Friday, March 1st 2024", "2024-03-01"),
            ("Friday, March 22nd 2024", "2024-03-22"),
            ("Saturday, August 23rd 2025", "2025-08-23"),
        ] {
            assert_eq!(
                ordinal.daily_date(&format!("Journal/{name}.md")).as_deref(),
                Some(date)
            );
        }
        assert_eq!(
            without_ordinal_suffixes("1st, 2nd 3rd 4th 5the"),
            "1, 2 3 4 5the"
        );
        assert_eq!(
            ObsidianSettings::default().daily_date("2026-05-14.md"),
            None
        );
    }

    #[test]
    fn rules_turned_off_read_nothing() {
        let dir = vault(&[
            (TEMPLATES_FILE, r#"{"folder": "Templates"}"#),
            (APP_FILE, r#"{"userIgnoreFilters": ["Archive/"]}"#),
        ]);
        let root = dir.path().canonicalize().unwrap();
        let off = ObsidianRules {
            templates: false,
            excluded_files: false,
            daily_notes: false,
        };
        assert_eq!(
            ObsidianSettings::read(&root, &off),
            ObsidianSettings::default()
        );
    }

    #[test]
    fn malformed_settings_are_problems_never_failures() {
        let dir = vault(&[
            (TEMPLATES_FILE, "{\"folder\": "),
            (APP_FILE, "[1, 2]"),
            (DAILY_FILE, r#"{"folder": 7}"#),
            (TEMPLATER_FILE, r#"{"templates_folder": "/"}"#),
        ]);
        let root = dir.path().canonicalize().unwrap();
        let settings = ObsidianSettings::read(&root, &ObsidianRules::default());
        assert!(settings.templates.is_empty() && settings.excluded.is_empty());
        assert_eq!(
            settings.daily,
            Some(DailyNotes {
                folder: String::new(),
                format: "YYYY-MM-DD".into()
            })
        );
        let problems: Vec<(&str, &str)> = settings
            .problems
            .iter()
            .map(|(p, m)| (p.as_str(), m.as_str()))
            .collect();
        assert_eq!(problems.len(), 3);
        assert_eq!(problems[0].0, TEMPLATES_FILE);
        assert!(problems[0].1.starts_with("not JSON: "), "{problems:?}");
        assert!(problems[0].1.ends_with("; its settings ignored"));
        assert_eq!(
            problems[1],
            (
                TEMPLATER_FILE,
                "`templates_folder` names the vault root; ignored"
            )
        );
        assert_eq!(
            problems[2],
            (APP_FILE, "not a JSON object; its settings ignored")
        );
    }

    #[test]
    fn excluded_files_filters_of_another_type_are_problems() {
        for (json, problem) in [
            (
                r#"{"userIgnoreFilters": "drafts/"}"#,
                "`userIgnoreFilters` is text, not a list of filters; no file is excluded by it",
            ),
            (
                r#"{"userIgnoreFilters": ["Archive/", 7]}"#,
                "excluded-files filter 7 is a number, not text; ignored",
            ),
        ] {
            let dir = vault(&[(APP_FILE, json)]);
            let root = dir.path().canonicalize().unwrap();
            let settings = ObsidianSettings::read(&root, &ObsidianRules::default());
            assert_eq!(
                settings.problems,
                vec![(APP_FILE.to_string(), problem.to_string())],
                "{json}"
            );
        }
    }

    #[test]
    fn a_settings_folder_or_file_that_is_not_a_regular_file_is_a_problem() {
        let dir = vault(&[]);
        std::fs::create_dir_all(dir.path().join(TEMPLATES_FILE)).unwrap();
        let root = dir.path().canonicalize().unwrap();
        let settings = ObsidianSettings::read(&root, &ObsidianRules::default());
        assert_eq!(settings.problems.len(), 1);
        assert_eq!(settings.problems[0].0, TEMPLATES_FILE);
    }
}
