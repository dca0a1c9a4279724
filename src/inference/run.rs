//! One model run each: input tensors in, scores out. Called on the model worker only.

use ort::session::Session;
use ort::value::Tensor;

use super::ImageModelSpec;

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

/// Runs an image model over `inputs` (whole images of `spec.input_len()` floats each): its
/// output, `spec.output_columns` values per image.
pub fn image_rows(
    session: &mut Session,
    spec: &ImageModelSpec,
    inputs: Vec<f32>,
) -> Result<Vec<f32>, String> {
    let rows = inputs.len() / spec.input_len();
    let [height, width, channels] = spec.input_hwc;
    let input =
        Tensor::from_array(([rows, height, width, channels], inputs)).map_err(|e| e.to_string())?;
    let outputs = session
        .run(ort::inputs![spec.input_name => input])
        .map_err(|e| e.to_string())?;
    let (_, values) = outputs[spec.output_name]
        .try_extract_tensor::<f32>()
        .map_err(|e| e.to_string())?;
    if values.len() != rows * spec.output_columns {
        return Err(format!(
            "{}: {} values for {rows} rows",
            spec.model.name,
            values.len()
        ));
    }
    Ok(values.to_vec())
}
