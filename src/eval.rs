//! Retrieval evaluation on BEIR-format data: a corpus becomes a vault (one
//! note per document), each query is ranked by the same pipeline as
//! `search`, and the ranking is scored against relevance judgments.

use std::collections::{BTreeMap, HashMap};
use std::fs;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;

use anyhow::{Context, Result, bail};
use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use crate::retrieve::RankOptions;
use crate::session::Session;

/// How many results are ranked per query (Recall@100 needs 100).
pub(crate) const DEPTH: usize = 100;

#[derive(Deserialize)]
struct CorpusDoc {
    #[serde(rename = "_id")]
    id: String,
    #[serde(default)]
    title: String,
    #[serde(default)]
    text: String,
}

/// The file name a document gets in the vault (as `to_vault.py` names it).
pub(crate) fn note_name(doc_id: &str) -> String {
    doc_id
        .chars()
        .map(|c| {
            if c.is_alphanumeric() || c == '_' || c == '.' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// Writes one note per corpus document into `out`: frontmatter `id` and
/// `title`, body `# title` and the text. Returns the number of notes.
pub fn write_vault(corpus: &Path, out: &Path) -> Result<usize> {
    fs::create_dir_all(out)?;
    let mut count = 0;
    for_each_json_line(corpus, "a corpus document", |doc: CorpusDoc| {
        let title = doc.title.trim();
        let mut text = format!(
            "---\nid: {}\ntitle: {}\n---\n\n",
            serde_json::to_string(&doc.id)?,
            serde_json::to_string(&title.replace('\n', " "))?
        );
        if !title.is_empty() {
            text.push_str(&format!("# {title}\n\n"));
        }
        text.push_str(doc.text.trim());
        text.push('\n');
        let mut note = fs::File::create(out.join(format!("{}.md", note_name(&doc.id))))?;
        note.write_all(text.as_bytes())?;
        count += 1;
        Ok(())
    })?;
    Ok(count)
}

/// Calls `each` with every non-blank line of a JSON Lines file, parsed;
/// `what` names a row in error messages.
fn for_each_json_line<T: for<'de> Deserialize<'de>>(
    path: &Path,
    what: &str,
    mut each: impl FnMut(T) -> Result<()>,
) -> Result<()> {
    let file = fs::File::open(path).with_context(|| format!("cannot read {}", path.display()))?;
    for (number, line) in BufReader::new(file).lines().enumerate() {
        let line = line?;
        if line.trim().is_empty() {
            continue;
        }
        let row: T = serde_json::from_str(&line)
            .with_context(|| format!("{} line {}: not {what}", path.display(), number + 1))?;
        each(row)?;
    }
    Ok(())
}

/// `query-id<TAB>text` lines (a header line `query-id…` is skipped).
pub(crate) fn read_queries(path: &Path) -> Result<Vec<(String, String)>> {
    let text =
        fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    Ok(text
        .lines()
        .filter_map(|line| line.split_once('\t'))
        .filter(|(id, _)| !id.eq_ignore_ascii_case("query-id") && !id.eq_ignore_ascii_case("qid"))
        .map(|(id, q)| (id.trim().to_string(), q.trim().to_string()))
        .collect())
}

/// `query-id<TAB>doc-id<TAB>relevance` lines, by query.
pub(crate) fn read_qrels(path: &Path) -> Result<BTreeMap<String, HashMap<String, u32>>> {
    let text =
        fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    let mut qrels: BTreeMap<String, HashMap<String, u32>> = BTreeMap::new();
    for line in text.lines() {
        let fields: Vec<&str> = line.split('\t').collect();
        if fields.len() < 3 {
            continue;
        }
        let Ok(relevance) = fields[2].trim().parse::<u32>() else {
            continue;
        };
        if relevance > 0 {
            qrels
                .entry(fields[0].trim().to_string())
                .or_default()
                .insert(note_name(fields[1].trim()), relevance);
        }
    }
    if qrels.is_empty() {
        bail!("{} has no relevance judgments", path.display());
    }
    Ok(qrels)
}

#[derive(Clone, Debug, Serialize)]
pub(crate) struct EvalReport {
    pub queries: usize,
    pub ndcg_at_10: f64,
    pub recall_at_100: f64,
    pub mrr_at_10: f64,
}

/// Ranks every judged query and averages nDCG@10, Recall@100 and MRR@10.
pub(crate) fn evaluate(
    session: &Session,
    queries: &[(String, String)],
    qrels: &BTreeMap<String, HashMap<String, u32>>,
    options: &RankOptions,
) -> EvalReport {
    let mut options = options.clone();
    options.depth = options.depth.max(DEPTH);
    let judged: Vec<&(String, String)> = queries
        .iter()
        .filter(|(id, _)| qrels.contains_key(id))
        .collect();
    let scores: Vec<(f64, f64, f64)> = judged
        .par_iter()
        .map(|(id, text)| {
            let ranking = session.rank(text, &options, &|_| true);
            let ranked: Vec<String> = ranking
                .hits
                .iter()
                .take(DEPTH)
                .map(|hit| session.vault.metas[hit.note].stem().to_string())
                .collect();
            metrics(&ranked, &qrels[id.as_str()])
        })
        .collect();
    let n = scores.len().max(1) as f64;
    EvalReport {
        queries: scores.len(),
        ndcg_at_10: scores.iter().map(|s| s.0).sum::<f64>() / n,
        recall_at_100: scores.iter().map(|s| s.1).sum::<f64>() / n,
        mrr_at_10: scores.iter().map(|s| s.2).sum::<f64>() / n,
    }
}

/// nDCG@10 (linear gain), Recall@100 and MRR@10 of one ranking.
pub(crate) fn metrics(ranked: &[String], relevant: &HashMap<String, u32>) -> (f64, f64, f64) {
    let gain = |doc: &String| f64::from(relevant.get(doc).copied().unwrap_or(0));
    let dcg: f64 = ranked
        .iter()
        .take(10)
        .enumerate()
        .map(|(i, doc)| gain(doc) / (i as f64 + 2.0).log2())
        .sum();
    let mut ideal: Vec<f64> = relevant.values().map(|&r| f64::from(r)).collect();
    ideal.sort_by(|a, b| b.total_cmp(a));
    let idcg: f64 = ideal
        .iter()
        .take(10)
        .enumerate()
        .map(|(i, g)| g / (i as f64 + 2.0).log2())
        .sum();
    let found = ranked
        .iter()
        .take(DEPTH)
        .filter(|d| relevant.contains_key(*d))
        .count();
    let recall = found as f64 / relevant.len().max(1) as f64;
    let mrr = ranked
        .iter()
        .take(10)
        .position(|d| relevant.contains_key(d))
        .map_or(0.0, |i| 1.0 / (i as f64 + 1.0));
    (if idcg > 0.0 { dcg / idcg } else { 0.0 }, recall, mrr)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metrics_match_hand_computation() {
        let relevant: HashMap<String, u32> = [("a".to_string(), 1), ("b".to_string(), 1)].into();
        let ranked: Vec<String> = ["x", "a", "y", "b"].iter().map(|s| s.to_string()).collect();
        let (ndcg, recall, mrr) = metrics(&ranked, &relevant);
        let dcg = 1.0 / 3f64.log2() + 1.0 / 5f64.log2();
        let idcg = 1.0 + 1.0 / 3f64.log2();
        assert!((ndcg - dcg / idcg).abs() < 1e-12);
        assert_eq!(recall, 1.0);
        assert_eq!(mrr, 0.5);
        assert_eq!(metrics(&[], &relevant), (0.0, 0.0, 0.0));
    }

    #[test]
    fn note_names_match_to_vault_py() {
        assert_eq!(note_name("doc 1/α"), "doc_1_α");
        assert_eq!(note_name("4983"), "4983");
    }
}

/// What must be in a pack for one query: every sentence, or any answer.
#[derive(Clone, Debug, Default)]
pub(crate) struct Evidence {
    pub sentences: Vec<String>,
    pub answers: Vec<String>,
    /// The vault note names (see `note_name`) of the documents that hold
    /// it, when the rows say.
    pub notes: Vec<String>,
}

#[derive(Deserialize)]
struct EvidenceRow {
    qid: String,
    #[serde(default)]
    doc_id: Option<String>,
    #[serde(default)]
    sentences: Vec<String>,
    #[serde(default)]
    answers: Vec<String>,
}

/// `{"qid", "doc_id", "sentences": [...]}` or `{"qid", "doc_id", "answers":
/// [...]}` lines, merged by query.
pub(crate) fn read_evidence(path: &Path) -> Result<BTreeMap<String, Evidence>> {
    let mut evidence: BTreeMap<String, Evidence> = BTreeMap::new();
    for_each_json_line(path, "an evidence row", |row: EvidenceRow| {
        let entry = evidence.entry(row.qid).or_default();
        entry.sentences.extend(row.sentences);
        entry.answers.extend(row.answers);
        if let Some(doc) = row.doc_id.map(|id| note_name(&id))
            && !entry.notes.contains(&doc)
        {
            entry.notes.push(doc);
        }
        Ok(())
    })?;
    if evidence.is_empty() {
        bail!("{} has no evidence rows", path.display());
    }
    Ok(evidence)
}

impl Evidence {
    /// Every sentence is in the pack (whitespace-insensitive), and if there
    /// are answers, at least one of them is.
    pub(crate) fn found_in(&self, bundle: &str) -> bool {
        let bundle = squash(bundle);
        let sentences_ok = self.sentences.iter().all(|s| bundle.contains(&squash(s)));
        let answers_ok =
            self.answers.is_empty() || self.answers.iter().any(|a| bundle.contains(&squash(a)));
        sentences_ok && answers_ok
    }

    /// Every note that holds the evidence is a page of the pack, in any
    /// form (`None` when the rows name no documents). With `found_in` it
    /// tells a ranking miss (the note is not there) from a selection miss
    /// (the note is, its evidence is not).
    pub(crate) fn notes_in(&self, pages: &[crate::pack::PackedPage]) -> Option<bool> {
        if self.notes.is_empty() {
            return None;
        }
        Some(self.notes.iter().all(|note| {
            pages.iter().any(|page| {
                let file = page.path.rsplit('/').next().unwrap_or(&page.path);
                file.strip_suffix(".md").unwrap_or(file) == note
            })
        }))
    }
}

fn squash(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[derive(Clone, Debug, Serialize)]
pub(crate) struct PackEvalRow {
    pub budget: usize,
    pub queries: usize,
    /// Share of queries whose evidence is inside the pack.
    pub evidence_in_pack: f64,
    /// Share of queries whose every evidence note is a page of the pack,
    /// among queries whose rows name their documents.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub notes_in_pack: Option<f64>,
    pub mean_tokens: f64,
}

/// Builds a pack per query at each budget and reports how often the
/// evidence is inside it.
pub(crate) fn evaluate_packs(
    session: &Session,
    queries: &[(String, String)],
    evidence: &BTreeMap<String, Evidence>,
    budgets: &[usize],
    tokenizer: crate::tokens::Tokenizer,
    options: &RankOptions,
    graph: &crate::retrieve::graph::GraphOptions,
) -> Vec<PackEvalRow> {
    use crate::pack::{PackMode, PackOptions};
    use crate::session::{PackRequest, Ranker};

    let judged: Vec<&(String, String)> = queries
        .iter()
        .filter(|(id, _)| evidence.contains_key(id))
        .collect();
    let generated = chrono::DateTime::from_timestamp(0, 0).unwrap_or_default();
    budgets
        .iter()
        .map(|&budget| {
            let results: Vec<(bool, Option<bool>, usize)> = judged
                .par_iter()
                .map(|(id, text)| {
                    let pack = session.pack(&PackRequest {
                        mode: PackMode::Topic(text.clone()),
                        ranker: Ranker::Hybrid,
                        rank: options.clone(),
                        options: PackOptions {
                            graph: *graph,
                            ..PackOptions::new(budget, tokenizer, generated)
                        },
                        subqueries: Vec::new(),
                        backlinks: false,
                        filter: Default::default(),
                    });
                    let evidence = &evidence[id.as_str()];
                    (
                        evidence.found_in(&pack.bundle),
                        evidence.notes_in(&pack.pages),
                        pack.actual,
                    )
                })
                .collect();
            let n = results.len().max(1) as f64;
            let named: Vec<bool> = results.iter().filter_map(|r| r.1).collect();
            PackEvalRow {
                budget,
                queries: results.len(),
                evidence_in_pack: results.iter().filter(|r| r.0).count() as f64 / n,
                notes_in_pack: (!named.is_empty()).then(|| {
                    named.iter().filter(|&&found| found).count() as f64 / named.len() as f64
                }),
                mean_tokens: results.iter().map(|r| r.2 as f64).sum::<f64>() / n,
            }
        })
        .collect()
}
