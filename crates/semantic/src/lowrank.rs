//! A tuned encoder rebuilt from its difference with a base model.
//!
//! A model tuned with a low-rank update of its linear layers (the larger
//! tuned encoder, all-mpnet-base-v2; `research/tuned-encoder/lowrank.py`
//! splits it) ships as
//! three small parts instead of its full weights: the ONNX graph with every
//! weight left out, the update's two factors per layer (a safetensors file,
//! half or single precision), and a manifest naming where each of the
//! graph's weights comes from. [`rebuild`] puts the model back together
//! from those and the base's own safetensors (which a package registry
//! serves pinned): each weight is the base's tensor, plus `B · A` when it
//! has an update, transposed when the graph stores it so, appended to its
//! place in the graph's protobuf as `raw_data`.
//!
//! `FastEmbedder::tuned_mpnet` loads the larger tuned encoder this way
//! (the repository's `models/tuned-encoder/README.md`). The protobuf is walked, not
//! decoded: fields other than the graph's weights are copied byte for
//! byte, so nothing of the graph is lost or reordered.

use std::collections::HashMap;

use half::f16;
use ndarray::Array2;
use safetensors::{Dtype, SafeTensors};
use serde::Deserialize;

/// Where one of the graph's weights comes from (one entry of the
/// manifest `lowrank.py split` writes).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct WeightSource {
    /// The weight's name in the ONNX graph (its initializer's name).
    pub name: String,
    /// The base's tensor it is made from, by its name in the base's
    /// safetensors (and, with `.lora_a` / `.lora_b` appended, its update's
    /// factors).
    pub source: String,
    /// The graph stores the tensor transposed (a linear layer's weight as
    /// a `MatMul` operand).
    #[serde(default)]
    pub transpose: bool,
    /// The tensor has a low-rank update: `source.lora_b · source.lora_a`,
    /// added before any transpose.
    #[serde(default)]
    pub low_rank: bool,
}

/// Why a model could not be rebuilt.
#[derive(Debug, thiserror::Error)]
pub enum LowRankError {
    /// The graph file is not a protobuf message as ONNX writes one.
    #[error("the ONNX graph is malformed at byte {offset}: {detail}")]
    MalformedGraph {
        /// Where in the enclosing message it went wrong.
        offset: usize,
        /// What was wrong there.
        detail: String,
    },
    /// A weight of the graph has no data and no entry in the manifest.
    #[error("the graph's weight {name:?} is not in the manifest")]
    NotInManifest {
        /// The weight's name in the graph.
        name: String,
    },
    /// A tensor the manifest names is not in the file it should be in.
    #[error("{file} has no tensor {tensor:?} (for the graph's weight {name:?})")]
    MissingTensor {
        /// "the base" or "the low-rank update".
        file: &'static str,
        /// The tensor looked for.
        tensor: String,
        /// The graph weight it was for.
        name: String,
    },
    /// A tensor's shape or type does not fit what it is used for.
    #[error("the graph's weight {name:?}: {detail}")]
    Mismatch {
        /// The weight's name in the graph.
        name: String,
        /// What does not fit.
        detail: String,
    },
    /// A safetensors file could not be read.
    #[error("{file} is not a readable safetensors file: {detail}")]
    Safetensors {
        /// "the base" or "the low-rank update".
        file: &'static str,
        /// The reader's message.
        detail: String,
    },
}

/// The manifest's entries, from its JSON (`lowrank.py split`'s
/// `manifest.json`: an array of [`WeightSource`]).
pub fn read_manifest(json: &[u8]) -> Result<Vec<WeightSource>, serde_json::Error> {
    serde_json::from_slice(json)
}

