//! A step's metadata, built on the host from the engine's batch and packed into one i32 array
//! for a single upload: token ids, positions, KV slots, the decode and prefill sequence tables,
//! the rows that go through the LM head, every sequence's rows and recurrent-state slot (for
//! linear-attention layers), and the flattened page lists. With a window pool the
//! sliding-window layers get their own slots and page lists (their `w*` offsets); without
//! one those offsets are the other layers'.
//!
//! The pages go last, so every other array's offset depends only on the counts
//! (tokens, decodes, prefills, logit rows). A decode-only batch padded to a captured size
//! therefore always has the same layout, which is what a CUDA graph replays against.

use ferrite_engine::{DeviceSampling, LogitsRequest, SeqBatch};

/// Offsets (in i32 elements) of each array in the packed buffer.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Offsets {
    pub tokens: usize,
    pub positions: usize,
    pub slots: usize,
    /// The KV slots of the sliding-window layers' pool.
    pub wslots: usize,
    pub dec_q_rows: usize,
    pub dec_ctx: usize,
    pub dec_page_off: usize,
    pub dec_wpage_off: usize,
    pub pre_q_start: usize,
    pub pre_q_len: usize,
    pub pre_pos0: usize,
    pub pre_page_off: usize,
    pub pre_wpage_off: usize,
    pub logit_rows: usize,
    /// Per sequence, batch order then padding: first token row, tokens, state slot (-1: none),
    /// 1 when it starts at position 0.
    pub seq_row: usize,
    pub seq_len: usize,
    pub seq_slot: usize,
    pub seq_fresh: usize,
    pub pages: usize,
}

impl Offsets {
    /// `windowed`: the sliding-window layers have a pool of their own.
    pub fn new(
        tokens: usize,
        decodes: usize,
        prefills: usize,
        logit_rows: usize,
        windowed: bool,
    ) -> Offsets {
        let mut at = 0;
        let mut take = |n: usize| {
            let o = at;
            at += n;
            o
        };
        let (tokens_at, positions, slots) = (take(tokens), take(tokens), take(tokens));
        let (dec_q_rows, dec_ctx, dec_page_off) = (take(decodes), take(decodes), take(decodes));
        let (pre_q_start, pre_q_len, pre_pos0) = (take(prefills), take(prefills), take(prefills));
        let pre_page_off = take(prefills);
        let (wslots, dec_wpage_off, pre_wpage_off) = if windowed {
            (take(tokens), take(decodes), take(prefills))
        } else {
            (slots, dec_page_off, pre_page_off)
        };
        Offsets {
            tokens: tokens_at,
            positions,
            slots,
            wslots,
            dec_q_rows,
            dec_ctx,
            dec_page_off,
            dec_wpage_off,
            pre_q_start,
            pre_q_len,
            pre_pos0,
            pre_page_off,
            pre_wpage_off,
            logit_rows: take(logit_rows),
            seq_row: take(decodes + prefills),
            seq_len: take(decodes + prefills),
            seq_slot: take(decodes + prefills),
            seq_fresh: take(decodes + prefills),
            pages: at,
        }
    }
}

/// The packed metadata of one step and how its outputs map back to the batch.
#[derive(Debug, Default)]
pub struct StepInputs {
    pub packed: Vec<i32>,
    pub offsets: Offsets,
    pub num_tokens: usize,
    pub num_decodes: usize,
    pub num_prefills: usize,
    pub num_logit_rows: usize,
    /// Sequences, padding included.
    pub num_seqs: usize,
    /// Longest prefill chunk (row tiles of the prefill kernel).
    pub max_q_len: usize,
    /// Longest decode context.
    pub max_decode_ctx: usize,
    /// Logits-buffer rows the host gets, in batch order (rows of host-sampled sequences).
    pub host_rows: Vec<usize>,
    /// (batch index, logits-buffer row, params) of the sequences sampled on the device.
    pub device_rows: Vec<(usize, usize, DeviceSampling)>,
    // Scratch, reused from step to step.
    decodes: Vec<(usize, usize)>,
    prefills: Vec<(usize, usize)>,
    pages: Vec<i32>,
    page_start: Vec<usize>,
}

