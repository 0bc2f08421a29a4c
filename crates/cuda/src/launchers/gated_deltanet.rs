//! Launchers of kernels/gated_deltanet.cu and gated_deltanet_chunked.cu: a linear-attention
//! layer's convolution and gated delta rule over the step's sequences and their state slots
//! (token by token for decode steps, 64-token chunks for prompts), and gated attention's
//! output gate.

use super::launch::{Kernels, Shape};
// The chunked kernels' geometry lives beside the other kernels' shared memory sizes, which
// the module loader reads too.
use super::names::{gdn_chunk_prep_shared_bytes, gdn_chunked_shared_bytes, GDN_CHUNK, GDN_SLICE};
pub use super::names::{GDN_CHUNK_ROW, GDN_MAX_DK};
use super::signatures::{
    GdnChunkPrep, GdnChunked, GdnConv, GdnConvSave, GdnGatedNorm, GdnRecurrence, SigmoidGateMul,
};
use crate::device_ptr::DevicePtr;

/// Most taps of the convolution (`GDN_MAX_TAPS`); value heads of at most 256 dims.
pub const GDN_MAX_TAPS: usize = 8;
pub const GDN_MAX_DV: usize = 256;
/// Rows of a state column one thread of `gdn_recurrence` keeps (`GDN_MAX_PART_ROWS`).
const GDN_MAX_PART_ROWS: usize = GDN_MAX_DK / 4;

/// Threads of a `gdn_recurrence` block for heads of `dk` keys and `dv` values: each column's
/// rows split over 4 threads (2 past 128 values), at most 512 in all (the kernel's launch
/// bound and `part_sum`); `None` where a thread would keep more than `GDN_MAX_PART_ROWS` rows.
pub fn recurrence_block(dk: usize, dv: usize) -> Option<u32> {
    let width = dv.next_multiple_of(32);
    let parts = if width <= 128 { 4 } else { 2 };
    (dk.div_ceil(parts) <= GDN_MAX_PART_ROWS && width * parts <= 512)
        .then_some((width * parts) as u32)
}

/// Tokens a convolution thread runs in order (`GDN_CONV_TILE`).
const GDN_CONV_TILE: usize = 64;
/// A sequence with at most this many tokens in a step goes through the delta rule token by
/// token, however long the step's other sequences are: a decode step, a verification of
/// drafts (the scored token and up to `MAX_SPEC_TOKENS` drafts) and the replay of the kept
/// ones all then compute a token's state and output with the same arithmetic as plain
/// decoding, so speculation leaves greedy output bit for bit as it was, and a decode row does
/// not depend on a prompt chunk sharing its step. Longer ones take the 64-token chunks.
pub const GDN_TOKENWISE_MAX_LEN: usize = ferrite_engine::MAX_SPEC_TOKENS + 1;

/// The step's sequences as the linear layers see them (packed step metadata, i32 each) and
/// where their state lives.
#[derive(Debug, Clone, Copy)]
pub struct GdnSequences {
    /// First token row, token count, state slot (-1: padding), 1 when starting at position 0.
    pub row: DevicePtr,
    pub len: DevicePtr,
    pub slot: DevicePtr,
    pub fresh: DevicePtr,
    /// Sequences (padding included).
    pub count: usize,
    /// Token rows of the step, and the most any sequence has (host-side: they pick the
    /// kernels and their grids).
    pub tokens: usize,
    pub max_len: usize,
    /// The state of every slot, f32, `slot_stride` floats apart.
    pub state: DevicePtr,
    pub slot_stride: usize,
}

/// One linear-attention layer's shape and the offset of its state in a slot.
#[derive(Debug, Clone, Copy)]
pub struct GdnLayer {
    pub key_heads: usize,
    pub value_heads: usize,
    pub dk: usize,
    pub dv: usize,
    pub taps: usize,
    /// Value head h reads key head h % key_heads (llama.cpp's tiled order), not
    /// h / (value_heads / key_heads).
    pub tiled: bool,
    /// Floats from a slot's start to this layer's convolution state; its S follows.
    pub offset: usize,
}

impl GdnLayer {
    pub fn channels(&self) -> usize {
        2 * self.key_heads * self.dk + self.value_heads * self.dv
    }
}

