//! Loading the kernel modules and launching one kernel: the launch shape and the launch every
//! wrapper in this directory uses, given the kernel's parameter struct (super::signatures).

use std::any::TypeId;
use std::collections::HashMap;
use std::ffi::c_void;
use std::sync::Arc;

use cudarc::driver::{sys, sys::CUfunction, CudaFunction, CudaModule, CudaStream};

use super::names::{
    decode_shared_bytes, gdn_chunk_prep_shared_bytes, gdn_chunked_shared_bytes,
    moe_tile_down_names, moe_tile_gate_up_names, prefill_tile, DECODE_NAMES, GDN_MAX_DK,
    PREFILL_NAMES, TILE_MMA_SHARED_BYTES,
};
use super::signatures::{
    GdnChunkPrep, GdnChunked, KernelParams, Signature, TileMmaBf16, MAX_PARAMS, SIGNATURES,
};
use crate::kernel_sources::MODULES;
use crate::module_loader;

/// Launch shape of one kernel.
#[derive(Debug, Clone, Copy)]
pub(super) struct Shape {
    pub(super) grid: (u32, u32, u32),
    pub(super) block: u32,
}

/// A one-dimensional grid of `x` blocks.
pub(super) fn grid1(x: usize, block: u32) -> Shape {
    Shape {
        grid: (x as u32, 1, 1),
        block,
    }
}

pub struct Kernels {
    stream: Arc<CudaStream>,
    /// Launch with programmatic stream serialization (sm_90 and later; `FERRITE_PDL=0` turns
    /// it off, for A/B timing).
    programmatic: bool,
    functions: HashMap<&'static str, Loaded>,
    _modules: Vec<Arc<CudaModule>>,
}

/// A kernel found at load, and its row of the signature table.
struct Loaded {
    function: CudaFunction,
    row: &'static Signature,
}

