//! Resolving a link's target to a note, the way Obsidian does.

use rustc_hash::FxHashMap;

use crate::note_tables::MetaTable;
use crate::parse::markdown::{Link, LinkKind};
use crate::text::fold;

/// Lookup tables from link targets to note indices.
#[derive(Debug, Default)]
pub struct LinkResolver {
    by_path: FxHashMap<String, usize>,
    by_stem: FxHashMap<String, Vec<usize>>,
    by_title: FxHashMap<String, Vec<usize>>,
}

impl LinkResolver {
    pub fn new(notes: &MetaTable) -> LinkResolver {
        let mut resolver = LinkResolver::default();
        for (idx, note) in notes.iter().enumerate() {
            resolver.by_path.insert(note.name().to_lowercase(), idx);
            resolver
                .by_stem
                .entry(note.stem().to_lowercase())
                .or_default()
                .push(idx);
            for name in std::iter::once(&note.title).chain(&note.aliases) {
                let entry = resolver.by_title.entry(fold(name)).or_default();
                if !entry.contains(&idx) {
                    entry.push(idx);
                }
            }
        }
        resolver
    }

    /// Resolves `link`, written in the note at path `from`, to a note index.
    pub fn resolve(&self, notes: &MetaTable, from: &str, link: &Link) -> Option<usize> {
        if link.target.is_empty() {
            return self.by_path.get(&strip_md(from).to_lowercase()).copied();
        }
        self.resolve_target(notes, from, &link.target, link.kind == LinkKind::Markdown)
    }

    /// Resolves a target as written (`name`, `folder/name`, `../name`).
    pub fn resolve_target(
        &self,
        notes: &MetaTable,
        from: &str,
        target: &str,
        relative_first: bool,
    ) -> Option<usize> {
        let target = strip_md(target.trim().trim_start_matches("./"));
        let lower = target.to_lowercase();
        let folder = from.rsplit_once('/').map_or("", |(folder, _)| folder);
        let relative = join_relative(folder, &lower);
        let exact = || self.by_path.get(lower.trim_start_matches('/')).copied();
        let near = || relative.as_ref().and_then(|p| self.by_path.get(p).copied());
        let found = if relative_first {
            near().or_else(exact)
        } else {
            exact().or_else(near)
        };
        if found.is_some() {
            return found;
        }
        let stem = lower.rsplit('/').next().unwrap_or(&lower);
        if let Some(candidates) = self.by_stem.get(stem) {
            let matching: Vec<usize> = candidates
                .iter()
                .copied()
                .filter(|&idx| {
                    let name = notes[idx].name().to_lowercase();
                    name == lower || name.ends_with(&format!("/{lower}"))
                })
                .collect();
            if let Some(best) = pick_nearest(notes, folder, &matching) {
                return Some(best);
            }
        }
        match self.by_title.get(&fold(target)) {
            Some(candidates) if candidates.len() == 1 => Some(candidates[0]),
            _ => None,
        }
    }
}

fn strip_md(path: &str) -> &str {
    path.strip_suffix(".md")
        .or_else(|| path.strip_suffix(".MD"))
        .unwrap_or(path)
}

/// Joins `target` to `folder`, resolving `.` and `..`; `None` if it climbs
/// above the vault root.
fn join_relative(folder: &str, target: &str) -> Option<String> {
    let mut parts: Vec<&str> = folder.split('/').filter(|p| !p.is_empty()).collect();
    for part in target.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop()?;
            }
            part => parts.push(part),
        }
    }
    Some(parts.join("/").to_lowercase())
}

/// Among same-named notes, prefers one in the linking note's folder, then
/// the shortest path, then the first in path order.
fn pick_nearest(notes: &MetaTable, folder: &str, candidates: &[usize]) -> Option<usize> {
    candidates.iter().copied().min_by_key(|&idx| {
        let path = &notes[idx].path;
        let note_folder = path.rsplit_once('/').map_or("", |(f, _)| f);
        (note_folder != folder, path.len(), path.clone())
    })
}

#[cfg(test)]
mod tests {
    use crate::vault::Vault;

    fn vault() -> Vault {
        let files: Vec<(String, String)> = [
            ("a/topic.md", "---\ntitle: Alpha Topic\n---\n"),
            ("b/topic.md", "x"),
            ("b/deeper/topic.md", "x"),
            ("b/other.md", "---\naliases: [The Other]\n---\n"),
            ("root.md", "x"),
        ]
        .iter()
        .map(|(p, t)| (p.to_string(), t.to_string()))
        .collect();
        Vault::from_texts("/v".into(), &files)
    }

    fn resolve(vault: &Vault, from: &str, target: &str) -> Option<String> {
        vault
            .resolver()
            .resolve_target(&vault.metas, from, target, false)
            .map(|i| vault.metas[i].path.clone())
    }

    #[test]
    fn resolves_like_obsidian() {
        let v = vault();
        assert_eq!(
            resolve(&v, "root.md", "a/topic").as_deref(),
            Some("a/topic.md")
        );
        assert_eq!(
            resolve(&v, "root.md", "A/Topic.md").as_deref(),
            Some("a/topic.md")
        );
        // A bare name prefers the linking note's folder, then the shortest path.
        assert_eq!(
            resolve(&v, "b/other.md", "topic").as_deref(),
            Some("b/topic.md")
        );
        assert_eq!(
            resolve(&v, "a/topic.md", "topic").as_deref(),
            Some("a/topic.md")
        );
        assert_eq!(
            resolve(&v, "root.md", "topic").as_deref(),
            Some("a/topic.md")
        );
        assert_eq!(
            resolve(&v, "b/other.md", "deeper/topic").as_deref(),
            Some("b/deeper/topic.md")
        );
        assert_eq!(
            resolve(&v, "b/deeper/topic.md", "../other").as_deref(),
            Some("b/other.md")
        );
        // Titles and aliases as a last resort.
        assert_eq!(
            resolve(&v, "root.md", "the other").as_deref(),
            Some("b/other.md")
        );
        assert_eq!(
            resolve(&v, "root.md", "alpha topic").as_deref(),
            Some("a/topic.md")
        );
        assert_eq!(resolve(&v, "root.md", "missing"), None);
        assert_eq!(resolve(&v, "root.md", "../../etc/passwd"), None);
    }
}
