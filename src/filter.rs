//! Which notes a request may draw on: property conditions (`--where`), a
//! date window (`--since`, `--until`), and folders and tags to include or
//! exclude. One [`Filters`] is what a face was given (text, unchecked);
//! [`Filters::resolve`] checks it once into a [`NoteFilter`], the
//! predicate every operation applies to every note before it ranks, so
//! search, every pack mode and both stores keep exactly the same notes.
//!
//! Property values come from a [`PropertyTable`] (every note's frontmatter
//! values, stored by the index beside its catalog, and by the PostgreSQL
//! store in its own table), so a filter never parses a note.
//!
//! Private notes are in no table and no listing, so a filter that would
//! match only private notes answers, warnings included, exactly as one
//! that matches nothing.

use std::cmp::Ordering;
use std::fmt;
use std::sync::Arc;

use chrono::{DateTime, Datelike, Months, NaiveDate, TimeDelta, Utc};
use serde::{Deserialize, Serialize};

use crate::note::{Note, NoteMeta};
use crate::text::fold;

/// At most this many properties are kept per note for filtering.
pub(crate) const MAX_FILTER_PROPERTIES: usize = 64;
/// A property value kept for filtering is cut to this many characters.
pub(crate) const MAX_FILTER_VALUE_CHARS: usize = 200;
/// At most this many of each kind of filter per request: enough for any
/// real question, and it bounds what one call costs per note.
pub(crate) const MAX_FILTERS: usize = 32;

/// The filters a face was given, as text, not yet checked. Every list is
/// repeatable on the command line; all conditions must hold.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Filters {
    /// `KEY=VALUE`, `KEY!=VALUE`, `KEY>=VALUE`, `KEY<=VALUE`, `KEY~TEXT`,
    /// `KEY` (present), `!KEY` (absent).
    pub conditions: Vec<String>,
    /// A date (`2026-11-01`) or a span back from now (`14d`, `2w`, `3m`,
    /// `1y`).
    pub since: Option<String>,
    pub until: Option<String>,
    /// Only notes under one of these folders.
    pub folders: Vec<String>,
    /// Only notes with one of these tags (or a tag nested under one).
    pub tags: Vec<String>,
    /// No note under any of these folders.
    pub exclude_folders: Vec<String>,
    /// No note with any of these tags (or a tag nested under one).
    pub exclude_tags: Vec<String>,
}

/// Which parameter a filter problem is about, so each face can name it
/// the way its user wrote it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FilterParam {
    Where,
    Since,
    Until,
    Folder,
    Tag,
    ExcludeFolder,
    ExcludeTag,
}

impl FilterParam {
    /// The parameter as the command line (`flags`) or a tool call spells it.
    pub fn name(self, flags: bool) -> &'static str {
        match (self, flags) {
            (FilterParam::Where, true) => "--where",
            (FilterParam::Where, false) => "where",
            (FilterParam::Since, true) => "--since",
            (FilterParam::Since, false) => "since",
            (FilterParam::Until, true) => "--until",
            (FilterParam::Until, false) => "until",
            (FilterParam::Folder, true) => "--folder",
            (FilterParam::Folder, false) => "folders",
            (FilterParam::Tag, true) => "--tag",
            (FilterParam::Tag, false) => "tags",
            (FilterParam::ExcludeFolder, true) => "--exclude-folder",
            (FilterParam::ExcludeFolder, false) => "exclude_folders",
            (FilterParam::ExcludeTag, true) => "--exclude-tag",
            (FilterParam::ExcludeTag, false) => "exclude_tags",
        }
    }
}

/// A filter refused: which parameter, the text given, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FilterError {
    pub param: FilterParam,
    pub given: String,
    pub problem: String,
}

impl FilterError {
    /// The message, naming the parameter as `flags` (the command line) or
    /// a tool call spells it.
    pub fn message(&self, flags: bool) -> String {
        let name = self.param.name(flags);
        if self.given.is_empty() {
            format!("{name}: {}", self.problem)
        } else {
            format!("{name} '{}': {}", self.given, self.problem)
        }
    }
}

/// How a condition compares a property.
#[derive(Clone, Debug, PartialEq)]
pub enum Op {
    /// `KEY`: the note has a non-empty value for it.
    Present,
    /// `!KEY`: the note has none.
    Absent,
    /// `KEY=VALUE`: some value equals it.
    Eq(Wanted),
    /// `KEY!=VALUE`: no value equals it (a note without the key holds).
    Ne(Wanted),
    /// `KEY>=VALUE`: some value is at least it.
    Ge(Wanted),
    /// `KEY<=VALUE`: some value is at most it.
    Le(Wanted),
    /// `KEY~TEXT`: some value contains the text (case and width folded).
    Contains(String),
}

/// A value a condition compares with, typed once when the filter is read.
#[derive(Clone, Debug, PartialEq)]
pub struct Wanted {
    /// Folded, for text comparisons.
    text: String,
    typed: Typed,
}

impl Wanted {
    fn new(text: &str) -> Wanted {
        Wanted {
            text: fold(text),
            typed: Typed::of(text),
        }
    }
}

/// A value read as a number, a date, or text.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Typed {
    Number(f64),
    /// An instant, and whether only a day was written (`2026-11-01`): a
    /// day compares with the day of a note's value.
    Date(DateTime<Utc>, bool),
    Text,
}

impl Typed {
    fn of(text: &str) -> Typed {
        let text = text.trim();
        if text.starts_with(|c: char| c.is_ascii_digit() || matches!(c, '-' | '+' | '.'))
            && let Ok(number) = text.parse::<f64>()
            && number.is_finite()
        {
            return Typed::Number(number);
        }
        match crate::parse::parse_datetime(text) {
            Some(date) => Typed::Date(date, !text.contains(':')),
            None => Typed::Text,
        }
    }
}

/// How a value compares, as a store holding typed columns needs it: the
/// comparison [`compare`] makes, spelled out so SQL can make the same one.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Compared {
    /// As numbers, when the note's value is a number too.
    Number(f64),
    /// By the day (days from the common era), when the note's value is a
    /// date.
    Day(i32),
    /// By the instant `(seconds, nanoseconds)`, when the note's value is a
    /// date.
    Instant(i64, u32),
    /// As folded text only.
    Text,
}

