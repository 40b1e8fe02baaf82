//! Source kinds: each turns part of the project into items, reading only
//! the fields its purpose may see and recording the ones it may not.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use serde::Serialize;

use super::doc::{self, Doc, Outline};
use super::error::ProjectError;
use super::project::{Bindings, Project, ReadError};
use super::recipe::{CardScope, Keep, Layer, Recipe, SourceKind, SourceSpec};
use super::schema::{AiContext, Schemas};
use crate::parse::markdown::{self, LinkKind};
use crate::retrieve::RankOptions;
use crate::session::{IndexChoice, Session};
use crate::text::fold;

/// One piece of a pack: a field of an entity, a scene, a file.
#[derive(Clone, Debug)]
pub(super) struct Item {
    /// Identity across agents: the same key is the same content.
    pub key: String,
    pub layer: Layer,
    pub source: String,
    pub source_title: String,
    /// The entity heading the item sits under.
    pub group: Option<String>,
    /// The field's label, shown in bold above the text.
    pub label: Option<String>,
    pub text: String,
    /// Which end survives truncation (L1).
    pub keep: Keep,
    /// Degraded earlier when lower (the source's priority, then position).
    pub priority: (i32, i64),
}

impl Item {
    /// The item's name in reports.
    pub(super) fn display(&self) -> String {
        match (&self.group, &self.label) {
            (Some(group), Some(label)) => format!("{group} / {label}"),
            (Some(group), None) => group.clone(),
            (None, Some(label)) => format!("{} / {label}", self.source_title),
            (None, None) => self.source_title.clone(),
        }
    }
}

/// A field left out because its purpose may not see it.
#[derive(Clone, Debug, Serialize, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct Hidden {
    #[serde(skip)]
    pub key: String,
    #[serde(rename = "type")]
    pub type_name: String,
    pub field: String,
    pub entity: String,
    pub rule: String,
    pub purpose: String,
}

/// Why a source or some of its content is not in a pack.
#[derive(Clone, Copy, Debug, Serialize, PartialEq, Eq, PartialOrd, Ord)]
#[serde(rename_all = "snake_case")]
pub enum Reason {
    NotAuthorized,
    NotRelevant,
    TokenBudget,
    /// The file could not be read or parsed; it was skipped.
    Unreadable,
    /// The privacy policy keeps the file out.
    Private,
}

impl Reason {
    pub fn name(self) -> &'static str {
        match self {
            Reason::NotAuthorized => "not_authorized",
            Reason::NotRelevant => "not_relevant",
            Reason::TokenBudget => "token_budget",
            Reason::Unreadable => "unreadable",
            Reason::Private => "private",
        }
    }
}

/// One line of the source-level report.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct Omitted {
    pub source: String,
    pub reason: Reason,
    /// How many entities (unknown for libraries that were never opened).
    pub count: Option<usize>,
    pub detail: String,
    pub items: Vec<String>,
}

/// What every source reads from.
pub(super) struct Context<'a> {
    pub project: &'a Project,
    pub recipe: &'a Recipe,
    pub schemas: &'a Schemas,
    pub bindings: &'a Bindings,
    pub bindings_path: &'a str,
    pub outline: &'a Outline,
    pub outline_path: &'a str,
    pub work: &'a str,
    pub unit: i64,
    pub candidate: Option<&'a str>,
    pub references: &'a [String],
    pub library_index_dir: Option<&'a Path>,
    pub store: Option<&'a crate::session::StoreTarget>,
    pub separator: &'a str,
    pub colon: &'a str,
    /// The store vaults L3 was ranked from, at the generation each was
    /// read (a pack from the store checks them against its snapshot).
    pub ranked: std::sync::Mutex<Vec<(String, i64)>>,
}

/// Items, hidden fields and omissions gathered for one purpose.
#[derive(Default)]
pub(super) struct Gathered {
    pub items: Vec<Item>,
    pub hidden: Vec<Hidden>,
    pub omitted: Vec<Omitted>,
    pub warnings: Vec<String>,
}

