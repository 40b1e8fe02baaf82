//! `index.md` and `hot.md` as a client may see them. They describe the
//! vault's notes, private ones included, so the lines that would tell a
//! client of a note it cannot read are dropped: every line holding a
//! wikilink, embed or Markdown note link that does not resolve to a listed
//! note. A private note, one the walker skips, one in a library no work
//! binds and one that does not exist look alike (all unlisted), so the rule
//! cannot tell them apart, and a client cannot either: a line linking a
//! note still to be written is dropped too.

use crate::privacy::Prepared;
use crate::vault::Vault;

/// The text of the role file `prepared` without its lines that link to a
/// note the vault does not list.
pub(super) fn without_unlisted_links(vault: &Vault, prepared: &Prepared) -> String {
    let text = prepared.text.as_str();
    let note = &prepared.note;
    let from = note.meta.path.as_str();
    // The body's links are the note's own; the frontmatter is scanned the
    // same way, since its text is shown too.
    let body_start = match text.strip_suffix(note.body.as_str()) {
        Some(head) => head.len(),
        None => 0,
    };
    let head_links = crate::parse::markdown::analyze(&text[..body_start]).links;
    let body_links = if body_start > 0 || text == note.body {
        note.links.clone()
    } else {
        // The body is not where it was expected: scan the whole text.
        crate::parse::markdown::analyze(text).links
    };
    let unlisted: Vec<std::ops::Range<usize>> = head_links
        .iter()
        .map(|link| (link, 0))
        .chain(body_links.iter().map(|link| (link, body_start)))
        .filter(|(link, _)| !link.target.is_empty())
        .filter(|(link, _)| {
            !vault
                .resolve(from, link)
                .and_then(|idx| vault.metas.get(idx))
                .is_some_and(|meta| vault.is_listed(&meta.path))
        })
        .map(|(link, offset)| link.range.start + offset..link.range.end + offset)
        .chain(unlisted_raw_targets(vault, from, text))
        .collect();
    if unlisted.is_empty() {
        return prepared.text.clone();
    }
    let mut kept = String::with_capacity(text.len());
    let mut start = 0;
    for line in text.split_inclusive('\n') {
        let end = start + line.len();
        if !unlisted
            .iter()
            .any(|link| link.start < end && start < link.end)
        {
            kept.push_str(line);
        }
        start = end;
    }
    kept
}

/// The places in `text` naming a file the parser reads no link in, and
/// which is not a listed note: a Markdown image's target (`![](a.md)`, an
/// embed where wikilinks are off), an HTML `href` or `src`, and a link
/// reference definition (`[j]: a.md`). Each target is resolved as a
/// Markdown link to it would be; web addresses are left alone.
fn unlisted_raw_targets(vault: &Vault, from: &str, text: &str) -> Vec<std::ops::Range<usize>> {
    let mut found = Vec::new();
    let mut start = 0;
    for line in text.split_inclusive('\n') {
        // Read as shown: `journal&#47;diary.md` names a file too.
        let shown = crate::privacy::policy::decoded_references(line);
        // A wikilink the parser does not read as one (in a code span, say)
        // still names its note to whoever reads the line.
        if written_wikilinks(&shown).any(|link| {
            !link.target.is_empty()
                && !vault
                    .resolve(from, &link)
                    .and_then(|idx| vault.metas.get(idx))
                    .is_some_and(|meta| vault.is_listed(&meta.path))
        }) {
            found.push(start..start + line.len());
            start += line.len();
            continue;
        }
        // A path without its extension names a note too (`priv/plan`):
        // one under a private folder is never listed, whatever it holds.
        if extensionless_paths(&shown)
            .any(|path| vault.policy().is_private_path(&format!("{path}.md")))
        {
            found.push(start..start + line.len());
            start += line.len();
            continue;
        }
        let bare = bare_paths(&shown);
        for target in raw_targets(line)
            .into_iter()
            .chain(addresses(line))
            .chain(bare.iter().map(String::as_str))
        {
            if let Some(named) = note_in_address(vault, target) {
                let listed = [named.clone(), format!("{named}.md")]
                    .iter()
                    .any(|path| vault.is_listed(path));
                if !listed {
                    found.push(start..start + line.len());
                    break;
                }
                continue;
            }
            if target.contains("://") || target.starts_with("mailto:") || target.starts_with('#') {
                continue;
            }
            let link_text = format!("[x](<{target}>)");
            let listed = crate::parse::markdown::analyze(&link_text)
                .links
                .first()
                .and_then(|link| vault.resolve(from, link))
                .and_then(|idx| vault.metas.get(idx))
                .is_some_and(|meta| vault.is_listed(&meta.path));
            if !listed {
                found.push(start..start + line.len());
                break;
            }
        }
        start += line.len();
    }
    found
}

