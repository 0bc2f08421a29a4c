//! Reading a layer's tensors as its spec names and shapes them, into the forms the forward
//! pass holds: matrices as stored (`QuantMatrix`), vectors and norms in f32 (the plan's norm
//! offset added).

use ferrite_model::plan::LayerSpec;
use ferrite_model::tensor_names::LayerTensor;
use ferrite_model::weights::{ModelWeights as LoadedWeights, WeightTensor};

use crate::kernels::quant_matrix::{load_matrix as matrix, QuantMatrix};
use crate::quant::dequantize_row;

/// The tensors of one layer, read as its spec names and shapes them.
pub(crate) struct LayerReader<'a> {
    pub(crate) weights: &'a LoadedWeights,
    pub(crate) spec: &'a LayerSpec,
    pub(crate) norm_offset: f32,
}

impl LayerReader<'_> {
    pub(crate) fn matrix(&self, t: LayerTensor) -> anyhow::Result<QuantMatrix> {
        let spec = self.spec.required(t)?;
        matrix(self.weights, &spec.name, spec.rows(), spec.cols())
    }
    pub(crate) fn vector(&self, t: LayerTensor) -> anyhow::Result<Vec<f32>> {
        let spec = self.spec.required(t)?;
        vector(self.weights, &spec.name, spec.len())
    }
    pub(crate) fn norm(&self, t: LayerTensor) -> anyhow::Result<Vec<f32>> {
        let spec = self.spec.required(t)?;
        norm(self.weights, &spec.name, spec.len(), self.norm_offset)
    }
}

pub(crate) fn vector(weights: &LoadedWeights, name: &str, len: usize) -> anyhow::Result<Vec<f32>> {
    let tensor: &WeightTensor = weights.get(name)?;
    if tensor.shape.iter().product::<usize>() != len {
        anyhow::bail!("{name} has shape {:?}, the config says {len}", tensor.shape);
    }
    let mut out = vec![0.0; len];
    dequantize_row(tensor.dtype, tensor.storage.bytes(), &mut out)
        .map_err(|e| anyhow::anyhow!("{name}: {e}"))?;
    Ok(out)
}

/// An RMSNorm weight with the plan's offset added (gemma stores `w` for a scale of `1 + w`),
/// in f32 as transformers adds it.
pub(crate) fn norm(
    weights: &LoadedWeights,
    name: &str,
    len: usize,
    offset: f32,
) -> anyhow::Result<Vec<f32>> {
    let mut w = vector(weights, name, len)?;
    if offset != 0.0 {
        w.iter_mut().for_each(|w| *w += offset);
    }
    Ok(w)
}
