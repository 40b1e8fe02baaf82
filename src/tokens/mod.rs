//! Token counting: the seed's `ceil(chars / 4)` estimate and exact BPE counts.
//!
//! Every counter works in *measure units* that add up exactly when text is
//! split at a [safe boundary](is_safe_boundary): characters for `chars4`,
//! tokens for the BPE counters. The packer sums the measures of the pieces
//! of a pack instead of re-counting the whole pack after every decision.

mod prepared;

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;
use std::sync::LazyLock;

use prepared::{Compact, PreparedBpe, Splitter};

/// Which counter turns text into a token count.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Tokenizer {
    /// `ceil(chars / 4)`, the estimate the seed prescribes, with a CJK
    /// character counted as four (one token).
    #[default]
    Chars4,
    /// Exact counts with OpenAI's `o200k_base` vocabulary.
    O200k,
    /// Exact counts with OpenAI's `cl100k_base` vocabulary.
    Cl100k,
}

impl Tokenizer {
    pub const ALL: [Tokenizer; 3] = [Tokenizer::Chars4, Tokenizer::O200k, Tokenizer::Cl100k];

    pub fn name(self) -> &'static str {
        match self {
            Tokenizer::Chars4 => "chars4",
            Tokenizer::O200k => "o200k",
            Tokenizer::Cl100k => "cl100k",
        }
    }

    /// The text of the pack's `# Methodology:` line.
    pub fn methodology(self) -> &'static str {
        match self {
            Tokenizer::Chars4 => "4 chars/token estimate",
            Tokenizer::O200k => "exact o200k_base token count",
            Tokenizer::Cl100k => "exact cl100k_base token count",
        }
    }

    /// The `# Methodology:` text of a pack that may hold CJK text or not:
    /// under `chars4` a CJK character counts as a whole token (see
    /// [`chars4_measure`]), and a pack whose text may hold one says so.
    /// Without CJK the line is the seed's.
    pub fn methodology_for(self, has_cjk: bool) -> &'static str {
        match (self, has_cjk) {
            (Tokenizer::Chars4, true) => "4 chars/token estimate, 1 token per CJK character",
            _ => self.methodology(),
        }
    }

    /// Starts loading an exact counter's vocabulary on another thread, so
    /// that it overlaps opening the index and searching; the first count
    /// waits for it if it is not done yet.
    pub fn prefetch(self) {
        if self != Tokenizer::Chars4 {
            std::thread::spawn(move || {
                let _timed = crate::timings::phase("tokenizer.load");
                self.measure("")
            });
        }
    }

    /// As [`prefetch`](Self::prefetch) for a command that opens a vault:
    /// the load starts once the vault is known, since the cache it reads
    /// and writes may lie inside that vault (`XDG_CACHE_HOME` set there),
    /// which ctxpack never touches. Started before the vault was resolved,
    /// the load raced its registration and wrote in the vault now and then.
    /// No vault within two seconds (the command failed): no load here.
    pub fn prefetch_once_a_vault_is_open(self) {
        if self == Tokenizer::Chars4 {
            return;
        }
        std::thread::spawn(move || {
            let vaults = OPENED_VAULTS
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            let Ok((vaults, waited)) = VAULT_OPENED.wait_timeout_while(
                vaults,
                std::time::Duration::from_secs(2),
                |vaults| vaults.is_empty(),
            ) else {
                return;
            };
            drop(vaults);
            if !waited.timed_out() {
                let _timed = crate::timings::phase("tokenizer.load");
                self.measure("");
            }
        });
    }

    /// The token count of `text`.
    pub fn count(self, text: &str) -> usize {
        self.tokens(self.measure(text))
    }

    /// The additive measure of `text` (characters or tokens).
    pub fn measure(self, text: &str) -> usize {
        match self {
            Tokenizer::Chars4 => chars4_measure(text),
            Tokenizer::O200k => O200K.count(text),
            Tokenizer::Cl100k => CL100K.count(text),
        }
    }

    /// Converts a measure into tokens.
    pub fn tokens(self, measure: usize) -> usize {
        match self {
            Tokenizer::Chars4 => measure.div_ceil(4),
            Tokenizer::O200k | Tokenizer::Cl100k => measure,
        }
    }

    /// The largest measure whose token count stays within `budget` tokens.
    pub fn capacity(self, budget: usize) -> usize {
        match self {
            Tokenizer::Chars4 => budget.saturating_mul(4),
            Tokenizer::O200k | Tokenizer::Cl100k => budget,
        }
    }
}

