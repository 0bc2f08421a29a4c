//! Replays recorded greedy generations through a model-free proposer (n-gram or suffix) with
//! a linear cost model for the target pass, `T(rows) = fixed + per_row * rows` (measure both
//! on the machine: a plain decode step is `fixed + per_row`, a prompt's tokens/s gives
//! `per_row`), and prints what speculation would make of them: steps, drafts, accepted, the
//! predicted time per output token against plain decoding, per request and overall. Greedy
//! verification keeps a draft exactly when it equals the recorded next token, so the replay
//! needs no model; requests run one after another, as at concurrency 1.
//!
//! usage: spec_replay FILE.jsonl [ngram|suffix] [K] [FIXED_MS PER_ROW_MS | ROWS=MS,ROWS=MS,...]
//! FILE.jsonl: one {"prompt": [ids], "output": [ids]} per line (e.g. from the server with
//! `"return_token_ids": true`). `SPEC_DEBUG=N` prints request N's proposals step by step.

use rand::SeedableRng;

use ferrite_engine::speculative::policy::SpecPolicy;
use ferrite_engine::speculative::{DraftRequest, NgramProposer, Proposer, SuffixProposer};
use ferrite_engine::{Backend, BackendError, ForwardOutput, SamplingParams, SeqBatch};

/// The target `propose` is given: the model-free proposers replayed here never call it.
struct NoModel;

impl Backend for NoModel {
    fn vocab_size(&self) -> usize {
        0
    }
    fn kv_bytes_per_token(&self) -> usize {
        0
    }
    fn max_context_len(&self) -> usize {
        0
    }
    fn init_kv_cache(&mut self, _pages: usize, _page_size: usize) -> Result<(), BackendError> {
        Ok(())
    }
    fn forward(&mut self, _batch: &[SeqBatch<'_>]) -> Result<ForwardOutput, BackendError> {
        Err(BackendError("the replay has no model".into()))
    }
}

fn ids(value: &serde_json::Value, key: &str) -> anyhow::Result<Vec<u32>> {
    let list = value[key]
        .as_array()
        .ok_or_else(|| anyhow::anyhow!("no {key} list"))?;
    Ok(list
        .iter()
        .filter_map(|v| v.as_u64().map(|x| x as u32))
        .collect())
}

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    anyhow::ensure!(
        args.len() >= 2,
        "usage: spec_replay FILE.jsonl [ngram|suffix] [K] [FIXED_MS] [PER_ROW_MS]"
    );
    let method = args.get(2).map_or("suffix", String::as_str);
    let k: usize = args.get(3).map_or(Ok(24), |a| a.parse())?;
    // FIXED_MS may instead be a measured table, `rows=ms,rows=ms,...` (e.g. from `ferrite
    // bench-model --prompt-len R --gen-len 0`): linear between its points and past its last.
    let table: Vec<(f64, f64)> = match args.get(4) {
        Some(a) if a.contains('=') => a
            .split(',')
            .map(|p| {
                let (r, ms) = p
                    .split_once('=')
                    .ok_or_else(|| anyhow::anyhow!("`{p}` is not ROWS=MS"))?;
                Ok((r.parse()?, ms.parse()?))
            })
            .collect::<anyhow::Result<_>>()?,
        fixed => {
            let fixed: f64 = fixed.map_or(Ok(53.0), |a| a.parse())?;
            let per_row: f64 = args.get(5).map_or(Ok(19.0), |a| a.parse())?;
            vec![(1.0, fixed + per_row), (2.0, fixed + 2.0 * per_row)]
        }
    };
    anyhow::ensure!(table.len() >= 2, "a cost table needs two points at least");
    let cost = |rows: usize| {
        let r = rows as f64;
        let i = table
            .iter()
            .position(|p| p.0 >= r)
            .unwrap_or(table.len() - 1)
            .max(1);
        let ((r0, t0), (r1, t1)) = (table[i - 1], table[i]);
        (t0 + (r - r0) * (t1 - t0) / (r1 - r0)) / 1000.0
    };
    let mut proposer: Box<dyn Proposer> = match method {
        "ngram" => Box::new(NgramProposer::default()),
        "suffix" => Box::new(SuffixProposer::new(Default::default())),
        other => anyhow::bail!("unknown method {other}"),
    };
    let mut policy = SpecPolicy::new(k);
    for rows in 1..=k + 1 {
        policy.record_target(rows, cost(rows));
    }
    let params = SamplingParams::default();
    let mut rng = rand::rngs::StdRng::seed_from_u64(0);
    let (mut total_tpot, mut total_plain, mut n) = (0.0, 0.0, 0usize);
    let text = std::fs::read_to_string(&args[1])?;
    for (id, line) in text.lines().filter(|l| !l.trim().is_empty()).enumerate() {
        let value: serde_json::Value = serde_json::from_str(line)?;
        let (prompt, output) = (ids(&value, "prompt")?, ids(&value, "output")?);
        let mut tokens = prompt.clone();
        tokens.push(output[0]);
        let (mut done, mut seconds, mut steps, mut drafted, mut accepted) = (1, 0.0, 0, 0, 0);
        while done < output.len() {
            let want = k.min(output.len() - done - 1);
            let mut request = [DraftRequest {
                id: id as u64,
                tokens: &tokens,
                num_prompt_tokens: prompt.len(),
                draft_computed: 0,
                block_table: &[],
                state_slot: None,
                params: &params,
                k: want,
                rng: &mut rng,
            }];
            let mut d = proposer.propose(&mut request, &mut NoModel)?.remove(0);
            // Scored drafts are cut as the engine cuts them; n-gram drafts are all kept, as
            // with --speculative-fixed-k.
            if std::env::var("SPEC_DEBUG").ok() == Some(id.to_string()) {
                eprintln!(
                    "step {steps}: at {done}, proposed {} chances {:?} next {:?} proposed {:?}",
                    d.tokens.len(),
                    d.chances
                        .iter()
                        .map(|c| (c * 100.0).round() / 100.0)
                        .collect::<Vec<_>>(),
                    &output[done..(done + 4).min(output.len())],
                    &d.tokens[..d.tokens.len().min(4)]
                );
            }
            if !d.chances.is_empty() {
                let keep = policy.best_length(&d.chances, 1, 1.0);
                d.tokens.truncate(keep);
            }
            let kept = d
                .tokens
                .iter()
                .zip(&output[done..])
                .take_while(|(a, b)| a == b)
                .count();
            if !d.tokens.is_empty() {
                proposer.verdict(id as u64, d.tokens.len(), kept);
            }
            seconds += cost(d.tokens.len() + 1);
            steps += 1;
            drafted += d.tokens.len();
            accepted += kept;
            let advance = (kept + 1).min(output.len() - done);
            tokens.extend_from_slice(&output[done..done + advance]);
            done += advance;
        }
        proposer.finished(id as u64);
        let tpot = seconds / (output.len() - 1).max(1) as f64;
        let plain = cost(1);
        println!(
            "request {id}: {} out, {steps} steps, drafted {drafted}, accepted {accepted}, \
             TPOT {:.1} ms (plain {:.1}): {:.2}x",
            output.len(),
            tpot * 1e3,
            plain * 1e3,
            plain / tpot
        );
        total_tpot += tpot;
        total_plain += plain;
        n += 1;
    }
    println!(
        "{method} K={k}: mean TPOT {:.1} ms against plain {:.1} ms: {:.2}x",
        1e3 * total_tpot / n as f64,
        1e3 * total_plain / n as f64,
        total_plain / total_tpot
    );
    Ok(())
}
