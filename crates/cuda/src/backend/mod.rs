//! `CudaBackend`: the forward pass of the decoder-only models ferrite's model crate describes
//! (dense and mixture-of-experts, as `ModelConfig` gives them; crate::forward) on an NVIDIA GPU
//! behind the engine's `Backend` trait, with sampling on the device and CUDA graphs for decode
//! steps.

mod collect;
mod draft_head;
mod state;
mod step;

use std::sync::Arc;

use ferrite_engine::{
    Backend, BackendError, DeviceSampling, ExpertLoad, ForwardOutput, HeadDraftStep, KvWindow,
    SampledOutput, SeqBatch,
};
use ferrite_model::config::ModelConfig;
use ferrite_model::dummy::dummy_mtp;
use ferrite_model::plan::{ModelPlan, MtpSpec};
use ferrite_model::tensor_names::LayerTensor;

use crate::buffer::DeviceBuffer;
use crate::device::Gpu;
use crate::expert_load::DeviceExpertLoad;
use crate::forward::Model;
use crate::gemm::Gemm;
use crate::graphs::{ladder, DecodeGraphs};
use crate::kernel_sources::has_prebuilt_cubins;
use crate::kv_cache::{self, bytes_per_token, token_bytes, KvCache};
use crate::launchers::{supports, Kernels, SampleParams};
use crate::state_rewind::StateRewind;
use crate::step_inputs::StepInputs;
use crate::warm_up::warm_up;
use crate::weights::{Eagle3Weights, ModelWeights, WeightSource};
use crate::workspace::{Capacity, Workspace};

/// Device memory kept free for CUDA graphs, cuBLAS and the driver beyond what is measured.
const RESERVE_BYTES: usize = 512 << 20;

#[derive(Debug, Clone)]
pub struct CudaOptions {
    /// CUDA device ordinal.
    pub device: usize,
    pub max_num_seqs: usize,
    pub max_num_batched_tokens: usize,
    /// No CUDA graphs: every step launches its kernels one by one.
    pub enforce_eager: bool,
    /// Largest decode batch captured as a graph.
    pub cuda_graph_max_bs: usize,
    /// Fraction of the device's memory ferrite may use in all (weights, workspace, KV cache).
    pub gpu_memory_utilization: f64,
    /// Kernels whose sums do not depend on the batch (kernels/bf16_order.cuh, per-sequence
    /// decode-attention splits): a request's tokens are the same alone or batched
    /// (`--batch-invariant`). `false`, the default, picks cuBLAS and batch-sized splits (much
    /// faster prefill and batches; batch-dependent rounding).
    pub batch_invariant: bool,
}

pub struct CudaBackend {
    config: ModelConfig,
    options: CudaOptions,
    // Field order is drop order: graphs and buffers before the kernels, the context last.
    graphs: DecodeGraphs,
    kv: Option<KvCache>,
    /// Pages of the sliding-window layers' own pool (`init_window_kv_cache`; 0: none).
    window_pages: usize,
    /// Packed step metadata; sized with the KV pool, once the page size is known.
    meta: Option<(DeviceBuffer, usize)>,
    /// Every slot's recurrent state (linear-attention layers), and the slot count.
    state: Option<(DeviceBuffer, usize)>,
    /// What rewinding speculative steps takes (`init_state_rewind`).
    rewind: Option<StateRewind>,
    /// An EAGLE-3 head to draft with (`with_eagle3`), in place of the checkpoint's MTP layer.
    eagle3: Option<Eagle3Weights>,
    /// `enable_draft_head` was called: the KV cache has the head's layer, and every step
    /// catches it up.
    head_enabled: bool,
    /// The draft head's buffers (`init_kv_cache` after `enable_draft_head`).
    head: Option<draft_head::HeadState>,
    ws: Workspace,
    weights: ModelWeights,
    gemm: Gemm,
    kernels: Kernels,
    gpu: Gpu,
    inputs: StepInputs,
    sample_rows: Vec<i32>,
    sample_params: Vec<SampleParams>,
    sampled: Vec<i32>,
    /// Constrained rows of the step's sampled rows, and their masks' words.
    mask_rows: Vec<i32>,
    mask_words: Vec<u32>,
    /// Tokens routed to each expert (mixture-of-experts models).
    expert_load: Option<DeviceExpertLoad>,
    /// Decode attention blocks resident on the GPU at once (launchers::decode_splits).
    decode_slots: usize,
}

