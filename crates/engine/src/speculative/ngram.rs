//! N-gram (prompt-lookup) proposals: when the last few tokens of a sequence occurred before in
//! it, propose the tokens that followed them then. No model is involved, which makes it nearly
//! free; it shines where the output copies its context (code edits, agents quoting files,
//! extraction), and proposes nothing where it has nothing to copy.

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NgramConfig {
    /// Shortest suffix worth matching (shorter matches are mostly noise).
    pub min_n: usize,
    /// Longest suffix tried first (longer matches predict better).
    pub max_n: usize,
}

impl Default for NgramConfig {
    fn default() -> Self {
        Self { min_n: 2, max_n: 4 }
    }
}

/// Up to `k` tokens to propose after `tokens`: the continuation of the most recent earlier
/// occurrence of the longest suffix of length `max_n` down to `min_n`. Empty when no suffix
/// occurred before.
pub fn propose(tokens: &[u32], k: usize, config: NgramConfig) -> Vec<u32> {
    let len = tokens.len();
    if k == 0 {
        return Vec::new();
    }
    for n in (config.min_n.max(1)..=config.max_n).rev() {
        if n >= len {
            continue;
        }
        let suffix = &tokens[len - n..];
        // Occurrences ending before the suffix itself, most recent first; each must be
        // followed by at least one token.
        let found = (0..len - n)
            .rev()
            .find(|&start| &tokens[start..start + n] == suffix);
        if let Some(start) = found {
            let from = start + n;
            let to = (from + k).min(len);
            return tokens[from..to].to_vec();
        }
    }
    Vec::new()
}

#[cfg(test)]
mod tests {
    use super::*;

    const CONFIG: NgramConfig = NgramConfig { min_n: 2, max_n: 3 };

    #[test]
    fn proposes_what_followed_the_last_occurrence_of_the_longest_suffix() {
        // "1 2 3 4 5 ... 1 2 3" -> the 3-gram [1, 2, 3] was followed by 4, 5.
        let tokens = [1, 2, 3, 4, 5, 9, 9, 1, 2, 3];
        assert_eq!(propose(&tokens, 2, CONFIG), vec![4, 5]);
        assert_eq!(propose(&tokens, 10, CONFIG), vec![4, 5, 9, 9, 1, 2, 3]);
        // The most recent occurrence wins.
        let tokens = [7, 8, 1, 7, 8, 2, 7, 8];
        assert_eq!(propose(&tokens, 1, CONFIG), vec![2]);
    }

    #[test]
    fn falls_back_to_shorter_suffixes_and_else_proposes_nothing() {
        // No earlier [5, 6, 2], but [6, 2] occurred, followed by 3.
        let tokens = [6, 2, 3, 4, 5, 6, 2];
        assert_eq!(propose(&tokens, 3, CONFIG), vec![3, 4, 5]);
        assert!(propose(&[1, 2, 3, 4], 3, CONFIG).is_empty());
        assert!(propose(&[1, 1], 3, CONFIG).is_empty());
        assert!(propose(&[], 3, CONFIG).is_empty());
        assert!(propose(&tokens, 0, CONFIG).is_empty());
    }

    #[test]
    fn a_repeating_run_predicts_itself() {
        let tokens = [4, 4, 4, 4];
        assert_eq!(propose(&tokens, 2, CONFIG), vec![4]);
    }
}