impl Context<'_> {
    /// The store vaults L3 was ranked from, with their generations, sorted.
    pub(super) fn ranked_from(&self) -> Vec<(String, i64)> {
        let mut ranked = self.ranked.lock().map(|r| r.clone()).unwrap_or_default();
        ranked.sort();
        ranked.dedup();
        ranked
    }

    pub(super) fn path(&self, template: &str, unit: i64) -> Result<String, ProjectError> {
        Ok(super::recipe::expand(
            template,
            &super::recipe::Placeholders {
                work: self.work,
                unit,
                agent: "",
                scenario: "",
                purpose: "",
            },
        )?)
    }

    pub(super) fn unit_heading(&self, unit: i64) -> String {
        let heading = &self.recipe.unit.heading;
        // The recipe's templates were checked when it was loaded.
        self.path(heading, unit)
            .unwrap_or_else(|_| heading.replace("{unit}", &unit.to_string()))
    }

    /// Reads a file a source may do without: a file that cannot be read or
    /// parsed is reported (`unreadable`) and skipped, one in a closed
    /// library is skipped (the project reports its refusal).
    fn read_skippable(&self, path: &str, out: &mut Gathered) -> Result<Read, ProjectError> {
        match self.project.read_optional(path) {
            Ok(Some(text)) => Ok(Read::Text(text)),
            Ok(None) => Ok(Read::Missing),
            Err(ReadError::NotAuthorized { .. }) => Ok(Read::Skipped),
            Err(ReadError::Unreadable { why, .. }) => {
                out.omitted.push(unreadable(path, why));
                Ok(Read::Skipped)
            }
            Err(ReadError::Private { .. }) => {
                out.omitted.push(Omitted {
                    source: path.to_string(),
                    reason: Reason::Private,
                    count: None,
                    detail: "private under the privacy policy; not read".into(),
                    items: Vec::new(),
                });
                Ok(Read::Skipped)
            }
            Err(err @ ReadError::Refused(_)) => Err(err.into()),
        }
    }

    /// `read_skippable`, then parsed as a document (a parse error is
    /// reported and skipped too).
    fn doc_skippable(&self, path: &str, out: &mut Gathered) -> Result<Parsed, ProjectError> {
        match self.read_skippable(path, out)? {
            Read::Text(text) => match Doc::parse(path, &text) {
                Ok(doc) => Ok(Parsed::Doc(doc)),
                Err(err) => {
                    out.omitted.push(unreadable(path, err));
                    Ok(Parsed::Skipped)
                }
            },
            Read::Missing => Ok(Parsed::Missing),
            Read::Skipped => Ok(Parsed::Skipped),
        }
    }

    /// Gathers `source` as seen by `purpose`.
    pub(super) fn gather(
        &self,
        id: &str,
        spec: &SourceSpec,
        purpose: &str,
        out: &mut Gathered,
    ) -> Result<(), ProjectError> {
        let mut sink = Sink {
            id,
            spec,
            purpose,
            out,
            position: 0,
        };
        match &spec.kind {
            SourceKind::File { path, keep } => self.file(&mut sink, path, *keep),
            SourceKind::Sections { path, schema } => self.sections(&mut sink, path, schema),
            SourceKind::UnitScenes { offset, last } => self.unit_scenes(&mut sink, *offset, *last),
            SourceKind::UnitSummary { offset } => self.unit_summary(&mut sink, *offset),
            SourceKind::UnitFull { offset } => self.unit_full(&mut sink, *offset),
            SourceKind::Candidate => self.candidate(&mut sink),
            SourceKind::Outline { recent } => {
                self.outline(&mut sink, *recent);
                Ok(())
            }
            SourceKind::Cards {
                dir,
                scope,
                cast_types,
                linked_types,
            } => self.cards(&mut sink, dir, *scope, cast_types, linked_types),
            SourceKind::CardIndex { dir, summary_field } => {
                self.card_index(&mut sink, dir, summary_field)
            }
            SourceKind::Schemas => {
                self.schema_contract(&mut sink);
                Ok(())
            }
            SourceKind::Library {
                prefer,
                limit,
                fields,
            } => self.library(&mut sink, prefer, *limit, fields.as_deref()),
        }
    }

    fn file(
        &self,
        sink: &mut Sink<'_, '_>,
        template: &str,
        keep: Keep,
    ) -> Result<(), ProjectError> {
        let path = self.path(template, self.unit)?;
        match self.read_skippable(&path, sink.out)? {
            Read::Text(text) => {
                let body = crate::parse::frontmatter::split(&text).body.to_string();
                sink.push(&path, None, None, body, keep);
            }
            Read::Missing => sink.out.warnings.push(format!("{path} does not exist")),
            Read::Skipped => {}
        }
        Ok(())
    }

    fn sections(
        &self,
        sink: &mut Sink<'_, '_>,
        template: &str,
        schema: &str,
    ) -> Result<(), ProjectError> {
        let path = self.path(template, self.unit)?;
        let doc = match self.doc_skippable(&path, sink.out)? {
            Parsed::Doc(doc) => doc,
            Parsed::Missing => {
                sink.out.warnings.push(format!("{path} does not exist"));
                return Ok(());
            }
            Parsed::Skipped => return Ok(()),
        };
        for (title, body) in &doc.sections {
            let rule = field_rule(self.schemas, schema, title, body);
            let key = format!("{path}#{title}");
            if sink.visible(&rule, &key, schema, title, &path) {
                sink.push(&key, Some(title.clone()), None, body.clone(), Keep::Head);
            }
        }
        Ok(())
    }

    /// The unit `offset` away, if it exists (a number past the ends of
    /// `i64` does not).
    fn unit_number(&self, offset: i64) -> Option<i64> {
        self.unit.checked_add(offset).filter(|&n| n >= 1)
    }

    /// A neighbouring unit's number, path and document; one that cannot be
    /// read or parsed is reported and skipped.
    fn unit_doc(
        &self,
        offset: i64,
        out: &mut Gathered,
    ) -> Result<(i64, String, Parsed), ProjectError> {
        let Some(number) = self.unit_number(offset) else {
            return Ok((0, String::new(), Parsed::Skipped));
        };
        let path = self.path(&self.recipe.unit.file, number)?;
        let doc = self.doc_skippable(&path, out)?;
        Ok((number, path, doc))
    }

    fn unit_scenes(
        &self,
        sink: &mut Sink<'_, '_>,
        offset: i64,
        last: usize,
    ) -> Result<(), ProjectError> {
        let (number, path, doc) = self.unit_doc(offset, sink.out)?;
        let doc = match doc {
            Parsed::Doc(doc) => doc,
            Parsed::Missing => {
                sink.out
                    .warnings
                    .push(format!("{} is not written yet", self.unit_heading(number)));
                return Ok(());
            }
            Parsed::Skipped => return Ok(()),
        };
        let group = self.unit_heading(number);
        let start = doc.sections.len().saturating_sub(last);
        // The later a scene, the closer to the seam: it is degraded last.
        for (i, (title, body)) in doc.sections.iter().enumerate().skip(start) {
            sink.position = i as i64;
            sink.push_at(
                &format!("{path}#{title}"),
                Some(group.clone()),
                Some(title.clone()),
                body.clone(),
                Keep::Tail,
            );
        }
        Ok(())
    }

    fn unit_summary(&self, sink: &mut Sink<'_, '_>, offset: i64) -> Result<(), ProjectError> {
        let (number, path, Parsed::Doc(doc)) = self.unit_doc(offset, sink.out)? else {
            return Ok(());
        };
        let lines: Vec<String> = self
            .recipe
            .unit
            .summary_keys
            .iter()
            .filter_map(|key| {
                let value = crate::parse::frontmatter::get(&doc.fields, key)?;
                let text = doc::value_text(value, self.separator);
                (!text.is_empty()).then(|| format!("- {key}{}{text}", self.colon))
            })
            .collect();
        if !lines.is_empty() {
            sink.push(
                &format!("{path}#summary"),
                Some(self.unit_heading(number)),
                None,
                lines.join("\n"),
                Keep::Head,
            );
        }
        Ok(())
    }

    fn unit_full(&self, sink: &mut Sink<'_, '_>, offset: i64) -> Result<(), ProjectError> {
        let Some(number) = self.unit_number(offset) else {
            return Err(ProjectError::NoUnit {
                unit: self.unit,
                offset,
            });
        };
        let path = self.path(&self.recipe.unit.file, number)?;
        let Some(text) = self.project.read_optional(&path)? else {
            return Err(ProjectError::UnitNotWritten {
                heading: self.unit_heading(number),
                path,
            });
        };
        let body = crate::parse::frontmatter::split(&text).body.to_string();
        sink.push(
            &path,
            Some(self.unit_heading(number)),
            None,
            body,
            Keep::Head,
        );
        Ok(())
    }

    fn candidate(&self, sink: &mut Sink<'_, '_>) -> Result<(), ProjectError> {
        let path = match self.candidate {
            Some(path) => path.to_string(),
            None => self.path(&self.recipe.unit.file, self.unit)?,
        };
        let Some(text) = self.project.read_optional(&path)? else {
            return Err(ProjectError::NoCandidate { path });
        };
        sink.push(
            &format!("candidate:{path}"),
            Some(path.clone()),
            None,
            text,
            Keep::Head,
        );
        Ok(())
    }

    fn outline(&self, sink: &mut Sink<'_, '_>, recent: usize) {
        let spec = &self.recipe.outline;
        let schema = spec.schema.as_str();
        let path = self.outline_path;
        let Some((current, _)) = self.outline.find(self.unit) else {
            return;
        };
        let fields = &spec.fields;
        // One outline part: checked against its field's rule, then added
        // (at `position` when given: later recent entries are kept longer).
        let part = |sink: &mut Sink<'_, '_>,
                    field: &str,
                    title: &str,
                    text: String,
                    position: Option<i64>| {
            let key = format!("{path}#{title}");
            if !sink.visible(&self.schemas.rule(schema, field), &key, schema, field, path) {
                return;
            }
            match position {
                Some(position) => {
                    sink.position = position;
                    sink.push_at(&key, Some(title.to_string()), None, text, Keep::Head);
                }
                None => sink.push(&key, Some(title.to_string()), None, text, Keep::Head),
            }
        };
        for group in self
            .outline
            .groups
            .iter()
            .filter(|g| g.title == spec.main_heading)
        {
            part(
                sink,
                &fields.main,
                &group.title,
                group.overview.clone(),
                None,
            );
        }
        let group = &self.outline.groups[current];
        part(
            sink,
            &fields.group,
            &group.title,
            group.overview.clone(),
            None,
        );
        // Only the groups up to the current one: an entry of a later group is
        // part of the future however it is numbered (a volume that starts
        // again at 1).
        let previous = self
            .outline
            .groups
            .iter()
            .take(current + 1)
            .flat_map(|g| &g.entries)
            .filter(|e| {
                e.number < self.unit
                    && e.number
                        >= self
                            .unit
                            .saturating_sub(i64::try_from(recent).unwrap_or(i64::MAX))
            });
        for entry in previous {
            part(
                sink,
                &fields.recent,
                &entry.title,
                entry.text.clone(),
                Some(entry.number),
            );
        }
        for group in self.outline.groups.iter().skip(current + 1) {
            let mut text = group.overview.clone();
            for entry in &group.entries {
                text.push_str(&format!("\n\n#### {}\n\n{}", entry.title, entry.text));
            }
            part(
                sink,
                &fields.future,
                &group.title,
                text.trim().to_string(),
                None,
            );
        }
    }

    /// The cards under `dir`; a card that cannot be read or parsed is
    /// reported and skipped, the others are loaded.
    fn load_cards(&self, dir: &str, out: &mut Gathered) -> Result<Vec<Card>, ProjectError> {
        let keys = &self.recipe.cards;
        let mut cards = Vec::new();
        let files = match self.project.markdown_files(dir) {
            Ok(files) => files,
            Err(ReadError::NotAuthorized { .. }) => return Ok(Vec::new()),
            Err(err) => return Err(err.into()),
        };
        for path in files {
            let Parsed::Doc(doc) = self.doc_skippable(&path, out)? else {
                continue;
            };
            let stem = Path::new(&path)
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default();
            let folder = Path::new(&path)
                .parent()
                .and_then(|p| p.file_name())
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default();
            let type_name = doc.scalar(&keys.type_key).unwrap_or(folder);
            let name = doc.scalar(&keys.name_key).unwrap_or_else(|| stem.clone());
            let mut names = vec![fold(&name), fold(&stem)];
            names.extend(doc.list(&keys.alias_key).iter().map(|a| fold(a)));
            cards.push(Card {
                parties: doc.list(&keys.parties_key),
                scenes: doc.list(&keys.scene_key),
                category: doc.scalar(&keys.category_key),
                path,
                type_name,
                name,
                names,
                doc,
            });
        }
        Ok(cards)
    }

    /// The fields of `card` visible to the sink's purpose, in order:
    /// frontmatter keys, then sections.
    fn card_fields(
        &self,
        card: &Card,
        only: Option<&[String]>,
    ) -> Vec<(String, String, AiContext)> {
        let keys = &self.recipe.cards;
        // Keys that select cards are not content.
        let structural = [
            &keys.type_key,
            &keys.name_key,
            &keys.parties_key,
            &keys.category_key,
            &keys.scene_key,
        ];
        let mut fields = Vec::new();
        for (key, value) in &card.doc.fields {
            let Some(key) = key.as_str() else { continue };
            if structural.iter().any(|s| s.as_str() == key) {
                continue;
            }
            let text = doc::value_text(value, self.separator);
            if !text.is_empty() {
                let rule = field_rule(self.schemas, &card.type_name, key, &text);
                fields.push((key.to_string(), text, rule));
            }
        }
        for (title, text) in &card.doc.sections {
            let rule = field_rule(self.schemas, &card.type_name, title, text);
            fields.push((title.clone(), text.clone(), rule));
        }
        if let Some(only) = only {
            fields.retain(|(name, _, _)| only.contains(name));
        }
        fields
    }

    fn push_card(&self, sink: &mut Sink<'_, '_>, card: &Card, only: Option<&[String]>) {
        if !self.schemas.by_type.contains_key(&card.type_name) {
            let warning = format!(
                "no schema in {} defines type '{}' ({}): its fields are hidden",
                self.recipe.schemas_dir, card.type_name, card.path
            );
            if !sink.out.warnings.contains(&warning) {
                sink.out.warnings.push(warning);
            }
        }
        let group = format!("{} · {}", card.type_name, card.name);
        for (field, text, rule) in self.card_fields(card, only) {
            let key = format!("{}#{field}", card.path);
            if sink.visible(&rule, &key, &card.type_name, &field, &card.name) {
                sink.push(&key, Some(group.clone()), Some(field), text, Keep::Head);
            }
        }
    }

    fn cards(
        &self,
        sink: &mut Sink<'_, '_>,
        dir_template: &str,
        scope: CardScope,
        cast_types: &[String],
        linked_types: &[String],
    ) -> Result<(), ProjectError> {
        let dir = self.path(dir_template, self.unit)?;
        let cards = self.load_cards(&dir, sink.out)?;
        let chosen: Vec<usize> = match scope {
            CardScope::All => (0..cards.len()).collect(),
            CardScope::Cast => self.cast_selection(sink.purpose, &cards, cast_types, linked_types),
        };
        for &i in &chosen {
            self.push_card(sink, &cards[i], None);
        }
        let detail = sink.spec.title.clone();
        omit_unchosen(sink, dir, &cards, &chosen, detail);
        Ok(())
    }

    /// Cards named in the unit's cast (or relations among the cast), then
    /// the cards of `linked_types` their visible fields link to.
    fn cast_selection(
        &self,
        purpose: &str,
        cards: &[Card],
        cast_types: &[String],
        linked_types: &[String],
    ) -> Vec<usize> {
        let cast: BTreeSet<String> = self
            .outline
            .find(self.unit)
            .map(|(_, entry)| entry.values(&self.recipe.outline.cast_key))
            .unwrap_or_default()
            .iter()
            .map(|name| fold(name))
            .collect();
        let mut chosen: Vec<usize> = Vec::new();
        for (i, card) in cards.iter().enumerate() {
            if !cast_types.contains(&card.type_name) {
                continue;
            }
            let named = card.names.iter().any(|n| cast.contains(n));
            let relation =
                !card.parties.is_empty() && card.parties.iter().all(|p| cast.contains(&fold(p)));
            if named || relation {
                chosen.push(i);
            }
        }
        let mut by_name: BTreeMap<&str, usize> = BTreeMap::new();
        for (i, card) in cards.iter().enumerate() {
            for name in &card.names {
                by_name.entry(name.as_str()).or_insert(i);
            }
        }
        let mut linked = Vec::new();
        for &i in &chosen {
            for (_, text, rule) in self.card_fields(&cards[i], None) {
                // Links inside hidden fields must not pull cards in: that
                // would reveal what the hidden text says.
                if !rule.allows(purpose) {
                    continue;
                }
                for link in markdown::analyze(&text).links {
                    if link.kind == LinkKind::Markdown {
                        continue;
                    }
                    if let Some(&target) = by_name.get(fold(&link.target).as_str())
                        && linked_types.contains(&cards[target].type_name)
                        && !chosen.contains(&target)
                        && !linked.contains(&target)
                    {
                        linked.push(target);
                    }
                }
            }
        }
        chosen.extend(linked);
        let type_order = |card: &Card| {
            cast_types
                .iter()
                .chain(linked_types)
                .position(|t| *t == card.type_name)
                .unwrap_or(usize::MAX)
        };
        chosen.sort_by(|&a, &b| {
            (type_order(&cards[a]), &cards[a].path).cmp(&(type_order(&cards[b]), &cards[b].path))
        });
        chosen
    }

    fn card_index(
        &self,
        sink: &mut Sink<'_, '_>,
        dir_template: &str,
        summary_field: &str,
    ) -> Result<(), ProjectError> {
        let dir = self.path(dir_template, self.unit)?;
        for card in self.load_cards(&dir, sink.out)? {
            let key = format!("{}#index", card.path);
            let rule = self.schemas.rule(&card.type_name, summary_field);
            let summary = card
                .doc
                .sections
                .iter()
                .find(|(title, _)| title == summary_field)
                .map(|(_, text)| doc::first_sentence(text, 120))
                .filter(|_| rule.allows(sink.purpose));
            let line = match summary {
                Some(summary) => format!(
                    "- {} · {}{}{summary}",
                    card.type_name, card.name, self.colon
                ),
                None => format!("- {} · {}", card.type_name, card.name),
            };
            sink.push(&key, None, None, line, Keep::Head);
        }
        Ok(())
    }

    fn schema_contract(&self, sink: &mut Sink<'_, '_>) {
        for (type_name, schema) in &self.schemas.by_type {
            let lines: Vec<String> = schema
                .rules
                .iter()
                .filter(|(_, rule)| rule.ai_context.allows(sink.purpose))
                .map(|(field, rule)| match &rule.description {
                    Some(description) => format!("- {field}{}{description}", self.colon),
                    None => format!("- {field}"),
                })
                .collect();
            if !lines.is_empty() {
                sink.push(
                    &format!("schema:{type_name}"),
                    Some(type_name.clone()),
                    None,
                    lines.join("\n"),
                    Keep::Head,
                );
            }
        }
    }

    fn library(
        &self,
        sink: &mut Sink<'_, '_>,
        prefer: &[String],
        limit: usize,
        only: Option<&[String]>,
    ) -> Result<(), ProjectError> {
        let Some((_, entry)) = self.outline.find(self.unit) else {
            return Ok(());
        };
        let scene_types: BTreeSet<String> = entry
            .values(&self.recipe.outline.scene_key)
            .iter()
            .map(|s| fold(s))
            .collect();
        let mut query = format!("{}\n{}", entry.title, entry.text);
        for reference in self.references {
            query.push('\n');
            query.push_str(reference);
        }
        for library in &self.bindings.libraries {
            let dir = format!("{}/{library}", self.recipe.libraries_dir);
            if let Some(closed) = self.project.closed_library_of(&dir) {
                // A bound name that leads into an unbound library (a
                // symlink) would open what the bindings keep closed.
                sink.out.omitted.push(Omitted {
                    source: dir.clone(),
                    reason: Reason::NotAuthorized,
                    count: None,
                    detail: format!(
                        "bound in {}, but leads into {closed}, which is not bound; not opened",
                        self.bindings_path
                    ),
                    items: Vec::new(),
                });
                continue;
            }
            if !self.project.is_folder(&dir) {
                let why = match self.project.resolve(&dir) {
                    Err(ReadError::Refused(_)) => "leads outside the project root; not opened",
                    Ok(_) => "is not a folder",
                    Err(_) => "does not exist",
                };
                sink.out.warnings.push(format!(
                    "library '{library}' is bound in {} but {dir} {why}",
                    self.bindings_path
                ));
                continue;
            }
            let cards = self.load_cards(&dir, sink.out)?;
            let matching: Vec<usize> = (0..cards.len())
                .filter(|&i| {
                    cards[i]
                        .scenes
                        .iter()
                        .any(|s| scene_types.contains(&fold(s)))
                })
                .collect();
            let ranked = self.rank_library(&dir, &cards, &matching, &query, sink);
            let preference = |card: &Card| {
                card.category
                    .as_ref()
                    .and_then(|c| prefer.iter().position(|p| p == c))
                    .unwrap_or(prefer.len())
            };
            let mut order: Vec<(usize, usize, usize)> = ranked
                .iter()
                .enumerate()
                .map(|(rank, &i)| (preference(&cards[i]), rank, i))
                .collect();
            order.sort();
            let chosen: Vec<usize> = order.iter().take(limit).map(|&(_, _, i)| i).collect();
            for &i in &chosen {
                self.push_card(sink, &cards[i], only);
            }
            let detail = format!(
                "{}: not this unit's scene types ({}) or below the top {limit}",
                sink.spec.title,
                entry
                    .values(&self.recipe.outline.scene_key)
                    .join(self.separator)
            );
            omit_unchosen(sink, dir, &cards, &chosen, detail);
        }
        Ok(())
    }

    /// `matching` ordered by the search pipeline (the same fused ranking as
    /// `ctxpack search`) for `query`; cards it does not hit follow by path.
    fn rank_library(
        &self,
        dir: &str,
        cards: &[Card],
        matching: &[usize],
        query: &str,
        sink: &mut Sink<'_, '_>,
    ) -> Vec<usize> {
        let root = self.project.root().join(dir);
        let choice = IndexChoice {
            dir: self
                .library_index_dir
                .map(|base| base.join(crate::index::location::vault_id(&root))),
            progress: crate::progress::Progress::none(),
            // Library cards are ranked lexically: the pack must not depend
            // on which embedding model this machine has.
            model: crate::session::ModelChoice::Off,
            qmd: None,
            reranker: None,
            ann: Default::default(),
            vectors: None,
            hidden: Vec::new(),
            store: self.store.map(|target| crate::session::StoreTarget {
                url: target.url.clone(),
                vault: format!("{}/{dir}", target.vault),
            }),
            embed_into_store: false,
        };
        let mut ordered: Vec<usize> = Vec::new();
        let opening = crate::timings::phase("assemble: open a library's index");
        let opened = Session::open(&root, &choice);
        drop(opening);
        match opened {
            Ok(session) => {
                if let (Some(store), Some(target)) = (
                    session.store.as_deref().and_then(|s| s.postgres()),
                    &choice.store,
                ) && let Ok(mut ranked) = self.ranked.lock()
                {
                    ranked.push((target.vault.clone(), store.generation()));
                }
                if let Some(error) = &session.index_error {
                    sink.out
                        .warnings
                        .push(format!("library {dir}: ranked without its index ({error})"));
                }
                let prefix = format!("{dir}/");
                let wanted: BTreeMap<&str, usize> = matching
                    .iter()
                    .map(|&i| {
                        (
                            cards[i]
                                .path
                                .strip_prefix(&prefix)
                                .unwrap_or(&cards[i].path),
                            i,
                        )
                    })
                    .collect();
                let keep =
                    |note: usize| wanted.contains_key(session.vault.metas[note].path.as_str());
                let ranking = session.rank(
                    query,
                    &RankOptions::new(chrono::DateTime::UNIX_EPOCH),
                    &keep,
                );
                for hit in ranking.hits {
                    if let Some(&i) = wanted.get(session.vault.metas[hit.note].path.as_str()) {
                        ordered.push(i);
                    }
                }
            }
            Err(error) => sink
                .out
                .warnings
                .push(format!("library {dir}: search unavailable ({error:#})")),
        }
        for &i in matching {
            if !ordered.contains(&i) {
                ordered.push(i);
            }
        }
        ordered
    }
}

