//! The vault map (`pack --map`, MCP `map: true`, `ctxpack://map`): a
//! budgeted overview for an agent meeting a vault for the first time. Four
//! sections: the folders (notes in each, and what the folder's index or
//! folder note says of it), the hub notes (most linked to), the most used
//! tags and the latest activity.
//!
//! Only notes the vault lists are counted or named, so a folder that holds
//! only private notes does not appear. The map is fitted to its budget by
//! taking fewer entries of each section, in a fixed order, until the
//! printed text (in the asked style) fits; the same vault always gives the
//! same map.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::Serialize;

use super::style::{Shape, Style, xml_escape};
use super::{Pack, PackOptions, PartTokens, fixed_point, render};
use crate::note::LinkGraph;
use crate::text::truncate_chars;
use crate::vault::Vault;

/// Entries per section before the budget is applied.
pub(crate) const MAX_FOLDERS: usize = 200;
pub(crate) const MAX_HUBS: usize = 20;
pub(crate) const MAX_TAGS: usize = 40;
pub(crate) const MAX_LATEST: usize = 10;
/// A note linked from fewer notes than this is not a hub.
pub(crate) const MIN_HUB_LINKS: usize = 2;
/// Characters of a description or summary shown.
pub(crate) const DESCRIPTION_CHARS: usize = 160;

/// The map's title, in every style.
pub(crate) const MAP_TITLE: &str = "Vault Map";

/// What the map shows, before it is fitted.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct VaultMap {
    /// Notes the vault lists.
    pub notes: usize,
    /// Folders holding a listed note (all of them, named or not).
    pub folder_count: usize,
    pub folders: Vec<MapFolder>,
    pub hubs: Vec<MapNote>,
    pub tags: Vec<MapTag>,
    pub latest: Vec<MapNote>,
    /// Why there are no hubs, when the links cannot be read.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hubs_unavailable: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct MapFolder {
    /// `concepts/`, `concepts/raft/`.
    pub path: String,
    /// Listed notes in it and below it.
    pub notes: usize,
    /// The summary of its index or folder note.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub description: String,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct MapNote {
    pub path: String,
    pub title: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub summary: String,
    /// Hubs: how many notes link to it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub linked_from: Option<usize>,
    /// Latest activity: the day it was last updated (`YYYY-MM-DD`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub updated: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct MapTag {
    pub tag: String,
    pub notes: usize,
}

