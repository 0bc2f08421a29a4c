//! The element-wise and matrix kernels against CPU references in f64, on random inputs with
//! sizes that are not multiples of the tiles, into poisoned output buffers. On a machine
//! without a GPU each test prints SKIPPED.

mod common;

use common::*;
use ferrite_cuda::gemm::Gemm;
use ferrite_cuda::launchers::{
    AddRmsNormArgs, AttentionDims, DummyFormat, LinearArgs, Lookup, RmsNormRowsArgs, RopeKvArgs,
    GEMV_MAX_TOKENS,
};
use ferrite_cuda::linear::{Linear, Matrix};
use ferrite_model::config::Activation;
use ferrite_model::dummy::{preset, tensor_inits};

#[test]
fn add_rmsnorm_matches_reference_with_and_without_rows_and_bias() {
    let Some(ctx) = gpu("add_rmsnorm") else {
        return;
    };
    let mut r = rng(1);
    let (n, hidden, eps) = (13usize, 1004usize, 1e-6f32);
    let x = random(&mut r, n * hidden, 2.0);
    let delta = random(&mut r, n * hidden, 1.0);
    let w = random(&mut r, hidden, 1.5);
    let (xd, dd, wd) = (dev(&ctx, &x), dev(&ctx, &delta), dev(&ctx, &w));
    let rows: Vec<i32> = vec![12, 3, 7];
    let rd = dev(&ctx, &rows);
    let bias = random(&mut r, hidden, 1.0);
    let bd = dev(&ctx, &bias);
    for (with_rows, with_bias) in [(false, false), (true, false), (false, true)] {
        // x + delta (+ the output projection's bias, gpt-oss).
        let added = |row: usize, j: usize| {
            let b = if with_bias { bias[j] as f64 } else { 0.0 };
            x[row * hidden + j] as f64 + delta[row * hidden + j] as f64 + b
        };
        upload_again(&ctx, &xd, &x);
        let out_rows = if with_rows { rows.len() } else { n };
        let out = poisoned::<u16>(&ctx, out_rows * hidden);
        let rows_ptr = with_rows.then(|| rd.ptr());
        ctx.kernels
            .add_rmsnorm(&AddRmsNormArgs {
                x: xd.ptr(),
                delta: Some(dd.ptr()),
                bias: with_bias.then(|| bd.ptr()),
                weight: wd.ptr(),
                rows: rows_ptr,
                out: out.ptr(),
                hidden,
                eps,
                n: out_rows,
            })
            .unwrap();
        let got = read_bf16(&ctx, &out, out_rows * hidden);
        let mut want = Vec::new();
        for i in 0..out_rows {
            let row = if with_rows { rows[i] as usize } else { i };
            let v: Vec<f64> = (0..hidden).map(|j| added(row, j)).collect();
            let inv =
                1.0 / (v.iter().map(|a| a * a).sum::<f64>() / hidden as f64 + eps as f64).sqrt();
            want.extend(v.iter().zip(&w).map(|(a, &g)| a * inv * g as f64));
        }
        let case = format!("add_rmsnorm rows={with_rows} bias={with_bias}");
        check(&case, &got, &want, 8e-3);
        // The residual was updated in place.
        let x_after = read_f32(&ctx, &xd, n * hidden);
        let row = if with_rows { rows[0] as usize } else { 0 };
        let want_x: Vec<f64> = (0..hidden).map(|j| added(row, j)).collect();
        check(
            "residual",
            &x_after[row * hidden..(row + 1) * hidden],
            &want_x,
            1e-6,
        );
    }
}

