//! An embedded Bases view (`![[Books.base#Author]]`) shown as the list of
//! notes it would show, when ctxpack can evaluate its filters.

use std::cmp::Ordering;
use std::sync::Arc;

use yaml_serde::Value;

use crate::note::Note;
use crate::parse::base::{self, Arg, Expr, Filter, Subject, View};
use crate::parse::frontmatter;
use crate::parse::properties::{collect, link_name, shown_value};
use crate::text::fold;
use crate::vault::Vault;

/// A view lists at most this many notes (a view's own `limit` may be lower).
pub(crate) const BASE_MAX_ROWS: usize = 50;
/// Filters reading properties parse at most this many notes per view;
/// past that the embed stays a link.
pub(crate) const BASE_MAX_SCAN: usize = 5000;
/// A row shows at most this many of the view's columns.
const MAX_COLUMNS: usize = 4;

/// A rendered view: its text and how many notes it lists.
pub(crate) struct Rendered {
    pub text: String,
    pub notes: usize,
}

/// The Bases file a link written in the note at `from` names: an exact
/// path, else the nearest file of that name (same folder first, then the
/// shortest path).
pub(crate) fn resolve(vault: &Vault, from: &str, target: &str) -> Option<String> {
    let wanted = target
        .trim()
        .trim_start_matches("./")
        .trim_start_matches('/');
    let lower = wanted.to_lowercase();
    if let Some(exact) = vault.bases().find(|p| p.to_lowercase() == lower) {
        return Some(exact.clone());
    }
    let folder = from.rsplit_once('/').map_or("", |(folder, _)| folder);
    vault
        .bases()
        .filter(|p| p.to_lowercase().ends_with(&format!("/{lower}")))
        .min_by_key(|p| {
            let same_folder = p.rsplit_once('/').map_or("", |(f, _)| f) == folder;
            (!same_folder, p.matches('/').count(), p.to_string())
        })
        .cloned()
}

/// The view `view` (or the first) of the Bases file at `path`, as the
/// notes it lists for the note `this`; an error is the embed's status.
pub(crate) fn render(
    vault: &Vault,
    path: &str,
    view: Option<&str>,
    this: &Note,
) -> Result<Rendered, &'static str> {
    let text = vault
        .read_base(path, base::MAX_BASE_BYTES)
        .ok_or("unreadable")?;
    let parsed = base::parse(&text).map_err(|_| "unreadable")?;
    let chosen = match view {
        Some(name) => parsed
            .views
            .iter()
            .find(|v| fold(&v.name) == fold(name))
            .ok_or("no_such_view")?,
        None => parsed.views.first().ok_or("no_such_view")?,
    };
    let filters: Vec<&Filter> = parsed.filters.iter().chain(&chosen.filters).collect();
    if filters.iter().any(|f| !supported(f)) {
        return Err("unsupported_filter");
    }
    let this_idx = vault.metas.search_path(&this.meta.path).ok();
    let mut scan = Scan {
        vault,
        this,
        this_idx,
        parsed: 0,
    };
    let mut rows = Vec::new();
    for idx in 0..vault.metas.len() {
        let mut note: Option<Arc<Note>> = None;
        let mut keep = true;
        for filter in &filters {
            if !scan.eval(filter, idx, &mut note)? {
                keep = false;
                break;
            }
        }
        if keep {
            rows.push((idx, note));
        }
    }
    let mut rows: Vec<(usize, Arc<Note>)> = rows
        .into_iter()
        .map(|(idx, note)| (idx, note.unwrap_or_else(|| vault.note(idx))))
        .collect();
    sort_rows(vault, chosen, &mut rows);
    let total = rows.len();
    let limit = chosen.limit.unwrap_or(BASE_MAX_ROWS).min(BASE_MAX_ROWS);
    let columns: Vec<String> = chosen
        .order
        .iter()
        .filter_map(|c| column_property(c))
        .filter(|c| !vault.policy().is_policy_field(c))
        .take(MAX_COLUMNS)
        .collect();
    let stem = path.rsplit('/').next().unwrap_or(path);
    let stem = stem.rsplit_once('.').map_or(stem, |(s, _)| s);
    let name = if chosen.name.is_empty() {
        stem.to_string()
    } else {
        format!("{stem} › {}", chosen.name)
    };
    let mut lines = vec![match total {
        0 => format!("{name}: no notes"),
        1 => format!("{name} (1 note):"),
        n => format!("{name} ({n} notes):"),
    }];
    for (idx, note) in rows.iter().take(limit) {
        let shown: Vec<String> = columns
            .iter()
            .filter_map(|column| {
                let value = frontmatter::get(&note.frontmatter, column)?;
                Some(format!("{column}: {}", shown_value(value)?))
            })
            .collect();
        let title = &vault.metas[*idx].title;
        lines.push(match shown.is_empty() {
            true => format!("- {title}"),
            false => format!("- {title} ({})", shown.join("; ")),
        });
    }
    if total > limit {
        lines.push(format!("- … and {} more", total - limit));
    }
    Ok(Rendered {
        text: lines.join("\n"),
        notes: total.min(limit),
    })
}

