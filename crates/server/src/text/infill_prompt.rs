//! The prompt of llama-server's `/infill` (what editor plugins such as llama.vim and
//! llama.vscode send): other files' text first, then the fill-in-the-middle prompt, each part
//! cut to a budget so that a large file does not crowd out the code around the cursor.
//!
//! Layout (llama-server's, after Qwen2.5-Coder's repository-level format):
//!
//! ```text
//! [repo_name] "myproject\n" ([file_sep] "<filename>\n" <text>)* [file_sep] "filename\n"
//! <BOS> [fim_prefix] <prefix> <prompt> [fim_suffix] <suffix> [fim_middle]
//! ```
//!
//! A model without repository markers gets each extra chunk behind a plain-text separator
//! instead. Budgets, with `B` the batch llama-server sizes them by (its default 2,048): the
//! prefix keeps its last `3B/4` tokens, the suffix its first `B/4 - 2 - |prompt|`, and the
//! extra context its last `context - B - 2 * n_predict` tokens (the oldest chunks go first).
//! Where the context is under 4,096 tokens ferrite takes half of it as `B` (`infill_batch`),
//! which leaves other files room that llama-server's 2,048 would not.

use super::fim::FimTokens;

/// llama-server's default `--batch-size`, by which it cuts the prefix and the suffix.
const LLAMA_SERVER_BATCH: usize = 2048;

/// The `B` of the budgets for a model of `context` tokens.
pub fn infill_batch(context: usize) -> usize {
    LLAMA_SERVER_BATCH.min(context / 2)
}
/// What llama-server names the repository and the current file (it has no inputs for them).
pub const REPO_NAME: &str = "myproject\n";
pub const CURRENT_FILE: &str = "filename\n";
/// Between extra chunks of a model without a file separator: "\n\n--- snippet ---\n\n".
pub const SNIPPET_SEPARATOR: &str = "\n\n--- snippet ---\n\n";

/// The tokenized parts of an infill request.
#[derive(Debug, Default, Clone)]
pub struct InfillParts {
    /// What the tokenizer puts before any text (a BOS), or nothing.
    pub lead: Vec<u32>,
    pub prefix: Vec<u32>,
    pub suffix: Vec<u32>,
    /// The text typed on the cursor's line so far, after the prefix.
    pub prompt: Vec<u32>,
    /// Each extra chunk: its filename line (`"<filename>\n"`, or the snippet separator for a
    /// model without a file separator) and its text.
    pub extra: Vec<(Vec<u32>, Vec<u32>)>,
    /// `REPO_NAME` and `CURRENT_FILE`, tokenized (used when the model has repository markers).
    pub repo_name: Vec<u32>,
    pub current_file: Vec<u32>,
}

/// The budgets the parts are cut to.
#[derive(Debug, Clone, Copy)]
pub struct InfillBudget {
    pub batch: usize,
    /// The model's context length.
    pub context: usize,
    /// Tokens the request may generate (0 when unbounded, as llama-server counts -1).
    pub n_predict: usize,
}

/// The prompt's token ids.
pub fn infill_prompt(fim: &FimTokens, parts: &InfillParts, budget: InfillBudget) -> Vec<u32> {
    let mut extra = Vec::new();
    if let Some(repo) = fim.repo {
        extra.push(repo.name);
        extra.extend_from_slice(&parts.repo_name);
    }
    for (name, text) in &parts.extra {
        if let Some(repo) = fim.repo {
            extra.push(repo.file_sep);
        }
        extra.extend_from_slice(name);
        extra.extend_from_slice(text);
    }
    if let Some(repo) = fim.repo {
        extra.push(repo.file_sep);
        extra.extend_from_slice(&parts.current_file);
    }
    let quarter = budget.batch / 4;
    let prefix_take = parts.prefix.len().min(3 * quarter);
    let suffix_take = parts
        .suffix
        .len()
        .min(quarter.saturating_sub(2 + parts.prompt.len()));
    let extra_take = extra.len().min(
        budget
            .context
            .saturating_sub(budget.batch + 2 * budget.n_predict),
    );
    let prefix = &parts.prefix[parts.prefix.len() - prefix_take..];
    let suffix = &parts.suffix[..suffix_take];
    let mut ids = Vec::with_capacity(extra_take + prefix_take + suffix_take + 8);
    ids.extend_from_slice(&extra[extra.len() - extra_take..]);
    ids.extend_from_slice(&parts.lead);
    ids.push(fim.prefix);
    ids.extend_from_slice(prefix);
    ids.extend_from_slice(&parts.prompt);
    ids.push(fim.suffix);
    ids.extend_from_slice(suffix);
    ids.push(fim.middle);
    ids
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::text::fim::RepoTokens;

    const PRE: u32 = 1;
    const SUF: u32 = 2;
    const MID: u32 = 3;
    const NAME: u32 = 4;
    const SEP: u32 = 5;

    fn fim(repo: bool) -> FimTokens {
        FimTokens {
            prefix: PRE,
            suffix: SUF,
            middle: MID,
            repo: repo.then_some(RepoTokens {
                name: NAME,
                file_sep: SEP,
            }),
        }
    }

    fn parts() -> InfillParts {
        InfillParts {
            lead: vec![0],
            prefix: vec![10, 11, 12],
            suffix: vec![20, 21],
            prompt: vec![30],
            extra: vec![(vec![40], vec![41, 42]), (vec![50], vec![51])],
            repo_name: vec![60],
            current_file: vec![70],
        }
    }

    const ROOMY: InfillBudget = InfillBudget {
        batch: 2048,
        context: 8192,
        n_predict: 128,
    };

    #[test]
    fn the_batch_is_llama_servers_or_half_a_small_context() {
        assert_eq!(infill_batch(32768), 2048);
        assert_eq!(infill_batch(4096), 2048);
        assert_eq!(infill_batch(2048), 1024);
    }

    #[test]
    fn repository_markers_wrap_the_extra_files_before_the_fim_prompt() {
        assert_eq!(
            infill_prompt(&fim(true), &parts(), ROOMY),
            vec![
                NAME, 60, SEP, 40, 41, 42, SEP, 50, 51, SEP, 70, 0, PRE, 10, 11, 12, 30, SUF, 20,
                21, MID
            ]
        );
    }

    #[test]
    fn without_markers_the_chunks_follow_their_separators_alone() {
        assert_eq!(
            infill_prompt(&fim(false), &parts(), ROOMY),
            vec![40, 41, 42, 50, 51, 0, PRE, 10, 11, 12, 30, SUF, 20, 21, MID]
        );
    }

    #[test]
    fn the_prefix_keeps_its_end_the_suffix_its_start_and_extra_its_newest_tokens() {
        let long = InfillParts {
            prefix: (100..200).collect(),
            suffix: (200..300).collect(),
            ..parts()
        };
        // batch 16: prefix 12 tokens, suffix 4 - 2 - 1 = 1; extra 30 - 16 - 2 * 5 = 4.
        let budget = InfillBudget {
            batch: 16,
            context: 30,
            n_predict: 5,
        };
        let ids = infill_prompt(&fim(true), &long, budget);
        let mut want = vec![50, 51, SEP, 70, 0, PRE];
        want.extend(188..200);
        want.extend([30, SUF, 200, MID]);
        assert_eq!(ids, want);
        // No room at all: only the FIM prompt's markers, the prompt and the lead are left.
        let tight = InfillBudget {
            batch: 0,
            context: 0,
            n_predict: 0,
        };
        assert_eq!(
            infill_prompt(&fim(true), &long, tight),
            vec![0, PRE, 30, SUF, MID]
        );
    }
}
