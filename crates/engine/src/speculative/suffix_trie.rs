//! A depth-limited suffix trie over token sequences, with occurrence counts: every substring of
//! at most `max_depth` tokens of the indexed sequences is a path from the root, and each node
//! counts how often its substring occurs. Suffix decoding reads it two ways: the longest recent
//! context that occurred before (a path), and which token most often came next (the child with
//! the largest count).
//!
//! Memory is one 16-byte node per distinct substring of at most `max_depth` tokens (at most
//! `max_depth` nodes per indexed token); removing a sequence gives its nodes back, so a trie
//! fed and drained in FIFO order stays bounded by the tokens it holds.

use std::collections::HashMap;

const NONE: u32 = u32::MAX;
const ROOT: u32 = 0;

#[derive(Debug, Clone, Copy)]
struct Node {
    token: u32,
    count: u32,
    first_child: u32,
    next_sibling: u32,
}

/// A place in the trie: the node of a substring and its length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Match {
    pub node: u32,
    pub len: usize,
}

/// The likeliest next token after a match, and how often it followed (its share of all the
/// continuations seen).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Next {
    pub token: u32,
    pub share: f64,
    pub child: u32,
}

#[derive(Debug, Clone)]
pub struct SuffixTrie {
    nodes: Vec<Node>,
    free: Vec<u32>,
    /// The root has a child per distinct token (thousands): looked up by hash, not by list.
    root_children: HashMap<u32, u32>,
    max_depth: usize,
}

impl SuffixTrie {
    pub fn new(max_depth: usize) -> Self {
        let root = Node {
            token: NONE,
            count: 0,
            first_child: NONE,
            next_sibling: NONE,
        };
        Self {
            nodes: vec![root],
            free: Vec::new(),
            root_children: HashMap::new(),
            max_depth: max_depth.max(2),
        }
    }

    pub fn max_depth(&self) -> usize {
        self.max_depth
    }

    /// Nodes in use (the root included): the trie's memory is this times 16 bytes.
    pub fn num_nodes(&self) -> usize {
        self.nodes.len() - self.free.len()
    }

    fn child(&self, node: u32, token: u32) -> Option<u32> {
        if node == ROOT {
            return self.root_children.get(&token).copied();
        }
        let mut c = self.nodes[node as usize].first_child;
        while c != NONE {
            let n = &self.nodes[c as usize];
            if n.token == token {
                return Some(c);
            }
            c = n.next_sibling;
        }
        None
    }

    /// The child of `node` for `token`, created (count 0) if missing.
    fn child_or_insert(&mut self, node: u32, token: u32) -> u32 {
        if let Some(c) = self.child(node, token) {
            return c;
        }
        let fresh = Node {
            token,
            count: 0,
            first_child: NONE,
            next_sibling: if node == ROOT {
                NONE
            } else {
                self.nodes[node as usize].first_child
            },
        };
        let id = match self.free.pop() {
            Some(id) => {
                self.nodes[id as usize] = fresh;
                id
            }
            None => {
                self.nodes.push(fresh);
                (self.nodes.len() - 1) as u32
            }
        };
        if node == ROOT {
            self.root_children.insert(token, id);
        } else {
            self.nodes[node as usize].first_child = id;
        }
        id
    }

    /// Indexes every substring of `tokens` of at most `max_depth` tokens (one more occurrence
    /// each).
    pub fn add(&mut self, tokens: &[u32]) {
        let mut appender = Appender::default();
        for &t in tokens {
            appender.push(self, t);
        }
    }

