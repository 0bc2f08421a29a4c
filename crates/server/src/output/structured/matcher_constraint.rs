//! llguidance's `Matcher` as the engine's [`TokenConstraint`]: a compiled grammar is kept as
//! a fresh matcher, and every sequence starts from a clone of it.

use std::sync::Mutex;

use ferrite_engine::{ConstraintError, ConstraintFactory, TokenConstraint, TokenMask};
use llguidance::Matcher;

/// A compiled grammar: the matcher in its start state.
pub struct CompiledGrammar {
    start: Mutex<Matcher>,
}

impl CompiledGrammar {
    pub fn new(start: Matcher) -> Self {
        Self {
            start: Mutex::new(start),
        }
    }
}

impl ConstraintFactory for CompiledGrammar {
    fn start(&self) -> Box<dyn TokenConstraint> {
        // A poisoned lock still holds a start-state matcher: nothing mutates it.
        let start = self.start.lock().unwrap_or_else(|p| p.into_inner());
        let end_token = start.tok_env().map(|env| env.tok_trie().eos_token()).ok();
        Box::new(MatcherConstraint {
            matcher: start.clone(),
            end_token,
        })
    }
}

struct MatcherConstraint {
    matcher: Matcher,
    /// The token llguidance allows where the grammar may end. Whether ending is allowed goes
    /// to the engine as such (it knows the model's end tokens), not as this token, unless the
    /// grammar itself asks for the token.
    end_token: Option<u32>,
}

fn failed(e: impl std::fmt::Display) -> ConstraintError {
    ConstraintError(e.to_string())
}

impl TokenConstraint for MatcherConstraint {
    fn allowed(&mut self, mask: &mut TokenMask) -> Result<(), ConstraintError> {
        let allowed = self.matcher.compute_mask().map_err(failed)?;
        let words = mask.words_mut();
        let n = words.len().min(allowed.as_slice().len());
        words[..n].copy_from_slice(&allowed.as_slice()[..n]);
        let accepting = self.matcher.is_accepting().map_err(failed)?;
        // Where the grammar may end, llguidance allows its end token; the engine allows its own
        // end tokens instead. Where it may not, the token is allowed as the grammar's own
        // (harmony's `<|return|>` closing a final message, which gpt-oss's tokenizer names
        // its EOS).
        if let (Some(end), true) = (self.end_token, accepting) {
            mask.forbid(end);
        }
        mask.set_end_allowed(accepting);
        Ok(())
    }

    fn accept(&mut self, token: u32) -> Result<(), ConstraintError> {
        self.matcher.consume_token(token).map_err(failed)
    }

    fn is_finished(&self) -> bool {
        self.matcher.is_stopped()
    }

    fn rollback(&mut self, n: usize) -> Result<(), ConstraintError> {
        self.matcher.rollback(n).map_err(failed)
    }
}
