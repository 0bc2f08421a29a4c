use rand::rngs::StdRng;
use rand::SeedableRng;

use super::*;
use crate::request::SamplingParams;
use crate::testing::fake_backend::FakeBackend;

fn ask(p: &mut SuffixProposer, id: RequestId, tokens: &[u32], prompt: usize, k: usize) -> Drafts {
    let params = SamplingParams::default();
    let mut rng = StdRng::seed_from_u64(0);
    let mut requests = [DraftRequest {
        id,
        tokens,
        num_prompt_tokens: prompt,
        draft_computed: 0,
        block_table: &[],
        state_slot: None,
        params: &params,
        k,
        rng: &mut rng,
    }];
    p.propose(&mut requests, &mut FakeBackend::new(4096))
        .unwrap()
        .remove(0)
}

/// A "file" of distinct tokens, so that every context in it is unique.
fn file(len: u32) -> Vec<u32> {
    (100..100 + len).collect()
}

#[test]
fn an_output_that_copies_its_prompt_gets_the_rest_of_the_copy() {
    let mut p = SuffixProposer::new(SuffixConfig::default());
    let text = file(40);
    let mut tokens = vec![1, 2, 3];
    tokens.extend(&text);
    let prompt = tokens.len();
    // The output has started to repeat the file.
    tokens.extend(&text[..5]);
    let d = ask(&mut p, 7, &tokens, prompt, 8);
    assert_eq!(d.tokens, text[5..13]);
    assert_eq!(d.q.len(), 8);
    assert_eq!(d.chances.len(), 8);
    assert!(d.chances.windows(2).all(|w| w[1] <= w[0]));
    assert!(d.chances.iter().all(|&c| c > 0.0 && c <= 1.0));
    // Nothing in the prompt to copy: no drafts.
    let d = ask(&mut p, 8, &[5, 6, 7, 8], 3, 8);
    assert!(d.tokens.is_empty());
    assert_eq!(p.num_live(), 2);
}

#[test]
fn finished_outputs_teach_later_requests() {
    let mut p = SuffixProposer::new(SuffixConfig::default());
    let answer = file(30);
    // Request 1 answers with `answer` (its prompt is unrelated).
    let mut tokens = vec![1, 2, 3];
    tokens.extend(&answer);
    ask(&mut p, 1, &tokens, 3, 4);
    p.finished(1);
    assert_eq!(p.num_live(), 0);
    assert_eq!(p.cached_tokens(), answer.len());
    // Request 2, another prompt, starts the same answer: the shared trie knows the rest.
    let mut tokens = vec![9, 9, 8];
    tokens.extend(&answer[..6]);
    let d = ask(&mut p, 2, &tokens, 3, 6);
    assert_eq!(d.tokens, answer[6..12]);
}

#[test]
fn the_shared_trie_keeps_only_the_latest_outputs() {
    let config = SuffixConfig {
        max_depth: 8,
        cache_tokens: 100,
    };
    let mut p = SuffixProposer::new(config);
    for id in 0..20u64 {
        // Each answer is 30 distinct tokens of its own.
        let base = 1000 + 100 * id as u32;
        let mut tokens = vec![1];
        tokens.extend(base..base + 30);
        ask(&mut p, id, &tokens, 1, 2);
        p.finished(id);
        assert!(p.cached_tokens() <= 100);
    }
    assert_eq!(p.cached_tokens(), 90);
    // At most depth nodes per cached token (+ the root).
    assert!(p.shared.num_nodes() <= 90 * 8 + 1);
    // The oldest answers are gone, the newest are there.
    let old = ask(&mut p, 100, &[5, 1000, 1001, 1002], 1, 3);
    assert!(old.tokens.is_empty());
    let new: Vec<u32> = vec![5, 2900, 2901, 2902];
    assert_eq!(ask(&mut p, 101, &new, 1, 3).tokens, [2903, 2904, 2905]);
}

#[test]
fn rejected_evidence_lowers_the_chances_and_accepted_raises_them() {
    let mut p = SuffixProposer::new(SuffixConfig::default());
    let text = file(60);
    let mut tokens = text.clone();
    tokens.extend(&text[..10]);
    let before = ask(&mut p, 1, &tokens, text.len(), 6).chances;
    // The target keeps rejecting the first draft: drafts from such contexts get unlikely.
    for _ in 0..50 {
        ask(&mut p, 1, &tokens, text.len(), 6);
        p.verdict(1, 6, 0);
    }
    let after = ask(&mut p, 1, &tokens, text.len(), 6);
    assert!(after.chances.is_empty() || after.chances[0] < before[0] / 2.0);
    // Accepting everything brings them back up.
    let mut p = SuffixProposer::new(SuffixConfig::default());
    for _ in 0..50 {
        ask(&mut p, 1, &tokens, text.len(), 6);
        p.verdict(1, 6, 6);
    }
    let sure = ask(&mut p, 1, &tokens, text.len(), 6).chances;
    assert!(sure[5] > before[5], "{sure:?} vs {before:?}");
    assert!(sure[0] > 0.9);
}

#[test]
fn chances_follow_how_often_a_continuation_was_seen() {
    let mut p = SuffixProposer::new(SuffixConfig::default());
    // "1 2 3" went on as 4 three times and as 5 once (each time after a token of its own,
    // so no longer context tells them apart): 4 is proposed, less surely than a
    // continuation seen every time.
    let mut tokens = Vec::new();
    for (i, next) in [4, 4, 5, 4].into_iter().enumerate() {
        tokens.extend([200 + i as u32, 1, 2, 3, next]);
    }
    tokens.extend([300, 1, 2, 3]);
    let d = ask(&mut p, 1, &tokens, tokens.len(), 1);
    assert_eq!(d.tokens, [4]);
    let mut sure = Vec::new();
    for i in 0..4 {
        sure.extend([200 + i, 1, 2, 3, 4]);
    }
    sure.extend([300, 1, 2, 3]);
    let s = ask(&mut p, 2, &sure, sure.len(), 1);
    assert_eq!(s.tokens, [4]);
    assert!(d.chances[0] < s.chances[0]);
}

#[test]
fn a_request_whose_drafts_fail_gets_lower_chances_everywhere() {
    // Request 1 misses three drafts made from a one-token match; then it and a fresh request 2
    // ask with a ten-token match, a bucket neither has measured: request 1's is lower, from its
    // own record of drafts kept against the chances they were given.
    let mut p = SuffixProposer::new(SuffixConfig::default());
    let text = file(60);
    let mut tokens = text.clone();
    tokens.push(text[0]);
    for _ in 0..3 {
        let d = ask(&mut p, 1, &tokens, text.len(), 4);
        assert!(!d.tokens.is_empty());
        p.verdict(1, d.tokens.len(), 0);
    }
    tokens.extend(&text[1..10]);
    let failing = ask(&mut p, 1, &tokens, text.len(), 4).chances;
    let fresh = ask(&mut p, 2, &tokens, text.len(), 4).chances;
    assert!(
        failing.first().copied().unwrap_or(0.0) < 0.8 * fresh[0],
        "{failing:?} vs {fresh:?}"
    );
}