    /// Undoes [`Self::add`] of the same tokens: counts go down and nodes that reach zero are
    /// freed.
    pub fn remove(&mut self, tokens: &[u32]) {
        let mut path = Vec::with_capacity(self.max_depth);
        for start in 0..tokens.len() {
            let end = (start + self.max_depth).min(tokens.len());
            path.clear();
            let mut node = ROOT;
            for &t in &tokens[start..end] {
                let Some(c) = self.child(node, t) else {
                    break; // Never added: nothing to undo below here.
                };
                path.push((node, c));
                node = c;
            }
            for &(_, c) in &path {
                let n = &mut self.nodes[c as usize];
                n.count = n.count.saturating_sub(1);
            }
            // A child never counts more than its parent, so the emptied nodes are the path's
            // tail; unlink them deepest first.
            for &(parent, c) in path.iter().rev() {
                if self.nodes[c as usize].count > 0 {
                    break;
                }
                self.unlink(parent, c);
            }
        }
    }

    fn unlink(&mut self, parent: u32, child: u32) {
        let next = self.nodes[child as usize].next_sibling;
        if parent == ROOT {
            self.root_children.remove(&self.nodes[child as usize].token);
        } else if self.nodes[parent as usize].first_child == child {
            self.nodes[parent as usize].first_child = next;
        } else {
            let mut c = self.nodes[parent as usize].first_child;
            while c != NONE {
                if self.nodes[c as usize].next_sibling == child {
                    self.nodes[c as usize].next_sibling = next;
                    break;
                }
                c = self.nodes[c as usize].next_sibling;
            }
        }
        self.free.push(child);
    }

    /// The longest suffix of `context` (shorter than `max_depth`) that occurred with a token
    /// after it.
    pub fn longest_match(&self, context: &[u32]) -> Option<Match> {
        let longest = context.len().min(self.max_depth - 1);
        (1..=longest).rev().find_map(|len| {
            let mut node = ROOT;
            for &t in &context[context.len() - len..] {
                node = self.child(node, t)?;
            }
            self.has_next(node).then_some(Match { node, len })
        })
    }

    /// Whether anything followed `node`'s substring.
    pub fn has_next(&self, node: u32) -> bool {
        self.nodes[node as usize].first_child != NONE
    }

    /// The token that most often followed `node`'s substring (ties: the most recently
    /// inserted child), if any followed it.
    pub fn likeliest_next(&self, node: u32) -> Option<Next> {
        let (mut best, mut total) = (NONE, 0u64);
        let mut c = self.nodes[node as usize].first_child;
        while c != NONE {
            let n = &self.nodes[c as usize];
            total += u64::from(n.count);
            if best == NONE || n.count > self.nodes[best as usize].count {
                best = c;
            }
            c = n.next_sibling;
        }
        (best != NONE && total > 0).then(|| {
            let b = &self.nodes[best as usize];
            Next {
                token: b.token,
                share: f64::from(b.count) / total as f64,
                child: best,
            }
        })
    }
}

/// Indexes a sequence one token at a time: it keeps the nodes of the suffixes that end at the
/// latest token (lengths 1 to `max_depth - 1`), so each new token costs `max_depth` steps.
#[derive(Debug, Clone, Default)]
pub struct Appender {
    /// `open[i]`: the node of the suffix of length `i + 1`.
    open: Vec<u32>,
}

impl Appender {
    pub fn push(&mut self, trie: &mut SuffixTrie, token: u32) {
        let keep = self.open.len().min(trie.max_depth - 1);
        let mut next = Vec::with_capacity(keep + 1);
        next.push(trie.child_or_insert(ROOT, token));
        for &node in &self.open[..keep] {
            next.push(trie.child_or_insert(node, token));
        }
        for &node in &next {
            trie.nodes[node as usize].count += 1;
        }
        next.truncate(trie.max_depth - 1);
        self.open = next;
    }

