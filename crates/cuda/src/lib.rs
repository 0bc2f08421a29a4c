//! ferrite's CUDA backend: weights in one device arena (bf16, or GGUF quantized formats kept in
//! their own bits), a preallocated paged KV cache,
//! CUDA C++ kernels (kernels/*.cu: paged flash-decoding and prefill attention, fused norms,
//! RoPE + KV write, SwiGLU, GEMV, mixture-of-experts routing and grouped expert products,
//! sampling) with cuBLAS GEMMs (cuBLASLt FP8 ones for FP8 weights), decode steps replayed as CUDA
//! graphs, and next-token sampling on the device.
//!
//! Built into every ferrite binary: cudarc loads the CUDA libraries at run time, so a machine
//! without CUDA builds and runs ferrite on the CPU backend; `--device cuda` opens a GPU.

pub mod backend;
pub mod buffer;
pub mod device;
pub mod device_ptr;
pub mod expert_load;
pub mod forward;
pub mod fp8_gemm;
pub mod gemm;
pub mod graphs;
pub mod kernel_sources;
pub mod kv_cache;
pub mod launchers;
pub mod linear;
pub mod module_loader;
pub mod moe_mlp;
pub mod quant;
pub mod state_rewind;
pub mod step_inputs;
pub mod warm_up;
pub mod weights;
pub mod workspace;

pub use backend::{CudaBackend, CudaOptions};
pub use device_ptr::DevicePtr;
pub use weights::WeightSource;
