//! The operations a face offers that are more than a ranking: a pack with
//! its `log.md` line, a note (or a part of it) read for a client, feedback
//! recorded. The CLI and the MCP server call these and only print what
//! they return.

use std::path::PathBuf;

use chrono::SecondsFormat;
use serde::Serialize;

use super::{PackRequest, Session, SessionError, role_files};
use crate::pack::Pack;
use crate::pack::style::Shape;
use crate::request::{Spelling, check_pack};
use crate::vault::log;

/// A pack made, and whether its `log.md` line was written.
#[derive(Debug)]
pub struct LoggedPack {
    pub pack: Pack,
    /// The line could not be appended (the pack is still good).
    pub log_error: Option<LogError>,
}

/// Why the `log.md` line of a pack was not written.
#[derive(Debug)]
pub struct LogError {
    /// The log file.
    pub path: PathBuf,
    pub error: std::io::Error,
}

/// A note as a client asks to read it: the whole of it, the section under
/// one heading, or a range of lines.
#[derive(Clone, Debug, Default)]
pub struct NoteRequest {
    /// The note's path relative to the vault.
    pub path: String,
    /// Only the section under this heading (matched ignoring case).
    pub heading: Option<String>,
    /// Only these lines, as `FROM-TO` (1-based, inclusive).
    pub lines: Option<String>,
}

/// The feedback a note holds after [`Session::mark_useful`].
pub(crate) use crate::index::feedback::Counts as FeedbackCounts;

impl Session {
    /// Packs `request` in `shape` and, when `log` is set and the vault is a
    /// folder this process may write (not a store's), appends the pack's
    /// line to the vault's `log.md`, stamped with the pack's time, as the
    /// vault's `log:` setting says (by default only to a `log.md` that
    /// already exists).
    pub fn pack_and_log(
        &self,
        request: &PackRequest,
        shape: &Shape,
        log: bool,
    ) -> Result<LoggedPack, SessionError> {
        let pack = self.pack_checked(request, shape)?;
        let log_error = if log {
            self.log_pack(request, &pack)
        } else {
            None
        };
        Ok(LoggedPack { pack, log_error })
    }

    /// The pack of [`pack_and_log`](Self::pack_and_log), not logged: it
    /// writes nothing.
    pub(crate) fn pack_checked(
        &self,
        request: &PackRequest,
        shape: &Shape,
    ) -> Result<Pack, SessionError> {
        check_pack(request, Spelling::Params)?;
        if matches!(request.mode, crate::pack::PackMode::Topic(_)) {
            self.config_pins()?;
        }
        let mut pack = self.pack_shaped(request, shape)?;
        pack.warnings.extend(self.empty_vault_warning());
        if pack.bundle.is_empty() {
            pack.warnings
                .push(header_does_not_fit(request.options.budget));
        } else if pack.pages.is_empty() && pack.dailies.is_empty() && pack.candidates > 0 {
            pack.warnings
                .push(no_page_fits(request.options.budget, pack.candidates));
        }
        Ok(pack)
    }

    /// Appends `pack`'s line to the vault's `log.md` as
    /// [`pack_and_log`](Self::pack_and_log) does; what went wrong, if it
    /// could not.
    pub(crate) fn log_pack(&self, request: &PackRequest, pack: &Pack) -> Option<LogError> {
        // A vault read from a store is not this process's to write into.
        if self.is_from_store() {
            return None;
        }
        let timestamp = request
            .options
            .generated_at
            .to_rfc3339_opts(SecondsFormat::Secs, true);
        let line = crate::pack::log_line(pack, &timestamp);
        log::append_as(&self.root, &line, self.vault.policy().file.log)
            .err()
            .map(|error| LogError {
                path: self.root.join(log::LOG_FILE),
                error,
            })
    }

    /// The notes a client may read, in the vault's order.
    pub fn listed_notes(&self) -> impl Iterator<Item = &crate::note::NoteMeta> {
        self.vault
            .metas
            .iter()
            .filter(|m| self.vault.is_listed(&m.path))
    }

