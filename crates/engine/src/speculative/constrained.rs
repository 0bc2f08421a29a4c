//! Verifying drafts of a constrained sequence (structured outputs): the target's distribution
//! at draft position `j` is its row with the tokens the grammar forbids there set to -inf,
//! where "there" is after the drafts before `j`. The verification rules ask for positions in
//! order and move to `j + 1` only when draft `j` was kept, so the grammar takes each draft the
//! moment the target keeps it: after verification it has taken exactly the accepted drafts,
//! and a rejected draft never reaches it (nothing to roll back). A draft the grammar forbids
//! has target probability 0 there, so it is always rejected.

use std::borrow::Cow;

use crate::backend::ForwardOutput;
use crate::constraint::{ConstraintError, ConstraintState};

/// What the grammar made of the drafts it took.
#[derive(Debug, Default)]
pub struct GrammarProgress {
    /// The grammar was complete right after the accepted draft at this index: the request
    /// ends there, as it would have without speculation.
    pub finished_after: Option<usize>,
    /// The grammar failed: the request ends without another token.
    pub failed: Option<ConstraintError>,
}

/// The target's rows of one sequence, masked by its grammar as verification walks the drafts.
pub struct ConstrainedRows<'a> {
    pub constraint: Option<&'a mut ConstraintState>,
    pub drafts: &'a [u32],
    pub end_ids: Vec<u32>,
    pub forward: &'a ForwardOutput,
    pub first_row: usize,
    /// Drafts the grammar has taken.
    taken: usize,
    pub progress: GrammarProgress,
}

impl<'a> ConstrainedRows<'a> {
    pub fn new(
        constraint: Option<&'a mut ConstraintState>,
        drafts: &'a [u32],
        end_ids: Vec<u32>,
        forward: &'a ForwardOutput,
        first_row: usize,
    ) -> Self {
        Self {
            constraint,
            drafts,
            end_ids,
            forward,
            first_row,
            taken: 0,
            progress: GrammarProgress::default(),
        }
    }

    /// The target's row at draft position `j` (drafts `0..j` kept), masked when constrained.
    pub fn row(&mut self, j: usize) -> Cow<'a, [f32]> {
        let row = self.forward.row(self.first_row + j);
        let Some(constraint) = self.constraint.as_deref_mut() else {
            return Cow::Borrowed(row);
        };
        if self.progress.failed.is_some() {
            return Cow::Borrowed(row);
        }
        while self.taken < j {
            let token = self.drafts[self.taken];
            // An end token (the grammar allowed ending there) ends the request at that draft;
            // the grammar never sees end tokens.
            if self.end_ids.contains(&token) {
                self.taken += 1;
                continue;
            }
            if let Err(e) = constraint.accept(token) {
                self.progress.failed = Some(e);
                return Cow::Borrowed(row);
            }
            if constraint.is_finished() && self.progress.finished_after.is_none() {
                self.progress.finished_after = Some(self.taken);
            }
            self.taken += 1;
        }
        if self.progress.finished_after.is_some() {
            // The request ends at that draft; a complete grammar computes no further masks.
            // Only the end tokens remain possible here.
            let ends = |t: usize| self.end_ids.contains(&(t as u32));
            return Cow::Owned(
                row.iter()
                    .enumerate()
                    .map(|(t, &l)| if ends(t) { l } else { f32::NEG_INFINITY })
                    .collect(),
            );
        }
        let masked = constraint.with_next_mask(row.len(), &self.end_ids, |mask| {
            row.iter()
                .enumerate()
                .map(|(t, &l)| match mask.is_allowed(t as u32) {
                    true => l,
                    false => f32::NEG_INFINITY,
                })
                .collect::<Vec<f32>>()
        });
        match masked {
            Ok(masked) => Cow::Owned(masked),
            Err(e) => {
                self.progress.failed = Some(e);
                Cow::Borrowed(row)
            }
        }
    }
}
