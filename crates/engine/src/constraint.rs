//! Constrained generation (structured outputs): a per-request [`TokenConstraint`] says which
//! tokens may come next; the host sampler masks the others out before any sampling rule
//! (`Sampler::sample_masked`), so a disallowed token can never be sampled. The engine owns
//! the trait; what implements it (a grammar engine such as llguidance) lives with the server.
//!
//! A backend that samples on its device (CUDA) takes the mask as a [`DeviceMask`]: it waits for
//! the mask only after the forward pass is enqueued, uploads its words and forbids the other
//! tokens before its sampling kernel runs; the commit then checks the token against the same
//! mask. Drafts of a constrained sequence are verified against the grammar's masks
//! (`speculative::constrained`).

mod token_mask;

use std::fmt;
use std::sync::{Arc, Mutex};

pub use token_mask::TokenMask;

/// A constraint broke: the grammar engine failed or reached a state with no way forward.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("token constraint failed: {0}")]
pub struct ConstraintError(pub String);

/// The live state of one sequence's constraint, fed every token the sequence generates.
pub trait TokenConstraint: Send {
    /// Fills `mask` (already reset to nothing allowed, sized to the model's vocabulary) with
    /// the tokens that may come next, and whether the generation may end here.
    fn allowed(&mut self, mask: &mut TokenMask) -> Result<(), ConstraintError>;
    /// Advances past `token` (one the last mask allowed; never an end token).
    fn accept(&mut self, token: u32) -> Result<(), ConstraintError>;
    /// Nothing more can follow: the request ends (finish reason stop).
    fn is_finished(&self) -> bool;
    /// Forgets the last `n` accepted tokens (for rejected speculative drafts).
    fn rollback(&mut self, n: usize) -> Result<(), ConstraintError>;
}

/// Starts a fresh [`TokenConstraint`] per sequence: what a request carries (compiled once,
/// shared by its `n` choices and, through a cache, by other requests).
pub trait ConstraintFactory: Send + Sync {
    fn start(&self) -> Box<dyn TokenConstraint>;
}

/// The constraint a request asks for, in [`crate::SamplingParams`]. Cloning shares the
/// factory, and every sequence starts its own state from it, so `n` choices of one request
/// (clones of one params) are constrained independently. Equal when the same factory.
#[derive(Clone)]
pub struct Constraint(pub Arc<dyn ConstraintFactory>);

impl Constraint {
    pub fn new(factory: impl ConstraintFactory + 'static) -> Self {
        Self(Arc::new(factory))
    }
}

impl fmt::Debug for Constraint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Constraint")
    }
}

impl PartialEq for Constraint {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

/// A sequence's running constraint and the mask buffer it fills each step. Shared with a
/// [`MaskJob`] that may compute the next mask on another thread while the forward pass runs
/// (a lock nobody else contends for; a job that panicked leaves it poisoned, which fails the
/// constraint rather than letting the sequence go unconstrained).
pub struct ConstraintState {
    shared: Arc<Mutex<Shared>>,
}

struct Shared {
    live: Box<dyn TokenConstraint>,
    mask: TokenMask,
    /// The mask for the current position is in `mask` already (or failed): set by a
    /// [`MaskJob`], cleared by every accepted token.
    prepared: Option<Result<(), ConstraintError>>,
}

impl Shared {
    fn compute(&mut self, vocab_size: usize, end_ids: &[u32]) -> Result<(), ConstraintError> {
        self.mask.reset(vocab_size);
        self.live.allowed(&mut self.mask)?;
        if self.mask.end_allowed() {
            for &id in end_ids {
                self.mask.allow(id);
            }
        }
        if !self.mask.any_allowed() {
            return Err(ConstraintError("no token is allowed next".into()));
        }
        Ok(())
    }
}

impl fmt::Debug for ConstraintState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ConstraintState").finish_non_exhaustive()
    }
}

fn poisoned<T>(_: T) -> ConstraintError {
    ConstraintError("the constraint panicked".into())
}

impl ConstraintState {
    pub fn start(constraint: &Constraint) -> Self {
        Self {
            shared: Arc::new(Mutex::new(Shared {
                live: constraint.0.start(),
                mask: TokenMask::default(),
                prepared: None,
            })),
        }
    }

