//! Resolving a link's target to a note, the way Obsidian does.

use crate::note_tables::{Blob, MetaTable, NameTable};
use crate::parse::markdown::{Link, LinkKind};
use crate::text::fold;

/// Why a stored resolver could not be read (the index is damaged).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum ResolverError {
    /// A table's length runs past the resolver's part.
    CutShort,
    /// Bytes left over after the three tables.
    TrailingBytes,
    /// One of its name tables, and why.
    Table(crate::note_tables::TableError),
}

impl std::fmt::Display for ResolverError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ResolverError::CutShort => f.write_str("resolver cut short"),
            ResolverError::TrailingBytes => f.write_str("resolver has trailing bytes"),
            ResolverError::Table(why) => why.fmt(f),
        }
    }
}

impl std::error::Error for ResolverError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ResolverError::Table(why) => Some(why),
            _ => None,
        }
    }
}

/// Lookup tables from link targets to note indices: a note's lowercased
/// name (its path without `.md`), its lowercased file stem, and its folded
/// title and aliases. Sorted tables, so an index stores them and a command
/// reads them in place.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct LinkResolver {
    by_path: NameTable,
    by_stem: NameTable,
    by_title: NameTable,
}

impl LinkResolver {
    pub fn new(notes: &MetaTable) -> LinkResolver {
        let (mut paths, mut stems, mut titles) = (Vec::new(), Vec::new(), Vec::new());
        for (idx, note) in notes.iter().enumerate() {
            let idx = idx as u32;
            paths.push((note.name().to_lowercase(), idx));
            stems.push((note.stem().to_lowercase(), idx));
            for name in std::iter::once(&note.title).chain(&note.aliases) {
                titles.push((fold(name), idx));
            }
        }
        LinkResolver {
            by_path: NameTable::new(paths),
            by_stem: NameTable::new(stems),
            by_title: NameTable::new(titles),
        }
    }

    /// The three tables, each length-prefixed.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        for table in [&self.by_path, &self.by_stem, &self.by_title] {
            let bytes = table.encoded();
            out.extend_from_slice(&(bytes.len() as u64).to_le_bytes());
            out.extend_from_slice(bytes);
        }
        out
    }

    /// The resolver [`encode`](Self::encode) wrote into `part` of `blob`.
    pub(crate) fn decode(
        blob: Blob,
        part: std::ops::Range<usize>,
    ) -> Result<LinkResolver, ResolverError> {
        let mut tables = Vec::with_capacity(3);
        let mut at = part.start;
        for _ in 0..3 {
            let len: [u8; 8] = blob
                .get(at..at + 8)
                .and_then(|b| b.try_into().ok())
                .ok_or(ResolverError::CutShort)?;
            let start = at + 8;
            let end = usize::try_from(u64::from_le_bytes(len))
                .ok()
                .and_then(|len| start.checked_add(len))
                .filter(|&end| end <= part.end)
                .ok_or(ResolverError::CutShort)?;
            tables.push(
                NameTable::decode(std::sync::Arc::clone(&blob), start..end)
                    .map_err(ResolverError::Table)?,
            );
            at = end;
        }
        if at != part.end {
            return Err(ResolverError::TrailingBytes);
        }
        let by_title = tables.pop().unwrap_or_default();
        let by_stem = tables.pop().unwrap_or_default();
        let by_path = tables.pop().unwrap_or_default();
        Ok(LinkResolver {
            by_path,
            by_stem,
            by_title,
        })
    }

    /// The note whose lowercased name is `name` (the last in path order
    /// when names differ only in case).
    fn path(&self, name: &str) -> Option<usize> {
        self.by_path.get(name).last()
    }

    /// Resolves `link`, written in the note at path `from`, to a note index.
    pub fn resolve(&self, notes: &MetaTable, from: &str, link: &Link) -> Option<usize> {
        if link.target.is_empty() {
            return self
                .path(&strip_md(from).to_lowercase())
                .filter(|&idx| idx < notes.len());
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
        let exact = || self.path(lower.trim_start_matches('/'));
        let near = || relative.as_ref().and_then(|p| self.path(p));
        let found = if relative_first {
            near().or_else(exact)
        } else {
            exact().or_else(near)
        };
        if let Some(found) = found.filter(|&idx| idx < notes.len()) {
            return Some(found);
        }
        let stem = lower.rsplit('/').next().unwrap_or(&lower);
        let matching: Vec<usize> = self
            .by_stem
            .get(stem)
            .filter(|&idx| idx < notes.len())
            .filter(|&idx| {
                let name = notes[idx].name().to_lowercase();
                name == lower || name.ends_with(&format!("/{lower}"))
            })
            .collect();
        if let Some(best) = pick_nearest(notes, folder, &matching) {
            return Some(best);
        }
        let mut titled = self.by_title.get(&fold(target));
        match (titled.next(), titled.next()) {
            (Some(only), None) if only < notes.len() => Some(only),
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
    fn a_damaged_resolver_says_how() {
        use super::{LinkResolver, ResolverError};
        let v = vault();
        let bytes = v.resolver().encode();
        let len = bytes.len();
        let blob = |bytes: Vec<u8>| std::sync::Arc::new(bytes.into());
        let read = LinkResolver::decode(blob(bytes.clone()), 0..len).unwrap();
        assert_eq!(read.encode(), bytes);
        let cut = LinkResolver::decode(blob(bytes.clone()), 0..len - 1).unwrap_err();
        assert_eq!(cut, ResolverError::CutShort);
        assert_eq!(cut.to_string(), "resolver cut short");
        let mut longer = bytes.clone();
        longer.push(0);
        let trailing = LinkResolver::decode(blob(longer), 0..len + 1).unwrap_err();
        assert_eq!(trailing.to_string(), "resolver has trailing bytes");
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
