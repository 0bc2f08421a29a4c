//! Drafts from a request's predicted output (OpenAI's `prediction`: text the client expects
//! the answer to mostly repeat, such as a file being edited). Where the output so far is the
//! prediction's start, the drafts are what follows it there; otherwise the output's last few
//! tokens are looked up in the prediction, at the occurrence nearest to where the output has
//! got to, and the drafts are what follows that. The target verifies them like any drafts, so
//! the answer is the one the request gets without a prediction.

/// Longest output suffix tried first.
const MAX_N: usize = 4;

/// Up to `k` drafts for `output` from `prediction`; empty when nothing matches.
pub fn propose(output: &[u32], prediction: &[u32], k: usize) -> Vec<u32> {
    if k == 0 {
        return Vec::new();
    }
    let at = output.len();
    if prediction.starts_with(output) {
        return prediction[at.min(prediction.len())..(at + k).min(prediction.len())].to_vec();
    }
    for n in (1..=MAX_N.min(at)).rev() {
        let suffix = &output[at - n..];
        // Ends of the occurrences that something follows; the one nearest the output's length.
        let nearest = (n..prediction.len())
            .filter(|&end| &prediction[end - n..end] == suffix)
            .min_by_key(|&end| end.abs_diff(at));
        if let Some(end) = nearest {
            return prediction[end..(end + k).min(prediction.len())].to_vec();
        }
    }
    Vec::new()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_output_that_follows_the_prediction_gets_its_next_tokens() {
        let prediction = [1, 2, 3, 4, 5, 6];
        assert_eq!(propose(&[], &prediction, 3), vec![1, 2, 3]);
        assert_eq!(propose(&[1, 2], &prediction, 3), vec![3, 4, 5]);
        assert_eq!(propose(&[1, 2, 3, 4, 5], &prediction, 3), vec![6]);
        assert!(propose(&prediction, &prediction, 3).is_empty());
        assert!(propose(&[1], &prediction, 0).is_empty());
    }

    #[test]
    fn after_an_edit_the_output_finds_its_place_again() {
        // The answer inserted 9 after 2: its last tokens [2, 9] are not in the prediction, [9]
        // neither; after one more token, [3] is, and drafting resumes after it.
        let prediction = [1, 2, 3, 4, 5, 6];
        assert!(propose(&[1, 2, 9], &prediction, 2).is_empty());
        assert_eq!(propose(&[1, 2, 9, 3], &prediction, 2), vec![4, 5]);
        // A deletion: [1, 2] then 4 (3 dropped).
        assert_eq!(propose(&[1, 2, 4], &prediction, 2), vec![5, 6]);
    }

    #[test]
    fn a_repeated_piece_resumes_at_the_occurrence_nearest_the_output_length() {
        // [7] occurs at 1 and 5; the output (6 tokens, diverged) is nearest the second.
        let prediction = [0, 7, 1, 2, 3, 7, 4, 5];
        assert_eq!(propose(&[9, 9, 9, 9, 9, 7], &prediction, 2), vec![4, 5]);
        assert_eq!(propose(&[9, 7], &prediction, 2), vec![1, 2]);
    }
}
