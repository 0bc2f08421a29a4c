//! The model's weights on the device, in one allocation: matrices in bf16 (GGUF quantized
//! types dequantized at load, BF16 stored as is), norm weights and biases in f32. Q/K/V are
//! concatenated into one matrix and gate/up into another, so each becomes one GEMM. Norm
//! weights get the config's `norm_weight_offset` added at load (gemma's `x * (1 + w)`), and
//! each layer gets its RoPE frequencies (`ModelConfig::rope_inv_freq`).
//! `--load-format dummy` draws the weights directly on the device with the same formula as the
//! host generator (ferrite_model::dummy), without materialising them on the host.

use std::sync::Arc;

use cudarc::driver::CudaStream;
use ferrite_model::config::ModelConfig;
use ferrite_model::dequant::dequantize_row;
use ferrite_model::dummy::tensor_inits;
use ferrite_model::weights::{self as host, DType, WeightTensor};
use half::bf16;

use crate::buffer::{upload, DeviceBuffer, Layout};
use crate::device_ptr::DevicePtr;
use crate::kernels::{DummyFormat, Kernels};

/// Where a backend's weights come from.
pub enum WeightSource {
    /// Loaded on the host (GGUF or safetensors), any dtype the dequantizer knows.
    Host(host::ModelWeights),
    /// `--load-format dummy` with this seed, drawn on the device.
    Dummy { seed: u64 },
}

/// Device addresses of one layer's tensors.
#[derive(Debug, Clone, Copy)]
pub struct LayerWeights {
    pub attn_norm: DevicePtr,
    /// [q_dim + 2 kv_dim, hidden]: Q rows, then K, then V.
    pub wqkv: DevicePtr,
    /// [q_dim + 2 kv_dim] f32; `None` without QKV bias.
    pub bqkv: Option<DevicePtr>,
    pub wo: DevicePtr,
    pub ffn_norm: DevicePtr,
    /// [2 inter, hidden]: gate rows, then up rows.
    pub w_gate_up: DevicePtr,
    pub w_down: DevicePtr,
    /// Per-head RMSNorm weights of Q and K, f32 [head_dim] each (`BlockVariant::qk_norm`).
    pub qk_norm: Option<QkNormWeights>,
    /// Norms of the attention and MLP outputs, f32 [hidden] each (`BlockVariant::post_norms`).
    pub post_norms: Option<PostNormWeights>,
    /// This layer's RoPE inverse frequencies, f32 [head_dim / 2].
    pub inv_freq: DevicePtr,
}

#[derive(Debug, Clone, Copy)]
pub struct QkNormWeights {
    pub q: DevicePtr,
    pub k: DevicePtr,
}

#[derive(Debug, Clone, Copy)]
pub struct PostNormWeights {
    pub attention: DevicePtr,
    pub mlp: DevicePtr,
}

/// The model's weights on the device (the CPU backend's counterpart has the same name).
pub struct ModelWeights {
    arena: DeviceBuffer,
    pub embed: DevicePtr,
    pub layers: Vec<LayerWeights>,
    pub output_norm: DevicePtr,
    /// The embedding when tied.
    pub lm_head: DevicePtr,
}

/// Where each canonical tensor goes: offset in the arena, and whether it is stored as f32.
struct Placement {
    offset: usize,
    f32: bool,
}

fn placements(c: &ModelConfig) -> (Layout, Vec<(String, Placement)>) {
    let (hidden, inter, hd) = (c.hidden_size, c.intermediate_size, c.head_dim);
    let (q_dim, kv_dim) = (c.num_heads * hd, c.num_kv_heads * hd);
    let mut layout = Layout::new();
    let mut out = Vec::new();
    let mut put = |layout: &mut Layout, name: String, elems: usize, f32: bool| {
        let offset = layout.take(elems * if f32 { 4 } else { 2 });
        out.push((name, Placement { offset, f32 }));
    };
    put(
        &mut layout,
        "token_embd.weight".into(),
        c.vocab_size * hidden,
        false,
    );
    for l in 0..c.num_layers {
        let n = |p: &str| format!("blk.{l}.{p}");
        put(&mut layout, n("attn_norm.weight"), hidden, true);
        if c.block.qk_norm {
            put(&mut layout, n("attn_q_norm.weight"), hd, true);
            put(&mut layout, n("attn_k_norm.weight"), hd, true);
        }
        if c.block.post_norms {
            put(&mut layout, n("post_attention_norm.weight"), hidden, true);
            put(&mut layout, n("post_ffw_norm.weight"), hidden, true);
        }
        put(&mut layout, n("rope_inv_freq"), hd / 2, true);
        // One region for Q, K, V (and one for their biases), filled part by part below.
        put(
            &mut layout,
            n("attn_qkv"),
            (q_dim + 2 * kv_dim) * hidden,
            false,
        );
        if c.qkv_bias {
            put(&mut layout, n("attn_qkv_bias"), q_dim + 2 * kv_dim, true);
        }
        put(&mut layout, n("attn_output.weight"), hidden * q_dim, false);
        put(&mut layout, n("ffn_norm.weight"), hidden, true);
        put(&mut layout, n("ffn_gate_up"), 2 * inter * hidden, false);
        put(&mut layout, n("ffn_down.weight"), hidden * inter, false);
    }
    put(&mut layout, "output_norm.weight".into(), hidden, true);
    if !c.tie_word_embeddings {
        put(
            &mut layout,
            "output.weight".into(),
            c.vocab_size * hidden,
            false,
        );
    }
    (layout, out)
}

