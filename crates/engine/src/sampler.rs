//! Turning one row of logits into a token: the request's logit rules, penalties, temperature,
//! min-p / top-k / top-p filtering, seeded sampling, and log-probabilities for reporting.
//!
//! Order (vLLM's): the logit rules (`crate::logit_rules`: allowed ids, bad words, min tokens,
//! logit bias), penalties, then temperature, then min-p, top-k and top-p, each on what the
//! previous filter kept. Reported logprobs come from the RAW logits (before rules, penalties
//! and temperature), as vLLM reports them.

use std::cmp::Ordering;

use rand::rngs::StdRng;
use rand::Rng;

use crate::constraint::TokenMask;
use crate::distribution::{Candidate, Distribution};
use crate::request::SamplingParams;
use crate::token_pieces::InfillSampling;

mod infill;
mod logprobs;

pub use logprobs::{log_sum_exp, token_logprob};

/// Temperatures below this are greedy (as in vLLM): dividing by them would overflow.
const GREEDY_TEMPERATURE: f32 = 1e-5;
/// Top-p over at most this many candidates just sorts them.
const TOP_P_SORT_UP_TO: usize = 256;
/// Top-p over more candidates buckets them by logit first (see `apply_top_p`).
const TOP_P_BUCKETS: usize = 1024;

/// Reusable scratch buffers (one per scheduler thread): no allocation per token.
///
/// It knows the model's EOS ids for `min_tokens`, which holds them back (unless the request
/// ignores EOS) with the request's stop ids; [`Sampler::default`] knows none, so there
/// `min_tokens` holds back only the stop ids (tests, and a draft model's guesses).
#[derive(Debug, Default)]
pub struct Sampler {
    eos_token_ids: Vec<u32>,
    penalized: Vec<f32>,
    marks: Vec<u32>,
    candidates: Vec<Candidate>,
    bucket_mass: Vec<f64>,
    /// The logits with a constraint's forbidden tokens at -inf (`sample_masked`).
    masked: Vec<f32>,
}

/// Higher logit first; equal logits: lower id first (deterministic).
fn by_rank(a: &Candidate, b: &Candidate) -> Ordering {
    b.logit.total_cmp(&a.logit).then(a.token.cmp(&b.token))
}

impl Sampler {
    pub fn new(eos_token_ids: &[u32]) -> Self {
        Self {
            eos_token_ids: eos_token_ids.to_vec(),
            ..Self::default()
        }
    }

    /// Pick the next token. `prompt` and `output` are the sequence so far (for penalties).
    pub fn sample(
        &mut self,
        logits: &[f32],
        params: &SamplingParams,
        prompt: &[u32],
        output: &[u32],
        rng: &mut StdRng,
    ) -> u32 {
        if params.temperature < GREEDY_TEMPERATURE && !has_penalties(params) && !has_rules(params) {
            return argmax(logits);
        }
        self.apply_penalties(logits, params, prompt, output);
        if params.temperature < GREEDY_TEMPERATURE {
            return argmax(&self.penalized);
        }
        self.filter_candidates(params);
        self.apply_infill(params);
        let total: f64 = self.candidates.iter().map(|c| c.weight).sum();
        let mut threshold = rng.random::<f64>() * total;
        for candidate in &self.candidates {
            threshold -= candidate.weight;
            if threshold < 0.0 {
                return candidate.token;
            }
        }
        // Rounding left a sliver past the last weight: it belongs to the last candidate.
        self.candidates
            .last()
            .map(|c| c.token)
            .unwrap_or_else(|| argmax(&self.penalized))
    }

    /// [`Sampler::sample`] with every token `mask` forbids set to -inf first, so no rule
    /// (greedy included) can pick one. `mask` must allow some token.
    pub fn sample_masked(
        &mut self,
        logits: &[f32],
        mask: &TokenMask,
        params: &SamplingParams,
        prompt: &[u32],
        output: &[u32],
        rng: &mut StdRng,
    ) -> u32 {
        let mut masked = std::mem::take(&mut self.masked);
        masked.clear();
        masked.extend(logits.iter().enumerate().map(|(token, &logit)| {
            if mask.is_allowed(token as u32) {
                logit
            } else {
                f32::NEG_INFINITY
            }
        }));
        let mut token = self.sample(&masked, params, prompt, output, rng);
        if !mask.is_allowed(token) {
            // Only when every allowed logit is -inf itself: any allowed token will do.
            token = (0..logits.len() as u32)
                .find(|&t| mask.is_allowed(t))
                .unwrap_or(token);
        }
        self.masked = masked;
        token
    }

