//! The feedback store: how often each note was marked useful or not, kept
//! in the index folder (and across rebuilds) as `feedback.json`.

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;

use anyhow::{Result, bail};
use serde::{Deserialize, Serialize};

pub const FEEDBACK_FILE: &str = "feedback.json";

/// Larger files are not read: a store of every note's votes is far smaller.
const MAX_FEEDBACK_BYTES: u64 = 64 * 1024 * 1024;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counts {
    pub useful: u64,
    pub not_useful: u64,
}

impl Counts {
    /// useful / (useful + not_useful + 1): 0 with no votes, approaching 1;
    /// computed in floating point so counts near `u64::MAX` cannot wrap.
    pub fn score(self) -> f64 {
        let useful = self.useful as f64;
        (useful / (useful + self.not_useful as f64 + 1.0)).clamp(0.0, 1.0)
    }
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FeedbackStore {
    pub notes: BTreeMap<String, Counts>,
    /// What was wrong with the file, one message per problem; the entries
    /// concerned are left out.
    #[serde(skip)]
    pub problems: Vec<String>,
}

impl FeedbackStore {
    /// Reads the store; a missing file is an empty store. A file that is
    /// not feedback JSON, or a note whose counters are not non-negative
    /// integers, is left out and named in `problems`: a hand-edited file
    /// never makes a score that is not a number.
    pub fn load(dir: &Path) -> Result<FeedbackStore> {
        let path = dir.join(FEEDBACK_FILE);
        match crate::safe_fs::read_bytes(&path, MAX_FEEDBACK_BYTES) {
            Ok((bytes, _)) => Ok(FeedbackStore::parse(&bytes, &path.display().to_string())),
            Err(_) if !path.exists() => Ok(FeedbackStore::default()),
            Err(err) => bail!("cannot read {}: {err}", path.display()),
        }
    }

    /// The store in `bytes` (the text of `feedback.json`, read from `source`).
    pub fn parse(bytes: &[u8], source: &str) -> FeedbackStore {
        let mut store = FeedbackStore::default();
        let value: serde_json::Value = match serde_json::from_slice(bytes) {
            Ok(value) => value,
            Err(err) => {
                store
                    .problems
                    .push(format!("{source} is not valid JSON ({err}); ignored"));
                return store;
            }
        };
        let Some(notes) = value.get("notes").and_then(|n| n.as_object()) else {
            store
                .problems
                .push(format!("{source} has no \"notes\" object; ignored"));
            return store;
        };
        for (path, counts) in notes {
            let counter = |name: &str| match counts.get(name) {
                None => Some(0),
                Some(value) => value.as_u64(),
            };
            match (counts.is_object(), counter("useful"), counter("not_useful")) {
                (true, Some(useful), Some(not_useful)) => {
                    store
                        .notes
                        .insert(path.clone(), Counts { useful, not_useful });
                }
                _ => store.problems.push(format!(
                    "{source}: the counts of '{path}' are not non-negative integers ({counts}); ignored"
                )),
            }
        }
        store
    }

    /// Records one vote for `path` and saves the store atomically, under an
    /// exclusive lock so concurrent votes are not lost. A file with
    /// problems is not overwritten (that would drop what it holds).
    pub fn record(dir: &Path, path: &str, useful: bool) -> Result<Counts> {
        fs::create_dir_all(dir)?;
        let lock = fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(dir.join("feedback.lock"))?;
        lock.lock()?;
        let mut store = FeedbackStore::load(dir)?;
        if let Some(problem) = store.problems.first() {
            bail!("{problem}: fix or delete the file to record feedback");
        }
        let counts = store.notes.entry(path.to_string()).or_default();
        if useful {
            counts.useful = counts.useful.saturating_add(1);
        } else {
            counts.not_useful = counts.not_useful.saturating_add(1);
        }
        let counts = *counts;
        crate::safe_fs::write_atomic(
            &dir.join(FEEDBACK_FILE),
            serde_json::to_string_pretty(&store)?.as_bytes(),
        )?;
        lock.unlock()?;
        Ok(counts)
    }