/// The property a column shows (`note.year`, `year`); `None` for file
/// fields and formulas, which a row's title already covers or ctxpack
/// does not compute.
fn column_property(column: &str) -> Option<String> {
    let name = column.strip_prefix("note.").unwrap_or(column);
    (!name.starts_with("file.") && !name.starts_with("formula.") && !name.is_empty())
        .then(|| name.to_string())
}

fn supported(filter: &Filter) -> bool {
    match filter {
        Filter::And(list) | Filter::Or(list) | Filter::Not(list) => list.iter().all(supported),
        Filter::Expr(expr) => supported_expr(expr),
    }
}

fn supported_expr(expr: &Expr) -> bool {
    match expr {
        Expr::Unsupported(_) => false,
        Expr::Negated(inner) => supported_expr(inner),
        _ => true,
    }
}

/// Evaluation over the vault's notes, parsing a note only when a filter
/// reads its properties or links, and never more than [`BASE_MAX_SCAN`].
struct Scan<'a> {
    vault: &'a Vault,
    this: &'a Note,
    this_idx: Option<usize>,
    parsed: usize,
}

impl Scan<'_> {
    fn eval(
        &mut self,
        filter: &Filter,
        idx: usize,
        note: &mut Option<Arc<Note>>,
    ) -> Result<bool, &'static str> {
        Ok(match filter {
            Filter::And(list) => {
                for f in list {
                    if !self.eval(f, idx, note)? {
                        return Ok(false);
                    }
                }
                true
            }
            Filter::Or(list) => {
                for f in list {
                    if self.eval(f, idx, note)? {
                        return Ok(true);
                    }
                }
                false
            }
            Filter::Not(list) => {
                for f in list {
                    if self.eval(f, idx, note)? {
                        return Ok(false);
                    }
                }
                true
            }
            Filter::Expr(expr) => self.expr(expr, idx, note)?,
        })
    }

    fn note(
        &mut self,
        idx: usize,
        note: &mut Option<Arc<Note>>,
    ) -> Result<Arc<Note>, &'static str> {
        if let Some(note) = note {
            return Ok(Arc::clone(note));
        }
        self.parsed += 1;
        if self.parsed > BASE_MAX_SCAN {
            return Err("too_many_notes");
        }
        let loaded = self.vault.note(idx);
        *note = Some(Arc::clone(&loaded));
        Ok(loaded)
    }

    fn expr(
        &mut self,
        expr: &Expr,
        idx: usize,
        note: &mut Option<Arc<Note>>,
    ) -> Result<bool, &'static str> {
        let meta = &self.vault.metas[idx];
        Ok(match expr {
            Expr::Negated(inner) => !self.expr(inner, idx, note)?,
            Expr::Unsupported(_) => return Err("unsupported_filter"),
            Expr::HasTag(tags) => meta.tags.iter().any(|tag| {
                let tag = tag.to_lowercase();
                tags.iter().any(|wanted| {
                    let wanted = wanted.to_lowercase();
                    tag == wanted || tag.starts_with(&format!("{wanted}/"))
                })
            }),
            Expr::InFolder(folder) => {
                folder.is_empty() || meta.path.starts_with(&format!("{folder}/"))
            }
            Expr::LinksToThis => {
                let loaded = self.note(idx, note)?;
                self.this_idx.is_some_and(|this| {
                    loaded
                        .links
                        .iter()
                        .any(|link| self.vault.resolve(&meta.path, link) == Some(this))
                })
            }
            Expr::Compare {
                subject,
                arg,
                equal,
            } => {
                let values = self.values(subject, idx, note)?;
                let matched = values.iter().any(|v| self.same(v, arg, &meta.path));
                matched == *equal
            }
            Expr::Contains { subject, args, any } => {
                let values = self.values(subject, idx, note)?;
                let scalar_text = matches!(
                    subject,
                    Subject::FileName
                        | Subject::FilePath
                        | Subject::FileFolder
                        | Subject::FileExt
                        | Subject::PropertyText(_)
                ) || self.is_text_property(subject, idx, note)?;
                let this = &self.this.meta;
                let hit = |arg: &Arg| match (arg, scalar_text) {
                    // `"text".contains("x")` is a substring test, also of
                    // the embedding note's name or path
                    // (`created.toString().contains(this.file.name)`).
                    (Arg::Text(wanted), true) => values.iter().any(|v| v.contains(wanted.as_str())),
                    (Arg::ThisName, true) => values.iter().any(|v| v.contains(this.stem())),
                    (Arg::ThisPath, true) => values.iter().any(|v| v.contains(this.path.as_str())),
                    _ => values.iter().any(|v| self.same(v, arg, &meta.path)),
                };
                if *any {
                    args.iter().any(hit)
                } else {
                    args.iter().all(hit)
                }
            }
        })
    }

    /// The texts a subject holds for note `idx` (a list's items; a
    /// property as written, links included).
    fn values(
        &mut self,
        subject: &Subject,
        idx: usize,
        note: &mut Option<Arc<Note>>,
    ) -> Result<Vec<String>, &'static str> {
        let meta = &self.vault.metas[idx];
        Ok(match subject {
            Subject::FileName => vec![meta.stem().to_string()],
            Subject::FilePath => vec![meta.path.clone()],
            Subject::FileFolder => {
                vec![
                    meta.path
                        .rsplit_once('/')
                        .map_or("", |(f, _)| f)
                        .to_string(),
                ]
            }
            Subject::FileExt => {
                vec![
                    meta.path
                        .rsplit_once('.')
                        .map_or("", |(_, e)| e)
                        .to_string(),
                ]
            }
            Subject::FileTags => meta.tags.clone(),
            Subject::Property(name) | Subject::PropertyText(name) => {
                if self.vault.policy().is_policy_field(name) {
                    return Ok(Vec::new());
                }
                let loaded = self.note(idx, note)?;
                let mut items = Vec::new();
                if let Some(value) = frontmatter::get(&loaded.frontmatter, name) {
                    raw_items(value, 0, &mut items);
                }
                match subject {
                    Subject::PropertyText(_) if !items.is_empty() => vec![items.join(", ")],
                    _ => items,
                }
            }
        })
    }

    /// Whether a property holds a single text (not a list), so that
    /// `contains("x")` reads as a substring test.
    fn is_text_property(
        &mut self,
        subject: &Subject,
        idx: usize,
        note: &mut Option<Arc<Note>>,
    ) -> Result<bool, &'static str> {
        let Subject::Property(name) = subject else {
            return Ok(false);
        };
        let loaded = self.note(idx, note)?;
        Ok(matches!(
            frontmatter::get(&loaded.frontmatter, name),
            Some(Value::String(_))
        ))
    }

    /// Whether one value (written in the note at `from`) equals `arg`:
    /// links compare by the note they resolve to, or by name when the
    /// argument names no note.
    fn same(&self, value: &str, arg: &Arg, from: &str) -> bool {
        let value = value.trim();
        match arg {
            Arg::Text(text) => value == text,
            Arg::ThisName => value == self.this.meta.stem(),
            Arg::ThisPath => value == self.this.meta.path,
            Arg::This => self.refers_to(value, from, self.this_idx, self.this.meta.stem()),
            Arg::Link(name) => {
                let target = self.vault.resolver().resolve_target(
                    &self.vault.metas,
                    &self.this.meta.path,
                    name,
                    false,
                );
                self.refers_to(value, from, target, name)
            }
        }
    }

    fn refers_to(&self, value: &str, from: &str, target: Option<usize>, name: &str) -> bool {
        let inner = value
            .strip_prefix("[[")
            .and_then(|v| v.strip_suffix("]]"))
            .unwrap_or(value);
        let written = inner.split(['|', '#']).next().unwrap_or(inner).trim();
        match target {
            Some(target) => {
                self.vault
                    .resolver()
                    .resolve_target(&self.vault.metas, from, written, false)
                    == Some(target)
            }
            None => fold(&link_name(inner)) == fold(name.rsplit('/').next().unwrap_or(name)),
        }
    }
}