/// (region, byte offset inside it) of a canonical tensor name: Q/K/V and gate/up land inside
/// their fused regions.
fn region_of(c: &ModelConfig, name: &str) -> (String, usize, bool) {
    let hd = c.head_dim;
    let (q_dim, kv_dim) = (c.num_heads * hd, c.num_kv_heads * hd);
    let (hidden, inter) = (c.hidden_size, c.intermediate_size);
    if let Some(rest) = name.strip_prefix("blk.") {
        let (layer, part) = rest.split_once('.').unwrap_or((rest, ""));
        let fused =
            |region: &str, offset: usize, f32| (format!("blk.{layer}.{region}"), offset, f32);
        match part {
            "attn_q.weight" => return fused("attn_qkv", 0, false),
            "attn_k.weight" => return fused("attn_qkv", q_dim * hidden * 2, false),
            "attn_v.weight" => return fused("attn_qkv", (q_dim + kv_dim) * hidden * 2, false),
            "attn_q.bias" => return fused("attn_qkv_bias", 0, true),
            "attn_k.bias" => return fused("attn_qkv_bias", q_dim * 4, true),
            "attn_v.bias" => return fused("attn_qkv_bias", (q_dim + kv_dim) * 4, true),
            "ffn_gate.weight" => return fused("ffn_gate_up", 0, false),
            "ffn_up.weight" => return fused("ffn_gate_up", inter * hidden * 2, false),
            _ => {}
        }
    }
    (name.to_string(), 0, false)
}

/// What loading adds to a tensor stored in f32: the norm weight offset to norm weights
/// (gemma's `1 + w`, folded so that the kernels compute `x * w` for every family).
fn shift_of(c: &ModelConfig, name: &str) -> f32 {
    if name.ends_with("norm.weight") {
        c.block.norm_weight_offset
    } else {
        0.0
    }
}

impl ModelWeights {
    pub fn load(
        stream: &Arc<CudaStream>,
        kernels: &Kernels,
        config: &ModelConfig,
        source: &WeightSource,
    ) -> anyhow::Result<ModelWeights> {
        let (layout, places) = placements(config);
        let arena = DeviceBuffer::new(stream, layout.bytes())?;
        let offset_of = |region: &str| -> anyhow::Result<&Placement> {
            places
                .iter()
                .find(|(n, _)| n == region)
                .map(|(_, p)| p)
                .ok_or_else(|| anyhow::anyhow!("no place for `{region}`"))
        };
        let seed = match source {
            WeightSource::Dummy { seed } => *seed,
            WeightSource::Host(_) => 0, // only the names and shapes are used
        };
        for init in tensor_inits(config, seed) {
            let (region, inner, as_f32) = region_of(config, &init.name);
            let place = offset_of(&region)?;
            let as_f32 = as_f32 || place.f32;
            let shift = shift_of(config, &init.name);
            let dst = arena.at(place.offset + inner);
            match source {
                WeightSource::Dummy { .. } => {
                    let format = if as_f32 {
                        DummyFormat::F32 { shift }
                    } else {
                        DummyFormat::Bf16
                    };
                    kernels.dummy_fill(
                        dst,
                        init.len(),
                        init.key,
                        init.scale,
                        init.offset,
                        format,
                    )?;
                }
                WeightSource::Host(weights) => {
                    let tensor = weights.get(&init.name)?;
                    check_shape(&init.name, tensor, &init.shape)?;
                    upload_tensor(stream, dst, tensor, as_f32, shift)?;
                }
            }
        }
        for l in 0..config.num_layers {
            let place = offset_of(&format!("blk.{l}.rope_inv_freq"))?;
            upload(stream, arena.at(place.offset), &config.rope_inv_freq(l))?;
        }
        stream.synchronize()?;

        let at =
            |region: &str| -> anyhow::Result<DevicePtr> { Ok(arena.at(offset_of(region)?.offset)) };
        let mut layers = Vec::with_capacity(config.num_layers);
        for l in 0..config.num_layers {
            let n = |p: &str| format!("blk.{l}.{p}");
            layers.push(LayerWeights {
                attn_norm: at(&n("attn_norm.weight"))?,
                wqkv: at(&n("attn_qkv"))?,
                bqkv: if config.qkv_bias {
                    Some(at(&n("attn_qkv_bias"))?)
                } else {
                    None
                },
                wo: at(&n("attn_output.weight"))?,
                ffn_norm: at(&n("ffn_norm.weight"))?,
                w_gate_up: at(&n("ffn_gate_up"))?,
                w_down: at(&n("ffn_down.weight"))?,
                qk_norm: if config.block.qk_norm {
                    Some(QkNormWeights {
                        q: at(&n("attn_q_norm.weight"))?,
                        k: at(&n("attn_k_norm.weight"))?,
                    })
                } else {
                    None
                },
                post_norms: if config.block.post_norms {
                    Some(PostNormWeights {
                        attention: at(&n("post_attention_norm.weight"))?,
                        mlp: at(&n("post_ffw_norm.weight"))?,
                    })
                } else {
                    None
                },
                inv_freq: at(&n("rope_inv_freq"))?,
            });
        }
        let embed = at("token_embd.weight")?;
        Ok(ModelWeights {
            embed,
            layers,
            output_norm: at("output_norm.weight")?,
            lm_head: if config.tie_word_embeddings {
                embed
            } else {
                at("output.weight")?
            },
            arena,
        })
    }

