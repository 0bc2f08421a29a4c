//! `CpuBackend`: the decoder forward pass on this machine's cores, behind the engine's
//! `Backend` trait.

use std::sync::Arc;

use ferrite_engine::{
    Backend, BackendError, ExpertLoad, ForwardOutput, HeadDraftStep, KvWindow, SeqBatch,
};
use ferrite_model::config::ModelConfig;
use ferrite_model::plan::{Mixer, MlpSpec, ModelPlan};
// The model crate's tensors as loaded, named apart from this crate's `ModelWeights` (the same
// tensors in the form the forward pass reads).
use ferrite_model::weights::ModelWeights as LoadedWeights;

use crate::draft_head::{DraftHead, HeadState};
use crate::eagle3::Eagle3Weights;
use crate::kernels::int8_gemm;
use crate::kv_cache::{KvCache, KvShape};
use crate::model::{Model, Workspace};
use crate::model_weights::ModelWeights;
use crate::mtp::MtpWeights;
use crate::recurrent_state::{self, StateCache};
use crate::simd::{detected_isa, Isa};

pub struct CpuBackend {
    model: Model,
    /// The layer plan the model was built from (sizes of the recurrent state).
    plan: ModelPlan,
    kv: Option<KvCache>,
    /// Pages of the sliding-window layers' own pool (0: they share the one pool).
    window_pages: usize,
    /// The linear-attention layers' state per slot, for a hybrid model.
    state: Option<StateCache>,
    /// The draft head (the checkpoint's MTP layer, or an EAGLE-3 head given with
    /// `with_eagle3`), and the hidden rows it continues from once `enable_draft_head` turned
    /// it on.
    head: Option<DraftHead>,
    head_state: Option<HeadState>,
    /// State slots the engine gave (`init_state_slots`): the recurrent state's, or only
    /// seats for the head's rows on a model without recurrent state.
    slots: usize,
    pool: rayon::ThreadPool,
    isa: Isa,
    workspace: Workspace,
}

impl std::fmt::Debug for CpuBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CpuBackend")
            .field("config", self.model.config())
            .field("threads", &self.pool.current_num_threads())
            .field("isa", &self.isa)
            .finish()
    }
}

/// Whether the CPU backend runs every layer of `plan`; the one capability check of this
/// backend (the plan has passed the shape checks every backend makes).
pub fn supports(plan: &ModelPlan) -> anyhow::Result<()> {
    for layer in &plan.layers {
        // Every mixer and MLP runs here (sinks, biases and every activation included); the
        // matches make a new variant a compile error.
        match &layer.mixer {
            Mixer::Attention(_) | Mixer::LinearAttention(_) => {}
        }
        match &layer.mlp {
            MlpSpec::Gated { .. } | MlpSpec::Experts { .. } => {}
        }
    }
    Ok(())
}

impl CpuBackend {
    /// Builds the backend over `weights` (kept quantized) with a pool of `threads` workers
    /// (0 = one per core).
    pub fn new(
        config: ModelConfig,
        weights: LoadedWeights,
        threads: usize,
    ) -> anyhow::Result<CpuBackend> {
        let plan = ModelPlan::new(&config)?;
        supports(&plan)?;
        let model_weights = ModelWeights::new(&plan, &weights)?;
        let head = MtpWeights::load(&config, &plan, &weights)?.map(|m| DraftHead::Mtp(Box::new(m)));
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .thread_name(|i| format!("ferrite-cpu-{i}"))
            .build()?;
        let isa = detected_isa();
        tracing::info!(
            threads = pool.current_num_threads(),
            ?isa,
            "CPU backend ready"
        );
        Ok(CpuBackend {
            model: Model::new(config, &plan, model_weights),
            plan,
            kv: None,
            window_pages: 0,
            state: None,
            head,
            head_state: None,
            slots: 0,
            pool,
            isa,
            workspace: Workspace::default(),
        })
    }