/// The full ONNX model: `graph`'s bytes with each weight the manifest
/// names filled in from `base` (the base model's safetensors bytes) and
/// `factors` (the low-rank factors' safetensors bytes).
///
/// A weight that already carries data in the graph is kept as it is.
pub fn rebuild(
    graph: &[u8],
    manifest: &[WeightSource],
    base: &[u8],
    factors: &[u8],
) -> Result<Vec<u8>, LowRankError> {
    // The rebuilt model is about the graph plus the base's weights.
    let capacity = graph.len() + base.len();
    let base = SafeTensors::deserialize(base).map_err(|e| LowRankError::Safetensors {
        file: "the base",
        detail: e.to_string(),
    })?;
    let factors = SafeTensors::deserialize(factors).map_err(|e| LowRankError::Safetensors {
        file: "the low-rank update",
        detail: e.to_string(),
    })?;
    let by_name: HashMap<&str, &WeightSource> = manifest
        .iter()
        .map(|entry| (entry.name.as_str(), entry))
        .collect();
    let mut model = Vec::with_capacity(capacity);
    for field in fields(graph)? {
        let Some(payload) = field.payload.filter(|_| field.number == MODEL_GRAPH) else {
            model.extend_from_slice(field.written);
            continue;
        };
        // The graph's length goes before it but is known only once it is
        // written: room for the longest length, the graph, then the length
        // and the graph moved up to it in place, so the model (hundreds of
        // MB) is never held twice.
        write_varint(&mut model, u64::from(MODEL_GRAPH) << 3 | 2);
        let length_at = model.len();
        model.extend_from_slice(&[0; MAX_VARINT_BYTES]);
        let start = model.len();
        for inner in fields(payload)? {
            match inner.payload.filter(|_| inner.number == GRAPH_INITIALIZER) {
                Some(tensor) => model.extend(with_data(tensor, &by_name, &base, &factors)?),
                None => model.extend_from_slice(inner.written),
            }
        }
        let length = model.len() - start;
        let mut varint = Vec::with_capacity(MAX_VARINT_BYTES);
        write_varint(&mut varint, length as u64);
        let graph_at = length_at + varint.len();
        model[length_at..graph_at].copy_from_slice(&varint);
        model.copy_within(start.., graph_at);
        model.truncate(graph_at + length);
    }
    Ok(model)
}

/// The longest varint: 64 bits, 7 a byte.
const MAX_VARINT_BYTES: usize = 10;

/// `ModelProto.graph`.
const MODEL_GRAPH: u32 = 7;
/// `GraphProto.initializer`.
const GRAPH_INITIALIZER: u32 = 5;
/// `TensorProto.dims`.
const TENSOR_DIMS: u32 = 1;
/// `TensorProto.data_type`.
const TENSOR_DATA_TYPE: u32 = 2;
/// `TensorProto.name`.
const TENSOR_NAME: u32 = 8;
/// `TensorProto.raw_data`.
const TENSOR_RAW_DATA: u32 = 9;
/// `TensorProto`'s typed data fields (float, int32, string, int64,
/// double, uint64) and `external_data`: a tensor with any of them has data.
const TENSOR_DATA_FIELDS: [u32; 7] = [4, 5, 6, 7, 10, 11, 13];

/// One initializer, as a `GraphProto.initializer` field with its data.
fn with_data(
    tensor: &[u8],
    by_name: &HashMap<&str, &WeightSource>,
    base: &SafeTensors<'_>,
    factors: &SafeTensors<'_>,
) -> Result<Vec<u8>, LowRankError> {
    let mut name = None;
    let mut dims = Vec::new();
    let mut data_type = None;
    let mut has_data = false;
    for field in fields(tensor)? {
        match (field.number, field.payload) {
            (TENSOR_NAME, Some(text)) => name = Some(String::from_utf8_lossy(text).into_owned()),
            (TENSOR_DIMS, Some(packed)) => {
                let mut at = 0;
                while at < packed.len() {
                    let (value, next) = read_varint(packed, at)?;
                    dims.push(value);
                    at = next;
                }
            }
            (TENSOR_DIMS, None) => dims.push(read_varint(field.written, 1)?.0),
            (TENSOR_DATA_TYPE, None) => data_type = Some(read_varint(field.written, 1)?.0),
            (number, _) if number == TENSOR_RAW_DATA || TENSOR_DATA_FIELDS.contains(&number) => {
                has_data = true
            }
            _ => {}
        }
    }
    let mut out = Vec::with_capacity(tensor.len() + 16);
    if has_data {
        write_length_delimited(&mut out, GRAPH_INITIALIZER, tensor);
        return Ok(out);
    }
    let name = name.unwrap_or_default();
    let entry = by_name
        .get(name.as_str())
        .ok_or_else(|| LowRankError::NotInManifest { name: name.clone() })?;
    let (shape, dtype, data) = weight(entry, base, factors)?;
    let expected: Vec<u64> = shape.iter().map(|&d| d as u64).collect();
    if expected != dims {
        return Err(LowRankError::Mismatch {
            name,
            detail: format!(
                "the graph wants shape {dims:?}, the manifest's source makes {expected:?}"
            ),
        });
    }
    if data_type.is_none() || onnx_data_type(dtype) != data_type {
        return Err(LowRankError::Mismatch {
            name,
            detail: format!(
                "the graph wants ONNX data type {}, the manifest's source is {dtype:?}",
                data_type.map_or("(none)".to_string(), |t| t.to_string())
            ),
        });
    }
    let mut filled = tensor.to_vec();
    write_length_delimited(&mut filled, TENSOR_RAW_DATA, &data);
    write_length_delimited(&mut out, GRAPH_INITIALIZER, &filled);
    Ok(out)
}

