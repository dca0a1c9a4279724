//! The scores gathered from the checks of one request: the best score per category and the
//! check that gave it, and the categories no check here could score. The decision
//! ([`crate::decision`]) reads it against a workflow's thresholds.

/// The best score of one category and the check that gave it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Scored {
    pub category: &'static str,
    pub score: f64,
    pub source: &'static str,
}

/// Scores gathered from the checks of one request: the best per category.
#[derive(Clone, Debug, Default)]
pub struct ScoreBoard {
    scored: Vec<Scored>,
    unchecked: Vec<&'static str>,
    /// What the measuring checks found (no category: figures an answer reports as they are).
    pub measured: crate::image::Measured,
    /// A text's language: whatlang's when the workflow names the `language` check, else
    /// [`crate::text::langid`]'s where the answer carries one (`Engine::add_language`; absent
    /// without its profiles). `Some(None)` for a text with no letters.
    pub language: Option<Option<crate::text::language::Language>>,
    /// What the organization's lists matched, one match per list at most (the `hashlist`
    /// check).
    pub list_matches: Vec<crate::lists::ListMatch>,
    /// Whether a `hashlist` or `termlist` check consulted the lists (answers then list the
    /// matches, `[]` for none).
    pub lists_consulted: bool,
}

impl ScoreBoard {
    /// Records `score` for `category` from `source`, keeping the best per category.
    pub fn add(&mut self, category: &'static str, score: f64, source: &'static str) {
        let score = if score.is_nan() {
            0.0
        } else {
            score.clamp(0.0, 1.0)
        };
        match self.scored.iter_mut().find(|s| s.category == category) {
            Some(existing) if existing.score >= score => {}
            Some(existing) => {
                *existing = Scored {
                    category,
                    score,
                    source,
                }
            }
            None => self.scored.push(Scored {
                category,
                score,
                source,
            }),
        }
    }

    /// Records that the categories of a check could not be scored here.
    pub fn unavailable(&mut self, categories: &[&'static str]) {
        for &category in categories {
            if !self.unchecked.contains(&category) {
                self.unchecked.push(category);
            }
        }
    }

    /// Whether `category` was wanted but no check here could score it.
    pub fn is_unavailable(&self, category: &str) -> Option<&'static str> {
        self.unchecked.iter().copied().find(|&id| id == category)
    }

    /// Whether an image allow list matched: the image is exempt from the models' reasons
    /// (a text allow list's terms are hidden from the checks instead).
    pub fn allowed(&self) -> bool {
        self.list_matches
            .iter()
            .any(|found| found.kind == crate::lists::ListKind::Allow && found.term.is_none())
    }

    pub fn get(&self, category: &str) -> Option<&Scored> {
        self.scored.iter().find(|s| s.category == category)
    }
}
