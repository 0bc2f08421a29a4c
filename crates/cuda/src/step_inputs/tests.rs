use super::*;
use ferrite_engine::{validate_batch, BatchLimits};

fn sampling(seed: u64) -> Option<DeviceSampling> {
    Some(DeviceSampling {
        temperature: 0.7,
        top_k: 0,
        top_p: 1.0,
        min_p: 0.0,
        seed,
        counter: 0,
        mask: None,
    })
}

fn decode<'a>(token: &'a [u32], pos: usize, table: &'a [u32]) -> SeqBatch<'a> {
    SeqBatch {
        tokens: token,
        start_pos: pos,
        block_table: table,
        window_table: &[],
        state_slot: None,
        state_copy: Default::default(),
        logits: LogitsRequest::Last,
    }
}

#[test]
fn padded_decode_layouts_depend_only_on_the_graph_size() {
    let (t1, t2, t3) = ([5u32], [6u32], [7u32]);
    let tables = [vec![3u32, 9], vec![1u32], vec![4u32, 2, 8]];
    let a = [
        decode(&t1, 17, &tables[0]),
        decode(&t2, 0, &tables[1]),
        decode(&t3, 40, &tables[2]),
    ];
    let b = [decode(&t1, 3, &tables[1])];
    let (mut x, mut y) = (StepInputs::default(), StepInputs::default());
    x.build(&a, &[], 16, Some(4), false);
    y.build(&b, &[], 16, Some(4), false);
    assert_eq!(x.offsets, y.offsets);
    assert_eq!((x.num_tokens, x.num_decodes, x.num_logit_rows), (4, 4, 4));
    let o = x.offsets;
    let p = &x.packed;
    assert_eq!(&p[o.tokens..o.tokens + 3], &[5, 6, 7]);
    assert_eq!(p[o.slots + 3], -1, "padding writes no KV");
    assert_eq!(&p[o.slots..o.slots + 3], &[9 * 16 + 1, 16, 8 * 16 + 8]);
    assert_eq!(&p[o.dec_ctx..o.dec_ctx + 4], &[18, 1, 41, 0]);
    assert_eq!(&p[o.dec_q_rows..o.dec_q_rows + 4], &[0, 1, 2, 3]);
    // Page lists of each sequence, in order, at their offsets.
    let pages = &p[o.pages..];
    let off = |d: usize| p[o.dec_page_off + d] as usize;
    assert_eq!(&pages[off(0)..off(0) + 2], &[3, 9]);
    assert_eq!(pages[off(1)], 1);
    assert_eq!(&pages[off(2)..off(2) + 3], &[4, 2, 8]);
    assert_eq!(x.host_rows, vec![0, 1, 2]);
    assert_eq!(x.max_decode_ctx, 41);
}

#[test]
fn slots_follow_the_block_table_for_page_sizes_1_and_16() {
    for page_size in [1usize, 16] {
        let tokens: Vec<u32> = (0..37).collect();
        let start = 5;
        let pages_needed = (start + tokens.len()).div_ceil(page_size);
        let table: Vec<u32> = (0..pages_needed as u32).rev().map(|p| p * 2 + 1).collect();
        let seq = SeqBatch {
            tokens: &tokens,
            start_pos: start,
            block_table: &table,
            window_table: &[],
            state_slot: None,
            state_copy: Default::default(),
            logits: LogitsRequest::All,
        };
        let mut s = StepInputs::default();
        s.build(&[seq], &[], page_size, None, false);
        let o = s.offsets;
        for (j, _) in tokens.iter().enumerate() {
            let pos = start + j;
            let want = table[pos / page_size] as usize * page_size + pos % page_size;
            assert_eq!(s.packed[o.slots + j] as usize, want);
            assert_eq!(s.packed[o.positions + j] as usize, pos);
        }
        assert_eq!(s.num_prefills, 1);
        assert_eq!(s.packed[o.pre_pos0], start as i32);
        assert_eq!(s.packed[o.pre_q_len], 37);
        assert_eq!(s.num_logit_rows, 37);
        assert_eq!(s.host_rows, (0..37).collect::<Vec<_>>());
        assert_eq!(
            &s.packed[o.pages..],
            &table.iter().map(|&x| x as i32).collect::<Vec<_>>()[..]
        );
    }
}

