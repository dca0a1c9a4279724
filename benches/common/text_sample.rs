//! The text the text benches and `examples/text_instructions.rs` measure on (included by
//! path from both, so that their figures are of one text).

/// About 1 KiB of ordinary comment text, with a little of everything the checks look for.
pub fn sample_kib() -> String {
    let sentence = "Thanks for the review! I ordered the lamp on Monday, it arrived broken, and support at help@example.com never answered. ";
    let mut text = String::new();
    while text.len() < 1024 {
        text.push_str(sentence);
    }
    text.truncate(1024);
    text
}
