//! The embedded index's feedback: the `mark-useful` votes kept in the
//! index folder (and across rebuilds) as `feedback.json`.

use std::fs;
use std::path::Path;

use anyhow::{Result, bail};

pub(crate) use crate::store::feedback::{Counts, FeedbackStore};

pub(crate) const FEEDBACK_FILE: &str = "feedback.json";

/// Larger files are not read: a store of every note's votes is far smaller.
const MAX_FEEDBACK_BYTES: u64 = 64 * 1024 * 1024;

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
}

#[cfg(test)]
mod tests {
    use super::*;

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
