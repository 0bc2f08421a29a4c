//! The fast path of `y = x · Wᵀ`: x rounded to bf16 once per product, each task's weight rows
//! decoded by the exact path's decoders (the f32 value GGML gives each weight) and rounded to
//! bf16 into a panel of AMX B tiles, the products on AMX tiles (`amx`) with f32 sums.
//!
//! The error is the two roundings to bf16 (2⁻⁹ relative per element, as on the GPU); the sums
//! are f32. Measured against transformers in float32, teacher-forced on the three CPU test
//! models, this keeps the mean |Δ logprob| of the reference token at 0.003-0.008 where int8
//! activations (llama.cpp's method, per 32 or 256 elements) give 0.010-0.036
//! (tests/fast_path_fidelity.rs; docs/performance.md, '2026-12-07, the CPU fast path's
//! precision'). Every row count takes the same tiles, and an element's sum depends only on its
//! two rows (see `amx`), so results do not depend on the batch.

use std::cell::RefCell;

use super::amx::{self, TILE_ROWS};
use super::bf16_activations::Bf16Activations;
use super::qgemm::Task;

/// Whether this machine runs the bf16 path.
pub fn available() -> bool {
    amx::available()
}

thread_local! {
    /// A task's decoded rows (f32) and its panel of B tiles (bf16), reused.
    static SCRATCH: RefCell<(Vec<f32>, Vec<u16>)> = const { RefCell::new((Vec::new(), Vec::new())) };
}

/// Columns `c0..c1` of the task's output (c0 a multiple of 16) from bf16 activations.
pub fn run(task: &Task<'_>, acts: &Bf16Activations) {
    let k = task.matrix.cols();
    assert_eq!(acts.k(), k, "bf16 activations of another width");
    assert!(
        task.c0.is_multiple_of(TILE_ROWS),
        "bf16 tasks start on a tile"
    );
    let groups = (task.c1 - task.c0).div_ceil(TILE_ROWS);
    SCRATCH.with(|scratch| {
        let (rows, panel) = &mut *scratch.borrow_mut();
        rows.resize(TILE_ROWS * k, 0.0);
        panel.resize(groups * TILE_ROWS * k, 0);
        for g in 0..groups {
            let first = task.c0 + g * TILE_ROWS;
            let count = TILE_ROWS.min(task.c1 - first);
            task.matrix
                .dequantize_rows(first, count, &mut rows[..count * k]);
            let group = &mut panel[g * TILE_ROWS * k..(g + 1) * TILE_ROWS * k];
            #[cfg(target_arch = "x86_64")]
            if count == TILE_ROWS {
                // SAFETY: AMX implies AVX-512 F/BW; 16 whole rows of k.
                unsafe { amx::pack_pairs_avx512(rows, k, group) };
                continue;
            }
            let views: Vec<&[f32]> = rows[..count * k].chunks_exact(k).collect();
            amx::pack_pairs(&views, k, group);
        }
        #[cfg(target_arch = "x86_64")]
        // SAFETY: the bf16 path is only chosen where `amx::available()`; the panel holds
        // `groups` groups of 16·k and the activations whole tiles of rows.
        unsafe {
            tiles(task, acts, panel, groups)
        };
    });
}

/// Every x tile against every group of the panel, two by two.
///
/// SAFETY: AMX is available; `panel` holds `groups` packed groups of the task's rows.
#[cfg(target_arch = "x86_64")]
unsafe fn tiles(task: &Task<'_>, acts: &Bf16Activations, panel: &[u16], groups: usize) {
    let k = task.matrix.cols();
    let m_tiles = task.m.div_ceil(TILE_ROWS);
    let mut c = [[0.0f32; TILE_ROWS * TILE_ROWS]; 4];
    amx::configure();
    for g in (0..groups).step_by(2) {
        let b_tiles = 2.min(groups - g);
        let b = [
            panel[g * TILE_ROWS * k..].as_ptr(),
            panel[(g + b_tiles - 1) * TILE_ROWS * k..].as_ptr(),
        ];
        for t in (0..m_tiles).step_by(2) {
            let a_tiles = 2.min(m_tiles - t);
            let a = acts.rows_from(t * TILE_ROWS).as_ptr();
            amx::product(a, k, a_tiles, b, b_tiles, k, &mut c);
            for i in 0..a_tiles {
                for j in 0..b_tiles {
                    let sums = &c[2 * i + j];
                    let (r0, c0) = ((t + i) * TILE_ROWS, task.c0 + (g + j) * TILE_ROWS);
                    let cols = (c0 + TILE_ROWS).min(task.c1) - c0;
                    for r in r0..(r0 + TILE_ROWS).min(task.m) {
                        let at = (r - r0) * TILE_ROWS;
                        task.out.write_run(r, c0, &sums[at..at + cols]);
                    }
                }
            }
        }
    }
    amx::release();
}

#[cfg(test)]
mod tests;
