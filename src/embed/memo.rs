//! A query's vector, remembered: one pack asks for it twice (the semantic
//! arm, then the excerpts), a server is asked again for the same query by
//! an agent's next turns, and a served model costs a round trip each time.

use std::sync::Mutex;

use super::{Embedder, ModelError};
use crate::retrieve::fusion::Fusion;

/// The most recent queries kept, with their vectors.
const REMEMBERED_QUERIES: usize = 8;

/// An embedder that remembers the vectors of its last queries. Failures
/// are never remembered: a served model that was down is asked again.
pub(crate) struct QueryMemo {
    inner: Box<dyn Embedder>,
    /// Most recent first.
    recent: Mutex<Vec<(String, Vec<f32>)>>,
}

impl QueryMemo {
    pub(crate) fn new(inner: Box<dyn Embedder>) -> QueryMemo {
        QueryMemo {
            inner,
            recent: Mutex::new(Vec::with_capacity(REMEMBERED_QUERIES)),
        }
    }

    fn remembered(&self, text: &str) -> Option<Vec<f32>> {
        let mut recent = self.recent.lock().unwrap_or_else(|p| p.into_inner());
        let at = recent.iter().position(|(query, _)| query == text)?;
        let entry = recent.remove(at);
        let vector = entry.1.clone();
        recent.insert(0, entry);
        Some(vector)
    }

    fn remember(&self, text: &str, vector: &[f32]) {
        let mut recent = self.recent.lock().unwrap_or_else(|p| p.into_inner());
        recent.retain(|(query, _)| query != text);
        recent.truncate(REMEMBERED_QUERIES - 1);
        recent.insert(0, (text.to_string(), vector.to_vec()));
    }
}

impl Embedder for QueryMemo {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn fingerprint(&self) -> &str {
        self.inner.fingerprint()
    }

    fn dims(&self) -> usize {
        self.inner.dims()
    }

    fn default_weight(&self) -> f64 {
        self.inner.default_weight()
    }

    fn default_fusion(&self) -> Fusion {
        self.inner.default_fusion()
    }

    fn embed(&self, text: &str) -> Vec<f32> {
        self.inner.embed(text)
    }

    fn embed_query(&self, text: &str) -> Vec<f32> {
        if let Some(vector) = self.remembered(text) {
            return vector;
        }
        let vector = self.inner.embed_query(text);
        self.remember(text, &vector);
        vector
    }

    fn embed_many(&self, texts: &[&str]) -> Vec<Vec<f32>> {
        self.inner.embed_many(texts)
    }

    fn try_embed_many(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, ModelError> {
        self.inner.try_embed_many(texts)
    }

    fn try_embed_many_within(
        &self,
        texts: &[&str],
        deadline: std::time::Duration,
    ) -> Result<Vec<Vec<f32>>, ModelError> {
        self.inner.try_embed_many_within(texts, deadline)
    }

    fn try_embed_query(&self, text: &str) -> Result<Vec<f32>, ModelError> {
        if let Some(vector) = self.remembered(text) {
            return Ok(vector);
        }
        let vector = self.inner.try_embed_query(text)?;
        self.remember(text, &vector);
        Ok(vector)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    /// A query's vector is its length and a call number, so that a vector
    /// computed again differs from the one remembered.
    struct Counting {
        calls: Arc<AtomicUsize>,
        fail: &'static str,
    }

    impl Embedder for Counting {
        fn name(&self) -> &str {
            "counting"
        }
        fn fingerprint(&self) -> &str {
            "counting"
        }
        fn dims(&self) -> usize {
            2
        }
        fn embed(&self, text: &str) -> Vec<f32> {
            vec![text.len() as f32, 0.0]
        }
        fn try_embed_query(&self, text: &str) -> Result<Vec<f32>, ModelError> {
            let call = self.calls.fetch_add(1, Ordering::SeqCst) + 1;
            if text == self.fail {
                return Err(ModelError::Io("the server is down".into()));
            }
            Ok(vec![text.len() as f32, call as f32])
        }
    }

    fn memo() -> (QueryMemo, Arc<AtomicUsize>) {
        let calls = Arc::new(AtomicUsize::new(0));
        let inner = Counting {
            calls: Arc::clone(&calls),
            fail: "down",
        };
        (QueryMemo::new(Box::new(inner)), calls)
    }

    #[test]
    fn a_query_asked_again_is_not_embedded_again() {
        let (memo, calls) = memo();
        assert_eq!(memo.try_embed_query("raft").unwrap(), [4.0, 1.0]);
        assert_eq!(memo.try_embed_query("raft").unwrap(), [4.0, 1.0]);
        assert_eq!(memo.try_embed_query("leader").unwrap(), [6.0, 2.0]);
        assert_eq!(memo.try_embed_query("raft").unwrap(), [4.0, 1.0]);
        assert_eq!(calls.load(Ordering::SeqCst), 2);
        // Passages are never remembered: they are cached by the index.
        assert_eq!(memo.embed("raft"), [4.0, 0.0]);
    }

    #[test]
    fn a_failure_is_not_remembered() {
        let (memo, calls) = memo();
        assert!(memo.try_embed_query("down").is_err());
        assert!(memo.try_embed_query("down").is_err());
        assert_eq!(calls.load(Ordering::SeqCst), 2);
    }

    #[test]
    fn the_least_recent_query_is_forgotten_first() {
        let (memo, calls) = memo();
        let queries: Vec<String> = (0..REMEMBERED_QUERIES).map(|n| format!("q{n}")).collect();
        for query in &queries {
            memo.try_embed_query(query).unwrap();
        }
        // q0 is asked again, so q1 is the least recent when q-new comes.
        memo.try_embed_query("q0").unwrap();
        memo.try_embed_query("q-new").unwrap();
        let before = calls.load(Ordering::SeqCst);
        assert_eq!(before, REMEMBERED_QUERIES + 1);
        memo.try_embed_query("q0").unwrap();
        assert_eq!(calls.load(Ordering::SeqCst), before, "q0 was kept");
        memo.try_embed_query("q1").unwrap();
        assert_eq!(calls.load(Ordering::SeqCst), before + 1, "q1 was forgotten");
    }
}
