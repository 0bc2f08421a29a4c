//! Random quantized weights of a model's real shapes: valid blocks of Q4_0, Q4_1, Q5_0,
//! Q8_0, Q4_K, Q5_K, Q6_K or FP8 (crate::fp8) with scales chosen so that weights come out at about `scale`,
//! each matrix in the type a scheme picks (llama.cpp's Q4_K_M mix, or one type throughout).
//! For measuring quantized kernels, and for parity tests where the CPU backend's dequantizer
//! (exact against the GGUF reference) is the oracle: both backends read the same bytes.

use std::sync::Arc;

use rayon::prelude::*;

use super::philox::philox4x32_10;
use crate::config::ModelConfig;
use crate::weights::{DType, ModelWeights, Storage, WeightTensor};

/// Random bytes from a counter-based generator (stream `key`), 16 per counter.
fn random_bytes(key: u64, first: u64, out: &mut [u8]) {
    for (i, chunk) in out.chunks_mut(16).enumerate() {
        let c = first + i as u64;
        let words = philox4x32_10(
            [c as u32, (c >> 32) as u32, 0, 0],
            [key as u32, (key >> 32) as u32],
        );
        let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
        chunk.copy_from_slice(&bytes[..chunk.len()]);
    }
}

/// One block of `dtype` with random quants and scales of about `scale` (its format's dummy
/// quantizer, crate::quant); `raw` is the block's random source (at least its size in bytes).
fn block(dtype: DType, scale: f32, raw: &[u8], out: &mut [u8]) {
    let Some(random_block) = crate::quant::format(dtype).random_block else {
        panic!("no random blocks for {dtype:?}");
    };
    // The block's own scale varies a little, as real ones do: 0.5x .. 1.5x.
    let s = scale * (0.5 + raw[0] as f32 / 255.0);
    let n = out.len();
    out.copy_from_slice(&raw[..n]);
    random_block(s, out);
}

/// `rows` x `cols` random blocks of `dtype`, drawn from stream `key`.
pub fn random_blocks(dtype: DType, rows: usize, cols: usize, scale: f32, key: u64) -> Vec<u8> {
    let (len, bytes) = (dtype.block_len(), dtype.block_bytes());
    let blocks = rows * cols / len;
    let mut out = vec![0u8; blocks * bytes];
    // 16 random bytes per counter; a block uses ceil(bytes / 16) counters.
    let per_block = bytes.div_ceil(16) as u64;
    out.par_chunks_mut(bytes * 1024)
        .enumerate()
        .for_each(|(c, chunk)| {
            let mut raw = vec![0u8; per_block as usize * 16];
            for (i, b) in chunk.chunks_mut(bytes).enumerate() {
                let index = (c * 1024 + i) as u64;
                random_bytes(key, index * per_block, &mut raw);
                block(dtype, scale, &raw, b);
            }
        });
    out
}

/// llama.cpp's choice of more bits for some layers' V and down projections in Q4_K_M: the
/// first and last eighth of the layers and every third one between.
fn more_bits(layer: usize, layers: usize) -> bool {
    layer < layers / 8
        || layer >= 7 * layers / 8
        || (layer >= layers / 8 && (layer - layers / 8) % 3 == 2)
}

/// The type a scheme gives a matrix: `q4_k_m` (Q4_K, Q6_K for the output and the V and down
/// projections of `more_bits` layers), or one type name (`q8_0`, `q6_k`, ..., `fp8`) throughout.
pub fn scheme_type(scheme: &str, name: &str, layers: usize) -> anyhow::Result<DType> {
    if scheme == "q4_k_m" {
        if name == "output.weight" {
            return Ok(DType::Q6_K);
        }
        let layer = name
            .strip_prefix("blk.")
            .and_then(|r| r.split('.').next())
            .and_then(|l| l.parse::<usize>().ok());
        // As llama-quantize: every down projection (dense, experts' and shared expert's).
        let wide = name.contains("attn_v.") || name.contains("ffn_down");
        return Ok(match layer {
            Some(l) if wide && more_bits(l, layers) => DType::Q6_K,
            _ => DType::Q4_K,
        });
    }
    // One format throughout: any with a dummy quantizer.
    crate::quant::from_name(scheme)
        .filter(|&dtype| crate::quant::format(dtype).random_block.is_some())
        .ok_or_else(|| anyhow::anyhow!("unknown quantization scheme `{scheme}`"))
}

/// A tensor of `shape` (a matrix, or an expert stack [experts, rows, cols] as experts x rows
/// rows) in random blocks of `dtype` with weights of about `scale`.
fn random_tensor(dtype: DType, shape: Vec<usize>, scale: f32, key: u64) -> WeightTensor {
    let (rows, cols) = match shape.split_last() {
        Some((&cols, outer)) => (outer.iter().product(), cols),
        None => (0, 0),
    };
    let bytes = random_blocks(dtype, rows, cols, scale, key);
    WeightTensor {
        dtype,
        shape,
        storage: Storage::Owned(Arc::new(bytes)),
    }
}

/// `weights` with every matrix (2-D tensor) and expert stack (3-D) replaced by random blocks of
/// `pick(name)`'s type (`None`: left as it is). Vectors (norms, biases) stay.
pub fn quantize_matrices(
    weights: &ModelWeights,
    pick: &dyn Fn(&str) -> Option<DType>,
    scale: f32,
    seed: u64,
) -> ModelWeights {
    let mut out = weights.clone();
    for (name, t) in &weights.tensors {
        let Some(dtype) = pick(name) else { continue };
        if !matches!(t.shape.len(), 2 | 3) {
            continue;
        }
        let key = super::tensor_key(seed, name);
        let tensor = random_tensor(dtype, t.shape.clone(), scale, key);
        out.tensors.insert(name.clone(), tensor);
    }
    out
}

