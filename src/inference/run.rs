//! One model run each: input tensors in, scores out. Called on the model worker only.

use ort::session::Session;
use ort::value::Tensor;

use crate::image::resize::INPUT_LEN;

/// Runs tox-block on `ids` (`n × 100` token ids): the raw sigmoid outputs, one row per window.
pub fn toxblock_probs(session: &mut Session, ids: Vec<i32>) -> Result<Vec<[f32; 6]>, String> {
    let rows = ids.len() / 100;
    let input = Tensor::from_array(([rows, 100usize], ids)).map_err(|e| e.to_string())?;
    let outputs = session
        .run(ort::inputs!["input_ids" => input])
        .map_err(|e| e.to_string())?;
    let (_, probs) = outputs["probs"]
        .try_extract_tensor::<f32>()
        .map_err(|e| e.to_string())?;
    if probs.len() != rows * 6 {
        return Err(format!(
            "tox-block gave {} values for {rows} rows",
            probs.len()
        ));
    }
    Ok(probs
        .chunks_exact(6)
        .map(|row| std::array::from_fn(|i| row[i]))
        .collect())
}

/// Runs a model with one NHWC 224 x 224 x 3 float input over `rows` images; the output rows.
fn image_model_rows(
    session: &mut Session,
    input_name: &str,
    output_name: &str,
    inputs: Vec<f32>,
    columns: usize,
) -> Result<Vec<f32>, String> {
    let rows = inputs.len() / INPUT_LEN;
    let input =
        Tensor::from_array(([rows, 224usize, 224, 3], inputs)).map_err(|e| e.to_string())?;
    let outputs = session
        .run(ort::inputs![input_name => input])
        .map_err(|e| e.to_string())?;
    let (_, values) = outputs[output_name]
        .try_extract_tensor::<f32>()
        .map_err(|e| e.to_string())?;
    if values.len() != rows * columns {
        return Err(format!(
            "{output_name}: {} values for {rows} rows",
            values.len()
        ));
    }
    Ok(values.to_vec())
}

/// open-NSFW: P(nsfw) per image (`inputs` from [`crate::image::resize::opennsfw_input`]).
pub fn open_nsfw_probs(session: &mut Session, inputs: Vec<f32>) -> Result<Vec<f32>, String> {
    let rows = image_model_rows(session, "input:0", "outputs", inputs, 2)?;
    Ok(rows.chunks_exact(2).map(|row| row[1]).collect())
}

/// nsfwjs: [drawing, hentai, neutral, porn, sexy] per image (`inputs` from
/// [`crate::image::resize::nsfwjs_input`]).
pub fn nsfwjs_probs(session: &mut Session, inputs: Vec<f32>) -> Result<Vec<[f32; 5]>, String> {
    let rows = image_model_rows(session, "input", "probabilities", inputs, 5)?;
    Ok(rows
        .chunks_exact(5)
        .map(|row| std::array::from_fn(|i| row[i]))
        .collect())
}