    pub fn score(&self, path: &str) -> f64 {
        self.notes.get(path).copied().unwrap_or_default().score()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scores_are_exact_and_stay_in_range_at_the_extremes() {
        let score = |useful, not_useful| Counts { useful, not_useful }.score();
        assert_eq!(score(0, 0), 0.0);
        assert_eq!(score(1, 0), 0.5);
        assert_eq!(score(3, 0), 0.75);
        assert_eq!(score(1, 2), 0.25);
        assert_eq!(score(u64::MAX, 0), 1.0);
        assert_eq!(score(0, u64::MAX), 0.0);
        assert_eq!(score(u64::MAX, u64::MAX), 0.5);
        assert_eq!(score(u64::MAX - 1, 1), 1.0);
    }

    #[test]
    fn votes_saturate_at_the_largest_counter() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(
            dir.path().join(FEEDBACK_FILE),
            format!(
                r#"{{"notes": {{"a.md": {{"useful": {max}, "not_useful": {max}}}}}}}"#,
                max = u64::MAX
            ),
        )
        .unwrap();
        let counts = FeedbackStore::record(dir.path(), "a.md", true).unwrap();
        assert_eq!(
            counts,
            Counts {
                useful: u64::MAX,
                not_useful: u64::MAX
            }
        );
        let counts = FeedbackStore::record(dir.path(), "a.md", false).unwrap();
        assert_eq!(
            counts,
            Counts {
                useful: u64::MAX,
                not_useful: u64::MAX
            }
        );
        let store = FeedbackStore::load(dir.path()).unwrap();
        assert_eq!(store.score("a.md"), 0.5);
        assert!(store.problems.is_empty());
    }

    #[test]
    fn counters_that_are_not_non_negative_integers_are_left_out_with_a_problem() {
        let text = r#"{"notes": {
            "good.md": {"useful": 3, "not_useful": 1},
            "only-useful.md": {"useful": 1},
            "negative.md": {"useful": -1, "not_useful": 0},
            "fraction.md": {"useful": 1.5, "not_useful": 0},
            "too-big.md": {"useful": 18446744073709551616, "not_useful": 0},
            "text.md": {"useful": "7", "not_useful": 0},
            "not-counts.md": 5
        }}"#;
        let store = FeedbackStore::parse(text.as_bytes(), "feedback.json");
        assert_eq!(
            store.notes.keys().collect::<Vec<_>>(),
            ["good.md", "only-useful.md"]
        );
        assert_eq!(store.score("good.md"), 0.6);
        assert_eq!(store.score("only-useful.md"), 0.5);
        assert_eq!(store.score("negative.md"), 0.0);
        assert_eq!(store.problems.len(), 5, "{:?}", store.problems);
        assert!(
            store.problems.iter().any(|p| p
                == "feedback.json: the counts of 'not-counts.md' are not non-negative integers (5); ignored"),
            "{:?}",
            store.problems
        );
    }

    #[test]
    fn a_file_that_is_not_feedback_json_is_an_empty_store_and_is_not_overwritten() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(FEEDBACK_FILE);
        for text in ["{not json", "[1, 2]", r#"{"notes": 3}"#] {
            fs::write(&path, text).unwrap();
            let store = FeedbackStore::load(dir.path()).unwrap();
            assert!(store.notes.is_empty());
            assert_eq!(store.problems.len(), 1, "{text}");
            let err = FeedbackStore::record(dir.path(), "a.md", true).unwrap_err();
            assert!(err.to_string().contains("fix or delete the file"), "{err}");
            assert_eq!(fs::read_to_string(&path).unwrap(), text);
        }
        fs::remove_file(&path).unwrap();
        let store = FeedbackStore::load(dir.path()).unwrap();
        assert_eq!(store, FeedbackStore::default());
    }
}
