//! Text in images with PaddleOCR's PP-OCRv6 networks as rapidocr 3.10.0 ships and runs them
//! (PyPI `rapidocr==3.10.0`, Apache-2.0; fetched by `models/fetch.py`), on the shard's model
//! worker: the detector over the whole image, the orientation network and the recognition
//! network over the lines found, in batches of [`LINE_BATCH`] ordered by aspect ratio, as the
//! reference batches them (a line's scores depend on its batch's width).
//!
//! The pixel work around the networks is [`crate::image::ocr`]; the bounds on the work are
//! there too (largest side, detector pixels, lines read, line width).

use ort::session::Session;
use ort::value::Tensor;

use super::models::{open_session_unpooled, ModelSpec, WorkerModels};
use crate::image::ocr::boxes::text_boxes;
use crate::image::ocr::warp::{crop, half_turn};
use crate::image::ocr::{
    box_in_image, ctc_decode, detector_input, fit, line_input, line_width, lines_to_read,
    recognition_width, TextLine, LINE_BATCH, LINE_HEIGHT_PX, LINE_SCORE_MIN, ORIENTATION_WIDTH_PX,
    UPSIDE_DOWN_MIN,
};
use crate::image::Rgb8;

pub const DETECTOR: ModelSpec = ModelSpec {
    name: "ocr_det",
    file: "cache/ocr_det.onnx",
    sha256: "090f04abcd9d9a7498bc4ebf677e4cb9bdce1fe4197ddb7e529f1ef44e1ff94f",
};
pub const ORIENTATION: ModelSpec = ModelSpec {
    name: "ocr_cls",
    file: "cache/ocr_cls.onnx",
    sha256: "e47acedf663230f8863ff1ab0e64dd2d82b838fceb5957146dab185a89d6215c",
};
pub const RECOGNITION: ModelSpec = ModelSpec {
    name: "ocr_rec",
    file: "cache/ocr_rec.onnx",
    sha256: "6f327246b50388f3c176ae304bd95767ea6dc0c9ae92153ef8cbe210b3c14884",
};
/// The three networks, in the order they run.
pub const NETS: &[ModelSpec] = &[DETECTOR, ORIENTATION, RECOGNITION];

/// The networks' input (all three).
const INPUT: &str = "x";
/// The recognition's character list: a metadata entry of its ONNX file, one a line.
const CHARACTERS_KEY: &str = "character";

/// The three sessions of one worker, and the recognition's characters.
pub struct OcrNets {
    detector: Session,
    orientation: Session,
    recognition: Session,
    /// Class `i` of the recognition is `characters[i - 1]` (class 0 is CTC's blank); the last
    /// is a space, which the reference's decoder adds to the file's list.
    characters: Vec<String>,
}

impl OcrNets {
    /// The networks, if all three passed the start-up checks.
    pub fn open(models: &WorkerModels) -> Result<Option<OcrNets>, String> {
        let paths: Option<Vec<_>> = NETS.iter().map(|spec| models.path_of(spec)).collect();
        let Some(paths) = paths else {
            return Ok(None);
        };
        let open = |i: usize| open_session_unpooled(&models.environment, paths[i]);
        let recognition = open(2)?;
        let list = recognition
            .metadata()
            .map_err(|e| e.to_string())?
            .custom(CHARACTERS_KEY)
            .ok_or("the OCR recognition model has no character list")?;
        let mut characters: Vec<String> = list.lines().map(str::to_owned).collect();
        characters.push(" ".to_owned());
        Ok(Some(OcrNets {
            detector: open(0)?,
            orientation: open(1)?,
            recognition,
            characters,
        }))
    }

    /// The lines of text of `image`, in reading order.
    pub fn read(&mut self, image: &Rgb8) -> Result<Vec<TextLine>, String> {
        let Some(fitted) = fit(image) else {
            return Ok(Vec::new());
        };
        let Some((input, width, height)) = detector_input(&fitted.image) else {
            return Ok(Vec::new());
        };
        let map = run_one(&mut self.detector, vec![1, 3, height, width], input)?;
        if map.len() != width * height {
            return Err(format!(
                "OCR detector: {} values for {width}x{height}",
                map.len()
            ));
        }
        let quads = text_boxes(&map, width, height, fitted.image.width, fitted.image.height);
        let mut lines: Vec<(usize, Rgb8)> = lines_to_read(&quads)
            .into_iter()
            .filter_map(|i| crop(&fitted.image, &quads[i]).map(|line| (i, line)))
            .collect();
        self.turn_upside_down_lines(&mut lines)?;
        let read = self.recognise(&lines)?;
        Ok(lines
            .iter()
            .zip(read)
            .filter(|(_, (text, score))| !text.trim().is_empty() && *score >= LINE_SCORE_MIN)
            .map(|((i, _), (text, score))| TextLine {
                text,
                score,
                quad: box_in_image(&quads[*i], &fitted, image.width, image.height),
            })
            .collect())
    }

