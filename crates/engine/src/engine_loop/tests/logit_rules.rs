//! Requests with logit rules (`logit_bias`, `min_tokens`, `allowed_token_ids`, `bad_words`)
//! through the whole engine: their greedy output is the ruled oracle's, token for token, on a
//! backend that samples on its device (which never gets them) and with speculative decoding
//! for every proposer (whose verification targets the ruled distribution); seeded sampled
//! output with drafts keeps every rule.

use rand::rngs::StdRng;
use rand::SeedableRng;

use super::speculative::{harness, prompts, Method};
use crate::logit_rules::LogitRules;
use crate::request::{FinishReason, SamplingParams};
use crate::sampler::Sampler;
use crate::testing::fake_backend::{expected_greedy, logits_for_history, FakeBackend};
use crate::testing::harness::{greedy, request, Harness, Setup};

const MAX_TOKENS: usize = 24;

/// The greedy output of the fake model under `params`' rules, computed without an engine.
fn expected_ruled(prompt: &[u32], params: &SamplingParams, eos: &[u32]) -> Vec<u32> {
    let mut sampler = Sampler::new(eos);
    let mut rng = StdRng::seed_from_u64(0);
    let ends = params.end_token_ids(eos);
    let mut output = Vec::new();
    while output.len() < params.max_tokens {
        let history = prompt.iter().chain(&output).copied();
        let logits = logits_for_history(history);
        let token = sampler.sample(&logits, params, prompt, &output, &mut rng);
        output.push(token);
        if ends.contains(&token) {
            break;
        }
    }
    output
}

/// One request per rule (and one with all of them), each set up to change the plain greedy
/// output of its prompt: the test fails if a rule is dropped anywhere on the way.
fn ruled_requests(eos: u32) -> Vec<(Vec<u32>, SamplingParams)> {
    let prompts = prompts(5, 31);
    let plain = |p: &Vec<u32>| expected_greedy(p, MAX_TOKENS, &[]);
    let with = |rules: LogitRules| SamplingParams {
        logit_rules: rules,
        ..greedy(MAX_TOKENS)
    };
    let first = plain(&prompts[0]);
    let bias = LogitRules {
        logit_bias: vec![(first[0], -100.0), (7, 2.5), (eos, -1.0)],
        ..LogitRules::default()
    };
    let allowed = LogitRules {
        allowed_token_ids: Some((0..32).filter(|t| t % 3 != 0).collect()),
        ..LogitRules::default()
    };
    let out = plain(&prompts[2]);
    let bad = LogitRules {
        bad_words: vec![
            vec![out[1], out[2]],
            vec![out[5]],
            vec![out[7], out[8], out[9]],
        ],
        ..LogitRules::default()
    };
    let min = LogitRules {
        min_tokens: 12,
        ..LogitRules::default()
    };
    let all = LogitRules {
        min_tokens: 6,
        ..[&bias, &allowed, &bad]
            .iter()
            .fold(LogitRules::default(), |mut all, r| {
                all.logit_bias.extend(&r.logit_bias);
                all.allowed_token_ids = all.allowed_token_ids.or(r.allowed_token_ids.clone());
                all.bad_words.extend(r.bad_words.iter().cloned());
                all
            })
    };
    let rules = [bias, allowed, bad, min, all];
    prompts
        .into_iter()
        .zip(rules)
        .map(|(p, r)| (p, with(r)))
        .collect()
}

fn run(mut h: Harness, requests: &[(Vec<u32>, SamplingParams)]) -> Harness {
    for (i, (prompt, params)) in requests.iter().enumerate() {
        h.add(request(i as u64, prompt.clone(), params.clone()));
    }
    h.run_to_completion();
    h
}

/// The EOS the tests use: a token the plain greedy output of the min_tokens request's prompt
/// emits early, so min_tokens has something to hold back, and that no request's plain output
/// starts with (which would leave its rules nothing to change).
fn eos() -> u32 {
    let prompts = prompts(5, 31);
    let firsts: Vec<u32> = prompts
        .iter()
        .map(|p| expected_greedy(p, 1, &[])[0])
        .collect();
    let early = expected_greedy(&prompts[3], 6, &[]);
    early[1..]
        .iter()
        .copied()
        .find(|t| !firsts.contains(t))
        .expect("an early token no output starts with")
}