impl Wanted {
    /// The folded text every value that is not of the wanted type is
    /// compared with.
    pub fn folded(&self) -> &str {
        &self.text
    }

    /// How a value of the same type compares with this one.
    pub fn compared(&self) -> Compared {
        match self.typed {
            Typed::Number(n) => Compared::Number(n),
            Typed::Date(at, true) => Compared::Day(at.date_naive().num_days_from_ce()),
            Typed::Date(at, false) => {
                Compared::Instant(at.timestamp(), at.timestamp_subsec_nanos())
            }
            Typed::Text => Compared::Text,
        }
    }
}

/// One property value as a store keeps it for SQL: folded, and typed the
/// way [`compare`] types it (a number first, else a date, else text).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct TypedValue {
    pub folded: String,
    pub number: Option<f64>,
    /// `(seconds, nanoseconds, day from the common era)`.
    pub date: Option<(i64, u32, i32)>,
}

impl TypedValue {
    pub(crate) fn of(value: &str) -> TypedValue {
        let (number, date) = match Typed::of(value) {
            Typed::Number(n) => (Some(n), None),
            Typed::Date(at, _) => (
                None,
                Some((
                    at.timestamp(),
                    at.timestamp_subsec_nanos(),
                    at.date_naive().num_days_from_ce(),
                )),
            ),
            Typed::Text => (None, None),
        };
        TypedValue {
            folded: fold(value),
            number,
            date,
        }
    }
}

/// One `--where` condition, checked.
#[derive(Clone, Debug, PartialEq)]
pub struct Condition {
    /// The key, folded (keys match whatever their case).
    pub key: String,
    /// The key as it was written, for messages.
    pub written: String,
    pub op: Op,
}

impl Condition {
    /// Reads `KEY=VALUE`, `KEY!=VALUE`, `KEY>=VALUE`, `KEY<=VALUE`,
    /// `KEY~TEXT`, `KEY` or `!KEY`.
    pub fn parse(given: &str) -> Result<Condition, ConditionError> {
        let text = given.trim();
        if text.is_empty() {
            return Err(ConditionError::Empty);
        }
        // The first operator character decides: keys hold none of them.
        let Some(at) = text.find(['=', '!', '>', '<', '~']) else {
            return Ok(Condition {
                key: fold(text),
                written: text.to_string(),
                op: Op::Present,
            });
        };
        let (key, rest) = text.split_at(at);
        let key = key.trim();
        if at == 0 && rest.starts_with('!') && !rest.starts_with("!=") {
            let key = rest[1..].trim();
            if key.is_empty() {
                return Err(ConditionError::NoKey);
            }
            if key.contains(['=', '!', '>', '<', '~']) {
                return Err(ConditionError::AbsentWithOperator);
            }
            return Ok(Condition {
                key: fold(key),
                written: key.to_string(),
                op: Op::Absent,
            });
        }
        let (op, value) = if let Some(value) = rest.strip_prefix("!=") {
            ("!=", value)
        } else if let Some(value) = rest.strip_prefix(">=") {
            (">=", value)
        } else if let Some(value) = rest.strip_prefix("<=") {
            ("<=", value)
        } else if let Some(value) = rest.strip_prefix('=') {
            ("=", value)
        } else if let Some(value) = rest.strip_prefix('~') {
            ("~", value)
        } else {
            let op: String = rest.chars().take_while(|c| "=!><~".contains(*c)).collect();
            return Err(ConditionError::UnknownOperator(op));
        };
        if key.is_empty() {
            return Err(ConditionError::NoKey);
        }
        let value = value.trim();
        if value.is_empty() {
            return Err(ConditionError::NoValue {
                op,
                key: key.to_string(),
            });
        }
        if value.starts_with(['=', '>', '<', '~']) {
            let op: String = format!(
                "{op}{}",
                value
                    .chars()
                    .take_while(|c| "=!><~".contains(*c))
                    .collect::<String>()
            );
            return Err(ConditionError::UnknownOperator(op));
        }
        let op = match op {
            "=" => Op::Eq(Wanted::new(value)),
            "!=" => Op::Ne(Wanted::new(value)),
            ">=" => Op::Ge(Wanted::new(value)),
            "<=" => Op::Le(Wanted::new(value)),
            _ => Op::Contains(fold(value)),
        };
        Ok(Condition {
            key: fold(key),
            written: key.to_string(),
            op,
        })
    }

    /// Whether a note whose values for the key are `values` (none when it
    /// lacks the key) meets the condition.
    pub fn holds<S: AsRef<str>>(&self, values: &[S]) -> bool {
        let mut values = values.iter().map(AsRef::as_ref);
        match &self.op {
            Op::Present => values.next().is_some(),
            Op::Absent => values.next().is_none(),
            Op::Eq(wanted) => values.any(|v| compare(v, wanted) == Some(Ordering::Equal)),
            Op::Ne(wanted) => !values.any(|v| compare(v, wanted) == Some(Ordering::Equal)),
            Op::Ge(wanted) => values.any(|v| {
                matches!(
                    compare(v, wanted),
                    Some(Ordering::Greater | Ordering::Equal)
                )
            }),
            Op::Le(wanted) => {
                values.any(|v| matches!(compare(v, wanted), Some(Ordering::Less | Ordering::Equal)))
            }
            Op::Contains(text) => values.any(|v| fold(v).contains(text.as_str())),
        }
    }
}

/// How a note's value compares with a wanted one: as numbers when both
/// are numbers, as dates when both are dates (by the day when only a day
/// was asked for), else as folded text.
fn compare(value: &str, wanted: &Wanted) -> Option<Ordering> {
    match (Typed::of(value), wanted.typed) {
        (Typed::Number(a), Typed::Number(b)) => a.partial_cmp(&b),
        (Typed::Date(a, _), Typed::Date(b, true)) => Some(a.date_naive().cmp(&b.date_naive())),
        (Typed::Date(a, _), Typed::Date(b, false)) => Some(a.cmp(&b)),
        _ => Some(fold(value).cmp(&wanted.text)),
    }
}

