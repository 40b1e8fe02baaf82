//! BERT on the CPU: the encoder's weights and forward pass ([`Encoder`]),
//! and on it the sentence-transformer ([`Bert`]: WordPiece tokens, mean
//! pooling, normalisation; `rerank.rs` builds the cross-encoder on it too).
//! Built only with the `bert` feature. candle reads the weights; the
//! forward pass is our own: a few texts' token rows side by side through
//! the dense layers, each text attending only to its own rows (no padding,
//! no attention mask); query, key and value in one product, attention heads
//! read in place, biases and residuals folded into the products. That
//! doubled the speed of candle-transformers' `BertModel` here
//! (all-MiniLM-L6-v2 on two cores: 22 → 44–49 chunks/s), and the outputs
//! agree with it (`tests/bert.rs` compares them).

use candle_core::{DType, Device};
use candle_nn::VarBuilder;
use candle_transformers::models::bert::{Config, HiddenAct, PositionEmbeddingType};
use tokenizers::{Encoding, Tokenizer, TruncationParams};

use super::ModelError;
use super::kernels::{self, View, matmul};

/// A BERT sentence-transformer: the encoder's outputs mean pooled and
/// normalised.
pub(crate) struct Bert {
    tokenizer: Tokenizer,
    encoder: Encoder,
}

/// A BERT encoder's weights, without tokenizer or head.
pub(crate) struct Encoder {
    embeddings: Embeddings,
    layers: Vec<Layer>,
    hidden: usize,
    heads: usize,
    activation: HiddenAct,
    pub max_positions: usize,
}

struct Embeddings {
    words: Vec<f32>,
    positions: Vec<f32>,
    /// One row per token type (segment).
    token_types: Vec<f32>,
    norm: LayerNorm,
}

struct LayerNorm {
    weight: Vec<f32>,
    bias: Vec<f32>,
    eps: f32,
}

/// A dense layer, its weight transposed to `inputs × outputs` row-major so
/// that `x · weight` is a plain product.
pub(crate) struct Dense {
    weight: Vec<f32>,
    bias: Vec<f32>,
    inputs: usize,
    outputs: usize,
}

struct Layer {
    /// Query, key and value side by side: `hidden × 3·hidden`.
    qkv: Dense,
    attention_out: Dense,
    attention_norm: LayerNorm,
    intermediate: Dense,
    output: Dense,
    output_norm: LayerNorm,
}

fn error(context: &str) -> impl Fn(candle_core::Error) -> ModelError + '_ {
    move |err| ModelError::Invalid(format!("{context}: {err}"))
}

fn tensor(vb: &VarBuilder, shape: &[usize], name: &str) -> candle_core::Result<Vec<f32>> {
    vb.get(shape, name)?.flatten_all()?.to_vec1::<f32>()
}

impl LayerNorm {
    fn load(vb: VarBuilder, width: usize, eps: f64) -> candle_core::Result<LayerNorm> {
        Ok(LayerNorm {
            weight: tensor(&vb, &[width], "weight")?,
            bias: tensor(&vb, &[width], "bias")?,
            eps: eps as f32,
        })
    }

    #[inline(always)]
    fn apply(&self, rows: &mut [f32]) {
        kernels::layer_norm_rows(rows, &self.weight, &self.bias, self.eps);
    }
}

impl Dense {
    pub(crate) fn load(
        vb: VarBuilder,
        inputs: usize,
        outputs: usize,
    ) -> candle_core::Result<Dense> {
        let weight = tensor(&vb, &[outputs, inputs], "weight")?;
        let mut transposed = vec![0f32; weight.len()];
        for (o, row) in weight.chunks_exact(inputs).enumerate() {
            for (i, w) in row.iter().enumerate() {
                transposed[i * outputs + o] = *w;
            }
        }
        Ok(Dense {
            weight: transposed,
            bias: tensor(&vb, &[outputs], "bias")?,
            inputs,
            outputs,
        })
    }

    /// The layers' outputs side by side, as one layer.
    fn side_by_side(parts: &[Dense]) -> Dense {
        let inputs = parts[0].inputs;
        let outputs = parts.iter().map(|p| p.outputs).sum();
        let mut weight = Vec::with_capacity(inputs * outputs);
        for i in 0..inputs {
            for part in parts {
                weight.extend_from_slice(&part.weight[i * part.outputs..(i + 1) * part.outputs]);
            }
        }
        Dense {
            weight,
            bias: parts.iter().flat_map(|p| p.bias.iter().copied()).collect(),
            inputs,
            outputs,
        }
    }