/// The map of the notes of `vault` that `listed` accepts, with hubs from
/// `graph` (or `hubs_unavailable` saying why there are none).
pub(crate) fn vault_map(
    vault: &Vault,
    listed: &dyn Fn(&str) -> bool,
    graph: Result<&LinkGraph, String>,
) -> VaultMap {
    let notes: Vec<usize> = (0..vault.metas.len())
        .filter(|&i| listed(&vault.metas[i].path))
        .collect();
    // Folders: every folder above a listed note, counted with its subfolders.
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    for &note in &notes {
        let path = &vault.metas[note].path;
        let mut end = 0;
        while let Some(slash) = path[end..].find('/') {
            end += slash + 1;
            *counts.entry(path[..end].to_string()).or_default() += 1;
        }
    }
    let describe = |folder: &str| -> String {
        let name = folder.trim_end_matches('/');
        let stem = name.rsplit('/').next().unwrap_or(name);
        // An index note inside the folder, else a folder note (inside it,
        // named after it, or beside it), as Obsidian vaults keep them.
        [
            format!("{folder}index.md"),
            format!("{folder}README.md"),
            format!("{folder}{stem}.md"),
            format!("{name}.md"),
        ]
        .iter()
        .filter(|path| listed(path))
        .find_map(|path| vault.metas.search_path(path).ok())
        .map(|note| one_line(&vault.metas[note].summary))
        .unwrap_or_default()
    };
    let mut folders: Vec<MapFolder> = counts
        .into_iter()
        .map(|(path, notes)| MapFolder {
            description: describe(&path),
            path,
            notes,
        })
        .collect();
    // The vault's own front page (`README.md`, `Home.md` at the root), as
    // the root folder `/` holding every note: what a newcomer reads first.
    let front_page = ["index.md", "README.md", "Readme.md", "readme.md", "Home.md"]
        .iter()
        .filter(|path| listed(path))
        .find_map(|path| vault.metas.search_path(path).ok());
    if let Some(note) = front_page {
        folders.push(MapFolder {
            description: one_line(&vault.metas[note].summary),
            path: "/".to_string(),
            notes: notes.len(),
        });
    }
    // The folders most worth naming first: shallow, then large.
    folders.sort_by(|a, b| {
        depth(&a.path)
            .cmp(&depth(&b.path))
            .then(b.notes.cmp(&a.notes))
            .then_with(|| a.path.cmp(&b.path))
    });
    let folder_count = folders.iter().filter(|folder| folder.path != "/").count();
    folders.truncate(MAX_FOLDERS);

    let (hubs, hubs_unavailable) = match graph {
        Ok(graph) => {
            let mut hubs: Vec<(usize, usize)> = notes
                .iter()
                .map(|&note| {
                    let from = graph
                        .linked_from(note)
                        .iter()
                        .filter(|&&source| {
                            vault
                                .metas
                                .get(source as usize)
                                .is_some_and(|m| listed(&m.path))
                        })
                        .count();
                    (note, from)
                })
                .filter(|&(_, from)| from >= MIN_HUB_LINKS)
                .collect();
            hubs.sort_by(|a, b| {
                b.1.cmp(&a.1)
                    .then_with(|| vault.metas[a.0].path.cmp(&vault.metas[b.0].path))
            });
            let hubs = hubs
                .into_iter()
                .take(MAX_HUBS)
                .map(|(note, from)| MapNote {
                    linked_from: Some(from),
                    ..map_note(vault, note)
                })
                .collect();
            (hubs, None)
        }
        Err(why) => (Vec::new(), Some(why)),
    };

    let mut tag_counts: BTreeMap<String, (String, usize)> = BTreeMap::new();
    for &note in &notes {
        // A set, not a list: a note may hold many thousands of tags.
        let mut seen: std::collections::HashSet<String> = std::collections::HashSet::new();
        for tag in &vault.metas[note].tags {
            let key = crate::text::fold(tag);
            if !seen.insert(key.clone()) {
                continue;
            }
            let entry = tag_counts.entry(key).or_insert((tag.clone(), 0));
            entry.1 += 1;
        }
    }
    let mut tags: Vec<MapTag> = tag_counts
        .into_values()
        .map(|(tag, notes)| MapTag { tag, notes })
        .collect();
    tags.sort_by(|a, b| b.notes.cmp(&a.notes).then_with(|| a.tag.cmp(&b.tag)));
    tags.truncate(MAX_TAGS);

    let mut latest: Vec<usize> = notes
        .iter()
        .copied()
        .filter(|&note| vault.metas[note].date().is_some())
        .collect();
    latest.sort_by(|&a, &b| {
        let (ma, mb) = (&vault.metas[a], &vault.metas[b]);
        mb.date()
            .cmp(&ma.date())
            .then_with(|| ma.path.cmp(&mb.path))
    });
    let latest = latest
        .into_iter()
        .take(MAX_LATEST)
        .map(|note| MapNote {
            updated: vault.metas[note]
                .updated_at()
                .map(|at| at.format("%Y-%m-%d").to_string()),
            ..map_note(vault, note)
        })
        .collect();

    VaultMap {
        notes: notes.len(),
        folder_count,
        folders,
        hubs,
        tags,
        latest,
        hubs_unavailable,
    }
}

fn map_note(vault: &Vault, note: usize) -> MapNote {
    let meta = &vault.metas[note];
    MapNote {
        path: meta.path.clone(),
        title: meta.title.clone(),
        summary: one_line(&meta.summary),
        linked_from: None,
        updated: None,
    }
}

fn one_line(text: &str) -> String {
    truncate_chars(&crate::text::collapse_whitespace(text), DESCRIPTION_CHARS)
}

fn depth(folder: &str) -> usize {
    folder.matches('/').count()
}

/// How many entries of each section are printed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Take {
    folders: usize,
    hubs: usize,
    tags: usize,
    latest: usize,
}

impl Take {
    fn all(map: &VaultMap) -> Take {
        Take {
            folders: map.folders.len(),
            hubs: map.hubs.len(),
            tags: map.tags.len(),
            latest: map.latest.len(),
        }
    }