/// A note's frontmatter values as filters read them: `(folded key,
/// values)` in frontmatter order, lists flattened, links as the names
/// they show, empty values left out.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NoteProperties(pub Vec<(String, Vec<String>)>);

impl NoteProperties {
    /// The properties of `note` (its frontmatter, with the body's Dataview
    /// inline fields, as the privacy policy let them be seen).
    pub fn of(note: &Note) -> NoteProperties {
        let mut keys: Vec<(String, Vec<String>)> = Vec::new();
        for (key, value) in &note.frontmatter {
            let Some(key) = crate::parse::frontmatter::scalar(key) else {
                continue;
            };
            let key = fold(&key);
            if key.is_empty() || keys.iter().any(|(k, _)| *k == key) {
                continue;
            }
            let mut values = Vec::new();
            if matches!(key.as_str(), "tags" | "tag") {
                // As the note's tags are read: a string holds several
                // (`tags: alpha, beta`), and a `#` is not part of one.
                values = crate::parse::frontmatter::list(value, &[',', ' '])
                    .into_iter()
                    .map(|tag| tag.trim_start_matches('#').to_string())
                    .filter(|tag| !tag.is_empty())
                    .collect();
            } else {
                crate::parse::properties::collect(value, 0, &mut values);
            }
            if values.is_empty() {
                continue;
            }
            let values = values
                .into_iter()
                .map(|v| crate::text::truncate_chars(&v, MAX_FILTER_VALUE_CHARS))
                .collect();
            keys.push((key, values));
            if keys.len() == MAX_FILTER_PROPERTIES {
                break;
            }
        }
        NoteProperties(keys)
    }

    /// The values of `key` (folded), empty when the note lacks it.
    pub fn values(&self, key: &str) -> &[String] {
        self.0
            .iter()
            .find(|(k, _)| k == key)
            .map_or(&[], |(_, values)| values.as_slice())
    }
}

/// Every note's [`NoteProperties`], parallel to the vault's notes: decoded
/// (`notes`), or read in place from the index's stored bytes, each note
/// decoded the first time a filter asks about it, so that a `--where`
/// costs the notes it checks, not the whole vault.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
pub struct PropertyTable {
    pub notes: Vec<NoteProperties>,
    /// The stored form, when read in place (then `notes` is empty).
    #[serde(skip)]
    stored: Option<Arc<StoredTable>>,
}

/// Written as the decoded table is, whichever form it is in (a table read
/// in place has no `notes` of its own).
impl Serialize for PropertyTable {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let notes: Vec<&NoteProperties> = (0..self.len()).map(|idx| self.get(idx)).collect();
        let mut table = serializer.serialize_struct("PropertyTable", 1)?;
        table.serialize_field("notes", &notes)?;
        table.end()
    }
}

/// A table's postcard bytes with where each note starts, and each note
/// decoded once, when first asked for.
#[derive(Debug)]
struct StoredTable {
    bytes: Vec<u8>,
    /// Each note's byte range, as `offsets[i]..offsets[i + 1]`.
    offsets: Vec<u32>,
    decoded: Vec<std::sync::OnceLock<NoteProperties>>,
}

impl PartialEq for StoredTable {
    fn eq(&self, other: &StoredTable) -> bool {
        self.bytes == other.bytes
    }
}

impl Eq for StoredTable {}

/// Reads postcard's variable-length integer at `at`.
fn varint(bytes: &[u8], at: &mut usize) -> Option<usize> {
    let mut value: u64 = 0;
    for shift in (0..64).step_by(7) {
        let byte = *bytes.get(*at)?;
        *at += 1;
        value |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return usize::try_from(value).ok();
        }
    }
    None
}

/// Reads a postcard string at `at`, checking that it is UTF-8.
fn string<'a>(bytes: &'a [u8], at: &mut usize) -> Option<&'a str> {
    let len = varint(bytes, at)?;
    let end = at.checked_add(len)?;
    let text = std::str::from_utf8(bytes.get(*at..end)?).ok()?;
    *at = end;
    Some(text)
}

/// Calls `each(key, values)` for every property of the note encoded in
/// `bytes` from `at`, and returns where it ends; `None` when the bytes
/// are not a [`NoteProperties`].
fn walk_note<'a>(
    bytes: &'a [u8],
    mut at: usize,
    each: &mut dyn FnMut(&'a str, &mut dyn Iterator<Item = &'a str>),
) -> Option<usize> {
    let keys = varint(bytes, &mut at)?;
    for _ in 0..keys {
        let key = string(bytes, &mut at)?;
        let count = varint(bytes, &mut at)?;
        let mut failed = false;
        let mut values = (0..count).map_while(|_| {
            let value = string(bytes, &mut at);
            failed |= value.is_none();
            value
        });
        each(key, &mut values);
        // Values the caller did not read are still walked over.
        values.for_each(drop);
        if failed {
            return None;
        }
    }
    Some(at)
}

impl PropertyTable {
    /// The table of a vault read from its notes (a vault without an index;
    /// the index and the store keep theirs).
    pub fn of_vault(vault: &crate::vault::Vault) -> PropertyTable {
        use rayon::prelude::*;
        PropertyTable::from_notes(
            (0..vault.metas.len())
                .into_par_iter()
                .map(|idx| NoteProperties::of(&vault.note(idx)))
                .collect(),
        )
    }

    pub fn from_notes(notes: Vec<NoteProperties>) -> PropertyTable {
        PropertyTable {
            notes,
            stored: None,
        }
    }

    pub fn encode(&self) -> Result<Vec<u8>, postcard::Error> {
        match &self.stored {
            Some(stored) => Ok(stored.bytes.clone()),
            None => postcard::to_allocvec(self),
        }
    }

    pub fn decode(bytes: &[u8]) -> Result<PropertyTable, postcard::Error> {
        postcard::from_bytes(bytes)
    }

