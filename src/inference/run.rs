//! One model run each: input tensors in, scores out. Called on the model worker only.

use std::borrow::Cow;

use ort::session::Session;
use ort::value::{Outlet, Tensor, TensorElementType, ValueType};

use super::models::{ImageModelSpec, TextEncoderSpec};

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

/// Padded tokens a batch may spend beyond its rows' own, as a share of them: rows are sorted
/// by length and cut into groups so that padding costs at most this much more work.
const ENCODER_PADDING_SHARE_MAX: f64 = 0.25;

/// Runs the text encoder of `spec` over `rows` (token ids, each at most
/// `spec.row_tokens_max`): `spec.dim` values per row, in the rows' order. Rows of similar
/// lengths run together, padded on the right to the longest of their group.
pub fn encoder_embeddings(
    session: &mut Session,
    spec: &TextEncoderSpec,
    rows: &[&[i64]],
) -> Result<Vec<f32>, String> {
    if let Some(row) = rows
        .iter()
        .find(|row| row.is_empty() || row.len() > spec.row_tokens_max)
    {
        return Err(format!(
            "{}: a row of {} tokens",
            spec.model.name,
            row.len()
        ));
    }
    let mut order: Vec<usize> = (0..rows.len()).collect();
    order.sort_by_key(|&at| rows[at].len());
    let mut out = vec![0f32; rows.len() * spec.dim];
    let mut start = 0;
    while start < order.len() {
        // The longest group from `start` whose padding stays within the share.
        let mut end = start + 1;
        let mut tokens = rows[order[start]].len();
        while end < order.len() {
            let longest = rows[order[end]].len();
            let padded = longest * (end + 1 - start);
            if padded as f64 > (tokens + longest) as f64 * (1.0 + ENCODER_PADDING_SHARE_MAX) {
                break;
            }
            tokens += longest;
            end += 1;
        }
        let group = &order[start..end];
        let width = rows[order[end - 1]].len();
        let mut ids = vec![spec.pad_id; group.len() * width];
        let mut mask = vec![0i64; group.len() * width];
        for (line, &at) in group.iter().enumerate() {
            let row = rows[at];
            ids[line * width..line * width + row.len()].copy_from_slice(row);
            mask[line * width..line * width + row.len()].fill(1);
        }
        let shape = [group.len(), width];
        let ids = Tensor::from_array((shape, ids)).map_err(|e| e.to_string())?;
        let mask = Tensor::from_array((shape, mask)).map_err(|e| e.to_string())?;
        let outputs = session
            .run(ort::inputs![spec.input_ids => ids, spec.attention_mask => mask])
            .map_err(|e| e.to_string())?;
        let (_, values) = outputs[spec.output]
            .try_extract_tensor::<f32>()
            .map_err(|e| e.to_string())?;
        if values.len() != group.len() * spec.dim {
            return Err(format!(
                "{}: {} values for {} rows",
                spec.model.name,
                values.len(),
                group.len()
            ));
        }
        for (line, &at) in group.iter().enumerate() {
            out[at * spec.dim..(at + 1) * spec.dim]
                .copy_from_slice(&values[line * spec.dim..(line + 1) * spec.dim]);
        }
        start = end;
    }
    Ok(out)
}

/// Runs an image model over `inputs` (whole images of `spec.input_len()` floats each), in one
/// batch: its output, `spec.output_columns` values per image.
pub fn image_rows(
    session: &mut Session,
    spec: &ImageModelSpec,
    inputs: Vec<f32>,
) -> Result<Vec<f32>, String> {
    let rows = inputs.len() / spec.input_len();
    let values = run_raw(session, spec, inputs)?;
    if values.len() != rows * spec.output_columns {
        return Err(format!(
            "{}: {} values for {rows} rows",
            spec.model.name,
            values.len()
        ));
    }
    Ok(values)
}

/// [`image_rows`] one image at a time, for a model whose batch is fixed at 1 (a common
/// export; [`takes_one_image`]).
pub fn image_rows_one_by_one(
    session: &mut Session,
    spec: &ImageModelSpec,
    inputs: Vec<f32>,
) -> Result<Vec<f32>, String> {
    let mut values = Vec::with_capacity(inputs.len() / spec.input_len() * spec.output_columns);
    for image in inputs.chunks_exact(spec.input_len()) {
        values.extend(image_rows(session, spec, image.to_vec())?);
    }
    Ok(values)
}

/// Whether the model's input takes exactly one image (read once, when its session opens).
pub fn takes_one_image(session: &Session, spec: &ImageModelSpec) -> bool {
    float_outlet(session.inputs(), spec.input_name, "input")
        .is_ok_and(|(_, shape)| shape.first() == Some(&1))
}

