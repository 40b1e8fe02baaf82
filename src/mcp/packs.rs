//! Large results over MCP: a pack bigger than the client may take is
//! returned in parts. The whole text is kept under a handle, in memory,
//! for a while; `read_pack` returns the next part by byte offset and
//! `grep_pack` finds lines in it.
//!
//! Parts end at line ends, so a line is never cut (a single line longer
//! than the limit is returned whole, over the limit).

use std::collections::VecDeque;
use std::hash::BuildHasher;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::tokens::Tokenizer;

/// Packs kept at most; the oldest goes first.
pub(crate) const MAX_PACKS: usize = 64;
/// Bytes of pack text kept at most (a pack is at most 100,000 tokens, a
/// few hundred KB).
pub(crate) const MAX_BYTES: usize = 64 << 20;
/// How long a handle stays readable after its pack was built.
pub(crate) const HANDLE_LIFETIME: Duration = Duration::from_secs(30 * 60);
/// A `grep_pack` pattern longer than this is refused.
pub(crate) const MAX_PATTERN_CHARS: usize = 512;
/// Context lines around a match, at most.
pub(crate) const MAX_CONTEXT_LINES: usize = 20;
/// Matches returned at most.
pub(crate) const MAX_MATCHES: usize = 100;

struct Entry {
    handle: String,
    /// The HTTP session that built the pack (`None` over stdio, which has
    /// one client): only it may read the pack.
    owner: Option<String>,
    text: Arc<str>,
    tokenizer: Tokenizer,
    expires: Instant,
    /// The notes the pack shows whole: the reader has received them once
    /// it has read the pack to its end.
    notes: Vec<String>,
}

/// The kept packs.
pub(crate) struct PackStore {
    entries: Mutex<VecDeque<Entry>>,
    /// Makes handles unguessable, so one HTTP client cannot read another's
    /// packs by counting.
    secret: [u8; 32],
    next: std::sync::atomic::AtomicU64,
}

impl Default for PackStore {
    fn default() -> Self {
        let mut secret = [0u8; 32];
        for (i, chunk) in secret.chunks_mut(8).enumerate() {
            // Each RandomState is seeded from the OS's randomness.
            let random = std::collections::hash_map::RandomState::new().hash_one(i);
            chunk.copy_from_slice(&random.to_le_bytes());
        }
        PackStore {
            entries: Mutex::new(VecDeque::new()),
            secret,
            next: std::sync::atomic::AtomicU64::new(1),
        }
    }
}

impl PackStore {
    /// Keeps `text` for the session `owner` and returns its handle (the
    /// server always says which notes a pack shows: `put_with_notes`).
    #[cfg(test)]
    pub(crate) fn put(&self, text: String, tokenizer: Tokenizer, owner: Option<&str>) -> String {
        self.put_with_notes(text, tokenizer, owner, Vec::new())
    }

    /// Keeps `text`, which shows `notes` whole, for the session `owner`,
    /// and returns its handle.
    pub(crate) fn put_with_notes(
        &self,
        text: String,
        tokenizer: Tokenizer,
        owner: Option<&str>,
        notes: Vec<String>,
    ) -> String {
        let n = self.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let tag = blake3::keyed_hash(&self.secret, &n.to_le_bytes()).to_hex();
        let handle = format!("pack-{n}-{}", &tag[..16]);
        let mut entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        let now = Instant::now();
        entries.retain(|e| e.expires > now);
        let mut bytes: usize = entries.iter().map(|e| e.text.len()).sum();
        while !entries.is_empty() && (entries.len() >= MAX_PACKS || bytes + text.len() > MAX_BYTES)
        {
            if let Some(old) = entries.pop_front() {
                bytes -= old.text.len();
            }
        }
        entries.push_back(Entry {
            handle: handle.clone(),
            owner: owner.map(str::to_string),
            text: Arc::from(text),
            tokenizer,
            expires: now + HANDLE_LIFETIME,
            notes,
        });
        handle
    }