/// The `chars4` measure: a quarter token a character, a whole token for
/// a CJK character. Four characters make a token in English, but one
/// Chinese, Japanese or Korean character is about one o200k token (more
/// in cl100k): counted as a quarter, an "8,000-token" Chinese pack held
/// about 13,000 o200k tokens. Text without CJK counts exactly as the
/// seed's `ceil(chars / 4)`, so English packs are unchanged.
fn chars4_measure(text: &str) -> usize {
    if text.is_ascii() {
        return text.len();
    }
    text.chars()
        .map(|c| if counts_whole(c) { 4 } else { 1 })
        .sum()
}

/// CJK characters and the full-width punctuation written with them
/// (`。`, `，`, `（`), each about a token of its own.
fn counts_whole(c: char) -> bool {
    crate::text::is_cjk(c) || matches!(c as u32, 0x3000..=0x303F | 0xFF00..=0xFFEF)
}

/// Whether `text` holds a character the `chars4` counter counts whole.
pub(crate) fn has_cjk(text: &str) -> bool {
    !text.is_ascii() && text.chars().any(counts_whole)
}

impl fmt::Display for Tokenizer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Tokenizer {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.to_ascii_lowercase().as_str() {
            "chars4" | "chars" => Ok(Tokenizer::Chars4),
            "o200k" | "o200k_base" => Ok(Tokenizer::O200k),
            "cl100k" | "cl100k_base" => Ok(Tokenizer::Cl100k),
            _ => Err(format!(
                "unknown tokenizer '{s}' (expected chars4, o200k or cl100k)"
            )),
        }
    }
}

/// OpenAI's pre-tokenizer patterns (as the `bpe-openai` crate writes
/// them: a flagged pattern matches one look-ahead character, not kept).
const O200K_PATTERNS: [(&str, bool); 3] = [
    (
        concat!(
            "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
            "|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
            "|\\p{N}{1,3}",
            "| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*",
            "|\\s*[\\r\\n]+",
            "|\\s+$",
        ),
        false,
    ),
    ("\\s+\\s", true),
    ("\\s+", false),
];
const CL100K_PATTERNS: [(&str, bool); 3] = [
    (
        "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+$",
        false,
    ),
    ("\\s+\\s", true),
    ("\\s+", false),
];

static O200K: LazyLock<PreparedBpe> = LazyLock::new(|| {
    load(
        "o200k",
        &O200K_PATTERNS,
        include_bytes!(concat!(env!("OUT_DIR"), "/o200k.vocab")),
    )
});
static CL100K: LazyLock<PreparedBpe> = LazyLock::new(|| {
    load(
        "cl100k",
        &CL100K_PATTERNS,
        include_bytes!(concat!(env!("OUT_DIR"), "/cl100k.vocab")),
    )
});

/// An exact counter: the prepared vocabulary from the cache folder, or,
/// the first time (or when the cache cannot be used), prepared from the
/// built-in compact form (`compact`, see build.rs) and saved there for the
/// next process.
fn load(name: &str, patterns: &[(&str, bool)], compact: &[u8]) -> PreparedBpe {
    // The patterns and the compact vocabularies are built in: the tests
    // compile the one and inflate the other, so these cannot fail at a
    // user's.
    let splitter = || Splitter::new(patterns).expect("the built-in patterns compile");
    let path = prepared_path(name);
    if let Some(path) = &path
        && let Ok(prepared) = PreparedBpe::open(path, splitter())
    {
        return prepared;
    }
    let compact = Compact::inflate(compact).expect("the built-in vocabulary inflates");
    let prepared = PreparedBpe::from_tokens(&compact.tokens(), splitter())
        .expect("the built-in vocabulary fits the table");
    if let Some(path) = &path {
        // A cache that cannot be written only means the next process
        // prepares the vocabulary again.
        let _ = prepared.save(path);
    }
    prepared
}