/// Random quantized weights of `config`'s shapes in `scheme` (see [`scheme_type`]): norms from
/// the dummy generator, matrices and expert stacks as random blocks (but for `fp8` the
/// embedding and output projection, drawn in bf16 as an FP8 checkpoint keeps them).
pub fn random_quantized(
    config: &ModelConfig,
    scheme: &str,
    seed: u64,
) -> anyhow::Result<ModelWeights> {
    scheme_type(scheme, "blk.0.attn_q.weight", config.num_layers)?;
    let mut vectors = ModelWeights::default();
    let mut matrices = Vec::new();
    for init in super::tensor_inits(config, seed) {
        // FP8 checkpoints keep the embedding and the output projection in 16 bits.
        let stays_bf16 =
            scheme == "fp8" && matches!(&*init.name, "token_embd.weight" | "output.weight");
        // A matrix or expert stack whose rows are not whole blocks (a linear layer's 4-tap
        // convolution) stays in 16 bits, as llama-quantize leaves it.
        let cols = init.shape.last().copied().unwrap_or(0);
        let whole_blocks = matches!(init.shape.len(), 2 | 3)
            && scheme_type(scheme, &init.name, config.num_layers)
                .is_ok_and(|dtype| cols % dtype.block_len() == 0);
        if whole_blocks && !stays_bf16 {
            matrices.push((init.name.clone(), init.shape.clone()));
        } else {
            let mut bits = vec![0u16; init.len()];
            init.fill(&mut bits);
            let bytes: Vec<u8> = bits.iter().flat_map(|b| b.to_le_bytes()).collect();
            let tensor = WeightTensor {
                dtype: DType::BF16,
                shape: init.shape.clone(),
                storage: Storage::Owned(Arc::new(bytes)),
            };
            vectors.tensors.insert(init.name, tensor);
        }
    }
    for (name, shape) in matrices {
        let dtype = scheme_type(scheme, &name, config.num_layers)?;
        let key = super::tensor_key(seed, &name);
        let tensor = random_tensor(dtype, shape, super::MATRIX_SCALE, key);
        vectors.tensors.insert(name, tensor);
    }
    Ok(vectors)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dequant::dequantize_row;

    #[test]
    fn random_blocks_dequantize_to_finite_values_of_about_the_scale() {
        for dtype in [
            DType::Q4_0,
            DType::Q4_1,
            DType::Q5_0,
            DType::Q8_0,
            DType::Q4_K,
            DType::Q5_K,
            DType::Q6_K,
            DType::Fp8,
        ] {
            let bytes = random_blocks(dtype, 4, 512, 0.05, 7);
            assert_eq!(
                bytes,
                random_blocks(dtype, 4, 512, 0.05, 7),
                "{dtype:?} deterministic"
            );
            let mut f = vec![0.0f32; 4 * 512];
            dequantize_row(dtype, &bytes, &mut f);
            let rms = (f.iter().map(|v| v * v).sum::<f32>() / f.len() as f32).sqrt();
            assert!(f.iter().all(|v| v.is_finite()), "{dtype:?}");
            assert!((0.005..0.5).contains(&rms), "{dtype:?}: rms {rms}");
        }
    }

    #[test]
    fn q4_k_m_gives_more_bits_to_some_v_and_down_projections() {
        let t = |n: &str| scheme_type("q4_k_m", n, 28).unwrap();
        assert_eq!(t("blk.0.attn_v.weight"), DType::Q6_K);
        assert_eq!(t("blk.5.ffn_down.weight"), DType::Q6_K);
        assert_eq!(t("blk.4.attn_q.weight"), DType::Q4_K);
        assert_eq!(t("blk.4.ffn_down.weight"), DType::Q4_K);
        assert_eq!(t("output.weight"), DType::Q6_K);
        assert_eq!(t("token_embd.weight"), DType::Q4_K);
        assert!(scheme_type("q3_k_s", "x", 28).is_err());
    }

    #[test]
    fn q4_k_m_of_a_hybrid_keeps_the_convolution_in_16_bits() {
        // The fixture's config, widened so that its products are whole Q4_K blocks.
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../fixtures/arch/qwen3_5/config.json"
        );
        let mut json: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        let text = &mut json["text_config"];
        for (key, value) in [
            ("hidden_size", 256),
            ("intermediate_size", 256),
            ("linear_key_head_dim", 128),
            ("linear_value_head_dim", 128),
            ("linear_num_key_heads", 2),
            ("linear_num_value_heads", 2),
            ("head_dim", 64),
        ] {
            text[key] = value.into();
        }
        let config = crate::load::hf_config(&json.to_string()).unwrap();
        let weights = random_quantized(&config, "q4_k_m", 0).unwrap();
        let dtype = |name: &str| weights.tensors[name].dtype;
        let linear = (0..config.num_layers)
            .find(|&l| {
                weights
                    .tensors
                    .contains_key(&format!("blk.{l}.ssm_conv1d.weight"))
            })
            .expect("a linear-attention layer");
        assert_eq!(
            dtype(&format!("blk.{linear}.ssm_conv1d.weight")),
            DType::BF16
        );
        assert_eq!(dtype(&format!("blk.{linear}.ssm_out.weight")), DType::Q4_K);
        // Tied embeddings: the one matrix is the token embedding's.
        assert_eq!(dtype("token_embd.weight"), DType::Q4_K);
    }
}
