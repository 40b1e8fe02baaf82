//! Link neighbourhoods: which notes a note links to and is linked from,
//! walked a bounded number of hops, with hubs (notes linked from a large
//! share of the vault: index pages, maps of content, templates) never
//! walked through, and neighbours weighted down by distance and degree.
//! Used by note-anchored packs and by `--graph-depth` on topic packs. The
//! graph itself ([`LinkGraph`]) comes from the store.

use std::collections::{BTreeMap, HashSet};

use serde::Serialize;

pub(crate) use crate::note::LinkGraph;
use crate::retrieve::Candidate;
use crate::retrieve::rescore::Expander;
use crate::store::Store;

/// Which links a walk follows.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Direction {
    /// What a note links to.
    Out,
    /// What links to a note.
    In,
    #[default]
    Both,
}

impl std::str::FromStr for Direction {
    type Err = NoDirection;
    fn from_str(text: &str) -> Result<Direction, NoDirection> {
        match text {
            "out" => Ok(Direction::Out),
            "in" => Ok(Direction::In),
            "both" => Ok(Direction::Both),
            other => Err(NoDirection(other.to_string())),
        }
    }
}

/// A graph direction that is not `out`, `in` or `both` (the text given).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NoDirection(pub String);

impl std::fmt::Display for NoDirection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "direction must be out, in or both, got '{}'", self.0)
    }
}

impl std::error::Error for NoDirection {}

/// Graph expansion of a topic pack (`--graph-depth`, `--graph-direction`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GraphOptions {
    /// Hops from the top hits; 0 leaves the ranking as it is.
    pub depth: usize,
    pub direction: Direction,
}

/// The deepest walk asked for (`--graph-depth`, `--depth`).
pub const MAX_DEPTH: usize = 3;
/// How many of a topic pack's top hits have their neighbours added.
pub(crate) const TOPIC_SEEDS: usize = 3;
/// How many neighbours a topic pack adds at most.
pub(crate) const TOPIC_ADDED: usize = 10;
/// How many linked notes a note-anchored pack ranks at most.
pub(crate) const NOTE_NEIGHBOURS: usize = 50;
/// How many notes one walk may reach before it stops expanding.
pub(crate) const MAX_REACHED: usize = 2_000;
/// A note linked from at least this many notes, and from at least
/// [`HUB_SHARE`] of the vault, is a hub. Measured (in-degree, distinct
/// linking notes): the example vault's largest is 13 of 25 notes (its
/// central topic, not an index), kepano-obsidian's 9 of 103 (a category
/// page), the synthetic 10k vault's 4; the 99th percentile is at most 13
/// everywhere. An index or daily template linked from every note is far
/// above both bounds; a well-linked topic in a small vault is below the
/// floor.
pub(crate) const HUB_MIN_LINKS: usize = 20;
pub(crate) const HUB_SHARE: f64 = 0.02;
/// Each hop halves a neighbour's weight.
pub(crate) const HOP_DECAY: f64 = 0.5;

impl LinkGraph {
    /// The in-degree from which a note is a hub in this vault.
    pub fn hub_threshold(&self) -> usize {
        HUB_MIN_LINKS.max((HUB_SHARE * self.notes() as f64).ceil() as usize)
    }

    pub fn is_hub(&self, note: usize) -> bool {
        self.linked_from(note).len() >= self.hub_threshold()
    }

    fn step(&self, note: usize, direction: Direction) -> Vec<u32> {
        let mut next: Vec<u32> = match direction {
            Direction::Out => self.links_to(note).to_vec(),
            Direction::In => self.linked_from(note).to_vec(),
            Direction::Both => {
                let mut both = self.links_to(note).to_vec();
                both.extend_from_slice(self.linked_from(note));
                both
            }
        };
        next.sort_unstable();
        next.dedup();
        next
    }

