//! Typed launch wrappers for the kernels of kernels/*.cu: one method per kernel, taking device
//! addresses and sizes, computing the launch shape, enqueuing on the backend's stream.
//! Arguments are packed into a fixed array (no allocation per launch).

use std::collections::HashMap;
use std::ffi::c_void;
use std::sync::Arc;

use cudarc::driver::{sys, sys::CUfunction, CudaFunction, CudaModule, CudaStream};

use crate::kernel_sources::MODULES;
use crate::module_loader;

/// Up to 16 kernel arguments, each stored in an 8-byte slot (the driver reads each parameter's
/// own size from the front of its slot: little-endian, so narrower values sit there).
struct Args {
    slots: [u64; 16],
    len: usize,
}

impl Args {
    fn new() -> Self {
        Args {
            slots: [0; 16],
            len: 0,
        }
    }
    fn push(mut self, bits: u64) -> Self {
        self.slots[self.len] = bits;
        self.len += 1;
        self
    }
    fn ptr(self, p: u64) -> Self {
        self.push(p)
    }
    fn i32(self, v: i32) -> Self {
        self.push(v as u32 as u64)
    }
    fn usize(self, v: usize) -> Self {
        self.i32(v as i32)
    }
    fn f32(self, v: f32) -> Self {
        self.push(v.to_bits() as u64)
    }
    fn u64(self, v: u64) -> Self {
        self.push(v)
    }
}

/// Launch shape of one kernel.
#[derive(Debug, Clone, Copy)]
struct Shape {
    grid: (u32, u32, u32),
    block: u32,
}

fn grid1(x: usize, block: u32) -> Shape {
    Shape {
        grid: (x as u32, 1, 1),
        block,
    }
}

pub struct Kernels {
    stream: Arc<CudaStream>,
    /// Launch with programmatic stream serialization (sm_90 and later; `FERRITE_PDL=0` turns
    /// it off, for A/B timing).
    programmatic: bool,
    functions: HashMap<&'static str, CudaFunction>,
    _modules: Vec<Arc<CudaModule>>,
}

/// Kernel names the backend needs; checked at load so a missing one fails at start-up.
const NAMES: &[&str] = &[
    "embedding_gather",
    "add_rmsnorm",
    "rope_kv_write",
    "silu_mul",
    "attention_decode_hd64",
    "attention_decode_hd128",
    "attention_decode_reduce",
    "attention_prefill_hd64",
    "attention_prefill_hd128",
    "sample_partial",
    "sample_tokens",
    "dummy_fill_bf16",
    "dummy_fill_f32",
];

/// The GEMV kernels by split (1, 4, 8 warps per row) and token count.
const GEMV_NAMES: [[&str; GEMV_MAX_TOKENS]; 3] = [
    [
        "gemv_bf16_1_s1",
        "gemv_bf16_2_s1",
        "gemv_bf16_3_s1",
        "gemv_bf16_4_s1",
        "gemv_bf16_5_s1",
        "gemv_bf16_6_s1",
        "gemv_bf16_7_s1",
        "gemv_bf16_8_s1",
    ],
    [
        "gemv_bf16_1_s4",
        "gemv_bf16_2_s4",
        "gemv_bf16_3_s4",
        "gemv_bf16_4_s4",
        "gemv_bf16_5_s4",
        "gemv_bf16_6_s4",
        "gemv_bf16_7_s4",
        "gemv_bf16_8_s4",
    ],
    [
        "gemv_bf16_1_s8",
        "gemv_bf16_2_s8",
        "gemv_bf16_3_s8",
        "gemv_bf16_4_s8",
        "gemv_bf16_5_s8",
        "gemv_bf16_6_s8",
        "gemv_bf16_7_s8",
        "gemv_bf16_8_s8",
    ],
];

/// Warps per row of the GEMV: 8 or 4 where rows are long and few (the down projection: 1,536
/// rows of 8,960 in a 1.5B model, 4,096 of 14,336 in an 8B one), so that enough loads are in
/// flight to stream the weights at full bandwidth; else 1. Each row's sum is computed in a
/// fixed order for a given shape, so the result depends on the shape alone.
pub fn gemv_split(rows: usize, k: usize) -> usize {
    match (rows <= 8192, k) {
        (true, k) if k >= 8192 => 8,
        (true, k) if k >= 4096 => 4,
        _ => 1,
    }
}

