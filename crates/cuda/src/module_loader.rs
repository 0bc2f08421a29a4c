//! Loading the kernel modules into a context: the embedded cubin when build.rs made one, else
//! PTX compiled by NVRTC at run time and cached on disk (~/.cache/ferrite/cuda/<hash>.ptx, or
//! $FERRITE_CUDA_CACHE), so only the first start pays for compilation.

use std::path::PathBuf;
use std::sync::Arc;

use cudarc::driver::{CudaContext, CudaModule};
use cudarc::nvrtc::{CompileOptions, Ptx};

use crate::kernel_sources::{cache_file_name, inline_headers, KernelSource, HEADERS};

/// NVRTC targets the virtual architecture; the driver JIT-compiles the PTX for the device.
const NVRTC_ARCH: &str = "compute_90";

/// Where cuda_bf16.h may be: $CUDA_HOME/include, then the usual install prefix.
pub fn cuda_include_dirs() -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    for var in ["CUDA_HOME", "CUDA_PATH"] {
        if let Some(home) = std::env::var_os(var) {
            dirs.push(PathBuf::from(home).join("include"));
        }
    }
    dirs.push(PathBuf::from("/usr/local/cuda/include"));
    dirs.into_iter()
        .filter(|d| d.join("cuda_bf16.h").is_file())
        .collect()
}

pub fn cache_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("FERRITE_CUDA_CACHE") {
        return PathBuf::from(dir);
    }
    let home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_default();
    home.join(".cache/ferrite/cuda")
}

pub fn load(ctx: &Arc<CudaContext>, module: &KernelSource) -> anyhow::Result<Arc<CudaModule>> {
    if let Some(cubin) = module.cubin {
        return Ok(ctx.load_module(Ptx::from_binary(cubin.to_vec()))?);
    }
    let ptx = compile_cached(module)?;
    Ok(ctx.load_module(Ptx::from_src(ptx))?)
}

fn compile_cached(module: &KernelSource) -> anyhow::Result<String> {
    let source = inline_headers(module.source, HEADERS)
        .map_err(|e| anyhow::anyhow!("{}.cu: {e}", module.name))?;
    let includes = cuda_include_dirs();
    let options = vec!["-std=c++17".to_string(), "-lineinfo".to_string()];
    let path = cache_dir().join(cache_file_name(&source, NVRTC_ARCH, &options));
    if let Ok(ptx) = std::fs::read_to_string(&path) {
        return Ok(ptx);
    }
    if includes.is_empty() {
        anyhow::bail!(
            "compiling {}.cu with NVRTC needs cuda_bf16.h: set CUDA_HOME to a CUDA toolkit \
             (or build ferrite with nvcc on PATH so the kernels are embedded precompiled)",
            module.name
        );
    }
    let started = std::time::Instant::now();
    let ptx = cudarc::nvrtc::compile_ptx_with_opts(
        &source,
        CompileOptions {
            arch: Some(NVRTC_ARCH),
            include_paths: includes.iter().map(|d| d.display().to_string()).collect(),
            options: options.clone(),
            name: Some(format!("{}.cu", module.name)),
            ..Default::default()
        },
    )
    .map_err(|e| anyhow::anyhow!("NVRTC failed on {}.cu: {e:?}", module.name))?
    .to_src();
    tracing::info!(
        module = module.name,
        ms = started.elapsed().as_millis() as u64,
        "compiled with NVRTC"
    );
    // A cache that cannot be written only costs the next start a recompile.
    if std::fs::create_dir_all(cache_dir()).is_ok() {
        let partial = path.with_extension("partial");
        if std::fs::write(&partial, &ptx).is_ok() {
            let _ = std::fs::rename(&partial, &path);
        }
    }
    Ok(ptx)
}