    /// The notes within `depth` hops of the seeds (each with a weight), best
    /// first. A neighbour weighs `seed weight × HOP_DECAY^hops / (1 +
    /// ln(1 + degree))`, the best over the paths found; hubs are neither
    /// reached nor walked through, and a seed is walked from even when it
    /// is a hub only if `expand_hub_seeds`. Seeds are not returned. The walk
    /// stops expanding after [`MAX_REACHED`] notes.
    pub fn neighbourhood(
        &self,
        seeds: &[(usize, f64)],
        depth: usize,
        direction: Direction,
        expand_hub_seeds: bool,
    ) -> Neighbourhood {
        let mut best: BTreeMap<usize, Neighbour> = BTreeMap::new();
        let mut hubs: Vec<usize> = Vec::new();
        let is_seed = |note: usize| seeds.iter().any(|s| s.0 == note);
        let mut reached = 0usize;
        for &(seed, weight) in seeds {
            if seed >= self.notes() || (!expand_hub_seeds && self.is_hub(seed)) {
                if seed < self.notes() {
                    hubs.push(seed);
                }
                continue;
            }
            // Breadth first, one frontier per hop, in note order.
            let mut seen: HashSet<usize> = HashSet::from([seed]);
            let mut frontier: Vec<usize> = vec![seed];
            for hops in 1..=depth.min(MAX_DEPTH) {
                let mut next_frontier = Vec::new();
                for &from in &frontier {
                    for to in self.step(from, direction) {
                        let to = to as usize;
                        if reached >= MAX_REACHED || !seen.insert(to) {
                            continue;
                        }
                        reached += 1;
                        if self.is_hub(to) {
                            hubs.push(to);
                            continue;
                        }
                        next_frontier.push(to);
                        if is_seed(to) {
                            continue;
                        }
                        let degree = self.degree(to);
                        let score = weight * HOP_DECAY.powi(hops as i32)
                            / (1.0 + (1.0 + degree as f64).ln());
                        let entry = best.entry(to).or_insert(Neighbour {
                            note: to,
                            via: seed,
                            hops,
                            degree,
                            score,
                        });
                        if score > entry.score {
                            *entry = Neighbour {
                                note: to,
                                via: seed,
                                hops,
                                degree,
                                score,
                            };
                        }
                    }
                }
                frontier = next_frontier;
            }
        }
        let mut neighbours: Vec<Neighbour> = best.into_values().collect();
        neighbours.sort_by(|a, b| b.score.total_cmp(&a.score).then(a.note.cmp(&b.note)));
        hubs.sort_unstable();
        hubs.dedup();
        Neighbourhood { neighbours, hubs }
    }
}

/// A note reached by a walk.
#[derive(Clone, Debug, PartialEq)]
pub struct Neighbour {
    pub note: usize,
    /// The seed it was best reached from.
    pub via: usize,
    pub hops: usize,
    pub degree: usize,
    pub score: f64,
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct Neighbourhood {
    /// Best first (score, then note index).
    pub neighbours: Vec<Neighbour>,
    /// Hubs met and not walked through, by note index.
    pub hubs: Vec<usize>,
}

/// A neighbour a topic pack took in, and where.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Added {
    pub neighbour: Neighbour,
    /// Its place in the candidate list (0-based).
    pub position: usize,
}