// CUDA objects may be used from any thread once the context is current there; the backend
// makes it current at the top of every call, and the engine calls it from one thread at a time.
unsafe impl Send for CudaBackend {}

impl CudaBackend {
    pub fn new(
        config: ModelConfig,
        source: WeightSource,
        options: CudaOptions,
    ) -> anyhow::Result<CudaBackend> {
        let plan = ModelPlan::new(&config)?;
        supports(&plan)?;
        let started = std::time::Instant::now();
        let gpu = Gpu::open(options.device)?;
        let kernels = Kernels::load(&gpu.stream)?;
        let decode_slots = kernels.decode_slots(config.head_dim, gpu.sm_count)?;
        let gemm = Gemm::new(&gpu.stream, options.batch_invariant)?;
        // The multi-token-prediction layer, where the weights have one.
        let mtp = match &source {
            WeightSource::Dummy { .. } => dummy_mtp(&config),
            WeightSource::Host(w) => MtpSpec::of(&config).filter(|m| {
                w.tensors
                    .contains_key(&LayerTensor::NextnEhProj.of(m.index()))
            }),
        };
        let weights = ModelWeights::load(&gpu.stream, &kernels, &plan, mtp.as_ref(), &source)?;
        drop(source);
        let graph_top = ladder(options.max_num_seqs, options.cuda_graph_max_bs)
            .last()
            .copied()
            .unwrap_or(0);
        let tokens = options.max_num_batched_tokens.max(graph_top).max(1);
        let seqs = options.max_num_seqs.max(graph_top).max(1);
        let cap = Capacity {
            tokens,
            seqs,
            logit_rows: seqs.max(256),
        };
        let ws = Workspace::new(
            &gpu.stream,
            &config,
            cap,
            decode_slots,
            weights.largest_quantized,
            options.batch_invariant,
        )?;
        tracing::info!(
            gpu = %gpu.name,
            sms = gpu.sm_count,
            decode_slots,
            kernels = if has_prebuilt_cubins() { "embedded sm_90 cubins" } else { "NVRTC" },
            weights_gib = weights.bytes() as f64 / (1u64 << 30) as f64,
            workspace_gib = ws.bytes() as f64 / (1u64 << 30) as f64,
            fp8_products = %gemm.fp8_products(),
            seconds = started.elapsed().as_secs_f64(),
            "CUDA backend loaded"
        );
        for name in [
            "attention_decode_hd128",
            "attention_prefill_hd128",
            "gemv_bf16_1_s1",
        ] {
            if let Ok((regs, local, shared)) = kernels.resources(name) {
                tracing::debug!(name, regs, local, shared, "kernel resources");
            }
        }
        let expert_load = DeviceExpertLoad::new(&gpu.stream, &config)?;
        Ok(CudaBackend {
            expert_load,
            decode_slots,
            config,
            options,
            graphs: DecodeGraphs::none(),
            kv: None,
            window_pages: 0,
            meta: None,
            state: None,
            rewind: None,
            eagle3: None,
            head_enabled: false,
            head: None,
            ws,
            weights,
            gemm,
            kernels,
            gpu,
            inputs: StepInputs::default(),
            sample_rows: Vec::new(),
            sample_params: Vec::new(),
            sampled: Vec::new(),
            mask_rows: Vec::new(),
            mask_words: Vec::new(),
        })
    }