#[test]
fn ruled_greedy_output_is_the_oracles_and_never_goes_to_the_device() {
    let eos = eos();
    let requests = ruled_requests(eos);
    for (i, (prompt, params)) in requests.iter().enumerate() {
        let ruled = expected_ruled(prompt, params, &[eos]);
        let unruled = expected_ruled(prompt, &greedy(MAX_TOKENS), &[eos]);
        assert_ne!(ruled, unruled, "the rules must change request {i}'s output");
    }
    let host = run(Harness::new(Setup::default(), vec![eos]), &requests);
    let mut backend = FakeBackend::new(Setup::default().max_context);
    backend.samples_on_device = true;
    let sampling_log = backend.sampling_log.clone();
    // With a plain request beside them, which the device samples.
    let mut with_plain = requests.clone();
    with_plain.push((prompts(6, 31)[5].clone(), greedy(MAX_TOKENS)));
    let device = run(
        Harness::with_backend(Setup::default(), vec![eos], backend),
        &with_plain,
    );
    for (i, (prompt, params)) in requests.iter().enumerate() {
        let want = expected_ruled(prompt, params, &[eos]);
        let id = i as u64;
        assert_eq!(host.received[&id].tokens, want, "host, request {i}");
        assert_eq!(device.received[&id].tokens, want, "device, request {i}");
    }
    // min_tokens (12) ran past the EOS plain greedy emits early, then may stop on it.
    let min = &host.received[&3];
    assert!(min.tokens.len() >= 12 && !min.tokens[..12].contains(&eos));
    let log = sampling_log.lock().unwrap();
    assert!(
        !log.is_empty(),
        "the plain request was sampled on the device"
    );
    for step in log.iter() {
        let on_device = step.iter().filter(|s| s.is_some()).count();
        assert!(
            on_device <= 1,
            "a request with logit rules went to the device"
        );
    }
}

#[test]
fn ruled_greedy_output_with_drafts_is_ruled_output_without() {
    let eos = eos();
    let requests = ruled_requests(eos);
    for method in [
        Method::Ngram,
        Method::Suffix,
        Method::PerfectDraft,
        Method::Draft,
    ] {
        let h = run(harness(Setup::default(), vec![eos], method, 4), &requests);
        for (i, (prompt, params)) in requests.iter().enumerate() {
            let got = &h.received[&(i as u64)];
            let want = expected_ruled(prompt, params, &[eos]);
            assert_eq!(got.tokens, want, "{method:?} request {i}");
            let finish = match want.last() == Some(&eos) {
                true => FinishReason::Stop,
                false => FinishReason::Length,
            };
            assert_eq!(got.finish, Some(finish), "{method:?} request {i}");
        }
        let c = &h.core.speculation().unwrap().counters;
        if matches!(method, Method::PerfectDraft | Method::Draft) {
            assert!(c.num_draft_tokens > 0, "{method:?}: nothing was drafted");
        }
        if let Method::Draft = method {
            assert!(
                c.num_accepted_tokens > 0,
                "some drafts are kept under the rules"
            );
        }
    }
}

#[test]
fn sampled_output_with_drafts_keeps_every_rule() {
    let eos = eos();
    let requests = ruled_requests(eos);
    for method in [Method::PerfectDraft, Method::Draft] {
        for seed in 0..4u64 {
            let sampled: Vec<(Vec<u32>, SamplingParams)> = requests
                .iter()
                .map(|(p, params)| {
                    let params = SamplingParams {
                        temperature: 1.0,
                        seed: Some(seed),
                        ..params.clone()
                    };
                    (p.clone(), params)
                })
                .collect();
            let h = run(harness(Setup::default(), vec![eos], method, 4), &sampled);
            for (i, (_, params)) in sampled.iter().enumerate() {
                let got = &h.received[&(i as u64)].tokens;
                check_rules(got, &params.logit_rules, eos);
            }
        }
    }
}

/// `output` keeps `rules`: only allowed ids, no bad word completed, no EOS before min_tokens.
fn check_rules(output: &[u32], rules: &LogitRules, eos: u32) {
    if let Some(allowed) = &rules.allowed_token_ids {
        assert!(output.iter().all(|t| allowed.contains(t)), "{output:?}");
    }
    for word in &rules.bad_words {
        let found = output.windows(word.len()).any(|w| w == word.as_slice());
        assert!(!found, "{word:?} in {output:?}");
    }
    let held = output.len().min(rules.min_tokens);
    assert!(!output[..held].contains(&eos), "{output:?}");
}

#[test]
fn a_rule_naming_a_token_past_the_vocabulary_is_refused_on_arrival() {
    let mut h = Harness::new(Setup::default(), vec![]);
    let rules = [
        LogitRules {
            logit_bias: vec![(32, 1.0)],
            ..LogitRules::default()
        },
        LogitRules {
            allowed_token_ids: Some(vec![1, 99]),
            ..LogitRules::default()
        },
        LogitRules {
            bad_words: vec![vec![3, 32]],
            ..LogitRules::default()
        },
    ];
    for (i, rules) in rules.into_iter().enumerate() {
        let params = SamplingParams {
            logit_rules: rules,
            ..greedy(4)
        };
        h.add(request(i as u64, vec![1, 2, 3], params));
    }
    h.run_to_completion();
    for i in 0..3u64 {
        assert!(h.received[&i].tokens.is_empty(), "request {i}");
        assert_eq!(h.received[&i].finish, Some(FinishReason::Abort));
    }
}