/// Q/K heads normalised in place inside QKV rows (the K part's rows start q_dim floats in),
/// and whole rows (heads 1, the post norms); the V part and the rows' padding stay untouched.
#[test]
fn rmsnorm_rows_match_reference_for_heads_and_whole_rows() {
    let Some(ctx) = gpu("rmsnorm_rows") else {
        return;
    };
    let mut r = rng(7);
    let eps = 1e-6f32;
    // (heads, dim, first row's offset in floats, token stride, tokens): Q heads of a QKV row
    // (6 heads of 64, row 6*64 + 2*2*64), K heads of the same rows, a whole 1004-wide row.
    for (label, heads, dim, start, stride, n) in [
        ("q heads", 6usize, 64usize, 0usize, 640usize, 9usize),
        ("k heads", 2, 64, 384, 640, 9),
        ("k heads hd128", 2, 128, 6 * 128, 10 * 128, 5),
        ("whole rows", 1, 1004, 0, 1004, 13),
    ] {
        let x = random(&mut r, n * stride, 3.0);
        let w = random(&mut r, dim, 1.5);
        let (xd, wd) = (dev(&ctx, &x), dev(&ctx, &w));
        ctx.kernels
            .rmsnorm_rows(&RmsNormRowsArgs {
                x: xd.ptr().offset(4 * start),
                weight: wd.ptr(),
                heads,
                token_stride: stride,
                dim,
                eps,
                n,
            })
            .unwrap();
        let got = read_f32(&ctx, &xd, n * stride);
        let mut want: Vec<f64> = x.iter().map(|&v| v as f64).collect();
        for t in 0..n {
            for h in 0..heads {
                let row = &mut want[t * stride + start + h * dim..][..dim];
                let ms = row.iter().map(|a| a * a).sum::<f64>() / dim as f64;
                let inv = 1.0 / (ms + eps as f64).sqrt();
                row.iter_mut()
                    .zip(&w)
                    .for_each(|(a, &g)| *a *= inv * g as f64);
            }
        }
        check(&format!("rmsnorm_rows {label}"), &got, &want, 1e-5);
    }
}

fn upload_again(ctx: &Ctx, buf: &ferrite_cuda::buffer::DeviceBuffer, data: &[f32]) {
    ferrite_cuda::buffer::upload(stream(ctx), buf.ptr(), data).unwrap();
}

#[test]
fn embedding_and_gated_activations_match_reference() {
    let Some(ctx) = gpu("embedding/silu_mul/gelu_tanh_mul") else {
        return;
    };
    let mut r = rng(2);
    let (vocab, hidden) = (301usize, 264usize);
    let table = bf16_round(&random(&mut r, vocab * hidden, 1.0));
    let tokens: Vec<i32> = vec![300, 0, 17, 17, 151];
    let (td, tokd) = (dev(&ctx, &to_bf16(&table)), dev(&ctx, &tokens));
    let x = poisoned::<f32>(&ctx, tokens.len() * hidden);
    ctx.kernels
        .embedding(
            td.ptr(),
            &Lookup {
                tokens: tokd.ptr(),
                x: x.ptr(),
                hidden,
                scale: 1.0,
                n: tokens.len(),
            },
        )
        .unwrap();
    let got = read_f32(&ctx, &x, tokens.len() * hidden);
    let want: Vec<f64> = tokens
        .iter()
        .flat_map(|&t| {
            table[t as usize * hidden..(t as usize + 1) * hidden]
                .iter()
                .map(|&v| v as f64)
        })
        .collect();
    check("embedding", &got, &want, 0.0);
    // Scaled (gemma: sqrt(hidden)), one f32 product per element.
    let scale = 25.298_221f32;
    ctx.kernels
        .embedding(
            td.ptr(),
            &Lookup {
                tokens: tokd.ptr(),
                x: x.ptr(),
                hidden,
                scale: scale,
                n: tokens.len(),
            },
        )
        .unwrap();
    let got = read_f32(&ctx, &x, tokens.len() * hidden);
    let want: Vec<f64> = want.iter().map(|&v| (v as f32 * scale) as f64).collect();
    check("embedding scaled", &got, &want, 0.0);

    // Gate/up rows as f32 and as bf16 (what cuBLAS writes for prompt chunks): the same values.
    let (n, inter) = (7usize, 1004usize);
    let gu = bf16_round(&random(&mut r, n * 2 * inter, 4.0));
    let (gu_f32, gu_bf16) = (dev(&ctx, &gu), dev(&ctx, &to_bf16(&gu)));
    let silu = |g: f64| g / (1.0 + (-g).exp());
    let gelu = |g: f64| {
        let inner = (2.0 / std::f64::consts::PI).sqrt() * (g + 0.044715 * g * g * g);
        0.5 * g * (1.0 + inner.tanh())
    };
    let cases: [(Activation, &str, &dyn Fn(f64) -> f64); 2] = [
        (Activation::Silu, "silu_mul", &silu),
        (Activation::GeluTanh, "gelu_tanh_mul", &gelu),
    ];
    for (activation, name, act) in cases {
        let want: Vec<f64> = (0..n * inter)
            .map(|i| {
                let (t, j) = (i / inter, i % inter);
                act(gu[t * 2 * inter + j] as f64) * gu[t * 2 * inter + inter + j] as f64
            })
            .collect();
        for (input, bf16_in) in [(&gu_f32.ptr(), false), (&gu_bf16.ptr(), true)] {
            let out = poisoned::<u16>(&ctx, n * inter);
            ctx.kernels
                .gated_activation(activation, *input, bf16_in, out.ptr(), inter, n)
                .unwrap();
            let got = read_bf16(&ctx, &out, n * inter);
            check(&format!("{name} (bf16 in: {bf16_in})"), &got, &want, 8e-3);
        }
    }
}