    /// One entry fewer, from the section holding the most (ties: the
    /// latest activity goes first, then hubs, then tags, folders last),
    /// so a small map keeps a little of everything.
    fn shrink(&mut self) -> bool {
        let most = self.folders.max(self.hubs).max(self.tags).max(self.latest);
        if most == 0 {
            return false;
        }
        if self.latest == most {
            self.latest -= 1;
        } else if self.hubs == most {
            self.hubs -= 1;
        } else if self.tags == most {
            self.tags -= 1;
        } else {
            self.folders -= 1;
        }
        true
    }
}

/// The map as it is printed: its entries cut to `take`.
#[derive(Serialize)]
struct Printed<'a> {
    title: &'static str,
    generated: &'a str,
    budget: usize,
    actual: usize,
    counter: crate::tokens::Tokenizer,
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    notices: &'a [String],
    #[serde(skip_serializing_if = "Option::is_none")]
    fence: Option<&'a str>,
    notes: usize,
    folder_count: usize,
    folders: &'a [MapFolder],
    hubs: &'a [MapNote],
    tags: &'a [MapTag],
    latest: &'a [MapNote],
    #[serde(skip_serializing_if = "Option::is_none")]
    hubs_unavailable: Option<&'a str>,
}

/// The map of `map` in `shape`, fitted to `options.budget` under its
/// counter, fenced if asked, each printed text passed through `redact`.
/// An error is a template's.
pub(crate) fn map_pack(
    map: &VaultMap,
    options: &PackOptions,
    shape: &Shape,
    redact: &dyn Fn(&str) -> Option<String>,
) -> Result<Pack, super::template::TemplateError> {
    let generated = options
        .generated_at
        .to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let tokenizer = options.tokenizer;
    let budget = options.budget;
    let print =
        |take: Take| -> Result<(String, usize, Option<String>), super::template::TemplateError> {
            let mut folders: Vec<MapFolder> = map.folders[..take.folders].to_vec();
            // Printed as a tree: in path order.
            folders.sort_by(|a, b| a.path.cmp(&b.path));
            let hubs = &map.hubs[..take.hubs];
            let tags = &map.tags[..take.tags];
            let latest = &map.latest[..take.latest];
            let fence = options.fence.then(|| {
                let content = serde_json::to_string(&(&folders, hubs, tags, latest, map.notes))
                    .unwrap_or_default();
                render::fence_id(&content)
            });
            let notices: Vec<String> = fence.iter().map(|id| render::fence_notice(id)).collect();
            let mut failure = None;
            let mut text_for = |actual: usize| -> String {
                let printed = Printed {
                    title: MAP_TITLE,
                    generated: &generated,
                    budget,
                    actual,
                    counter: tokenizer,
                    notices: &notices,
                    fence: fence.as_deref(),
                    notes: map.notes,
                    folder_count: map.folder_count,
                    folders: &folders,
                    hubs,
                    tags,
                    latest,
                    hubs_unavailable: map.hubs_unavailable.as_deref(),
                };
                let text = match shape {
                    Shape::Style(Style::Markdown) => markdown(&printed, false),
                    Shape::Style(Style::Plain) => markdown(&printed, true),
                    Shape::Style(Style::Xml) => xml(&printed),
                    Shape::Style(Style::Json) => {
                        let mut text = serde_json::to_string_pretty(&printed).unwrap_or_default();
                        text.push('\n');
                        text
                    }
                    Shape::Template(template) => {
                        let model = serde_json::to_value(&printed).unwrap_or_default();
                        match template.render_value(model) {
                            Ok(text) => text,
                            Err(error) => {
                                failure.get_or_insert(error);
                                String::new()
                            }
                        }
                    }
                };
                redact(&text).unwrap_or(text)
            };
            let actual = fixed_point(|a| tokenizer.count(&text_for(a)));
            let text = text_for(actual);
            if let Some(error) = failure {
                return Err(error);
            }
            let counted = tokenizer.count(&text);
            Ok((text, counted, fence))
        };
    // Every cut of the map, from all entries to none, one entry fewer
    // each step: the printed size falls along it, so the largest that fits
    // is found by bisection (a few prints, not one per entry).
    let mut takes = vec![Take::all(map)];
    let mut last = takes[0];
    while last.shrink() {
        takes.push(last);
    }
    let (mut text, mut actual, mut fence) = print(takes[0])?;
    let mut take = takes[0];
    if actual > budget {
        // `over` prints over the budget; `fits` fits (`takes.len()`: none
        // found yet, the empty map included).
        let (mut fits, mut over) = (takes.len(), 0);
        let mut best = None;
        while over + 1 < fits {
            let mid = (over + fits) / 2;
            let printed = print(takes[mid])?;
            if printed.1 <= budget {
                fits = mid;
                best = Some((mid, printed));
            } else {
                over = mid;
            }
        }
        match best {
            Some((at, printed)) => {
                take = takes[at];
                (text, actual, fence) = printed;
            }
            None => actual = budget + 1,
        }
    }
    if actual > budget {
        // Not even the header fits: nothing is printed, as in a pack.
        text.clear();
        actual = 0;
        fence = None;
    }
    let mut warnings = Vec::new();
    // A map is no seed pack: its warning weighs what it printed.
    if actual > super::LARGE_BUDGET {
        warnings.push(render::large_pack_warning(actual));
    }
    Ok(Pack {
        mode: "map",
        topic: None,
        query_terms: Vec::new(),
        ranker: "map",
        signal_errors: Vec::new(),
        semantic: String::new(),
        research: None,
        graph: None,
        budget,
        actual,
        counter: tokenizer,
        methodology: tokenizer.methodology(),
        generated,
        candidates: 0,
        pages: Vec::new(),
        pages_dropped: 0,
        dropped: Vec::new(),
        dailies: Vec::new(),
        dailies_dropped: 0,
        below_threshold: 0,
        parts: PartTokens::default(),
        warnings,
        diagnostics: Vec::new(),
        pins_cut: Vec::new(),
        already_in_context: Vec::new(),
        preface: fence.iter().map(|id| render::fence_notice(id)).collect(),
        fence,
        map: Some(cut(map, take)),
        bundle: text,
        wiki: false,
        filtered: false,
    })
}

