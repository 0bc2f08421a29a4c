use super::*;
use crate::backend::StateCopy;
use crate::request::SamplingParams;
use crate::testing::harness::{greedy, request};

fn scheduler(num_pages: usize, page_size: usize, budget: usize, max_seqs: usize) -> Scheduler {
    Scheduler::new(
        SchedulerConfig {
            max_num_batched_tokens: budget,
            max_num_seqs: max_seqs,
            prefill_per_decode: 0,
            policy: Default::default(),
        },
        KvManager::new(num_pages, page_size, true),
    )
}

fn add(s: &mut Scheduler, id: RequestId, prompt_len: usize, params: SamplingParams) {
    // Distinct per request, so nothing is shared unless a test shares it on purpose.
    let prompt = (0..prompt_len as u32)
        .map(|t| t + 1000 * id as u32)
        .collect();
    s.add(Sequence::new(request(id, prompt, params)));
}

/// Schedule, pretend the model ran, and append a token to every sequence that sampled.
fn step(s: &mut Scheduler) -> StepPlan {
    let plan = s.schedule();
    let outcomes: Vec<ChunkOutcome> = plan
        .chunks
        .iter()
        .map(|chunk| ChunkOutcome {
            next_token: (chunk.logits == LogitsRequest::Last).then_some(7),
            ..ChunkOutcome::default()
        })
        .collect();
    s.commit(&plan, &outcomes);
    s.check_accounting().unwrap();
    plan
}

fn summary(plan: &StepPlan) -> Vec<(RequestId, usize, usize)> {
    plan.chunks.iter().map(|c| (c.id, c.start, c.len)).collect()
}

#[test]
fn prefills_are_chunked_under_the_budget_and_share_steps_with_decodes() {
    let mut s = scheduler(64, 4, 10, 8);
    add(&mut s, 1, 3, greedy(50));
    add(&mut s, 2, 25, greedy(50));
    // Step 1: all of 1's prompt, the first 7 tokens of 2's.
    assert_eq!(summary(&step(&mut s)), vec![(1, 0, 3), (2, 0, 7)]);
    // Then 1 decodes while 2's prompt goes on in chunks of what is left of the budget.
    assert_eq!(summary(&step(&mut s)), vec![(1, 3, 1), (2, 7, 9)]);
    assert_eq!(summary(&step(&mut s)), vec![(1, 4, 1), (2, 16, 9)]);
    let last = step(&mut s);
    assert_eq!(summary(&last), vec![(1, 5, 1), (2, 25, 1)]);
    assert!(last.chunks.iter().all(|c| c.logits == LogitsRequest::Last));
}

#[test]
fn a_mid_prompt_chunk_asks_for_no_logits_and_prompt_logprobs_ask_for_all() {
    let mut s = scheduler(64, 4, 5, 8);
    add(&mut s, 1, 8, greedy(5));
    let params = SamplingParams {
        prompt_logprobs: Some(1),
        ..greedy(5)
    };
    add(&mut s, 2, 8, params);
    let plan = step(&mut s);
    assert_eq!(plan.chunks[0].logits, LogitsRequest::None);
    let plan = step(&mut s);
    assert_eq!(summary(&plan), vec![(1, 5, 3), (2, 0, 2)]);
    assert_eq!(plan.chunks[1].logits, LogitsRequest::All);
}

#[test]
fn prefix_hits_count_as_computed_but_leave_the_last_token() {
    let mut s = scheduler(200, 16, 2048, 8);
    let prompt: Vec<u32> = (0..1000).collect();
    s.add(Sequence::new(request(1, prompt.clone(), greedy(1))));
    step(&mut s);
    s.remove(1);
    s.add(Sequence::new(request(2, prompt.clone(), greedy(1))));
    let params = SamplingParams {
        prompt_logprobs: Some(0),
        ..greedy(1)
    };
    s.add(Sequence::new(request(3, prompt, params)));
    let plan = step(&mut s);
    assert_eq!(summary(&plan), vec![(2, 992, 8), (3, 0, 1000)]);
    assert_eq!(plan.counters.prefix_hit_tokens, 992);
    let running = s.running();
    assert_eq!(running[0].block_table[..62], running[1].block_table[..62]);
}

