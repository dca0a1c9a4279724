//! The encoder's tokenizer on the shard: XLM-R's SentencePiece (unigram) from the model's
//! own `tokenizer.json`, run by Hugging Face's `tokenizers` crate, the implementation the file
//! is written for (its normaliser is a precompiled character map and a regular expression;
//! reimplementing them would be a parity risk for no gain). Built without its C regex engine
//! (`fancy-regex` instead of `onig`).
//!
//! A text becomes windows of at most [`super::WINDOW_TOKENS`] ids, each `<s> query: … </s>`:
//! the e5 models read a text as a query after that prefix. [`HarmTokenizer::windows`] gives
//! each sentence a window of its own (only sentences of a few tokens share one): the heads
//! were trained on short texts, mostly single tweets, and a short harmful sentence would be
//! diluted in the mean-pooled embedding of a window it shares. A text of more than
//! [`super::WINDOWS_MAX`] windows is read at its start and its end. At most
//! [`TOKENIZED_CHARS_MAX`] characters are tokenized.
//!
//! [`HarmTokenizer::windows_of`] cuts the text as a whole into windows of a given length; its
//! first window is what the model's reference pipeline gives the text truncated to that many
//! tokens (the parity test holds it to `models/text/classifier/reference.jsonl` at 128).

use std::path::Path;

use tokenizers::Tokenizer;

/// `<s>`, `<pad>`, `</s>`: XLM-R's ids.
pub const BOS_ID: i64 = 0;
pub const PAD_ID: i64 = 1;
pub const EOS_ID: i64 = 2;
/// What e5 reads before a text to embed it for classification.
pub const PREFIX: &str = "query: ";
/// Characters tokenized, at most: the longest text any plan allows.
pub const TOKENIZED_CHARS_MAX: usize = crate::bounds::TEXT_CHARS_MAX as usize;

pub struct HarmTokenizer {
    tokenizer: Tokenizer,
    /// The ids of the prefix as it starts every joint encoding (it ends at a space, where
    /// the pre-tokenizer always splits, so no text changes them).
    prefix_ids: Vec<i64>,
}

impl HarmTokenizer {
    pub fn from_file(path: &Path) -> Result<HarmTokenizer, String> {
        let mut tokenizer =
            Tokenizer::from_file(path).map_err(|error| format!("{}: {error}", path.display()))?;
        tokenizer
            .with_truncation(None)
            .map_err(|error| format!("{}: {error}", path.display()))?;
        tokenizer.with_padding(None);
        let prefix_ids = ids_of(&tokenizer, PREFIX.trim_end())?;
        if prefix_ids.is_empty() || prefix_ids.len() + 3 > super::ROW_TOKENS_MAX {
            return Err(format!("{}: an unexpected prefix", path.display()));
        }
        Ok(HarmTokenizer {
            tokenizer,
            prefix_ids,
        })
    }

    /// The windows of `text` the check scores: its sentences, packed in order into windows
    /// of at most [`super::PACKED_TOKENS`] ids of text (a longer sentence is cut at
    /// [`super::WINDOW_TOKENS`] framed ids), at most [`super::WINDOWS_MAX`] of them.
    pub fn windows(&self, text: &str) -> Result<Vec<Vec<i64>>, String> {
        let text = &text[..char_end(text, TOKENIZED_CHARS_MAX)];
        let per_window = super::WINDOW_TOKENS - 2 - self.prefix_ids.len();
        let mut windows: Vec<Vec<i64>> = Vec::new();
        let mut packed: Vec<i64> = Vec::new();
        for sentence in sentences(text) {
            let ids = ids_of(&self.tokenizer, sentence)?;
            if !packed.is_empty() && packed.len() + ids.len() > super::PACKED_TOKENS {
                windows.push(std::mem::take(&mut packed));
            }
            for chunk in ids.chunks(per_window) {
                if packed.len() + chunk.len() > per_window {
                    windows.push(std::mem::take(&mut packed));
                }
                packed.extend_from_slice(chunk);
            }
        }
        if !packed.is_empty() || windows.is_empty() {
            windows.push(packed);
        }
        Ok(self.frame_start_and_end(&windows.iter().map(Vec::as_slice).collect::<Vec<_>>()))
    }

    /// The windows of `text` of at most `row_tokens` framed ids each (at most
    /// [`super::ROW_TOKENS_MAX`]); the first is the reference pipeline's truncation of the
    /// text to `row_tokens`.
    pub fn windows_of(&self, text: &str, row_tokens: usize) -> Result<Vec<Vec<i64>>, String> {
        let row_tokens = row_tokens.min(super::ROW_TOKENS_MAX);
        let joint = format!("{PREFIX}{}", &text[..char_end(text, TOKENIZED_CHARS_MAX)]);
        let ids = ids_of(&self.tokenizer, &joint)?;
        let body = ids
            .strip_prefix(self.prefix_ids.as_slice())
            .ok_or("the prefix did not tokenize as expected")?;
        let per_window = row_tokens
            .checked_sub(2 + self.prefix_ids.len())
            .filter(|&n| n > 0)
            .ok_or("windows too short for the prefix")?;
        let mut chunks: Vec<&[i64]> = body.chunks(per_window).collect();
        if chunks.is_empty() {
            // An empty text is one window of the prefix alone.
            chunks.push(&[]);
        }
        Ok(self.frame_start_and_end(&chunks))
    }

    /// `chunks` framed, at most [`super::WINDOWS_MAX`]: when there are more, the text's start
    /// and its end, where abuse sits in a long text more often than in its middle.
    fn frame_start_and_end(&self, chunks: &[&[i64]]) -> Vec<Vec<i64>> {
        let head = super::WINDOWS_MAX.div_ceil(2).min(chunks.len());
        let tail = (super::WINDOWS_MAX - head).min(chunks.len() - head);
        chunks[..head]
            .iter()
            .chain(&chunks[chunks.len() - tail..])
            .map(|chunk| self.framed(chunk))
            .collect()
    }