/// Largest token count the GEMV kernels take.
pub const GEMV_MAX_TOKENS: usize = 8;
/// Head sizes the attention kernels are instantiated for.
pub const HEAD_DIMS: [usize; 2] = [64, 128];
/// Largest query group (query heads per KV head) of the decode kernel.
pub const MAX_GROUP: usize = 8;
/// Threads of the sampling kernel (its radix select needs exactly 2 bins per thread).
const SAMPLE_THREADS: u32 = 1024;
/// Vocabulary chunk and threads of `sample_partial` (PARTIAL_CHUNK / PARTIAL_THREADS there).
const SAMPLE_CHUNK: usize = 4096;
const SAMPLE_PARTIAL_THREADS: u32 = 256;

impl Kernels {
    pub fn load(stream: &Arc<CudaStream>) -> anyhow::Result<Kernels> {
        let ctx = stream.context();
        let mut modules = Vec::new();
        let mut functions = HashMap::new();
        for source in MODULES {
            let module = module_loader::load(ctx, source)?;
            for &name in NAMES.iter().chain(GEMV_NAMES.iter().flatten()) {
                if let Ok(f) = module.load_function(name) {
                    functions.insert(name, f);
                }
            }
            modules.push(module);
        }
        let mut needed = NAMES.iter().chain(GEMV_NAMES.iter().flatten());
        if let Some(missing) = needed.find(|n| !functions.contains_key(*n)) {
            anyhow::bail!("kernel `{missing}` is in no loaded module");
        }
        let major =
            ctx.attribute(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?;
        let programmatic = major >= 9 && std::env::var("FERRITE_PDL").map_or(true, |v| v != "0");
        Ok(Kernels {
            stream: stream.clone(),
            programmatic,
            functions,
            _modules: modules,
        })
    }

    fn function(&self, name: &str) -> CUfunction {
        // Every name was checked at load.
        self.functions[name].cu_function()
    }

    fn launch(&self, name: &str, shape: Shape, args: Args) -> anyhow::Result<()> {
        let mut params = [std::ptr::null_mut::<c_void>(); 16];
        let mut slots = args.slots;
        for (p, slot) in params.iter_mut().zip(slots.iter_mut()).take(args.len) {
            *p = slot as *mut u64 as *mut c_void;
        }
        // With programmatic dependent launch this kernel may be scheduled while the previous
        // one drains; it waits for it inside (pdl_wait in kernels/common.cuh).
        let mut attr = sys::CUlaunchAttribute {
            id: sys::CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION,
            pad: [0; 4],
            value: unsafe { std::mem::zeroed() },
        };
        attr.value.programmaticStreamSerializationAllowed = 1;
        let config = sys::CUlaunchConfig {
            gridDimX: shape.grid.0,
            gridDimY: shape.grid.1,
            gridDimZ: shape.grid.2,
            blockDimX: shape.block,
            blockDimY: 1,
            blockDimZ: 1,
            sharedMemBytes: 0,
            hStream: self.stream.cu_stream(),
            attrs: &mut attr,
            numAttrs: u32::from(self.programmatic),
        };
        unsafe {
            sys::cuLaunchKernelEx(
                &config,
                self.function(name),
                params.as_mut_ptr(),
                std::ptr::null_mut(),
            )
        }
        .result()
        .map_err(|e| anyhow::anyhow!("launching {name}: {e}"))
    }

    /// Registers, local (spill) bytes and static shared memory of a kernel, for the logs.
    pub fn resources(&self, name: &str) -> anyhow::Result<(i32, i32, i32)> {
        let f = self
            .functions
            .get(name)
            .ok_or_else(|| anyhow::anyhow!("no kernel named {name}"))?;
        Ok((f.num_regs()?, f.local_size_bytes()?, f.shared_size_bytes()?))
    }

    pub fn names() -> &'static [&'static str] {
        NAMES
    }

    /// x[t] = table[tokens[t]] (bf16 -> f32) for `n` tokens.
    pub fn embedding(
        &self,
        table: u64,
        tokens: u64,
        x: u64,
        hidden: usize,
        n: usize,
    ) -> anyhow::Result<()> {
        let args = Args::new().ptr(table).ptr(tokens).ptr(x).usize(hidden);
        self.launch("embedding_gather", grid1(n, 128), args)
    }

    /// For `n` output rows: x[r] += delta[r] (delta != 0), out[i] = rmsnorm(x[r]) * weight,
    /// r = rows[i] (rows != 0) or i.
    #[allow(clippy::too_many_arguments)]
    pub fn add_rmsnorm(
        &self,
        x: u64,
        delta: u64,
        weight: u64,
        rows: u64,
        out: u64,
        hidden: usize,
        eps: f32,
        n: usize,
    ) -> anyhow::Result<()> {
        let args = Args::new()
            .ptr(x)
            .ptr(delta)
            .ptr(weight)
            .ptr(rows)
            .ptr(out)
            .usize(hidden)
            .f32(eps);
        self.launch("add_rmsnorm", grid1(n, 256), args)
    }