/// The markdown map of `vault`'s listed notes (every listed note: a vault
/// without a view), no redaction beyond the policy's.
pub(crate) fn markdown_map(
    vault: &Vault,
    graph: Result<&LinkGraph, String>,
    options: &PackOptions,
) -> Pack {
    let map = vault_map(vault, &|path| vault.is_listed(path), graph);
    let policy = vault.policy();
    // Markdown never fails (only a template can).
    map_pack(&map, options, &Shape::default(), &|text| {
        policy.redact_printed(text)
    })
    .unwrap_or_else(|error| unreachable!("only a template fails, and markdown is none: {error}"))
}

/// `map` with only the entries `take` printed.
fn cut(map: &VaultMap, take: Take) -> VaultMap {
    let mut folders = map.folders[..take.folders].to_vec();
    folders.sort_by(|a, b| a.path.cmp(&b.path));
    VaultMap {
        notes: map.notes,
        folder_count: map.folder_count,
        folders,
        hubs: map.hubs[..take.hubs].to_vec(),
        tags: map.tags[..take.tags].to_vec(),
        latest: map.latest[..take.latest].to_vec(),
        hubs_unavailable: map.hubs_unavailable.clone(),
    }
}

/// Markdown, or (`plain`) the same lines without markup.
fn markdown(map: &Printed, plain: bool) -> String {
    let hash = if plain { "" } else { "# " };
    let link = |path: &str| {
        let name = path.strip_suffix(".md").unwrap_or(path);
        if plain {
            name.to_string()
        } else {
            format!("[[{name}]]")
        }
    };
    let section = |out: &mut String, name: &str| {
        if plain {
            let _ = write!(out, "\n{name}:\n");
        } else {
            let _ = write!(out, "\n## {name}\n");
        }
    };
    let mut body = String::new();
    if !map.folders.is_empty() {
        section(&mut body, "Folders");
        for folder in map.folders {
            let indent = "  ".repeat(depth(&folder.path).saturating_sub(1));
            let noun = if folder.notes == 1 { "note" } else { "notes" };
            let _ = write!(body, "{indent}- {} ({} {noun})", folder.path, folder.notes);
            if !folder.description.is_empty() {
                let _ = write!(body, ": {}", folder.description);
            }
            body.push('\n');
        }
    }
    if !map.hubs.is_empty() || map.hubs_unavailable.is_some() {
        section(&mut body, "Hubs");
        if let Some(why) = map.hubs_unavailable {
            let _ = writeln!(body, "(none: {why})");
        }
        for hub in map.hubs {
            let _ = write!(
                body,
                "- {} (linked from {} notes)",
                link(&hub.path),
                hub.linked_from.unwrap_or(0)
            );
            if !hub.summary.is_empty() {
                let _ = write!(body, ": {}", hub.summary);
            }
            body.push('\n');
        }
    }
    if !map.tags.is_empty() {
        section(&mut body, "Tags");
        let tags: Vec<String> = map
            .tags
            .iter()
            .map(|t| {
                format!(
                    "#{} ({})",
                    t.tag.split_whitespace().collect::<Vec<_>>().join("-"),
                    t.notes
                )
            })
            .collect();
        let _ = writeln!(body, "{}", tags.join(", "));
    }
    if !map.latest.is_empty() {
        section(&mut body, "Latest activity");
        for note in map.latest {
            let _ = write!(
                body,
                "- {} {}",
                note.updated.as_deref().unwrap_or(""),
                link(&note.path)
            );
            if !note.summary.is_empty() {
                let _ = write!(body, ": {}", note.summary);
            }
            body.push('\n');
        }
    }
    // The header last: its Methodology line depends on the body.
    let mut out = String::new();
    let _ = writeln!(out, "{hash}{}", map.title);
    let _ = writeln!(out, "{hash}Generated: {}", map.generated);
    let _ = writeln!(
        out,
        "{hash}Budget: {} tokens | Actual: {} tokens | Notes: {} | Folders: {}",
        map.budget, map.actual, map.notes, map.folder_count
    );
    // The counter counts CJK characters whole (chars4): a map that
    // prints some says so, as a pack does.
    let cjk =
        crate::tokens::has_cjk(&body) || map.notices.iter().any(|n| crate::tokens::has_cjk(n));
    let _ = writeln!(
        out,
        "{hash}Methodology: {}",
        map.counter.methodology_for(cjk)
    );
    for line in map.notices {
        let _ = writeln!(out, "{hash}{line}");
    }
    match map.fence {
        Some(id) if !body.is_empty() => {
            out.push('\n');
            out.push_str(&render::fence_open(id));
            out.push_str(body.trim_start_matches('\n'));
            out.push_str(&render::fence_close(id));
        }
        _ => out.push_str(&body),
    }
    out
}

