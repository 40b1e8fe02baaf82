//! The note model: what ctxpack knows about one Markdown file.

use std::fmt;
use std::ops::Range;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// Importance tier from the `tier:` field; missing or unknown is `Supporting`.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Tier {
    Core,
    #[default]
    Supporting,
    Peripheral,
}

impl Tier {
    pub fn parse(text: &str) -> Option<Tier> {
        match text.trim().to_lowercase().as_str() {
            "core" => Some(Tier::Core),
            "supporting" => Some(Tier::Supporting),
            "peripheral" => Some(Tier::Peripheral),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Tier::Core => "core",
            Tier::Supporting => "supporting",
            Tier::Peripheral => "peripheral",
        }
    }
}

impl fmt::Display for Tier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TitleSource {
    Frontmatter,
    /// Never produced since index format 4 (the file name wins over a
    /// heading); kept so that records stored by older builds still decode.
    Heading,
    FileName,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SummarySource {
    /// The `summary:` field.
    Frontmatter,
    /// No `summary:` field: the body's first paragraph, cut to 400 characters.
    FirstParagraph,
    /// Neither exists.
    None,
    /// No paragraph either: the names of the note's sections.
    Sections,
    /// No lead: the first sentence of the first section's words.
    Section,
    /// No paragraph before it: a list's first items (`A · B · C`).
    List,
    /// No words, nor two sections: the properties that link to notes
    /// (`categories: People · type: Musicians`).
    Properties,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum UpdatedSource {
    Updated,
    Created,
    FileMtime,
    Unknown,
    /// The file's time, shared by most of the notes dated only by their
    /// files (a checkout's, a copy's): no date
    /// ([`crate::analysis::mark_shared_file_times`]).
    SharedFileTime,
}

/// What ranking needs to know about a note: its frontmatter-derived
/// fields, cheap to keep for every note of a vault.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NoteMeta {
    /// Path relative to the vault root, `/`-separated, with the extension.
    pub path: String,
    pub title: String,
    pub title_source: TitleSource,
    pub aliases: Vec<String>,
    /// Frontmatter tags first, then inline `#tags`, without `#`, de-duplicated.
    pub tags: Vec<String>,
    pub summary: String,
    pub summary_source: SummarySource,
    pub tier: Tier,
    /// Seconds since the Unix epoch, as found: read it through
    /// [`NoteMeta::date`], which leaves out a shared file time.
    pub updated: Option<i64>,
    pub updated_source: UpdatedSource,
    /// For a daily note, its date (`YYYY-MM-DD`): from the file name or a
    /// folder name, else from a `date:` field.
    pub daily: Option<String>,
    /// The share of the note's text, in percent, on lines of links to
    /// other pages (`parse::link_lists`): a ranking prior.
    pub link_lists: u8,
}

impl NoteMeta {
    /// The page name used in wikilinks: the path without `.md`.
    pub fn name(&self) -> &str {
        self.path
            .strip_suffix(".md")
            .or_else(|| self.path.strip_suffix(".MD"))
            .unwrap_or(&self.path)
    }

    /// The file name without extension.
    pub fn stem(&self) -> &str {
        let name = self.name();
        name.rsplit('/').next().unwrap_or(name)
    }

    /// The note's date (seconds since the Unix epoch): its own, else its
    /// file's time unless that is one most of the vault's files share.
    pub fn date(&self) -> Option<i64> {
        match self.updated_source {
            UpdatedSource::SharedFileTime => None,
            _ => self.updated,
        }
    }

    pub fn updated_at(&self) -> Option<DateTime<Utc>> {
        self.date()
            .and_then(|secs| DateTime::from_timestamp(secs, 0))
    }
}

/// One Markdown note of the vault, parsed whole.
#[derive(Clone, Debug)]
pub struct Note {
    pub meta: NoteMeta,
    /// Every frontmatter field, as parsed.
    pub frontmatter: yaml_serde::Mapping,
    /// The frontmatter's other non-empty properties as a reader sees them
    /// (`parse::properties`), in order: not the fields a pack shows in
    /// its own lines, nor Dataview inline fields (the body shows those).
    pub properties: Vec<(String, String)>,
    /// The text after the frontmatter.
    pub body: String,
    pub headings: Vec<Heading>,
    pub blocks: Vec<Block>,
    pub links: Vec<Link>,
    /// Secrets the privacy policy took out of the file (where and what
    /// kind, never the secret).
    pub redactions: Vec<Redaction>,
}

/// A link's context whose start is this names one of the linking note's
/// properties (by its index in [`Note::properties`]), not a stretch of its
/// body: a link written in the frontmatter.
pub(crate) const PROPERTY_CONTEXT: u32 = u32::MAX;

impl Note {
    pub fn name(&self) -> &str {
        self.meta.name()
    }