    /// The distribution `sample` draws from for these logits: a point mass for greedy
    /// requests, else the filtered candidates with their weights.
    pub fn distribution(
        &mut self,
        logits: &[f32],
        params: &SamplingParams,
        prompt: &[u32],
        output: &[u32],
    ) -> Distribution {
        if params.temperature < GREEDY_TEMPERATURE {
            self.apply_penalties(logits, params, prompt, output);
            return Distribution::point(argmax(&self.penalized));
        }
        Distribution::new(self.support(logits, params, prompt, output))
    }

    /// The tokens `sample` may draw from and their (unnormalised) weights, for `params` with a
    /// temperature > 0. Exposed for tests of the filters.
    pub fn support(
        &mut self,
        logits: &[f32],
        params: &SamplingParams,
        prompt: &[u32],
        output: &[u32],
    ) -> Vec<Candidate> {
        self.apply_penalties(logits, params, prompt, output);
        self.filter_candidates(params);
        self.apply_infill(params);
        self.candidates.clone()
    }

    /// llama.cpp's `infill` sampler, after the other filters, for a request that asks.
    fn apply_infill(&mut self, params: &SamplingParams) {
        if let Some(InfillSampling(pieces)) = &params.infill {
            let end_ids = params.end_token_ids(&self.eos_token_ids);
            let end_of_text = self.eos_token_ids.first().copied();
            infill::apply(&mut self.candidates, pieces, &end_ids, end_of_text);
        }
    }

    /// `self.penalized`: the logits with the request's rules, then its penalties, applied.
    fn apply_penalties(
        &mut self,
        logits: &[f32],
        params: &SamplingParams,
        prompt: &[u32],
        output: &[u32],
    ) {
        let vocab = logits.len();
        self.penalized.clear();
        self.penalized.extend_from_slice(logits);
        self.marks.resize(vocab, 0);
        let rules = &params.logit_rules;
        if !rules.is_empty() {
            let end_ids = match rules.holds_ends(output.len()) {
                true => params.end_token_ids(&self.eos_token_ids),
                false => Vec::new(),
            };
            rules.apply(&mut self.penalized, output, &end_ids);
        }
        let in_vocab = |t: &&u32| (**t as usize) < vocab;

        if !has_penalties(params) {
            return;
        }
        if params.repetition_penalty != 1.0 {
            let penalty = params.repetition_penalty;
            // Each distinct token once: mark, apply on first sight, then clear the marks.
            for &t in prompt.iter().chain(output).filter(in_vocab) {
                let mark = &mut self.marks[t as usize];
                if *mark == 0 {
                    *mark = 1;
                    let logit = &mut self.penalized[t as usize];
                    *logit = if *logit > 0.0 {
                        *logit / penalty
                    } else {
                        *logit * penalty
                    };
                }
            }
            for &t in prompt.iter().chain(output).filter(in_vocab) {
                self.marks[t as usize] = 0;
            }
        }

        if params.presence_penalty != 0.0 || params.frequency_penalty != 0.0 {
            for &t in output.iter().filter(in_vocab) {
                self.marks[t as usize] += 1;
            }
            for &t in output.iter().filter(in_vocab) {
                let count = std::mem::take(&mut self.marks[t as usize]);
                if count > 0 {
                    self.penalized[t as usize] -=
                        params.frequency_penalty * count as f32 + params.presence_penalty;
                }
            }
        }
    }

    /// From `self.penalized`: temperature, then min-p, top-k, top-p into `self.candidates`.
    fn filter_candidates(&mut self, params: &SamplingParams) {
        let max = self
            .penalized
            .iter()
            .copied()
            .fold(f32::NEG_INFINITY, f32::max);
        let temperature = params.temperature.max(GREEDY_TEMPERATURE);
        // min-p keeps p >= min_p * p_max, i.e. logit >= max + T * ln(min_p): no exp needed.
        let min_logit = if params.min_p > 0.0 {
            max as f64 + temperature as f64 * (params.min_p as f64).ln()
        } else {
            f64::NEG_INFINITY
        };
        self.candidates.clear();
        for (token, &logit) in self.penalized.iter().enumerate() {
            // -inf (a masked token) has no mass: never a candidate, even by rounding.
            if logit as f64 >= min_logit && logit > f32::NEG_INFINITY {
                self.candidates.push(Candidate {
                    token: token as u32,
                    logit,
                    weight: 0.0,
                });
            }
        }

        if params.top_k > 0 && params.top_k < self.candidates.len() {
            self.candidates
                .select_nth_unstable_by(params.top_k - 1, by_rank);
            self.candidates.truncate(params.top_k);
        }

        // Weights only for what survived; f32 exp is plenty next to sampling noise.
        for candidate in &mut self.candidates {
            candidate.weight = ((candidate.logit - max) / temperature).exp() as f64;
        }

        if params.top_p < 1.0 {
            self.apply_top_p(params.top_p as f64);
        }
    }

