//! Suffix decoding (Arctic Inference's SuffixDecoding; vLLM's `suffix` method): drafts read
//! from suffix tries instead of a model. Each request has a trie over its own prompt and
//! output, and one trie over the outputs of this server's recent requests learns from its
//! traffic (agent loops and code edits repeat themselves). The longest recent context found
//! in a trie proposes the token that most often came next, then the next, as long as the
//! drafts stay likely enough to be worth scoring.
//!
//! Unlike the n-gram proposer it says how likely each draft is: an online calibration maps
//! what the trie saw (how long the matched context was, how often this continuation followed
//! it) to the acceptance rate measured so far, scaled per request by how its own drafts fared
//! against the chances they were given, and the speculation step keeps only as many drafts as
//! pay for their verification rows. Drafts are point masses, verified exactly.
//!
//! Memory: a trie node is 16 bytes and each token adds at most `max_depth` nodes; the
//! per-request tries live as long as their requests, the shared one holds the last
//! `cache_tokens` output tokens (oldest requests dropped first).

use std::collections::{HashMap, VecDeque};

use super::proposer::{DraftRequest, Drafts, Proposer};
use super::suffix_trie::{Appender, Match, SuffixTrie};
use crate::backend::{Backend, BackendError};
use crate::distribution::Distribution;
use crate::request::RequestId;

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SuffixConfig {
    /// Longest substring the tries index (and so the longest context matched).
    pub max_depth: usize,
    /// Output tokens of finished requests kept in the shared trie.
    pub cache_tokens: usize,
}

impl Default for SuffixConfig {
    fn default() -> Self {
        // vLLM's defaults for the depth; the cache holds ~1k answers of 256 tokens.
        Self {
            max_depth: 24,
            cache_tokens: 1 << 18,
        }
    }
}

/// Drafting stops once all drafts so far are accepted with less than this chance: further
/// drafts could not pay for their rows.
const MIN_CHANCE: f64 = 0.02;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Source {
    Request = 0,
    Shared = 1,
}

/// What a draft was proposed from: which trie, how long a context matched, how often the
/// drafted token followed it. The calibration's bucket.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Evidence {
    source: Source,
    match_len: usize,
    share: f64,
}

const LEN_BUCKETS: [usize; 8] = [1, 2, 3, 4, 6, 9, 14, usize::MAX];
const SHARE_BUCKETS: [f64; 3] = [0.99, 0.6, 0.0];
/// Pseudo-trials behind a bucket's prior.
const PRIOR_WEIGHT: f64 = 4.0;
/// Pseudo-trials of the server-wide rate behind a request's own: a request whose text departs
/// from what it copies more often than most (a docstring added to every function) soon has
/// its drafts cut shorter than the server's average would.
const REQUEST_WEIGHT: f64 = 8.0;
/// Pseudo-drafts behind a request's reliability (its accepted drafts over the chances they
/// were given), which starts at 1.
const RELIABILITY_WEIGHT: f64 = 2.0;
/// Trials per bucket after which its counts are halved, so the rates follow the traffic.
const MAX_TRIALS: f64 = 4096.0;

/// Measured acceptance by evidence bucket: the chance a draft is accepted when the drafts
/// before it were.
#[derive(Debug, Clone)]
struct Calibration {
    /// (accepted, trials) per [source][length bucket][share bucket].
    counts: [[[(f64, f64); 3]; 8]; 2],
}

impl Calibration {
    fn new() -> Self {
        Self {
            counts: [[[(0.0, 0.0); 3]; 8]; 2],
        }
    }

    fn bucket(e: &Evidence) -> (usize, usize, usize) {
        let len = LEN_BUCKETS
            .iter()
            .position(|&b| e.match_len <= b)
            .unwrap_or(7);
        let share = SHARE_BUCKETS
            .iter()
            .position(|&b| e.share >= b)
            .unwrap_or(2);
        (e.source as usize, len, share)
    }

    /// Before any measurement: the trie's own share, discounted for short contexts.
    fn prior(e: &Evidence) -> f64 {
        e.share * e.match_len as f64 / (e.match_len as f64 + 1.0)
    }

    /// The measured rate of `e`'s bucket, pulled towards `prior` by `weight` pseudo-trials.
    fn rate(&self, e: &Evidence, prior: f64, weight: f64) -> f64 {
        let (s, l, h) = Self::bucket(e);
        let (hits, trials) = self.counts[s][l][h];
        (hits + weight * prior) / (trials + weight)
    }

