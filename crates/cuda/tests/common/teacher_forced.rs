//! One prompt through the CPU and CUDA backends side by side along the CPU's greedy
//! continuation, CUDA fed the CPU's tokens (so a near-tie that flips one token does not derail
//! the rest): the single-sequence comparison of tests/fixture_parity.rs and
//! tests/real_gguf_parity.rs.

use ferrite_cpu::CpuBackend;
use ferrite_cuda::CudaBackend;
use ferrite_engine::sampler::argmax;
use ferrite_engine::{Backend, LogitsRequest, SeqBatch};

/// What each step gives the caller: the position of the token its logits predict, both rows,
/// CUDA's logits relative error against the CPU's, and each backend's greedy token.
pub struct Step<'a> {
    pub at: usize,
    pub cpu: &'a [f32],
    pub cuda: &'a [f32],
    pub rel_err: f64,
    pub cpu_token: u32,
    pub cuda_token: u32,
}

/// Runs `prompt` and then `new_tokens` greedy steps on both backends (fresh KV caches of
/// `page_size` pages), calling `visit` after every forward pass.
pub fn teacher_forced(
    cpu: &mut CpuBackend,
    gpu: &mut CudaBackend,
    prompt: &[u32],
    new_tokens: usize,
    page_size: usize,
    mut visit: impl FnMut(&Step),
) {
    let total = prompt.len() + new_tokens;
    let pages = total.div_ceil(page_size);
    cpu.init_kv_cache(pages, page_size).unwrap();
    gpu.init_kv_cache(pages, page_size).unwrap();
    let table: Vec<u32> = (0..pages as u32).rev().collect();
    // A hybrid's recurrent state: slot 0 (the caller allocated it), started over at position 0.
    let state_slot = (gpu.state_bytes_per_sequence() > 0).then_some(0);
    let mut tokens = prompt.to_vec();
    let mut start = 0;
    while tokens.len() < total {
        let batch = [SeqBatch {
            tokens: &tokens[start..],
            start_pos: start,
            block_table: &table,
            window_table: &[],
            state_slot,
            state_copy: Default::default(),
            logits: LogitsRequest::Last,
        }];
        let (a, b) = (cpu.forward(&batch).unwrap(), gpu.forward(&batch).unwrap());
        let (cpu_row, cuda_row) = (a.row(0), b.row(0));
        let want: Vec<f64> = cpu_row.iter().map(|&v| v as f64).collect();
        let step = Step {
            at: tokens.len(),
            cpu: cpu_row,
            cuda: cuda_row,
            rel_err: super::rel_err(cuda_row, &want),
            cpu_token: argmax(cpu_row),
            cuda_token: argmax(cuda_row),
        };
        visit(&step);
        start = tokens.len();
        tokens.push(step.cpu_token);
    }
}