#[test]
fn no_prompt_chunk_is_one_token_of_several() {
    // The budget would leave one token of an 11-token prompt: it leaves two instead.
    let mut s = scheduler(64, 4, 10, 8);
    add(&mut s, 1, 11, greedy(3));
    assert_eq!(summary(&step(&mut s)), vec![(1, 0, 9)]);
    assert_eq!(summary(&step(&mut s)), vec![(1, 9, 2)]);
    // A cached prefix that would leave one token (a 33-token prompt, pages of 16): the last
    // cached page is computed again with it.
    let mut s = scheduler(64, 16, 2048, 8);
    let prompt: Vec<u32> = (0..33).collect();
    s.add(Sequence::new(request(1, prompt.clone(), greedy(1))));
    step(&mut s);
    s.remove(1);
    s.add(Sequence::new(request(2, prompt, greedy(1))));
    let plan = step(&mut s);
    assert_eq!(summary(&plan), vec![(2, 16, 17)]);
    assert_eq!(plan.counters.prefix_hit_tokens, 16);
    // A one-token prompt is still one token.
    add(&mut s, 3, 1, greedy(1));
    assert!(summary(&step(&mut s)).contains(&(3, 0, 1)));
}

#[test]
fn admission_waits_for_pages_for_the_whole_prompt() {
    let mut s = scheduler(4, 4, 100, 8);
    add(&mut s, 1, 10, greedy(2)); // 3 pages
    add(&mut s, 2, 5, greedy(2)); // 2 pages: must wait
    assert_eq!(summary(&step(&mut s)), vec![(1, 0, 10)]);
    assert_eq!(s.num_waiting(), 1);
    step(&mut s);
    s.remove(1);
    // 1's two full pages stay cached but are evictable: 2 gets in.
    assert_eq!(summary(&step(&mut s)), vec![(2, 0, 5)]);
}

#[test]
fn a_decode_short_of_pages_preempts_the_newest_request_which_is_requeued_first() {
    // 3 pages of 2 tokens: A (3 tokens, 2 pages) and B (1 token, 1 page) fill the pool.
    let mut s = scheduler(3, 2, 100, 8);
    add(&mut s, 1, 3, greedy(10));
    add(&mut s, 2, 1, greedy(10));
    step(&mut s);
    step(&mut s);
    add(&mut s, 3, 1, greedy(10));
    // A's 5th token needs a 3rd page: B, the newest, goes, and A takes its page.
    let plan = step(&mut s);
    assert_eq!(summary(&plan), vec![(1, 4, 1)]);
    assert_eq!(plan.counters.preemptions, 1);
    assert_eq!(s.waiting().map(|w| w.id).collect::<Vec<_>>(), vec![2, 3]);
    // B recomputes its prompt and the tokens it had generated.
    let b = s.waiting().next().unwrap();
    assert_eq!(
        (b.tokens().len(), b.num_computed, b.block_table.len()),
        (3, 0, 0)
    );
}

#[test]
fn the_newest_request_short_of_pages_preempts_itself() {
    let mut s = scheduler(3, 2, 100, 8);
    add(&mut s, 1, 3, greedy(10));
    add(&mut s, 2, 2, greedy(10));
    step(&mut s);
    add(&mut s, 3, 1, greedy(10));
    // A's 4th token fits its 2nd page; B's 3rd needs a page there is none of.
    let plan = step(&mut s);
    assert_eq!(summary(&plan), vec![(1, 3, 1)]);
    assert_eq!(s.waiting().map(|w| w.id).collect::<Vec<_>>(), vec![2, 3]);
    // A grows into the page B left; B cannot come back yet and C may not pass it.
    assert_eq!(summary(&step(&mut s)), vec![(1, 4, 1)]);
    assert_eq!(s.num_waiting(), 2);
}

