//! The feedback store: how often each note was marked useful or not, kept
//! in the index folder (and across rebuilds) as `feedback.json`.

use std::collections::BTreeMap;
use std::fs;
use std::io::Write;
use std::path::Path;

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

pub const FEEDBACK_FILE: &str = "feedback.json";

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counts {
    pub useful: u64,
    pub not_useful: u64,
}

impl Counts {
    /// useful / (useful + not_useful + 1): 0 with no votes, approaching 1.
    pub fn score(self) -> f64 {
        self.useful as f64 / (self.useful + self.not_useful + 1) as f64
    }
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FeedbackStore {
    pub notes: BTreeMap<String, Counts>,
}

impl FeedbackStore {
    /// Reads the store; a missing file is an empty store.
    pub fn load(dir: &Path) -> Result<FeedbackStore> {
        let path = dir.join(FEEDBACK_FILE);
        match fs::read(&path) {
            Ok(bytes) => serde_json::from_slice(&bytes)
                .with_context(|| format!("{} is not valid feedback JSON", path.display())),
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(FeedbackStore::default()),
            Err(err) => Err(err).with_context(|| format!("cannot read {}", path.display())),
        }
    }

    /// Records one vote for `path` and saves the store atomically, under an
    /// exclusive lock so concurrent votes are not lost.
    pub fn record(dir: &Path, path: &str, useful: bool) -> Result<Counts> {
        fs::create_dir_all(dir)?;
        let lock = fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(dir.join("feedback.lock"))?;
        lock.lock()?;
        let mut store = FeedbackStore::load(dir)?;
        let counts = store.notes.entry(path.to_string()).or_default();
        if useful {
            counts.useful += 1;
        } else {
            counts.not_useful += 1;
        }
        let counts = *counts;
        let temp = dir.join(".feedback.json.tmp");
        let mut file = fs::File::create(&temp)?;
        file.write_all(serde_json::to_string_pretty(&store)?.as_bytes())?;
        file.sync_all()?;
        fs::rename(&temp, dir.join(FEEDBACK_FILE))?;
        lock.unlock()?;
        Ok(counts)
    }

    pub fn score(&self, path: &str) -> f64 {
        self.notes.get(path).copied().unwrap_or_default().score()
    }
}