/// What reading a file a source may do without gave.
enum Read {
    Text(String),
    Missing,
    /// Refused or unreadable; already reported.
    Skipped,
}

/// What reading and parsing a document a source may do without gave.
enum Parsed {
    Doc(Doc),
    Missing,
    /// Refused, unreadable or unparsable; already reported.
    Skipped,
}

/// The report line of a file that could not be read or parsed.
fn unreadable(path: &str, why: impl std::fmt::Display) -> Omitted {
    let why = why.to_string();
    let prefix = format!("{path}: ");
    Omitted {
        source: path.to_string(),
        reason: Reason::Unreadable,
        count: None,
        detail: format!(
            "{}; skipped",
            why.strip_prefix(&prefix)
                .unwrap_or(&why)
                .trim_end_matches("; skipped")
        ),
        items: Vec::new(),
    }
}

/// Reports the cards of `cards` not in `chosen` as not relevant.
fn omit_unchosen(
    sink: &mut Sink<'_, '_>,
    source: String,
    cards: &[Card],
    chosen: &[usize],
    detail: String,
) {
    let left: Vec<String> = (0..cards.len())
        .filter(|i| !chosen.contains(i))
        .map(|i| format!("{} · {}", cards[i].type_name, cards[i].name))
        .collect();
    if !left.is_empty() {
        sink.out.omitted.push(Omitted {
            source,
            reason: Reason::NotRelevant,
            count: Some(left.len()),
            detail,
            items: left,
        });
    }
}

