//! FP8 products on Hopper's FP8 tensor cores (W8A8): y = x W^T with W an FP8 matrix
//! (ferrite_model::fp8, a scale per row and block of 128) and x quantized to e4m3 per token and
//! block of 128 just before (kernels/fp8_activation.cu), through cuBLASLt's 1-D block scaling
//! on both operands (`VEC128_32F`, cuBLASLt 12.9 or later, compute capability 9.0). Each
//! block's partial sum is scaled by its two scales in f32, as the FP8 checkpoints' own
//! definition of a weight (`e4m3 * scale`) asks.
//!
//! Why: above 8 tokens the FP8 weights were dequantized to bf16 slab by slab for cuBLAS, which
//! reads and writes the model once more per step and runs at bf16 tensor-core speed; Hopper's
//! FP8 tensor cores do twice the bf16 operations per cycle.
//!
//! Quantizing activations changes results (about e4m3's 2^-4 relative step per element, summed
//! over k), so the backend takes this path only where results already depend on the batch:
//! with batch invariance off (crate::gemm). `FERRITE_FP8_GEMM=0` turns it off there too, for
//! A/B timing against the dequantizing path.

mod linear_part;

use std::collections::HashMap;
use std::ffi::c_void;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};

use cudarc::cublaslt::result as lt;
use cudarc::cublaslt::sys;
use cudarc::driver::CudaStream;

use crate::device_ptr::DevicePtr;

/// One product: `rows` output columns (the weight's rows) for `n` tokens, reduction `k`.
#[derive(Debug, Clone, Copy)]
pub struct Fp8Operands {
    /// e4m3 [rows, k], rows contiguous.
    pub w: DevicePtr,
    /// f32 [k / 128, rows]: the weight's scales, block-major.
    pub w_scales: DevicePtr,
    /// e4m3 [n, k].
    pub x: DevicePtr,
    /// f32 [k / 128, n].
    pub x_scales: DevicePtr,
    /// The output: f32 rows `ldy` apart.
    pub y: DevicePtr,
    pub n: usize,
    pub rows: usize,
    pub k: usize,
    pub ldy: usize,
}

/// Most algorithms remembered (steps of every token count up to the batch limit, for each
/// FP8 matrix shape of the model).
const MAX_REMEMBERED: usize = 4096;

/// Shapes and alignments an algorithm was chosen for.
type AlgoKey = (usize, usize, usize, usize, u32, u32, u32);

pub struct Fp8Gemm {
    handle: sys::cublasLtHandle_t,
    stream: Arc<CudaStream>,
    workspace: DevicePtr,
    workspace_bytes: usize,
    algos: Mutex<HashMap<AlgoKey, sys::cublasLtMatmulAlgo_t>>,
    /// Whether a shape without an algorithm was reported (once).
    warned: AtomicBool,
}

// Used from the thread that owns the backend at a time (as crate::gemm::Gemm).
unsafe impl Send for Fp8Gemm {}
unsafe impl Sync for Fp8Gemm {}

/// A product's descriptors and the algorithm chosen for them.
type Prepared = (Descriptors, sys::cublasLtMatmulAlgo_t);

/// Owned cuBLASLt descriptors of one call, destroyed on drop.
struct Descriptors {
    desc: sys::cublasLtMatmulDesc_t,
    layouts: [sys::cublasLtMatrixLayout_t; 3],
}

impl Drop for Descriptors {
    fn drop(&mut self) {
        unsafe {
            for l in self.layouts {
                let _ = lt::destroy_matrix_layout(l);
            }
            let _ = lt::destroy_matmul_desc(self.desc);
        }
    }
}

fn err(what: &str) -> impl Fn(lt::CublasError) -> anyhow::Error + '_ {
    move |e| anyhow::anyhow!("cuBLASLt {what}: {e:?}")
}

unsafe fn set_desc<T>(
    desc: sys::cublasLtMatmulDesc_t,
    attr: sys::cublasLtMatmulDescAttributes_t,
    value: &T,
) -> anyhow::Result<()> {
    lt::set_matmul_desc_attribute(
        desc,
        attr,
        value as *const T as *const c_void,
        std::mem::size_of::<T>(),
    )
    .map_err(err("matmul attribute"))
}