/// ONNX's `TensorProto.DataType` for a safetensors type, if it has one.
fn onnx_data_type(dtype: Dtype) -> Option<u64> {
    Some(match dtype {
        Dtype::F32 => 1,
        Dtype::U8 => 2,
        Dtype::I8 => 3,
        Dtype::U16 => 4,
        Dtype::I16 => 5,
        Dtype::I32 => 6,
        Dtype::I64 => 7,
        Dtype::BOOL => 9,
        Dtype::F16 => 10,
        Dtype::F64 => 11,
        Dtype::U32 => 12,
        Dtype::U64 => 13,
        Dtype::BF16 => 16,
        _ => return None,
    })
}

/// A weight's shape, type and little-endian bytes, as the graph stores it.
fn weight(
    entry: &WeightSource,
    base: &SafeTensors<'_>,
    factors: &SafeTensors<'_>,
) -> Result<(Vec<usize>, Dtype, Vec<u8>), LowRankError> {
    let view = base
        .tensor(&entry.source)
        .map_err(|_| LowRankError::MissingTensor {
            file: "the base",
            tensor: entry.source.clone(),
            name: entry.name.clone(),
        })?;
    if !entry.low_rank && !entry.transpose {
        return Ok((view.shape().to_vec(), view.dtype(), view.data().to_vec()));
    }
    let mismatch = |detail: String| LowRankError::Mismatch {
        name: entry.name.clone(),
        detail,
    };
    let (rows, columns) = match (view.dtype(), view.shape()) {
        (Dtype::F32, &[rows, columns]) => (rows, columns),
        (dtype, shape) => {
            return Err(mismatch(format!(
                "a low-rank update or a transpose needs an F32 matrix, the base's {:?} is {dtype:?} {shape:?}",
                entry.source
            )));
        }
    };
    let mut matrix = Array2::from_shape_vec((rows, columns), floats(view.dtype(), view.data()))
        .map_err(|e| mismatch(e.to_string()))?;
    if entry.low_rank {
        let factor = |suffix: &str| -> Result<Array2<f32>, LowRankError> {
            let tensor = format!("{}.{suffix}", entry.source);
            let view = factors
                .tensor(&tensor)
                .map_err(|_| LowRankError::MissingTensor {
                    file: "the low-rank update",
                    tensor: tensor.clone(),
                    name: entry.name.clone(),
                })?;
            match (view.dtype(), view.shape()) {
                (Dtype::F16 | Dtype::F32, &[r, c]) => {
                    Array2::from_shape_vec((r, c), floats(view.dtype(), view.data()))
                        .map_err(|e| mismatch(e.to_string()))
                }
                (dtype, shape) => Err(mismatch(format!(
                    "the factor {tensor:?} must be an F16 or F32 matrix, not {dtype:?} {shape:?}"
                ))),
            }
        };
        let (b, a) = (factor("lora_b")?, factor("lora_a")?);
        if b.nrows() != rows || a.ncols() != columns || b.ncols() != a.nrows() {
            return Err(mismatch(format!(
                "factors {:?} and {:?} do not update a {rows}x{columns} matrix",
                b.dim(),
                a.dim()
            )));
        }
        matrix += &b.dot(&a);
    }
    let (matrix, shape) = if entry.transpose {
        (matrix.reversed_axes(), vec![columns, rows])
    } else {
        (matrix, vec![rows, columns])
    };
    let bytes = matrix
        .as_standard_layout()
        .iter()
        .flat_map(|value| value.to_le_bytes())
        .collect();
    Ok((shape, Dtype::F32, bytes))
}