    fn record(&mut self, e: &Evidence, accepted: bool) {
        let (s, l, h) = Self::bucket(e);
        let c = &mut self.counts[s][l][h];
        c.0 += f64::from(u8::from(accepted));
        c.1 += 1.0;
        if c.1 > MAX_TRIALS {
            *c = (c.0 / 2.0, c.1 / 2.0);
        }
    }
}

/// One live request's trie and what the proposer said last.
#[derive(Debug, Clone)]
struct RequestIndex {
    trie: SuffixTrie,
    appender: Appender,
    /// Leading tokens of the request indexed so far.
    indexed: usize,
    num_prompt_tokens: usize,
    /// Its output so far, for the shared trie when it finishes.
    output: Vec<u32>,
    /// Evidence of each draft of the last proposal and its calibrated chance, for the verdict.
    last: Vec<(Evidence, f64)>,
    /// Over this request's checked drafts: their calibrated chances summed (`predicted`) and
    /// how many were accepted (`realized`). The ratio, its reliability, scales its chances: a
    /// request that keeps departing from what it could copy (an answer in a format no trie
    /// holds) stops paying for drafts sooner than its buckets alone would tell.
    predicted: f64,
    realized: f64,
    /// This request's own acceptance by bucket.
    calibration: Calibration,
}

impl RequestIndex {
    fn new(max_depth: usize, num_prompt_tokens: usize) -> Self {
        Self {
            trie: SuffixTrie::new(max_depth),
            appender: Appender::default(),
            indexed: 0,
            num_prompt_tokens,
            output: Vec::new(),
            last: Vec::new(),
            predicted: 0.0,
            realized: 0.0,
            calibration: Calibration::new(),
        }
    }

    fn catch_up(&mut self, tokens: &[u32]) {
        for (position, &t) in tokens.iter().enumerate().skip(self.indexed) {
            self.appender.push(&mut self.trie, t);
            if position >= self.num_prompt_tokens {
                self.output.push(t);
            }
        }
        self.indexed = self.indexed.max(tokens.len());
    }
}

/// The chance a draft with evidence `e` is accepted (the drafts before it were): the server's
/// measured rate for its bucket (from the trie's own share before any measurement), then the
/// request's own.
fn chance(server: &Calibration, request: &Calibration, e: &Evidence) -> f64 {
    let server_rate = server.rate(e, Calibration::prior(e), PRIOR_WEIGHT);
    request.rate(e, server_rate, REQUEST_WEIGHT)
}

/// A proposal: drafts with their evidence and their chances (cumulative).
#[derive(Debug, Default)]
struct Proposal {
    tokens: Vec<u32>,
    evidence: Vec<Evidence>,
    chances: Vec<f64>,
    /// Each draft's own chance as calibrated (given the drafts before it were accepted),
    /// before the request's reliability scaled it.
    calibrated: Vec<f64>,
}

impl Proposal {
    fn expected_accepted(&self) -> f64 {
        self.chances.iter().sum()
    }
}

/// Follows the trie from `start`, the longest match of `context`, the likeliest token each time.
fn walk(
    trie: &SuffixTrie,
    source: Source,
    (context, start): (&[u32], Option<Match>),
    k: usize,
    calibration: (&Calibration, &Calibration),
    reliability: f64,
) -> Proposal {
    let depth = trie.max_depth();
    let mut tail = context[context.len().saturating_sub(depth)..].to_vec();
    let mut at = start;
    let mut proposal = Proposal::default();
    let mut chance = 1.0;
    while proposal.tokens.len() < k {
        let Some(Match { node, len }) = at else { break };
        let Some(next) = trie.likeliest_next(node) else {
            break;
        };
        let evidence = Evidence {
            source,
            match_len: len,
            share: next.share,
        };
        let calibrated = self::chance(calibration.0, calibration.1, &evidence);
        chance *= (calibrated * reliability).min(1.0);
        if chance < MIN_CHANCE {
            break;
        }
        proposal.tokens.push(next.token);
        proposal.evidence.push(evidence);
        proposal.chances.push(chance);
        proposal.calibrated.push(calibrated);
        tail.push(next.token);
        // The match grows by the drafted token while the trie is deep enough and knows what
        // followed; else look the context up again.
        at = if len + 1 < depth && trie.likeliest_next(next.child).is_some() {
            Some(Match {
                node: next.child,
                len: len + 1,
            })
        } else {
            trie.longest_match(&tail)
        };
    }
    proposal
}