    /// The text around a link, from the context the link table records: a
    /// stretch of the body, or a property shown as `key: value`.
    pub fn link_context(&self, (start, end): (u32, u32)) -> String {
        if start == PROPERTY_CONTEXT {
            return self
                .properties
                .get(end as usize)
                .map(|(key, value)| format!("{key}: {value}"))
                .unwrap_or_default();
        }
        self.body
            .get(start as usize..end as usize)
            .unwrap_or_default()
            .to_string()
    }

    pub fn block_text(&self, block: &Block) -> &str {
        &self.body[block.range.clone()]
    }

    /// Heading-aware sections, in document order: the text before the first
    /// heading (if any), then each heading with the text up to the next
    /// heading of any level. A note has at most [`MAX_SECTIONS`]: the last
    /// one then runs to the end of the body, its later headings and all.
    pub fn sections(&self) -> Vec<Section> {
        let first = self
            .headings
            .first()
            .map_or(self.body.len(), |h| h.range.start);
        let preamble = !self.body[..first].trim().is_empty();
        let headed = self
            .headings
            .len()
            .min(MAX_SECTIONS - usize::from(preamble));
        let mut sections = Vec::with_capacity(headed + 1);
        if preamble {
            sections.push(Section {
                heading: None,
                range: 0..first,
            });
        }
        for (i, heading) in self.headings[..headed].iter().enumerate() {
            let end = if i + 1 == headed {
                self.body.len()
            } else {
                self.headings[i + 1].range.start
            };
            sections.push(Section {
                heading: Some(i),
                range: heading.range.start..end.max(heading.range.start),
            });
        }
        sections
    }

    /// The body span of heading `idx`'s section with its subsections: up
    /// to the next heading of the same or a higher level, as Obsidian reads
    /// a link or an embed to a heading.
    pub fn heading_span(&self, idx: usize) -> std::ops::Range<usize> {
        let Some(heading) = self.headings.get(idx) else {
            return self.body.len()..self.body.len();
        };
        let end = self.headings[idx + 1..]
            .iter()
            .find(|next| next.level <= heading.level)
            .map_or(self.body.len(), |next| next.range.start);
        heading.range.start..end.max(heading.range.start)
    }

    /// The first level-1 heading when it says something other than the
    /// title: searchable (as a heading), never the title itself.
    pub fn heading_title(&self) -> Option<&str> {
        let h1 = self.headings.iter().find(|h| h.level == 1)?;
        let differs = crate::text::fold(&h1.text) != crate::text::fold(&self.meta.title)
            && !h1.text.trim().is_empty();
        differs.then_some(h1.text.as_str())
    }

    /// The titles of the headings enclosing heading `idx`, outermost first,
    /// ending with its own.
    pub fn heading_path(&self, idx: usize) -> Vec<&str> {
        let mut path = Vec::new();
        let mut current = self.headings.get(idx);
        while let Some(heading) = current {
            path.push(heading.text.as_str());
            current = heading.parent.and_then(|p| self.headings.get(p));
        }
        path.reverse();
        path
    }
}

/// The most sections a note is cut into. Each is a document of the
/// full-text index and an entry of the catalog (about 1.3 kB of memory
/// while indexing): a 9 MB note of `# a` lines, 2.25 million headings, took
/// 3 GB to index. Far above any note written by hand (a daily log of three
/// headings a day for nine years); past it, the last section holds the
/// rest of the note, still searched and packed.
pub(crate) const MAX_SECTIONS: usize = 10_000;

/// A stretch of the body under one heading (or before the first).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Section {
    /// Index into `Note::headings`; `None` for the text before any heading.
    pub heading: Option<usize>,
    /// Byte range in the body, from the heading line to the next heading.
    pub range: std::ops::Range<usize>,
}

/// A problem found while reading the vault; the run goes on.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Diagnostic {
    pub path: String,
    pub message: String,
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path, self.message)
    }
}