/// The inputs of [`Kernels::gdn_recurrence`] besides the sequences.
#[derive(Debug, Clone, Copy)]
pub struct GdnRecurrenceArgs {
    /// f32 [n, channels]: the convolution's output.
    pub conv: DevicePtr,
    /// f32 rows `ld` apart: z at `z_col`, beta inputs at `b_col`, decay inputs at `a_col`.
    pub mixed: DevicePtr,
    pub ld: usize,
    pub z_col: usize,
    pub b_col: usize,
    pub a_col: usize,
    /// f32 [value heads] each: A, dt_bias; f32 [dv]: the gated norm's weight.
    pub decay_rate: DevicePtr,
    pub dt_bias: DevicePtr,
    pub norm: DevicePtr,
    /// bf16 [n, value_dim].
    pub out: DevicePtr,
    /// f32 [n, value heads, GDN_CHUNK_ROW]: the chunked path's per-chunk matrices (scratch).
    pub chunk: DevicePtr,
    pub eps: f32,
}

impl Kernels {
    /// The convolution of `mixed`'s first `channels` columns (rows `ld` floats apart) into
    /// `out` (f32 [n, channels]), each sequence continuing from its slot's convolution state.
    pub fn gdn_conv(
        &self,
        seqs: &GdnSequences,
        layer: &GdnLayer,
        mixed: DevicePtr,
        ld: usize,
        taps: DevicePtr,
        out: DevicePtr,
    ) -> anyhow::Result<()> {
        let channels = layer.channels();
        anyhow::ensure!(
            (1..=GDN_MAX_TAPS).contains(&layer.taps),
            "the convolution kernel takes 1..={GDN_MAX_TAPS} taps, not {}",
            layer.taps
        );
        let params = GdnConv {
            mixed,
            ld,
            taps,
            state: seqs.state,
            seq_row: seqs.row,
            seq_len: seqs.len,
            seq_slot: seqs.slot,
            seq_fresh: seqs.fresh,
            slot_stride: seqs.slot_stride as u64,
            layer_offset: layer.offset as u64,
            out,
            channels,
            num_taps: layer.taps,
        };
        let tiles = seqs.max_len.div_ceil(GDN_CONV_TILE).max(1);
        let shape = Shape {
            grid: (
                channels.div_ceil(128) as u32,
                seqs.count as u32,
                tiles as u32,
            ),
            block: 128,
        };
        self.launch(shape, &params)?;
        if tiles == 1 {
            return Ok(());
        }
        let save = GdnConvSave {
            mixed,
            ld,
            state: seqs.state,
            seq_row: seqs.row,
            seq_len: seqs.len,
            seq_slot: seqs.slot,
            slot_stride: seqs.slot_stride as u64,
            layer_offset: layer.offset as u64,
            channels,
            num_taps: layer.taps,
        };
        let shape = Shape {
            grid: (channels.div_ceil(128) as u32, seqs.count as u32, 1),
            block: 128,
        };
        self.launch(shape, &save)
    }

    /// The gated delta rule and gated norm of every value head of every sequence: token by
    /// token for sequences of at most [`GDN_TOKENWISE_MAX_LEN`] tokens, in 64-token chunks for
    /// longer ones (which leaves their un-normalised outputs in `a.conv`'s v columns). The
    /// chunked path's norm writes every row of the step, so the token-by-token kernel runs
    /// after it and overwrites its sequences' rows.
    pub fn gdn_delta_rule(
        &self,
        seqs: &GdnSequences,
        layer: &GdnLayer,
        a: &GdnRecurrenceArgs,
    ) -> anyhow::Result<()> {
        if seqs.max_len > GDN_TOKENWISE_MAX_LEN {
            self.gdn_chunked(seqs, layer, a)?;
        }
        self.gdn_recurrence(seqs, layer, a)
    }