#[test]
fn rope_bias_and_kv_write_match_reference() {
    let Some(ctx) = gpu("rope_kv_write") else {
        return;
    };
    let mut r = rng(3);
    for (interleaved, head_dim, page_size) in [
        (false, 128, 16),
        (true, 64, 1),
        (true, 128, 16),
        (false, 64, 1),
    ] {
        let dims = AttentionDims {
            num_heads: 6,
            num_kv_heads: 2,
            head_dim,
        };
        let (q_dim, kv_dim) = (6 * head_dim, 2 * head_dim);
        let n = 9usize;
        let num_pages = 40usize;
        // bf16 values, so that f32 and bf16 QKV rows (rope_kv_write_bf16) hold the same numbers.
        let qkv = bf16_round(&random(&mut r, n * (q_dim + 2 * kv_dim), 2.0));
        let bias = random(&mut r, q_dim + 2 * kv_dim, 0.5);
        let positions: Vec<i32> = (0..n as i32).map(|i| i * 97 + 3).collect();
        // Distinct slots, one padding token (-1) that must write nothing.
        let mut slots: Vec<i32> = (0..n as i32)
            .map(|i| (i * 3 + 1) * (page_size as i32) + (i % page_size as i32))
            .collect();
        slots[4] = -1;
        let theta = 10_000.0f32;
        let inv: Vec<f32> = (0..head_dim / 2)
            .map(|i| 1.0 / theta.powf((2 * i) as f32 / head_dim as f32))
            .collect();
        let (qd, bd, pd, sd, id) = (
            dev(&ctx, &qkv),
            dev(&ctx, &bias),
            dev(&ctx, &positions),
            dev(&ctx, &slots),
            dev(&ctx, &inv),
        );
        let qkv_bf16_dev = dev(&ctx, &to_bf16(&qkv));
        for qkv_bf16 in [false, true] {
            let q_out = poisoned::<u16>(&ctx, n * q_dim);
            let cache_len = num_pages * page_size * kv_dim;
            let (kc, vc) = (
                poisoned::<u16>(&ctx, cache_len),
                poisoned::<u16>(&ctx, cache_len),
            );
            ctx.kernels
                .rope_kv_write(&RopeKvArgs {
                    dims,
                    qkv: if qkv_bf16 {
                        qkv_bf16_dev.ptr()
                    } else {
                        qd.ptr()
                    },
                    row_stride: q_dim + 2 * kv_dim,
                    qkv_bf16,
                    bias: Some(bd.ptr()),
                    positions: pd.ptr(),
                    slots: sd.ptr(),
                    inv_freq: id.ptr(),
                    rotary_dim: dims.head_dim,
                    q_out: q_out.ptr(),
                    k_cache: kc.ptr(),
                    v_cache: vc.ptr(),
                    page_size,
                    interleaved,
                    n,
                })
                .unwrap();
            let q_got = read_bf16(&ctx, &q_out, n * q_dim);
            let k_got = read_bf16(&ctx, &kc, cache_len);
            let v_got = read_bf16(&ctx, &vc, cache_len);
            let rotate = |v: &mut [f64], pos: f64| {
                let half = head_dim / 2;
                for head in v.chunks_mut(head_dim) {
                    for i in 0..half {
                        let (a, b) = if interleaved {
                            (2 * i, 2 * i + 1)
                        } else {
                            (i, i + half)
                        };
                        let angle = pos * inv[i] as f64;
                        let (xa, xb) = (head[a], head[b]);
                        head[a] = xa * angle.cos() - xb * angle.sin();
                        head[b] = xb * angle.cos() + xa * angle.sin();
                    }
                }
            };
            let (mut q_want, mut k_want_all, mut k_got_all, mut v_want_all, mut v_got_all) =
                (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
            for t in 0..n {
                let row = &qkv[t * (q_dim + 2 * kv_dim)..(t + 1) * (q_dim + 2 * kv_dim)];
                let with_bias: Vec<f64> = row
                    .iter()
                    .zip(&bias)
                    .map(|(&a, &b)| a as f64 + b as f64)
                    .collect();
                let mut q = with_bias[..q_dim].to_vec();
                let mut k = with_bias[q_dim..q_dim + kv_dim].to_vec();
                rotate(&mut q, positions[t] as f64);
                rotate(&mut k, positions[t] as f64);
                q_want.extend(q);
                if slots[t] < 0 {
                    continue;
                }
                let (page, off) = (slots[t] as usize / page_size, slots[t] as usize % page_size);
                for h in 0..2 {
                    let at = ((page * 2 + h) * page_size + off) * head_dim;
                    k_got_all.extend_from_slice(&k_got[at..at + head_dim]);
                    v_got_all.extend_from_slice(&v_got[at..at + head_dim]);
                    k_want_all.extend_from_slice(&k[h * head_dim..(h + 1) * head_dim]);
                    v_want_all.extend_from_slice(
                        &with_bias
                            [q_dim + kv_dim + h * head_dim..q_dim + kv_dim + (h + 1) * head_dim],
                    );
                }
            }
            let tag = format!(
                "interleaved={interleaved} hd={head_dim} page={page_size} bf16 in={qkv_bf16}"
            );
            check(&format!("rope q {tag}"), &q_got, &q_want, 8e-3);
            check(&format!("rope k {tag}"), &k_got_all, &k_want_all, 8e-3);
            check(&format!("v {tag}"), &v_got_all, &v_want_all, 8e-3);
            // Slots nobody wrote stay poisoned: the padding token wrote nothing.
            let written = k_got.iter().filter(|v| !v.is_nan()).count();
            assert_eq!(written, (n - 1) * kv_dim, "{tag}: K elements written");
        }
    }
}

#[test]
fn gemv_and_cublas_match_reference() {
    let Some(ctx) = gpu("gemv/cublas") else {
        return;
    };
    let gemm = Gemm::new(stream(&ctx), false).unwrap();
    let mut r = rng(4);
    // The second and third shapes are long and narrow: the GEMV splits each row over 4 and
    // 8 warps there. The last two have whole 128-element blocks: 2..8 tokens go through the
    // tensor cores there (gemv_mma.cu), with a ragged last tile of rows.
    for (rows, k) in [
        (1003usize, 1048usize),
        (301, 4104),
        (97, 8200),
        (1003, 1536),
        (97, 8960),
    ] {
        let w = bf16_round(&random(&mut r, rows * k, 0.05));
        let wd = dev(&ctx, &to_bf16(&w));
        for n in [1usize, 2, 3, 5, 8, 9, 37] {
            let x = bf16_round(&random(&mut r, n * k, 1.0));
            let xd = dev(&ctx, &to_bf16(&x));
            let want: Vec<f64> = (0..n * rows)
                .map(|i| {
                    let (t, row) = (i / rows, i % rows);
                    (0..k)
                        .map(|j| x[t * k + j] as f64 * w[row * k + j] as f64)
                        .sum()
                })
                .collect();
            let y = poisoned::<f32>(&ctx, n * rows);
            let product = |y: &ferrite_cuda::buffer::DeviceBuffer| LinearArgs {
                x: xd.ptr(),
                w: wd.ptr(),
                y: y.ptr(),
                n,
                rows,
                k,
                ldy: rows,
            };
            gemm.bf16_product(&ctx.kernels, &product(&y)).unwrap();
            check(
                &format!("linear {rows}x{k} n={n}"),
                &read_f32(&ctx, &y, n * rows),
                &want,
                1e-5,
            );
            let y2 = poisoned::<f32>(&ctx, n * rows);
            gemm.cublas(&product(&y2)).unwrap();
            check(
                &format!("cublas {rows}x{k} n={n}"),
                &read_f32(&ctx, &y2, n * rows),
                &want,
                1e-5,
            );
            // The residual epilogue: y0 + x W^T where cuBLAS runs the product (n > 8),
            // nothing launched (false) below that; and the same product written as bf16.
            let lin = Linear::single(Matrix::bf16(wd.ptr()), rows, k);
            let y0 = random(&mut r, n * rows, 1.0);
            let y3 = dev(&ctx, &y0);
            let added = gemm.linear_add(xd.ptr(), &lin, y3.ptr(), n).unwrap();
            assert_eq!(added, n > GEMV_MAX_TOKENS, "linear_add ran at n={n}");
            if added {
                let want_sum: Vec<f64> = want.iter().zip(&y0).map(|(a, b)| a + *b as f64).collect();
                check(
                    &format!("cublas y += {rows}x{k} n={n}"),
                    &read_f32(&ctx, &y3, n * rows),
                    &want_sum,
                    1e-5,
                );
                let y4 = poisoned::<u16>(&ctx, n * rows);
                assert!(gemm.linear_bf16(xd.ptr(), &lin, y4.ptr(), n).unwrap());
                check(
                    &format!("cublas bf16 {rows}x{k} n={n}"),
                    &read_bf16(&ctx, &y4, n * rows),
                    &want,
                    8e-3,
                );
            }
        }
    }
}

#[test]
fn device_dummy_weights_equal_the_host_generator() {
    let Some(ctx) = gpu("dummy_fill") else { return };
    let config = preset("tiny").unwrap();
    for init in tensor_inits(&config, 11).into_iter().take(6) {
        let n = init.len();
        let mut host = vec![0u16; n];
        init.fill(&mut host);
        let out = poisoned::<u16>(&ctx, n);
        ctx.kernels
            .dummy_fill(
                out.ptr(),
                n,
                init.key,
                init.scale,
                init.offset,
                DummyFormat::Bf16,
            )
            .unwrap();
        let mut got = vec![0u16; n];
        ferrite_cuda::buffer::download(stream(&ctx), out.ptr(), &mut got).unwrap();
        let same = got.iter().zip(&host).filter(|(a, b)| a == b).count();
        println!("dummy {}: {same}/{n} bitwise equal", init.name);
        assert_eq!(same, n, "{}", init.name);
        // f32 with gemma's norm offset folded in: the host value + 1, computed in f32.
        let out = poisoned::<f32>(&ctx, n);
        let format = DummyFormat::F32 { shift: 1.0 };
        ctx.kernels
            .dummy_fill(out.ptr(), n, init.key, init.scale, init.offset, format)
            .unwrap();
        let got = read_f32(&ctx, &out, n);
        let same = (0..n)
            .filter(|&i| got[i].to_bits() == (init.value(i) + 1.0).to_bits())
            .count();
        println!("dummy f32 + 1 {}: {same}/{n} bitwise equal", init.name);
        assert_eq!(same, n, "{} as f32 + 1", init.name);
    }
}