    /// Keep the smallest set of best tokens whose mass reaches `top_p` of what is left.
    ///
    /// Without a full sort: one pass spreads the mass over buckets of logit, which finds the
    /// bucket where the cumulative mass crosses the target; buckets above it stay whole, and
    /// only the crossing bucket's few members are sorted to find the exact cut.
    fn apply_top_p(&mut self, top_p: f64) {
        let candidates = &mut self.candidates;
        let target = top_p * candidates.iter().map(|c| c.weight).sum::<f64>();
        if candidates.len() <= TOP_P_SORT_UP_TO {
            candidates.sort_unstable_by(by_rank);
            let keep = nucleus_len(candidates, 0.0, target);
            candidates.truncate(keep.max(1));
            return;
        }
        let (low, high) = candidates
            .iter()
            .fold((f32::INFINITY, f32::NEG_INFINITY), |(lo, hi), c| {
                (lo.min(c.logit), hi.max(c.logit))
            });
        let span = high as f64 - low as f64;
        let scale = if span > 0.0 {
            (TOP_P_BUCKETS - 1) as f64 / span
        } else {
            0.0
        };
        // Monotone in the logit, so bucket order agrees with rank order (ties share a bucket).
        let bucket_of =
            |logit: f32| (((high as f64 - logit as f64) * scale) as usize).min(TOP_P_BUCKETS - 1);

        let mass = &mut self.bucket_mass;
        mass.clear();
        mass.resize(TOP_P_BUCKETS, 0.0);
        for c in candidates.iter() {
            mass[bucket_of(c.logit)] += c.weight;
        }
        let mut crossing = TOP_P_BUCKETS - 1;
        let mut mass_before = 0.0;
        for (bucket, &m) in mass.iter().enumerate().take(TOP_P_BUCKETS - 1) {
            if mass_before + m >= target {
                crossing = bucket;
                break;
            }
            mass_before += m;
        }

        candidates.retain(|c| bucket_of(c.logit) <= crossing);
        let mut whole = 0;
        for i in 0..candidates.len() {
            if bucket_of(candidates[i].logit) < crossing {
                candidates.swap(whole, i);
                whole += 1;
            }
        }
        let crossing_members = &mut candidates[whole..];
        crossing_members.sort_unstable_by(by_rank);
        let keep = nucleus_len(crossing_members, mass_before, target);
        candidates.truncate((whole + keep).max(1));
    }
}

/// How many of `sorted` (best first) stay: a token stays while the mass of the better ones,
/// starting from `mass_before`, is still short of `target`.
fn nucleus_len(sorted: &[Candidate], mut mass_before: f64, target: f64) -> usize {
    sorted
        .iter()
        .position(|c| {
            let reached = mass_before >= target;
            mass_before += c.weight;
            reached
        })
        .unwrap_or(sorted.len())
}

/// Whether `params` asks for greedy decoding (temperature 0, as vLLM rounds it).
pub fn is_greedy(params: &SamplingParams) -> bool {
    params.temperature < GREEDY_TEMPERATURE
}

/// Whether `params` sets any of the request's logit rules (`LogitRules`).
pub(crate) fn has_rules(params: &SamplingParams) -> bool {
    !params.logit_rules.is_empty()
}

pub(crate) fn has_penalties(params: &SamplingParams) -> bool {
    params.repetition_penalty != 1.0
        || params.presence_penalty != 0.0
        || params.frequency_penalty != 0.0
}

/// Index of the largest value; ties go to the lowest index.
pub fn argmax(values: &[f32]) -> u32 {
    let mut best = 0;
    for (i, &v) in values.iter().enumerate() {
        if v > values[best] {
            best = i;
        }
    }
    best as u32
}

#[cfg(test)]
mod tests;