    /// The table [`PropertyTable::encode`] wrote, read in place: one walk
    /// over the bytes finds where each note starts and checks that every
    /// string is UTF-8; no note is decoded until asked for.
    pub fn in_place(bytes: Vec<u8>) -> Result<PropertyTable, postcard::Error> {
        let damaged = || postcard::Error::DeserializeUnexpectedEnd;
        let mut at = 0;
        let notes = varint(&bytes, &mut at).ok_or_else(damaged)?;
        if u32::try_from(bytes.len()).is_err() || notes > bytes.len() {
            return Err(damaged());
        }
        let mut offsets = Vec::with_capacity(notes + 1);
        for _ in 0..notes {
            offsets.push(at as u32);
            at = walk_note(&bytes, at, &mut |_, _| {}).ok_or_else(damaged)?;
        }
        if at != bytes.len() {
            return Err(damaged());
        }
        offsets.push(at as u32);
        Ok(PropertyTable {
            notes: Vec::new(),
            stored: Some(Arc::new(StoredTable {
                bytes,
                offsets,
                decoded: (0..notes).map(|_| std::sync::OnceLock::new()).collect(),
            })),
        })
    }

    /// How many notes the table has.
    pub fn len(&self) -> usize {
        match &self.stored {
            Some(stored) => stored.decoded.len(),
            None => self.notes.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The properties of note `idx` (none for a note the table lacks).
    pub fn get(&self, idx: usize) -> &NoteProperties {
        static NONE: NoteProperties = NoteProperties(Vec::new());
        let Some(stored) = &self.stored else {
            return self.notes.get(idx).unwrap_or(&NONE);
        };
        let Some(cell) = stored.decoded.get(idx) else {
            return &NONE;
        };
        cell.get_or_init(|| {
            let range = stored.offsets[idx] as usize..stored.offsets[idx + 1] as usize;
            // The walk in `in_place` checked these bytes already.
            postcard::from_bytes(&stored.bytes[range]).unwrap_or_default()
        })
    }

    /// Whether note `idx` meets `condition`. Read in place, only the
    /// condition's key is looked at and nothing is decoded.
    pub fn holds(&self, idx: usize, condition: &Condition) -> bool {
        let Some(stored) = &self.stored else {
            return condition.holds(self.get(idx).values(&condition.key));
        };
        let Some(&start) = stored
            .offsets
            .get(idx)
            .filter(|_| idx < stored.decoded.len())
        else {
            return condition.holds::<&str>(&[]);
        };
        let mut values: Vec<&str> = Vec::new();
        walk_note(&stored.bytes, start as usize, &mut |key, rest| {
            if values.is_empty() && key == condition.key {
                values.extend(rest);
            }
        });
        condition.holds(&values)
    }

    /// Whether any note has `key` (folded).
    pub fn has_key(&self, key: &str) -> bool {
        let Some(stored) = &self.stored else {
            return self
                .notes
                .iter()
                .any(|note| note.0.iter().any(|(k, _)| k == key));
        };
        // Keys are compared where they lie: nothing is decoded.
        let mut found = false;
        for &start in &stored.offsets[..stored.offsets.len() - 1] {
            walk_note(&stored.bytes, start as usize, &mut |k, _| found |= k == key);
            if found {
                return true;
            }
        }
        false
    }
}

/// Whether a note dated `date` lies at or after `since`. A date written
/// without a time (`created: 2026-12-06`, a daily note's name) is read as
/// midnight UTC and stands for its whole day: it is inside a window that
/// opens during that day, so `--since 1d` at 23:00 keeps yesterday's
/// daily note. The catalog keeps no precision, so any date at exactly
/// midnight UTC counts as a day (a file time that falls on it widens the
/// window by less than a day, never narrows it). The store's SQL says the
/// same with [`day_of`].
pub(crate) fn is_since(date: i64, since: i64) -> bool {
    date >= since || (date.rem_euclid(SECONDS_A_DAY) == 0 && date >= day_of(since))
}

/// The midnight (UTC) that starts the day holding `at`.
pub(crate) fn day_of(at: i64) -> i64 {
    at - at.rem_euclid(SECONDS_A_DAY)
}

const SECONDS_A_DAY: i64 = 86_400;

/// A checked filter: the predicate a request applies to every note.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct NoteFilter {
    pub conditions: Vec<Condition>,
    /// Seconds since the epoch: a note's date must be at least this.
    pub since: Option<i64>,
    /// Seconds since the epoch: a note's date must be at most this.
    pub until: Option<i64>,
    /// Folders without their slashes; an empty one is the whole vault.
    pub folders: Vec<String>,
    /// As given, without `#` (folded when compared).
    pub tags: Vec<String>,
    pub exclude_folders: Vec<String>,
    pub exclude_tags: Vec<String>,
}

impl Filters {
    pub fn is_empty(&self) -> bool {
        *self == Filters::default()
    }