struct Card {
    path: String,
    type_name: String,
    name: String,
    /// Folded name, stem and aliases.
    names: Vec<String>,
    parties: Vec<String>,
    scenes: Vec<String>,
    category: Option<String>,
    doc: Doc,
}

/// Collects one source's items for one purpose.
struct Sink<'s, 'o> {
    id: &'s str,
    spec: &'s SourceSpec,
    purpose: &'s str,
    out: &'o mut Gathered,
    position: i64,
}

impl Sink<'_, '_> {
    /// Whether the purpose may see a field; records it as hidden if not.
    fn visible(
        &mut self,
        rule: &AiContext,
        key: &str,
        type_name: &str,
        field: &str,
        entity: &str,
    ) -> bool {
        if rule.allows(self.purpose) {
            return true;
        }
        self.out.hidden.push(Hidden {
            key: key.to_string(),
            type_name: type_name.to_string(),
            field: field.to_string(),
            entity: entity.to_string(),
            rule: rule.to_string(),
            purpose: self.purpose.to_string(),
        });
        false
    }

    /// Adds an item; earlier items of a source are degraded last.
    fn push(
        &mut self,
        key: &str,
        group: Option<String>,
        label: Option<String>,
        text: String,
        keep: Keep,
    ) {
        self.position -= 1;
        let position = self.position;
        self.add(key, group, label, text, keep, position);
    }

