//! Recent mode: pages linked from `hot.md` first, then by `updated`.

use crate::retrieve::{Candidate, Rule, RuleHit};
use crate::vault::Vault;

/// Every note in recent-activity order: `hot.md` links first, each group by
/// date descending ([`crate::note::NoteMeta::date`]: undated notes last),
/// then tier, then path.
pub(crate) fn recent_order(vault: &Vault) -> Vec<Candidate> {
    let mut order: Vec<usize> = (0..vault.metas.len()).collect();
    order.sort_by(|&a, &b| {
        let (na, nb) = (&vault.metas[a], &vault.metas[b]);
        let hot_a = vault.hot.contains(&a);
        let hot_b = vault.hot.contains(&b);
        hot_b
            .cmp(&hot_a)
            .then(nb.date().cmp(&na.date()))
            .then(na.tier.cmp(&nb.tier))
            .then(na.path.cmp(&nb.path))
    });
    order
        .into_iter()
        .map(|note| Candidate {
            note,
            score: 0.0,
            breakdown: if vault.hot.contains(&note) {
                vec![RuleHit {
                    rule: Rule::Hot,
                    term: String::new(),
                    points: 0,
                }]
            } else {
                Vec::new()
            },
            explanation: None,
        })
        .collect()
}