/// Little-endian F16 or F32 bytes as floats (other types are never
/// passed here).
fn floats(dtype: Dtype, data: &[u8]) -> Vec<f32> {
    match dtype {
        Dtype::F16 => data
            .chunks_exact(2)
            .map(|b| f16::from_le_bytes([b[0], b[1]]).to_f32())
            .collect(),
        _ => data
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect(),
    }
}

/// One field of a protobuf message.
struct Field<'a> {
    /// Its field number.
    number: u32,
    /// The field as written: key, and value or length and payload.
    written: &'a [u8],
    /// A length-delimited field's payload.
    payload: Option<&'a [u8]>,
}

/// The fields of one protobuf message, in order.
fn fields(message: &[u8]) -> Result<Vec<Field<'_>>, LowRankError> {
    let mut found = Vec::new();
    let mut at = 0;
    while at < message.len() {
        let start = at;
        let (key, next) = read_varint(message, at)?;
        at = next;
        let number =
            u32::try_from(key >> 3).map_err(|_| malformed(start, "a field number too large"))?;
        let mut payload = None;
        match key & 7 {
            0 => at = read_varint(message, at)?.1,
            1 => at += 8,
            5 => at += 4,
            2 => {
                let (length, begin) = read_varint(message, at)?;
                let end = usize::try_from(length)
                    .ok()
                    .and_then(|length| begin.checked_add(length))
                    .filter(|&end| end <= message.len())
                    .ok_or_else(|| malformed(start, "a length past the end"))?;
                payload = Some(&message[begin..end]);
                at = end;
            }
            wire => return Err(malformed(start, &format!("wire type {wire}"))),
        }
        if at > message.len() {
            return Err(malformed(start, "a value past the end"));
        }
        found.push(Field {
            number,
            written: &message[start..at],
            payload,
        });
    }
    Ok(found)
}

fn malformed(offset: usize, detail: &str) -> LowRankError {
    LowRankError::MalformedGraph {
        offset,
        detail: detail.to_string(),
    }
}

/// A varint at `at`: its value and the offset after it.
fn read_varint(buffer: &[u8], mut at: usize) -> Result<(u64, usize), LowRankError> {
    let start = at;
    let mut value = 0u64;
    for shift in (0..64).step_by(7) {
        let byte = *buffer
            .get(at)
            .ok_or_else(|| malformed(start, "a varint cut short"))?;
        at += 1;
        value |= u64::from(byte & 0x7f) << shift;
        if byte < 0x80 {
            return Ok((value, at));
        }
    }
    Err(malformed(start, "a varint longer than ten bytes"))
}