    /// A note's path (checked to stay inside the vault) and its text as
    /// the privacy policy prepares it. Every path that is not a readable
    /// listed note gets the one message of [`no_note`], so a client cannot
    /// tell a private note from a missing one.
    pub fn note_text(&self, path: &str) -> Result<(String, String), SessionError> {
        let relative = crate::vault::inside_vault(&self.root, path)
            .map_err(|_| SessionError::no_note(path))?;
        // `.md` may be left out, as with `--note` and `mark_useful`; a
        // note's name (`Kevin Kelly`) finds it as `[[Kevin Kelly]]` would.
        let relative = [relative.clone(), format!("{relative}.md")]
            .into_iter()
            .find(|path| self.vault.is_listed(path))
            .or_else(|| self.listed_note_named(path))
            .ok_or_else(|| self.with_suggestions(SessionError::no_note(path), path))?;
        if !self.still_listed(&relative) {
            return Err(SessionError::no_note(path));
        }
        let Some(prepared) = self.vault.read_prepared(&relative) else {
            return Err(SessionError::no_note(path));
        };
        let text = match relative.as_str() {
            // Their lines may name notes a client must not learn of.
            "index.md" | "hot.md" => role_files::without_unlisted_links(&self.vault, &prepared),
            _ => prepared.text,
        };
        Ok((relative, text))
    }

    /// Whether `relative` is still a note the vault lists under the rules
    /// on disk now: a long-lived session (`serve`) learns of a new
    /// `.okignore`, policy or Obsidian exclusion from its watcher a moment
    /// later, and a note read in that moment must not be one they hide.
    /// Walks only the folders on the way to it. A vault read from a store
    /// has no folder to check.
    fn still_listed(&self, relative: &str) -> bool {
        if self.vault.is_sourced() {
            return true;
        }
        let Ok(policy) = crate::privacy::Policy::load(&self.root) else {
            return false;
        };
        if policy.fingerprint() != self.vault.policy().fingerprint() {
            return false;
        }
        let scope = crate::vault::walk::Scope::new(vec![relative.to_string()]);
        crate::vault::walk::walk_scope(&self.root, self.vault.hidden(), &scope)
            .is_none_or(|walked| walked.files.iter().any(|found| found.rel_path == relative))
    }

    /// The listed note that `[[given]]` would link to, if any: a note
    /// named without its folder or extension, as Obsidian users and the
    /// links of a pack name notes.
    pub(crate) fn listed_note_named(&self, given: &str) -> Option<String> {
        let name = given.trim().trim_start_matches("[[").trim_end_matches("]]");
        let name = name.strip_suffix(".md").unwrap_or(name);
        if name.is_empty() || name.len() > MAX_SUGGESTED_NAME {
            return None;
        }
        let link = crate::parse::markdown::analyze(&format!("[[{name}]]"))
            .links
            .into_iter()
            .next()?;
        let note = self.vault.resolve("", &link)?;
        let path = &self.vault.metas.get(note)?.path;
        self.vault.is_listed(path).then(|| path.clone())
    }

    /// `error`, with the listed notes whose paths or names are nearest to
    /// `given` (at most three; only notes a client may read, so nothing
    /// is told of a private one).
    pub(crate) fn with_suggestions(&self, error: SessionError, given: &str) -> SessionError {
        let given = given.trim().to_lowercase();
        let given = given.strip_suffix(".md").unwrap_or(&given);
        if given.is_empty() || given.len() > MAX_SUGGESTED_NAME {
            return error;
        }
        let bound = (given.chars().count() / 4).max(1);
        let mut nearest: Vec<(usize, &str)> = self
            .listed_notes()
            .filter_map(|meta| {
                let path = meta.path.to_lowercase();
                let path = path.strip_suffix(".md").unwrap_or(&path);
                let name = path.rsplit('/').next().unwrap_or(path);
                let distance =
                    strsim::levenshtein(given, path).min(strsim::levenshtein(given, name));
                (distance <= bound).then_some((distance, meta.path.as_str()))
            })
            .collect();
        if nearest.is_empty() {
            return error;
        }
        nearest.sort();
        let nearest = nearest
            .into_iter()
            .take(3)
            .map(|(_, path)| path.to_string())
            .collect();
        SessionError::Suggested(Box::new(error), nearest)
    }

    /// The text of `request`: the note, its section under a heading, or a
    /// range of its lines (a heading wins over lines).
    pub fn get_note(&self, request: &NoteRequest) -> Result<String, SessionError> {
        let (relative, text) = self.note_text(&request.path)?;
        if let Some(heading) = &request.heading {
            let (note, _) = crate::parse::parse_note(&relative, &text, None);
            let wanted = crate::text::fold(heading);
            // With its subsections, as the pack embeds a heading.
            return match (0..note.headings.len())
                .find(|&h| crate::text::fold(&note.headings[h].text) == wanted)
            {
                Some(heading) => Ok(note.body[note.heading_span(heading)].trim_end().to_string()),
                None => Err(SessionError::NoHeading {
                    heading: heading.clone(),
                    note: relative,
                }),
            };
        }
        if let Some(range) = &request.lines {
            let Some((from, to)) = parse_line_range(range) else {
                return Err(SessionError::Lines(range.clone()));
            };
            let selected: Vec<&str> = text.lines().skip(from - 1).take(to + 1 - from).collect();
            return Ok(selected.join("\n"));
        }
        Ok(text)
    }

