//! How much of a note is lists of links: bookmarks, reading lists, link
//! tables. Such a note matches many words in its link titles and explains
//! none of them, so ranking weighs it below notes that explain
//! (`retrieve::rescore::LinkListRescorer`). Computed once when a note is
//! parsed, and kept in its `NoteMeta`, so both stores rank alike.

use crate::note::{Block, BlockKind};

/// The share, in percent, of a note's text (its paragraphs, lists, quotes,
/// tables and code, by characters) that is on link lines: lines that are
/// at least half Markdown links to pages elsewhere (`[title](https://…)`)
/// or bare URLs. Links to the vault's own notes do not count, wikilinks
/// or Markdown (`[title](a.md)`): a list of them is a map of the vault,
/// not a list of pages elsewhere.
pub(crate) fn link_list_percent(body: &str, blocks: &[Block]) -> u8 {
    let (mut text, mut links) = (0usize, 0usize);
    for block in blocks {
        let Some(block_text) = body.get(block.range.clone()) else {
            continue;
        };
        match block.kind {
            BlockKind::Paragraph | BlockKind::List | BlockKind::Quote | BlockKind::Table => {}
            // Code explains; it counts as text, never as links.
            BlockKind::Code => {
                text += block_text.chars().count();
                continue;
            }
            _ => continue,
        }
        for line in block_text.lines() {
            let line = line.trim();
            if line.is_empty() || is_table_rule(line) {
                continue;
            }
            let (visible, linked) = link_chars(line);
            text += visible;
            if visible > 0 && 2 * linked >= visible {
                links += visible;
            }
        }
    }
    if text == 0 {
        return 0;
    }
    (links * 100 / text) as u8
}

/// Whether `line` is at least half (by the characters a reader sees: a
/// link's label, not its target) Markdown links to other pages or bare
/// URLs.
pub(crate) fn is_link_line(line: &str) -> bool {
    let (visible, linked) = link_chars(line.trim());
    visible > 0 && 2 * linked >= visible
}

/// `|---|:---:|`: a table's alignment row.
fn is_table_rule(line: &str) -> bool {
    line.starts_with('|') && line.chars().all(|c| matches!(c, '|' | '-' | ':' | ' '))
}

/// The characters of `line` a reader sees (a Markdown link's label, not
/// its target), and how many of them are links to other pages (not to an
/// anchor of this one) or bare URLs.
///
/// Linear in the line: only a `[` or an `h` can start a link or a URL, so
/// the text between them is counted whole, and the next `](` and `)` are
/// each searched for once and remembered, not again from every `[` (a line
/// of brackets without a close was quadratic).
fn link_chars(line: &str) -> (usize, usize) {
    // Most lines hold neither: counted in one pass.
    if memchr::memchr(b'[', line.as_bytes()).is_none() && !line.contains("http") {
        return (line.chars().count(), 0);
    }
    let (mut visible, mut linked) = (0, 0);
    let mut link_middle = NextMatch::new("](");
    let mut link_end = NextMatch::new(")");
    let mut at = 0;
    while at < line.len() {
        let Some(offset) = memchr::memchr2(b'[', b'h', &line.as_bytes()[at..]) else {
            visible += line[at..].chars().count();
            break;
        };
        visible += line[at..at + offset].chars().count();
        at += offset;
        let rest = &line[at..];
        if rest.starts_with('[')
            && let Some(close) = link_middle.at_or_after(line, at + 1)
            && !line[close + 2..].starts_with('#')
            && let Some(end) = link_end.at_or_after(line, close + 2)
        {
            let label = line[at + 1..close].chars().count();
            visible += label;
            if is_elsewhere(&line[close + 2..end]) {
                linked += label;
            }
            at = end + 1;
        } else if rest.starts_with("https://") || rest.starts_with("http://") {
            let len = rest.find(char::is_whitespace).unwrap_or(rest.len());
            let url = rest[..len].chars().count();
            visible += url;
            linked += url;
            at += len;
        } else {
            // `[` and `h` are one byte each.
            visible += 1;
            at += 1;
        }
    }
    (visible, linked)
}