    /// Bytes the KV cache may take: what is free now, less the share of the device that
    /// `gpu_memory_utilization` leaves to others, less a reserve for graphs and libraries.
    pub fn kv_cache_budget(&self) -> anyhow::Result<usize> {
        let (free, total) = self.gpu.memory()?;
        let keep = ((1.0 - self.options.gpu_memory_utilization).max(0.0) * total as f64) as usize;
        Ok(free.saturating_sub(keep).saturating_sub(RESERVE_BYTES))
    }

    /// Batch sizes with a captured decode graph (empty when eager).
    pub fn graph_sizes(&self) -> Vec<usize> {
        self.graphs.sizes()
    }

    pub fn config(&self) -> &ModelConfig {
        &self.config
    }

    /// Bytes of GPU memory the weights take (one allocation).
    pub fn weight_bytes(&self) -> usize {
        self.weights.bytes()
    }

    fn model(&self) -> Result<Model<'_>, BackendError> {
        let (Some(kv), Some((meta, _))) = (&self.kv, &self.meta) else {
            return Err(BackendError("forward called before init_kv_cache".into()));
        };
        Ok(Model {
            meta: meta.ptr(),
            config: &self.config,
            kernels: &self.kernels,
            gemm: &self.gemm,
            weights: &self.weights,
            kv,
            ws: &self.ws,
            expert_load: self.expert_load.as_ref(),
            state: self.state.as_ref().map(|(buf, _)| buf.ptr()),
            recording: None,
            capture: self.capture(),
        })
    }
}

impl Backend for CudaBackend {
    fn vocab_size(&self) -> usize {
        self.config.vocab_size
    }

    fn kv_bytes_per_token(&self) -> usize {
        // The draft head's layer has the target's K/V geometry (`with_eagle3` checks).
        let head = if self.head_enabled {
            token_bytes(&self.config)
        } else {
            0
        };
        bytes_per_token(&self.config) + head
    }

    fn kv_window(&self) -> Option<KvWindow> {
        kv_cache::window(&self.config).map(|(tokens, bytes_per_token)| KvWindow {
            tokens,
            bytes_per_token,
        })
    }

    fn init_window_kv_cache(&mut self, pages: usize) -> Result<(), BackendError> {
        if self.kv_window().is_none() {
            return Err(BackendError(
                "the model has no sliding-window layers".into(),
            ));
        }
        self.window_pages = pages;
        Ok(())
    }

    fn max_context_len(&self) -> usize {
        self.config.max_position_embeddings
    }

    fn init_kv_cache(&mut self, num_pages: usize, page_size: usize) -> Result<(), BackendError> {
        let err = |e: anyhow::Error| BackendError(format!("cuda: {e:#}"));
        self.gpu.bind().map_err(err)?;
        let window_pages = self.window_pages;
        let kv = KvCache::new(
            &self.gpu.stream,
            &self.config,
            num_pages,
            window_pages,
            page_size,
            usize::from(self.head_enabled),
        )
        .map_err(err)?;
        tracing::info!(
            num_pages,
            window_pages,
            page_size,
            gib = kv.bytes() as f64 / (1u64 << 30) as f64,
            "CUDA KV pool allocated"
        );
        self.kv = Some(kv);
        // Counts (4 per token, 10 per sequence, the LM-head rows) and the page lists (and
        // window page lists) of every sequence at the longest context.
        let cap = self.ws.cap;
        let pages = cap.seqs * (self.config.max_position_embeddings.div_ceil(page_size) + 1);
        let entries = 4 * cap.tokens + 10 * cap.seqs + cap.tokens.max(cap.logit_rows) + 2 * pages;
        let meta = DeviceBuffer::new(&self.gpu.stream, entries * 4).map_err(err)?;
        self.meta = Some((meta, entries));
        if self.head_enabled {
            let slots = self.state.as_ref().map_or(0, |(_, slots)| *slots);
            self.alloc_head(slots).map_err(err)?;
        }
        if !self.options.enforce_eager {
            self.capture_graphs().map_err(err)?;
        }
        let started = std::time::Instant::now();
        let (budget, vocab_size) = (self.ws.cap.tokens, self.config.vocab_size);
        let state_slot = self.state.as_ref().map(|_| 0);
        let sizes = warm_up(
            budget,
            num_pages,
            window_pages,
            page_size,
            vocab_size,
            state_slot,
            |batch| self.run(batch, &[]).map(|_| ()),
        )?;
        tracing::info!(
            ?sizes,
            seconds = started.elapsed().as_secs_f64(),
            "warmed up the prefill shapes"
        );
        self.reset_head();
        if let Some(load) = &mut self.expert_load {
            load.reset(&self.gpu.stream).map_err(err)?;
        }
        Ok(())
    }