    /// Records that the note at `path` helped (or did not); the feedback
    /// lives in the index, never in the vault.
    pub fn mark_useful(
        &self,
        path: &str,
        useful: bool,
    ) -> Result<(String, FeedbackCounts), MarkError> {
        let relative = crate::vault::inside_vault(&self.root, path)
            .map_err(|_| MarkError::NoNote(path.to_string()))?;
        // `.md` may be left out, as with `--note`.
        let relative = [relative.clone(), format!("{relative}.md")]
            .into_iter()
            .find(|path| self.vault.metas.search_path(path).is_ok() && self.vault.is_listed(path))
            .ok_or_else(|| MarkError::NoNote(path.to_string()))?;
        let Some(store) = self.store.as_deref() else {
            return Err(MarkError::NoIndex);
        };
        let counts = store
            .record_feedback(&relative, useful)
            .map_err(|err| MarkError::Record(format!("{err:#}")))?;
        Ok((relative, counts))
    }

    /// What the MCP `status` tool reports of this session.
    pub fn status(&self) -> SessionStatus {
        let store = self.store.as_deref();
        SessionStatus {
            vault: self.root.clone(),
            index: store.map(|s| s.describe()),
            notes: self.vault.metas.len(),
            sections: store.map(|s| s.section_count()),
            index_bytes: store.and_then(|s| s.embedded()).map(|i| i.size_bytes()),
            arms: self.arm_names(),
            index_error: self.index_error.clone(),
            diagnostics: self.vault.diagnostics.clone(),
            dates: crate::analysis::DateSources::of(self.vault.metas.iter()),
        }
    }

    /// What `status` reports of a vault in a PostgreSQL store (as last
    /// synced); `None` when the session has no store.
    pub fn store_status(&self) -> Option<StoreStatus> {
        let store = self.store.as_deref()?;
        Some(StoreStatus {
            vault: self.root.clone(),
            store: store.describe(),
            notes: self.vault.metas.len(),
            sections: store.section_count(),
            arms: self.arm_names(),
            semantic: self.semantic_status.clone(),
            feedback_notes: self.feedback.notes.len(),
            diagnostics: self.vault.diagnostics.clone(),
            dates: crate::analysis::DateSources::of(self.vault.metas.iter()),
        })
    }

    /// The text of the MCP `context_pack` prompt: the markdown pack for
    /// `topic` at `budget` tokens (the default when `None`; a budget the
    /// client wrote that is not a number comes as 0, refused).
    pub fn prompt_pack(
        &self,
        topic: Option<&str>,
        budget: Option<usize>,
        now: chrono::DateTime<chrono::Utc>,
    ) -> Result<String, SessionError> {
        let topic = match topic.map(str::trim) {
            Some(topic) if !topic.is_empty() => topic,
            _ => return Err(SessionError::PromptTopic),
        };
        crate::request::check_query_length("topic", topic)?;
        let budget = budget.unwrap_or(crate::request::DEFAULT_BUDGET);
        if !(1..=crate::request::MAX_BUDGET).contains(&budget) {
            return Err(SessionError::PromptBudget);
        }
        let request = PackRequest::new(
            crate::pack::PackMode::Topic(topic.to_string()),
            crate::pack::PackOptions::new(budget, crate::tokens::Tokenizer::Chars4, now),
        );
        Ok(self.pack(&request).bundle)
    }
}

/// Why a note was not marked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MarkError {
    /// Not a note a client may read (the path as given).
    NoNote(String),
    /// No index to keep the vote in.
    NoIndex,
    /// The store failed to record it.
    Record(String),
}

impl MarkError {
    /// Whether the user can fix it (a face exits 2 for it, not 1).
    pub fn is_usage(&self) -> bool {
        !matches!(self, MarkError::Record(_))
    }
}

impl std::fmt::Display for MarkError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            MarkError::NoNote(given) => f.write_str(&no_note(given)),
            MarkError::NoIndex => f.write_str("no index to keep feedback in"),
            MarkError::Record(why) => write!(f, "cannot record feedback: {why}"),
        }
    }
}