/// A property's scalar items as written (links kept as `[[…]]`; an
/// unquoted `[[x]]`, which YAML reads as nested lists, gives `x`).
fn raw_items(value: &Value, depth: usize, items: &mut Vec<String>) {
    if depth > 3 || items.len() > 1000 {
        return;
    }
    match value {
        Value::Sequence(seq) => seq.iter().for_each(|v| raw_items(v, depth + 1, items)),
        Value::Tagged(tagged) => raw_items(&tagged.value, depth, items),
        other => {
            if let Some(text) = frontmatter::scalar(other) {
                items.push(text);
            }
        }
    }
}

/// Rows in the view's sort order (keys ctxpack cannot read are skipped),
/// then by path.
fn sort_rows(vault: &Vault, view: &View, rows: &mut [(usize, Arc<Note>)]) {
    let key = |idx: usize, note: &Note, property: &str| -> Option<String> {
        let meta = &vault.metas[idx];
        match property {
            "file.name" | "file.basename" => Some(meta.stem().to_string()),
            "file.path" => Some(meta.path.clone()),
            _ => {
                let name = column_property(property)?;
                let mut items = Vec::new();
                collect(frontmatter::get(&note.frontmatter, &name)?, 0, &mut items);
                items.into_iter().next()
            }
        }
    };
    rows.sort_by(|(a, note_a), (b, note_b)| {
        for (property, descending) in &view.sort {
            let order = compare_keys(key(*a, note_a, property), key(*b, note_b, property));
            let order = if *descending { order.reverse() } else { order };
            if order != Ordering::Equal {
                return order;
            }
        }
        vault.metas[*a].path.cmp(&vault.metas[*b].path)
    });
}

/// Numbers compare as numbers, other texts as folded text; a missing
/// value sorts last.
fn compare_keys(a: Option<String>, b: Option<String>) -> Ordering {
    match (a, b) {
        (None, None) => Ordering::Equal,
        (None, Some(_)) => Ordering::Greater,
        (Some(_), None) => Ordering::Less,
        (Some(a), Some(b)) => match (a.parse::<f64>(), b.parse::<f64>()) {
            (Ok(x), Ok(y)) => x.total_cmp(&y),
            _ => fold(&a).cmp(&fold(&b)).then(a.cmp(&b)),
        },
    }
}
