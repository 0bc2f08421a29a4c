//! A deterministic stand-in for a grammar: at output position `i` it allows the tokens `t`
//! with `(t + i) % period == 0` (none when `period` is 0), may end once `end_after` tokens are out, and is finished
//! after `finish_after` tokens.

use std::sync::{Arc, Mutex};
use std::thread::ThreadId;

use crate::constraint::{
    Constraint, ConstraintError, ConstraintFactory, TokenConstraint, TokenMask,
};

#[derive(Debug, Clone)]
pub struct FakeGrammar {
    pub period: u32,
    pub end_after: usize,
    pub finish_after: usize,
    /// Every token any of its constraints accepted, in order.
    pub accepted: Arc<Mutex<Vec<u32>>>,
    /// The thread of every mask computation.
    pub mask_threads: Arc<Mutex<Vec<ThreadId>>>,
}

impl FakeGrammar {
    pub fn new(period: u32, end_after: usize, finish_after: usize) -> Self {
        Self {
            period,
            end_after,
            finish_after,
            accepted: Arc::default(),
            mask_threads: Arc::default(),
        }
    }

    pub fn allows(&self, position: usize, token: u32) -> bool {
        self.period != 0 && (token as usize + position) % self.period as usize == 0
    }

    pub fn constraint(&self) -> Constraint {
        Constraint::new(self.clone())
    }
}

struct FakeState {
    grammar: FakeGrammar,
    position: usize,
}

impl ConstraintFactory for FakeGrammar {
    fn start(&self) -> Box<dyn TokenConstraint> {
        Box::new(FakeState {
            grammar: self.clone(),
            position: 0,
        })
    }
}

impl TokenConstraint for FakeState {
    fn allowed(&mut self, mask: &mut TokenMask) -> Result<(), ConstraintError> {
        // As llguidance: a complete grammar computes no more masks.
        if self.is_finished() {
            return Err(ConstraintError("mask asked of a finished grammar".into()));
        }
        let thread = std::thread::current().id();
        self.grammar.mask_threads.lock().unwrap().push(thread);
        for t in 0..mask.vocab_size() as u32 {
            if self.grammar.allows(self.position, t) {
                mask.allow(t);
            }
        }
        mask.set_end_allowed(self.position >= self.grammar.end_after);
        Ok(())
    }

    fn accept(&mut self, token: u32) -> Result<(), ConstraintError> {
        if !self.grammar.allows(self.position, token) {
            return Err(ConstraintError(format!("token {token} not allowed")));
        }
        self.grammar.accepted.lock().unwrap().push(token);
        self.position += 1;
        Ok(())
    }

    fn is_finished(&self) -> bool {
        self.position >= self.grammar.finish_after
    }

    fn rollback(&mut self, n: usize) -> Result<(), ConstraintError> {
        self.position -= n.min(self.position);
        Ok(())
    }
}