#[test]
fn prompt_tokens_per_step_are_capped_while_others_decode() {
    let mut s = Scheduler::new(
        SchedulerConfig {
            max_num_batched_tokens: 512,
            max_num_seqs: 64,
            prefill_per_decode: 2,
            policy: Default::default(),
        },
        KvManager::new(256, 16, true),
    );
    // Alone, a prompt takes the whole budget.
    add(&mut s, 1, 100, greedy(50));
    assert_eq!(summary(&step(&mut s)), vec![(1, 0, 100)]);
    // With one decode running, a new prompt gets max(16, 2 x 1) tokens per step.
    add(&mut s, 2, 40, greedy(50));
    assert_eq!(summary(&step(&mut s)), vec![(1, 100, 1), (2, 0, 16)]);
    assert_eq!(summary(&step(&mut s)), vec![(1, 101, 1), (2, 16, 16)]);
    assert_eq!(summary(&step(&mut s)), vec![(1, 102, 1), (2, 32, 8)]);
    // With 12 decoding, 2 x 12 = 24 prompt tokens per step.
    for id in 3..13 {
        add(&mut s, id, 4, greedy(50));
    }
    while s.running().iter().any(|q| q.num_pending() > 1) || s.num_waiting() > 0 {
        step(&mut s);
    }
    add(&mut s, 99, 100, greedy(50));
    let plan = step(&mut s);
    let decodes = plan.chunks.iter().filter(|c| c.len == 1).count();
    assert_eq!(decodes, 12);
    assert_eq!(summary(&plan).last(), Some(&(99, 0, 24)));
}

#[test]
fn every_running_sequence_holds_its_own_state_slot_until_it_leaves() {
    // A model with recurrent state: as many slots as seats; 9 pages of 4 tokens.
    let mut s = Scheduler::new(
        SchedulerConfig {
            max_num_batched_tokens: 64,
            max_num_seqs: 2,
            prefill_per_decode: 0,
            policy: Default::default(),
        },
        KvManager::new(9, 4, true).with_state_slots(2, 0, 4),
    );
    add(&mut s, 1, 15, greedy(10));
    add(&mut s, 2, 15, greedy(10));
    add(&mut s, 3, 3, greedy(1));
    let plan = step(&mut s);
    assert_eq!(summary(&plan), vec![(1, 0, 15), (2, 0, 15)]);
    let batch = s.batch(&plan);
    assert_eq!(
        batch.iter().map(|b| b.state_slot).collect::<Vec<_>>(),
        vec![Some(0), Some(1)]
    );
    // Both decode until the pool runs dry: the newest is preempted and gives its slot back
    // (step's accounting check holds slots to the running sequences).
    let mut preempted = false;
    for _ in 0..8 {
        preempted |= step(&mut s).counters.preemptions > 0;
    }
    assert!(preempted);
    // Once everything finished, every slot is free again.
    while s.has_work() {
        step(&mut s);
        let done: Vec<RequestId> = s
            .running()
            .iter()
            .filter(|q| q.output().len() >= q.params.max_tokens)
            .map(|q| q.id)
            .collect();
        for id in done {
            s.remove(id);
            s.check_accounting().unwrap();
        }
    }
    assert_eq!(s.kv().state_slots().num_free(), 2);
}

#[test]
fn a_hybrid_restarts_from_the_deepest_snapshot_of_a_cached_prefix() {
    // Pages of 4 tokens, snapshots every 8 tokens, room for 4 of them.
    let mut s = Scheduler::new(
        SchedulerConfig {
            max_num_batched_tokens: 64,
            max_num_seqs: 2,
            prefill_per_decode: 0,
            policy: Default::default(),
        },
        KvManager::new(32, 4, true).with_state_slots(2, 4, 8),
    );
    let prompt: Vec<u32> = (0..14).collect();
    s.add(Sequence::new(request(1, prompt.clone(), greedy(4))));
    // The whole prompt in one step (14 tokens: no interval end), then decodes to 18.
    let first = step(&mut s);
    assert_eq!(s.batch(&first)[0].state_copy, StateCopy::default());
    let mut saves = Vec::new();
    for _ in 0..4 {
        let plan = s.schedule();
        let batch = s.batch(&plan);
        saves.push((batch[0].start_pos + 1, batch[0].state_copy.save_to));
        drop(batch);
        let outcomes = vec![ChunkOutcome {
            next_token: Some(7),
            ..ChunkOutcome::default()
        }];
        s.commit(&plan, &outcomes);
        s.check_accounting().unwrap();
    }
    // Only the decode that completes position 16 (a multiple of 8) saves a snapshot.
    let saved: Vec<_> = saves.iter().filter(|(_, save)| save.is_some()).collect();
    assert_eq!(saved.len(), 1);
    assert_eq!(saved[0].0, 16);
    assert_eq!(s.kv().snapshots().len(), 1);
    s.remove(1);
    s.check_accounting().unwrap();

    // The next turn extends prompt + output: it restarts at 16 from that snapshot.
    let mut next = prompt.clone();
    next.extend([7, 7, 7, 7, 50, 51, 52]);
    s.add(Sequence::new(request(2, next, greedy(1))));
    let plan = s.schedule();
    let batch = s.batch(&plan);
    assert_eq!(batch[0].start_pos, 16);
    assert_eq!(batch[0].state_copy.restore_from, saved[0].1);
    assert_eq!(plan.counters.prefix_hit_tokens, 16);
    drop(batch);
    let outcomes = vec![ChunkOutcome {
        next_token: Some(7),
        ..ChunkOutcome::default()
    }];
    s.commit(&plan, &outcomes);
    s.check_accounting().unwrap();
    assert!(s.running()[0].state_restore.is_none());
}