    /// The checked filter, dates and spans read against `now` (the
    /// request's time, so a fixed `--generated-at` fixes the window too).
    pub fn resolve(&self, now: DateTime<Utc>) -> Result<NoteFilter, FilterError> {
        let fail = |param, given: &str, problem: String| FilterError {
            param,
            given: given.to_string(),
            problem,
        };
        for (param, list) in [
            (FilterParam::Where, &self.conditions),
            (FilterParam::Folder, &self.folders),
            (FilterParam::Tag, &self.tags),
            (FilterParam::ExcludeFolder, &self.exclude_folders),
            (FilterParam::ExcludeTag, &self.exclude_tags),
        ] {
            if list.len() > MAX_FILTERS {
                return Err(fail(
                    param,
                    "",
                    format!("at most {MAX_FILTERS} are accepted, got {}", list.len()),
                ));
            }
        }
        let mut conditions = Vec::with_capacity(self.conditions.len());
        for given in &self.conditions {
            match Condition::parse(given) {
                Ok(condition) => conditions.push(condition),
                Err(problem) => {
                    return Err(fail(FilterParam::Where, given, problem.to_string()));
                }
            }
        }
        let since = match &self.since {
            Some(given) => Some(
                parse_when(given, now, false)
                    .map_err(|problem| fail(FilterParam::Since, given, problem.to_string()))?,
            ),
            None => None,
        };
        let until = match &self.until {
            Some(given) => Some(
                parse_when(given, now, true)
                    .map_err(|problem| fail(FilterParam::Until, given, problem.to_string()))?,
            ),
            None => None,
        };
        if let (Some(from), Some(to), Some(given)) = (since, until, &self.since)
            && from > to
        {
            return Err(fail(
                FilterParam::Since,
                given,
                format!(
                    "is after the until date ({}): no note can be in that window",
                    self.until.as_deref().unwrap_or_default()
                ),
            ));
        }
        let folder = |param, given: &String| -> Result<String, FilterError> {
            let folder = given.trim().trim_matches('/').to_string();
            if folder.is_empty() && param == FilterParam::ExcludeFolder {
                return Err(fail(
                    param,
                    given,
                    "is empty: it would leave out every note".into(),
                ));
            }
            Ok(folder)
        };
        let tag = |param, given: &String| -> Result<String, FilterError> {
            let tag = given.trim().trim_start_matches('#').trim();
            if fold(tag).is_empty() {
                return Err(fail(param, given, "is empty".into()));
            }
            Ok(tag.to_string())
        };
        Ok(NoteFilter {
            conditions,
            since,
            until,
            folders: self
                .folders
                .iter()
                .map(|f| folder(FilterParam::Folder, f))
                .collect::<Result<_, _>>()?,
            tags: self
                .tags
                .iter()
                .map(|t| tag(FilterParam::Tag, t))
                .collect::<Result<_, _>>()?,
            exclude_folders: self
                .exclude_folders
                .iter()
                .map(|f| folder(FilterParam::ExcludeFolder, f))
                .collect::<Result<_, _>>()?,
            exclude_tags: self
                .exclude_tags
                .iter()
                .map(|t| tag(FilterParam::ExcludeTag, t))
                .collect::<Result<_, _>>()?,
        })
    }
}

/// A moment from a date (`2026-11-01`, or a date and time) or a span back
/// from `now` (`14d`, `2w`, `3m`, `1y`). A day alone is its first second,
/// or its last when it ends a window (`end`), so both ends are inclusive.
pub(crate) fn parse_when(given: &str, now: DateTime<Utc>, end: bool) -> Result<i64, WhenError> {
    let text = given.trim();
    let problem = || WhenError::Neither;
    if let Some(unit) = text.chars().last().filter(|c| "dwmy".contains(*c)) {
        let count = &text[..text.len() - 1];
        if !count.is_empty() && count.bytes().all(|b| b.is_ascii_digit()) {
            let too_far = || WhenError::TooFar;
            let count: u32 = count.parse().map_err(|_| too_far())?;
            let back =
                match unit {
                    'd' => TimeDelta::try_days(i64::from(count))
                        .and_then(|d| now.checked_sub_signed(d)),
                    'w' => TimeDelta::try_weeks(i64::from(count))
                        .and_then(|d| now.checked_sub_signed(d)),
                    'm' => now.checked_sub_months(Months::new(count)),
                    _ => count
                        .checked_mul(12)
                        .and_then(|months| now.checked_sub_months(Months::new(months))),
                };
            return back.map(|t| t.timestamp()).ok_or_else(too_far);
        }
    }
    let date = crate::parse::parse_datetime(text).ok_or_else(problem)?;
    let day_only = !text.contains(':');
    if end && day_only {
        let next = date
            .date_naive()
            .succ_opt()
            .and_then(|d: NaiveDate| d.and_hms_opt(0, 0, 0))
            .ok_or_else(problem)?;
        return Ok(next.and_utc().timestamp() - 1);
    }
    Ok(date.timestamp())
}

/// Why a `--since` or `--until` does not read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum WhenError {
    /// Neither a date nor a span.
    Neither,
    /// A span back past the earliest date there is.
    TooFar,
}

impl fmt::Display for WhenError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            WhenError::Neither => {
                "is neither a date (2026-11-01) nor a span back from now (14d, 2w, 3m, 1y)"
            }
            WhenError::TooFar => "reaches back further than any date",
        })
    }
}

impl std::error::Error for WhenError {}

/// Why a `--where` condition does not read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ConditionError {
    /// Nothing but whitespace.
    Empty,
    /// An operator with nothing before it, or a `!` alone.
    NoKey,
    /// `!KEY` followed by an operator.
    AbsentWithOperator,
    /// Operator characters that make no operator (as written).
    UnknownOperator(String),
    /// An operator (`op`) with no value after it, for the key `key`.
    NoValue { op: &'static str, key: String },
}

impl fmt::Display for ConditionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConditionError::Empty => f.write_str(
                "the condition is empty; write KEY=VALUE, KEY!=VALUE, KEY>=VALUE, \
                        KEY<=VALUE, KEY~TEXT, KEY or !KEY",
            ),
            ConditionError::NoKey => f.write_str("the key is empty"),
            ConditionError::AbsentWithOperator => {
                f.write_str("!KEY takes a key alone, not an operator")
            }
            ConditionError::UnknownOperator(op) => write!(
                f,
                "unknown operator '{op}'; use =, !=, >=, <=, ~ (contains), KEY (present) or !KEY (absent)"
            ),
            ConditionError::NoValue { op, key } => write!(
                f,
                "no value after '{op}' (to ask for notes without the key, write !{key})"
            ),
        }
    }
}

impl std::error::Error for ConditionError {}

fn under_folder(path: &str, folder: &str) -> bool {
    folder.is_empty()
        || path
            .strip_prefix(folder)
            .is_some_and(|rest| rest.starts_with('/'))
}

fn has_tag(tags: &[String], wanted: &str) -> bool {
    let wanted = fold(wanted);
    let wanted = wanted.as_str();
    tags.iter().any(|t| {
        let t = fold(t);
        t == wanted
            || t.strip_prefix(wanted)
                .is_some_and(|rest| rest.starts_with('/'))
    })
}