/// Whether a Markdown link's target is a page elsewhere (`https://…`,
/// `mailto:…`, `www.…`), not a file of the vault (`Keyboard_Note.md`,
/// `../Java/Java_Note.md#jdk`): a list of links to the vault's own notes
/// is a map of it, as a list of wikilinks is.
fn is_elsewhere(target: &str) -> bool {
    let target = target.trim_start_matches('<').trim_start();
    let scheme = target
        .find(':')
        .map(|colon| &target[..colon])
        .filter(|scheme| {
            !scheme.is_empty()
                && scheme
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
        });
    // A drive letter (`C:\…`) is a path, not a scheme.
    scheme.is_some_and(|scheme| scheme.len() > 1) || target.starts_with("www.")
}

/// The first occurrence of a needle at or after a position that only moves
/// forward, found once per occurrence (or once in all, when there is none).
struct NextMatch {
    needle: &'static str,
    /// Searched from `from`: the first occurrence there, or none at all.
    found: Option<(usize, Option<usize>)>,
}

impl NextMatch {
    fn new(needle: &'static str) -> NextMatch {
        NextMatch {
            needle,
            found: None,
        }
    }

    fn at_or_after(&mut self, text: &str, position: usize) -> Option<usize> {
        match self.found {
            Some((from, None)) if from <= position => return None,
            Some((from, Some(found))) if from <= position && found >= position => {
                return Some(found);
            }
            _ => {}
        }
        let found = text
            .get(position..)
            .and_then(|rest| rest.find(self.needle))
            .map(|offset| position + offset);
        self.found = Some((position, found));
        found
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn percent(body: &str) -> u8 {
        link_list_percent(body, &crate::parse::markdown::analyze(body).blocks)
    }

    #[test]
    fn a_list_of_external_links_is_all_links_and_prose_is_none() {
        assert_eq!(
            percent(
                "## 镜像\n\n* [Docker开源数千款DHI镜像](https://zhuanlan.zhihu.com/p/1)\n* https://docs.docker.com/engine/\n"
            ),
            100
        );
        assert_eq!(
            percent("Docker 镜像是容器的模板。\n\n```\ndocker rmi x\n```\n"),
            0
        );
        // Wikilinks, anchors, Markdown links to the vault's notes and a
        // link inside a sentence are not link lines.
        assert_eq!(
            percent(
                "- [[Raft]]\n- [目录](#toc)\n- [机械键盘](Keyboard_Mechanical_Note.md)\n- [Java](../Java/Java_Note.md#jdk)\n\nSee [the paper](https://raft.github.io) for the proofs of safety and of membership changes.\n"
            ),
            0
        );
        assert_eq!(
            percent("- [mail](mailto:a@example.org)\n- [site](www.example.org)\n"),
            100
        );
        assert!(!is_elsewhere("C:\\notes\\a.md"));
        assert!(is_elsewhere("<https://example.org>"));
    }

    #[test]
    fn the_share_is_by_characters_and_a_link_table_counts() {
        // 38 characters of prose, 38 seen on a link line (its target
        // unseen): half.
        let body = "0123456789 0123456789 0123456789 01234\n\n- [0123456789 0123456789 0123456789 012](https://example.org/abcdefghijklmn)\n";
        assert_eq!(percent(body), 50);
        // A link in a sentence is a few of its characters: no link line.
        assert!(!is_link_line(
            "Tidy Sync mirrors a vault to a [remote folder](https://docs.example.org/tidy-sync/guide/remote-folders.html) on a schedule."
        ));
        let table =
            "| 镜像 | 地址 |\n|:---:|:---:|\n| 科大 | https://docker.mirrors.ustc.edu.cn |\n";
        // A head of 11 characters, a row of 43 (34 of them a URL).
        assert_eq!(percent(table), 79);
        assert_eq!(percent(""), 0);
    }

    #[test]
    fn lines_of_unclosed_brackets_count_as_text_in_one_pass() {
        let brackets = "[".repeat(200_000);
        assert_eq!(link_chars(&brackets), (200_000, 0));
        let opened = "[a](".repeat(50_000);
        assert_eq!(link_chars(&opened), (200_000, 0));
        let anchors = "[a](#b) ".repeat(3);
        assert_eq!(link_chars(&anchors), (24, 0));
        // The first `[` opens the link, as in Markdown's label `x [label`;
        // an `h` that starts no URL is text.
        assert_eq!(link_chars("[x [label](https://e.org) hh"), (11, 8));
        assert_eq!(link_chars("é https://e.org/ü x"), (19, 15));
    }
}