    #[allow(clippy::too_many_arguments)]
    pub fn rope_kv_write(
        &self,
        qkv: u64,
        bias: u64,
        positions: u64,
        slots: u64,
        inv_freq: u64,
        q_out: u64,
        k_cache: u64,
        v_cache: u64,
        dims: AttentionDims,
        page_size: usize,
        interleaved: bool,
        n: usize,
    ) -> anyhow::Result<()> {
        let args = Args::new()
            .ptr(qkv)
            .ptr(bias)
            .ptr(positions)
            .ptr(slots)
            .ptr(inv_freq)
            .ptr(q_out)
            .ptr(k_cache)
            .ptr(v_cache)
            .usize(dims.num_heads)
            .usize(dims.num_kv_heads)
            .usize(dims.head_dim)
            .usize(page_size)
            .i32(interleaved as i32);
        let work = (dims.num_heads + dims.num_kv_heads) * dims.head_dim / 2
            + dims.num_kv_heads * dims.head_dim;
        let shape = Shape {
            grid: (n as u32, work.div_ceil(128) as u32, 1),
            block: 128,
        };
        self.launch("rope_kv_write", shape, args)
    }

    pub fn silu_mul(&self, gate_up: u64, out: u64, inter: usize, n: usize) -> anyhow::Result<()> {
        let threads = 256usize;
        let shape = Shape {
            grid: ((inter / 4).div_ceil(threads) as u32, n as u32, 1),
            block: threads as u32,
        };
        self.launch(
            "silu_mul",
            shape,
            Args::new().ptr(gate_up).ptr(out).usize(inter),
        )
    }

    /// y[t, r] = sum_k w[r, k] x[t, k] for `n` <= 8 tokens.
    pub fn gemv(
        &self,
        w: u64,
        x: u64,
        y: u64,
        rows: usize,
        k: usize,
        n: usize,
    ) -> anyhow::Result<()> {
        anyhow::ensure!(
            (1..=GEMV_MAX_TOKENS).contains(&n),
            "gemv takes 1..=8 tokens, not {n}"
        );
        let split = gemv_split(rows, k);
        let rows_per_block = 8 / split;
        let args = Args::new().ptr(w).ptr(x).ptr(y).usize(rows).usize(k);
        let variant = match split {
            1 => 0,
            4 => 1,
            _ => 2,
        };
        let name = GEMV_NAMES[variant][n - 1];
        self.launch(name, grid1(rows.div_ceil(rows_per_block), 256), args)
    }

    pub fn attention_decode(&self, a: &DecodeArgs) -> anyhow::Result<()> {
        let d = a.dims;
        let name = match d.head_dim {
            64 => "attention_decode_hd64",
            128 => "attention_decode_hd128",
            other => anyhow::bail!("no decode attention kernel for head_dim {other}"),
        };
        let args = Args::new()
            .ptr(a.q)
            .ptr(a.k_cache)
            .ptr(a.v_cache)
            .ptr(a.pages)
            .ptr(a.page_offsets)
            .ptr(a.ctx_lens)
            .ptr(a.q_rows)
            .ptr(a.out)
            .ptr(a.part_acc)
            .ptr(a.part_ml)
            .usize(d.num_kv_heads)
            .usize(d.group())
            .usize(a.page_size)
            .f32(d.scale_log2());
        let shape = Shape {
            grid: (
                d.num_kv_heads as u32,
                a.num_seqs as u32,
                a.num_splits as u32,
            ),
            block: 128,
        };
        self.launch(name, shape, args)?;
        if a.num_splits > 1 {
            let args = Args::new()
                .ptr(a.part_acc)
                .ptr(a.part_ml)
                .ptr(a.q_rows)
                .ptr(a.out)
                .usize(a.num_splits)
                .usize(d.head_dim);
            let shape = Shape {
                grid: (d.num_heads as u32, a.num_seqs as u32, 1),
                block: d.head_dim as u32,
            };
            self.launch("attention_decode_reduce", shape, args)?;
        }
        Ok(())
    }

