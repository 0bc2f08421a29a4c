//! The fused one-token GEMVs (kernels/gemv_fused.cu) against the kernels they replace, bit for
//! bit: gemv_bf16_add against the GEMV then add_rmsnorm's residual add; gemv_norm_<act>
//! against add_rmsnorm, the GEMV and the gated activation; gemv_norm_rope against
//! add_rmsnorm, the GEMV and rope_kv_write. The unfused kernels are checked against f64
//! references in kernels.rs; here fusing must change no bit (each shape also takes the GEMV's
//! 4- and 8-warp splits). On a machine without a GPU each test prints SKIPPED.

mod common;

use common::*;
use ferrite_cuda::buffer::DeviceBuffer;
use ferrite_cuda::kernels::{AddRmsNormArgs, AttentionDims, LinearArgs, NormedInput, RopeKvArgs};
use ferrite_model::config::Activation;

/// Same bits, element by element (NaN poison included).
fn assert_same_bits(name: &str, fused: &[f32], unfused: &[f32]) {
    assert_eq!(fused.len(), unfused.len(), "{name}: lengths");
    let differ = fused
        .iter()
        .zip(unfused)
        .filter(|(a, b)| a.to_bits() != b.to_bits())
        .count();
    assert_eq!(
        differ,
        0,
        "{name}: {differ} of {} elements differ",
        fused.len()
    );
    println!("{name}: {} elements, same bits", fused.len());
}

/// add_rmsnorm of row 0 of `x` (no delta) into a fresh bf16 row.
fn normalise(ctx: &Ctx, x: &DeviceBuffer, weight: &DeviceBuffer, hidden: usize) -> DeviceBuffer {
    let out = poisoned::<u16>(ctx, hidden);
    ctx.kernels
        .add_rmsnorm(&AddRmsNormArgs {
            x: x.ptr(),
            delta: None,
            weight: weight.ptr(),
            rows: None,
            out: out.ptr(),
            hidden,
            eps: 1e-5,
            n: 1,
        })
        .unwrap();
    out
}

/// A residual row of mixed magnitudes, a norm weight and a bf16 weight matrix.
fn operands(seed: u64, rows: usize, hidden: usize) -> (Vec<f32>, Vec<f32>, Vec<f32>) {
    let mut r = rng(seed);
    let x = random(&mut r, hidden, 3.0);
    let norm_w = random(&mut r, hidden, 1.5);
    let w = bf16_round(&random(&mut r, rows * hidden, 0.05));
    (x, norm_w, w)
}

#[test]
fn residual_add_gemv_equals_gemv_then_add() {
    let Some(ctx) = gpu("gemv_bf16_add") else {
        return;
    };
    // Splits 1, 4 and 8 (gemv_split): an O projection, a long narrow one, a down projection
    // (rows a multiple of 4: add_rmsnorm adds float4s).
    for (rows, k) in [(1536usize, 1536usize), (304, 4104), (1536, 8960)] {
        let mut r = rng(rows as u64 + k as u64);
        let residual = random(&mut r, rows, 4.0);
        let input = bf16_round(&random(&mut r, k, 1.0));
        let w = bf16_round(&random(&mut r, rows * k, 0.05));
        let (xd, wd) = (dev(&ctx, &to_bf16(&input)), dev(&ctx, &to_bf16(&w)));
        let product = |y: &DeviceBuffer| LinearArgs {
            x: xd.ptr(),
            w: wd.ptr(),
            y: y.ptr(),
            n: 1,
            rows,
            k,
            ldy: rows,
        };
        // Unfused: the product into delta, then add_rmsnorm adds it to the residual.
        let (x_unfused, delta) = (dev(&ctx, &residual), poisoned::<f32>(&ctx, rows));
        ctx.kernels.gemv(&product(&delta)).unwrap();
        let ones = dev(&ctx, &vec![1.0f32; rows]);
        let scratch = poisoned::<u16>(&ctx, rows);
        ctx.kernels
            .add_rmsnorm(&AddRmsNormArgs {
                x: x_unfused.ptr(),
                delta: Some(delta.ptr()),
                weight: ones.ptr(),
                rows: None,
                out: scratch.ptr(),
                hidden: rows,
                eps: 1e-5,
                n: 1,
            })
            .unwrap();
        let x_fused = dev(&ctx, &residual);
        ctx.kernels.gemv_add(&product(&x_fused)).unwrap();
        assert_same_bits(
            &format!("residual {rows}x{k}"),
            &read_f32(&ctx, &x_fused, rows),
            &read_f32(&ctx, &x_unfused, rows),
        );
    }
}

