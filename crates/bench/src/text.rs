//! Prompt text of a requested length in tokens, built from a word list.
//!
//! The server may be any OpenAI-compatible one, so prompts are text. With the server model's
//! tokenizer ([`TokenCounter`]) lengths are exact to a token or two (the server adds BOS and may
//! merge across a boundary); without it every word counts as one token, which holds for common
//! English words in the BPE vocabularies of Llama- and Qwen-family models. The report always
//! uses the counts the server returns in `usage`.

use rand::Rng;

/// Counts the tokens of a text the way the server's model would.
pub trait TokenCounter: Send + Sync {
    fn count(&self, text: &str) -> usize;
    /// What counts: "words" or the tokenizer's file.
    fn describe(&self) -> String;
}

/// One token per whitespace-separated word.
#[derive(Debug, Default, Clone, Copy)]
pub struct WordCounter;

impl TokenCounter for WordCounter {
    fn count(&self, text: &str) -> usize {
        text.split_whitespace().count()
    }
    fn describe(&self) -> String {
        "words (about one token each)".into()
    }
}

/// Short, frequent English words: each is a single token (with its leading space) in the
/// vocabularies of the models ferrite runs, and none is special.
#[rustfmt::skip]
pub const WORDS: &[&str] = &[
    "the", "of", "and", "to", "in", "is", "was", "for", "on", "that", "with", "as", "by", "at",
    "from", "his", "her", "it", "an", "were", "are", "which", "this", "be", "or", "has", "had",
    "first", "one", "their", "its", "new", "after", "but", "who", "not", "they", "have", "two",
    "been", "other", "when", "there", "all", "during", "into", "school", "time", "may", "years",
    "more", "most", "only", "over", "city", "some", "world", "would", "where", "later", "up",
    "such", "used", "many", "can", "state", "about", "national", "out", "known", "university",
    "united", "then", "made", "team", "we", "she", "film", "three", "year", "under", "season",
    "these", "between", "him", "also", "while", "both", "so", "through", "number", "part",
    "county", "before", "high", "war", "called", "well", "game", "house", "album", "series",
    "music", "life", "same", "government", "each", "being", "early", "four", "against", "area",
    "second", "several", "name", "released", "group", "north", "south", "club", "since", "public",
    "back", "river", "family", "church", "age", "work", "long", "line", "around", "any", "last",
    "very", "local", "small", "large", "home", "own", "how", "found", "way", "day", "show", "side",
    "five", "like", "them", "what", "great", "place", "end", "political", "village", "still",
    "people", "much", "will", "could", "center", "point", "water", "west", "east", "town", "book",
    "law", "power", "right", "left", "party", "old", "free", "open", "road", "story", "study",
    "light", "field", "sound", "art", "land", "history", "market", "model", "data", "paper",
    "system", "order", "level", "plan", "table", "color", "garden", "letter", "window", "bridge",
    "island", "forest", "train", "summer", "winter", "morning", "evening", "engine", "signal",
    "answer", "simple", "quiet", "green", "blue", "red", "bright", "warm", "cold", "quick", "slow",
    "far", "near",
];

/// Text of `tokens` tokens (as `counter` counts them) of random words drawn from `rng`.
pub fn random_text(rng: &mut impl Rng, tokens: usize, counter: &dyn TokenCounter) -> String {
    if tokens == 0 {
        return String::new();
    }
    // Words are at most one token each in practice, so 1.25x as many words is always enough;
    // a tokenizer that splits them further simply gets a shorter text than asked.
    let pool: Vec<&str> = (0..tokens + tokens / 4 + 8)
        .map(|_| WORDS[rng.random_range(0..WORDS.len())])
        .collect();
    let text_of = |n: usize| pool[..n].join(" ");
    // The longest prefix of the pool that has at most `tokens` tokens (counts grow with words).
    let (mut lo, mut hi) = (1usize, pool.len());
    if counter.count(&text_of(lo)) > tokens {
        return text_of(lo);
    }
    while lo < hi {
        let mid = (lo + hi).div_ceil(2);
        if counter.count(&text_of(mid)) <= tokens {
            lo = mid;
        } else {
            hi = mid - 1;
        }
    }
    text_of(lo)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::StdRng;
    use rand::SeedableRng;

    /// Counts characters / 4: a counter under which words are not one token each.
    struct CharsOverFour;
    impl TokenCounter for CharsOverFour {
        fn count(&self, text: &str) -> usize {
            text.len() / 4
        }
        fn describe(&self) -> String {
            "chars/4".into()
        }
    }

    #[test]
    fn texts_have_the_asked_number_of_words() {
        let mut rng = StdRng::seed_from_u64(1);
        for n in [1, 2, 17, 256, 1000] {
            let t = random_text(&mut rng, n, &WordCounter);
            assert_eq!(t.split_whitespace().count(), n);
        }
        assert_eq!(random_text(&mut rng, 0, &WordCounter), "");
    }

    #[test]
    fn a_tokenizer_sizes_the_text_to_at_most_the_asked_count_and_close_to_it() {
        let mut rng = StdRng::seed_from_u64(2);
        for n in [10, 100, 500] {
            let t = random_text(&mut rng, n, &CharsOverFour);
            let c = CharsOverFour.count(&t);
            // Adding one more word (at most 11 chars with its space) would exceed n.
            assert!(c <= n && c + 3 >= n, "asked {n}, got {c}");
        }
    }

    #[test]
    fn the_same_seed_gives_the_same_text() {
        let a = random_text(&mut StdRng::seed_from_u64(9), 50, &WordCounter);
        let b = random_text(&mut StdRng::seed_from_u64(9), 50, &WordCounter);
        let c = random_text(&mut StdRng::seed_from_u64(10), 50, &WordCounter);
        assert_eq!(a, b);
        assert_ne!(a, c);
    }
}
