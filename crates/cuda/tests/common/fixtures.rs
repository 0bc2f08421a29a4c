//! The repository's fixtures as the GPU tests read them, and the CUDA options their models run
//! with.

use std::path::PathBuf;

use ferrite_cuda::CudaOptions;
use serde_json::Value;

/// `rel` under the repository's fixtures/: in the source tree the test was built in, or under
/// the working directory (a test binary carried to the device runs from the repository root).
pub fn fixture_path(rel: &str) -> PathBuf {
    let built = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures");
    let root = if built.is_dir() {
        built
    } else {
        PathBuf::from("fixtures")
    };
    root.join(rel)
}

/// A JSON array of token ids.
pub fn ids(v: &Value) -> Vec<u32> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_u64().unwrap() as u32)
        .collect()
}

/// The CUDA backend of the model tests: up to 8 sequences and 512 tokens a step, decode graphs
/// up to batch 8 unless `eager`.
pub fn test_options(eager: bool, batch_invariant: bool) -> CudaOptions {
    CudaOptions {
        device: 0,
        max_num_seqs: 8,
        max_num_batched_tokens: 512,
        enforce_eager: eager,
        cuda_graph_max_bs: 8,
        gpu_memory_utilization: 0.9,
        batch_invariant,
    }
}