    /// Calls `f` with the tokens allowed next over `vocab_size` ids, `end_ids` (the tokens
    /// that end this sequence) among them where the constraint may end. An error when the
    /// constraint fails or allows nothing. Uses the mask a [`MaskJob`] prepared, if any.
    pub fn with_next_mask<R>(
        &mut self,
        vocab_size: usize,
        end_ids: &[u32],
        f: impl FnOnce(&TokenMask) -> R,
    ) -> Result<R, ConstraintError> {
        let mut shared = self.shared.lock().map_err(poisoned)?;
        match shared.prepared.take() {
            Some(prepared) => prepared?,
            None => shared.compute(vocab_size, end_ids)?,
        }
        Ok(f(&shared.mask))
    }

    /// Whether the mask a [`DeviceMask`] left prepared for this position allows `token` (the
    /// end tokens included where the constraint may end).
    pub fn prepared_allows(&mut self, token: u32) -> Result<bool, ConstraintError> {
        let mut shared = self.shared.lock().map_err(poisoned)?;
        match shared.prepared.take() {
            Some(prepared) => prepared.map(|()| shared.mask.is_allowed(token)),
            None => Err(ConstraintError(
                "no mask was prepared for a token sampled on the device".into(),
            )),
        }
    }

    pub fn accept(&mut self, token: u32) -> Result<(), ConstraintError> {
        let mut shared = self.shared.lock().map_err(poisoned)?;
        shared.prepared = None;
        shared.live.accept(token)
    }

    pub fn is_finished(&self) -> bool {
        self.shared
            .lock()
            .map_or(true, |shared| shared.live.is_finished())
    }

    /// The next mask for a backend that samples on its device.
    pub fn device_mask(&self, vocab_size: usize, end_ids: Vec<u32>) -> DeviceMask {
        DeviceMask {
            shared: Arc::clone(&self.shared),
            vocab_size,
            end_ids: end_ids.into(),
        }
    }

    /// A job that computes the next mask (for [`Self::with_next_mask`]) wherever it runs.
    pub fn mask_job(&self, vocab_size: usize, end_ids: Vec<u32>) -> MaskJob {
        MaskJob {
            shared: Arc::clone(&self.shared),
            vocab_size,
            end_ids,
        }
    }
}

/// The next mask of one sequence, to compute off the scheduler thread.
pub struct MaskJob {
    shared: Arc<Mutex<Shared>>,
    vocab_size: usize,
    end_ids: Vec<u32>,
}

impl MaskJob {
    pub fn run(self) {
        if let Ok(mut shared) = self.shared.lock() {
            let result = shared.compute(self.vocab_size, &self.end_ids);
            shared.prepared = Some(result);
        }
    }
}

/// The next mask of a sequence its backend samples on the device: the backend reads the
/// words (waiting for a [`MaskJob`] still computing them, or computing them itself) and leaves
/// them prepared, so that the commit checks the device's token against the same mask.
#[derive(Clone)]
pub struct DeviceMask {
    shared: Arc<Mutex<Shared>>,
    vocab_size: usize,
    end_ids: Arc<[u32]>,
}

impl DeviceMask {
    /// Calls `f` with the mask's words (bit `t % 32` of word `t / 32`: token `t` allowed, the
    /// sequence's end tokens included where the constraint may end), or fails as the
    /// constraint did.
    pub fn with_words<R>(&self, f: impl FnOnce(&[u32]) -> R) -> Result<R, ConstraintError> {
        let mut shared = self.shared.lock().map_err(poisoned)?;
        if shared.prepared.is_none() {
            let computed = shared.compute(self.vocab_size, &self.end_ids);
            shared.prepared = Some(computed);
        }
        match &shared.prepared {
            Some(Err(e)) => Err(e.clone()),
            _ => Ok(f(shared.mask.words())),
        }
    }
}

impl fmt::Debug for DeviceMask {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DeviceMask")
            .field("vocab_size", &self.vocab_size)
            .finish_non_exhaustive()
    }
}

impl PartialEq for DeviceMask {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.shared, &other.shared)
    }
}

#[cfg(test)]
mod tests;
