//! Building the backend, the speculative proposer and the engine from the command-line flags.

use std::sync::mpsc::{channel, Receiver};

use anyhow::{bail, Context};
use ferrite_cpu::CpuBackend;
use ferrite_cuda::{CudaBackend, CudaOptions, WeightSource};
use ferrite_engine::{
    spawn_engine, Backend, EngineConfig, EngineHandle, EngineStep, SpecOptions, StateCacheOptions,
    MAX_SPEC_TOKENS,
};
use ferrite_engine::{
    DraftModel, HeadProposer, NgramConfig, NgramProposer, Proposer, SuffixConfig, SuffixProposer,
};
use ferrite_model::config::ModelConfig;

use crate::cli::{Device, EngineArgs, LoadFormat, Quantization, SpecArgs, SpecMethod};
use crate::model_source::{self, LoadedModel};

/// The step token budget the flags ask for, or the device's default.
pub fn max_num_batched_tokens(args: &EngineArgs) -> usize {
    args.max_num_batched_tokens
        .unwrap_or(args.device.defaults().max_num_batched_tokens)
}

pub struct RunningEngine {
    pub handle: EngineHandle,
    pub outputs: Receiver<EngineStep>,
    pub vocab_size: usize,
}

/// A backend of either kind, before the engine sizes its KV pool.
enum Built {
    Cpu(CpuBackend),
    Cuda(CudaBackend),
}

impl Built {
    fn new(model: &mut LoadedModel, args: &EngineArgs) -> anyhow::Result<Built> {
        let mut weights = std::mem::take(&mut model.weights);
        // CUDA draws dummy weights on the device; quantizing them needs them on the host,
        // drawn by the same formula (the same seed gives the same weights on every device).
        let mut dummy_on_device = None;
        if let Some(seed) = model.dummy_seed {
            if args.device == Device::Cuda && args.quantization.is_none() {
                dummy_on_device = Some(seed);
            } else {
                weights = ferrite_model::dummy::generate(&model.config, seed);
            }
        }
        if let Some(Quantization::Fp8) = args.quantization {
            let started = std::time::Instant::now();
            let matrices = ferrite_model::fp8::quantize_linear_layers(&mut weights)?;
            tracing::info!(
                matrices,
                seconds = started.elapsed().as_secs_f64(),
                "linear layers quantized to FP8 (one scale per output channel)"
            );
        }
        Ok(match args.device {
            Device::Cpu => {
                if args.batch_invariant {
                    anyhow::bail!(
                        "--batch-invariant applies to --device cuda: the CPU backend's kernels \
                         are batch-invariant by construction, always"
                    );
                }
                let threads = args.threads.unwrap_or(0);
                let mut backend = CpuBackend::new(model.config.clone(), weights, threads)?;
                if args.int8_activations {
                    backend.use_int8_activations()?;
                }
                if args.amx_bf16 {
                    backend.use_bf16()?;
                }
                Built::Cpu(backend)
            }
            Device::Cuda => {
                if args.int8_activations {
                    anyhow::bail!("--int8-activations applies to the CPU backend (--device cpu)");
                }
                if args.amx_bf16 {
                    anyhow::bail!("--amx-bf16 applies to the CPU backend (--device cpu)");
                }
                if args.no_huge_pages {
                    anyhow::bail!("--no-huge-pages applies to the CPU backend (--device cpu)");
                }
                let source = match dummy_on_device {
                    Some(seed) => WeightSource::Dummy { seed },
                    None => WeightSource::Host(weights),
                };
                let options = CudaOptions {
                    device: 0,
                    max_num_seqs: args.max_num_seqs,
                    max_num_batched_tokens: max_num_batched_tokens(args),
                    enforce_eager: args.enforce_eager,
                    cuda_graph_max_bs: args.cuda_graph_max_bs,
                    gpu_memory_utilization: args.gpu_memory_utilization,
                    batch_invariant: args.batch_invariant,
                };
                Built::Cuda(CudaBackend::new(model.config.clone(), source, options)?)
            }
        })
    }