fn rows_of(seq: &SeqBatch<'_>) -> std::ops::Range<usize> {
    let n = seq.tokens.len();
    match seq.logits {
        LogitsRequest::None => n..n,
        LogitsRequest::Last => n - 1..n,
        LogitsRequest::All => 0..n,
    }
}

impl StepInputs {
    /// Lays out `batch` (already checked by `ferrite_engine::validate_batch`). `sampling` is empty or has one entry per
    /// sequence. With `pad_to = Some(bs)` (a decode-only batch replayed by the graph of size
    /// `bs`): padding sequences are added, every token row goes through the LM head in token
    /// order, and the layout depends on `bs` alone. `windowed`: lay out the window tables too.
    pub fn build(
        &mut self,
        batch: &[SeqBatch<'_>],
        sampling: &[Option<DeviceSampling>],
        page_size: usize,
        pad_to: Option<usize>,
        windowed: bool,
    ) {
        self.decodes.clear();
        self.prefills.clear();
        self.pages.clear();
        self.host_rows.clear();
        self.device_rows.clear();
        let mut base = 0;
        for (i, seq) in batch.iter().enumerate() {
            if seq.tokens.len() == 1 {
                self.decodes.push((i, base));
            } else {
                self.prefills.push((i, base));
            }
            base += seq.tokens.len();
        }
        let num_tokens = pad_to.unwrap_or(base).max(base);
        let num_decodes = num_tokens - base + self.decodes.len();
        let sampled = |i: usize| sampling.get(i).cloned().flatten();
        let num_logit_rows = match pad_to {
            Some(_) => num_tokens,
            None => batch.iter().map(|s| rows_of(s).len()).sum(),
        };
        let prefills = self.prefills.len();
        let offsets = Offsets::new(num_tokens, num_decodes, prefills, num_logit_rows, windowed);
        self.packed.clear();
        self.packed.resize(offsets.pages, 0);
        let p = &mut self.packed;

        // Tokens, positions, slots; padding tokens write no KV (slot -1).
        let mut t = 0;
        for seq in batch {
            for (j, &token) in seq.tokens.iter().enumerate() {
                let pos = seq.start_pos + j;
                let page = seq.block_table[pos / page_size] as usize;
                p[offsets.tokens + t] = token as i32;
                p[offsets.positions + t] = pos as i32;
                p[offsets.slots + t] = (page * page_size + pos % page_size) as i32;
                if windowed {
                    let page = seq.window_table[pos / page_size] as usize;
                    p[offsets.wslots + t] = (page * page_size + pos % page_size) as i32;
                }
                t += 1;
            }
        }
        for pad in t..num_tokens {
            p[offsets.slots + pad] = -1;
            p[offsets.wslots + pad] = -1;
        }

        // Page lists: each sequence's pages once (then its window pages), decodes and
        // prefills both point into them.
        let page_start = &mut self.page_start;
        page_start.clear();
        for seq in batch {
            let end = seq.start_pos + seq.tokens.len();
            let tables = [Some(seq.block_table), windowed.then_some(seq.window_table)];
            for table in tables.into_iter().flatten() {
                page_start.push(self.pages.len());
                let pages = table[..end.div_ceil(page_size)].iter();
                self.pages.extend(pages.map(|&x| x as i32));
            }
        }
        // Where sequence `i`'s pages (and window pages) start.
        let lists = if windowed { 2 } else { 1 };
        let full_at = |i: usize| page_start[lists * i] as i32;
        let window_at = |i: usize| page_start[lists * i + lists - 1] as i32;
        self.max_decode_ctx = 0;
        for (d, &(i, row)) in self.decodes.iter().enumerate() {
            let ctx = batch[i].start_pos + 1;
            p[offsets.dec_q_rows + d] = row as i32;
            p[offsets.dec_ctx + d] = ctx as i32;
            p[offsets.dec_page_off + d] = full_at(i);
            p[offsets.dec_wpage_off + d] = window_at(i);
            self.max_decode_ctx = self.max_decode_ctx.max(ctx);
        }
        // Padding decodes: their own (unused) rows, no context: the kernel writes zeros.
        for (d, row) in (self.decodes.len()..num_decodes).zip(base..num_tokens) {
            p[offsets.dec_q_rows + d] = row as i32;
        }
        self.max_q_len = 0;
        for (k, &(i, row)) in self.prefills.iter().enumerate() {
            let len = batch[i].tokens.len();
            p[offsets.pre_q_start + k] = row as i32;
            p[offsets.pre_q_len + k] = len as i32;
            p[offsets.pre_pos0 + k] = batch[i].start_pos as i32;
            p[offsets.pre_page_off + k] = full_at(i);
            p[offsets.pre_wpage_off + k] = window_at(i);
            self.max_q_len = self.max_q_len.max(len);
        }

        // Every sequence's rows and state slot; padding sequences (one token each) have none.
        let mut row = 0;
        for (i, seq) in batch.iter().enumerate() {
            p[offsets.seq_row + i] = row as i32;
            p[offsets.seq_len + i] = seq.tokens.len() as i32;
            p[offsets.seq_slot + i] = seq.state_slot.map_or(-1, |s| s as i32);
            p[offsets.seq_fresh + i] = i32::from(seq.start_pos == 0);
            row += seq.tokens.len();
        }
        for (i, pad_row) in (batch.len()..num_decodes + self.prefills.len()).zip(base..) {
            p[offsets.seq_row + i] = pad_row as i32;
            p[offsets.seq_len + i] = 1;
            p[offsets.seq_slot + i] = -1;
        }

        // LM-head rows. Padded: every token row, in order. Eager: host rows first (batch
        // order, one contiguous download), then the device-sampled ones.
        match pad_to {
            Some(_) => {
                for r in 0..num_tokens {
                    p[offsets.logit_rows + r] = r as i32;
                }
                let mut row = 0;
                for (i, seq) in batch.iter().enumerate() {
                    match sampled(i) {
                        Some(s) if seq.logits == LogitsRequest::Last => {
                            self.device_rows.push((i, row, s))
                        }
                        _ => self.host_rows.extend(rows_of(seq).map(|j| row + j)),
                    }
                    row += seq.tokens.len();
                }
            }
            None => {
                let mut next = 0;
                let mut token_base = 0;
                for (i, seq) in batch.iter().enumerate() {
                    if sampled(i).is_none() || seq.logits != LogitsRequest::Last {
                        for j in rows_of(seq) {
                            p[offsets.logit_rows + next] = (token_base + j) as i32;
                            self.host_rows.push(next);
                            next += 1;
                        }
                    }
                    token_base += seq.tokens.len();
                }
                token_base = 0;
                for (i, seq) in batch.iter().enumerate() {
                    if let Some(s) = sampled(i).filter(|_| seq.logits == LogitsRequest::Last) {
                        p[offsets.logit_rows + next] = (token_base + seq.tokens.len() - 1) as i32;
                        self.device_rows.push((i, next, s));
                        next += 1;
                    }
                    token_base += seq.tokens.len();
                }
                debug_assert_eq!(next, num_logit_rows);
            }
        }
        self.packed.extend_from_slice(&self.pages);
        self.offsets = offsets;
        self.num_tokens = num_tokens;
        self.num_decodes = num_decodes;
        self.num_prefills = self.prefills.len();
        self.num_logit_rows = num_logit_rows;
        self.num_seqs = num_decodes + self.prefills.len();
    }
}

#[cfg(test)]
mod tests;
