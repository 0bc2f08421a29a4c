//! Shared by the integration tests: a random-weight model, a sequence runner with its own
//! block tables, and model-file lookup.
#![allow(dead_code)]

pub mod engine_run;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use ferrite_cpu::CpuBackend;
use ferrite_engine::{Backend, ForwardOutput, LogitsRequest, SeqBatch};
use ferrite_model::config::{Arch, BlockVariant, ModelConfig, RopeStyle};
use ferrite_model::weights::{DType, ModelWeights, Storage, WeightTensor};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// Where the real models are (env `FERRITE_MODELS`, default `~/.cache/ferrite/models`); panics
/// with the fix when the file is missing, so a test never passes without its model.
pub fn model_path(file: &str) -> PathBuf {
    let dir = std::env::var_os("FERRITE_MODELS")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").expect("HOME is unset"))
                .join(".cache/ferrite/models")
        });
    let path = dir.join(file);
    assert!(
        path.exists(),
        "{} is missing: run scripts/fetch_models.sh (or set FERRITE_MODELS)",
        path.display()
    );
    path
}

pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

pub fn tiny_config(arch: Arch) -> ModelConfig {
    ModelConfig {
        arch,
        vocab_size: 97,
        hidden_size: 64,
        intermediate_size: 96,
        num_layers: 2,
        num_heads: 4,
        num_kv_heads: 2,
        head_dim: 16,
        rope_theta: 10000.0,
        rope_style: if arch == Arch::Qwen2 {
            RopeStyle::Halves
        } else {
            RopeStyle::Interleaved
        },
        rms_norm_eps: 1e-5,
        max_position_embeddings: 512,
        tie_word_embeddings: arch == Arch::Qwen2,
        qkv_bias: arch == Arch::Qwen2,
        block: BlockVariant::llama(16),
        rope_scaling: None,
        layer_attention: Vec::new(),
        moe: None,
        linear_attention: None,
    }
}

fn f16_fields(dtype: DType) -> &'static [usize] {
    match dtype {
        DType::Q4_0 | DType::Q5_0 | DType::Q8_0 => &[0],
        DType::Q4_1 | DType::Q5_1 | DType::Q4_K | DType::Q5_K => &[0, 2],
        DType::Q6_K => &[208],
        _ => &[],
    }
}

fn random_tensor(
    rng: &mut StdRng,
    dtype: DType,
    shape: Vec<usize>,
    scale: f32,
    offset: f32,
) -> WeightTensor {
    let cols = *shape.last().unwrap();
    let rows: usize = shape.iter().product::<usize>() / cols;
    let bytes: Vec<u8> = if dtype == DType::F32 {
        (0..rows * cols)
            .flat_map(|_| (offset + rng.random_range(-scale..scale)).to_le_bytes())
            .collect()
    } else if dtype == DType::F16 {
        (0..rows * cols)
            .flat_map(|_| {
                half::f16::from_f32(offset + rng.random_range(-scale..scale)).to_le_bytes()
            })
            .collect()
    } else {
        let mut bytes: Vec<u8> = (0..dtype.row_bytes(cols) * rows)
            .map(|_| rng.random())
            .collect();
        for block in bytes.chunks_exact_mut(dtype.block_bytes()) {
            for &off in f16_fields(dtype) {
                let s = half::f16::from_f32(rng.random_range(-scale..scale) / 8.0);
                block[off..off + 2].copy_from_slice(&s.to_le_bytes());
            }
        }
        bytes
    };
    WeightTensor {
        dtype,
        shape,
        storage: Storage::Owned(Arc::new(bytes)),
    }
}