    pub fn bytes(&self) -> usize {
        self.arena.bytes()
    }
}

fn check_shape(name: &str, tensor: &WeightTensor, shape: &[usize]) -> anyhow::Result<()> {
    let numel: usize = tensor.shape.iter().product();
    let want: usize = shape.iter().product();
    let rows_ok = shape.len() == 1 || tensor.rows() == shape[0];
    if numel != want || !rows_ok {
        anyhow::bail!(
            "`{name}` has shape {:?}, the config says {shape:?}",
            tensor.shape
        );
    }
    Ok(())
}

/// Converts `tensor` to bf16 (or f32, plus `shift`) on the host and uploads it.
fn upload_tensor(
    stream: &CudaStream,
    dst: DevicePtr,
    tensor: &WeightTensor,
    as_f32: bool,
    shift: f32,
) -> anyhow::Result<()> {
    if tensor.dtype == DType::BF16 && !as_f32 {
        return upload(stream, dst, tensor.storage.bytes());
    }
    let (rows, cols) = (tensor.rows(), tensor.cols());
    let row_bytes = tensor.dtype.row_bytes(cols);
    let bytes = tensor.storage.bytes();
    if !as_f32 {
        return upload_widened(stream, dst, tensor.dtype, bytes, rows, cols, row_bytes);
    }
    // f32 tensors are vectors (norms, biases): small, converted in one go.
    let mut f = vec![0.0f32; rows * cols];
    dequantize_row(tensor.dtype, &bytes[..rows * row_bytes], &mut f);
    if shift != 0.0 {
        f.iter_mut().for_each(|v| *v += shift);
    }
    upload(stream, dst, &f)?;
    stream.synchronize()?;
    Ok(())
}

/// A matrix in any dtype the dequantizer knows, converted to bf16 on every core a group of row
/// slabs at a time (one thread per slab) and uploaded group by group: an 8B F16 GGUF loads in
/// seconds rather than the half minute one thread takes.
fn upload_widened(
    stream: &CudaStream,
    dst: DevicePtr,
    dtype: DType,
    bytes: &[u8],
    rows: usize,
    cols: usize,
    row_bytes: usize,
) -> anyhow::Result<()> {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let slab_rows = ((4 << 20) / cols.max(1)).max(1);
    let group_rows = slab_rows * threads;
    let mut group = vec![bf16::ZERO; group_rows.min(rows) * cols];
    let mut row = 0;
    while row < rows {
        let n = group_rows.min(rows - row);
        let out = &mut group[..n * cols];
        std::thread::scope(|scope| {
            for (k, slab) in out.chunks_mut(slab_rows * cols).enumerate() {
                let first = row + k * slab_rows;
                let src = &bytes[first * row_bytes..(first + slab.len() / cols) * row_bytes];
                scope.spawn(move || {
                    let mut f = vec![0.0f32; slab.len()];
                    dequantize_row(dtype, src, &mut f);
                    for (d, &v) in slab.iter_mut().zip(&f) {
                        *d = bf16::from_f32(v);
                    }
                });
            }
        });
        upload(stream, dst.offset(row * cols * 2), out)?;
        // Pageable copies are staged before returning, but keep the group alive until done.
        stream.synchronize()?;
        row += n;
    }
    Ok(())
}
