//! A cross-encoder reranker (a BERT classification head) through candle:
//! it reads the query and a passage together and scores how well the
//! passage answers. Built only with the `bert` feature.

use std::path::Path;

use candle_core::{DType, Device, Module, Tensor};
use candle_nn::{Linear, VarBuilder, linear};
use candle_transformers::models::bert::{BertModel, Config};
use tokenizers::{PaddingParams, PaddingStrategy, Tokenizer, TruncationParams};

/// Pairs are scored this many at a time.
const BATCH: usize = 8;
/// Tokens read of a query and passage together.
const MAX_TOKENS: usize = 512;

pub struct CrossEncoder {
    bert: BertModel,
    pooler: Linear,
    classifier: Linear,
    tokenizer: Tokenizer,
    device: Device,
    pub name: String,
}

fn candle(context: &str) -> impl Fn(candle_core::Error) -> String + '_ {
    move |err| format!("{context}: {err}")
}

impl CrossEncoder {
    /// Loads `config.json`, `model.safetensors` and `tokenizer.json` of a
    /// BERT sequence-classification model from `dir`.
    pub fn load(dir: &Path) -> Result<CrossEncoder, String> {
        let read = |f: &str| {
            std::fs::read(dir.join(f))
                .map_err(|err| format!("reranker {}: cannot read {f}: {err}", dir.display()))
        };
        let config_bytes = read("config.json")?;
        let config: Config = serde_json::from_slice(&config_bytes)
            .map_err(|err| format!("reranker config.json: {err}"))?;
        let raw: serde_json::Value = serde_json::from_slice(&config_bytes).unwrap_or_default();
        if raw["model_type"].as_str().is_some_and(|t| t != "bert") {
            return Err(format!(
                "reranker {}: a {} model; only BERT cross-encoders are supported",
                dir.display(),
                raw["model_type"]
            ));
        }
        let device = Device::Cpu;
        let vb =
            VarBuilder::from_buffered_safetensors(read("model.safetensors")?, DType::F32, &device)
                .map_err(candle("reranker model.safetensors"))?;
        let bert = BertModel::load(vb.pp("bert"), &config).map_err(candle("reranker weights"))?;
        let hidden = config.hidden_size;
        let pooler = linear(hidden, hidden, vb.pp("bert.pooler.dense"))
            .map_err(candle("reranker pooler"))?;
        let classifier =
            linear(hidden, 1, vb.pp("classifier")).map_err(candle("reranker classifier"))?;
        let mut tokenizer = Tokenizer::from_bytes(read("tokenizer.json")?)
            .map_err(|err| format!("reranker tokenizer.json: {err}"))?;
        tokenizer
            .with_truncation(Some(TruncationParams {
                max_length: MAX_TOKENS.min(config.max_position_embeddings),
                ..Default::default()
            }))
            .map_err(|err| format!("reranker tokenizer.json: {err}"))?;
        tokenizer.with_padding(Some(PaddingParams {
            strategy: PaddingStrategy::BatchLongest,
            pad_id: config.pad_token_id as u32,
            ..Default::default()
        }));
        Ok(CrossEncoder {
            bert,
            pooler,
            classifier,
            tokenizer,
            device,
            name: dir
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
        })
    }

    /// One relevance score per passage for `query`.
    pub fn score(&self, query: &str, passages: &[&str]) -> Result<Vec<f32>, String> {
        let mut scores = Vec::with_capacity(passages.len());
        for batch in passages.chunks(BATCH) {
            let pairs: Vec<(String, String)> = batch
                .iter()
                .map(|p| (query.to_string(), p.to_string()))
                .collect();
            let encodings = self
                .tokenizer
                .encode_batch(pairs, true)
                .map_err(|err| format!("reranker tokenizing: {err}"))?;
            let rows =
                |f: &dyn Fn(&tokenizers::Encoding) -> &[u32]| -> candle_core::Result<Tensor> {
                    let tensors = encodings
                        .iter()
                        .map(|e| Tensor::new(f(e), &self.device))
                        .collect::<candle_core::Result<Vec<_>>>()?;
                    Tensor::stack(&tensors, 0)
                };
            let batch_scores = (|| -> candle_core::Result<Vec<f32>> {
                let ids = rows(&|e| e.get_ids())?;
                let types = rows(&|e| e.get_type_ids())?;
                let mask = rows(&|e| e.get_attention_mask())?;
                let hidden = self.bert.forward(&ids, &types, Some(&mask))?;
                let cls = hidden.narrow(1, 0, 1)?.squeeze(1)?;
                let pooled = self.pooler.forward(&cls)?.tanh()?;
                self.classifier
                    .forward(&pooled)?
                    .squeeze(1)?
                    .to_vec1::<f32>()
            })()
            .map_err(candle("reranker"))?;
            scores.extend(batch_scores);
        }
        Ok(scores)
    }
}