fn xml(map: &Printed) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "<vault_map generated=\"{}\" budget=\"{}\" actual=\"{}\" counter=\"{}\" notes=\"{}\">",
        xml_escape(map.generated),
        map.budget,
        map.actual,
        map.counter,
        map.notes
    );
    for line in map.notices {
        let _ = writeln!(out, "<notice>{}</notice>", xml_escape(line));
    }
    if let Some(id) = map.fence {
        out.push_str(&render::fence_open(id));
    }
    out.push_str("<folders>\n");
    for folder in map.folders {
        let _ = writeln!(
            out,
            "<folder path=\"{}\" notes=\"{}\">{}</folder>",
            xml_escape(&folder.path),
            folder.notes,
            xml_escape(&folder.description)
        );
    }
    out.push_str("</folders>\n<hubs>\n");
    for hub in map.hubs {
        let _ = writeln!(
            out,
            "<hub source=\"{}\" title=\"{}\" linked_from=\"{}\">{}</hub>",
            xml_escape(&hub.path),
            xml_escape(&hub.title),
            hub.linked_from.unwrap_or(0),
            xml_escape(&hub.summary)
        );
    }
    out.push_str("</hubs>\n<tags>\n");
    for tag in map.tags {
        let _ = writeln!(
            out,
            "<tag name=\"{}\" notes=\"{}\"/>",
            xml_escape(&tag.tag),
            tag.notes
        );
    }
    out.push_str("</tags>\n<latest>\n");
    for note in map.latest {
        let _ = writeln!(
            out,
            "<note source=\"{}\" title=\"{}\" updated=\"{}\">{}</note>",
            xml_escape(&note.path),
            xml_escape(&note.title),
            xml_escape(note.updated.as_deref().unwrap_or("")),
            xml_escape(&note.summary)
        );
    }
    out.push_str("</latest>\n");
    if let Some(id) = map.fence {
        out.push_str(&render::fence_close(id));
    }
    out.push_str("</vault_map>\n");
    out
}