    /// Drafts with `head`, an EAGLE-3 head trained for this model (`--speculative eagle3`),
    /// in place of the checkpoint's own MTP layer if it has one.
    pub fn with_eagle3(mut self, head: &ferrite_model::load::Eagle3Head) -> anyhow::Result<Self> {
        let config = self.model.config();
        let spec = &head.spec;
        if spec.hidden_size() != config.hidden_size {
            anyhow::bail!(
                "EAGLE-3 heads narrower or wider than the model ({} vs {}) are not supported",
                spec.hidden_size(),
                config.hidden_size
            );
        }
        if spec.norm != self.plan.norm {
            anyhow::bail!(
                "the EAGLE-3 head's norms ({:?}) differ from the model's ({:?}): not supported",
                spec.norm,
                self.plan.norm
            );
        }
        let weights = Eagle3Weights::load(head)?;
        self.model.add_rope_of(&weights.spec.layer);
        self.head = Some(DraftHead::Eagle3(Box::new(weights)));
        Ok(self)
    }

    /// Logits for token ids `0..n` only (see `Model::limit_logits`); the vocabulary the
    /// backend accepts as input stays whole.
    pub fn limit_logits(&mut self, n: usize) {
        self.model.limit_logits(n);
    }

    /// Bytes the weights take in memory as the forward pass holds them (matrices as stored or
    /// repacked, shared ones once; norm and bias vectors in f32). A bf16 checkpoint stays bf16.
    pub fn weight_bytes(&self) -> usize {
        self.model.weight_bytes()
    }

    /// Multiplies activations quantized to int8 by the Q4_K and Q6_K matrices (integer dot
    /// products, AVX-512 VNNI): faster, and lossy — answers change. The other matrices keep
    /// the exact f32 path. Fails on a machine without the instructions.
    pub fn use_int8_activations(&mut self) -> anyhow::Result<()> {
        if !int8_gemm::available() {
            anyhow::bail!("int8 activations need AVX-512 BW, VL and VNNI, which this CPU lacks");
        }
        let (switched, total) = self.model.use_int8_activations();
        tracing::info!(
            switched,
            total,
            "matrices multiply int8 activations (Q4_K and Q6_K)"
        );
        Ok(())
    }

    /// Takes the fast path (`bf16_gemm`: inputs and weights rounded to bf16, AMX tiles, f32
    /// sums) for every matrix it can; errors where this machine has no AMX bf16 tiles.
    pub fn use_bf16(&mut self) -> anyhow::Result<()> {
        if !crate::kernels::bf16_gemm::available() {
            anyhow::bail!("the bf16 path needs AMX bf16 tiles, which this CPU lacks");
        }
        let (switched, total) = self.model.use_bf16();
        tracing::info!(switched, total, "matrices multiply in bf16 on AMX tiles");
        Ok(())
    }

    /// Which layers keep K and V in pages, and their geometry: the attention layers, but those
    /// reading another layer's pages (Gemma 4's KV-sharing layers).
    fn kv_layers(&self) -> Vec<Option<KvShape>> {
        self.plan
            .layers
            .iter()
            .map(|l| match &l.mixer {
                Mixer::Attention(a) if a.kv_source.is_none() => Some(KvShape::of(a)),
                Mixer::Attention(_) | Mixer::LinearAttention(_) => None,
            })
            .chain(
                self.head
                    .as_ref()
                    .filter(|_| self.head_state.is_some())
                    .map(|h| Some(h.kv_shape())),
            )
            .collect()
    }

    /// Bytes of K and V each layer holds in the pool `init_kv_cache` made (0 for a layer
    /// without pages); `None` before it.
    pub fn kv_layer_bytes(&self) -> Option<Vec<usize>> {
        let kv = self.kv.as_ref()?;
        Some(
            (0..self.plan.layers.len())
                .map(|l| kv.layer_bytes(l))
                .collect(),
        )
    }

    /// The instruction set the kernels run with.
    pub fn isa(&self) -> Isa {
        self.isa
    }

    /// Runs with the portable kernels instead of the detected SIMD ones (for tests comparing
    /// the two paths; results are bitwise identical by design).
    pub fn use_isa(&mut self, isa: Isa) {
        if isa == Isa::Portable || isa == detected_isa() {
            self.isa = isa;
        }
    }
}

impl Backend for CpuBackend {
    fn vocab_size(&self) -> usize {
        self.model.config().vocab_size
    }

    /// Tokens routed to each expert of each layer since load, for a model with experts.
    /// Speculative and prompt tokens count alike.
    fn expert_load_counters(&self) -> Option<Arc<ExpertLoad>> {
        let counters = self.model.expert_load_counters();
        counters.has_experts().then_some(counters)
    }

