//! An approximate nearest-neighbour index (HNSW, via instant-distance) over
//! the semantic arm's chunk vectors, for vaults where a flat scan per query
//! costs too much, or when asked for with `--ann`.
//!
//! The graph is built on one thread with a fixed seed, so the same vectors
//! always give the same graph and the same answers. It is stored next to
//! the vectors as `ann-<model fingerprint>.bin`, keyed by the hash of the
//! chunk hashes it was built from; any change to the vectors rebuilds it.

use std::fs;
use std::path::{Path, PathBuf};

use anyhow::{Result, bail};
use instant_distance::{Builder, HnswMap, Search};
use serde::{Deserialize, Serialize};

pub(crate) use crate::store::ANN_THRESHOLD;
/// How many chunks one ANN query returns (HNSW's `ef` at search time).
pub(crate) const EF_SEARCH: usize = 200;
const EF_CONSTRUCTION: usize = 100;
const SEED: u64 = 0x6374_7870_6163_6b21;
const FORMAT: u32 = 1;

/// One chunk's vector; distance is one minus the dot product (the vectors
/// are normalised, so this is cosine distance).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct ChunkVector(pub Vec<f32>);

impl instant_distance::Point for ChunkVector {
    fn distance(&self, other: &Self) -> f32 {
        1.0 - crate::embed::dot(&self.0, &other.0)
    }
}

#[derive(Serialize, Deserialize)]
struct Stored {
    format: u32,
    /// The hash of the chunk hashes the graph was built from.
    key: [u8; 32],
    map: HnswMap<ChunkVector, u32>,
}

/// The HNSW graph over a vault's chunks; values are chunk numbers.
pub struct AnnIndex {
    map: HnswMap<ChunkVector, u32>,
    /// Whether this call built (and stored) the graph.
    pub built: bool,
}

fn file(dir: &Path, fingerprint: &str) -> PathBuf {
    dir.join(format!("ann-{fingerprint}.bin"))
}

impl AnnIndex {
    /// The stored graph for `key`, else one built from `vectors` (`dims`
    /// floats per chunk) and stored.
    pub fn open_or_build(
        dir: &Path,
        fingerprint: &str,
        key: [u8; 32],
        vectors: &[f32],
        dims: usize,
    ) -> Result<AnnIndex> {
        if let Some(stored) = AnnIndex::open(dir, fingerprint, key) {
            return Ok(stored);
        }
        let path = file(dir, fingerprint);
        let map = build(vectors, dims)?;
        let stored = Stored {
            format: FORMAT,
            key,
            map,
        };
        crate::safe_fs::write_atomic(&path, &postcard::to_allocvec(&stored)?)?;
        Ok(AnnIndex {
            map: stored.map,
            built: true,
        })
    }

    /// The stored graph, if it was built from the vectors `key` names.
    pub fn open(dir: &Path, fingerprint: &str, key: [u8; 32]) -> Option<AnnIndex> {
        let bytes = fs::read(file(dir, fingerprint)).ok()?;
        let stored = postcard::from_bytes::<Stored>(&bytes).ok()?;
        (stored.format == FORMAT && stored.key == key).then_some(AnnIndex {
            map: stored.map,
            built: false,
        })
    }

    /// The chunks nearest to `query`, nearest first, with their similarity
    /// (dot product); at most [`EF_SEARCH`].
    pub fn search(&self, query: &[f32]) -> Vec<(usize, f32)> {
        let mut search = Search::default();
        self.map
            .search(&ChunkVector(query.to_vec()), &mut search)
            // The dot product again, not `1 - distance`: the exact scan's
            // numbers to the last bit.
            .map(|item| {
                (
                    *item.value as usize,
                    crate::embed::dot(&item.point.0, query),
                )
            })
            .collect()
    }
}

/// The share of the exact top 10 chunks of each query that the graph's top
/// 10 contains: recall@10 (`queries` holds `dims` floats per query).
pub fn recall_at_10(ann: &AnnIndex, vectors: &[f32], queries: &[f32], dims: usize) -> f64 {
    let mut found = 0;
    let mut asked = 0;
    for query in queries.chunks_exact(dims) {
        let truth = exact_top(vectors, dims, query, 10);
        let got: Vec<usize> = ann
            .search(query)
            .into_iter()
            .take(10)
            .map(|h| h.0)
            .collect();
        found += truth.iter().filter(|t| got.contains(t)).count();
        asked += truth.len();
    }
    found as f64 / asked.max(1) as f64
}