    /// The text and counter kept under `handle` for the session `owner`;
    /// another session's pack is unknown to it, with the same answer.
    pub(crate) fn get(
        &self,
        handle: &str,
        owner: Option<&str>,
    ) -> Result<(Arc<str>, Tokenizer), String> {
        let entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        entries
            .iter()
            .find(|e| {
                e.handle == handle && e.owner.as_deref() == owner && e.expires > Instant::now()
            })
            .map(|e| (Arc::clone(&e.text), e.tokenizer))
            .ok_or_else(|| {
                format!(
                    "pack handle '{}' is unknown or expired (a handle lives {} minutes, and only \
                     the last {MAX_PACKS} packs are kept); build the pack again",
                    crate::text::truncate_chars(handle, 80),
                    HANDLE_LIFETIME.as_secs() / 60
                )
            })
    }
}

impl PackStore {
    /// The notes the pack under `handle` shows whole (none for a handle
    /// the session `owner` cannot read).
    pub(crate) fn notes(&self, handle: &str, owner: Option<&str>) -> Vec<String> {
        let entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        entries
            .iter()
            .find(|e| e.handle == handle && e.owner.as_deref() == owner)
            .map(|e| e.notes.clone())
            .unwrap_or_default()
    }
}

/// The part of `text` from byte `offset`: whole lines while they fit in
/// `limit` tokens (at least one line), and the offset after it.
pub(crate) fn part_at(
    text: &str,
    offset: usize,
    tokenizer: Tokenizer,
    limit: usize,
) -> Result<(&str, usize), String> {
    if offset > text.len() {
        return Err(format!(
            "offset {offset} is past the end of the pack ({} bytes)",
            text.len()
        ));
    }
    if offset > 0 && text.as_bytes()[offset - 1] != b'\n' {
        return Err(format!(
            "offset {offset} is not at the start of a line (use next_offset from the last part)"
        ));
    }
    let rest = &text[offset..];
    let capacity = tokenizer.capacity(limit);
    let mut end = 0;
    let mut measure = 0;
    for line in rest.split_inclusive('\n') {
        let line_measure = tokenizer.measure(line);
        if end > 0 && measure + line_measure > capacity {
            break;
        }
        measure += line_measure;
        end += line.len();
    }
    // Measures of lines add up to the part's count except where a BPE
    // merge spans a line break: shrink until the true count fits.
    while tokenizer.count(&rest[..end]) > limit {
        let Some(cut) = rest[..end - 1].rfind('\n') else {
            break;
        };
        end = cut + 1;
    }
    Ok((&rest[..end], offset + end))
}

/// What follows a part: where to read on.
#[derive(Debug, Serialize)]
pub(crate) struct Continuation<'a> {
    pub pack_handle: &'a str,
    /// Bytes of the whole pack.
    pub total_bytes: usize,
    pub total_tokens: usize,
    /// Where the next part starts (absent after the last part).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_offset: Option<usize>,
    pub hint: &'static str,
}

pub(crate) const READ_ON: &str =
    "The pack continues: call read_pack with pack_handle and offset=next_offset.";
pub(crate) const DONE: &str = "This is the end of the pack.";

/// One match of `grep_pack`.
#[derive(Debug, Serialize)]
pub(crate) struct GrepMatch {
    /// 1-based line number of the matching line.
    pub line: usize,
    /// Byte offset of the first line shown (a valid `read_pack` offset).
    pub offset: usize,
    /// The matching line with its context lines.
    pub text: String,
}

#[derive(Debug, Serialize)]
pub(crate) struct GrepResult {
    pub matches: Vec<GrepMatch>,
    /// True when more lines matched than are returned.
    pub truncated: bool,
}

/// What a match costs in a result besides its text (its JSON keys).
const MATCH_OVERHEAD_TOKENS: usize = 16;