    /// Adds an item at the position set by the caller (higher: kept longer).
    fn push_at(
        &mut self,
        key: &str,
        group: Option<String>,
        label: Option<String>,
        text: String,
        keep: Keep,
    ) {
        let position = self.position;
        self.add(key, group, label, text, keep, position);
    }

    fn add(
        &mut self,
        key: &str,
        group: Option<String>,
        label: Option<String>,
        text: String,
        keep: Keep,
        position: i64,
    ) {
        let text = text.trim().to_string();
        if text.is_empty() {
            return;
        }
        // The same item reached twice is added once; a second field of the
        // same name (two `## 当前状态` sections, or a frontmatter key named
        // like a section) is kept under its own key, never dropped unseen.
        let mut unique = key.to_string();
        let mut occurrence = 1;
        while let Some(existing) = self.out.items.iter().find(|i| i.key == unique) {
            if existing.text == text {
                return;
            }
            occurrence += 1;
            unique = format!("{key}#{occurrence}");
        }
        self.out.items.push(Item {
            key: unique,
            layer: self.spec.layer,
            source: self.id.to_string(),
            source_title: self.spec.title.clone(),
            group,
            label,
            text,
            keep,
            priority: (self.spec.priority, position),
        });
    }
}

/// A field's rule, narrowed by the rules of the Dataview fields its text
/// writes (`notes:: x` inside a visible section is the field `notes` to
/// Dataview): a field shown whole may not show another field's value.
pub(super) fn field_rule(schemas: &Schemas, type_name: &str, name: &str, text: &str) -> AiContext {
    crate::parse::reader::inline_fields(text, &[])
        .iter()
        .fold(schemas.rule(type_name, name), |rule, (key, _)| {
            rule.narrowest(&schemas.rule(type_name, key))
        })
}