/// A note's fields as the relevance pass compares them: folded once.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MatchKeys {
    /// Title, then aliases.
    pub names: Vec<String>,
    pub tags: Vec<String>,
    /// The `summary:` field (empty when the summary came from the body:
    /// the rule reads the field, and the full-text arm covers the body).
    pub summary: String,
    /// The note's `index.md` entry description.
    pub description: String,
}

impl MatchKeys {
    pub fn new(note: &NoteMeta, description: Option<&str>) -> MatchKeys {
        MatchKeys {
            names: std::iter::once(&note.title)
                .chain(&note.aliases)
                .map(|name| crate::text::fold(name))
                .collect(),
            tags: note.tags.iter().map(|t| crate::text::fold(t)).collect(),
            summary: match note.summary_source {
                SummarySource::Frontmatter => crate::text::fold(&note.summary),
                _ => String::new(),
            },
            description: description.map(crate::text::fold).unwrap_or_default(),
        }
    }
}

/// The resolved links of a vault as adjacency lists (sorted, without
/// repeats or self-links), by note index.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LinkGraph {
    out: Vec<Vec<u32>>,
    incoming: Vec<Vec<u32>>,
}

impl LinkGraph {
    /// The graph of `notes` notes from `(source, target)` links; links
    /// outside `0..notes` and self-links are ignored.
    pub fn from_links(notes: usize, links: impl IntoIterator<Item = (usize, usize)>) -> LinkGraph {
        let mut out: Vec<Vec<u32>> = vec![Vec::new(); notes];
        let mut incoming: Vec<Vec<u32>> = vec![Vec::new(); notes];
        for (source, target) in links {
            if source < notes && target < notes && source != target {
                out[source].push(target as u32);
                incoming[target].push(source as u32);
            }
        }
        for list in out.iter_mut().chain(incoming.iter_mut()) {
            list.sort_unstable();
            list.dedup();
        }
        LinkGraph { out, incoming }
    }

    pub fn notes(&self) -> usize {
        self.out.len()
    }

    pub fn links_to(&self, note: usize) -> &[u32] {
        self.out.get(note).map_or(&[], Vec::as_slice)
    }

    pub fn linked_from(&self, note: usize) -> &[u32] {
        self.incoming.get(note).map_or(&[], Vec::as_slice)
    }

    /// Distinct notes linking to or linked from `note`.
    pub fn degree(&self, note: usize) -> usize {
        self.links_to(note).len() + self.linked_from(note).len()
    }
}

// The parts of a note body, as the Markdown parser finds them; plain data
// with byte ranges into the body text.

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Heading {
    pub level: u8,
    pub text: String,
    /// Byte range of the heading line(s).
    pub range: Range<usize>,
    /// Index of the enclosing heading (the nearest earlier one of lower level).
    pub parent: Option<usize>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum BlockKind {
    Heading,
    Paragraph,
    List,
    Code,
    Quote,
    Table,
    Html,
    Rule,
    Other,
}

/// A top-level block: its range covers whole lines.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Block {
    pub kind: BlockKind,
    pub range: Range<usize>,
    /// For heading blocks, the index into `BodyAnalysis::headings`.
    pub heading: Option<usize>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum LinkKind {
    /// `[[target]]`
    Wiki,
    /// `![[target]]`
    Embed,
    /// `[text](relative/path.md)`
    Markdown,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Link {
    pub kind: LinkKind,
    /// The note named, as written (no `.md` for wikilinks); empty for a link
    /// to a heading of the same note.
    pub target: String,
    pub heading: Option<String>,
    pub block: Option<String>,
    pub alias: Option<String>,
    /// Byte range of the whole link in the body.
    pub range: Range<usize>,
}

impl Link {
    /// The text a reader sees where the link stands.
    pub fn display_text(&self) -> String {
        if let Some(alias) = &self.alias {
            return alias.clone();
        }
        let mut text = self.target.clone();
        if let Some(heading) = &self.heading {
            if !text.is_empty() {
                text.push_str(" > ");
            }
            text.push_str(heading);
        }
        text
    }
}

/// One secret taken out of a note: where it was and what kind, never the
/// secret itself.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Redaction {
    /// 1-based line in the file.
    pub line: u32,
    pub kind: String,
}
