//! Texts before the checks: normalisation for matching ([`normalize`]) and the language a
//! text is written in: [`langid`] for every text, [`language`] (whatlang, more languages) for
//! the `language` check.

pub mod langid;
pub mod language;
pub mod normalize;

/// At most the first `chars` characters (Unicode scalar values) of `text`.
pub fn first_chars(text: &str, chars: usize) -> &str {
    match text.char_indices().nth(chars) {
        Some((at, _)) => &text[..at],
        None => text,
    }
}

#[cfg(test)]
pub(crate) mod tests {
    /// One message in five languages, for both detectors' tests.
    #[rustfmt::skip]
    pub(crate) const SENTENCES: [(&str, &str); 5] = [
            ("Thanks for the update. I will be there at three, and I will bring the documents we talked about yesterday.", "en"),
            ("Merci pour la mise à jour. Je serai là à trois heures et j'apporterai les documents dont nous avons parlé hier.", "fr"),
            ("Danke für das Update. Ich werde um drei Uhr da sein und die Unterlagen mitbringen, über die wir gestern gesprochen haben.", "de"),
            ("Gracias por la actualización. Estaré allí a las tres y traeré los documentos de los que hablamos ayer.", "es"),
            ("Спасибо за новости. Я буду там в три часа и принесу документы, о которых мы говорили вчера.", "ru"),
    ];

    #[test]
    fn first_chars_cut_between_characters() {
        assert_eq!(super::first_chars("héllo", 2), "hé");
        assert_eq!(super::first_chars("héllo", 5), "héllo");
        assert_eq!(super::first_chars("héllo", 9), "héllo");
        assert_eq!(super::first_chars("", 3), "");
        assert_eq!(super::first_chars("漢字", 0), "");
    }
}
