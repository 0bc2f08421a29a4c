//! Times the int8 path's activation quantization (`Q8Activations::quantize`) of one row of a
//! few real widths: `cargo run --release -p ferrite-cpu --example q8_speed`.

use ferrite_cpu::kernels::q8_activations::Q8Activations;
use std::time::Instant;
fn main() {
    for k in [512usize, 1024, 8960] {
        let x: Vec<f32> = (0..k)
            .map(|i| ((i * 7919) % 1000) as f32 / 500.0 - 1.0)
            .collect();
        let mut a = Q8Activations::default();
        let reps = 20000;
        let t = Instant::now();
        for _ in 0..reps {
            a.quantize(std::hint::black_box(&x), 1, k);
        }
        println!(
            "k {k}: {:.3} us a row",
            t.elapsed().as_secs_f64() / reps as f64 * 1e6
        );
    }
}