/// Where the prepared form of vocabulary `name` is kept: beside the
/// indexes, in the user's cache (none without one, or when that cache lies
/// inside a vault this process opened: ctxpack never writes in a vault).
fn prepared_path(name: &str) -> Option<PathBuf> {
    let root = crate::xdg::Base::Cache.ctxpack()?;
    let resolved = crate::index::location::resolved(&root);
    let vaults = OPENED_VAULTS
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    if vaults.iter().any(|vault| resolved.starts_with(vault)) {
        return None;
    }
    Some(
        root.join("tokenizers")
            .join(format!("{name}-{}.bin", prepared::FORMAT)),
    )
}

/// The vaults (canonical roots) this process opened.
static OPENED_VAULTS: std::sync::Mutex<Vec<PathBuf>> = std::sync::Mutex::new(Vec::new());
/// Signalled when a vault is added to [`OPENED_VAULTS`].
static VAULT_OPENED: std::sync::Condvar = std::sync::Condvar::new();

/// Keeps the prepared vocabularies out of the vault at `root` (a cache
/// folder set inside it, or a vault that is the home folder).
pub(crate) fn never_cache_inside(root: &std::path::Path) {
    let mut vaults = OPENED_VAULTS
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    if !vaults.iter().any(|vault| vault == root) {
        vaults.push(root.to_path_buf());
    }
    VAULT_OPENED.notify_all();
}

/// True when `left` may be measured apart from whatever follows it: it ends
/// in a line break and the next text starts with a character that neither
/// BPE pre-tokenizer joins to a preceding newline (not whitespace, not `/`).
pub(crate) fn is_safe_boundary(left: &str, right: &str) -> bool {
    left.ends_with('\n')
        && right
            .chars()
            .next()
            .is_none_or(|c| !c.is_whitespace() && c != '/')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chars4_rounds_up() {
        assert_eq!(Tokenizer::Chars4.count(""), 0);
        assert_eq!(Tokenizer::Chars4.count("abcde"), 2);
        assert_eq!(Tokenizer::Chars4.count("一二三四"), 4);
        assert_eq!(Tokenizer::Chars4.count("ab 一二"), 3);
        assert_eq!(Tokenizer::Chars4.count("届く、カタカナ。한국어"), 11);
        assert_eq!(Tokenizer::Chars4.count("héllo wörld"), 3);
        assert!(has_cjk("docker 镜像") && has_cjk("。") && !has_cjk("héllo — wörld…"));
        assert_eq!(
            Tokenizer::Chars4.methodology_for(true),
            "4 chars/token estimate, 1 token per CJK character"
        );
        assert_eq!(
            Tokenizer::Chars4.methodology_for(false),
            "4 chars/token estimate"
        );
        assert_eq!(
            Tokenizer::O200k.methodology_for(true),
            Tokenizer::O200k.methodology()
        );
    }

    #[test]
    fn exact_counters_know_their_vocabularies() {
        assert_eq!(Tokenizer::O200k.count("hello world"), 2);
        assert_eq!(Tokenizer::Cl100k.count("hello world"), 2);
        assert!(Tokenizer::O200k.count("分布式事务") >= 2);
    }

    #[test]
    fn measures_add_up_at_safe_boundaries() {
        let parts = [
            "# Context Pack: raft\n# Budget: 100 tokens\n",
            "---\n## [[concepts/raft]] (core, ~12 tokens)\ntags: #a\n\n",
            "Body text, with   spaces   \n\n",
            "---\n## [[x]]\n分布式事务\n\n",
        ];
        for tokenizer in Tokenizer::ALL {
            let whole: String = parts.concat();
            let sum: usize = parts.iter().map(|p| tokenizer.measure(p)).sum();
            assert_eq!(tokenizer.measure(&whole), sum, "{tokenizer}");
        }
        assert!(is_safe_boundary("a\n", "---"));
        assert!(!is_safe_boundary("a\n", "\nb"));
        assert!(!is_safe_boundary("a", "b"));
    }
}