    /// `dst = x · weight + bias (+ dst's rows when `residual`)` for `rows`
    /// rows of `x`; `dst` holds the residual on entry when there is one.
    #[inline(always)]
    pub(crate) fn apply(&self, x: &[f32], rows: usize, dst: &mut [f32], residual: bool) {
        let dst = &mut dst[..rows * self.outputs];
        for row in dst.chunks_exact_mut(self.outputs) {
            if residual {
                for (d, b) in row.iter_mut().zip(&self.bias) {
                    *d += b;
                }
            } else {
                row.copy_from_slice(&self.bias);
            }
        }
        matmul(
            (rows, self.outputs, self.inputs),
            dst,
            self.outputs,
            true,
            View::rows(x, self.inputs),
            View::rows(&self.weight, self.outputs),
            1.0,
        );
    }
}

impl Layer {
    fn load(vb: VarBuilder, config: &Config) -> candle_core::Result<Layer> {
        let (h, eps) = (config.hidden_size, config.layer_norm_eps);
        let attention = vb.pp("attention");
        let projections = ["query", "key", "value"]
            .map(|name| Dense::load(attention.pp("self").pp(name), h, h))
            .into_iter()
            .collect::<candle_core::Result<Vec<_>>>()?;
        Ok(Layer {
            qkv: Dense::side_by_side(&projections),
            attention_out: Dense::load(attention.pp("output").pp("dense"), h, h)?,
            attention_norm: LayerNorm::load(attention.pp("output").pp("LayerNorm"), h, eps)?,
            intermediate: Dense::load(
                vb.pp("intermediate").pp("dense"),
                h,
                config.intermediate_size,
            )?,
            output: Dense::load(vb.pp("output").pp("dense"), config.intermediate_size, h)?,
            output_norm: LayerNorm::load(vb.pp("output").pp("LayerNorm"), h, eps)?,
        })
    }
}

fn load_weights(vb: VarBuilder, config: &Config) -> candle_core::Result<(Embeddings, Vec<Layer>)> {
    let h = config.hidden_size;
    let e = vb.pp("embeddings");
    let embeddings = Embeddings {
        words: tensor(&e, &[config.vocab_size, h], "word_embeddings.weight")?,
        positions: tensor(
            &e,
            &[config.max_position_embeddings, h],
            "position_embeddings.weight",
        )?,
        token_types: tensor(
            &e,
            &[config.type_vocab_size, h],
            "token_type_embeddings.weight",
        )?,
        norm: LayerNorm::load(e.pp("LayerNorm"), h, config.layer_norm_eps)?,
    };
    let layers = (0..config.num_hidden_layers)
        .map(|i| Layer::load(vb.pp(format!("encoder.layer.{i}")), config))
        .collect::<candle_core::Result<Vec<_>>>()?;
    Ok((embeddings, layers))
}

impl Encoder {
    /// Reads the encoder from `vb`, where checkpoints store it at the root
    /// or under the model type.
    pub(crate) fn load(vb: VarBuilder, config: &Config) -> Result<Encoder, ModelError> {
        let invalid = ModelError::Invalid;
        if config.position_embedding_type != PositionEmbeddingType::Absolute {
            return Err(invalid(
                "config.json: only absolute position embeddings are supported".into(),
            ));
        }
        if config.num_attention_heads == 0
            || !config
                .hidden_size
                .is_multiple_of(config.num_attention_heads)
            || config.type_vocab_size == 0
        {
            return Err(invalid(
                "config.json: the hidden size does not split into the heads".into(),
            ));
        }
        let (embeddings, layers) = match load_weights(vb.clone(), config) {
            Ok(weights) => weights,
            Err(err) => match &config.model_type {
                Some(prefix) => load_weights(vb.pp(prefix), config)
                    .map_err(|_| invalid(format!("the BERT weights: {err}")))?,
                None => return Err(invalid(format!("the BERT weights: {err}"))),
            },
        };
        Ok(Encoder {
            embeddings,
            layers,
            hidden: config.hidden_size,
            heads: config.num_attention_heads,
            activation: config.hidden_act,
            max_positions: config.max_position_embeddings,
        })
    }