    /// Prefill attention of `num_seqs` chunks; `max_q_len` bounds the row tiles.
    pub fn attention_prefill(&self, a: &PrefillArgs) -> anyhow::Result<()> {
        let d = a.dims;
        let name = match d.head_dim {
            64 => "attention_prefill_hd64",
            128 => "attention_prefill_hd128",
            other => anyhow::bail!("no prefill attention kernel for head_dim {other}"),
        };
        let args = Args::new()
            .ptr(a.q)
            .ptr(a.k_cache)
            .ptr(a.v_cache)
            .ptr(a.pages)
            .ptr(a.page_offsets)
            .ptr(a.q_starts)
            .ptr(a.q_lens)
            .ptr(a.pos0s)
            .ptr(a.out)
            .usize(d.num_kv_heads)
            .usize(d.group())
            .usize(a.page_size)
            .f32(d.scale_log2());
        let tiles = (a.max_q_len * d.group()).div_ceil(64);
        let shape = Shape {
            grid: (tiles as u32, d.num_kv_heads as u32, a.num_seqs as u32),
            block: 128,
        };
        self.launch(name, shape, args)
    }

    /// Samples logits rows `rows[0..n]` with `params[0..n]` into `tokens[0..n]`; `partials`
    /// holds `sample_partials_len(n, vocab)` bytes of chunk winners.
    #[allow(clippy::too_many_arguments)]
    pub fn sample(
        &self,
        logits: u64,
        rows: u64,
        params: u64,
        tokens: u64,
        partials: u64,
        vocab: usize,
        n: usize,
    ) -> anyhow::Result<()> {
        let chunks = vocab.div_ceil(SAMPLE_CHUNK);
        let (part_v, part_i) = (partials, partials + (n * chunks * 2 * 4) as u64);
        let args = Args::new()
            .ptr(logits)
            .ptr(rows)
            .ptr(params)
            .ptr(part_v)
            .ptr(part_i)
            .usize(vocab);
        let shape = Shape {
            grid: (chunks as u32, n as u32, 1),
            block: SAMPLE_PARTIAL_THREADS,
        };
        self.launch("sample_partial", shape, args)?;
        let args = Args::new()
            .ptr(logits)
            .ptr(rows)
            .ptr(params)
            .ptr(tokens)
            .usize(vocab)
            .ptr(part_v)
            .ptr(part_i)
            .usize(chunks);
        self.launch("sample_tokens", grid1(n, SAMPLE_THREADS), args)
    }

    /// Bytes of chunk winners `sample` needs for `n` rows.
    pub fn sample_partials_len(n: usize, vocab: usize) -> usize {
        n * vocab.div_ceil(SAMPLE_CHUNK) * 2 * 8
    }

    /// Fills `n` elements at `out` with the dummy-weight formula (bf16, or f32 when `f32`).
    pub fn dummy_fill(
        &self,
        out: u64,
        n: usize,
        key: u64,
        scale: f32,
        offset: f32,
        f32_out: bool,
    ) -> anyhow::Result<()> {
        let name = if f32_out {
            "dummy_fill_f32"
        } else {
            "dummy_fill_bf16"
        };
        let groups = n.div_ceil(4);
        let blocks = groups.div_ceil(256).clamp(1, 65_535);
        let args = Args::new()
            .ptr(out)
            .u64(n as u64)
            .u64(key)
            .f32(scale)
            .f32(offset);
        self.launch(name, grid1(blocks, 256), args)
    }
}

/// Head geometry of the attention kernels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AttentionDims {
    pub num_heads: usize,
    pub num_kv_heads: usize,
    pub head_dim: usize,
}

impl AttentionDims {
    pub fn group(&self) -> usize {
        self.num_heads / self.num_kv_heads
    }
    /// Softmax scale 1/sqrt(head_dim), in log2 units (the kernels use exp2).
    pub fn scale_log2(&self) -> f32 {
        std::f32::consts::LOG2_E / (self.head_dim as f32).sqrt()
    }
}

/// Arguments of [`Kernels::attention_decode`] (device addresses unless noted).
#[derive(Debug, Clone, Copy)]
pub struct DecodeArgs {
    pub dims: AttentionDims,
    pub q: u64,
    pub k_cache: u64,
    pub v_cache: u64,
    pub pages: u64,
    pub page_offsets: u64,
    pub ctx_lens: u64,
    pub q_rows: u64,
    pub out: u64,
    pub part_acc: u64,
    pub part_ml: u64,
    pub page_size: usize,
    pub num_seqs: usize,
    pub num_splits: usize,
}

/// Arguments of [`Kernels::attention_prefill`].
#[derive(Debug, Clone, Copy)]
pub struct PrefillArgs {
    pub dims: AttentionDims,
    pub q: u64,
    pub k_cache: u64,
    pub v_cache: u64,
    pub pages: u64,
    pub page_offsets: u64,
    pub q_starts: u64,
    pub q_lens: u64,
    pub pos0s: u64,
    pub out: u64,
    pub page_size: usize,
    pub num_seqs: usize,
    pub max_q_len: usize,
}