/// The vault path an address names a note by: Obsidian's
/// `obsidian://open?vault=…&file=…` (or `&path=…`, an absolute path), and
/// a `file://` address inside the vault. `None` for any other address, or
/// one leading outside the vault.
fn note_in_address(vault: &Vault, target: &str) -> Option<String> {
    let decode = crate::parse::markdown::percent_decode;
    let inside = |absolute: &str| -> Option<String> {
        let path = crate::index::location::resolved(std::path::Path::new(absolute));
        let relative = path.strip_prefix(&vault.root).ok()?;
        Some(relative.to_string_lossy().replace('\\', "/"))
    };
    let lower = target.to_ascii_lowercase();
    if lower.starts_with("obsidian://") {
        let rest = &target["obsidian://".len()..];
        // `obsidian://vault/NAME/PATH`, the shorthand form.
        if rest.to_ascii_lowercase().starts_with("vault/") {
            let path = rest["vault/".len()..]
                .split_once('/')
                .map_or("", |(_, path)| path);
            return Some(decode(path));
        }
        let query = rest.split_once('?').map_or("", |(_, query)| query);
        for pair in query.split('&') {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            let value = decode(&value.replace('+', " "));
            match key.to_ascii_lowercase().as_str() {
                // `open?file=`, Advanced URI's `filepath=`.
                "file" | "filepath" => return Some(value.trim_start_matches('/').to_string()),
                // An absolute path: the vault's note, or nothing of ours.
                "path" => return Some(inside(&value).unwrap_or_default()),
                _ => {}
            }
        }
        // Any other Obsidian address may name a note in a way not read
        // here: the line goes (fail closed).
        return Some(String::new());
    }
    let path = lower
        .starts_with("file://")
        .then(|| &target["file://".len()..])?;
    let path = match path.strip_prefix("localhost") {
        Some(rest) if rest.starts_with('/') => rest,
        _ => path,
    };
    inside(&decode(path))
}

/// The `obsidian://` and `file://` addresses written anywhere on a line
/// (in a link, an autolink `<…>` or bare).
fn addresses(line: &str) -> Vec<&str> {
    let lower = line.to_ascii_lowercase();
    let mut found = Vec::new();
    for scheme in ["obsidian://", "file://"] {
        for (at, _) in lower.match_indices(scheme) {
            let rest = &line[at..];
            let end = rest
                .find(|c: char| {
                    c.is_whitespace() || matches!(c, '<' | '>' | '(' | ')' | '"' | '\'' | ']')
                })
                .unwrap_or(rest.len());
            found.push(&rest[..end]);
        }
    }
    found
}

/// Every `[[…]]` written on `line`, wherever it stands (code spans
/// included), as the links they would be.
fn written_wikilinks(line: &str) -> impl Iterator<Item = crate::note::Link> + '_ {
    line.match_indices("[[").filter_map(move |(at, _)| {
        let inner = &line[at + 2..];
        let close = inner.find("]]")?;
        let written = format!("[[{}]]", &inner[..close]);
        crate::parse::markdown::analyze(&written)
            .links
            .into_iter()
            .next()
    })
}