    pub(crate) fn hidden(&self) -> usize {
        self.hidden
    }

    /// The token ids and token types of `encoding`, checked against the
    /// vocabulary and the type table.
    pub(crate) fn inputs(
        &self,
        encoding: &Encoding,
    ) -> Result<(Vec<usize>, Vec<usize>), ModelError> {
        let vocabulary = self.embeddings.words.len() / self.hidden;
        let types = self.embeddings.token_types.len() / self.hidden;
        let ids: Vec<usize> = encoding.get_ids().iter().map(|&id| id as usize).collect();
        let kinds: Vec<usize> = encoding
            .get_type_ids()
            .iter()
            .map(|&t| t as usize)
            .collect();
        if let Some(id) = ids.iter().find(|&&id| id >= vocabulary) {
            return Err(ModelError::Run(format!(
                "the encoder: token id {id} is outside the vocabulary"
            )));
        }
        if let Some(kind) = kinds.iter().find(|&&kind| kind >= types) {
            return Err(ModelError::Run(format!(
                "the encoder: token type {kind} is not in the model"
            )));
        }
        Ok((ids, kinds))
    }

    /// The last layer's output rows (`hidden` wide) for texts whose token
    /// ids and types lie one after another in `ids` and `types`, `lengths`
    /// long.
    pub(crate) fn forward(&self, ids: &[usize], types: &[usize], lengths: &[usize]) -> Vec<f32> {
        #[cfg(target_arch = "x86_64")]
        if std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma") {
            // SAFETY: both target features were detected on this CPU.
            return unsafe { self.forward_avx2(ids, types, lengths) };
        }
        self.forward_rows(ids, types, lengths)
    }

    /// [`Encoder::forward_rows`] compiled for AVX2 and FMA: the elementwise
    /// steps are inlined into it and vectorised eight wide.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,fma")]
    fn forward_avx2(&self, ids: &[usize], types: &[usize], lengths: &[usize]) -> Vec<f32> {
        self.forward_rows(ids, types, lengths)
    }

    /// The forward pass itself (see [`Encoder::forward`]).
    #[inline(always)]
    fn forward_rows(&self, ids: &[usize], types: &[usize], lengths: &[usize]) -> Vec<f32> {
        let (n, h) = (ids.len(), self.hidden);
        let head = h / self.heads;
        let inner = self.layers.first().map_or(0, |l| l.intermediate.outputs);
        let e = &self.embeddings;
        let mut x = vec![0f32; n * h];
        let mut rows = x.chunks_exact_mut(h).zip(ids.iter().zip(types));
        for &length in lengths {
            for ((row, (&id, &kind)), position) in
                rows.by_ref().take(length).zip(e.positions.chunks_exact(h))
            {
                let word = &e.words[id * h..(id + 1) * h];
                let kind = &e.token_types[kind * h..(kind + 1) * h];
                for (((x, w), p), t) in row.iter_mut().zip(word).zip(position).zip(kind) {
                    *x = w + p + t;
                }
            }
        }
        e.norm.apply(&mut x);

        let longest = lengths.iter().copied().max().unwrap_or(0);
        let mut qkv = vec![0f32; n * 3 * h];
        let mut scores = vec![0f32; longest * longest];
        let mut context = vec![0f32; n * h];
        let mut inner_rows = vec![0f32; n * inner];
        let scale = 1.0 / (head as f32).sqrt();
        for layer in &self.layers {
            layer.qkv.apply(&x, n, &mut qkv, false);
            let mut offset = 0;
            for &length in lengths {
                let qkv = &qkv[offset * 3 * h..];
                let scores = &mut scores[..length * length];
                for start in (0..h).step_by(head) {
                    let query = View::rows(&qkv[start..], 3 * h);
                    let key = View::transposed(&qkv[h + start..], 3 * h);
                    matmul(
                        (length, length, head),
                        scores,
                        length,
                        false,
                        query,
                        key,
                        scale,
                    );
                    kernels::softmax_rows(scores, length);
                    let value = View::rows(&qkv[2 * h + start..], 3 * h);
                    let weights = View::rows(scores, length);
                    matmul(
                        (length, head, length),
                        &mut context[offset * h + start..],
                        h,
                        false,
                        weights,
                        value,
                        1.0,
                    );
                }
                offset += length;
            }
            // `x` holds the residual for the attention output ...
            layer.attention_out.apply(&context, n, &mut x, true);
            layer.attention_norm.apply(&mut x);
            layer.intermediate.apply(&x, n, &mut inner_rows, false);
            match self.activation {
                HiddenAct::Gelu => kernels::gelu(&mut inner_rows),
                HiddenAct::GeluApproximate => kernels::gelu_tanh(&mut inner_rows),
                HiddenAct::Relu => kernels::relu(&mut inner_rows),
            }
            // ... and, through `context`, for the feed-forward output.
            context.copy_from_slice(&x);
            layer.output.apply(&inner_rows, n, &mut context, true);
            std::mem::swap(&mut x, &mut context);
            layer.output_norm.apply(&mut x);
        }

        x
    }
}

