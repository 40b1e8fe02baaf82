//! Which notes one operation may rank: the request's [`NoteFilter`] bound
//! to this session's vault, and a query's phrases and exclusions. Every
//! operation (search, each pack mode) asks [`Admission::admits`] before a
//! note is ranked, so both stores and every face keep the same notes.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::filter::{BoundFilter, NoteFilter, PropertyTable};
use crate::retrieve::syntax::{QuerySyntax, normalise};

use super::Session;

/// What a request's filter and a query's syntax let through.
pub(crate) struct Admission<'a> {
    filter: BoundFilter<'a>,
    session: &'a Session,
    syntax: Option<&'a QuerySyntax>,
    /// Whether each note read so far admits the query's phrases and
    /// exclusions: a note's text is read once per operation.
    texts: Mutex<HashMap<usize, bool>>,
}

impl Session {
    /// Every note's property values: the store's table, else (a vault
    /// read without an index) read from the notes.
    pub fn property_table(&self) -> Arc<PropertyTable> {
        self.store
            .as_ref()
            .and_then(|store| store.note_properties())
            .unwrap_or_else(|| Arc::new(PropertyTable::of_vault(&self.vault)))
    }

    /// `filter` and `syntax` bound to this vault.
    pub(crate) fn admission<'a>(
        &'a self,
        filter: &'a NoteFilter,
        syntax: Option<&'a QuerySyntax>,
    ) -> Admission<'a> {
        // A store that filters itself (PostgreSQL, in SQL) answers once
        // for every note; if it cannot, the filter is applied here.
        let admitted = (!filter.is_empty())
            .then(|| self.store.as_ref()?.filtered_notes(filter)?.ok())
            .flatten()
            .map(Arc::new);
        let props =
            (admitted.is_none() && filter.needs_properties()).then(|| self.property_table());
        Admission {
            filter: BoundFilter {
                filter,
                metas: &self.vault.metas,
                props,
                admitted,
            },
            session: self,
            syntax: syntax.filter(|s| s.constrains()),
            texts: Mutex::new(HashMap::new()),
        }
    }

    /// The daily notes `request`'s filter lets through, in note order,
    /// when it asks for dailies and has a filter: the filter holds for
    /// every note a pack draws on, dailies included.
    pub(crate) fn admitted_dailies(&self, request: &super::PackRequest) -> Option<Vec<usize>> {
        if request.options.dailies == 0 || request.filter.is_empty() {
            return None;
        }
        let admission = self.admission(&request.filter, None);
        Some(
            (0..self.vault.metas.len())
                .filter(|&note| self.vault.metas[note].daily.is_some() && admission.admits(note))
                .collect(),
        )
    }

    /// A warning when the vault has no note to read at all: most often
    /// the vault option names the wrong folder (its parent, or a download
    /// folder), which a plain "no match" would hide.
    pub fn empty_vault_warning(&self) -> Option<String> {
        self.vault.metas.is_empty().then(|| {
            "the vault has no note to read (no .md or .canvas file outside hidden, ignored \
             and private places): is this the right folder?"
                .to_string()
        })
    }

    /// What `filter` names that this vault lacks (see
    /// [`NoteFilter::warnings`]).
    pub fn filter_warnings(&self, filter: &NoteFilter) -> Vec<String> {
        // A warning quotes what was asked (`no folder '…'`): a secret pasted
        // into a filter is printed redacted, as a topic is.
        let policy = self.vault.policy();
        self.unredacted_filter_warnings(filter)
            .into_iter()
            .map(|warning| policy.redact_printed(&warning).unwrap_or(warning))
            .collect()
    }

    fn unredacted_filter_warnings(&self, filter: &NoteFilter) -> Vec<String> {
        if filter.is_empty() {
            return Vec::new();
        }
        let obsidian = self.vault.policy().obsidian();
        let left_out = |folder: &str| obsidian.leaves_out(folder);
        if !filter.needs_properties() {
            return filter.warnings(&self.vault.metas, None, &left_out);
        }
        let keys: Vec<String> = filter.conditions.iter().map(|c| c.key.clone()).collect();
        if let Some(Ok(present)) = self
            .store
            .as_ref()
            .and_then(|store| store.present_keys(&keys))
        {
            return filter.warnings(
                &self.vault.metas,
                Some(&|key| present.iter().any(|k| k == key)),
                &left_out,
            );
        }
        let props = self.property_table();
        filter.warnings(
            &self.vault.metas,
            Some(&|key| props.has_key(key)),
            &left_out,
        )
    }
}

impl Admission<'_> {
    /// The same filter with another query's syntax.
    pub(crate) fn with_syntax<'b>(&'b self, syntax: &'b QuerySyntax) -> Admission<'b> {
        Admission {
            filter: BoundFilter {
                filter: self.filter.filter,
                metas: self.filter.metas,
                props: self.filter.props.clone(),
                admitted: self.filter.admitted.clone(),
            },
            session: self.session,
            syntax: Some(syntax).filter(|s| s.constrains()),
            texts: Mutex::new(HashMap::new()),
        }
    }

    /// Whether nothing is filtered out.
    pub(crate) fn admits_all(&self) -> bool {
        self.filter.filter.is_empty() && self.syntax.is_none()
    }

    /// Whether `note` may be ranked: the filter first (metadata only),
    /// then the query's phrases and exclusions over its indexed text.
    pub(crate) fn admits(&self, note: usize) -> bool {
        if !self.filter.accepts(note) {
            return false;
        }
        let Some(syntax) = self.syntax else {
            return true;
        };
        if let Some(&known) = self
            .texts
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&note)
        {
            return known;
        }
        let read = self.session.vault.note(note);
        let text = normalise(&crate::analysis::note_text_parts(&read).join("\n"));
        let admitted = syntax.admits(&text);
        self.texts
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(note, admitted);
        admitted
    }
}