    /// Gives the backend the EAGLE-3 head `--draft-model` names, read for `target`.
    fn with_eagle3(self, target: &ModelConfig, args: &EngineArgs) -> anyhow::Result<Built> {
        let spec =
            args.speculation.draft_model.as_deref().context(
                "--speculative eagle3 needs --draft-model (the head's directory or hub id)",
            )?;
        let files = model_source::resolve(Some(spec), None, args.download_dir.as_deref())?;
        let model_source::ModelFiles::Dir { dir, .. } = files else {
            bail!("an EAGLE-3 head is a Hugging Face directory or hub id, not a GGUF file");
        };
        let head = ferrite_model::load::eagle3_dir(&dir, target, args.map_pages())
            .with_context(|| format!("loading the EAGLE-3 head {spec}"))?;
        tracing::info!(
            head = spec,
            aux_layers = ?head.spec.options.aux_layers,
            draft_vocab = head.spec.options.draft_vocab,
            "speculative decoding with an EAGLE-3 head"
        );
        Ok(match self {
            Built::Cpu(cpu) => Built::Cpu(cpu.with_eagle3(&head)?),
            Built::Cuda(cuda) => Built::Cuda(cuda.with_eagle3(&head)?),
        })
    }

    fn vocab_size(&self) -> usize {
        match self {
            Built::Cpu(b) => b.vocab_size(),
            Built::Cuda(b) => b.vocab_size(),
        }
    }

    /// KV cache bytes: the flag, else the device's default (on a GPU what is left of its
    /// memory budget now, so call this once every model is loaded).
    fn kv_cache_bytes(&self, args: &EngineArgs) -> anyhow::Result<usize> {
        let bytes = args
            .kv_cache_memory
            .or(args.device.defaults().kv_cache_bytes);
        Ok(match (bytes, self) {
            (Some(bytes), _) => bytes,
            (None, Built::Cuda(b)) => b.kv_cache_budget()?,
            (None, Built::Cpu(_)) => {
                bail!("give --kv-cache-memory: the CPU has no budget to size the KV cache from")
            }
        })
    }

    fn into_backend(self) -> Box<dyn Backend> {
        match self {
            Built::Cpu(b) => Box::new(b),
            Built::Cuda(b) => Box::new(b),
        }
    }
}

/// Consumes the weights: they move into the backend, which moves into the scheduler thread.
pub fn start_engine(model: &mut LoadedModel, args: &EngineArgs) -> anyhow::Result<RunningEngine> {
    let allow_long = crate::context_limit::allowed_by_env();
    crate::context_limit::check(args.max_model_len, &model.config, allow_long)?;
    let mut built = Built::new(model, args)?;
    if args.speculation.speculative == Some(SpecMethod::Eagle3) {
        built = built.with_eagle3(&model.config, args)?;
    }
    let vocab_size = built.vocab_size();
    let proposer = build_proposer(args, vocab_size)?;
    let kv_cache_memory_bytes = built.kv_cache_bytes(args)?;
    let config = engine_config(model, args, kv_cache_memory_bytes);
    let (tx, outputs) = channel();
    let handle = spawn_engine(config, built.into_backend(), proposer, tx)?;
    Ok(RunningEngine {
        handle,
        outputs,
        vocab_size,
    })
}

pub fn engine_config(
    model: &LoadedModel,
    args: &EngineArgs,
    kv_cache_memory_bytes: usize,
) -> EngineConfig {
    let defaults = args.device.defaults();
    let prefill_per_decode = args
        .prefill_per_decode
        .unwrap_or(defaults.prefill_per_decode);
    EngineConfig {
        page_size: args.page_size,
        kv_cache_memory_bytes,
        max_num_batched_tokens: max_num_batched_tokens(args),
        max_num_seqs: args.max_num_seqs,
        prefill_per_decode,
        scheduling_policy: args.scheduling_policy.into(),
        enable_prefix_caching: !args.no_prefix_caching,
        window_kv_pool: !args.no_window_kv_pool,
        state_cache: StateCacheOptions {
            memory_bytes: args.state_cache_memory.unwrap_or(kv_cache_memory_bytes / 4),
            snapshot_interval: args.state_snapshot_interval,
        },
        max_model_len: args.max_model_len,
        eos_token_ids: model.tokenizer.eos_token_ids.clone(),
        speculation: SpecOptions {
            num_tokens: args.speculation.num_tokens(),
            adaptive: !args.speculation.speculative_fixed_k,
            disable_by_batch_size: match args.speculation.speculative_disable_by_batch_size {
                Some(0) => None,
                Some(n) => Some(n),
                None => defaults.spec_disable_by_batch_size,
            },
        },
    }
}

