//! The order in which every store returns BM25 hits. Scores tie often (the
//! same terms in notes of the same length), so ties are broken by path and
//! then by the second key (a section's ordinal), never by how a store
//! happened to lay out or fetch its documents.

/// Sorts `hits` (`(path, key, score)`) best first, ties by path and then
/// by `key`, and keeps the first `limit`.
pub(crate) fn order_hits<K: Ord>(hits: &mut Vec<(String, K, f32)>, limit: usize) {
    hits.sort_by(|a, b| {
        b.2.total_cmp(&a.2)
            .then_with(|| a.0.cmp(&b.0))
            .then(a.1.cmp(&b.1))
    });
    hits.truncate(limit);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hits_are_ordered_by_score_then_path_then_section_and_cut_at_the_limit() {
        let mut hits = vec![
            ("b.md".to_string(), 0, 1.0),
            ("a.md".to_string(), 2, 1.0),
            ("c.md".to_string(), 0, 3.5),
            ("a.md".to_string(), 1, 1.0),
            ("a.md".to_string(), 0, 0.5),
        ];
        order_hits(&mut hits, 4);
        assert_eq!(
            hits,
            vec![
                ("c.md".to_string(), 0, 3.5),
                ("a.md".to_string(), 1, 1.0),
                ("a.md".to_string(), 2, 1.0),
                ("b.md".to_string(), 0, 1.0),
            ]
        );
        // A note hit has no section: `None` sorts before any ordinal.
        let mut notes = vec![
            ("b.md".to_string(), None, 2.0),
            ("a.md".to_string(), Some(0), 2.0),
            ("a.md".to_string(), None, 2.0),
        ];
        order_hits(&mut notes, 10);
        assert_eq!(
            notes,
            vec![
                ("a.md".to_string(), None, 2.0),
                ("a.md".to_string(), Some(0), 2.0),
                ("b.md".to_string(), None, 2.0),
            ]
        );
        order_hits(&mut notes, 0);
        assert!(notes.is_empty());
    }
}