/// The largest power of two (up to 256) dividing an address: what cuBLASLt may assume of it.
fn alignment(p: DevicePtr) -> u32 {
    let raw = p.raw();
    if raw == 0 {
        return 256;
    }
    (1u64 << raw.trailing_zeros().min(8)) as u32
}

impl Fp8Gemm {
    /// A cuBLASLt handle on `stream` sharing `workspace`, if this GPU and cuBLASLt offer
    /// block-scaled FP8 products (`Err` says why not).
    pub fn new(
        stream: &Arc<CudaStream>,
        workspace: DevicePtr,
        workspace_bytes: usize,
    ) -> anyhow::Result<Fp8Gemm> {
        let version = unsafe { sys::cublasLtGetVersion() };
        anyhow::ensure!(
            version >= 120900,
            "cuBLASLt {version} predates block-scaled FP8 (12.9)"
        );
        let handle = lt::create_handle().map_err(err("create"))?;
        let gemm = Fp8Gemm {
            handle,
            stream: stream.clone(),
            workspace,
            workspace_bytes,
            algos: Mutex::new(HashMap::new()),
            warned: AtomicBool::new(false),
        };
        // A representative shape: whether cuBLASLt has block-scaled FP8 products here at all.
        gemm.algorithm(&probe_operands())
            .map_err(|e| anyhow::anyhow!("no block-scaled FP8 product on this GPU: {e}"))?;
        gemm.algos
            .lock()
            .map_err(|_| anyhow::anyhow!("poisoned"))?
            .clear();
        Ok(gemm)
    }

    /// The descriptors of a product: column-major, D^T[rows, n] = W[rows, k] (stored k x rows,
    /// transposed) · X^T[k, n], the "TN" form FP8 products require.
    fn descriptors(&self, o: &Fp8Operands) -> anyhow::Result<Descriptors> {
        use sys::cublasLtMatmulDescAttributes_t as A;
        let desc = lt::create_matmul_desc(
            sys::cublasComputeType_t::CUBLAS_COMPUTE_32F,
            sys::cudaDataType::CUDA_R_32F,
        )
        .map_err(err("matmul descriptor"))?;
        let e4m3 = sys::cudaDataType::CUDA_R_8F_E4M3;
        let (out_type, ldd) = (sys::cudaDataType::CUDA_R_32F, o.ldy);
        let w = lt::create_matrix_layout(e4m3, o.k as u64, o.rows as u64, o.k as i64);
        let x = lt::create_matrix_layout(e4m3, o.k as u64, o.n as u64, o.k as i64);
        let d = lt::create_matrix_layout(out_type, o.rows as u64, o.n as u64, ldd as i64);
        let layouts = [
            w.map_err(err("layout"))?,
            x.map_err(err("layout"))?,
            d.map_err(err("layout"))?,
        ];
        let d = Descriptors { desc, layouts };
        let block_scales =
            sys::cublasLtMatmulMatrixScale_t::CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F;
        unsafe {
            set_desc(
                desc,
                A::CUBLASLT_MATMUL_DESC_TRANSA,
                &cudarc::cublas::sys::cublasOperation_t::CUBLAS_OP_T,
            )?;
            set_desc(
                desc,
                A::CUBLASLT_MATMUL_DESC_TRANSB,
                &cudarc::cublas::sys::cublasOperation_t::CUBLAS_OP_N,
            )?;
            set_desc(desc, A::CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &block_scales)?;
            set_desc(desc, A::CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &block_scales)?;
            set_desc(
                desc,
                A::CUBLASLT_MATMUL_DESC_A_SCALE_POINTER,
                &o.w_scales.raw(),
            )?;
            set_desc(
                desc,
                A::CUBLASLT_MATMUL_DESC_B_SCALE_POINTER,
                &o.x_scales.raw(),
            )?;
        }
        Ok(d)
    }