    /// The orientation network over the lines; those it finds upside down (surely) are turned.
    fn turn_upside_down_lines(&mut self, lines: &mut [(usize, Rgb8)]) -> Result<(), String> {
        for batch in by_aspect(lines).chunks(LINE_BATCH) {
            let mut input = Vec::new();
            for &at in batch {
                let line = &lines[at].1;
                let width = line_width(line.width, line.height, ORIENTATION_WIDTH_PX);
                line_input(line, width, ORIENTATION_WIDTH_PX, &mut input);
            }
            let shape = vec![batch.len(), 3, LINE_HEIGHT_PX, ORIENTATION_WIDTH_PX];
            let outputs = run_one(&mut self.orientation, shape, input)?;
            if outputs.len() != batch.len() * 2 {
                return Err("OCR orientation: unexpected output".into());
            }
            for (&at, pair) in batch.iter().zip(outputs.chunks_exact(2)) {
                if pair[1] > pair[0] && pair[1] > UPSIDE_DOWN_MIN {
                    lines[at].1 = half_turn(&lines[at].1);
                }
            }
        }
        Ok(())
    }

    /// The recognition network over the lines: each line's text and score, in their order.
    fn recognise(&mut self, lines: &[(usize, Rgb8)]) -> Result<Vec<(String, f64)>, String> {
        let mut read = vec![(String::new(), 0.0); lines.len()];
        for batch in by_aspect(lines).chunks(LINE_BATCH) {
            let aspect = |at: usize| lines[at].1.width as f64 / lines[at].1.height as f64;
            let width = recognition_width(batch.iter().map(|&at| aspect(at)));
            let mut input = Vec::new();
            for &at in batch {
                let line = &lines[at].1;
                line_input(
                    line,
                    line_width(line.width, line.height, width),
                    width,
                    &mut input,
                );
            }
            let tensor = Tensor::from_array((vec![batch.len(), 3, LINE_HEIGHT_PX, width], input))
                .map_err(|e| e.to_string())?;
            let outputs = self
                .recognition
                .run(ort::inputs![INPUT => tensor])
                .map_err(|e| e.to_string())?;
            // [lines, steps, classes], read in place: it is large (18,710 floats a step).
            let (shape, values) = outputs[0]
                .try_extract_tensor::<f32>()
                .map_err(|e| e.to_string())?;
            let [n, steps, classes] = shape[..] else {
                return Err(format!("OCR recognition: output shape {shape:?}"));
            };
            let (n, steps, classes) = (n as usize, steps as usize, classes as usize);
            if n != batch.len() || classes != self.characters.len() + 1 {
                return Err(format!("OCR recognition: output shape {shape:?}"));
            }
            for (&at, output) in batch.iter().zip(values.chunks_exact(steps * classes)) {
                read[at] = ctc_decode(output, classes, &self.characters);
            }
        }
        Ok(read)
    }
}

/// The lines' indices ordered by aspect ratio (width over height), stably: the reference's
/// batching order.
fn by_aspect(lines: &[(usize, Rgb8)]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..lines.len()).collect();
    let aspect = |at: usize| lines[at].1.width as f64 / lines[at].1.height as f64;
    order.sort_by(|&a, &b| aspect(a).total_cmp(&aspect(b)));
    order
}

/// Runs a network with one input and returns its first output's values.
fn run_one(session: &mut Session, shape: Vec<usize>, values: Vec<f32>) -> Result<Vec<f32>, String> {
    let tensor = Tensor::from_array((shape, values)).map_err(|e| e.to_string())?;
    let outputs = session
        .run(ort::inputs![INPUT => tensor])
        .map_err(|e| e.to_string())?;
    let (_, data) = outputs[0]
        .try_extract_tensor::<f32>()
        .map_err(|e| e.to_string())?;
    Ok(data.to_vec())
}