/// Words of `line` that name a Markdown file by path, bare or wrapped in
/// anything (`journal/diary.md`, `<…>`, `**…**`, `` `…#Plans` ``, quotes),
/// but for the files any vault may name and none is private by (its
/// `log.md`, role files, agent files).
fn bare_paths(line: &str) -> Vec<String> {
    let path_char =
        |c: char| c.is_alphanumeric() || matches!(c, '/' | '.' | '_' | '-' | '~' | '%' | '+' | '#');
    line.split(|c: char| !path_char(c))
        .map(|word| word.trim_matches(['.', '_', '~', '/', '#']))
        .filter(|word| {
            let path = word.split('#').next().unwrap_or_default();
            let name = path.rsplit('/').next().unwrap_or_default();
            let named_by_any_vault = ["log.md", "index.md", "hot.md"]
                .iter()
                .chain(&crate::vault::walk::SKIPPED_FILES)
                .any(|file| name.eq_ignore_ascii_case(file));
            path.len() > 3 && path.to_ascii_lowercase().ends_with(".md") && !named_by_any_vault
        })
        .map(str::to_string)
        .collect()
}

/// Words of `line` shaped as a vault path without an extension
/// (`journal/diary`): a folder, a name, no `..` and no leading `/`.
fn extensionless_paths(line: &str) -> impl Iterator<Item = String> + '_ {
    let path_char = |c: char| c.is_alphanumeric() || matches!(c, '/' | '\\' | '_' | '-' | '.');
    line.split(move |c: char| !path_char(c))
        // `priv\plan`, as Windows writes it, names the same note.
        .map(|word| word.trim_matches(['.', '/', '\\']).replace('\\', "/"))
        .filter(|word| {
            word.contains('/')
                && !word.split('/').any(|part| part.is_empty() || part == "..")
                && !word.rsplit('/').next().unwrap_or_default().contains('.')
        })
}

