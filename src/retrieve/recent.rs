//! Recent mode: pages linked from `hot.md` first, then by `updated`.

use crate::note::UpdatedSource;
use crate::retrieve::{Candidate, Rule, RuleHit};
use crate::vault::Vault;

/// Says how many of a recent pack's pages are undated because their file
/// time is a checkout's or a copy's (their order says nothing of activity).
pub(crate) fn undated_warning(vault: &Vault, pack: &crate::pack::Pack) -> Option<String> {
    let shared = pack
        .pages
        .iter()
        .filter_map(|page| vault.metas.search_path(&page.path).ok())
        .filter(|&note| vault.metas[note].updated_source == UpdatedSource::SharedFileTime)
        .count();
    (shared > 0).then(|| {
        format!(
            "{shared} of the {} pages have no date of their own, and their file time is one \
             most of the vault's notes share (a checkout, a copy or a sync wrote them): they \
             follow the dated pages in tier and path order",
            pack.pages.len()
        )
    })
}

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
