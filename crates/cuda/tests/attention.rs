//! Paged decode (split-K) and prefill attention against an f64 reference, for page sizes 1
//! and 16, head sizes 64 and 128, query groups 1..7, contexts that are not tile multiples;
//! then the same with sliding windows (shorter and longer than the contexts, 1, not page
//! multiples) and a score scale other than 1/sqrt(head_dim) (gemma3's).

mod common;

use common::*;
use ferrite_cuda::launchers::{AttentionDims, AttentionMask, DecodeArgs, PrefillArgs};
use rand::seq::SliceRandom;

struct Cache {
    k: Vec<f32>,
    v: Vec<f32>,
    pages: Vec<i32>,
    page_offsets: Vec<i32>,
}

/// A random bf16 cache holding `ctx[s]` tokens of each sequence on shuffled pages.
fn cache(
    r: &mut rand::rngs::StdRng,
    ctx: &[usize],
    kv_heads: usize,
    hd: usize,
    page_size: usize,
) -> Cache {
    let per_seq: Vec<usize> = ctx.iter().map(|c| c.div_ceil(page_size)).collect();
    let total: usize = per_seq.iter().sum::<usize>() + 3;
    let mut ids: Vec<i32> = (0..total as i32).collect();
    ids.shuffle(r);
    let (mut pages, mut page_offsets) = (Vec::new(), Vec::new());
    for &n in &per_seq {
        page_offsets.push(pages.len() as i32);
        pages.extend(ids.drain(..n));
    }
    let len = total * kv_heads * page_size * hd;
    Cache {
        k: bf16_round(&random(r, len, 1.5)),
        v: bf16_round(&random(r, len, 1.0)),
        pages,
        page_offsets,
    }
}

fn at(c: &Cache, s: usize, pos: usize, h: usize, kv_heads: usize, hd: usize, ps: usize) -> usize {
    let page = c.pages[c.page_offsets[s] as usize + pos / ps] as usize;
    ((page * kv_heads + h) * ps + pos % ps) * hd
}

/// softmax(q·K * scale) V over the positions of sequence s, KV head h, that a query at
/// position `last` sees: all of 0..=last, or the last `window` of them; with `sink` (the
/// query head's, gpt-oss) in the softmax's denominator.
#[allow(clippy::too_many_arguments)]
fn reference(
    c: &Cache,
    q: &[f32],
    s: usize,
    last: usize,
    h: usize,
    kv_heads: usize,
    hd: usize,
    ps: usize,
    mask: AttentionMask,
    sink: Option<f64>,
) -> Vec<f64> {
    let first = match mask.window {
        0 => 0,
        w => (last + 1).saturating_sub(w),
    };
    let scores: Vec<f64> = (first..=last)
        .map(|p| {
            let o = at(c, s, p, h, kv_heads, hd, ps);
            (0..hd)
                .map(|i| q[i] as f64 * c.k[o + i] as f64)
                .sum::<f64>()
                * mask.scale as f64
        })
        .collect();
    let m = scores.iter().cloned().fold(f64::MIN, f64::max);
    // A sink joins the denominator only.
    let z: f64 =
        scores.iter().map(|x| (x - m).exp()).sum::<f64>() + sink.map_or(0.0, |s| (s - m).exp());
    let mut out = vec![0.0; hd];
    for (p, sc) in (first..=last).zip(&scores) {
        let o = at(c, s, p, h, kv_heads, hd, ps);
        for i in 0..hd {
            out[i] += (sc - m).exp() / z * c.v[o + i] as f64;
        }
    }
    out
}