#[test]
fn norm_gated_gemv_equals_norm_gemv_activation() {
    let Some(ctx) = gpu("gemv_norm_gated") else {
        return;
    };
    // 2 * inter rows over hidden: splits 1 (1.5B), 4 (a narrow MLP of a 4096 model), and a
    // hidden that is no multiple of 256 threads' float4s.
    for (hidden, inter) in [(1536usize, 8960usize), (4096, 1000), (1000, 304)] {
        let rows = 2 * inter;
        let (x, norm_w, w) = operands(hidden as u64, rows, hidden);
        let (xd, nd, wd) = (dev(&ctx, &x), dev(&ctx, &norm_w), dev(&ctx, &to_bf16(&w)));
        for activation in [Activation::Silu, Activation::GeluTanh] {
            let xn = normalise(&ctx, &xd, &nd, hidden);
            let gate_up = poisoned::<f32>(&ctx, rows);
            ctx.kernels
                .gemv(&LinearArgs {
                    x: xn.ptr(),
                    w: wd.ptr(),
                    y: gate_up.ptr(),
                    n: 1,
                    rows,
                    k: hidden,
                    ldy: rows,
                })
                .unwrap();
            let unfused = poisoned::<u16>(&ctx, inter);
            ctx.kernels
                .gated_activation(activation, gate_up.ptr(), false, unfused.ptr(), inter, 1)
                .unwrap();
            let fused = poisoned::<u16>(&ctx, inter);
            let norm = NormedInput {
                x: xd.ptr(),
                weight: nd.ptr(),
                eps: 1e-5,
                hidden,
            };
            ctx.kernels
                .gemv_norm_gated(&norm, wd.ptr(), inter, activation, fused.ptr())
                .unwrap();
            assert_same_bits(
                &format!("{activation:?} hidden={hidden} inter={inter}"),
                &read_bf16(&ctx, &fused, inter),
                &read_bf16(&ctx, &unfused, inter),
            );
        }
    }
}

#[test]
fn norm_rope_gemv_equals_norm_gemv_rope() {
    let Some(ctx) = gpu("gemv_norm_rope") else {
        return;
    };
    // (hidden, heads, kv heads, head_dim, interleaved, bias, slot): the 1.5B's attention
    // (split 1), the 8B's (split 4), a 64-wide interleaved one, and a padding token (slot -1)
    // that writes no K/V.
    let cases = [
        (1536usize, 12usize, 2usize, 128usize, false, true, 37i32),
        (4096, 32, 8, 128, false, false, 5),
        (1000, 8, 4, 64, true, true, 16),
        (1536, 12, 2, 128, false, true, -1),
    ];
    for (hidden, heads, kv_heads, head_dim, interleaved, with_bias, slot) in cases {
        let dims = AttentionDims {
            num_heads: heads,
            num_kv_heads: kv_heads,
            head_dim,
        };
        let (q_dim, kv_dim) = (heads * head_dim, kv_heads * head_dim);
        let rows = q_dim + 2 * kv_dim;
        let (x, norm_w, w) = operands(hidden as u64 + 7, rows, hidden);
        let mut r = rng(rows as u64);
        let bias = random(&mut r, rows, 0.5);
        let inv: Vec<f32> = (0..head_dim / 2)
            .map(|i| 1.0 / 10_000f32.powf((2 * i) as f32 / head_dim as f32))
            .collect();
        let (xd, nd, wd) = (dev(&ctx, &x), dev(&ctx, &norm_w), dev(&ctx, &to_bf16(&w)));
        let (bd, pd, sd, id) = (
            dev(&ctx, &bias),
            dev(&ctx, &[1234i32]),
            dev(&ctx, &[slot]),
            dev(&ctx, &inv),
        );
        let (page_size, pages) = (16usize, 4usize);
        let cache_len = pages * page_size * kv_dim;
        let outputs = || {
            (
                poisoned::<u16>(&ctx, q_dim),
                poisoned::<u16>(&ctx, cache_len),
                poisoned::<u16>(&ctx, cache_len),
            )
        };
        let rope = |qkv, q: &DeviceBuffer, kc: &DeviceBuffer, vc: &DeviceBuffer| RopeKvArgs {
            dims,
            qkv,
            qkv_bf16: false,
            bias: with_bias.then(|| bd.ptr()),
            positions: pd.ptr(),
            slots: sd.ptr(),
            inv_freq: id.ptr(),
            q_out: q.ptr(),
            k_cache: kc.ptr(),
            v_cache: vc.ptr(),
            page_size,
            interleaved,
            n: 1,
        };
        let xn = normalise(&ctx, &xd, &nd, hidden);
        let qkv = poisoned::<f32>(&ctx, rows);
        ctx.kernels
            .gemv(&LinearArgs {
                x: xn.ptr(),
                w: wd.ptr(),
                y: qkv.ptr(),
                n: 1,
                rows,
                k: hidden,
                ldy: rows,
            })
            .unwrap();
        let (q1, k1, v1) = outputs();
        ctx.kernels
            .rope_kv_write(&rope(qkv.ptr(), &q1, &k1, &v1))
            .unwrap();
        let (q2, k2, v2) = outputs();
        let norm = NormedInput {
            x: xd.ptr(),
            weight: nd.ptr(),
            eps: 1e-5,
            hidden,
        };
        ctx.kernels
            .gemv_norm_rope(&norm, wd.ptr(), &rope(qkv.ptr(), &q2, &k2, &v2))
            .unwrap();
        let tag = format!("hidden={hidden} heads={heads}/{kv_heads}x{head_dim} slot={slot}");
        let read = |b: &DeviceBuffer, n| read_bf16(&ctx, b, n);
        assert_same_bits(&format!("q {tag}"), &read(&q2, q_dim), &read(&q1, q_dim));
        assert_same_bits(
            &format!("k {tag}"),
            &read(&k2, cache_len),
            &read(&k1, cache_len),
        );
        assert_same_bits(
            &format!("v {tag}"),
            &read(&v2, cache_len),
            &read(&v1, cache_len),
        );
        // The unfused kernel wrote this token's K row (or nothing for padding): the
        // comparison covered written values, not two untouched caches.
        let written = read(&k1, cache_len).iter().filter(|v| !v.is_nan()).count();
        assert_eq!(
            written,
            if slot < 0 { 0 } else { kv_dim },
            "{tag}: K written"
        );
    }
}