    /// [`SuffixTrie::longest_match`] of everything pushed so far, in `max_depth` steps instead
    /// of a walk from the root per length: the open suffixes are the candidates.
    pub fn longest_match(&self, trie: &SuffixTrie) -> Option<Match> {
        self.open
            .iter()
            .enumerate()
            .rev()
            .find_map(|(i, &node)| trie.has_next(node).then_some(Match { node, len: i + 1 }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn next_after(trie: &SuffixTrie, context: &[u32]) -> Option<(u32, f64, usize)> {
        let m = trie.longest_match(context)?;
        let n = trie.likeliest_next(m.node)?;
        Some((n.token, n.share, m.len))
    }

    #[test]
    fn finds_the_longest_earlier_context_and_the_commonest_continuation() {
        let mut trie = SuffixTrie::new(8);
        // "1 2 3" is followed by 4 twice and by 5 once.
        trie.add(&[1, 2, 3, 4, 9, 1, 2, 3, 4, 9, 1, 2, 3, 5]);
        let (token, share, len) = next_after(&trie, &[7, 1, 2, 3]).unwrap();
        assert_eq!((token, len), (4, 3));
        assert!((share - 2.0 / 3.0).abs() < 1e-12);
        // "9 1 2 3" is longer and was followed by 4 and 5 once each.
        let (_, share, len) = next_after(&trie, &[9, 1, 2, 3]).unwrap();
        assert_eq!(len, 4);
        assert!((share - 0.5).abs() < 1e-12);
        assert_eq!(next_after(&trie, &[6]), None);
    }

    #[test]
    fn counts_every_substring_up_to_the_depth() {
        let mut trie = SuffixTrie::new(3);
        trie.add(&[1, 1, 1, 1]);
        // Substrings: "1" x4, "1 1" x3, "1 1 1" x2 (nothing longer than the depth).
        let one = trie.child(ROOT, 1).unwrap();
        let two = trie.child(one, 1).unwrap();
        let three = trie.child(two, 1).unwrap();
        let counts: Vec<u32> = [one, two, three]
            .iter()
            .map(|&n| trie.nodes[n as usize].count)
            .collect();
        assert_eq!(counts, [4, 3, 2]);
        assert_eq!(trie.child(three, 1), None);
        assert_eq!(trie.num_nodes(), 4);
    }

    #[test]
    fn removing_what_was_added_gives_every_node_back() {
        let mut trie = SuffixTrie::new(5);
        let a = [3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5];
        let b = [2, 7, 1, 8, 2, 8, 1, 8, 2, 8];
        trie.add(&a);
        let after_a = trie.num_nodes();
        trie.add(&b);
        trie.remove(&a);
        // Only b's substrings remain: same answers as a trie of b alone.
        let mut only_b = SuffixTrie::new(5);
        only_b.add(&b);
        assert_eq!(trie.num_nodes(), only_b.num_nodes());
        for context in [&[8, 1][..], &[2, 8], &[1, 8, 2], &[3, 1], &[5]] {
            assert_eq!(next_after(&trie, context), next_after(&only_b, context));
        }
        trie.remove(&b);
        assert_eq!(trie.num_nodes(), 1);
        assert!(trie.root_children.is_empty());
        // Freed nodes are reused.
        trie.add(&a);
        assert_eq!(trie.num_nodes(), after_a);
        assert!(trie.nodes.len() <= after_a + only_b.num_nodes());
    }

    #[test]
    fn appending_one_token_at_a_time_equals_adding_at_once() {
        let tokens: Vec<u32> = (0..200u32).map(|i| (i * 7 + i / 13) % 11).collect();
        let mut whole = SuffixTrie::new(6);
        whole.add(&tokens);
        let mut step = SuffixTrie::new(6);
        let mut appender = Appender::default();
        for &t in &tokens {
            appender.push(&mut step, t);
        }
        assert_eq!(whole.num_nodes(), step.num_nodes());
        for end in 1..tokens.len() {
            let context = &tokens[..end];
            assert_eq!(next_after(&whole, context), next_after(&step, context));
        }
        // The appender's own lookup agrees with the walk from the root at every length.
        let mut growing = SuffixTrie::new(6);
        let mut appender = Appender::default();
        for (end, &t) in tokens.iter().enumerate() {
            appender.push(&mut growing, t);
            let context = &tokens[..=end];
            assert_eq!(
                appender.longest_match(&growing),
                growing.longest_match(context),
                "{end}"
            );
        }
    }
}