#[test]
fn decode_attention_matches_reference() {
    let Some(ctx) = gpu("attention_decode") else {
        return;
    };
    let mut r = rng(5);
    for (hd, heads, kv_heads, ps, splits) in [
        (128, 12, 2, 16, 1),
        (128, 12, 2, 16, 5),
        (64, 14, 2, 1, 3),
        (128, 32, 8, 1, 1),
        (64, 9, 3, 16, 32),
        (128, 4, 4, 16, 2),
        (256, 4, 1, 16, 1),
        (256, 8, 2, 16, 5),
    ] {
        let mask = AttentionMask::causal(hd);
        decode_case(&ctx, &mut r, (hd, heads, kv_heads, ps, splits), mask, None);
    }
}

/// Windows of 1, 32 (the fixtures'), 100 and 4096 (longer than every context: no effect), a
/// page-unaligned 37, with gemma3's scale 24^-0.5, over split counts that leave some splits
/// with nothing in the window.
#[test]
fn decode_attention_with_sliding_window_matches_reference() {
    let Some(ctx) = gpu("attention_decode window") else {
        return;
    };
    let mut r = rng(15);
    let scale = 1.0 / 24f32.sqrt();
    for (shape, window) in [
        ((128, 12, 2, 16, 1), 32),
        ((128, 12, 2, 16, 5), 32),
        ((64, 14, 2, 1, 3), 37),
        ((64, 9, 3, 16, 32), 100),
        ((128, 4, 4, 16, 2), 1),
        ((64, 8, 2, 16, 4), 4096),
        ((256, 4, 1, 16, 3), 32),
    ] {
        let mask = AttentionMask {
            scale,
            window,
            sinks: None,
        };
        decode_case(&ctx, &mut r, shape, mask, None);
    }
}

/// One decode launch over six sequences of various context lengths against the reference.
fn decode_case(
    ctx: &Ctx,
    r: &mut rand::rngs::StdRng,
    (hd, heads, kv_heads, ps, splits): (usize, usize, usize, usize, usize),
    mask: AttentionMask,
    sinks: Option<&[f32]>,
) {
    let sinks_dev = sinks.map(|v| dev(ctx, v));
    let mask = AttentionMask {
        sinks: sinks_dev.as_ref().map(|b| b.ptr()),
        ..mask
    };
    let sink_of = |head: usize| sinks.map(|v| v[head] as f64);
    let dims = AttentionDims {
        num_heads: heads,
        num_kv_heads: kv_heads,
        head_dim: hd,
    };
    let ctx_lens = [1usize, 63, 64, 200, 1031, 7];
    let c = cache(r, &ctx_lens, kv_heads, hd, ps);
    let n = ctx_lens.len();
    // Query rows deliberately not in sequence order.
    let q_rows: Vec<i32> = (0..n as i32).rev().collect();
    let q = bf16_round(&random(r, n * heads * hd, 1.0));
    let (kd, vd, pd, od) = (
        dev(ctx, &to_bf16(&c.k)),
        dev(ctx, &to_bf16(&c.v)),
        dev(ctx, &c.pages),
        dev(ctx, &c.page_offsets),
    );
    let ctxd = dev(ctx, &ctx_lens.iter().map(|&x| x as i32).collect::<Vec<_>>());
    let (qd, rowsd) = (dev(ctx, &to_bf16(&q)), dev(ctx, &q_rows));
    let out = poisoned::<u16>(ctx, n * heads * hd);
    let part_acc = poisoned::<f32>(ctx, n * heads * splits * hd);
    let part_ml = poisoned::<f32>(ctx, n * heads * splits * 2);
    let seq_splits = poisoned::<i32>(ctx, n);
    ctx.kernels
        .attention_decode(&DecodeArgs {
            dims,
            mask,
            q: qd.ptr(),
            k_cache: kd.ptr(),
            v_cache: vd.ptr(),
            pages: pd.ptr(),
            page_offsets: od.ptr(),
            ctx_lens: ctxd.ptr(),
            q_rows: rowsd.ptr(),
            out: out.ptr(),
            part_acc: part_acc.ptr(),
            part_ml: part_ml.ptr(),
            seq_splits: seq_splits.ptr(),
            page_size: ps,
            num_seqs: n,
            num_splits: splits,
        })
        .unwrap();
    let got = read_bf16(ctx, &out, n * heads * hd);
    let group = heads / kv_heads;
    let mut want = vec![0.0; n * heads * hd];
    for s in 0..n {
        let row = q_rows[s] as usize;
        for head in 0..heads {
            let qv = &q[(row * heads + head) * hd..][..hd];
            let last = ctx_lens[s] - 1;
            let o = reference(
                &c,
                qv,
                s,
                last,
                head / group,
                kv_heads,
                hd,
                ps,
                mask,
                sink_of(head),
            );
            want[(row * heads + head) * hd..][..hd].copy_from_slice(&o);
        }
    }
    check(
        &format!(
            "decode hd={hd} heads={heads}/{kv_heads} page={ps} splits={splits} window={} scale={} \
             sinks={}",
            mask.window,
            mask.scale,
            sinks.is_some()
        ),
        &got,
        &want,
        1e-2,
    );
}