impl Bert {
    pub(crate) fn load(
        config_json: &[u8],
        safetensors: Vec<u8>,
        tokenizer_json: &[u8],
        max_tokens: usize,
    ) -> Result<Bert, ModelError> {
        let config: Config = serde_json::from_slice(config_json)
            .map_err(|err| ModelError::Invalid(format!("config.json: {err}")))?;
        let vb = VarBuilder::from_buffered_safetensors(safetensors, DType::F32, &Device::Cpu)
            .map_err(error("model.safetensors"))?;
        let encoder = Encoder::load(vb, &config)?;
        let tokenizer = tokenizer(tokenizer_json, max_tokens.min(encoder.max_positions))
            .map_err(|err| err.in_source("tokenizer.json"))?;
        Ok(Bert { tokenizer, encoder })
    }

    pub(crate) fn dims(&self) -> usize {
        self.encoder.hidden
    }

    /// The normalised mean-pooled embedding of `text`.
    pub(crate) fn embed(&self, text: &str) -> Result<Vec<f32>, ModelError> {
        self.embed_many(&[text]).pop().expect("one result per text")
    }

    /// The embeddings of `texts`, in order, each the normalised mean of its
    /// tokens' outputs (or why it could not be embedded). The texts run
    /// through the encoder together (see [`Encoder::forward`]).
    pub(crate) fn embed_many(&self, texts: &[&str]) -> Vec<Result<Vec<f32>, ModelError>> {
        let mut results = Vec::with_capacity(texts.len());
        let (mut ids, mut types, mut lengths) = (Vec::new(), Vec::new(), Vec::new());
        for text in texts {
            let inputs = self
                .tokenizer
                .encode(*text, true)
                .map_err(|err| ModelError::Run(format!("tokenizing: {err}")))
                .and_then(|encoding| self.encoder.inputs(&encoding));
            match inputs {
                Ok((text_ids, text_types)) => {
                    lengths.push(text_ids.len());
                    ids.extend(text_ids);
                    types.extend(text_types);
                    results.push(Ok(Vec::new()));
                }
                Err(err) => results.push(Err(err)),
            }
        }
        let h = self.encoder.hidden;
        let outputs = self.encoder.forward(&ids, &types, &lengths);
        let mut rows = outputs.chunks_exact(h);
        for (result, &length) in results.iter_mut().filter(|r| r.is_ok()).zip(&lengths) {
            let mut pooled = vec![0f32; h];
            for row in rows.by_ref().take(length) {
                for (m, v) in pooled.iter_mut().zip(row) {
                    *m += v;
                }
            }
            let norm = pooled.iter().map(|v| v * v).sum::<f32>().sqrt().max(1e-12);
            for m in &mut pooled {
                *m /= norm;
            }
            *result = Ok(pooled);
        }
        results
    }
}

/// A tokenizer from `tokenizer.json` that cuts inputs at `max_tokens` and
/// never pads (a model's own file may pad to a fixed length).
pub(crate) fn tokenizer(json: &[u8], max_tokens: usize) -> Result<Tokenizer, ModelError> {
    let invalid = |err: tokenizers::Error| ModelError::Invalid(err.to_string());
    let mut tokenizer = Tokenizer::from_bytes(json).map_err(invalid)?;
    tokenizer
        .with_truncation(Some(TruncationParams {
            max_length: max_tokens,
            ..Default::default()
        }))
        .map_err(invalid)?;
    tokenizer.with_padding(None);
    Ok(tokenizer)
}
