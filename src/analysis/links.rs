//! A note's links as the link table keeps them, their resolution against
//! a vault's notes, and the backlinks a store keeps: one implementation,
//! which the embedded index and the PostgreSQL store both call, so their
//! link tables, backlinks and graphs are the same.

use rayon::prelude::*;

use crate::note::Note;
use crate::note_tables::MetaTable;
use crate::parse::markdown::LinkKind;
use crate::vault::{LinkResolver, Vault};

/// How many notes linking to a note each store keeps (the first, in path
/// order of the linking notes).
pub(crate) const BACKLINKS_KEPT: usize = 32;

/// A link as parsed, kept so it can be resolved again after other notes
/// change.
#[derive(Clone, Debug)]
pub(crate) struct RawLink {
    pub target: String,
    pub markdown: bool,
    pub context: (u32, u32),
}

pub(crate) fn raw_links(note: &Note) -> Vec<RawLink> {
    let in_body = note
        .links
        .iter()
        .filter(|l| l.kind != LinkKind::Embed && !l.target.is_empty())
        .map(|link| RawLink {
            target: link.target.clone(),
            markdown: link.kind == LinkKind::Markdown,
            context: sentence_around(&note.body, link.range.clone()),
        });
    let in_properties = crate::parse::properties::property_links(&note.frontmatter)
        .into_iter()
        .map(|(property, target)| RawLink {
            target,
            markdown: false,
            context: (crate::note::PROPERTY_CONTEXT, property as u32),
        });
    in_body.chain(in_properties).collect()
}

/// The byte range of the sentence containing `range`, at most about 300
/// bytes on each side (cut at character boundaries).
fn sentence_around(body: &str, range: std::ops::Range<usize>) -> (u32, u32) {
    const ENDS: [char; 7] = ['.', '!', '?', '。', '！', '？', '\n'];
    let floor = body.floor_char_boundary(range.start.saturating_sub(300));
    // Only ends near the link can count (a farther one is past the cap), so
    // the search stays within the window: many links on one long line would
    // otherwise each scan the line. The window reaches a character before
    // `floor`, whose end may fall on it.
    let lookback = body.floor_char_boundary(floor.saturating_sub(4));
    let mut start = body[lookback..range.start]
        .rfind(|c| ENDS.contains(&c))
        .map(|i| lookback + i)
        .map_or(0, |i| {
            i + body[i..].chars().next().map_or(1, char::len_utf8)
        });
    if start < floor {
        start = body[floor..range.start]
            .find(char::is_whitespace)
            .map_or(range.start, |i| floor + i);
    }
    let ceiling = body.ceil_char_boundary((range.end + 300).min(body.len()));
    let mut end = body[range.end..ceiling]
        .find(|c| ENDS.contains(&c))
        .map_or(body.len(), |i| {
            range.end
                + i
                + body[range.end + i..]
                    .chars()
                    .next()
                    .map_or(1, char::len_utf8)
        });
    if end > ceiling {
        end = body[range.end..ceiling]
            .rfind(char::is_whitespace)
            .map_or(range.end, |i| range.end + i);
    }
    (start as u32, end as u32)
}

/// One backlink: the linking note and the span of the link's sentence in
/// it (see [`crate::note::Note::link_context`]).
pub(crate) type LinkEntry = (usize, u32, u32);

/// The first `per_target` of `entries` whose sentence says more than its
/// links, with that sentence. A pack asks only for the pages it shows,
/// and reads only as many linking notes as it takes to find them: a note
/// a thousand others link to costs a few reads, not a thousand. They are
/// read in runs that double (each run at once: on every core, or in one
/// batch from a store), so a page whose first links are bare lists still
/// costs a few batches, never one per link.
pub(crate) fn backlink_sentences(
    vault: &Vault,
    entries: &[LinkEntry],
    per_target: usize,
) -> Vec<(usize, String)> {
    let entries: Vec<LinkEntry> = entries
        .iter()
        .copied()
        .filter(|&(source, _, _)| source < vault.metas.len())
        .collect();
    let mut kept = Vec::new();
    let mut run = per_target.max(1);
    let mut rest = entries.as_slice();
    while kept.len() < per_target && !rest.is_empty() {
        let (now, later) = rest.split_at(run.min(rest.len()));
        let sources: Vec<usize> = now.iter().map(|e| e.0).collect();
        vault.preload(&sources);
        for &(source, start, end) in now {
            if kept.len() >= per_target {
                break;
            }
            let context = vault.note(source).link_context((start, end));
            if says_something(&context) {
                kept.push((source, context));
            }
        }
        rest = later;
        run *= 2;
    }
    kept
}

