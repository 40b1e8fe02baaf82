//! What one MCP session has already received whole (issue 41, part 8):
//! the notes `context_pack` printed whole, `get_note` returned whole, a
//! `read_pack` read to its end or a note resource read. `context_pack`
//! with `exclude_seen` leaves them out.
//!
//! The memory belongs to one session: the server object rmcp makes for
//! each HTTP session (and the one object of a stdio connection) owns it,
//! so it is gone when the session ends, and no session reads another's.
//! It is bounded: past [`MAX_SEEN`] notes the oldest are forgotten (the
//! agent's context has long moved on from them).

use std::collections::{HashSet, VecDeque};
use std::sync::Mutex;

/// Notes one session remembers at most.
pub(super) const MAX_SEEN: usize = 10_000;

/// The notes one session received whole, oldest first.
#[derive(Debug, Default)]
pub(super) struct SeenNotes {
    inner: Mutex<Seen>,
}

#[derive(Debug, Default)]
struct Seen {
    order: VecDeque<String>,
    set: HashSet<String>,
}

impl SeenNotes {
    /// Remembers `paths` (vault paths), each once.
    pub(super) fn record<I: IntoIterator<Item = String>>(&self, paths: I) {
        let mut seen = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        for path in paths {
            if seen.set.contains(&path) {
                continue;
            }
            if seen.order.len() == MAX_SEEN
                && let Some(oldest) = seen.order.pop_front()
            {
                seen.set.remove(&oldest);
            }
            seen.set.insert(path.clone());
            seen.order.push_back(path);
        }
    }

    /// The remembered paths, oldest first.
    pub(super) fn paths(&self) -> Vec<String> {
        let seen = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        seen.order.iter().cloned().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn notes_are_remembered_once_and_the_oldest_go_past_the_bound() {
        let seen = SeenNotes::default();
        seen.record(["a.md".to_string(), "b.md".to_string(), "a.md".to_string()]);
        assert_eq!(seen.paths(), vec!["a.md", "b.md"]);
        seen.record((0..MAX_SEEN).map(|i| format!("n{i}.md")));
        let paths = seen.paths();
        assert_eq!(paths.len(), MAX_SEEN);
        assert_eq!(paths[0], "n0.md");
        assert!(!paths.contains(&"a.md".to_string()));
        assert_eq!(paths[MAX_SEEN - 1], format!("n{}.md", MAX_SEEN - 1));
    }
}
