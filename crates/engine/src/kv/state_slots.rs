//! Recurrent-state slots: the fixed-size state a model with linear-attention layers keeps per
//! running sequence (each such layer's convolution window and delta-rule state), where an
//! attention layer keeps pages. The backend owns the memory (`Backend::init_state_slots`);
//! the engine hands out slot ids, one per running sequence, like page ids.

/// A recurrent-state slot id, `0..capacity`.
pub type SlotId = u32;

/// The free list of state slots.
#[derive(Debug, Default)]
pub struct StateSlots {
    capacity: usize,
    /// Lowest id last, so slots are handed out from 0 up (easy to read in logs and tests).
    free: Vec<SlotId>,
}

impl StateSlots {
    pub fn new(capacity: usize) -> Self {
        Self {
            capacity,
            free: (0..capacity as SlotId).rev().collect(),
        }
    }

    /// Slots in all (0: the model keeps no recurrent state).
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    pub fn num_free(&self) -> usize {
        self.free.len()
    }

    /// A free slot, `None` when every slot is taken. The backend starts a slot's state from
    /// zero whenever a sequence runs its position 0 in it, so a slot needs no clearing here.
    pub fn acquire(&mut self) -> Option<SlotId> {
        self.free.pop()
    }

    /// Gives `slot` back.
    ///
    /// # Panics
    /// If `slot` is out of range or already free: the scheduler's bookkeeping is broken.
    pub fn release(&mut self, slot: SlotId) {
        assert!(
            (slot as usize) < self.capacity,
            "state slot {slot} out of range"
        );
        assert!(!self.free.contains(&slot), "state slot {slot} freed twice");
        self.free.push(slot);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_go_round_and_never_twice() {
        let mut slots = StateSlots::new(2);
        let (a, b) = (slots.acquire().unwrap(), slots.acquire().unwrap());
        assert_ne!(a, b);
        assert_eq!(slots.acquire(), None);
        slots.release(a);
        assert_eq!(slots.num_free(), 1);
        assert_eq!(slots.acquire(), Some(a));
    }

    #[test]
    #[should_panic(expected = "freed twice")]
    fn a_double_release_is_a_bug() {
        let mut slots = StateSlots::new(1);
        let a = slots.acquire().unwrap();
        slots.release(a);
        slots.release(a);
    }
}
