//! The two kinds of content modgate checks. One type for scopes, checks, metrics labels and the
//! journal, so that "text" and "image" are spelled in one place.

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ContentKind {
    Text,
    Image,
}

impl ContentKind {
    pub const ALL: [ContentKind; 2] = [ContentKind::Text, ContentKind::Image];

    /// The name on the wire, in metrics labels and in the journal.
    pub fn as_str(self) -> &'static str {
        match self {
            ContentKind::Text => "text",
            ContentKind::Image => "image",
        }
    }

    /// The kind's place in [`ContentKind::ALL`] (for per-kind counters).
    pub fn index(self) -> usize {
        match self {
            ContentKind::Text => 0,
            ContentKind::Image => 1,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::ContentKind;

    #[test]
    fn index_is_the_place_in_all() {
        for (at, kind) in ContentKind::ALL.into_iter().enumerate() {
            assert_eq!(kind.index(), at);
        }
    }
}
