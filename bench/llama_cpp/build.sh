#!/usr/bin/env bash
# Builds llama.cpp's `llama-bench`, `llama-server` and `llama-quantize` (CPU only, native arch, Release) from the
# llama.cpp that the llama-cpp-python source package on PyPI vendors, into bench/.llama.cpp/
# (git-ignored). Idempotent: does nothing when the binaries exist for the pinned version.
#
#   bench/llama_cpp/build.sh            # build (or reuse) and print the bin directory
#   LLAMA_CPP_PYTHON_VERSION=0.3.36 bench/llama_cpp/build.sh
#   JOBS=1 bench/llama_cpp/build.sh     # fewer compile jobs on a busy machine
#   LLAMA_CPP_AMX=1 bench/llama_cpp/build.sh   # keep ggml's AMX kernels (see below)
#
# On CPUs with AMX (Sapphire Rapids and later), -march=native compiles ggml's AMX matmul, which
# crashes (SIGSEGV in ggml_backend_amx_mul_mat) in our sandboxed build machines: the AMX tile
# state is not usable there. So AMX is compiled out unless LLAMA_CPP_AMX=1; everything else
# native (AVX-512, VNNI, ...) stays on.
set -euo pipefail

VERSION="${LLAMA_CPP_PYTHON_VERSION:-0.3.36}"
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
WORK="$ROOT/bench/.llama.cpp"
SRC="$WORK/llama_cpp_python-$VERSION/vendor/llama.cpp"
CPU_FLAGS=""
VARIANT="native"
if [[ "${LLAMA_CPP_AMX:-0}" != 1 ]] && grep -qw amx_tile /proc/cpuinfo 2>/dev/null; then
    CPU_FLAGS="-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"
    VARIANT="native-noamx"
fi
BUILD="$WORK/build-$VERSION-$VARIANT"
BIN="$BUILD/bin"
JOBS="${JOBS:-$(nproc)}"

log() { echo "[llama.cpp build] $*" >&2; }

if [[ -x "$BIN/llama-bench" && -x "$BIN/llama-server" && -x "$BIN/llama-quantize" ]]; then
    log "already built: $BIN"
    echo "$BIN"
    exit 0
fi

mkdir -p "$WORK"
start=$(date +%s)

if [[ ! -f "$SRC/CMakeLists.txt" ]]; then
    sdist="$WORK/llama_cpp_python-$VERSION.tar.gz"
    if [[ ! -f "$sdist" ]]; then
        log "downloading the llama-cpp-python $VERSION sdist from PyPI"
        # Only llama-cpp-python itself as source: its build requirements (scikit-build-core,
        # cmake) may come as wheels, so pip does not compile cmake just to read the metadata.
        python3 -m pip download --quiet --no-deps --no-binary llama-cpp-python \
            "llama-cpp-python==$VERSION" -d "$WORK"
    fi
    log "unpacking $sdist"
    tar -xzf "$sdist" -C "$WORK" "llama_cpp_python-$VERSION/vendor/llama.cpp"
fi

CMAKE="$(command -v cmake || true)"
if [[ -z "$CMAKE" ]]; then
    if [[ ! -x "$WORK/venv/bin/cmake" ]]; then
        log "no cmake on PATH: installing cmake into $WORK/venv"
        python3 -m venv "$WORK/venv"
        "$WORK/venv/bin/pip" install --quiet cmake
    fi
    CMAKE="$WORK/venv/bin/cmake"
fi

log "configuring with $("$CMAKE" --version | head -1)"
# The web UI is neither built (npm) nor downloaded: the server then embeds an empty asset table.
"$CMAKE" -S "$SRC" -B "$BUILD" \
    -DCMAKE_BUILD_TYPE=Release \
    -DBUILD_SHARED_LIBS=OFF \
    -DGGML_NATIVE=ON \
    -DCMAKE_C_FLAGS="$CPU_FLAGS" -DCMAKE_CXX_FLAGS="$CPU_FLAGS" \
    -DGGML_CUDA=OFF -DGGML_METAL=OFF -DGGML_VULKAN=OFF -DGGML_BLAS=OFF \
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_APP=OFF \
    -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_SERVER=ON \
    -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF \
    -DLLAMA_OPENSSL=OFF -DLLAMA_CURL=OFF >"$WORK/configure.log" 2>&1 \
    || { tail -30 "$WORK/configure.log" >&2; exit 1; }

log "building llama-bench, llama-server and llama-quantize with $JOBS jobs (log: $WORK/build.log)"
"$CMAKE" --build "$BUILD" --config Release -j "$JOBS" --target llama-bench llama-server llama-quantize \
    >"$WORK/build.log" 2>&1 || { tail -30 "$WORK/build.log" >&2; exit 1; }

log "built in $(( $(date +%s) - start )) s: $BIN"
echo "$BIN"