impl NoteFilter {
    pub fn is_empty(&self) -> bool {
        *self == NoteFilter::default()
    }

    /// Whether this filter reads property values (so a table is needed).
    pub fn needs_properties(&self) -> bool {
        !self.conditions.is_empty()
    }

    /// Whether the note passes every filter. `props` are its property
    /// values (read only when a condition asks).
    pub fn accepts(&self, meta: &NoteMeta, props: &NoteProperties) -> bool {
        self.accepts_meta(meta)
            && self
                .conditions
                .iter()
                .all(|condition| condition.holds(props.values(&condition.key)))
    }

    /// Whether the note passes every filter but the property conditions.
    pub fn accepts_meta(&self, meta: &NoteMeta) -> bool {
        if !self.folders.is_empty() && !self.folders.iter().any(|f| under_folder(&meta.path, f)) {
            return false;
        }
        if self
            .exclude_folders
            .iter()
            .any(|f| under_folder(&meta.path, f))
        {
            return false;
        }
        if !self.tags.is_empty() && !self.tags.iter().any(|t| has_tag(&meta.tags, t)) {
            return false;
        }
        if self.exclude_tags.iter().any(|t| has_tag(&meta.tags, t)) {
            return false;
        }
        if self.since.is_some() || self.until.is_some() {
            let Some(date) = meta.date() else {
                return false;
            };
            if self.since.is_some_and(|since| !is_since(date, since))
                || self.until.is_some_and(|until| date > until)
            {
                return false;
            }
        }
        true
    }

    /// What the filter names that the vault does not have: a folder no
    /// note is under, a tag no note has, a key no note has. Said as a
    /// warning, so that a typo is not read as "no notes match".
    /// `left_out` says why a folder holds no note on purpose (Obsidian's
    /// templates folder, say), so that the warning does not call it missing.
    pub fn warnings(
        &self,
        metas: &crate::note_tables::MetaTable,
        has_key: Option<&dyn Fn(&str) -> bool>,
        left_out: &dyn Fn(&str) -> Option<&'static str>,
    ) -> Vec<String> {
        let mut warnings = Vec::new();
        for (kind, folders) in [
            ("--folder / folders", &self.folders),
            ("--exclude-folder / exclude_folders", &self.exclude_folders),
        ] {
            for folder in folders.iter().filter(|f| !f.is_empty()) {
                if !metas.iter().any(|m| under_folder(&m.path, folder)) {
                    warnings.push(match left_out(folder) {
                        Some(why) => format!("folder '{folder}' is {why} ({kind})"),
                        None => format!("no folder '{folder}' in the vault ({kind})"),
                    });
                }
            }
        }
        for (kind, tags) in [
            ("--tag / tags", &self.tags),
            ("--exclude-tag / exclude_tags", &self.exclude_tags),
        ] {
            for tag in tags {
                if !metas.iter().any(|m| has_tag(&m.tags, tag)) {
                    warnings.push(format!("no note has the tag '{tag}' ({kind})"));
                }
            }
        }
        if let Some(has_key) = has_key {
            let mut named: Vec<&str> = Vec::new();
            for condition in &self.conditions {
                if !named.contains(&condition.key.as_str()) && !has_key(&condition.key) {
                    named.push(&condition.key);
                    warnings.push(format!(
                        "no note has a value for the property '{}' (--where / where)",
                        condition.written
                    ));
                }
            }
        }
        warnings
    }
}

/// A filter bound to one vault: its notes' metadata and, when a condition
/// needs them, their property values.
pub(crate) struct BoundFilter<'a> {
    pub filter: &'a NoteFilter,
    pub metas: &'a crate::note_tables::MetaTable,
    pub props: Option<Arc<PropertyTable>>,
    /// The notes the filter keeps, when the store decided it (in SQL):
    /// then nothing is checked here.
    pub admitted: Option<Arc<Vec<bool>>>,
}