/// True when a link's sentence has words besides its links (a bare list of
/// links makes a useless backlink entry).
fn says_something(context: &str) -> bool {
    let mut rest = context;
    let mut words = 0;
    while !rest.is_empty() {
        if let Some(after) = rest.strip_prefix("[[")
            && let Some(close) = after.find("]]")
        {
            rest = &after[close + 2..];
            continue;
        }
        let ch = rest.chars().next().unwrap_or(' ');
        if ch.is_alphanumeric() {
            words += 1;
        }
        rest = &rest[ch.len_utf8()..];
    }
    words >= 3
}

/// Resolves every note's links against `metas` (the notes in path order;
/// `links[source]` are the links written in note `source`) as Obsidian
/// would, in parallel, each note's resolved links in their written order.
/// `written` gives a link's target as written and whether it is a
/// Markdown link; `keep` makes what is kept of a link that resolves, from
/// the link and its target's index. A link that resolves to no note is
/// dropped.
pub(crate) fn resolve_links<L: Send, T: Send>(
    metas: &MetaTable,
    resolver: &LinkResolver,
    links: Vec<Vec<L>>,
    written: impl Fn(&L) -> (&str, bool) + Sync,
    keep: impl Fn(L, usize) -> T + Sync,
) -> Vec<Vec<T>> {
    // Taken by value so that a note's links are dropped (and what `keep`
    // takes from them moved, not copied) as soon as they are resolved.
    links
        .into_par_iter()
        .enumerate()
        .map(|(source, links)| {
            let from = &metas[source].path;
            links
                .into_iter()
                .filter_map(|link| {
                    let (target, markdown) = written(&link);
                    let target = resolver.resolve_target(metas, from, target, markdown)?;
                    Some(keep(link, target))
                })
                .collect()
        })
        .collect()
}

/// Each of `notes` notes' backlinks as the stores keep them: the first
/// [`BACKLINKS_KEPT`] other notes linking to it, in the order `links`
/// gives them (`(source, target, sentence span)`, sources in path order),
/// each source once, with the span of its first link's sentence.
pub(crate) fn first_backlinks(
    notes: usize,
    links: impl IntoIterator<Item = (usize, usize, (u32, u32))>,
) -> Vec<Vec<LinkEntry>> {
    let mut incoming: Vec<Vec<LinkEntry>> = vec![Vec::new(); notes];
    for (source, target, (start, end)) in links {
        if target == source || target >= notes {
            continue;
        }
        let list = &mut incoming[target];
        if list.len() < BACKLINKS_KEPT && list.iter().all(|entry| entry.0 != source) {
            list.push((source, start, end));
        }
    }
    incoming
}

#[cfg(test)]
mod tests {
    use super::*;

    fn metas(paths: &[&str]) -> MetaTable {
        MetaTable::new(
            paths
                .iter()
                .map(|path| crate::parse::parse_note(path, "", None).0.meta)
                .collect(),
        )
    }

    #[test]
    fn links_resolve_by_name_and_path_in_written_order_and_unresolved_ones_drop() {
        let metas = metas(&["a.md", "notes/b.md", "notes/c.md"]);
        let resolver = LinkResolver::new(&metas);
        let links: Vec<Vec<(&str, bool, u32)>> = vec![
            vec![
                ("c", false, 1),
                ("missing", false, 2),
                ("notes/b.md", true, 3),
            ],
            vec![],
            vec![("A", false, 4), ("c", false, 5)],
        ];
        let resolved = resolve_links(
            &metas,
            &resolver,
            links,
            |link| (link.0, link.1),
            |link, target| (target, link.2),
        );
        assert_eq!(
            resolved,
            vec![vec![(2, 1), (1, 3)], vec![], vec![(0, 4), (2, 5)]]
        );
    }

    #[test]
    fn backlinks_keep_each_source_once_never_the_note_itself_and_at_most_the_limit() {
        let mut links = vec![
            (1, 0, (10, 20)),
            (1, 0, (30, 40)),
            (0, 0, (1, 2)),
            (2, 0, (5, 6)),
            (2, 1, (7, 8)),
            (0, 9, (1, 2)),
        ];
        let kept = first_backlinks(3, links.clone());
        assert_eq!(
            kept,
            vec![vec![(1, 10, 20), (2, 5, 6)], vec![(2, 7, 8)], vec![]]
        );
        links = (1..=BACKLINKS_KEPT + 5)
            .map(|source| (source, 0, (source as u32, 0)))
            .collect();
        let kept = first_backlinks(BACKLINKS_KEPT + 6, links);
        let sources: Vec<usize> = kept[0].iter().map(|entry| entry.0).collect();
        assert_eq!(sources, (1..=BACKLINKS_KEPT).collect::<Vec<_>>());
    }