    /// K and V of every attention layer that keeps its own (a hybrid's linear-attention
    /// layers keep state per sequence instead, `state_bytes_per_sequence`; KV-sharing layers
    /// read their producer's).
    fn kv_bytes_per_token(&self) -> usize {
        let floats: usize = self.kv_layers().iter().flatten().map(KvShape::width).sum();
        2 * floats * std::mem::size_of::<f32>()
    }

    fn max_context_len(&self) -> usize {
        self.model.config().max_position_embeddings
    }

    fn init_kv_cache(&mut self, num_pages: usize, page_size: usize) -> Result<(), BackendError> {
        let (layers, window_pages) = (self.kv_layers(), self.window_pages);
        self.kv = Some(KvCache::new(&layers, num_pages, window_pages, page_size)?);
        Ok(())
    }

    /// The sliding-window layers that keep their own K/V (a layer reading another's pages
    /// follows its producer).
    fn kv_window(&self) -> Option<KvWindow> {
        let windowed = || {
            self.kv_layers()
                .into_iter()
                .flatten()
                .filter(|s| s.window.is_some())
        };
        let tokens = windowed().filter_map(|s| s.window).max()?;
        let floats: usize = windowed().map(|s| s.width()).sum();
        Some(KvWindow {
            tokens,
            bytes_per_token: 2 * floats * std::mem::size_of::<f32>(),
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

    fn state_bytes_per_sequence(&self) -> usize {
        recurrent_state::state_len(&self.plan) * std::mem::size_of::<f32>()
    }

    /// The state before the step, and the step's inputs to each linear layer.
    fn state_rewind_bytes_per_sequence(&self, step_tokens: usize) -> Option<usize> {
        let inputs = recurrent_state::inputs_len(&self.plan) * step_tokens;
        Some(self.state_bytes_per_sequence() + inputs * std::mem::size_of::<f32>())
    }

    /// Kept per slot as steps record it (`recurrent_state.rs`): nothing to allocate ahead.
    fn init_state_rewind(
        &mut self,
        _seats: usize,
        _step_tokens: usize,
    ) -> Result<(), BackendError> {
        Ok(())
    }

    fn init_state_slots(&mut self, slots: usize) -> Result<(), BackendError> {
        // A model without recurrent state gets slots only as seats for the head's rows.
        if self.state_bytes_per_sequence() > 0 {
            self.state = Some(StateCache::new(&self.plan, slots)?);
        }
        self.slots = slots;
        if let Some(head_state) = &mut self.head_state {
            *head_state = HeadState::new(slots);
        }
        Ok(())
    }

    fn has_draft_head(&self) -> bool {
        self.head.is_some()
    }

    fn enable_draft_head(&mut self) -> Result<(), BackendError> {
        if self.head.is_none() {
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
        // Hidden rows are kept per state slot; slots come with `init_state_slots`.
        self.head_state = Some(HeadState::new(self.slots));
        Ok(())
    }

    fn draft_head_needs_slots(&self) -> bool {
        self.head_state.is_some()
    }

    fn head_draft(&mut self, steps: &[HeadDraftStep<'_>]) -> Result<ForwardOutput, BackendError> {
        let (Some(kv), Some(head), Some(head_state)) = (
            self.kv.as_mut(),
            self.head.as_ref(),
            self.head_state.as_mut(),
        ) else {
            return Err(BackendError(
                "head_draft before enable_draft_head and init_kv_cache".into(),
            ));
        };
        let (model, isa, ws) = (&self.model, self.isa, &mut self.workspace);
        let logits = self
            .pool
            .install(|| model.head_draft(isa, head, kv, head_state, steps, ws))?;
        Ok(ForwardOutput {
            logits,
            vocab_size: model.logits_vocab(),
        })
    }

    fn forward(&mut self, batch: &[SeqBatch<'_>]) -> Result<ForwardOutput, BackendError> {
        let kv = self
            .kv
            .as_mut()
            .ok_or_else(|| BackendError("forward called before init_kv_cache".into()))?;
        let (model, isa, workspace) = (&self.model, self.isa, &mut self.workspace);
        let (state, slots) = (self.state.as_mut(), self.slots);
        let head = self.head.as_ref().zip(self.head_state.as_mut());
        workspace.capture = head.as_ref().map(|(h, _)| h.capture()).unwrap_or_default();
        self.pool.install(|| {
            let out = model.forward(isa, kv, state, slots, batch, workspace)?;
            if let Some((head, head_state)) = head {
                model.head_catch_up(isa, head, kv, head_state, batch, workspace)?;
            }
            Ok(out)
        })
    }
}
