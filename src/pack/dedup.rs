//! Near-duplicate detection for paragraphs across the pages of one pack.
//!
//! Two blocks are duplicates when the Jaccard similarity of their sets of
//! word bigrams (CJK characters count as words) is at least
//! [`NEAR_DUPLICATE_JACCARD`]. Blocks with fewer than
//! [`MIN_DEDUP_WORDS`] words are never de-duplicated.

use std::collections::HashMap;

use crate::text::{fold, is_cjk};

pub(crate) const NEAR_DUPLICATE_JACCARD: f64 = 0.8;
pub(crate) const MIN_DEDUP_WORDS: usize = 8;

/// The bigram fingerprint of one block.
#[derive(Clone, Debug)]
pub(crate) struct Fingerprint {
    shingles: Vec<u64>,
}

impl Fingerprint {
    /// `None` for blocks too short to de-duplicate.
    pub(crate) fn of(text: &str) -> Option<Fingerprint> {
        let words = if text.is_ascii() {
            // Folding ASCII only lower-cases it and turns `-`, `_` and
            // spaces into separators, which the split below does anyway.
            word_hashes(text.bytes().map(|b| char::from(b.to_ascii_lowercase())))
        } else {
            word_hashes(fold(text).chars())
        };
        if words.len() < MIN_DEDUP_WORDS {
            return None;
        }
        let mut shingles: Vec<u64> = words
            .windows(2)
            .map(|pair| mix(pair[0].rotate_left(32) ^ pair[1]))
            .collect();
        shingles.sort_unstable();
        shingles.dedup();
        Some(Fingerprint { shingles })
    }
}

/// One hash per word of folded text: runs of letters and digits, each
/// CJK character a word of its own.
fn word_hashes(chars: impl Iterator<Item = char>) -> Vec<u64> {
    const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
    const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;
    let step = |hash: u64, ch: char| (hash ^ u64::from(u32::from(ch))).wrapping_mul(FNV_PRIME);
    let mut words = Vec::new();
    let mut word: Option<u64> = None;
    for ch in chars {
        if is_cjk(ch) {
            if let Some(hash) = word.take() {
                words.push(mix(hash));
            }
            words.push(mix(step(FNV_OFFSET, ch)));
        } else if ch.is_alphanumeric() {
            word = Some(step(word.unwrap_or(FNV_OFFSET), ch));
        } else if let Some(hash) = word.take() {
            words.push(mix(hash));
        }
    }
    if let Some(hash) = word {
        words.push(mix(hash));
    }
    words
}

/// SplitMix64's finaliser: every input bit reaches every output bit.
fn mix(mut value: u64) -> u64 {
    value ^= value >> 30;
    value = value.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    value ^= value >> 27;
    value = value.wrapping_mul(0x94d0_49bb_1331_11eb);
    value ^ (value >> 31)
}

/// The blocks already in the pack, by fingerprint, each with its page.
#[derive(Clone, Debug, Default)]
pub(crate) struct DedupIndex {
    owners: Vec<(usize, String)>,
    postings: HashMap<u64, Vec<u32>>,
}

impl DedupIndex {
    /// The page name of an earlier block that `fingerprint` duplicates.
    pub(crate) fn find(&self, fingerprint: &Fingerprint) -> Option<&str> {
        let mut shared: HashMap<u32, usize> = HashMap::new();
        for shingle in &fingerprint.shingles {
            for &id in self.postings.get(shingle).into_iter().flatten() {
                *shared.entry(id).or_default() += 1;
            }
        }
        let mut best: Option<(f64, u32)> = None;
        for (id, common) in shared {
            let (size, _) = &self.owners[id as usize];
            let union = size + fingerprint.shingles.len() - common;
            let jaccard = common as f64 / union as f64;
            let better = match best {
                None => true,
                Some((score, best_id)) => jaccard > score || (jaccard == score && id < best_id),
            };
            if jaccard >= NEAR_DUPLICATE_JACCARD && better {
                best = Some((jaccard, id));
            }
        }
        best.map(|(_, id)| self.owners[id as usize].1.as_str())
    }

    pub(crate) fn insert(&mut self, fingerprint: &Fingerprint, page: &str) {
        let id = self.owners.len() as u32;
        self.owners
            .push((fingerprint.shingles.len(), page.to_string()));
        for &shingle in &fingerprint.shingles {
            self.postings.entry(shingle).or_default().push(id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identical_and_near_identical_blocks_match() {
        let base =
            "Raft elects a leader that accepts every write and replicates the log to followers.";
        let mut index = DedupIndex::default();
        index.insert(&Fingerprint::of(base).unwrap(), "concepts/raft");
        let same = Fingerprint::of(&format!("  {base}  ")).unwrap();
        assert_eq!(index.find(&same), Some("concepts/raft"));
        let near = Fingerprint::of(
            "Raft elects a leader that accepts every write and replicates the log to all followers.",
        )
        .unwrap();
        assert_eq!(index.find(&near), Some("concepts/raft"));
        let different = Fingerprint::of(
            "Paxos lets any proposer drive a round, and acceptors promise not to accept older ballots.",
        )
        .unwrap();
        assert_eq!(index.find(&different), None);
    }

    #[test]
    fn short_blocks_are_never_deduplicated() {
        assert!(Fingerprint::of("See also the list.").is_none());
        assert!(Fingerprint::of("两阶段提交协议由协调者驱动").is_some());
    }
}