/// Lines of `text` matching the regular expression `pattern`, each with
/// `context` lines before and after, in at most `max_tokens` (counted by
/// `tokenizer`, as the pack's parts are): the matches that would pass it
/// are left out and `truncated` is set, and a single match larger than
/// the bound keeps its matching line alone, cut at a line's worth.
pub(crate) fn grep(
    text: &str,
    pattern: &str,
    context: usize,
    tokenizer: Tokenizer,
    max_tokens: usize,
) -> Result<GrepResult, String> {
    if pattern.is_empty() {
        return Err("pattern is empty".into());
    }
    if pattern.chars().count() > MAX_PATTERN_CHARS {
        return Err(format!(
            "pattern is longer than {MAX_PATTERN_CHARS} characters"
        ));
    }
    if context > MAX_CONTEXT_LINES {
        return Err(format!(
            "context must be between 0 and {MAX_CONTEXT_LINES}, got {context}"
        ));
    }
    // Bounded compiled size: a hostile pattern fails here instead of
    // costing memory; matching is linear in the text with this engine.
    let regex = regex::RegexBuilder::new(pattern)
        .size_limit(1 << 20)
        .dfa_size_limit(1 << 20)
        .build()
        .map_err(|err| format!("invalid pattern: {err}"))?;
    let mut starts = Vec::new();
    let lines: Vec<&str> = text
        .split_inclusive('\n')
        .scan(0usize, |offset, line| {
            starts.push(*offset);
            *offset += line.len();
            Some(line)
        })
        .collect();
    let mut matches = Vec::new();
    let mut truncated = false;
    let mut used = 0;
    for (i, line) in lines.iter().enumerate() {
        if !regex.is_match(line.trim_end_matches('\n')) {
            continue;
        }
        if matches.len() == MAX_MATCHES {
            truncated = true;
            break;
        }
        let from = i.saturating_sub(context);
        let to = (i + context + 1).min(lines.len());
        let mut found = GrepMatch {
            line: i + 1,
            offset: starts[from],
            text: lines[from..to].concat(),
        };
        // Counted as the result prints it: JSON escapes every line break.
        let cost_of = |found: &GrepMatch| {
            tokenizer.count(&serde_json::to_string(found).unwrap_or_default())
                + MATCH_OVERHEAD_TOKENS
        };
        let mut cost = cost_of(&found);
        if cost > max_tokens.saturating_sub(used) {
            // Too large with its context: the matching line alone, cut to
            // what is left (an offset to read the rest from stays valid).
            let left = max_tokens.saturating_sub(used + 2 * MATCH_OVERHEAD_TOKENS);
            found.offset = starts[i];
            found.text = cut_to_tokens(line, tokenizer, left);
            cost = cost_of(&found);
            if found.text.is_empty() || cost > max_tokens.saturating_sub(used) {
                truncated = true;
                break;
            }
        }
        used += cost;
        matches.push(found);
    }
    let mut result = GrepResult { matches, truncated };
    // The bound holds for the result as sent (pretty JSON, as every tool
    // result is): the last matches go until it fits.
    while !result.matches.is_empty()
        && tokenizer.count(&serde_json::to_string_pretty(&result).unwrap_or_default()) > max_tokens
    {
        result.matches.pop();
        result.truncated = true;
    }
    Ok(result)
}