fn write_varint(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push((value as u8 & 0x7f) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

/// Appends a length-delimited field.
fn write_length_delimited(out: &mut Vec<u8>, number: u32, payload: &[u8]) {
    write_varint(out, u64::from(number) << 3 | 2);
    write_varint(out, payload.len() as u64);
    out.extend_from_slice(payload);
}

#[cfg(test)]
mod tests {
    use super::*;
    use safetensors::tensor::TensorView;

    /// A tiny ONNX model, `y = x · w` with `w` a 3x2 weight left out
    /// (and a 1-element weight `keep` that carries its own data), as
    /// `lowrank.py split` would write one.
    fn matmul_graph() -> Vec<u8> {
        let string = |number, text: &str| {
            let mut out = Vec::new();
            write_length_delimited(&mut out, number, text.as_bytes());
            out
        };
        let varint_field = |number: u32, value: u64| {
            let mut out = Vec::new();
            write_varint(&mut out, u64::from(number) << 3);
            write_varint(&mut out, value);
            out
        };
        let message = |number, parts: &[Vec<u8>]| {
            let mut out = Vec::new();
            write_length_delimited(&mut out, number, &parts.concat());
            out
        };
        // ValueInfoProto { name, type: TypeProto { tensor_type { elem_type: FLOAT, shape } } }
        let value_info = |number, name: &str, dims: &[u64]| {
            let dims: Vec<Vec<u8>> = dims
                .iter()
                .map(|&d| message(1, &[varint_field(1, d)]))
                .collect();
            let tensor_type = message(1, &[varint_field(1, 1), message(2, &dims)]);
            message(number, &[string(1, name), message(2, &[tensor_type])])
        };
        let node = message(
            1,
            &[
                string(1, "x"),
                string(1, "w"),
                string(2, "y"),
                string(4, "MatMul"),
            ],
        );
        // w: dims [3, 2] unpacked, FLOAT, no data.
        let w = message(
            5,
            &[
                varint_field(1, 3),
                varint_field(1, 2),
                varint_field(2, 1),
                string(8, "w"),
            ],
        );
        let mut keep_data = Vec::new();
        write_length_delimited(&mut keep_data, TENSOR_RAW_DATA, &1.5f32.to_le_bytes());
        let keep = message(
            5,
            &[
                varint_field(1, 1),
                varint_field(2, 1),
                string(8, "keep"),
                keep_data,
            ],
        );
        let graph = message(
            7,
            &[
                node,
                string(2, "tiny"),
                w,
                keep,
                value_info(11, "x", &[1, 3]),
                value_info(12, "y", &[1, 2]),
            ],
        );
        let opset = message(8, &[string(1, ""), varint_field(2, 17)]);
        [varint_field(1, 8), graph, opset].concat()
    }

    /// Safetensors bytes of named F32 or F16 matrices.
    fn safetensors_of(tensors: &[(&str, Dtype, Vec<usize>, Vec<f32>)]) -> Vec<u8> {
        let bytes: Vec<(String, Dtype, Vec<usize>, Vec<u8>)> = tensors
            .iter()
            .map(|(name, dtype, shape, values)| {
                let data = match dtype {
                    Dtype::F16 => values
                        .iter()
                        .flat_map(|v| f16::from_f32(*v).to_le_bytes())
                        .collect(),
                    _ => values.iter().flat_map(|v| v.to_le_bytes()).collect(),
                };
                (name.to_string(), *dtype, shape.clone(), data)
            })
            .collect();
        let views: Vec<(String, TensorView<'_>)> = bytes
            .iter()
            .map(|(name, dtype, shape, data)| {
                let view = TensorView::new(*dtype, shape.clone(), data).expect("a valid tensor");
                (name.clone(), view)
            })
            .collect();
        safetensors::serialize(views, None).expect("serializable tensors")
    }

    /// The linear layer's weight as the base stores it (out 2, in 3), and
    /// a rank-1 update: the graph wants (W + b·a) transposed.
    fn base_and_factors() -> (Vec<u8>, Vec<u8>) {
        let base = safetensors_of(&[(
            "dense.weight",
            Dtype::F32,
            vec![2, 3],
            vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0],
        )]);
        let factors = safetensors_of(&[
            (
                "dense.weight.lora_b",
                Dtype::F16,
                vec![2, 1],
                vec![1.0, -1.0],
            ),
            (
                "dense.weight.lora_a",
                Dtype::F16,
                vec![1, 3],
                vec![0.5, 0.25, 0.125],
            ),
        ]);
        (base, factors)
    }

    fn manifest() -> Vec<WeightSource> {
        read_manifest(
            br#"[{"name": "w", "source": "dense.weight", "transpose": true, "low_rank": true}]"#,
        )
        .expect("a valid manifest")
    }

    /// The data of the named initializer of a rebuilt model.
    fn raw_data_of(model: &[u8], name: &str) -> Option<Vec<u8>> {
        let graph = fields(model)
            .ok()?
            .into_iter()
            .find(|f| f.number == MODEL_GRAPH)?
            .payload?;
        fields(graph).ok()?.into_iter().find_map(|f| {
            let tensor = f.payload.filter(|_| f.number == GRAPH_INITIALIZER)?;
            let inner = fields(tensor).ok()?;
            let named = inner
                .iter()
                .any(|t| t.number == TENSOR_NAME && t.payload == Some(name.as_bytes()));
            let data = inner
                .iter()
                .find(|t| t.number == TENSOR_RAW_DATA)?
                .payload?;
            named.then(|| data.to_vec())
        })
    }

    #[test]
    fn the_weight_is_the_base_plus_its_update_transposed_and_the_rest_is_kept() {
        let (base, factors) = base_and_factors();
        let graph = matmul_graph();
        let model = rebuild(&graph, &manifest(), &base, &factors).expect("rebuilt");
        let data = raw_data_of(&model, "w").expect("w has data");
        let values = floats(Dtype::F32, &data);
        // W + b·a = [[1.5, 2.25, 3.125], [3.5, 4.75, 5.875]], stored transposed (3x2).
        assert_eq!(values, vec![1.5, 3.5, 2.25, 4.75, 3.125, 5.875]);
        assert_eq!(
            raw_data_of(&model, "keep"),
            Some(1.5f32.to_le_bytes().to_vec())
        );
        // Everything but the graph's weights is copied as written.
        let kept = |bytes: &[u8]| -> Vec<Vec<u8>> {
            let mut out = Vec::new();
            for field in fields(bytes).expect("fields") {
                match field.payload.filter(|_| field.number == MODEL_GRAPH) {
                    Some(graph) => out.extend(
                        fields(graph)
                            .expect("graph fields")
                            .into_iter()
                            .filter(|inner| inner.number != GRAPH_INITIALIZER)
                            .map(|inner| inner.written.to_vec()),
                    ),
                    None => out.push(field.written.to_vec()),
                }
            }
            out
        };
        assert_eq!(kept(&model), kept(&graph));
        // ir_version, the node, the name, x, y and the opset.
        assert_eq!(kept(&graph).len(), 6);
    }

    #[test]
    fn a_weight_without_a_source_or_of_the_wrong_shape_is_an_error_naming_it() {
        let (base, factors) = base_and_factors();
        let graph = matmul_graph();
        let error = rebuild(&graph, &[], &base, &factors).expect_err("no manifest");
        assert_eq!(
            error.to_string(),
            "the graph's weight \"w\" is not in the manifest"
        );

        let mut untransposed = manifest();
        untransposed[0].transpose = false;
        let error = rebuild(&graph, &untransposed, &base, &factors).expect_err("wrong shape");
        assert!(error.to_string().contains("wants shape [3, 2]"), "{error}");

        let mut elsewhere = manifest();
        elsewhere[0].source = "other.weight".into();
        let error = rebuild(&graph, &elsewhere, &base, &factors).expect_err("missing");
        assert!(
            error
                .to_string()
                .starts_with("the base has no tensor \"other.weight\""),
            "{error}"
        );

        let error = rebuild(&graph, &manifest(), &base, &base).expect_err("no factors");
        assert!(
            error.to_string().contains("\"dense.weight.lora_b\""),
            "{error}"
        );

        // The graph's w is FLOAT; a half-precision base tensor of its shape,
        // copied as it is, would be read as other numbers.
        let half_base = safetensors_of(&[("w.half", Dtype::F16, vec![3, 2], vec![1.0; 6])]);
        let copied = read_manifest(br#"[{"name": "w", "source": "w.half"}]"#).expect("a manifest");
        let error = rebuild(&graph, &copied, &half_base, &factors).expect_err("wrong type");
        assert_eq!(
            error.to_string(),
            "the graph's weight \"w\": the graph wants ONNX data type 1, the manifest's source is F16"
        );
    }

    #[test]
    fn a_cut_or_garbled_graph_is_an_error_not_a_panic() {
        let (base, factors) = base_and_factors();
        let graph = matmul_graph();
        for cut in [1, 3, graph.len() / 2, graph.len() - 1] {
            let error = rebuild(&graph[..cut], &manifest(), &base, &factors);
            assert!(
                matches!(error, Err(LowRankError::MalformedGraph { .. })),
                "cut at {cut}: {error:?}"
            );
        }
        let error = rebuild(&[0x0f], &manifest(), &base, &factors).expect_err("wire type 7");
        assert_eq!(
            error.to_string(),
            "the ONNX graph is malformed at byte 0: wire type 7"
        );
        let error = rebuild(&graph, &manifest(), b"not safetensors", &factors).expect_err("base");
        assert!(
            error
                .to_string()
                .starts_with("the base is not a readable safetensors file")
        );
    }
}