/// Random weights for `config`, in a mix of quant types (real files mix them too).
pub fn tiny_weights(config: &ModelConfig, seed: u64) -> ModelWeights {
    let mut rng = StdRng::seed_from_u64(seed);
    let (h, hd, inter) = (
        config.hidden_size,
        config.head_dim,
        config.intermediate_size,
    );
    let (q, kv) = (config.num_heads * hd, config.num_kv_heads * hd);
    let mut w = ModelWeights::default();
    let mut put = |name: String, t: WeightTensor| {
        w.tensors.insert(name, t);
    };
    put(
        "token_embd.weight".into(),
        random_tensor(&mut rng, DType::Q8_0, vec![config.vocab_size, h], 2.0, 0.0),
    );
    if !config.tie_word_embeddings {
        put(
            "output.weight".into(),
            random_tensor(&mut rng, DType::Q4_0, vec![config.vocab_size, h], 1.0, 0.0),
        );
    }
    put(
        "output_norm.weight".into(),
        random_tensor(&mut rng, DType::F32, vec![h], 0.2, 1.0),
    );
    for i in 0..config.num_layers {
        let mut put = |part: &str, t| w.tensors.insert(format!("blk.{i}.{part}"), t);
        put(
            "attn_norm.weight",
            random_tensor(&mut rng, DType::F32, vec![h], 0.2, 1.0),
        );
        put(
            "ffn_norm.weight",
            random_tensor(&mut rng, DType::F32, vec![h], 0.2, 1.0),
        );
        put(
            "attn_q.weight",
            random_tensor(&mut rng, DType::Q4_1, vec![q, h], 1.0, 0.0),
        );
        put(
            "attn_k.weight",
            random_tensor(&mut rng, DType::Q5_0, vec![kv, h], 1.0, 0.0),
        );
        put(
            "attn_v.weight",
            random_tensor(&mut rng, DType::Q8_0, vec![kv, h], 1.0, 0.0),
        );
        put(
            "attn_output.weight",
            random_tensor(&mut rng, DType::Q4_0, vec![h, q], 1.0, 0.0),
        );
        put(
            "ffn_gate.weight",
            random_tensor(&mut rng, DType::Q4_1, vec![inter, h], 1.0, 0.0),
        );
        put(
            "ffn_up.weight",
            random_tensor(&mut rng, DType::F16, vec![inter, h], 0.1, 0.0),
        );
        put(
            "ffn_down.weight",
            random_tensor(&mut rng, DType::Q5_1, vec![h, inter], 1.0, 0.0),
        );
        if config.qkv_bias {
            put(
                "attn_q.bias",
                random_tensor(&mut rng, DType::F32, vec![q], 0.5, 0.0),
            );
            put(
                "attn_k.bias",
                random_tensor(&mut rng, DType::F32, vec![kv], 0.5, 0.0),
            );
            put(
                "attn_v.bias",
                random_tensor(&mut rng, DType::F32, vec![kv], 0.5, 0.0),
            );
        }
    }
    w
}

/// A recurrent-state slot for each of `n` sequences when the model keeps state (a hybrid
/// with linear-attention layers; the slots are allocated here), `None` for each otherwise.
pub fn state_slots(backend: &mut CpuBackend, n: usize) -> Vec<Option<u32>> {
    if backend.state_bytes_per_sequence() == 0 {
        return vec![None; n];
    }
    backend.init_state_slots(n).unwrap();
    (0..n as u32).map(Some).collect()
}

/// Logits of every position of every sequence, by (sequence, position).
pub type AllLogits = HashMap<(usize, usize), Vec<f32>>;

/// Runs `seqs` (full token lists) through `backend` following `schedule`: each step lists
/// (sequence, how many of its next tokens to run). Every sequence gets its own pages, spread
/// over the pool in an interleaved order so neighbours' pages alternate.
pub fn run_schedule(
    backend: &mut CpuBackend,
    page_size: usize,
    seqs: &[Vec<u32>],
    schedule: &[Vec<(usize, usize)>],
) -> AllLogits {
    let max_len = seqs.iter().map(Vec::len).max().unwrap_or(0);
    let pages_per_seq = max_len.div_ceil(page_size);
    backend
        .init_kv_cache(pages_per_seq * seqs.len(), page_size)
        .unwrap();
    let tables: Vec<Vec<u32>> = (0..seqs.len())
        .map(|s| {
            (0..pages_per_seq)
                .map(|p| (p * seqs.len() + (seqs.len() - 1 - s)) as u32)
                .collect()
        })
        .collect();
    let slots = state_slots(backend, seqs.len());
    let mut cursor = vec![0usize; seqs.len()];
    let mut out = AllLogits::new();
    for step in schedule {
        let batch: Vec<SeqBatch<'_>> = step
            .iter()
            .map(|&(s, len)| SeqBatch {
                tokens: &seqs[s][cursor[s]..cursor[s] + len],
                start_pos: cursor[s],
                block_table: &tables[s],
                window_table: &[],
                state_slot: slots[s],
                state_copy: Default::default(),
                logits: LogitsRequest::All,
            })
            .collect();
        let result = backend.forward(&batch).unwrap();
        let mut row = 0;
        for &(s, len) in step {
            for i in 0..len {
                // A NaN row would compare equal to itself bitwise and hide a broken model.
                assert!(
                    result.row(row).iter().all(|v| v.is_finite()),
                    "non-finite logits"
                );
                out.insert((s, cursor[s] + i), result.row(row).to_vec());
                row += 1;
            }
            cursor[s] += len;
        }
        assert_eq!(row, result.num_rows());
    }
    out
}

/// Each sequence alone, in chunks of `chunk` tokens.
pub fn chunked_schedule(seqs: &[Vec<u32>], chunk: usize) -> Vec<Vec<(usize, usize)>> {
    let mut steps = Vec::new();
    for (s, seq) in seqs.iter().enumerate() {
        let mut done = 0;
        while done < seq.len() {
            let len = chunk.min(seq.len() - done);
            steps.push(vec![(s, len)]);
            done += len;
        }
    }
    steps
}