impl std::error::Error for MarkError {}

/// What the MCP `status` tool reports. The fields are in the order the
/// tool has always printed them.
#[derive(Clone, Debug, Serialize)]
pub struct SessionStatus {
    pub vault: PathBuf,
    /// The store, described.
    pub index: Option<String>,
    pub notes: usize,
    pub sections: Option<u64>,
    /// The embedded index's size on disk.
    pub index_bytes: Option<u64>,
    pub arms: Vec<&'static str>,
    pub index_error: Option<String>,
    pub diagnostics: Vec<crate::note::Diagnostic>,
    /// How the notes are dated (what recent order and date filters use).
    pub dates: crate::analysis::DateSources,
}

/// What `status` reports of a vault in a PostgreSQL store.
#[derive(Clone, Debug, Serialize)]
pub struct StoreStatus {
    pub vault: PathBuf,
    pub store: String,
    pub notes: usize,
    pub sections: u64,
    pub arms: Vec<&'static str>,
    pub semantic: String,
    pub feedback_notes: usize,
    pub diagnostics: Vec<crate::note::Diagnostic>,
    /// How the notes are dated (what recent order and date filters use).
    pub dates: crate::analysis::DateSources,
}

/// The one message for a path that is not a note a client may read.
pub(crate) fn no_note(given: &str) -> String {
    format!(
        "no note '{}' in the vault (give a note's path relative to the vault; hidden files, \
         skipped folders such as _raw, agent files, log.md, ignored, private and non-Markdown \
         files are never read)",
        crate::text::truncate_chars(given, 200)
    )
}

fn parse_line_range(text: &str) -> Option<(usize, usize)> {
    let (from, to) = text.split_once('-')?;
    let (from, to): (usize, usize) = (from.trim().parse().ok()?, to.trim().parse().ok()?);
    (from >= 1 && from <= to).then_some((from, to))
}

/// Why a pack is empty when its budget cannot hold even its header.
/// Names longer than this are neither resolved nor matched for
/// suggestions: bounded work for any argument.
const MAX_SUGGESTED_NAME: usize = 300;

pub(crate) fn header_does_not_fit(budget: usize) -> String {
    format!("a budget of {budget} tokens is too small for even the pack header")
}

