//! The `mark-useful` votes: how often each note was marked useful or not.
//! Every store keeps them its own way (the embedded index in its folder,
//! PostgreSQL in a table) and hands them over as a [`FeedbackStore`].

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

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
}