/// All sequences together: each step, every unfinished sequence runs a random chunk (1 token
/// = a decode, more = a prefill chunk), so prefills and decodes of different lengths mix.
pub fn mixed_schedule(seqs: &[Vec<u32>], seed: u64) -> Vec<Vec<(usize, usize)>> {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut done = vec![0usize; seqs.len()];
    let mut steps = Vec::new();
    while done.iter().zip(seqs).any(|(d, s)| *d < s.len()) {
        let mut step = Vec::new();
        for (s, seq) in seqs.iter().enumerate() {
            if done[s] < seq.len() && rng.random_bool(0.8) {
                let len = [1, 1, 3, 9, 20][rng.random_range(0..5)].min(seq.len() - done[s]);
                step.push((s, len));
                done[s] += len;
            }
        }
        steps.push(step);
    }
    steps
}

pub fn assert_bitwise_equal(a: &AllLogits, b: &AllLogits, what: &str) {
    assert_eq!(a.len(), b.len(), "{what}: different numbers of logit rows");
    for (key, row) in a {
        let other = &b[key];
        let same = row
            .iter()
            .zip(other)
            .all(|(x, y)| x.to_bits() == y.to_bits());
        assert!(
            same,
            "{what}: logits of (sequence, position) {key:?} differ"
        );
    }
}

/// The first index of the largest logit.
pub fn argmax(row: &[f32]) -> u32 {
    let mut best = 0;
    for (i, &v) in row.iter().enumerate() {
        if v > row[best] {
            best = i;
        }
    }
    best as u32
}

/// One prefill, then decodes, greedily: the generated ids (pages of `page_size`, in reverse
/// order so that positions and page ids do not line up).
pub fn greedy(
    backend: &mut CpuBackend,
    prompt: &[u32],
    new_tokens: usize,
    page_size: usize,
) -> Vec<u32> {
    let pages = (prompt.len() + new_tokens).div_ceil(page_size);
    backend.init_kv_cache(pages, page_size).unwrap();
    let table: Vec<u32> = (0..pages as u32).rev().collect();
    let slot = state_slots(backend, 1)[0];
    let mut ids = Vec::with_capacity(new_tokens);
    let mut start = 0;
    let mut step: Vec<u32> = prompt.to_vec();
    while ids.len() < new_tokens {
        let batch = [SeqBatch {
            tokens: &step,
            start_pos: start,
            block_table: &table,
            window_table: &[],
            state_slot: slot,
            state_copy: Default::default(),
            logits: LogitsRequest::Last,
        }];
        let out = backend.forward(&batch).unwrap();
        let next = argmax(out.row(0));
        ids.push(next);
        start += step.len();
        step = vec![next];
    }
    ids
}

/// The token ids of a JSON array (a fixture's prompt or continuation).
pub fn ids(v: &serde_json::Value) -> Vec<u32> {
    let ids = v.as_array().expect("an id list");
    ids.iter().map(|x| x.as_u64().unwrap() as u32).collect()
}

/// Every position's logits of `tokens`, run as one step from position 0 on fresh pages (in
/// reverse order, so that positions and page ids do not line up) and a fresh state slot.
pub fn one_step_logits(
    backend: &mut CpuBackend,
    tokens: &[u32],
    page_size: usize,
) -> ForwardOutput {
    let pages = tokens.len().div_ceil(page_size);
    backend.init_kv_cache(pages, page_size).unwrap();
    let table: Vec<u32> = (0..pages as u32).rev().collect();
    let slot = state_slots(backend, 1)[0];
    backend
        .forward(&[SeqBatch {
            tokens,
            start_pos: 0,
            block_table: &table,
            window_table: &[],
            state_slot: slot,
            state_copy: Default::default(),
            logits: LogitsRequest::All,
        }])
        .unwrap()
}

/// log p(prompt[i] | prompt[..i]) for i >= 1: the whole prompt in one step
/// ([`one_step_logits`]).
pub fn prompt_logprobs(backend: &mut CpuBackend, prompt: &[u32], page_size: usize) -> Vec<f64> {
    let out = one_step_logits(backend, prompt, page_size);
    (1..prompt.len())
        .map(|i| log_softmax_at(out.row(i - 1), prompt[i]))
        .collect()
}

/// The floats of a JSON array (a fixture's margins or log-probabilities).
pub fn floats(v: &serde_json::Value) -> Vec<f64> {
    let values = v.as_array().expect("a number list");
    values.iter().map(|x| x.as_f64().unwrap()).collect()
}

/// log softmax(row)[token], in f64.
pub fn log_softmax_at(row: &[f32], token: u32) -> f64 {
    let max = row.iter().copied().fold(f32::NEG_INFINITY, f32::max) as f64;
    let sum: f64 = row.iter().map(|&v| (v as f64 - max).exp()).sum();
    row[token as usize] as f64 - max - sum.ln()
}