#[test]
fn drafts_stop_short_of_the_next_snapshot_point_and_a_saving_step_drafts_none() {
    // Snapshots every 8 tokens; a sequence decoding from 6 tokens on.
    let mut s = Scheduler::new(
        SchedulerConfig {
            max_num_batched_tokens: 64,
            max_num_seqs: 2,
            prefill_per_decode: 0,
            policy: Default::default(),
        },
        KvManager::new(32, 4, true).with_state_slots(2, 4, 8),
    );
    add(&mut s, 1, 5, greedy(30));
    step(&mut s);
    for _ in 0..20 {
        let plan = s.schedule();
        let len = s.running()[0].tokens().len();
        let saves = s.running()[0].state_save.is_some();
        let room = s.reserve_drafts(plan.num_tokens(), 0, 10);
        // The next step must be able to end on the next multiple of 8: drafts leave the
        // sequence at most one token before it.
        let point = (len / 8 + 1) * 8;
        let want = if saves { 0 } else { (point - 1 - len).min(10) };
        assert_eq!((len, room), (len, want), "saving: {saves}");
        assert_eq!(
            saves,
            len % 8 == 0,
            "a snapshot is saved where a step ends on 8k"
        );
        let outcomes: Vec<ChunkOutcome> = plan
            .chunks
            .iter()
            .map(|_| ChunkOutcome {
                next_token: Some(7),
                ..ChunkOutcome::default()
            })
            .collect();
        s.commit(&plan, &outcomes);
        s.check_accounting().unwrap();
    }
}

fn priority_scheduler(
    num_pages: usize,
    page_size: usize,
    budget: usize,
    max_seqs: usize,
) -> Scheduler {
    let mut s = scheduler(num_pages, page_size, budget, max_seqs);
    s.config.policy = SchedulingPolicy::Priority;
    s
}

fn with_priority(priority: i32) -> SamplingParams {
    SamplingParams {
        priority,
        ..greedy(10)
    }
}

#[test]
fn by_priority_the_lowest_value_is_admitted_first_and_equals_keep_their_order() {
    let mut s = priority_scheduler(64, 2, 100, 1);
    for (id, priority) in [(1, 1), (2, 0), (3, 1), (4, -1), (5, 0)] {
        add(&mut s, id, 2, with_priority(priority));
    }
    assert_eq!(
        s.waiting().map(|w| w.id).collect::<Vec<_>>(),
        vec![4, 2, 5, 1, 3]
    );
    // One seat: the first admitted is the most urgent.
    assert_eq!(summary(&step(&mut s)), vec![(4, 0, 2)]);
}

#[test]
fn by_priority_the_least_urgent_running_request_is_preempted_even_when_older() {
    // 3 pages of 2 tokens. A (priority 5) is admitted first, then B (priority 0).
    let mut s = priority_scheduler(3, 2, 100, 8);
    add(&mut s, 1, 2, with_priority(5));
    step(&mut s);
    add(&mut s, 2, 2, with_priority(0));
    step(&mut s);
    // A has computed 3 tokens in 2 pages, B 2 in 1: the pool is full. A's next token fits its
    // second page; B's needs a page, and A, the least urgent (though older), gives its pages
    // up. B's chunk is planned after A's was, at the index B has once A left the list.
    let plan = step(&mut s);
    assert_eq!(summary(&plan), vec![(2, 2, 1)]);
    assert_eq!(plan.chunks[0].index, 0);
    assert_eq!(plan.counters.preemptions, 1);
    assert_eq!(s.waiting().map(|w| w.id).collect::<Vec<_>>(), vec![1]);
    assert_eq!(
        s.running().iter().map(|r| r.id).collect::<Vec<_>>(),
        vec![2]
    );
    assert_eq!(s.running()[0].tokens().len(), 4);
}
