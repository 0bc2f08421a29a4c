//! Fill-in-the-middle (`suffix` on /v1/completions): a code model's FIM tokens, found in its
//! tokenizer under the spellings code models use, and the prompt they make. The order is
//! prefix-suffix-middle, the one Qwen2.5-Coder, StarCoder and DeepSeek-Coder were trained on
//! and llama.cpp's `/infill` writes: `<pre> prefix <suf> suffix <mid>`, the model then writes
//! the middle.

use tokenizers::Tokenizer;

/// (prefix, suffix, middle) token spellings, tried in order.
const SPELLINGS: &[[&str; 3]] = &[
    // Qwen2.5-Coder, Qwen3-Coder.
    ["<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>"],
    // StarCoder / StarCoder2, SmolLM.
    ["<fim_prefix>", "<fim_suffix>", "<fim_middle>"],
    // DeepSeek-Coder.
    ["<｜fim▁begin｜>", "<｜fim▁hole｜>", "<｜fim▁end｜>"],
];

/// Repository-level markers (repository name, file separator) of the same families, tried
/// in order: Qwen2.5-Coder's, StarCoder2's. DeepSeek-Coder has none.
const REPO_SPELLINGS: &[[&str; 2]] = &[
    ["<|repo_name|>", "<|file_sep|>"],
    ["<repo_name>", "<file_sep>"],
];

/// A model's FIM token ids.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FimTokens {
    pub prefix: u32,
    pub suffix: u32,
    pub middle: u32,
    /// The repository-name and file-separator markers, where the vocabulary has both
    /// (llama-server's `/infill` puts other files' text behind them).
    pub repo: Option<RepoTokens>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RepoTokens {
    pub name: u32,
    pub file_sep: u32,
}

impl FimTokens {
    /// The model's FIM tokens, `None` when its vocabulary has none of the known spellings.
    pub fn of(tokenizer: &Tokenizer) -> Option<FimTokens> {
        SPELLINGS.iter().find_map(|[p, s, m]| {
            Some(FimTokens {
                prefix: tokenizer.token_to_id(p)?,
                suffix: tokenizer.token_to_id(s)?,
                middle: tokenizer.token_to_id(m)?,
                repo: REPO_SPELLINGS.iter().find_map(|[n, f]| {
                    Some(RepoTokens {
                        name: tokenizer.token_to_id(n)?,
                        file_sep: tokenizer.token_to_id(f)?,
                    })
                }),
            })
        })
    }

    /// The prompt: `lead` (what the tokenizer puts before any text, a BOS), then the prefix's
    /// and the suffix's tokens behind their markers, then the middle marker.
    pub fn prompt(&self, lead: &[u32], prefix: &[u32], suffix: &[u32]) -> Vec<u32> {
        let mut ids = Vec::with_capacity(lead.len() + prefix.len() + suffix.len() + 3);
        ids.extend_from_slice(lead);
        ids.push(self.prefix);
        ids.extend_from_slice(prefix);
        ids.push(self.suffix);
        ids.extend_from_slice(suffix);
        ids.push(self.middle);
        ids
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_prompt_puts_prefix_then_suffix_then_the_middle_marker() {
        let fim = FimTokens {
            prefix: 1,
            suffix: 2,
            middle: 3,
            repo: None,
        };
        assert_eq!(
            fim.prompt(&[0], &[10, 11], &[20]),
            vec![0, 1, 10, 11, 2, 20, 3]
        );
        assert_eq!(fim.prompt(&[], &[], &[]), vec![1, 2, 3]);
    }
}