#[test]
fn prefill_attention_over_a_paged_prefix_matches_reference() {
    let Some(ctx) = gpu("attention_prefill") else {
        return;
    };
    let mut r = rng(6);
    for (hd, heads, kv_heads, ps) in [
        (128, 12, 2, 16),
        (64, 14, 2, 1),
        (128, 32, 8, 16),
        (64, 6, 6, 1),
        (256, 4, 1, 16),
        (256, 8, 2, 1),
    ] {
        let mask = AttentionMask::causal(hd);
        prefill_case(&ctx, &mut r, (hd, heads, kv_heads, ps), mask, None);
    }
}

/// Windows of 32 (the fixtures'), 1, 37, 70 and 4096 (no effect), with gemma3's scale: chunks
/// that start inside and beyond the window, row tiles whose earliest row's window starts
/// mid-tile.
#[test]
fn prefill_attention_with_sliding_window_matches_reference() {
    let Some(ctx) = gpu("attention_prefill window") else {
        return;
    };
    let mut r = rng(16);
    let scale = 1.0 / 24f32.sqrt();
    for (shape, window) in [
        ((128, 12, 2, 16), 32),
        ((64, 14, 2, 1), 37),
        ((128, 32, 8, 16), 1),
        ((64, 6, 6, 1), 70),
        ((64, 8, 2, 16), 4096),
        ((256, 8, 2, 16), 32),
    ] {
        let mask = AttentionMask {
            scale,
            window,
            sinks: None,
        };
        prefill_case(&ctx, &mut r, shape, mask, None);
    }
}