/// The raw file targets on one line (see [`unlisted_raw_targets`]).
fn raw_targets(line: &str) -> Vec<&str> {
    let mut targets = Vec::new();
    let trimmed = line.trim_start();
    if trimmed.starts_with('[')
        && let Some((label, rest)) = trimmed[1..].split_once("]:")
        && !label.is_empty()
        && let Some(target) = rest.split_whitespace().next()
    {
        targets.push(target.trim_start_matches('<').trim_end_matches('>'));
    }
    for (at, _) in line.match_indices("](") {
        let rest = &line[at + 2..];
        let end = rest.find([')', ' ']).unwrap_or(rest.len());
        targets.push(rest[..end].trim_start_matches('<').trim_end_matches('>'));
    }
    // HTML attributes naming a file, in any case, with blanks around `=`
    // (`srcset` lists several: each first word is a file).
    let lower = line.to_ascii_lowercase();
    for attribute in ["href", "src", "srcset", "data", "poster", "action", "cite"] {
        for (at, _) in lower.match_indices(attribute) {
            let named_alone = lower[..at]
                .chars()
                .next_back()
                .is_none_or(|c| !c.is_ascii_alphanumeric() && c != '-');
            let rest = line[at + attribute.len()..].trim_start();
            let Some(rest) = rest.strip_prefix('=').filter(|_| named_alone) else {
                continue;
            };
            let rest = rest.trim_start();
            let (quote, rest) = match rest.chars().next() {
                Some(q @ ('"' | '\'')) => (Some(q), &rest[1..]),
                _ => (None, rest),
            };
            let end = match quote {
                Some(q) => rest.find([q, '>']),
                None => rest.find([' ', '\t', '>']),
            }
            .unwrap_or(rest.len());
            for candidate in rest[..end].split(',') {
                if let Some(file) = candidate.split_whitespace().next() {
                    targets.push(file);
                }
            }
        }
    }
    targets.retain(|target| !target.trim().is_empty());
    targets
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn lines_linking_unlisted_notes_are_dropped() {
        let policy = Arc::new(crate::privacy::Policy::default());
        let files: Vec<(String, String)> = [
            ("raft.md", "# Raft\n\nconsensus\n"),
            ("paxos.md", "# Paxos\n\nconsensus\n"),
            (
                "index.md",
                "---\nsee: \"[[ghost]]\"\n---\n# Index\n\n- [[raft]] the log\n- [[secret-plan]] the merger\n\
                 - [Paxos](paxos.md) older\n- [Plan](plans/secret-plan.md) dates\n- ![[_raw/dump]]\n\
                 - [[#Index]] here\n- [site](https://example.org) outside\nplain words\n",
            ),
        ]
        .iter()
        .map(|(p, t)| (p.to_string(), t.to_string()))
        .collect();
        let vault = Vault::from_texts_with("/v".into(), &files, Arc::clone(&policy));
        let prepared = policy.prepare("index.md", &files[2].1, None).unwrap();
        assert_eq!(
            without_unlisted_links(&vault, &prepared),
            "---\n---\n# Index\n\n- [[raft]] the log\n- [Paxos](paxos.md) older\n\
             - [[#Index]] here\n- [site](https://example.org) outside\nplain words\n"
        );
        // Names a parser reads no link in are looked up all the same.
        let raw = policy
            .prepare(
                "index.md",
                "- ![](plans/secret-plan.md) dates\n- <a href=\"plans/secret-plan.md\">Plan</a>\n\
                 [j]: plans/secret-plan.md\n- ![](raft.md) kept\n<a href=\"https://x.org\">web</a>\n\
                 <A HREF = \"plans/secret-plan.md\">p</A>\n<img srcset=\"raft.md 1x, plans/secret-plan.md 2x\">\n\
                 <object data=plans/secret-plan.md></object>\n",
                None,
            )
            .unwrap();
        assert_eq!(
            without_unlisted_links(&vault, &raw),
            "- ![](raft.md) kept\n<a href=\"https://x.org\">web</a>\n"
        );
        // Named outside any link: in a code span, bare, or in angle brackets.
        let bare = policy
            .prepare(
                "hot.md",
                "- `[[secret-plan]]` merger\n- plans/secret-plan.md merger\n\
                 - <plans/secret-plan.md> merger\n- `raft.md` and [[raft]] kept\n\
                 - see paxos.md. kept\n- **plans/secret-plan.md** merger\n\
                 - |plans/secret-plan.md| merger\n- “plans/secret-plan.md” merger\n\
                 - plans&#47;secret-plan.md merger\n- &#91;&#91;secret-plan&#93;&#93; merger\n\
                 - _plans/secret-plan.md_ merger\n- see log.md and CLAUDE.md kept\n",
                None,
            )
            .unwrap();
        assert_eq!(
            without_unlisted_links(&vault, &bare),
            "- `raft.md` and [[raft]] kept\n- see paxos.md. kept\n- see log.md and CLAUDE.md kept\n"
        );
        // A private folder's note named by its path without `.md`.
        let folders =
            Arc::new(crate::privacy::Policy::parse("private:\n  folders: [\"priv/\"]\n").unwrap());
        let vault = Vault::from_texts_with("/v".into(), &files, Arc::clone(&folders));
        let named = folders
            .prepare(
                "index.md",
                "- `priv/secretplan` merger\n- priv/secretplan merger\n- TCP/IP and raft kept\n\
                 - Priv/Plans/x merger\n- priv\\secretplan merger\n",
                None,
            )
            .unwrap();
        assert_eq!(
            without_unlisted_links(&vault, &named),
            "- TCP/IP and raft kept\n"
        );
        // Nothing to drop: the text as it was.
        let plain = policy
            .prepare("hot.md", "# Hot\n\n[[raft]] and [[paxos]]\n", None)
            .unwrap();
        assert_eq!(
            without_unlisted_links(&vault, &plain),
            "# Hot\n\n[[raft]] and [[paxos]]\n"
        );
    }
}
