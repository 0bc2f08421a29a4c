//! Tensors rewritten at load by a family whose files store them otherwise than the layer plan
//! names them: rows gathered from stored matrices (in their own format, no conversion), and
//! small f32 tensors computed from stored ones.

use std::sync::Arc;

use crate::hf::HfError;
use crate::quant::DType;
use crate::tensor_names::LayerTensor;
use crate::weights::{ModelWeights, Storage, WeightTensor};

/// Rows gathered from matrices in their stored format (no conversion: a row of any format
/// is whole blocks).
pub(crate) struct Rows {
    pub(crate) dtype: DType,
    pub(crate) rows: usize,
    pub(crate) bytes: Vec<u8>,
}

impl Rows {
    pub(crate) fn of(source: &WeightTensor) -> Rows {
        Rows {
            dtype: source.dtype,
            rows: 0,
            bytes: Vec::new(),
        }
    }
    /// Appends rows `from..from + count` of `source` (rows of its last dimension).
    pub(crate) fn take(&mut self, source: &WeightTensor, from: usize, count: usize) {
        let cols = source.shape.last().copied().unwrap_or(0);
        let row_bytes = source.dtype.row_bytes(cols);
        let bytes = source.storage.bytes();
        self.bytes
            .extend_from_slice(&bytes[from * row_bytes..(from + count) * row_bytes]);
        self.rows += count;
    }
    pub(crate) fn tensor(self, cols: usize) -> WeightTensor {
        WeightTensor {
            dtype: self.dtype,
            shape: vec![self.rows, cols],
            storage: Storage::Owned(Arc::new(self.bytes)),
        }
    }
}

/// An f32 tensor of `values`.
pub(crate) fn f32_tensor(shape: Vec<usize>, values: &[f32]) -> WeightTensor {
    let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
    WeightTensor {
        dtype: DType::F32,
        shape,
        storage: Storage::Owned(Arc::new(bytes)),
    }
}

/// Stacked `gate_up_proj` `[experts, 2 * width, hidden]`: each expert's gate rows, then its
/// up rows (transformers chunks the product in two).
pub(crate) fn split_gate_up(
    layer: usize,
    gate_up: &WeightTensor,
    weights: &mut ModelWeights,
) -> Result<(), HfError> {
    let [experts, rows, hidden] = gate_up.shape[..] else {
        return Err(HfError::Weights(format!(
            "layer {layer}: experts.gate_up_proj has shape {:?}",
            gate_up.shape
        )));
    };
    let width = rows / 2;
    let (mut gate, mut up) = (Rows::of(gate_up), Rows::of(gate_up));
    for e in 0..experts {
        gate.take(gate_up, e * rows, width);
        up.take(gate_up, e * rows + width, width);
    }
    let out = &mut weights.tensors;
    let stacked = |r: Rows| WeightTensor {
        shape: vec![experts, width, hidden],
        ..r.tensor(hidden)
    };
    out.insert(LayerTensor::FfnGateExps.of(layer), stacked(gate));
    out.insert(LayerTensor::FfnUpExps.of(layer), stacked(up));
    Ok(())
}