impl BoundFilter<'_> {
    pub(crate) fn accepts(&self, note: usize) -> bool {
        if self.filter.is_empty() {
            return true;
        }
        if let Some(admitted) = &self.admitted {
            return admitted.get(note).copied().unwrap_or(false);
        }
        let Some(meta) = self.metas.get(note) else {
            return false;
        };
        if !self.filter.accepts_meta(meta) {
            return false;
        }
        self.filter
            .conditions
            .iter()
            .all(|condition| match &self.props {
                Some(table) => table.holds(note, condition),
                None => condition.holds::<&str>(&[]),
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cond(text: &str) -> Condition {
        Condition::parse(text).unwrap()
    }

    fn values(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn every_operator_reads_its_key_and_value() {
        assert_eq!(cond(" Status = Active ").key, "status");
        assert!(matches!(cond("status=active").op, Op::Eq(_)));
        assert!(matches!(cond("status!=done").op, Op::Ne(_)));
        assert!(matches!(cond("year>=2020").op, Op::Ge(_)));
        assert!(matches!(cond("year<=2020").op, Op::Le(_)));
        assert_eq!(cond("title~Raft").op, Op::Contains("raft".into()));
        assert_eq!(cond("status").op, Op::Present);
        assert_eq!(cond("!status").op, Op::Absent);
        assert_eq!(cond("!status").key, "status");
        // A value may hold operator characters after the first operator.
        assert!(cond("url=a=b").holds(&values(&["A=B"])));
    }

    #[test]
    fn bad_conditions_say_why() {
        let err = |text| Condition::parse(text).unwrap_err().to_string();
        assert_eq!(
            err("year>2020"),
            "unknown operator '>'; use =, !=, >=, <=, ~ (contains), KEY (present) or !KEY (absent)"
        );
        assert_eq!(
            err("year==2020"),
            "unknown operator '=='; use =, !=, >=, <=, ~ (contains), KEY (present) or !KEY (absent)"
        );
        assert_eq!(err("=x"), "the key is empty");
        assert_eq!(err("!"), "the key is empty");
        assert_eq!(
            err("status="),
            "no value after '=' (to ask for notes without the key, write !status)"
        );
        assert!(err("  ").starts_with("the condition is empty"));
        assert_eq!(err("!a=b"), "!KEY takes a key alone, not an operator");
    }

    #[test]
    fn lists_match_when_any_element_does_and_types_compare_as_themselves() {
        let tags = values(&["Alpha", "beta"]);
        assert!(cond("k=alpha").holds(&tags));
        assert!(!cond("k=gamma").holds(&tags));
        assert!(cond("k!=gamma").holds(&tags));
        assert!(!cond("k!=BETA").holds(&tags));
        // A note without the key is "not equal".
        assert!(cond("k!=x").holds::<&str>(&[]));
        assert!(!cond("k=x").holds::<&str>(&[]));
        // Numbers compare as numbers (9 < 10), text would not.
        assert!(cond("n>=10").holds(&values(&["12"])));
        assert!(!cond("n>=10").holds(&values(&["9"])));
        assert!(cond("n<=10").holds(&values(&["9.5"])));
        assert!(cond("n=10").holds(&values(&["10.0"])));
        // Dates compare as dates; a day asked for compares by the day.
        assert!(cond("d>=2026-11-01").holds(&values(&["2026-11-01T08:30"])));
        assert!(cond("d=2026-11-01").holds(&values(&["2026-11-01 23:00"])));
        assert!(!cond("d>=2026-11-01").holds(&values(&["2026-10-31"])));
        assert!(cond("d<=2026-11-01T12:00").holds(&values(&["2026-11-01T11:00:00Z"])));
        assert!(cond("title~consensus").holds(&values(&["Raft Consensus"])));
    }

    fn now() -> DateTime<Utc> {
        "2026-12-05T12:00:00Z".parse().unwrap()
    }

    #[test]
    fn dates_and_spans_back_from_now() {
        let at = |text: &str, end| {
            DateTime::from_timestamp(parse_when(text, now(), end).unwrap(), 0)
                .unwrap()
                .to_rfc3339()
        };
        assert_eq!(at("2026-11-01", false), "2026-11-01T00:00:00+00:00");
        assert_eq!(at("2026-11-01", true), "2026-11-01T23:59:59+00:00");
        assert_eq!(at("2026-11-01T10:00", true), "2026-11-01T10:00:00+00:00");
        assert_eq!(at("14d", false), "2026-11-21T12:00:00+00:00");
        assert_eq!(at("2w", false), "2026-11-21T12:00:00+00:00");
        assert_eq!(at("3m", false), "2026-09-05T12:00:00+00:00");
        assert_eq!(at("1y", false), "2025-12-05T12:00:00+00:00");
        let problem = "is neither a date (2026-11-01) nor a span back from now (14d, 2w, 3m, 1y)";
        for bad in ["yesterday", "2026-13-01", "14", "d", "-3d", "3 d"] {
            let err = parse_when(bad, now(), false).unwrap_err();
            assert_eq!(
                (err, err.to_string().as_str()),
                (WhenError::Neither, problem),
                "{bad}"
            );
        }
        assert_eq!(
            parse_when("99999999999d", now(), false).unwrap_err(),
            WhenError::TooFar
        );
        assert_eq!(
            parse_when("999999999y", now(), false)
                .unwrap_err()
                .to_string(),
            "reaches back further than any date"
        );
    }

    #[test]
    fn a_window_backwards_is_refused() {
        let filters = Filters {
            since: Some("2026-11-02".into()),
            until: Some("2026-11-01".into()),
            ..Filters::default()
        };
        let err = filters.resolve(now()).unwrap_err();
        assert_eq!(
            err.message(true),
            "--since '2026-11-02': is after the until date (2026-11-01): no note can be in that window"
        );
        assert_eq!(
            err.message(false),
            "since '2026-11-02': is after the until date (2026-11-01): no note can be in that window"
        );
        // One day is a window.
        let day = Filters {
            since: Some("2026-11-01".into()),
            until: Some("2026-11-01".into()),
            ..Filters::default()
        };
        let resolved = day.resolve(now()).unwrap();
        assert_eq!(resolved.until.unwrap() - resolved.since.unwrap(), 86_399);
    }

    #[test]
    fn a_day_without_a_time_is_in_a_window_that_opens_that_day() {
        let day = |text: &str| crate::parse::parse_datetime(text).unwrap().timestamp();
        let yesterday = day("2026-12-06");
        // `--since 1d` at 23:25 on the 7th opens at 23:25 on the 6th.
        let since = day("2026-12-06T23:25:00Z");
        assert!(
            is_since(yesterday, since),
            "yesterday's daily note left out"
        );
        assert!(!is_since(day("2026-12-05"), since));
        // A time of day is compared as it is.
        assert!(!is_since(day("2026-12-06T23:00:00Z"), since));
        assert!(is_since(day("2026-12-06T23:25:00Z"), since));
        assert_eq!(day_of(since), yesterday);
        assert_eq!(day_of(-1), -86_400);
        let mut meta = meta("daily/2026-12-06.md", &[], Some("2026-12-06"));
        let filter = NoteFilter {
            since: Some(since),
            ..NoteFilter::default()
        };
        assert!(filter.accepts_meta(&meta));
        meta.updated = Some(day("2026-12-05"));
        assert!(!filter.accepts_meta(&meta));
    }

    #[test]
    fn empty_tags_and_excluded_roots_are_refused() {
        let err = Filters {
            exclude_folders: vec!["/".into()],
            ..Filters::default()
        }
        .resolve(now())
        .unwrap_err();
        assert_eq!(
            err.message(true),
            "--exclude-folder '/': is empty: it would leave out every note"
        );
        let err = Filters {
            tags: vec!["#".into()],
            ..Filters::default()
        }
        .resolve(now())
        .unwrap_err();
        assert_eq!(err.message(false), "tags '#': is empty");
        let err = Filters {
            conditions: vec!["a".into(); MAX_FILTERS + 1],
            ..Filters::default()
        }
        .resolve(now())
        .unwrap_err();
        assert_eq!(
            err.message(true),
            "--where: at most 32 are accepted, got 33"
        );
    }

    fn meta(path: &str, tags: &[&str], updated: Option<&str>) -> NoteMeta {
        let mut meta =
            crate::vault::Vault::from_texts("/v".into(), &[(path.to_string(), String::new())])
                .metas[0]
                .clone();
        meta.tags = values(tags);
        meta.updated = updated.map(|d| crate::parse::parse_datetime(d).unwrap().timestamp());
        meta
    }

    #[test]
    fn folders_and_tags_include_and_exclude_nested() {
        let filter = Filters {
            folders: vec!["projects/".into(), "areas".into()],
            exclude_folders: vec!["projects/archive".into()],
            tags: vec!["#Work".into()],
            exclude_tags: vec!["draft".into()],
            ..Filters::default()
        }
        .resolve(now())
        .unwrap();
        let none = NoteProperties::default();
        let ok = |path, tags: &[&str]| filter.accepts(&meta(path, tags, None), &none);
        assert!(ok("projects/a.md", &["work"]));
        assert!(ok("areas/b.md", &["work/client"]));
        assert!(!ok("projectsx/a.md", &["work"]));
        assert!(!ok("projects/archive/a.md", &["work"]));
        assert!(!ok("projects/a.md", &["workshop"]));
        assert!(!ok("projects/a.md", &["work", "draft/v2"]));
        assert!(!ok("inbox/a.md", &["work"]));
    }

    #[test]
    fn a_window_keeps_dated_notes_inside_it_only() {
        let filter = Filters {
            since: Some("2w".into()),
            ..Filters::default()
        }
        .resolve(now())
        .unwrap();
        let none = NoteProperties::default();
        assert!(filter.accepts(&meta("a.md", &[], Some("2026-11-25")), &none));
        assert!(!filter.accepts(&meta("a.md", &[], Some("2026-11-20")), &none));
        assert!(!filter.accepts(&meta("a.md", &[], None), &none));
    }

    #[test]
    fn properties_fold_keys_flatten_lists_and_show_links_as_names() {
        let vault = crate::vault::Vault::from_texts(
            "/v".into(),
            &[(
                "a.md".into(),
                "---\nStatus: Active\nauthor: \"[[People/Kevin Kelly|KK]]\"\nyear: 1992\n\
                 topics: [raft, \"[[Paxos]]\"]\nempty:\nnested: {a: 1}\n---\nBody.\n\nrating:: 5\n"
                    .into(),
            )],
        );
        let props = NoteProperties::of(&vault.note(0));
        assert_eq!(props.values("status"), ["Active"]);
        assert_eq!(props.values("author"), ["KK"]);
        assert_eq!(props.values("year"), ["1992"]);
        assert_eq!(props.values("topics"), ["raft", "Paxos"]);
        assert_eq!(props.values("rating"), ["5"]);
        assert!(props.values("empty").is_empty());
        assert!(props.values("nested").is_empty());
        let table = PropertyTable::of_vault(&vault);
        assert_eq!(
            PropertyTable::decode(&table.encode().unwrap()).unwrap(),
            table
        );
        assert!(table.has_key("topics"));
        assert!(!table.has_key("missing"));
        // Tags are read as the note's tags are: a string holds several.
        let vault = crate::vault::Vault::from_texts(
            "/v".into(),
            &[
                (
                    "a.md".into(),
                    "---\ntags: alpha, beta gamma\n---\nx\n".into(),
                ),
                ("b.md".into(), "---\ntag: [alpha, '#beta']\n---\nx\n".into()),
            ],
        );
        assert_eq!(
            NoteProperties::of(&vault.note(0)).values("tags"),
            ["alpha", "beta", "gamma"]
        );
        assert_eq!(
            NoteProperties::of(&vault.note(1)).values("tag"),
            ["alpha", "beta"]
        );
    }

    #[test]
    fn a_table_read_in_place_answers_as_the_decoded_one() {
        let notes = vec![
            NoteProperties(vec![
                ("status".into(), vec!["Active".into()]),
                ("topics".into(), vec!["raft".into(), "Paxos é".into()]),
            ]),
            NoteProperties::default(),
            NoteProperties(vec![("year".into(), vec!["1992".into()])]),
        ];
        let table = PropertyTable::from_notes(notes.clone());
        let bytes = table.encode().unwrap();
        let stored = PropertyTable::in_place(bytes.clone()).unwrap();
        assert_eq!(stored.len(), 3);
        assert!(stored.notes.is_empty());
        for (idx, note) in notes.iter().enumerate() {
            assert_eq!(stored.get(idx), note);
        }
        assert_eq!(stored.get(3), &NoteProperties::default());
        // Conditions read the stored bytes as they read decoded values.
        for text in [
            "topics=paxos é",
            "topics~raf",
            "status=active",
            "!status",
            "year>=1990",
        ] {
            let condition = cond(text);
            for idx in 0..4 {
                assert_eq!(
                    stored.holds(idx, &condition),
                    table.holds(idx, &condition),
                    "{text} on {idx}"
                );
            }
        }
        assert!(stored.holds(0, &cond("topics=paxos é")));
        assert!(!stored.holds(2, &cond("topics=paxos é")));
        assert!(stored.holds(1, &cond("!status")));
        assert!(stored.holds(2, &cond("year>=1990")));
        assert!(stored.has_key("year"));
        assert!(stored.has_key("topics"));
        assert!(!stored.has_key("raft"));
        assert_eq!(stored.encode().unwrap(), bytes);
        assert_eq!(postcard::to_allocvec(&stored).unwrap(), bytes);
        assert_eq!(
            PropertyTable::decode(&stored.encode().unwrap()).unwrap(),
            table
        );
        // Damaged bytes are refused, not read as fewer notes.
        assert!(PropertyTable::in_place(bytes[..bytes.len() - 1].to_vec()).is_err());
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(PropertyTable::in_place(longer).is_err());
        let mut not_utf8 = bytes.clone();
        let at = not_utf8.iter().position(|&b| b == b'A').unwrap();
        not_utf8[at] = 0xff;
        assert!(PropertyTable::in_place(not_utf8).is_err());
        assert!(PropertyTable::in_place(Vec::new()).is_err());
    }
}