/// The warning for a pack whose header fits but none of its pages: an
/// empty pack that says nothing reads as "nothing matched".
pub(crate) fn no_page_fits(budget: usize, candidates: usize) -> String {
    let notes = if candidates == 1 {
        "the one note that matches".to_string()
    } else {
        format!("any of the {candidates} notes that match")
    };
    format!(
        "a budget of {budget} tokens holds the header but not even a summary of {notes}: raise the budget"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_must_stay_inside_the_vault() {
        let root = std::path::Path::new("/nonexistent-vault");
        assert_eq!(
            crate::vault::inside_vault(root, "a/b.md").unwrap(),
            "a/b.md"
        );
        assert_eq!(
            crate::vault::inside_vault(root, "./a/./b.md").unwrap(),
            "a/b.md"
        );
        assert!(crate::vault::inside_vault(root, "../secret.md").is_err());
        assert!(crate::vault::inside_vault(root, "a/../../x.md").is_err());
        assert_eq!(
            crate::vault::inside_vault(root, "a/../a/b.md").unwrap(),
            "a/b.md"
        );
        assert!(crate::vault::inside_vault(root, "/etc/passwd").is_err());
        assert!(crate::vault::inside_vault(root, "  ").is_err());
    }

    /// A vault of two notes, opened without an index.
    fn session() -> (tempfile::TempDir, Session) {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("raft.md"),
            "---\ntitle: Raft\n---\n# Raft\n\nintro line\n\n## Leader Election\n\nvotes from a quorum\n\n### Terms\n\nterm numbers\n\n## Log\n\nentries\n",
        )
        .unwrap();
        std::fs::write(dir.path().join("paxos.md"), "# Paxos\n\nballots\n").unwrap();
        let root = dir.path().canonicalize().unwrap();
        let vault = crate::vault::Vault::load(&root, &Default::default()).unwrap();
        (dir, Session::without_index(vault))
    }

    fn note(path: &str, heading: Option<&str>, lines: Option<&str>) -> NoteRequest {
        NoteRequest {
            path: path.into(),
            heading: heading.map(str::to_string),
            lines: lines.map(str::to_string),
        }
    }

    /// The note, or the message of the error.
    fn get_note(session: &Session, request: &NoteRequest) -> Result<String, String> {
        session.get_note(request).map_err(|err| err.to_string())
    }

    #[test]
    fn get_note_selects_a_section_or_lines() {
        let (_dir, session) = session();
        assert_eq!(
            get_note(&session, &note("raft.md", Some("leader election"), None)),
            Ok(
                "## Leader Election\n\nvotes from a quorum\n\n### Terms\n\nterm numbers"
                    .to_string()
            )
        );
        // A section runs to the next heading of its level or higher.
        assert_eq!(
            get_note(&session, &note("raft.md", Some("terms"), None)),
            Ok("### Terms\n\nterm numbers".to_string())
        );
        assert_eq!(
            get_note(&session, &note("raft.md", None, Some("4-6"))),
            Ok("# Raft\n\nintro line".to_string())
        );
        assert_eq!(
            get_note(&session, &note("raft.md", Some("Nope"), None)),
            Err("no heading 'Nope' in raft.md".to_string())
        );
        let long = "x".repeat(1_000_000);
        let err = get_note(&session, &note("raft.md", Some(&long), None)).unwrap_err();
        assert!(err.len() < 300, "{} bytes", err.len());
        assert_eq!(
            get_note(&session, &note("raft.md", None, Some("3-1"))),
            Err(
                "lines must be 'FROM-TO', two line numbers with 1 <= FROM <= TO, got '3-1'"
                    .to_string()
            )
        );
        assert_eq!(
            get_note(&session, &note("../raft.md", None, None)),
            Err(no_note("../raft.md"))
        );
        assert_eq!(
            get_note(&session, &note("paxos.md", None, None)),
            Ok("# Paxos\n\nballots\n".to_string())
        );
    }

    #[test]
    fn a_note_hidden_since_the_session_opened_is_not_read() {
        let (dir, session) = session();
        let paxos = note("paxos.md", None, None);
        assert!(get_note(&session, &paxos).is_ok());
        // Before a watcher could tell the session: an `.okignore`, then a
        // policy that changes what is private.
        std::fs::write(dir.path().join(".okignore"), "paxos.md\n").unwrap();
        assert_eq!(get_note(&session, &paxos), Err(no_note("paxos.md")));
        std::fs::remove_file(dir.path().join(".okignore")).unwrap();
        assert!(get_note(&session, &paxos).is_ok());
        std::fs::write(
            dir.path().join(".ctxpack.yaml"),
            "private:\n  headings: [Log]\n",
        )
        .unwrap();
        assert_eq!(get_note(&session, &paxos), Err(no_note("paxos.md")));
    }

    fn topic_request(graph_depth: usize, recent: bool) -> PackRequest {
        let at = "2026-03-04T05:06:07Z".parse().unwrap();
        let mut input = crate::request::PackInput::new(Spelling::Params, at);
        input.budget = 2000;
        if recent {
            input.recent = true;
        } else {
            input.topic = Some("raft".into());
        }
        let mut request = input.validate().unwrap();
        request.options.graph.depth = graph_depth;
        request
    }

    #[test]
    fn a_pack_writes_its_log_line_only_when_asked() {
        let (dir, session) = session();
        let shape = Shape::Style(Default::default());
        let log = dir.path().join("log.md");
        let quiet = session
            .pack_and_log(&topic_request(0, false), &shape, false)
            .unwrap();
        assert!(quiet.log_error.is_none());
        assert!(!log.exists());
        // By default (`log: if-present`) a vault without log.md gets none.
        let absent = session
            .pack_and_log(&topic_request(0, false), &shape, true)
            .unwrap();
        assert!(absent.log_error.is_none());
        assert!(!log.exists());
        std::fs::write(&log, "").unwrap();
        let logged = session
            .pack_and_log(&topic_request(0, false), &shape, true)
            .unwrap();
        assert!(logged.log_error.is_none());
        assert_eq!(quiet.pack.bundle, logged.pack.bundle);
        let line = crate::pack::log_line(&logged.pack, "2026-03-04T05:06:07Z");
        assert!(
            line.starts_with("- [2026-03-04T05:06:07Z] CONTEXT_PACK topic=\"raft\" budget=2000 ")
        );
        assert_eq!(
            std::fs::read_to_string(&log).unwrap(),
            format!("# Wiki Log\n\n{line}\n")
        );
        // A topic's Markdown is escaped: no link, tag or open comment lands
        // in the vault's log.
        let mut hostile = logged.pack.clone();
        hostile.topic = Some("zebra ![[a]] #private %% <!-- $x$ `y` \"q\"".into());
        assert_eq!(
            crate::pack::log_line(&hostile, "t")
                .split(" budget=")
                .next(),
            Some(
                "- [t] CONTEXT_PACK topic=\"zebra !\\[\\[a\\]\\] \\#private \\%\\% \\<!-- \\$x\\$ \\`y\\` \\\"q\\\"\""
            )
        );
    }

    /// What `Session::pack` would silently ignore, the operation refuses.
    #[test]
    fn a_recent_pack_with_a_graph_depth_is_refused() {
        let (dir, session) = session();
        let refused = session
            .pack_and_log(
                &topic_request(1, true),
                &Shape::Style(Default::default()),
                true,
            )
            .unwrap_err();
        assert!(matches!(refused, SessionError::Request(_)), "{refused:?}");
        assert_eq!(
            refused.to_string(),
            "graph_depth needs a query, not recent=true"
        );
        assert!(!dir.path().join("log.md").exists());
    }

    #[test]
    fn line_ranges() {
        assert_eq!(parse_line_range("2-5"), Some((2, 5)));
        assert_eq!(parse_line_range(" 3 - 3 "), Some((3, 3)));
        assert_eq!(parse_line_range("0-5"), None);
        assert_eq!(parse_line_range("5-2"), None);
        assert_eq!(parse_line_range("x"), None);
    }

    #[test]
    fn the_status_names_the_vault_its_notes_and_arms_in_the_tools_order() {
        let (dir, session) = session();
        let status = serde_json::to_value(session.status()).unwrap();
        let root = dir.path().canonicalize().unwrap();
        assert_eq!(
            status,
            serde_json::json!({
                "vault": root,
                "index": null,
                "notes": 2,
                "sections": null,
                "index_bytes": null,
                "arms": ["frontmatter"],
                "index_error": "no index",
                "diagnostics": [],
                "dates": {"own": 0, "file_time": 2, "shared_file_time": 0, "none": 0},
            })
        );
        assert!(session.store_status().is_none());
    }

    #[test]
    fn the_prompt_packs_a_topic_and_refuses_what_the_tool_refuses() {
        let (_dir, session) = session();
        let now = chrono::DateTime::UNIX_EPOCH;
        let text = session.prompt_pack(Some("  raft "), None, now).unwrap();
        let request = PackRequest::new(
            crate::pack::PackMode::Topic("raft".into()),
            crate::pack::PackOptions::new(
                crate::request::DEFAULT_BUDGET,
                crate::tokens::Tokenizer::Chars4,
                now,
            ),
        );
        assert_eq!(text, session.pack(&request).bundle);
        assert!(text.contains("## [[raft]]"), "{text}");
        for topic in [None, Some(" ")] {
            assert_eq!(
                session
                    .prompt_pack(topic, None, now)
                    .map_err(|e| e.to_string()),
                Err("the context_pack prompt needs a topic".to_string())
            );
        }
        let too_big = crate::request::MAX_BUDGET + 1;
        for budget in [0, too_big] {
            assert_eq!(
                session
                    .prompt_pack(Some("raft"), Some(budget), now)
                    .map_err(|e| e.to_string()),
                Err(format!(
                    "budget must be a whole number between 1 and {}",
                    crate::request::MAX_BUDGET
                ))
            );
        }
        let long = "x".repeat(crate::retrieve::query::MAX_QUERY_CHARS + 1);
        assert!(
            session
                .prompt_pack(Some(&long), None, now)
                .unwrap_err()
                .to_string()
                .starts_with("topic is ")
        );
    }

    #[test]
    fn marking_finds_the_note_with_or_without_md_and_needs_an_index() {
        let (_dir, session) = session();
        // Without an index the vote has nowhere to go; a note that is not
        // one is refused first.
        assert_eq!(session.mark_useful("raft", true), Err(MarkError::NoIndex));
        assert_eq!(
            session.mark_useful("raft.md", true),
            Err(MarkError::NoIndex)
        );
        for missing in ["nope.md", "raft.md.md", "../raft.md"] {
            let err = session.mark_useful(missing, true).unwrap_err();
            assert_eq!(err, MarkError::NoNote(missing.into()));
            assert_eq!(err.to_string(), no_note(missing));
            assert!(err.is_usage());
        }
        assert_eq!(
            MarkError::NoIndex.to_string(),
            "no index to keep feedback in"
        );
        let failed = MarkError::Record("disk full".into());
        assert_eq!(failed.to_string(), "cannot record feedback: disk full");
        assert!(!failed.is_usage());
    }
}
