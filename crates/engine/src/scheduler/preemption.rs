//! Making room: a running sequence's pages grown for its next chunk, preempting by recompute
//! the running sequence the policy puts last while pages are short, and the waiting queue's
//! order under each policy.

use super::{Scheduler, StepPlan};
use crate::config::SchedulingPolicy;
use crate::request::RequestId;
use crate::sequence::Sequence;

impl Scheduler {
    /// Where `sequence` goes in a queue kept in (priority, arrival) order: after every
    /// request that precedes it.
    pub(super) fn queue_by_priority(&mut self, sequence: Sequence) {
        let key = priority_key(&sequence);
        let at = self.waiting.partition_point(|s| priority_key(s) <= key);
        self.waiting.insert(at, sequence);
    }

    /// The running sequence preempted first: the newest (FCFS), or the one the priority order
    /// puts last.
    fn victim(&self) -> Option<usize> {
        match self.config.policy {
            SchedulingPolicy::Fcfs => self.running.len().checked_sub(1),
            SchedulingPolicy::Priority => {
                (0..self.running.len()).max_by_key(|&i| priority_key(&self.running[i]))
            }
        }
    }

    /// Make room for `len` more tokens of running sequence `index`, preempting the policy's
    /// victims while pages are short. `None` when `index` itself was preempted, else its index
    /// after the preemptions.
    pub(super) fn grow_or_preempt(
        &mut self,
        mut index: usize,
        len: usize,
        plan: &mut StepPlan,
        budget: &mut usize,
    ) -> Option<usize> {
        loop {
            let sequence = &self.running[index];
            let (start, end) = (sequence.num_computed, sequence.num_computed + len);
            let needed = self
                .kv
                .pages_for(end)
                .saturating_sub(sequence.block_table.len());
            let pages = match needed {
                0 => Some(Vec::new()),
                _ => self.kv.allocate(needed),
            };
            if let Some(pages) = pages {
                let sequence = &mut self.running[index];
                sequence.block_table.extend(pages);
                if self.kv.cover_window(&mut sequence.window_table, start, end) {
                    return Some(index);
                }
            }
            let victim = self.victim()?;
            self.preempt(victim, plan, budget);
            match victim.cmp(&index) {
                std::cmp::Ordering::Equal => return None,
                std::cmp::Ordering::Less => index -= 1,
                std::cmp::Ordering::Greater => {}
            }
        }
    }

    /// Preempt by recompute: free running sequence `at`'s pages and requeue it, first (FCFS)
    /// or in its priority's place.
    fn preempt(&mut self, at: usize, plan: &mut StepPlan, budget: &mut usize) {
        let mut victim = self.running.remove(at);
        if let Some(c) = plan.chunks.iter().position(|c| c.id == victim.id) {
            *budget += plan.chunks.remove(c).len;
        }
        // The plan's chunks point into the running list, which closed up behind the victim.
        for chunk in plan.chunks.iter_mut().filter(|c| c.index > at) {
            chunk.index -= 1;
        }
        let (pages, window) = victim.reset_for_recompute();
        self.kv.release_tables(&pages, &window);
        // Recompute starts the state over from position 0, in whatever slot is free then.
        self.release_state_slot(&mut victim);
        tracing::debug!(id = victim.id, "preempted by recompute");
        plan.counters.preemptions += 1;
        match self.config.policy {
            SchedulingPolicy::Fcfs => self.waiting.push_front(victim),
            SchedulingPolicy::Priority => self.queue_by_priority(victim),
        }
    }
}

/// A sequence's place in the priority order: priority, then arrival, then id (requests that
/// arrive in the same instant keep the order they were added in).
fn priority_key(sequence: &Sequence) -> (i32, std::time::Instant, RequestId) {
    (sequence.params.priority, sequence.arrival, sequence.id)
}
