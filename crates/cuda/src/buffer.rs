//! Device memory as addresses: one owned allocation per buffer, carved into regions by byte
//! offset. Kernels take plain addresses ([`DevicePtr`]), so a step needs no per-argument
//! bookkeeping and a captured graph keeps pointing at the same memory.

use std::sync::Arc;

use cudarc::driver::{result, CudaStream};

use crate::device_ptr::DevicePtr;

/// Alignment of every region handed out (enough for 16-byte vector loads and cuBLAS).
pub const ALIGN: usize = 256;

pub fn align_up(n: usize) -> usize {
    n.div_ceil(ALIGN) * ALIGN
}

/// An owned device allocation. Freed on drop (after the stream is done with it).
pub struct DeviceBuffer {
    ptr: u64,
    bytes: usize,
    stream: Arc<CudaStream>,
}

impl DeviceBuffer {
    pub fn new(stream: &Arc<CudaStream>, bytes: usize) -> anyhow::Result<DeviceBuffer> {
        stream.context().bind_to_thread()?;
        let ptr = unsafe { result::malloc_sync(bytes.max(1)) }.map_err(|e| {
            anyhow::anyhow!(
                "cudaMalloc of {:.2} GiB failed: {e}",
                bytes as f64 / (1u64 << 30) as f64
            )
        })?;
        Ok(DeviceBuffer {
            ptr,
            bytes,
            stream: stream.clone(),
        })
    }

    pub fn ptr(&self) -> DevicePtr {
        DevicePtr::from_raw(self.ptr)
    }

    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Address `offset` bytes in; panics past the end (a sizing bug, not a data error).
    pub fn at(&self, offset: usize) -> DevicePtr {
        assert!(
            offset <= self.bytes,
            "offset {offset} past {} bytes",
            self.bytes
        );
        self.ptr().offset(offset)
    }

    /// Fills the whole buffer with one byte value (tests poison outputs with 0xff: NaN in
    /// f32 and bf16).
    pub fn fill(&self, byte: u8) -> anyhow::Result<()> {
        unsafe { result::memset_d8_async(self.ptr, byte, self.bytes, self.stream.cu_stream()) }?;
        Ok(())
    }
}

impl DeviceBuffer {
    /// Zeroes `bytes` bytes from `offset` on (in stream order).
    pub fn zero_range(&self, offset: usize, bytes: usize) -> anyhow::Result<()> {
        anyhow::ensure!(
            offset + bytes <= self.bytes,
            "zeroing {bytes} bytes at {offset} past {} bytes",
            self.bytes
        );
        unsafe {
            result::memset_d8_async(self.ptr + offset as u64, 0, bytes, self.stream.cu_stream())
        }?;
        Ok(())
    }
}

impl Drop for DeviceBuffer {
    fn drop(&mut self) {
        let _ = self.stream.synchronize();
        let _ = unsafe { result::free_sync(self.ptr) };
    }
}

/// Copies `data` to device address `dst` on `stream` (pageable memory: the call returns once
/// the data has been staged, so `data` may be reused right away).
pub fn upload<T: Copy>(stream: &CudaStream, dst: DevicePtr, data: &[T]) -> anyhow::Result<()> {
    if data.is_empty() {
        return Ok(());
    }
    unsafe { result::memcpy_htod_async(dst.raw(), data, stream.cu_stream()) }?;
    Ok(())
}

/// Copies `bytes` of device memory from `src` to `dst`, in stream order.
pub fn copy_on_device(
    stream: &CudaStream,
    dst: DevicePtr,
    src: DevicePtr,
    bytes: usize,
) -> anyhow::Result<()> {
    if bytes == 0 {
        return Ok(());
    }
    unsafe { result::memcpy_dtod_async(dst.raw(), src.raw(), bytes, stream.cu_stream()) }?;
    Ok(())
}

/// Copies device memory at `src` into `out`, waiting for the stream to get there.
pub fn download<T: Copy>(stream: &CudaStream, src: DevicePtr, out: &mut [T]) -> anyhow::Result<()> {
    if out.is_empty() {
        return Ok(());
    }
    unsafe { result::memcpy_dtoh_async(out, src.raw(), stream.cu_stream()) }?;
    stream.synchronize()?;
    Ok(())
}

/// A region of the workspace a product may overwrite as it likes: the bf16 rows quantized
/// matrices are dequantized into for cuBLAS, or FP8 activations (crate::gemm,
/// crate::fp8_gemm).
#[derive(Debug, Clone, Copy)]
pub struct Scratch {
    pub ptr: DevicePtr,
    pub bytes: usize,
}

/// Bump allocator over one buffer: the weight arena and the activation workspace are each one
/// allocation, laid out once.
pub struct Layout {
    bytes: usize,
}

impl Layout {
    pub fn new() -> Self {
        Layout { bytes: 0 }
    }
    /// Reserves `bytes` and returns their offset.
    pub fn take(&mut self, bytes: usize) -> usize {
        let at = self.bytes;
        self.bytes += align_up(bytes);
        at
    }
    pub fn bytes(&self) -> usize {
        self.bytes
    }
}

impl Default for Layout {
    fn default() -> Self {
        Self::new()
    }
}
