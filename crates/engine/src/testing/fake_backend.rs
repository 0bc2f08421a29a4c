//! A deterministic stand-in for a model, for tests: it really stores (token, position) per KV
//! slot in the pages it is given, and its logits are a hash of the token history it READS BACK
//! through the block table. Wrong page sharing, stale pages or a bad block table therefore
//! change the tokens it produces, and [`expected_greedy`] is an oracle that needs no engine.
//! With `window` set it also plays a model with sliding-window layers kept in a window pool:
//! it writes every token there too and, for every logits row, reads the row's window back
//! through the window table (a released page or a wrong one fails the step). With `recurrent`
//! set it also keeps recurrent state per slot, as a model with linear-attention layers, and
//! checks it against the history every step ([`FakeStates`]).

use std::sync::{Arc, Mutex};

use super::fake_state::FakeStates;

use crate::backend::{
    validate_batch, Backend, BackendError, BatchLimits, DeviceSampling, ForwardOutput, KvWindow,
    LogitsRequest, SampledOutput, SeqBatch,
};

pub const VOCAB: usize = 32;

/// What each forward call looked like: (tokens in the batch, sequences in the batch).
pub type BatchLog = Arc<Mutex<Vec<(usize, usize)>>>;

pub struct FakeBackend {
    page_size: usize,
    slots: Vec<Option<(u32, usize)>>,
    max_context: usize,
    pub log: BatchLog,
    /// Fail the forward call with this 0-based index.
    pub fail_at_call: Option<usize>,
    /// Panic in the forward call with this 0-based index.
    pub panic_at_call: Option<usize>,
    /// Sleep this long in every forward call (a model takes time).
    pub delay: Option<std::time::Duration>,
    /// Non-zero: a different model (a draft) that agrees with the salt-0 model only on
    /// some histories.
    pub salt: u64,
    /// Offer `forward_sampled` (a device that samples by [`device_pick`]).
    pub samples_on_device: bool,
    /// Honour [`DeviceSampling::mask`] (`can_sample_masked`).
    pub samples_masked: bool,
    /// Claim to honour masks but sample as if there were none (a faulty device).
    pub ignores_masks: bool,
    /// The `sampling` argument of every `forward_sampled` call.
    pub sampling_log: Arc<Mutex<Vec<Vec<Option<DeviceSampling>>>>>,
    /// Positions its sliding-window layers read (`kv_window`); `None`: none.
    pub window: Option<usize>,
    /// The window pool, once `init_window_kv_cache` made it.
    window_slots: Vec<Option<(u32, usize)>>,
    /// Play a model with recurrent state (slots from `init_state_slots`).
    pub recurrent: bool,
    states: Option<FakeStates>,
    calls: usize,
}

impl FakeBackend {
    pub fn new(max_context: usize) -> Self {
        Self {
            page_size: 0,
            slots: Vec::new(),
            max_context,
            log: BatchLog::default(),
            fail_at_call: None,
            panic_at_call: None,
            delay: None,
            salt: 0,
            samples_on_device: false,
            samples_masked: false,
            ignores_masks: false,
            sampling_log: Arc::default(),
            window: None,
            window_slots: Vec::new(),
            recurrent: false,
            states: None,
            calls: 0,
        }
    }
}