    fn state_bytes_per_sequence(&self) -> usize {
        self.weights.state_len * 4
    }

    /// Called before `init_kv_cache` (whose decode graphs capture the state's address).
    fn init_state_slots(&mut self, slots: usize) -> Result<(), BackendError> {
        let err = |e: anyhow::Error| BackendError(format!("cuda: {e:#}"));
        if self.kv.is_some() {
            return Err(BackendError(
                "init_state_slots must come before init_kv_cache (graphs capture the state)".into(),
            ));
        }
        self.gpu.bind().map_err(err)?;
        let bytes = (self.weights.state_len * 4).max(4) * slots.max(1);
        let buf = DeviceBuffer::new(&self.gpu.stream, bytes).map_err(err)?;
        tracing::info!(
            slots,
            mib = bytes as f64 / (1u64 << 20) as f64,
            "CUDA recurrent-state slots allocated"
        );
        self.state = Some((buf, slots));
        Ok(())
    }

    fn has_draft_head(&self) -> bool {
        self.weights.mtp.is_some() || self.eagle3.is_some()
    }

    fn enable_draft_head(&mut self) -> Result<(), BackendError> {
        if !self.has_draft_head() {
            return Err(BackendError(
                "no draft head: the checkpoint has no multi-token-prediction layer (mtp.* \
                 tensors) and no EAGLE-3 head was given"
                    .into(),
            ));
        }
        if self.kv.is_some() {
            return Err(BackendError(
                "enable_draft_head must come before init_kv_cache".into(),
            ));
        }
        if self.kv_window().is_some() {
            return Err(BackendError(
                "draft heads with a sliding-window KV pool are not supported".into(),
            ));
        }
        self.head_enabled = true;
        Ok(())
    }

    fn draft_head_needs_slots(&self) -> bool {
        self.head_enabled
    }

    fn head_draft(&mut self, steps: &[HeadDraftStep<'_>]) -> Result<ForwardOutput, BackendError> {
        self.head_draft_steps(steps)
    }

    fn state_rewind_bytes_per_sequence(&self, step_tokens: usize) -> Option<usize> {
        Some(self.rewind_bytes_per_seat(step_tokens))
    }

    fn init_state_rewind(&mut self, seats: usize, step_tokens: usize) -> Result<(), BackendError> {
        self.alloc_rewind(seats, step_tokens)
            .map_err(|e| BackendError(format!("cuda: {e:#}")))
    }

    fn forward(&mut self, batch: &[SeqBatch<'_>]) -> Result<ForwardOutput, BackendError> {
        self.run(batch, &[]).map(|out| out.forward)
    }

    fn can_sample(&self) -> bool {
        true
    }

    fn can_sample_masked(&self) -> bool {
        true
    }

    fn forward_sampled(
        &mut self,
        batch: &[SeqBatch<'_>],
        sampling: &[Option<DeviceSampling>],
    ) -> Result<SampledOutput, BackendError> {
        self.run(batch, sampling)
    }

    fn expert_load_counters(&self) -> Option<Arc<ExpertLoad>> {
        self.expert_load.as_ref().map(DeviceExpertLoad::counters)
    }
}