    /// The fastest algorithm cuBLASLt's heuristic gives for this shape and these alignments,
    /// remembered per shape.
    fn algorithm(&self, o: &Fp8Operands) -> anyhow::Result<Prepared> {
        use sys::cublasLtMatmulPreferenceAttributes_t as P;
        let d = self.descriptors(o)?;
        let aligns = [alignment(o.w), alignment(o.x), alignment(o.y)];
        let key = (o.n, o.rows, o.k, o.ldy, aligns[0], aligns[1], aligns[2]);
        let mut algos = self.algos.lock().map_err(|_| anyhow::anyhow!("poisoned"))?;
        if let Some(&algo) = algos.get(&key) {
            return Ok((d, algo));
        }
        let pref = lt::create_matmul_pref().map_err(err("preference"))?;
        let set = |attr: P, bytes: &[u8]| unsafe {
            lt::set_matmul_pref_attribute(pref, attr, bytes.as_ptr() as *const c_void, bytes.len())
                .map_err(err("preference attribute"))
        };
        let chosen = (|| {
            set(
                P::CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                &(self.workspace_bytes as u64).to_ne_bytes(),
            )?;
            // A = W, B = X, C = D = Y.
            for (attr, align) in [
                (P::CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, aligns[0]),
                (P::CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, aligns[1]),
                (P::CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, aligns[2]),
                (P::CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, aligns[2]),
            ] {
                set(attr, &align.to_ne_bytes())?;
            }
            let [w, x, y] = d.layouts;
            unsafe { lt::get_matmul_algo_heuristic(self.handle, d.desc, w, x, y, y, pref) }
                .map_err(err("no algorithm"))
        })();
        unsafe {
            let _ = lt::destroy_matmul_pref(pref);
        }
        let algo = chosen?.algo;
        // One entry per token count seen: bounded by starting over.
        if algos.len() >= MAX_REMEMBERED {
            algos.clear();
        }
        algos.insert(key, algo);
        Ok((d, algo))
    }

    /// Enqueues the product of `o` on the stream with what [`Fp8Gemm::algorithm`] prepared
    /// for it (capturable: no allocation, no synchronisation).
    fn enqueue(&self, (d, algo): &Prepared, o: &Fp8Operands) -> anyhow::Result<()> {
        let (alpha, beta) = (1.0f32, 0.0f32);
        let [w, x, y] = d.layouts;
        unsafe {
            lt::matmul(
                self.handle,
                d.desc,
                &alpha as *const f32 as *const c_void,
                &beta as *const f32 as *const c_void,
                o.w.raw() as *const c_void,
                w,
                o.x.raw() as *const c_void,
                x,
                o.y.raw() as *const c_void,
                y,
                o.y.raw() as *mut c_void,
                y,
                algo,
                self.workspace.raw() as *mut c_void,
                self.workspace_bytes,
                self.stream.cu_stream() as sys::cudaStream_t,
            )
        }
        .map_err(|e| anyhow::anyhow!("cublasLtMatmul FP8 {}x{}x{}: {e:?}", o.n, o.rows, o.k))
    }
}

/// Operands of a probe (256-byte aligned addresses): only their shape and alignment reach
/// the heuristic.
fn probe_operands() -> Fp8Operands {
    shape_operands(512, 1024, 1024, 1024)
}

fn shape_operands(n: usize, rows: usize, k: usize, ldy: usize) -> Fp8Operands {
    let p = DevicePtr::from_raw(256);
    Fp8Operands {
        w: p,
        w_scales: p,
        x: p,
        x_scales: p,
        y: p,
        n,
        rows,
        k,
        ldy,
    }
}

impl Fp8Gemm {
    /// Whether cuBLASLt has an algorithm for this shape (aligned operands), and if not why:
    /// for the tests' report of what the library takes.
    pub fn probe(&self, n: usize, rows: usize, k: usize, ldy: usize) -> anyhow::Result<()> {
        let operands = shape_operands(n, rows, k, ldy);
        self.algorithm(&operands).map(|_| ())
    }
}

impl Drop for Fp8Gemm {
    fn drop(&mut self) {
        let _ = unsafe { lt::destroy_handle(self.handle) };
    }
}