    #[test]
    fn backlink_sentences_read_only_the_linking_notes_they_need() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("vault");
        std::fs::create_dir(&root).unwrap();
        std::fs::write(root.join("target.md"), "# Target\n\nThe note.\n").unwrap();
        // Six links in bare lists first (they say nothing), then forty in
        // sentences.
        for i in 0..46 {
            let line = if i < 6 {
                "- [[target]]"
            } else {
                "This explains the idea well: [[target]]."
            };
            std::fs::write(
                root.join(format!("n{i:02}.md")),
                format!("# N{i}\n\n{line}\n"),
            )
            .unwrap();
        }
        let root = root.canonicalize().unwrap();
        let config = crate::index::IndexConfig::new(dir.path().join("index"));
        // A vault read from the index reads a note when it is asked for.
        let open = || crate::index::VaultIndex::open(&root, &config).unwrap().0;
        let index = open();
        let target = index.catalog.metas.position("target.md").unwrap();
        let entries = index.backlink_entries(&[target]).remove(&target).unwrap();
        assert_eq!(entries.len(), BACKLINKS_KEPT);
        let probe = index.vault();
        let every_note_read: Vec<(usize, String)> = entries
            .iter()
            .map(|&(source, start, end)| (source, probe.note(source).link_context((start, end))))
            .filter(|(_, context)| says_something(context))
            .take(5)
            .collect();

        let vault = open().vault();
        let kept = backlink_sentences(&vault, &entries, 5);
        assert_eq!(kept, every_note_read);
        assert_eq!(kept[0].1, "This explains the idea well: [[target]].");
        // Runs of 5, then 10: fifteen of the 32 linking notes kept.
        assert_eq!(vault.notes_read(), 15);
    }

    #[test]
    fn sentences_around_links_respect_character_boundaries() {
        let body = format!("{}[[x]]{}", "如".repeat(200), "果".repeat(200));
        let start = 600;
        let (from, to) = sentence_around(&body, start..start + 5);
        assert!(body.is_char_boundary(from as usize) && body.is_char_boundary(to as usize));
        let body = "First one. The link [[x]] sits here. Last.";
        let at = body.find("[[").unwrap();
        let (from, to) = sentence_around(body, at..at + 5);
        assert_eq!(
            &body[from as usize..to as usize],
            " The link [[x]] sits here."
        );
    }

    proptest::proptest! {
        #[test]
        fn sentences_around_any_link_are_valid_ranges(
            before in "[a-z如果。. \n]{0,400}",
            after in "[a-z如果。. \n]{0,400}",
        ) {
            let body = format!("{before}[[x]]{after}");
            let start = before.len();
            let (from, to) = sentence_around(&body, start..start + 5);
            proptest::prop_assert!(from as usize <= start && to as usize >= start + 5);
            proptest::prop_assert!(body.get(from as usize..to as usize).is_some());
        }

        #[test]
        fn sentences_around_links_are_those_of_a_search_of_the_whole_body(
            // Sentence ends far apart, so that some fall outside the window.
            before in "([a-z如 ]{0,350}[。.!\n]){0,3}[a-z如 ]{0,350}",
            after in "([a-z如 ]{0,350}[。.!\n]){0,3}[a-z如 ]{0,350}",
        ) {
            let body = format!("{before}[[x]]{after}");
            let start = before.len();
            proptest::prop_assert_eq!(
                sentence_around(&body, start..start + 5),
                unbounded_sentence_around(&body, start..start + 5)
            );
        }
    }

    /// `sentence_around` as it was before its searches kept to the window:
    /// the reference its results must equal.
    fn unbounded_sentence_around(body: &str, range: std::ops::Range<usize>) -> (u32, u32) {
        const ENDS: [char; 7] = ['.', '!', '?', '。', '！', '？', '\n'];
        let floor = body.floor_char_boundary(range.start.saturating_sub(300));
        let mut start = body[..range.start]
            .rfind(|c| ENDS.contains(&c))
            .map_or(0, |i| {
                i + body[i..].chars().next().map_or(1, char::len_utf8)
            });
        if start < floor {
            start = body[floor..range.start]
                .find(char::is_whitespace)
                .map_or(range.start, |i| floor + i);
        }
        let ceiling = body.ceil_char_boundary((range.end + 300).min(body.len()));
        let mut end = body[range.end..]
            .find(|c| ENDS.contains(&c))
            .map_or(body.len(), |i| {
                range.end
                    + i
                    + body[range.end + i..]
                        .chars()
                        .next()
                        .map_or(1, char::len_utf8)
            });
        if end > ceiling {
            end = body[range.end..ceiling]
                .rfind(char::is_whitespace)
                .map_or(range.end, |i| range.end + i);
        }
        (start as u32, end as u32)
    }
}