/// Builds the graph on a one-thread pool: parallel insertion would make
/// the graph depend on thread timing.
pub(crate) fn build(vectors: &[f32], dims: usize) -> Result<HnswMap<ChunkVector, u32>> {
    if dims == 0 || !vectors.len().is_multiple_of(dims) {
        bail!("vectors do not divide into {dims} dimensions");
    }
    let points: Vec<ChunkVector> = vectors
        .chunks_exact(dims)
        .map(|v| ChunkVector(v.to_vec()))
        .collect();
    let Ok(count) = u32::try_from(points.len()) else {
        bail!("too many chunks for the ANN index");
    };
    let values: Vec<u32> = (0..count).collect();
    let pool = rayon::ThreadPoolBuilder::new().num_threads(1).build()?;
    Ok(pool.install(|| {
        Builder::default()
            .seed(SEED)
            .ef_construction(EF_CONSTRUCTION)
            .ef_search(EF_SEARCH)
            .build(points, values)
    }))
}

/// The `k` chunks most similar to `query` by a full scan: what the graph
/// is measured against.
pub fn exact_top(vectors: &[f32], dims: usize, query: &[f32], k: usize) -> Vec<usize> {
    let mut scored: Vec<(usize, f32)> = vectors
        .chunks_exact(dims)
        .enumerate()
        .map(|(i, v)| (i, crate::embed::dot(v, query)))
        .collect();
    scored.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    scored.into_iter().take(k).map(|(i, _)| i).collect()
}

/// Deterministic unit vectors scattered around `clusters` random centres,
/// as embeddings tend to be: test and benchmark data.
pub fn clustered_unit_vectors(count: usize, dims: usize, clusters: usize, seed: u64) -> Vec<f32> {
    let mut state = seed.max(1);
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state >> 11) as f32 / (1u64 << 53) as f32 - 0.5
    };
    let centres: Vec<Vec<f32>> = (0..clusters.max(1))
        .map(|_| (0..dims).map(|_| next()).collect())
        .collect();
    let mut out = Vec::with_capacity(count * dims);
    for i in 0..count {
        let centre = &centres[i % centres.len()];
        let v: Vec<f32> = centre.iter().map(|c| c + 0.4 * next()).collect();
        let norm = v
            .iter()
            .map(|x| x * x)
            .sum::<f32>()
            .sqrt()
            .max(f32::MIN_POSITIVE);
        out.extend(v.iter().map(|x| x / norm));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recall_at_10_is_high_and_the_graph_is_deterministic() {
        let dims = 16;
        let vectors = clustered_unit_vectors(400, dims, 32, 7);
        let queries = clustered_unit_vectors(50, dims, 32, 99);
        let tmp = tempfile::tempdir().unwrap();
        let ann = AnnIndex::open_or_build(tmp.path(), "fp", [1; 32], &vectors, dims).unwrap();
        assert!(ann.built);
        let recall = recall_at_10(&ann, &vectors, &queries, dims);
        assert!(recall >= 0.9, "recall@10 {recall}");

        // Reopened from disk with the same key: not rebuilt, same answers.
        let again = AnnIndex::open_or_build(tmp.path(), "fp", [1; 32], &vectors, dims).unwrap();
        assert!(!again.built);
        let query = &queries[..dims];
        assert_eq!(ann.search(query), again.search(query));
        // Built anew elsewhere: byte-identical file.
        let other = tempfile::tempdir().unwrap();
        AnnIndex::open_or_build(other.path(), "fp", [1; 32], &vectors, dims).unwrap();
        assert_eq!(
            fs::read(file(tmp.path(), "fp")).unwrap(),
            fs::read(file(other.path(), "fp")).unwrap()
        );
        // Another key: rebuilt.
        let changed = AnnIndex::open_or_build(tmp.path(), "fp", [2; 32], &vectors, dims).unwrap();
        assert!(changed.built);
    }
}