/// Adds the linked neighbours of the top [`TOPIC_SEEDS`] candidates (see
/// [`LinkGraph::neighbourhood`]; a seed at position `r` weighs `1 / (1 +
/// r)`), at most [`TOPIC_ADDED`]. A neighbour of weight `w` is placed at
/// position `ceil(1 / w - 1)` (a direct, barely linked neighbour of the
/// top hit lands fourth) and below the neighbours placed before it, or
/// stays where it is if the ranking
/// already has it there or higher; it takes the score of the candidate
/// before it, so scores stay in order. Returns what was added or moved,
/// and the hubs skipped.
pub(crate) fn expand_candidates(
    graph: &LinkGraph,
    candidates: &mut Vec<Candidate>,
    options: &GraphOptions,
) -> (Vec<Added>, Vec<usize>) {
    if options.depth == 0 || candidates.is_empty() {
        return (Vec::new(), Vec::new());
    }
    let seeds: Vec<(usize, f64)> = candidates
        .iter()
        .take(TOPIC_SEEDS)
        .enumerate()
        .map(|(rank, c)| (c.note, 1.0 / (1.0 + rank as f64)))
        .collect();
    let walk = graph.neighbourhood(&seeds, options.depth, options.direction, false);
    let mut added = Vec::new();
    // Neighbours come best first; none is placed above a better one.
    let mut floor = 0;
    for neighbour in walk.neighbours {
        if added.len() >= TOPIC_ADDED {
            break;
        }
        let target = ((1.0 / neighbour.score - 1.0).ceil().max(0.0) as usize)
            .max(floor)
            .min(candidates.len());
        let existing = candidates.iter().position(|c| c.note == neighbour.note);
        if existing.is_some_and(|at| at <= target) {
            continue;
        }
        let mut candidate = match existing {
            Some(at) => candidates.remove(at),
            None => Candidate {
                note: neighbour.note,
                score: 0.0,
                breakdown: Vec::new(),
                explanation: None,
            },
        };
        let position = target.min(candidates.len());
        candidate.score = match position.checked_sub(1) {
            Some(before) => candidates[before].score,
            None => candidates.first().map_or(0.0, |c| c.score),
        };
        candidates.insert(position, candidate);
        floor = position + 1;
        added.push(Added {
            neighbour,
            position,
        });
    }
    (added, walk.hubs)
}

/// `--graph-depth` as a registered signal (see
/// [`signals`](crate::retrieve::arms::signals)): the store's link graph
/// read when a pack's merged candidates are expanded (once per pack,
/// however many subqueries ranked), then [`expand_candidates`].
pub(crate) struct GraphExpander<'a> {
    pub store: Option<&'a dyn Store>,
    pub options: GraphOptions,
}

/// What one graph expansion did, for the pack's graph trace.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Expansion {
    pub options: GraphOptions,
    pub hub_threshold: usize,
    /// The neighbours added or moved up, best first.
    pub added: Vec<Added>,
    /// The hubs met and not walked through, by note index.
    pub hubs: Vec<usize>,
}

impl Expander for GraphExpander<'_> {
    fn name(&self) -> &'static str {
        "graph"
    }

    fn expand(&self, candidates: &mut Vec<Candidate>) -> anyhow::Result<Expansion> {
        let graph = self
            .store
            .and_then(|store| store.link_graph())
            .ok_or_else(|| NoLinks::of(self.store))?;
        let (added, hubs) = expand_candidates(&graph, candidates, &self.options);
        Ok(Expansion {
            options: self.options,
            hub_threshold: graph.hub_threshold(),
            added,
            hubs,
        })
    }
}

/// Why a walk has no links to follow: no index, or a store (described)
/// whose link table could not be read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum NoLinks {
    NoIndex,
    Unreadable(String),
}

impl NoLinks {
    pub(crate) fn of(store: Option<&dyn Store>) -> NoLinks {
        match store {
            Some(store) => NoLinks::Unreadable(store.describe()),
            None => NoLinks::NoIndex,
        }
    }
}

impl std::fmt::Display for NoLinks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NoLinks::NoIndex => f.write_str("links need the index"),
            NoLinks::Unreadable(store) => {
                write!(f, "the links of the store at {store} could not be read")
            }
        }
    }
}

impl std::error::Error for NoLinks {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_direction_or_links_missing_say_so_in_the_old_words() {
        assert_eq!("in".parse::<Direction>(), Ok(Direction::In));
        assert_eq!(
            "up".parse::<Direction>().unwrap_err().to_string(),
            "direction must be out, in or both, got 'up'"
        );
        assert_eq!(NoLinks::of(None).to_string(), "links need the index");
        assert_eq!(
            NoLinks::Unreadable("postgres://db/v".into()).to_string(),
            "the links of the store at postgres://db/v could not be read"
        );
    }