/// One prefill launch over five chunks (fresh prompts, chunks after a cached prefix, tiny
/// chunks) against the reference.
fn prefill_case(
    ctx: &Ctx,
    r: &mut rand::rngs::StdRng,
    (hd, heads, kv_heads, ps): (usize, usize, usize, usize),
    mask: AttentionMask,
    sinks: Option<&[f32]>,
) {
    let sinks_dev = sinks.map(|v| dev(ctx, v));
    let mask = AttentionMask {
        sinks: sinks_dev.as_ref().map(|b| b.ptr()),
        ..mask
    };
    let sink_of = |head: usize| sinks.map(|v| v[head] as f64);
    let dims = AttentionDims {
        num_heads: heads,
        num_kv_heads: kv_heads,
        head_dim: hd,
    };
    // (cached prefix, chunk length): fresh prompts, chunks after a prefix, tiny chunks.
    let chunks = [(0usize, 130usize), (37, 64), (200, 2), (0, 1), (5, 77)];
    let totals: Vec<usize> = chunks.iter().map(|(p, l)| p + l).collect();
    let c = cache(r, &totals, kv_heads, hd, ps);
    let n_tok: usize = chunks.iter().map(|c| c.1).sum();
    let q = bf16_round(&random(r, n_tok * heads * hd, 1.0));
    let (mut q_starts, mut q_lens, mut pos0s) = (Vec::new(), Vec::new(), Vec::new());
    let mut row = 0;
    for &(pre, len) in &chunks {
        q_starts.push(row as i32);
        q_lens.push(len as i32);
        pos0s.push(pre as i32);
        row += len;
    }
    let (kd, vd, pd, od) = (
        dev(ctx, &to_bf16(&c.k)),
        dev(ctx, &to_bf16(&c.v)),
        dev(ctx, &c.pages),
        dev(ctx, &c.page_offsets),
    );
    let (qd, sd, ld, p0d) = (
        dev(ctx, &to_bf16(&q)),
        dev(ctx, &q_starts),
        dev(ctx, &q_lens),
        dev(ctx, &pos0s),
    );
    let out = poisoned::<u16>(ctx, n_tok * heads * hd);
    ctx.kernels
        .attention_prefill(&PrefillArgs {
            dims,
            mask,
            q: qd.ptr(),
            k_cache: kd.ptr(),
            v_cache: vd.ptr(),
            pages: pd.ptr(),
            page_offsets: od.ptr(),
            q_starts: sd.ptr(),
            q_lens: ld.ptr(),
            pos0s: p0d.ptr(),
            out: out.ptr(),
            page_size: ps,
            num_seqs: chunks.len(),
            max_q_len: 130,
        })
        .unwrap();
    let got = read_bf16(ctx, &out, n_tok * heads * hd);
    let group = heads / kv_heads;
    let mut want = vec![0.0; n_tok * heads * hd];
    for (s, &(pre, len)) in chunks.iter().enumerate() {
        for j in 0..len {
            let t = q_starts[s] as usize + j;
            for head in 0..heads {
                let qv = &q[(t * heads + head) * hd..][..hd];
                let sink = sink_of(head);
                let o = reference(
                    &c,
                    qv,
                    s,
                    pre + j,
                    head / group,
                    kv_heads,
                    hd,
                    ps,
                    mask,
                    sink,
                );
                want[(t * heads + head) * hd..][..hd].copy_from_slice(&o);
            }
        }
    }
    check(
        &format!(
            "prefill hd={hd} heads={heads}/{kv_heads} page={ps} window={} scale={} sinks={}",
            mask.window,
            mask.scale,
            sinks.is_some()
        ),
        &got,
        &want,
        1.5e-2,
    );
}

/// gpt-oss's sinks (a logit per head in the denominator): its shape (head_dim 64, 64 query
/// heads over 8 KV heads, 128-token windows on alternate layers) and smaller ones, decode with
/// one split (written directly), a few (the short reduction) and 32 (the staged one), and
/// prefill; sinks from -4 to 8, so some heads' rows are mostly sink.
#[test]
fn attention_with_sinks_matches_reference() {
    let Some(ctx) = gpu("attention sinks") else {
        return;
    };
    let mut r = rng(38);
    let sinks = |r: &mut rand::rngs::StdRng, heads: usize| -> Vec<f32> {
        random(r, heads, 6.0).iter().map(|v| v + 2.0).collect()
    };
    for (shape, window) in [
        ((64, 64, 8, 16, 1), 128),
        ((64, 64, 8, 16, 5), 0),
        ((64, 16, 2, 16, 32), 0),
        ((128, 12, 2, 1, 3), 37),
    ] {
        let mask = AttentionMask {
            window,
            ..AttentionMask::causal(shape.0)
        };
        let s = sinks(&mut r, shape.1);
        decode_case(&ctx, &mut r, shape, mask, Some(&s));
    }
    for (shape, window) in [
        ((64, 64, 8, 16), 128),
        ((64, 16, 2, 1), 0),
        ((128, 12, 2, 16), 37),
    ] {
        let mask = AttentionMask {
            window,
            ..AttentionMask::causal(shape.0)
        };
        let s = sinks(&mut r, shape.1);
        prefill_case(&ctx, &mut r, shape, mask, Some(&s));
    }
}