    fn framed(&self, chunk: &[i64]) -> Vec<i64> {
        let mut row = Vec::with_capacity(chunk.len() + self.prefix_ids.len() + 2);
        row.push(BOS_ID);
        row.extend_from_slice(&self.prefix_ids);
        row.extend_from_slice(chunk);
        row.push(EOS_ID);
        row
    }
}

/// The byte offset of character `chars` of `text`, or its length.
fn char_end(text: &str, chars: usize) -> usize {
    text.char_indices()
        .nth(chars)
        .map_or(text.len(), |(at, _)| at)
}

/// The sentences of `text`: cut after `.`, `!`, `?`, `…` and their full-width forms, and at
/// line breaks, where whitespace follows; each keeps its end mark.
fn sentences(text: &str) -> impl Iterator<Item = &str> {
    let mut rest = text;
    std::iter::from_fn(move || {
        let trimmed = rest.trim_start();
        if trimmed.is_empty() {
            return None;
        }
        let mut chars = trimmed.char_indices().peekable();
        let mut end = trimmed.len();
        while let Some((at, c)) = chars.next() {
            let next_is_space = chars.peek().is_none_or(|&(_, n)| n.is_whitespace());
            let full_width = matches!(c, '。' | '！' | '？');
            if c == '\n' || full_width || (matches!(c, '.' | '!' | '?' | '…') && next_is_space) {
                end = at + c.len_utf8();
                break;
            }
        }
        let (sentence, after) = trimmed.split_at(end);
        rest = after;
        Some(sentence)
    })
}

fn ids_of(tokenizer: &Tokenizer, text: &str) -> Result<Vec<i64>, String> {
    let encoding = tokenizer
        .encode(text, false)
        .map_err(|error| format!("tokenizing: {error}"))?;
    Ok(encoding.get_ids().iter().map(|&id| i64::from(id)).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tokenizer() -> Option<HarmTokenizer> {
        let path = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/models"))
            .join(super::super::TOKENIZER_FILE);
        path.exists()
            .then(|| HarmTokenizer::from_file(&path).expect("the tokenizer loads"))
    }

    /// The first window of every reference text is the reference pipeline's ids, exactly.
    #[test]
    fn ids_match_the_reference_pipeline() {
        let tokenizer = tokenizer().expect("models/cache holds the tokenizer (make fetch)");
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/models/text/classifier/reference.jsonl"
        );
        let mut rows = 0;
        for line in std::fs::read_to_string(path).unwrap().lines() {
            let row: serde_json::Value = serde_json::from_str(line).unwrap();
            let expected: Vec<i64> = row["input_ids"]
                .as_array()
                .unwrap()
                .iter()
                .map(|id| id.as_i64().unwrap())
                .collect();
            let windows = tokenizer
                .windows_of(row["text"].as_str().unwrap(), super::super::ROW_TOKENS_MAX)
                .unwrap();
            assert_eq!(windows[0], expected, "{}", row["text"]);
            rows += 1;
        }
        assert!(rows >= 100, "{rows} reference rows");
    }

    #[test]
    fn long_texts_are_cut_into_bounded_windows() {
        let tokenizer = tokenizer().expect("models/cache holds the tokenizer (make fetch)");
        let long = format!(
            "{} Fin.",
            "The cat sat on the mat and looked at the dog. ".repeat(400)
        );
        let windows = tokenizer.windows(&long).unwrap();
        assert_eq!(windows.len(), super::super::WINDOWS_MAX);
        // Whole sentences packed: the first window starts with the first, the last ends with
        // the text's last.
        let first = tokenizer
            .windows("The cat sat on the mat and looked at the dog.")
            .unwrap();
        let sentence = &first[0][..first[0].len() - 1];
        assert_eq!(&windows[0][..sentence.len()], sentence);
        let end = tokenizer.windows("Fin.").unwrap()[0].clone();
        let tail = &end[1 + tokenizer.prefix_ids.len()..];
        let last = windows.last().unwrap();
        assert_eq!(&last[last.len() - tail.len()..], tail);
        for window in &windows {
            assert!(window.len() <= super::super::WINDOW_TOKENS);
            assert_eq!(window[0], BOS_ID);
            assert_eq!(*window.last().unwrap(), EOS_ID);
            assert_eq!(
                &window[1..1 + tokenizer.prefix_ids.len()],
                tokenizer.prefix_ids
            );
        }
        let empty = tokenizer.windows("").unwrap();
        assert_eq!(empty, vec![tokenizer.framed(&[])]);
        // A sentence longer than a window is cut.
        let unbroken = "word ".repeat(2_000);
        let windows = tokenizer.windows(&unbroken).unwrap();
        assert_eq!(windows.len(), super::super::WINDOWS_MAX);
        assert!(windows
            .iter()
            .all(|w| w.len() <= super::super::WINDOW_TOKENS));
    }

    #[test]
    fn sentences_end_at_their_marks() {
        let found: Vec<&str> =
            sentences("Hi there. I said 3.5 times! Why?\nNew line 你好。再见").collect();
        assert_eq!(
            found,
            [
                "Hi there.",
                "I said 3.5 times!",
                "Why?",
                "New line 你好。",
                "再见"
            ]
        );
        assert_eq!(sentences("  ").count(), 0);
        assert_eq!(
            sentences("no mark at all").collect::<Vec<_>>(),
            ["no mark at all"]
        );
    }
}