/// The model's output over `inputs`, whatever its length.
fn run_raw(
    session: &mut Session,
    spec: &ImageModelSpec,
    inputs: Vec<f32>,
) -> Result<Vec<f32>, String> {
    let rows = inputs.len() / spec.input_len();
    let shape = spec.layout.shape(rows, spec.input_hwc);
    let input = Tensor::from_array((shape, inputs)).map_err(|e| e.to_string())?;
    let input_name = outlet_name(session.inputs(), spec.input_name)?;
    let output_name = outlet_name(session.outputs(), spec.output_name)?;
    let outputs = session
        .run(ort::inputs![input_name => input])
        .map_err(|e| e.to_string())?;
    let (_, values) = outputs[&*output_name]
        .try_extract_tensor::<f32>()
        .map_err(|e| e.to_string())?;
    Ok(values.to_vec())
}

/// `declared`, or when it is empty the name of the model's only input (or output).
pub fn outlet_name(
    outlets: &[Outlet],
    declared: &'static str,
) -> Result<Cow<'static, str>, String> {
    if !declared.is_empty() {
        return Ok(Cow::Borrowed(declared));
    }
    match outlets {
        [only] => Ok(Cow::Owned(only.name().to_owned())),
        _ => Err(format!(
            "the model has {} of them ({}): name the one to use",
            outlets.len(),
            outlets
                .iter()
                .map(|outlet| format!("'{}'", outlet.name()))
                .collect::<Vec<_>>()
                .join(", ")
        )),
    }
}

/// Checks a session's input and output against `spec`, naming the declaration's field
/// (`input_size`, `layout`, `input_name`, `output_name`, `labels`) that does not match: from
/// the model's declared shapes, and where the output's shape leaves its length open, by a
/// trial run over blank images (one, and two when the batch is dynamic).
pub fn check_outlets(session: &mut Session, spec: &ImageModelSpec) -> Result<(), String> {
    let (input_name, input_shape) = float_outlet(session.inputs(), spec.input_name, "input")?;
    let [height, width, channels] = spec.input_hwc;
    let declared = spec.layout.shape(0, spec.input_hwc);
    let fits = input_shape.len() == 4
        && input_shape[1..]
            .iter()
            .zip(&declared[1..])
            .all(|(&dim, &want)| dim < 0 || dim as usize == want);
    if !fits {
        return Err(format!(
            "input_size [{height}, {width}] and layout {} ({channels} channels) do not match input '{input_name}' of shape {input_shape:?}",
            spec.layout.as_str()
        ));
    }
    if input_shape[0] == 0 || input_shape[0] > 1 {
        return Err(format!(
            "input '{input_name}' has a fixed batch of {}: its first dimension must be dynamic (images run in batches) or 1 (one at a time)",
            input_shape[0]
        ));
    }
    let (output_name, output_shape) = float_outlet(session.outputs(), spec.output_name, "output")?;
    let per_image = &output_shape[1.min(output_shape.len())..];
    let known = per_image.iter().all(|&dim| dim >= 0);
    let columns: i64 = per_image.iter().product();
    if output_shape.is_empty() || (known && columns != spec.output_columns as i64) {
        return Err(format!(
            "labels: {} declared, but output '{output_name}' of shape {output_shape:?} has {} values per image",
            spec.output_columns,
            if known { columns.to_string() } else { "an unknown number of".into() }
        ));
    }
    if known {
        return Ok(());
    }
    let trial_images = if input_shape[0] == 1 { 1 } else { 2 };
    let values = run_raw(session, spec, vec![0.0; trial_images * spec.input_len()])
        .map_err(|error| format!("a trial run on {trial_images} blank images failed: {error}"))?;
    if values.len() != trial_images * spec.output_columns {
        return Err(format!(
            "labels: {} declared, but output '{output_name}' gave {} values for {trial_images} blank images",
            spec.output_columns,
            values.len()
        ));
    }
    Ok(())
}

/// The name and shape of the input (or output: `what`) named `declared`, or of the only one,
/// which must be a tensor of 32-bit floats.
fn float_outlet(
    outlets: &[Outlet],
    declared: &'static str,
    what: &str,
) -> Result<(Cow<'static, str>, Vec<i64>), String> {
    let name = outlet_name(outlets, declared).map_err(|e| format!("{what}_name: {e}"))?;
    let outlet = outlets
        .iter()
        .find(|outlet| outlet.name() == name)
        .ok_or_else(|| format!("{what}_name: the model has no {what} '{name}'"))?;
    let shape = float_tensor(outlet.dtype()).map_err(|e| format!("{what} '{name}': {e}"))?;
    Ok((name, shape))
}

/// The shape of a tensor of 32-bit floats.
fn float_tensor(dtype: &ValueType) -> Result<Vec<i64>, String> {
    match dtype {
        ValueType::Tensor { ty, shape, .. } if *ty == TensorElementType::Float32 => {
            Ok(shape.to_vec())
        }
        other => Err(format!("is {other:?}, not a tensor of 32-bit floats")),
    }
}
