//! GGUF files: parsed in place over a memory map, tensors handed out as `Storage::Mapped`
//! slices (no copy).

mod metadata;
mod model_config;
mod moe_config;
mod reader;

use std::path::Path;
use std::sync::Arc;

pub use metadata::{MetaValue, Metadata};
pub use model_config::GgufConfig;
pub use reader::{GgufHeader, TensorInfo};

use crate::mapping::{map_file, MapPages};
use crate::weights::{ModelWeights, Storage, WeightTensor};

#[derive(Debug, thiserror::Error)]
pub enum GgufError {
    #[error("cannot read {path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    #[error("not a GGUF file: magic bytes are {0:?}, expected \"GGUF\"")]
    BadMagic([u8; 4]),
    #[error("GGUF version {0} is not supported (1, 2 and 3 are)")]
    UnsupportedVersion(u32),
    #[error("GGUF file is truncated: {what} runs past the end (at offset {offset}, file is {file_len} bytes)")]
    Truncated {
        what: String,
        offset: usize,
        file_len: usize,
    },
    #[error("tensor `{tensor}` has GGML type id {type_id}, which ferrite does not support")]
    UnknownType { tensor: String, type_id: u32 },
    #[error("GGUF metadata key `{0}` is missing")]
    MissingKey(String),
    #[error("GGUF metadata key `{key}` should be {expected}, found {found}")]
    WrongType {
        key: String,
        expected: &'static str,
        found: &'static str,
    },
    #[error("architecture {0}")]
    UnsupportedArch(String),
    #[error("unsupported GGUF model: {0}")]
    Unsupported(String),
    #[error("corrupt GGUF file: {0}")]
    Corrupt(String),
}

/// An open GGUF file: its metadata and the memory map its tensors point into.
pub struct GgufFile {
    pub header: GgufHeader,
    map: Arc<memmap2::Mmap>,
}

impl GgufFile {
    pub fn open(path: &Path) -> Result<GgufFile, GgufError> {
        Self::open_with(path, MapPages::Plain)
    }

    /// Opens `path` with its weights mapped in `pages` (see `mapping`).
    pub fn open_with(path: &Path, pages: MapPages) -> Result<GgufFile, GgufError> {
        let io = |source| GgufError::Io {
            path: path.display().to_string(),
            source,
        };
        let file = std::fs::File::open(path).map_err(io)?;
        let map = map_file(path, &file, pages).map_err(io)?;
        Self::from_map(Arc::new(map))
    }

    pub fn from_map(map: Arc<memmap2::Mmap>) -> Result<GgufFile, GgufError> {
        let header = reader::parse(&map)?;
        Ok(GgufFile { header, map })
    }

    pub fn metadata(&self) -> &Metadata {
        &self.header.metadata
    }

    /// The metadata and tensor list a family reads its config from (`crate::load::gguf_config`
    /// picks the family).
    pub fn config_fields(&self) -> GgufConfig<'_> {
        GgufConfig {
            meta: &self.header.metadata,
            tensors: &self.header.tensors,
        }
    }

    /// Every tensor, shaped `[rows, cols]` (GGUF's dims reversed), backed by the map.
    pub fn weights(&self) -> ModelWeights {
        let tensors = self
            .header
            .tensors
            .iter()
            .map(|info| {
                let shape = info.dims.iter().rev().map(|&d| d as usize).collect();
                let storage = Storage::Mapped {
                    map: Arc::clone(&self.map),
                    offset: info.offset,
                    len: info.len,
                };
                (
                    info.name.clone(),
                    WeightTensor {
                        dtype: info.dtype,
                        shape,
                        storage,
                    },
                )
            })
            .collect();
        ModelWeights { tensors }
    }
}

#[cfg(test)]
mod tests;