/// The speculative proposer the flags ask for, if any. A draft model runs on the same device
/// as the model, with the same engine flags.
pub fn build_proposer(
    args: &EngineArgs,
    vocab_size: usize,
) -> anyhow::Result<Option<Box<dyn Proposer>>> {
    let spec: &SpecArgs = &args.speculation;
    let Some(method) = spec.speculative else {
        if spec.draft_model.is_some() || spec.draft_vocab.is_some() {
            bail!("--draft-model needs --speculative draft or eagle3, --draft-vocab draft");
        }
        return Ok(None);
    };
    if !(1..=MAX_SPEC_TOKENS).contains(&spec.num_tokens()) {
        bail!("--num-speculative-tokens must be in 1..={MAX_SPEC_TOKENS}");
    }
    Ok(Some(match method {
        SpecMethod::Suffix => {
            if spec.draft_model.is_some() || spec.draft_vocab.is_some() {
                bail!("--draft-model and --draft-vocab are for --speculative draft");
            }
            if spec.suffix_max_depth < 2 {
                bail!("--suffix-max-depth must be at least 2");
            }
            Box::new(SuffixProposer::new(SuffixConfig {
                max_depth: spec.suffix_max_depth,
                cache_tokens: spec.suffix_cache_tokens,
            }))
        }
        SpecMethod::Mtp => {
            if spec.draft_model.is_some() || spec.draft_vocab.is_some() {
                bail!("--draft-model and --draft-vocab are for --speculative draft");
            }
            // The engine readies the model for it (Proposer::prepare_target), and says so if
            // the checkpoint has no MTP layer.
            Box::new(HeadProposer::mtp())
        }
        SpecMethod::Eagle3 => {
            if spec.draft_vocab.is_some() {
                bail!("--draft-vocab is for --speculative draft (a head has its own vocabulary)");
            }
            // start_engine gave the backend the head --draft-model names.
            Box::new(HeadProposer::eagle3())
        }
        SpecMethod::Ngram => {
            if spec.draft_model.is_some() || spec.draft_vocab.is_some() {
                bail!("--draft-model and --draft-vocab are for --speculative draft");
            }
            let (min_n, max_n) = (spec.prompt_lookup_min, spec.prompt_lookup_max);
            if min_n == 0 || min_n > max_n {
                bail!("need 1 <= --prompt-lookup-min <= --prompt-lookup-max");
            }
            Box::new(NgramProposer {
                config: NgramConfig { min_n, max_n },
            })
        }
        SpecMethod::Draft => {
            let path = spec
                .draft_model
                .as_deref()
                .context("--speculative draft needs --draft-model PATH")?;
            let mut draft = match args.load_format {
                LoadFormat::Dummy => {
                    model_source::load_dummy(path, args.dummy_seed.wrapping_add(1), None)?
                }
                LoadFormat::Auto => model_source::load(
                    Some(path),
                    None,
                    args.download_dir.as_deref(),
                    args.map_pages(),
                )
                .with_context(|| format!("loading the draft model {path}"))?,
            };
            let mut backend = Built::new(&mut draft, args)?;
            // Draft and model must number tokens alike: token ids cross between them.
            if backend.vocab_size() != vocab_size {
                bail!(
                    "the draft model's vocabulary ({}) differs from the model's ({vocab_size}): \
                     it needs the same tokenizer",
                    backend.vocab_size()
                );
            }
            if let Some(n) = spec.draft_vocab {
                if n == 0 || n > vocab_size {
                    bail!("--draft-vocab must be in 1..={vocab_size}");
                }
                match &mut backend {
                    Built::Cpu(cpu) => cpu.limit_logits(n),
                    Built::Cuda(_) => bail!("--draft-vocab is not implemented on CUDA yet"),
                }
            }
            tracing::info!(
                draft = path,
                draft_vocab = spec.draft_vocab.unwrap_or(vocab_size),
                "speculative decoding with a draft model"
            );
            Box::new(DraftModel::new(backend.into_backend())?)
        }
    }))
}
