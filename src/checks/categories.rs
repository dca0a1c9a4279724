//! Every category a check can score, with the English title (`text`) and the end-user
//! sentence (`message`) that reasons carry (`docs/interface.md#the-decision`), and those the
//! configuration's own models declare ([`declare`]).

use std::sync::OnceLock;

pub const NUDITY: &str = "nudity";
pub const SUGGESTIVE: &str = "suggestive";
pub const DRAWN_NUDITY: &str = "drawn_nudity";
pub const ILLUSTRATION: &str = "illustration";
pub const QR_CODE: &str = "qr_code";
pub const QR_LINK: &str = "qr_link";
pub const UNREAD_LANGUAGE: &str = "unread_language";
pub const KNOWN_IMAGE: &str = "known_image";
pub const LISTED_TERM: &str = "listed_term";
pub const FACE: &str = "face";
pub const IMAGE_TEXT: &str = "image_text";

/// `(id, text, message)`.
pub const CATEGORIES: &[(&str, &str, &str)] = &[
    (
        "profanity",
        "Profanity",
        "This content contains profane or vulgar language.",
    ),
    (
        "toxic",
        "Toxic language",
        "This content contains rude or disrespectful language.",
    ),
    (
        "severe_toxic",
        "Severely toxic language",
        "This content contains very hateful or aggressive language.",
    ),
    (
        "obscene",
        "Obscene language",
        "This content contains obscene language.",
    ),
    (
        "threat",
        "Threat",
        "This content appears to contain a threat against someone.",
    ),
    (
        "insult",
        "Insult",
        "This content appears to insult someone.",
    ),
    (
        "identity_hate",
        "Identity-based hate",
        "This content appears to attack people for who they are.",
    ),
    (
        "hate",
        "Hate",
        "This content appears to attack people for their race, religion, origin, gender, sexuality or disability.",
    ),
    (
        "harassment",
        "Harassment",
        "This content appears to insult, demean or abuse someone.",
    ),
    (
        "violence",
        "Violence or threats",
        "This content appears to threaten or incite violence.",
    ),
    (
        "self_harm",
        "Self-harm",
        "This content appears to express thoughts of suicide or self-harm. If you are struggling, please reach out to someone you trust or a local crisis line.",
    ),
    (
        "sexual",
        "Sexual content",
        "This content appears to be sexual or sexually harassing.",
    ),
    (
        "offensive",
        "Offensive language",
        "This content contains offensive, obscene or abusive language.",
    ),
    ("spam", "Spam", "This content looks like spam."),
    (
        "pii_email",
        "E-mail address",
        "This content contains an e-mail address; personal contact details may not be shared.",
    ),
    (
        "pii_phone",
        "Phone number",
        "This content contains a phone number; personal contact details may not be shared.",
    ),
    (
        "pii_iban",
        "Bank account number",
        "This content contains a bank account number (IBAN), which may not be shared.",
    ),
    (
        "pii_card",
        "Payment card number",
        "This content contains a payment card number, which may not be shared.",
    ),
    (
        "pii_ip",
        "IP address",
        "This content contains an IP address.",
    ),
    (
        "link",
        "Link",
        "This content contains a link to another website.",
    ),
    ("nudity", "Nudity", "This image appears to contain nudity."),
    (
        "suggestive",
        "Suggestive content",
        "This image appears to be sexually suggestive.",
    ),
    (
        "drawn_nudity",
        "Drawn nudity",
        "This image appears to contain drawn or animated nudity.",
    ),
    (
        "illustration",
        "Illustration",
        "This image appears to be a drawing or an illustration rather than a photo.",
    ),
    ("qr_code", "QR code", "This image contains a QR code."),
    ("face", "Face", "This image shows a human face."),
    (
        "image_text",
        "Text in the image",
        "This image contains written text.",
    ),
    (
        "listed_term",
        "Listed term",
        "This text contains a word or phrase this service was told to refuse.",
    ),
    (
        "known_image",
        "Known image",
        "This image matches an image this service was told to refuse.",
    ),
    (
        "unread_language",
        "Language not read",
        "This text is in a language the checks of this service do not read.",
    ),
    (
        "qr_link",
        "Link in a QR code",
        "This image contains a QR code that links to another website.",
    ),
];

/// The categories the configuration's models add (`[[models.custom]]`), set once at start.
static DECLARED: OnceLock<Vec<(&'static str, &'static str, &'static str)>> = OnceLock::new();

/// Adds the declared models' categories (id, title, message) to this process's, once.
pub fn declare(described: Vec<(&'static str, &'static str, &'static str)>) {
    // A second call (a reload) declares the same models or is refused by the registry.
    let _ = DECLARED.set(described);
}

/// Whether `id` is a category of this build (not one a configuration declares).
pub fn is_shipped(id: &str) -> bool {
    CATEGORIES.iter().any(|(known, _, _)| *known == id)
}

/// The title and message of `id`; unknown ids (a workflow file naming a category that no
/// check scores is refused at import, so this is a fallback) get generic wording.
pub fn describe(id: &str) -> (&'static str, &'static str) {
    let declared = DECLARED.get().into_iter().flatten();
    CATEGORIES
        .iter()
        .chain(declared)
        .find(|(known, _, _)| *known == id)
        .map_or(
            ("Policy", "This content does not meet the content policy."),
            |&(_, text, message)| (text, message),
        )
}

#[cfg(test)]
mod tests {
    #[test]
    fn ids_are_unique_and_messages_are_sentences() {
        let mut seen = std::collections::HashSet::new();
        for (id, text, message) in super::CATEGORIES {
            assert!(seen.insert(id));
            assert!(!text.is_empty());
            assert!(message.ends_with('.'));
        }
    }
}