    /// A star: notes 1..=n all link to note 0; note 1 also links to n+1.
    fn star(n: usize) -> LinkGraph {
        let mut links: Vec<(usize, usize)> = (1..=n).map(|i| (i, 0)).collect();
        links.push((1, n + 1));
        LinkGraph::from_links(n + 2, links)
    }

    #[test]
    fn hubs_are_neither_added_nor_walked_through() {
        let graph = star(30);
        assert!(graph.is_hub(0));
        let walk = graph.neighbourhood(&[(1, 1.0)], 2, Direction::Both, false);
        let notes: Vec<usize> = walk.neighbours.iter().map(|n| n.note).collect();
        assert_eq!(notes, vec![31]);
        assert_eq!(walk.hubs, vec![0]);
    }

    #[test]
    fn below_the_floor_a_popular_note_is_walked() {
        let graph = star(10);
        assert!(!graph.is_hub(0));
        let walk = graph.neighbourhood(&[(1, 1.0)], 2, Direction::Both, false);
        assert_eq!(
            walk.neighbours[0].note, 11,
            "the low-degree neighbour first"
        );
        assert_eq!(walk.neighbours.len(), 11);
        assert!(walk.neighbours.iter().all(|n| n.note != 1));
    }

    #[test]
    fn weights_fall_with_hops_and_degree() {
        // 0 -> 1 -> 2, and 0 -> 3 where 3 is linked from 4..=8 too.
        let mut links = vec![(0, 1), (1, 2), (0, 3)];
        links.extend((4..=8).map(|i| (i, 3)));
        let graph = LinkGraph::from_links(9, links);
        let walk = graph.neighbourhood(&[(0, 1.0)], 2, Direction::Out, false);
        let order: Vec<(usize, usize)> = walk.neighbours.iter().map(|n| (n.note, n.hops)).collect();
        assert_eq!(order, vec![(1, 1), (3, 1), (2, 2)]);
        let incoming = graph.neighbourhood(&[(3, 1.0)], 1, Direction::In, false);
        assert_eq!(incoming.neighbours.len(), 6);
    }

    fn candidate(note: usize, score: f64) -> crate::retrieve::Candidate {
        crate::retrieve::Candidate {
            note,
            score,
            breakdown: Vec::new(),
            explanation: None,
        }
    }

    #[test]
    fn topic_neighbours_are_placed_by_weight_and_never_moved_down() {
        // Hits 0..6 ranked in order; 0 links to 10 (degree 1) and to 5.
        let graph = LinkGraph::from_links(11, vec![(0, 10), (0, 5)]);
        let mut candidates: Vec<_> = (0..7)
            .map(|n| candidate(n, 1.0 - n as f64 / 10.0))
            .collect();
        let options = GraphOptions {
            depth: 1,
            direction: Direction::Out,
        };
        let (added, hubs) = expand_candidates(&graph, &mut candidates, &options);
        let order: Vec<usize> = candidates.iter().map(|c| c.note).collect();
        // 10: weight 0.5 / (1 + ln 2) = 0.295 -> position 3; 5 likewise
        // after it -> position 3 too, moved up from 5.
        assert_eq!(order, vec![0, 1, 2, 5, 10, 3, 4, 6]);
        assert_eq!(added.len(), 2);
        assert!(hubs.is_empty());
        assert!(candidates.windows(2).all(|w| w[0].score >= w[1].score));
        let mut unchanged: Vec<_> = (0..3).map(|n| candidate(n, 1.0)).collect();
        let (none, _) = expand_candidates(
            &graph,
            &mut unchanged,
            &GraphOptions {
                depth: 0,
                direction: Direction::Both,
            },
        );
        assert!(none.is_empty());
        assert_eq!(unchanged.len(), 3);
    }

    #[test]
    fn the_share_bound_grows_with_the_vault() {
        let graph = LinkGraph::from_links(5_000, std::iter::empty());
        assert_eq!(graph.hub_threshold(), 100);
        assert_eq!(LinkGraph::default().hub_threshold(), HUB_MIN_LINKS);
    }
}
