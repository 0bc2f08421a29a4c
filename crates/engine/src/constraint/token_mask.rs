//! Which tokens a constrained sequence may sample next: one bit per token id, plus whether the
//! constraint would accept the generation ending here.

/// Bit `t % 32` of word `t / 32` set: token `t` is allowed. Words are `u32` so a grammar
/// engine that keeps the same layout (llguidance's `SimpleVob`) can copy its words in.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TokenMask {
    words: Vec<u32>,
    vocab_size: usize,
    /// The constraint is satisfied as it stands: the engine's end tokens (EOS, stop ids) may
    /// be sampled. The engine, not the constraint, knows which ids end a generation.
    end_allowed: bool,
}

impl TokenMask {
    /// A mask over `vocab_size` tokens with nothing allowed.
    pub fn new(vocab_size: usize) -> Self {
        let mut mask = Self::default();
        mask.reset(vocab_size);
        mask
    }

    /// Forbids everything, sized for `vocab_size` tokens (no allocation when the size holds).
    pub fn reset(&mut self, vocab_size: usize) {
        self.words.clear();
        self.words.resize(vocab_size.div_ceil(32), 0);
        self.vocab_size = vocab_size;
        self.end_allowed = false;
    }

    pub fn vocab_size(&self) -> usize {
        self.vocab_size
    }

    /// Allows `token`; ids outside the vocabulary are ignored.
    pub fn allow(&mut self, token: u32) {
        if (token as usize) < self.vocab_size {
            self.words[token as usize / 32] |= 1 << (token % 32);
        }
    }

    pub fn forbid(&mut self, token: u32) {
        if (token as usize) < self.vocab_size {
            self.words[token as usize / 32] &= !(1 << (token % 32));
        }
    }

    pub fn is_allowed(&self, token: u32) -> bool {
        (token as usize) < self.vocab_size
            && self.words[token as usize / 32] & (1 << (token % 32)) != 0
    }

    /// The words: bit `t % 32` of word `t / 32` is token `t`.
    pub fn words(&self) -> &[u32] {
        &self.words
    }

    /// The words, for a constraint that fills the mask wholesale. Bits past `vocab_size` in
    /// the last word are ignored.
    pub fn words_mut(&mut self) -> &mut [u32] {
        &mut self.words
    }

    pub fn set_end_allowed(&mut self, allowed: bool) {
        self.end_allowed = allowed;
    }

    pub fn end_allowed(&self) -> bool {
        self.end_allowed
    }

    /// Whether any token is allowed (ending aside).
    pub fn any_allowed(&self) -> bool {
        let full = self.vocab_size / 32;
        let tail = (self.vocab_size % 32) as u32;
        self.words[..full].iter().any(|&w| w != 0)
            || (tail > 0 && self.words[full] & ((1u32 << tail) - 1) != 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allows_only_what_was_allowed_inside_the_vocabulary() {
        let mut mask = TokenMask::new(70);
        assert!(!mask.any_allowed());
        mask.allow(0);
        mask.allow(33);
        mask.allow(69);
        mask.allow(70);
        let allowed: Vec<u32> = (0..80).filter(|&t| mask.is_allowed(t)).collect();
        assert_eq!(allowed, vec![0, 33, 69]);
        mask.words_mut()[2] = u32::MAX;
        assert!(!mask.is_allowed(70), "bits past the vocabulary stay off");
        mask.reset(70);
        assert!(!mask.any_allowed());
    }
}
