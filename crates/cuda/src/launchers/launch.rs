//! Loading the kernel modules and launching one kernel: the argument packing and launch shape
//! every wrapper in this directory uses.

use std::collections::HashMap;
use std::ffi::c_void;
use std::sync::Arc;

use cudarc::driver::{sys, sys::CUfunction, CudaFunction, CudaModule, CudaStream};

use super::names::{
    decode_shared_bytes, ordered_qgemv_names, prefill_tile, quant_names, DECODE_NAMES,
    FP8_MMA_NAMES, GEMV_MMA_NAMES, GEMV_NAMES, MOE_DOWN_NAMES, MOE_GATE_UP_NAMES, NAMES,
    PREFILL_NAMES, QMMA_NAMES, TILE_MMA_NAME, TILE_MMA_SHARED_BYTES,
};
use crate::device_ptr::DevicePtr;
use crate::kernel_sources::MODULES;
use crate::module_loader;

/// Up to 16 kernel arguments, each stored in an 8-byte slot (the driver reads each parameter's
/// own size from the front of its slot: little-endian, so narrower values sit there). Pushed
/// in the order of the kernel's parameters.
pub(super) struct Args {
    slots: [u64; 16],
    len: usize,
}

impl Args {
    pub(super) fn new() -> Self {
        Args {
            slots: [0; 16],
            len: 0,
        }
    }
    fn push(mut self, bits: u64) -> Self {
        self.slots[self.len] = bits;
        self.len += 1;
        self
    }
    pub(super) fn ptr(self, p: DevicePtr) -> Self {
        self.push(p.raw())
    }
    /// A pointer the kernel checks for NULL: `None` is passed as 0.
    pub(super) fn nullable_ptr(self, p: Option<DevicePtr>) -> Self {
        self.push(DevicePtr::raw_or_null(p))
    }
    pub(super) fn i32(self, v: i32) -> Self {
        self.push(v as u32 as u64)
    }
    pub(super) fn usize(self, v: usize) -> Self {
        self.i32(v as i32)
    }
    pub(super) fn f32(self, v: f32) -> Self {
        self.push(v.to_bits() as u64)
    }
    pub(super) fn u64(self, v: u64) -> Self {
        self.push(v)
    }
}

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
    functions: HashMap<&'static str, CudaFunction>,
    _modules: Vec<Arc<CudaModule>>,
}

/// Every kernel the backend launches.
fn all_names() -> impl Iterator<Item = &'static str> {
    NAMES
        .iter()
        .chain(GEMV_NAMES.iter().flatten())
        .chain(QMMA_NAMES.iter().flatten())
        .chain(FP8_MMA_NAMES.iter())
        .chain(GEMV_MMA_NAMES.iter().flatten())
        .chain([TILE_MMA_NAME].iter())
        .chain(MOE_GATE_UP_NAMES.iter().flatten())
        .chain(MOE_DOWN_NAMES.iter().flatten())
        .copied()
        .chain(quant_names())
        .chain(ordered_qgemv_names())
        .chain(PREFILL_NAMES.iter().map(|&(name, _)| name))
        .chain(DECODE_NAMES.iter().map(|&(name, _)| name))
}

impl Kernels {
    pub fn load(stream: &Arc<CudaStream>) -> anyhow::Result<Kernels> {
        let ctx = stream.context();
        let mut modules = Vec::new();
        let mut functions = HashMap::new();
        for source in MODULES {
            let module = module_loader::load(ctx, source)?;
            for name in all_names() {
                if let Ok(f) = module.load_function(name) {
                    functions.insert(name, f);
                }
            }
            modules.push(module);
        }
        if let Some(missing) = all_names().find(|n| !functions.contains_key(*n)) {
            anyhow::bail!("kernel `{missing}` is in no loaded module");
        }
        // Kernels that stage more than the 48 KiB of shared memory a kernel gets without
        // asking: the tile product, prefill attention's Q, K and V tiles (up to 68 KiB), and
        // decode attention's two stages of K and V tiles (64 KiB).
        let large_shared = PREFILL_NAMES
            .iter()
            .map(|&(name, head_dim)| (name, prefill_tile(head_dim).1))
            .chain(
                DECODE_NAMES
                    .iter()
                    .map(|&(name, head_dim)| (name, decode_shared_bytes(head_dim))),
            )
            .chain([(TILE_MMA_NAME, TILE_MMA_SHARED_BYTES)]);
        for (name, bytes) in large_shared {
            let f: &CudaFunction = &functions[name];
            unsafe {
                sys::cuFuncSetAttribute(
                    f.cu_function(),
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

    fn function(&self, name: &str) -> CUfunction {
        // Every name was checked at load.
        self.functions[name].cu_function()
    }

    pub(super) fn launch(&self, name: &str, shape: Shape, args: Args) -> anyhow::Result<()> {
        self.launch_with_shared(name, shape, 0, args)
    }

    /// [`Kernels::launch`] with `shared_bytes` of dynamic shared memory.
    pub(super) fn launch_with_shared(
        &self,
        name: &str,
        shape: Shape,
        shared_bytes: u32,
        args: Args,
    ) -> anyhow::Result<()> {
        self.launch_inner(name, shape, shared_bytes, args, self.programmatic)
    }

    /// [`Kernels::launch`] without overlapping the previous kernel: for a kernel that reads,
    /// before its wait, memory the previous kernel writes (the GEMVs' first weight loads, on a
    /// slab the dequantizer has just written).
    pub(super) fn launch_after_previous(
        &self,
        name: &str,
        shape: Shape,
        args: Args,
    ) -> anyhow::Result<()> {
        self.launch_inner(name, shape, 0, args, false)
    }

    fn launch_inner(
        &self,
        name: &str,
        shape: Shape,
        shared_bytes: u32,
        args: Args,
        overlap: bool,
    ) -> anyhow::Result<()> {
        let mut params = [std::ptr::null_mut::<c_void>(); 16];
        let mut slots = args.slots;
        for (p, slot) in params.iter_mut().zip(slots.iter_mut()).take(args.len) {
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
                self.function(name),
                params.as_mut_ptr(),
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
        Ok(
            f.occupancy_max_active_blocks_per_multiprocessor(block, shared_bytes as usize, None)?
                as usize,
        )
    }

    pub fn names() -> &'static [&'static str] {
        NAMES
    }
}