    fn gdn_chunked(
        &self,
        seqs: &GdnSequences,
        layer: &GdnLayer,
        a: &GdnRecurrenceArgs,
    ) -> anyhow::Result<()> {
        anyhow::ensure!(
            layer.dk <= GDN_MAX_DK && layer.dv <= GDN_MAX_DV,
            "the chunked delta rule takes key heads of <= {GDN_MAX_DK} and value heads of <= \
             {GDN_MAX_DV} dims, not {} and {}",
            layer.dk,
            layer.dv
        );
        let prep = GdnChunkPrep {
            conv: a.conv,
            mixed: a.mixed,
            ld: a.ld,
            b_col: a.b_col,
            a_col: a.a_col,
            decay_rate: a.decay_rate,
            dt_bias: a.dt_bias,
            chunk: a.chunk,
            seq_row: seqs.row,
            seq_len: seqs.len,
            seq_slot: seqs.slot,
            key_heads: layer.key_heads,
            value_heads: layer.value_heads,
            dk: layer.dk,
            dv: layer.dv,
            tiled: i32::from(layer.tiled),
            tokenwise_max_len: GDN_TOKENWISE_MAX_LEN as i32,
        };
        let shape = Shape {
            grid: (
                layer.value_heads as u32,
                seqs.max_len.div_ceil(GDN_CHUNK) as u32,
                seqs.count as u32,
            ),
            block: 256,
        };
        self.launch_with_shared(shape, gdn_chunk_prep_shared_bytes(layer.dk), &prep)?;
        let conv_state = (layer.taps - 1) * layer.channels();
        let params = GdnChunked {
            conv: a.conv,
            chunk: a.chunk,
            state: seqs.state,
            seq_row: seqs.row,
            seq_len: seqs.len,
            seq_slot: seqs.slot,
            seq_fresh: seqs.fresh,
            slot_stride: seqs.slot_stride as u64,
            layer_offset: (layer.offset + conv_state) as u64,
            key_heads: layer.key_heads,
            value_heads: layer.value_heads,
            dk: layer.dk,
            dv: layer.dv,
            tiled: i32::from(layer.tiled),
            tokenwise_max_len: GDN_TOKENWISE_MAX_LEN as i32,
        };
        let shape = Shape {
            grid: (
                layer.value_heads as u32,
                layer.dv.div_ceil(GDN_SLICE) as u32,
                seqs.count as u32,
            ),
            block: 256,
        };
        self.launch_with_shared(shape, gdn_chunked_shared_bytes(layer.dk), &params)?;
        let norm = GdnGatedNorm {
            conv: a.conv,
            channels: layer.channels(),
            v_col: 2 * layer.key_heads * layer.dk,
            mixed: a.mixed,
            ld: a.ld,
            z_col: a.z_col,
            norm_w: a.norm,
            out: a.out,
            dv: layer.dv,
            eps: a.eps,
        };
        let shape = Shape {
            grid: (seqs.tokens as u32, layer.value_heads as u32, 1),
            block: layer.dv.next_multiple_of(32) as u32,
        };
        self.launch(shape, &norm)
    }

    fn gdn_recurrence(
        &self,
        seqs: &GdnSequences,
        layer: &GdnLayer,
        a: &GdnRecurrenceArgs,
    ) -> anyhow::Result<()> {
        anyhow::ensure!(
            layer.dk <= GDN_MAX_DK && layer.dv <= GDN_MAX_DV,
            "the recurrence kernel takes key heads of <= {GDN_MAX_DK} and value heads of <= \
             {GDN_MAX_DV} dims, not {} and {}",
            layer.dk,
            layer.dv
        );
        let conv_state = (layer.taps - 1) * layer.channels();
        let params = GdnRecurrence {
            conv: a.conv,
            mixed: a.mixed,
            ld: a.ld,
            z_col: a.z_col,
            b_col: a.b_col,
            a_col: a.a_col,
            decay_rate: a.decay_rate,
            dt_bias: a.dt_bias,
            norm_w: a.norm,
            state: seqs.state,
            seq_row: seqs.row,
            seq_len: seqs.len,
            seq_slot: seqs.slot,
            seq_fresh: seqs.fresh,
            slot_stride: seqs.slot_stride as u64,
            layer_offset: (layer.offset + conv_state) as u64,
            out: a.out,
            key_heads: layer.key_heads,
            value_heads: layer.value_heads,
            dk: layer.dk,
            dv: layer.dv,
            tiled: i32::from(layer.tiled),
            eps: a.eps,
            tokenwise_max_len: GDN_TOKENWISE_MAX_LEN as i32,
        };
        let block = recurrence_block(layer.dk, layer.dv).ok_or_else(|| {
            anyhow::anyhow!(
                "the recurrence kernel takes key heads of <= 64 dims beside value heads of \
                 more than 128"
            )
        })?;
        let shape = Shape {
            grid: (layer.value_heads as u32, seqs.count as u32, 1),
            block,
        };
        self.launch(shape, &params)
    }

    /// out (bf16 [n, width]) *= sigmoid(gate rows, f32, `ld` floats apart).
    pub fn sigmoid_gate_mul(
        &self,
        out: DevicePtr,
        gate_rows: DevicePtr,
        ld: usize,
        width: usize,
        n: usize,
    ) -> anyhow::Result<()> {
        let params = SigmoidGateMul {
            out,
            gate_rows,
            ld,
            width,
        };
        let shape = Shape {
            grid: (n as u32, width.div_ceil(256) as u32, 1),
            block: 256,
        };
        self.launch(shape, &params)
    }
}