fn mix(mut x: u64) -> u64 {
    // splitmix64 finaliser
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

/// Logits after the history `tokens` (all positions up to and including the current one).
pub fn logits_for_history(tokens: impl IntoIterator<Item = u32>) -> Vec<f32> {
    salted_logits(tokens, 0)
}

/// The logits of the model with `salt`: on about half of all histories a salted model
/// answers like the salt-0 model, on the rest it has logits of its own.
pub fn salted_logits(tokens: impl IntoIterator<Item = u32>, salt: u64) -> Vec<f32> {
    let mut hash = tokens
        .into_iter()
        .fold(0x1234_5678_u64, |h, t| mix(h ^ t as u64));
    if salt != 0 && mix(hash ^ salt) % 2 == 0 {
        hash = mix(hash ^ salt);
    }
    (0..VOCAB as u64)
        .map(|v| (mix(hash ^ (v << 40)) >> 40) as f32 / (1u64 << 24) as f32 * 8.0)
        .collect()
}

/// The greedy continuation the fake model gives, computed without any engine.
pub fn expected_greedy(prompt: &[u32], max_tokens: usize, eos: &[u32]) -> Vec<u32> {
    let mut tokens = prompt.to_vec();
    let mut out = Vec::new();
    while out.len() < max_tokens {
        let logits = logits_for_history(tokens.iter().copied());
        let next = crate::sampler::argmax(&logits);
        out.push(next);
        tokens.push(next);
        if eos.contains(&next) {
            break;
        }
    }
    out
}

/// The token the fake device samples from `logits` with `params`: the argmax when greedy,
/// otherwise a hash of (seed, counter) picking among the tokens not at -inf (all of them but
/// under a mask), so a test can predict every draw.
pub fn device_pick(logits: &[f32], params: &DeviceSampling) -> u32 {
    if params.temperature < 1e-5 {
        return crate::sampler::argmax(logits);
    }
    let open: Vec<u32> = (0..logits.len() as u32)
        .filter(|&t| logits[t as usize] > f32::NEG_INFINITY)
        .collect();
    let hash = mix(params.seed ^ mix(params.counter));
    match open.len() {
        0 => (hash % VOCAB as u64) as u32,
        n => open[(hash % n as u64) as usize],
    }
}

impl FakeBackend {
    fn read_history(&self, block_table: &[u32], upto: usize) -> Result<Vec<u32>, BackendError> {
        self.read_range(&self.slots, block_table, 0..upto + 1)
    }

    fn read_range(
        &self,
        slots: &[Option<(u32, usize)>],
        table: &[u32],
        positions: std::ops::Range<usize>,
    ) -> Result<Vec<u32>, BackendError> {
        positions
            .map(|pos| {
                let page = *table
                    .get(pos / self.page_size)
                    .ok_or_else(|| BackendError(format!("no page for position {pos}")))?;
                let slot = page as usize * self.page_size + pos % self.page_size;
                match slots.get(slot).copied().flatten() {
                    Some((token, written_at)) if written_at == pos => Ok(token),
                    other => Err(BackendError(format!(
                        "position {pos} reads slot {slot} holding {other:?}"
                    ))),
                }
            })
            .collect()
    }
}

impl Backend for FakeBackend {
    fn vocab_size(&self) -> usize {
        VOCAB
    }
    fn kv_bytes_per_token(&self) -> usize {
        64
    }
    fn max_context_len(&self) -> usize {
        self.max_context
    }
    fn init_kv_cache(&mut self, num_pages: usize, page_size: usize) -> Result<(), BackendError> {
        self.page_size = page_size;
        self.slots = vec![None; num_pages * page_size];
        // The window pool came first and could not know the page size: make it now.
        let window_pages = self.window_slots.len();
        self.window_slots = vec![None; window_pages * page_size];
        Ok(())
    }
    fn kv_window(&self) -> Option<KvWindow> {
        self.window.map(|tokens| KvWindow {
            tokens,
            bytes_per_token: 32,
        })
    }
    fn init_window_kv_cache(&mut self, pages: usize) -> Result<(), BackendError> {
        self.window_slots = vec![None; pages];
        Ok(())
    }
    fn state_bytes_per_sequence(&self) -> usize {
        if self.recurrent {
            256
        } else {
            0
        }
    }
    fn init_state_slots(&mut self, slots: usize) -> Result<(), BackendError> {
        self.states = Some(FakeStates::new(slots));
        Ok(())
    }
    fn state_rewind_bytes_per_sequence(&self, _step_tokens: usize) -> Option<usize> {
        self.recurrent.then_some(256)
    }
    fn init_state_rewind(
        &mut self,
        _seats: usize,
        _step_tokens: usize,
    ) -> Result<(), BackendError> {
        Ok(())
    }
    fn forward(&mut self, batch: &[SeqBatch<'_>]) -> Result<ForwardOutput, BackendError> {
        if let Some(delay) = self.delay {
            std::thread::sleep(delay);
        }
        let call = self.calls;
        self.calls += 1;
        let num_tokens = batch.iter().map(|s| s.tokens.len()).sum();
        if let Ok(mut log) = self.log.lock() {
            log.push((num_tokens, batch.len()));
        }
        if self.panic_at_call == Some(call) {
            panic!("injected panic");
        }
        if self.fail_at_call == Some(call) {
            return Err(BackendError("injected failure".into()));
        }
        // The checks every backend makes (a draft model given the target's state slot fails).
        let pages = |slots: usize| slots.checked_div(self.page_size).unwrap_or(0);
        let limits = BatchLimits {
            vocab_size: VOCAB,
            num_pages: pages(self.slots.len()),
            page_size: self.page_size,
            state_slots: self.states.as_ref().map_or(0, FakeStates::num_slots),
            window_pages: pages(self.window_slots.len()),
        };
        validate_batch(batch, limits)?;
        if self.states.is_some() {
            for seq in batch {
                let history = self.read_range(&self.slots, seq.block_table, 0..seq.start_pos)?;
                if let Some(states) = &mut self.states {
                    states.begin(seq, &history)?;
                }
            }
        }
        // Write every sequence first: batch order must not matter.
        for seq in batch {
            for (i, &token) in seq.tokens.iter().enumerate() {
                let pos = seq.start_pos + i;
                let page = *seq
                    .block_table
                    .get(pos / self.page_size)
                    .ok_or_else(|| BackendError(format!("no page for position {pos}")))?;
                let slot = page as usize * self.page_size + pos % self.page_size;
                self.slots[slot] = Some((token, pos));
                if !self.window_slots.is_empty() {
                    let page = *seq.window_table.get(pos / self.page_size).ok_or_else(|| {
                        BackendError(format!("no window page for position {pos}"))
                    })?;
                    if page == 0 {
                        return Err(BackendError(format!("position {pos} written to page 0")));
                    }
                    let slot = page as usize * self.page_size + pos % self.page_size;
                    self.window_slots[slot] = Some((token, pos));
                }
            }
        }
        let mut logits = Vec::new();
        for seq in batch {
            let end = seq.start_pos + seq.tokens.len();
            let rows = match seq.logits {
                LogitsRequest::None => 0..0,
                LogitsRequest::Last => end - 1..end,
                LogitsRequest::All => seq.start_pos..end,
            };
            for pos in rows {
                let history = self.read_history(seq.block_table, pos)?;
                if let (Some(window), false) = (self.window, self.window_slots.is_empty()) {
                    let first = (pos + 1).saturating_sub(window);
                    let seen =
                        self.read_range(&self.window_slots, seq.window_table, first..pos + 1)?;
                    if seen[..] != history[first..] {
                        return Err(BackendError(format!("window of {pos} reads {seen:?}")));
                    }
                }
                logits.extend(salted_logits(history, self.salt));
            }
        }
        if let Some(states) = &mut self.states {
            for seq in batch {
                states.end(seq)?;
            }
        }
        Ok(ForwardOutput {
            logits,
            vocab_size: VOCAB,
        })
    }

    fn can_sample(&self) -> bool {
        self.samples_on_device
    }

    fn can_sample_masked(&self) -> bool {
        self.samples_masked
    }

    fn forward_sampled(
        &mut self,
        batch: &[SeqBatch<'_>],
        sampling: &[Option<DeviceSampling>],
    ) -> Result<SampledOutput, BackendError> {
        if !self.samples_on_device || sampling.len() != batch.len() {
            return Err(BackendError("fake: unexpected forward_sampled".into()));
        }
        if let Ok(mut log) = self.sampling_log.lock() {
            log.push(sampling.to_vec());
        }
        let all = self.forward(batch)?;
        let mut out = SampledOutput {
            forward: ForwardOutput {
                logits: Vec::new(),
                vocab_size: VOCAB,
            },
            tokens: Vec::with_capacity(batch.len()),
        };
        let mut row = 0;
        for (seq, params) in batch.iter().zip(sampling) {
            let rows = match seq.logits {
                LogitsRequest::None => 0,
                LogitsRequest::Last => 1,
                LogitsRequest::All => seq.tokens.len(),
            };
            match params {
                Some(p) if seq.logits == LogitsRequest::Last => {
                    let mut logits = all.row(row).to_vec();
                    if let (Some(mask), false) = (&p.mask, self.ignores_masks) {
                        // A failed constraint leaves nothing allowed: the commit ends it.
                        let words = mask.with_words(<[u32]>::to_vec).unwrap_or_default();
                        for (t, l) in logits.iter_mut().enumerate() {
                            if words.get(t / 32).is_none_or(|w| w & (1 << (t % 32)) == 0) {
                                *l = f32::NEG_INFINITY;
                            }
                        }
                    }
                    out.tokens.push(Some(device_pick(&logits, p)));
                }
                Some(_) => {
                    return Err(BackendError(
                        "fake: sampling asked for a non-Last row".into(),
                    ))
                }
                None => {
                    out.tokens.push(None);
                    for r in row..row + rows {
                        out.forward.logits.extend_from_slice(all.row(r));
                    }
                }
            }
            row += rows;
        }
        Ok(out)
    }
}
