//! Times `matmul` on one random matrix of a real model's shape, for each ISA and a few batch
//! sizes: `cargo run --release -p ferrite-cpu --example matmul_speed -- [DTYPE] [N] [K]
//! [THREADS] [COPIES] [BATCH SIZES, comma-separated] [int8|bf16]` (`int8`: the opt-in int8
//! path; `bf16`: the bf16 path, AMX tiles above 16 rows and `bf16_decode` up to 16).

use std::sync::Arc;
use std::time::Instant;

use ferrite_cpu::kernels::matmul::matmul;
use ferrite_cpu::kernels::quant_matrix::QuantMatrix;
use ferrite_cpu::simd::available_isas;
use ferrite_model::weights::{DType, Storage, WeightTensor};

fn dtype(name: &str) -> DType {
    match name {
        "q4_0" => DType::Q4_0,
        "q4_1" => DType::Q4_1,
        "q5_0" => DType::Q5_0,
        "q8_0" => DType::Q8_0,
        "q4_k" => DType::Q4_K,
        "q6_k" => DType::Q6_K,
        "bf16" => DType::BF16,
        _ => DType::F32,
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let dt = dtype(args.get(1).map(String::as_str).unwrap_or("q5_0"));
    let n: usize = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(4864);
    let k: usize = args.get(3).and_then(|s| s.parse().ok()).unwrap_or(896);
    let threads: usize = args.get(4).and_then(|s| s.parse().ok()).unwrap_or(1);
    // Copies of the matrix cycled through, so that each product reads its weights from as far
    // away as a model's would (a model touches every matrix once per token).
    let copies: usize = args.get(5).and_then(|s| s.parse().ok()).unwrap_or(1);
    let batch_sizes: Vec<usize> = args
        .get(6)
        .map(|s| s.split(',').filter_map(|m| m.parse().ok()).collect())
        .unwrap_or_else(|| vec![1, 2, 4, 8, 64, 512]);
    // Bytes that decode to finite values: small scales everywhere (all-0x11 patterns).
    let mut bytes = vec![0x11u8; dt.row_bytes(k) * n];
    if matches!(dt, DType::BF16 | DType::F32) {
        bytes.iter_mut().for_each(|b| *b = 0x3c);
    }
    let tensor = WeightTensor {
        dtype: dt,
        shape: vec![n, k],
        storage: Storage::Owned(Arc::new(bytes)),
    };
    let int8 = args.get(7).is_some_and(|a| a == "int8");
    let bf16 = args.get(7).is_some_and(|a| a == "bf16");
    let matrices: Vec<QuantMatrix> = (0..copies)
        .map(|_| {
            let mut matrix = QuantMatrix::new(&tensor).expect("matrix");
            if int8 && !matrix.use_int8_activations() {
                panic!("{dt:?} has no int8 path on this machine");
            }
            if bf16 && !matrix.use_bf16() {
                panic!("{dt:?} has no bf16 path on this machine (AMX)");
            }
            matrix
        })
        .collect();
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .unwrap();
    for isa in available_isas() {
        for &m in &batch_sizes {
            let x = vec![0.5f32; m * k];
            let mut out = vec![0.0f32; m * n];
            let reps = (2_000_000_000 / (m * n * k)).clamp(3, 2000);
            pool.install(|| matmul(isa, &x, m, &matrices[0], &mut out));
            let t = Instant::now();
            for rep in 0..reps {
                let matrix = &matrices[rep % copies];
                pool.install(|| matmul(isa, &x, m, matrix, &mut out));
            }
            let secs = t.elapsed().as_secs_f64() / reps as f64;
            println!(
                "{dt:?}{} {n}x{k} {isa:?} m={m}: {:.3} ms, {:.2} GMAC/s, {:.1} GB/s of weights",
                match (int8, bf16) {
                    (true, _) => " int8",
                    (_, true) => " bf16",
                    _ => "",
                },
                secs * 1e3,
                (m * n * k) as f64 / secs / 1e9,
                (dt.row_bytes(k) * n) as f64 / secs / 1e9
            );
        }
    }
}