pub struct SuffixProposer {
    config: SuffixConfig,
    requests: HashMap<RequestId, RequestIndex>,
    shared: SuffixTrie,
    /// Outputs in the shared trie, oldest first, and their total length.
    cached: VecDeque<Vec<u32>>,
    cached_tokens: usize,
    calibration: Calibration,
}

impl SuffixProposer {
    pub fn new(config: SuffixConfig) -> Self {
        Self {
            config,
            requests: HashMap::new(),
            shared: SuffixTrie::new(config.max_depth),
            cached: VecDeque::new(),
            cached_tokens: 0,
            calibration: Calibration::new(),
        }
    }

    /// Requests with a trie (live ones that have asked for drafts).
    pub fn num_live(&self) -> usize {
        self.requests.len()
    }

    /// Output tokens of finished requests in the shared trie.
    pub fn cached_tokens(&self) -> usize {
        self.cached_tokens
    }

    fn learn(&mut self, output: Vec<u32>) {
        if output.is_empty() || self.config.cache_tokens == 0 {
            return;
        }
        self.shared.add(&output);
        self.cached_tokens += output.len();
        self.cached.push_back(output);
        while self.cached_tokens > self.config.cache_tokens {
            let Some(old) = self.cached.pop_front() else {
                break;
            };
            self.shared.remove(&old);
            self.cached_tokens -= old.len();
        }
    }

    fn propose_one(&mut self, r: &DraftRequest<'_>) -> Drafts {
        let index = self
            .requests
            .entry(r.id)
            .or_insert_with(|| RequestIndex::new(self.config.max_depth, r.num_prompt_tokens));
        if r.tokens.len() < index.indexed {
            // The sequence shrank (never expected): index it afresh.
            *index = RequestIndex::new(self.config.max_depth, r.num_prompt_tokens);
        }
        index.catch_up(r.tokens);
        let calibration = (&self.calibration, &index.calibration);
        let reliability =
            (index.realized + RELIABILITY_WEIGHT) / (index.predicted + RELIABILITY_WEIGHT);
        // The request's trie is matched from its appender's open suffixes, and the shared one
        // only when it holds something: this runs for every decoding sequence at every step.
        let start = index.appender.longest_match(&index.trie);
        let own = walk(
            &index.trie,
            Source::Request,
            (r.tokens, start),
            r.k,
            calibration,
            reliability,
        );
        let shared = if self.cached_tokens > 0 {
            let depth = self.shared.max_depth();
            let start = self
                .shared
                .longest_match(&r.tokens[r.tokens.len().saturating_sub(depth)..]);
            walk(
                &self.shared,
                Source::Shared,
                (r.tokens, start),
                r.k,
                calibration,
                reliability,
            )
        } else {
            Proposal::default()
        };
        let best = if shared.expected_accepted() > own.expected_accepted() {
            shared
        } else {
            own
        };
        index.last = best.evidence.into_iter().zip(best.calibrated).collect();
        Drafts {
            q: best
                .tokens
                .iter()
                .map(|&t| Distribution::point(t))
                .collect(),
            tokens: best.tokens,
            draft_computed: r.draft_computed,
            chances: best.chances,
        }
    }
}

impl Proposer for SuffixProposer {
    fn name(&self) -> &'static str {
        "suffix"
    }
    fn propose(
        &mut self,
        requests: &mut [DraftRequest<'_>],
        _target: &mut dyn Backend,
    ) -> Result<Vec<Drafts>, BackendError> {
        Ok(requests.iter().map(|r| self.propose_one(r)).collect())
    }
    fn scores_drafts(&self) -> bool {
        true
    }
    fn verdict(&mut self, id: RequestId, drafted: usize, accepted: usize) {
        let Some(index) = self.requests.get_mut(&id) else {
            return;
        };
        let last = std::mem::take(&mut index.last);
        for (i, (evidence, calibrated)) in last.iter().enumerate().take(drafted) {
            if i > accepted {
                break;
            }
            index.predicted += calibrated;
            index.realized += f64::from(u8::from(i < accepted));
            self.calibration.record(evidence, i < accepted);
            index.calibration.record(evidence, i < accepted);
        }
    }
    fn finished(&mut self, id: RequestId) {
        if let Some(index) = self.requests.remove(&id) {
            self.learn(index.output);
        }
    }
}

#[cfg(test)]
mod tests;