#[test]
fn host_rows_come_first_then_device_rows() {
    let prompt: Vec<u32> = (0..10).collect();
    let (d1, d2) = ([3u32], [4u32]);
    let table: Vec<u32> = (0..4).collect();
    let batch = [
        decode(&d1, 20, &table),
        SeqBatch {
            tokens: &prompt,
            start_pos: 0,
            block_table: &table,
            window_table: &[],
            state_slot: None,
            state_copy: Default::default(),
            logits: LogitsRequest::Last,
        },
        decode(&d2, 30, &table),
        SeqBatch {
            tokens: &prompt,
            start_pos: 0,
            block_table: &table,
            window_table: &[],
            state_slot: None,
            state_copy: Default::default(),
            logits: LogitsRequest::None,
        },
    ];
    let sampling = [sampling(1), None, sampling(3), None];
    let mut s = StepInputs::default();
    s.build(&batch, &sampling, 16, None, false);
    let o = s.offsets;
    // Token rows: decode 0 -> 0, prompt -> 1..11, decode -> 11, prompt -> 12..22.
    assert_eq!(s.num_logit_rows, 3);
    assert_eq!(&s.packed[o.logit_rows..o.logit_rows + 3], &[10, 0, 11]);
    assert_eq!(s.host_rows, vec![0]);
    let device: Vec<(usize, usize)> = s.device_rows.iter().map(|&(i, r, _)| (i, r)).collect();
    assert_eq!(device, vec![(0, 1), (2, 2)]);
    assert_eq!((s.num_decodes, s.num_prefills, s.max_q_len), (2, 2, 10));
    assert_eq!(&s.packed[o.pre_q_start..o.pre_q_start + 2], &[1, 12]);
}

#[test]
fn validation_rejects_what_the_kernels_cannot_run() {
    // The backend checks every batch with the engine's shared validation before laying it out.
    let limits = BatchLimits {
        vocab_size: 10,
        num_pages: 2,
        page_size: 16,
        state_slots: 0,
        window_pages: 0,
    };
    let table = [0u32, 1];
    let ok = [decode(&[5], 20, &table)];
    assert!(validate_batch(&ok, limits).is_ok());
    assert!(validate_batch(&[decode(&[10], 20, &table)], limits).is_err());
    assert!(validate_batch(&[decode(&[5], 40, &table)], limits).is_err());
    assert!(validate_batch(&[decode(&[5], 20, &[0, 7])], limits).is_err());
}

#[test]
fn window_tables_get_their_own_slots_and_page_lists_at_fixed_offsets() {
    let (t1, t2) = ([5u32], [6u32, 7, 8]);
    // A decode at 17 (pages 3, 9; window pages null, 4) and a prompt chunk at 30..33.
    let (full1, win1) = ([3u32, 9], [0u32, 4]);
    let (full2, win2) = ([1u32, 2, 6], [0u32, 5, 7]);
    let a = [
        SeqBatch {
            window_table: &win1,
            ..decode(&t1, 17, &full1)
        },
        SeqBatch {
            tokens: &t2,
            start_pos: 30,
            window_table: &win2,
            logits: LogitsRequest::Last,
            ..decode(&t2, 30, &full2)
        },
    ];
    let mut x = StepInputs::default();
    x.build(&a, &[], 16, None, true);
    let (o, p) = (x.offsets, &x.packed);
    assert_ne!(o.wslots, o.slots);
    assert_eq!(
        &p[o.slots..o.slots + 4],
        &[9 * 16 + 1, 2 * 16 + 14, 2 * 16 + 15, 6 * 16]
    );
    assert_eq!(
        &p[o.wslots..o.wslots + 4],
        &[4 * 16 + 1, 5 * 16 + 14, 5 * 16 + 15, 7 * 16]
    );
    let pages = &p[o.pages..];
    let at = |off: usize| p[off] as usize;
    assert_eq!(&pages[at(o.dec_page_off)..][..2], &[3, 9]);
    assert_eq!(&pages[at(o.dec_wpage_off)..][..2], &[0, 4]);
    assert_eq!(&pages[at(o.pre_page_off)..][..3], &[1, 2, 6]);
    assert_eq!(&pages[at(o.pre_wpage_off)..][..3], &[0, 5, 7]);
    // Without a window pool the window offsets are the others'.
    x.build(&a, &[], 16, None, false);
    let o = x.offsets;
    assert_eq!(
        (o.wslots, o.dec_wpage_off, o.pre_wpage_off),
        (o.slots, o.dec_page_off, o.pre_page_off)
    );
}
