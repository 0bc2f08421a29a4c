//! Start-up warm-up: the first prompt after start-up used to take much longer than later
//! ones (measured: docs/performance.md, '2026-12-04 12:45-12:59 UTC: start-up warm-up, the
//! CUDA token budget, same-run peers'), because the first use of each GEMM shape and kernel
//! pays for lazy module loading and cuBLAS's kernel choice. Running the prefill shapes once
//! before serving moves that cost into start-up, where graph capture already does the same
//! for decode steps.

use ferrite_engine::{BackendError, LogitsRequest, SeqBatch};

/// Prompt chunk sizes run once at start-up besides the step token budget itself: cuBLAS
/// picks its kernels by the row count, so the common sizes each get theirs. (With the CUDA
/// budget of 8,192 and no 2,048 here, a first 2,048-token prompt of the 1.5B shape was slower
/// than the next: docs/performance.md, '2026-12-04 15:00 UTC: batch-1 Q4_K products on the
/// tensor cores'.)
const CHUNK_LADDER: [usize; 7] = [4096, 2048, 1024, 512, 128, 32, 9];

/// The chunk sizes warmed for a step budget of `budget` tokens: the budget, then the ladder
/// below it.
pub fn chunk_sizes(budget: usize) -> Vec<usize> {
    let mut sizes: Vec<usize> = std::iter::once(budget)
        .chain(CHUNK_LADDER.iter().copied().filter(|&n| n < budget))
        .filter(|&n| n > 0)
        .collect();
    sizes.dedup();
    sizes
}

/// One prefill of each of [`chunk_sizes`] through `forward`, into the KV pool's first pages
/// (no sequence owns a page yet, and a page is always written before it is read), the window
/// pool's first pages after its null page (`window_pages > 0`) and, for a model with
/// recurrent state, `state_slot` (a slot starts over at position 0). Returns the sizes run.
pub fn warm_up(
    budget: usize,
    num_pages: usize,
    window_pages: usize,
    page_size: usize,
    vocab_size: usize,
    state_slot: Option<u32>,
    mut forward: impl FnMut(&[SeqBatch<'_>]) -> Result<(), BackendError>,
) -> Result<Vec<usize>, BackendError> {
    let pages = match window_pages {
        0 => num_pages,
        w => num_pages.min(w - 1),
    };
    let sizes = chunk_sizes(budget.min(pages * page_size));
    let block_table: Vec<u32> = (0..num_pages as u32).collect();
    let window_table: Vec<u32> = (1..window_pages as u32).collect();
    for &n in &sizes {
        // Spread-out ids: the embedding gather reads rows all over the table, as a prompt does.
        let tokens: Vec<u32> = (0..n as u64)
            .map(|i| (i.wrapping_mul(2_654_435_761) % vocab_size as u64) as u32)
            .collect();
        let batch = [SeqBatch {
            tokens: &tokens,
            start_pos: 0,
            block_table: &block_table[..n.div_ceil(page_size)],
            window_table: window_table
                .get(..n.div_ceil(page_size))
                .unwrap_or_default(),
            state_slot,
            state_copy: Default::default(),
            logits: LogitsRequest::Last,
        }];
        forward(&batch)?;
    }
    Ok(sizes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn warms_the_budget_and_the_smaller_ladder_sizes_within_the_pool() {
        assert_eq!(chunk_sizes(8192), [8192, 4096, 2048, 1024, 512, 128, 32, 9]);
        assert_eq!(chunk_sizes(2048), [2048, 1024, 512, 128, 32, 9]);
        assert_eq!(chunk_sizes(512), [512, 128, 32, 9]);
        assert_eq!(chunk_sizes(5), [5]);
        let mut seen = Vec::new();
        let sizes = warm_up(2048, 10, 0, 16, 1000, None, |batch| {
            let s = &batch[0];
            assert!(s.tokens.iter().all(|&t| t < 1000));
            assert!(s.block_table.len() * 16 >= s.tokens.len());
            seen.push(s.tokens.len());
            Ok(())
        })
        .unwrap();
        // A pool of 160 token slots caps the largest chunk.
        assert_eq!(sizes, [160, 128, 32, 9]);
        assert_eq!(seen, sizes);
    }
}