/// The longest start of `text`, cut at a character, that counts at most
/// `max_tokens`.
fn cut_to_tokens(text: &str, tokenizer: Tokenizer, max_tokens: usize) -> String {
    if tokenizer.count(text) <= max_tokens {
        return text.to_string();
    }
    let ends: Vec<usize> = text.char_indices().map(|(at, _)| at).skip(1).collect();
    let fitting = ends.partition_point(|&end| tokenizer.count(&text[..end]) <= max_tokens);
    match fitting {
        0 => String::new(),
        n => text[..ends[n - 1]].to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_end_at_line_ends_and_read_back_whole() {
        let text: String = (0..200)
            .map(|i| format!("line {i} of the pack\n"))
            .collect();
        let mut offset = 0;
        let mut read = String::new();
        while offset < text.len() {
            let (part, next) = part_at(&text, offset, Tokenizer::Chars4, 50).unwrap();
            assert!(part.ends_with('\n'));
            assert!(Tokenizer::Chars4.count(part) <= 50);
            read.push_str(part);
            offset = next;
        }
        assert_eq!(read, text);
        assert!(part_at(&text, 3, Tokenizer::Chars4, 50).is_err());
        assert!(part_at(&text, text.len() + 1, Tokenizer::Chars4, 50).is_err());
    }

    #[test]
    fn a_line_longer_than_the_limit_comes_whole() {
        let text = format!("{}\nshort\n", "x".repeat(400));
        let (part, next) = part_at(&text, 0, Tokenizer::Chars4, 10).unwrap();
        assert_eq!(part.len(), 401);
        assert_eq!(
            part_at(&text, next, Tokenizer::Chars4, 10).unwrap().0,
            "short\n"
        );
    }

    #[test]
    fn handles_expire_by_count_and_unknown_ones_are_errors() {
        let store = PackStore::default();
        let first = store.put("a\n".into(), Tokenizer::Chars4, None);
        assert_eq!(&*store.get(&first, None).unwrap().0, "a\n");
        for _ in 0..MAX_PACKS {
            store.put("b\n".into(), Tokenizer::Chars4, None);
        }
        let error = store.get(&first, None).unwrap_err();
        assert!(error.contains("unknown or expired"), "{error}");
        assert!(store.get("pack-1-0000", None).is_err());
    }

    #[test]
    fn a_pack_is_read_only_by_the_session_that_built_it() {
        let store = PackStore::default();
        let handle = store.put("mine\n".into(), Tokenizer::Chars4, Some("session-a"));
        assert_eq!(&*store.get(&handle, Some("session-a")).unwrap().0, "mine\n");
        let unknown = store
            .get("pack-9-0000000000000000", Some("session-b"))
            .unwrap_err();
        for other in [Some("session-b"), None] {
            let refused = store.get(&handle, other).unwrap_err();
            // The same answer as for a handle never given.
            assert_eq!(
                refused.replace(&handle, "H"),
                unknown.replace("pack-9-0000000000000000", "H")
            );
        }
    }

    const ROOMY: usize = 1_000;

    #[test]
    fn grep_finds_lines_with_context_and_bounds_its_arguments() {
        let grep = |text, pattern, context| grep(text, pattern, context, Tokenizer::Chars4, ROOMY);
        let text = "one\ntwo raft\nthree\nfour raft\n";
        let found = grep(text, "raft", 1).unwrap();
        assert_eq!(found.matches.len(), 2);
        assert_eq!(found.matches[0].line, 2);
        assert_eq!(found.matches[0].offset, 0);
        assert_eq!(found.matches[0].text, "one\ntwo raft\nthree\n");
        assert_eq!(found.matches[1].text, "three\nfour raft\n");
        assert!(grep(text, "(", 0).is_err());
        assert!(grep(text, "a", MAX_CONTEXT_LINES + 1).is_err());
        assert!(grep(text, &"a".repeat(MAX_PATTERN_CHARS + 1), 0).is_err());
    }

    /// A result stays within the server's bound however many lines match
    /// and however much context each asks for.
    #[test]
    fn grep_results_stay_within_the_result_bound() {
        let text: String = (0..400)
            .map(|i| format!("line {i} of a long pack, with words enough to weigh\n"))
            .collect();
        let limit = 300;
        let found = grep(&text, ".", MAX_CONTEXT_LINES, Tokenizer::Chars4, limit).unwrap();
        assert!(found.truncated);
        // As the result is sent: pretty JSON, line breaks escaped.
        let sent = |found: &GrepResult| {
            Tokenizer::Chars4.count(&serde_json::to_string_pretty(found).unwrap())
        };
        assert!(sent(&found) <= limit, "{}", sent(&found));
        assert!(!found.matches.is_empty());
        // One match whose context alone passes the bound keeps its line.
        let found = grep(&text, "line 200 ", MAX_CONTEXT_LINES, Tokenizer::Chars4, 60).unwrap();
        assert!(sent(&found) <= 60, "{}", sent(&found));
        assert_eq!(found.matches.len(), 1);
        assert_eq!(
            found.matches[0].text,
            "line 200 of a long pack, with words enough to weigh\n"
        );
        assert_eq!(&text[found.matches[0].offset..][..9], "line 200 ");
        // A line longer than the bound is cut at a character.
        let long = format!("{}raft\n", "分布式".repeat(100));
        let found = grep(&long, "raft", 0, Tokenizer::Chars4, 60).unwrap();
        assert!(sent(&found) <= 60, "{}", sent(&found));
        assert!(found.matches[0].text.starts_with("分布式分布式"));
        assert!(long.starts_with(&found.matches[0].text));
    }
}
