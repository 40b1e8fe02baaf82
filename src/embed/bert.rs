//! BERT sentence-transformers (e.g. all-MiniLM-L6-v2) through candle, on
//! the CPU: WordPiece tokens, the encoder, mean pooling over the attention
//! mask, then normalisation. Built only with the `bert` feature.

use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use candle_transformers::models::bert::{BertModel, Config};
use tokenizers::{PaddingParams, PaddingStrategy, Tokenizer, TruncationParams};

/// Texts are embedded one at a time, one per core: measured on two cores,
/// padded batches were slower (8 chunks/s) than single texts (13/s), and
/// single texts on both cores at once are twice as fast (26/s).
const BATCH: usize = 1;

pub struct Bert {
    model: BertModel,
    tokenizer: Tokenizer,
    dims: usize,
    device: Device,
}

fn error(context: &str) -> impl Fn(candle_core::Error) -> String + '_ {
    move |err| format!("{context}: {err}")
}

impl Bert {
    pub fn load(
        config_json: &[u8],
        safetensors: Vec<u8>,
        tokenizer_json: &[u8],
        max_tokens: usize,
    ) -> Result<Bert, String> {
        let config: Config =
            serde_json::from_slice(config_json).map_err(|err| format!("config.json: {err}"))?;
        let device = Device::Cpu;
        let vb = VarBuilder::from_buffered_safetensors(safetensors, DType::F32, &device)
            .map_err(error("model.safetensors"))?;
        let model = BertModel::load(vb, &config).map_err(error("the BERT weights"))?;
        let mut tokenizer = Tokenizer::from_bytes(tokenizer_json)
            .map_err(|err| format!("tokenizer.json: {err}"))?;
        tokenizer
            .with_truncation(Some(TruncationParams {
                max_length: max_tokens,
                ..Default::default()
            }))
            .map_err(|err| format!("tokenizer.json: {err}"))?;
        tokenizer.with_padding(Some(PaddingParams {
            strategy: PaddingStrategy::BatchLongest,
            pad_id: config.pad_token_id as u32,
            ..Default::default()
        }));
        Ok(Bert {
            model,
            tokenizer,
            dims: config.hidden_size,
            device,
        })
    }

    pub fn dims(&self) -> usize {
        self.dims
    }

    /// Normalised mean-pooled embeddings of `texts`, in order.
    pub fn embed_all(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, String> {
        use rayon::prelude::*;
        texts
            .par_chunks(BATCH)
            .map(|batch| self.embed_batch(batch))
            .collect::<Result<Vec<_>, _>>()
            .map(|batches| batches.into_iter().flatten().collect())
    }

    fn embed_batch(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, String> {
        let encodings = self
            .tokenizer
            .encode_batch(texts.to_vec(), true)
            .map_err(|err| format!("tokenizing: {err}"))?;
        let rows = |f: &dyn Fn(&tokenizers::Encoding) -> &[u32]| -> Result<Tensor, String> {
            let tensors = encodings
                .iter()
                .map(|e| Tensor::new(f(e), &self.device))
                .collect::<Result<Vec<_>, _>>()
                .map_err(error("input"))?;
            Tensor::stack(&tensors, 0).map_err(error("input"))
        };
        let ids = rows(&|e| e.get_ids())?;
        let mask = rows(&|e| e.get_attention_mask())?;
        let types = ids.zeros_like().map_err(error("input"))?;
        let pooled = (|| -> candle_core::Result<Vec<Vec<f32>>> {
            let hidden = self.model.forward(&ids, &types, Some(&mask))?;
            let mask = mask.to_dtype(DType::F32)?.unsqueeze(2)?;
            let summed = hidden.broadcast_mul(&mask)?.sum(1)?;
            let mean = summed.broadcast_div(&mask.sum(1)?)?;
            let norm = mean.sqr()?.sum_keepdim(1)?.sqrt()?.clamp(1e-12, f32::MAX)?;
            mean.broadcast_div(&norm)?.to_vec2::<f32>()
        })();
        pooled.map_err(error("the encoder"))
    }
}
