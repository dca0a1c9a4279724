//! Image checks: `open_nsfw` (Yahoo's open-NSFW, BSD-2) and `nsfwjs` (MobileNetV2 "mid",
//! MIT), both run on the shard's model worker after the image is decoded there.
//!
//! Categories: `nudity` is open-NSFW's P(nsfw) and nsfwjs's Porn; `suggestive` is nsfwjs's
//! Sexy; `drawn_nudity` is nsfwjs's Hentai. `scores` keeps the best per category across the
//! two models, and a reason names the model that gave it.

use crate::decision::ScoreBoard;
use crate::inference::ImageScores;

pub const OPEN_NSFW: &str = "open_nsfw";
pub const NSFWJS: &str = "nsfwjs";
pub const NUDITY: &str = "nudity";
pub const SUGGESTIVE: &str = "suggestive";
pub const DRAWN_NUDITY: &str = "drawn_nudity";
pub const OPEN_NSFW_CATEGORIES: &[&str] = &[NUDITY];
pub const NSFWJS_CATEGORIES: &[&str] = &[NUDITY, SUGGESTIVE, DRAWN_NUDITY];

/// nsfwjs's classes, in its output order.
const HENTAI: usize = 1;
const PORN: usize = 3;
const SEXY: usize = 4;

/// Records the scores the models gave.
pub fn add_scores(scores: &ImageScores, board: &mut ScoreBoard) {
    if let Some(p) = scores.open_nsfw {
        board.add(NUDITY, f64::from(p), OPEN_NSFW);
    }
    if let Some(classes) = scores.nsfwjs {
        board.add(NUDITY, f64::from(classes[PORN]), NSFWJS);
        board.add(SUGGESTIVE, f64::from(classes[SEXY]), NSFWJS);
        board.add(DRAWN_NUDITY, f64::from(classes[HENTAI]), NSFWJS);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_best_model_wins_each_category() {
        let scores = ImageScores {
            open_nsfw: Some(0.7),
            nsfwjs: Some([0.0, 0.2, 0.1, 0.6, 0.9]),
            ..ImageScores::default()
        };
        let mut board = ScoreBoard::default();
        add_scores(&scores, &mut board);
        let nudity = board.get(NUDITY).unwrap();
        assert_eq!(
            (nudity.source, (nudity.score * 10.0).round()),
            (OPEN_NSFW, 7.0)
        );
        assert_eq!(board.get(SUGGESTIVE).unwrap().source, NSFWJS);
        assert!((board.get(DRAWN_NUDITY).unwrap().score - 0.2).abs() < 1e-6);
    }
}