impl Kernels {
    pub fn load(stream: &Arc<CudaStream>) -> anyhow::Result<Kernels> {
        let ctx = stream.context();
        // Every kernel the backend launches, with its row.
        let kernels: Vec<(&'static str, &'static Signature)> = SIGNATURES
            .iter()
            .flat_map(|row| row.names.list().into_iter().map(move |name| (name, row)))
            .collect();
        let mut modules = Vec::new();
        let mut functions = HashMap::new();
        for source in MODULES {
            let module = module_loader::load(ctx, source)?;
            for &(name, row) in &kernels {
                if let Ok(function) = module.load_function(name) {
                    functions.insert(name, Loaded { function, row });
                }
            }
            modules.push(module);
        }
        if let Some((missing, row)) = kernels.iter().find(|(n, _)| !functions.contains_key(n)) {
            anyhow::bail!(
                "kernel `{missing}` of {} is in no loaded module",
                row.describe()
            );
        }
        // Kernels that stage more than the 48 KiB of shared memory a kernel gets without
        // asking: the tile products (dense and the experts'), prefill attention's Q, K and V
        // tiles (up to 68 KiB), and decode attention's two stages of K and V tiles (64 KiB).
        let large_shared = PREFILL_NAMES
            .iter()
            .map(|&(name, head_dim)| (name, prefill_tile(head_dim).1))
            .chain(
                DECODE_NAMES
                    .iter()
                    .map(|&(name, head_dim)| (name, decode_shared_bytes(head_dim))),
            )
            .chain([
                (TileMmaBf16::NAME, TILE_MMA_SHARED_BYTES),
                (GdnChunkPrep::NAME, gdn_chunk_prep_shared_bytes(GDN_MAX_DK)),
                (GdnChunked::NAME, gdn_chunked_shared_bytes(GDN_MAX_DK)),
            ])
            .chain(
                moe_tile_gate_up_names()
                    .into_iter()
                    .chain(moe_tile_down_names())
                    .map(|name| (name, TILE_MMA_SHARED_BYTES)),
            );
        for (name, bytes) in large_shared {
            let f = functions.get(name).ok_or_else(|| {
                anyhow::anyhow!("kernel `{name}` has no row in the signature table")
            })?;
            unsafe {
                sys::cuFuncSetAttribute(
                    f.function.cu_function(),
                    sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                    bytes as i32,
                )
            }
            .result()
            .map_err(|e| anyhow::anyhow!("allowing {name} its shared memory: {e}"))?;
        }
        let major =
            ctx.attribute(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?;
        let programmatic = major >= 9 && std::env::var("FERRITE_PDL").map_or(true, |v| v != "0");
        Ok(Kernels {
            stream: stream.clone(),
            programmatic,
            functions,
            _modules: modules,
        })
    }

    /// The kernel `params` launches, checked to be one of its row's.
    fn function<P: KernelParams>(&self, params: &P) -> anyhow::Result<CUfunction> {
        let name = params.kernel();
        let loaded = self
            .functions
            .get(name)
            .ok_or_else(|| anyhow::anyhow!("no kernel named {name}"))?;
        anyhow::ensure!(
            (loaded.row.struct_type)() == TypeId::of::<P>(),
            "{name}, a kernel of {}, launched with the parameters of {}",
            loaded.row.describe(),
            std::any::type_name::<P>()
        );
        Ok(loaded.function.cu_function())
    }

    pub(super) fn launch(&self, shape: Shape, params: &impl KernelParams) -> anyhow::Result<()> {
        self.launch_with_shared(shape, 0, params)
    }

    /// [`Kernels::launch`] with `shared_bytes` of dynamic shared memory.
    pub(super) fn launch_with_shared(
        &self,
        shape: Shape,
        shared_bytes: u32,
        params: &impl KernelParams,
    ) -> anyhow::Result<()> {
        self.launch_inner(shape, shared_bytes, params, self.programmatic)
    }

    /// [`Kernels::launch`] without overlapping the previous kernel: for a kernel that reads,
    /// before its wait, memory the previous kernel writes (the GEMVs' first weight loads, on a
    /// slab the dequantizer has just written).
    pub(super) fn launch_after_previous(
        &self,
        shape: Shape,
        params: &impl KernelParams,
    ) -> anyhow::Result<()> {
        self.launch_inner(shape, 0, params, false)
    }

    fn launch_inner<P: KernelParams>(
        &self,
        shape: Shape,
        shared_bytes: u32,
        params: &P,
        overlap: bool,
    ) -> anyhow::Result<()> {
        let name = params.kernel();
        let function = self.function(params)?;
        let args = params
            .args()
            .map_err(|e| anyhow::anyhow!("launching {name}: {e}"))?;
        let (mut slots, len) = args.into_slots();
        let mut pointers = [std::ptr::null_mut::<c_void>(); MAX_PARAMS];
        for (p, slot) in pointers.iter_mut().zip(slots.iter_mut()).take(len) {
            *p = slot as *mut u64 as *mut c_void;
        }
        // With programmatic dependent launch this kernel may be scheduled while the previous
        // one drains; it waits for it inside (pdl_wait in kernels/common.cuh).
        let mut attr = sys::CUlaunchAttribute {
            id: sys::CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION,
            pad: [0; 4],
            value: unsafe { std::mem::zeroed() },
        };
        attr.value.programmaticStreamSerializationAllowed = 1;
        let config = sys::CUlaunchConfig {
            gridDimX: shape.grid.0,
            gridDimY: shape.grid.1,
            gridDimZ: shape.grid.2,
            blockDimX: shape.block,
            blockDimY: 1,
            blockDimZ: 1,
            sharedMemBytes: shared_bytes,
            hStream: self.stream.cu_stream(),
            attrs: &mut attr,
            numAttrs: u32::from(overlap),
        };
        unsafe {
            sys::cuLaunchKernelEx(
                &config,
                function,
                pointers.as_mut_ptr(),
                std::ptr::null_mut(),
            )
        }
        .result()
        .map_err(|e| anyhow::anyhow!("launching {name}: {e}"))
    }

    /// Registers, local (spill) bytes and static shared memory of a kernel, for the logs.
    pub fn resources(&self, name: &str) -> anyhow::Result<(i32, i32, i32)> {
        let f = self
            .functions
            .get(name)
            .ok_or_else(|| anyhow::anyhow!("no kernel named {name}"))?;
        let f = &f.function;
        Ok((f.num_regs()?, f.local_size_bytes()?, f.shared_size_bytes()?))
    }

    /// Blocks of `block` threads and `shared_bytes` of dynamic shared memory that one
    /// multiprocessor holds at once for kernel `name`.
    pub(super) fn occupancy(
        &self,
        name: &str,
        block: u32,
        shared_bytes: u32,
    ) -> anyhow::Result<usize> {
        let f = self
            .functions
            .get(name)
            .ok_or_else(|| anyhow::anyhow!("no kernel named {name}"))?;
        let blocks = f.function.occupancy_max_active_blocks_per_multiprocessor(
            block,
            shared_bytes as usize,
            None,
        )?;
        Ok(blocks as usize)
    }
}
