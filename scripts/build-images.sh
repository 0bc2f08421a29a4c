#!/usr/bin/env bash
# Builds ferrite's container images with podman, from Debian packages only: no image is pulled
# from a registry (every FROM names an image made here first, and podman runs with
# --pull=never, so a missing one is an error, never a download).
#
#   1. set-up       podman, buildah, mmdebstrap, runc from apt when missing (as root), and
#                   /etc/containers/containers.conf when there is none (see below)
#   2. base         localhost/ferrite-base:bookworm: Debian 12 minbase + ca-certificates, made
#                   by mmdebstrap from the machine's apt sources and imported (kept; --refresh)
#   3. build images localhost/ferrite-builder:bookworm (strip, pip) and, to compile ferrite in
#                   the image, localhost/ferrite-rust:bookworm (+ Rust): deploy/docker/Dockerfile.build
#   4. cpu          localhost/ferrite:cpu and :cpu-COMMIT from deploy/docker/Dockerfile.cpu
#   5. cuda         localhost/ferrite:cuda and :cuda-COMMIT from deploy/docker/Dockerfile.cuda
#                   (cuBLAS from its PyPI wheel; the driver comes from the host at run time)
#
# docs/deploy.md ("Images") says how to run them and what each build costs.
set -euo pipefail
cd "$(dirname "$0")/.."

usage() {
  cat <<'EOF'
Usage: scripts/build-images.sh [--only cpu|cuda] [--binary PATH] [--refresh] [--no-cache]

Builds localhost/ferrite:cpu and localhost/ferrite:cuda (plus :cpu-COMMIT, :cuda-COMMIT) with
podman, on base images made here from Debian packages. Run as root on a Debian 12 machine; a
bare one gets podman, buildah, mmdebstrap and runc from apt.

  --only cpu|cuda  build one of the two images (default: both)
  --binary PATH    put this ferrite binary in the images instead of compiling one in them
                   (much faster; what CI does with its release build). It must run on Debian 12
                   (glibc 2.36) and, for the CUDA image, have its kernels built in
                   (FERRITE_REQUIRE_NVCC=1 with nvcc on the build machine)
  --refresh        remake the Debian base image (security updates) and the build images
  --no-cache       rebuild every layer of the ferrite images (podman build --no-cache)
  -h, --help       this text

Without --binary, ferrite is compiled inside the image: about 6 min (CPU) and 8 min (CUDA, nvcc
included) on 2 cores, then incremental (cargo's target/ is a build cache mount).
EOF
}

only=all binary="" refresh=0 no_cache=()
while [ $# -gt 0 ]; do
  case $1 in
    --only) [ $# -ge 2 ] || { usage >&2; exit 2; }; only=$2; shift 2 ;;
    --only=*) only=${1#--only=}; shift ;;
    --binary) [ $# -ge 2 ] || { usage >&2; exit 2; }; binary=$2; shift 2 ;;
    --binary=*) binary=${1#--binary=}; shift ;;
    --refresh) refresh=1; shift ;;
    --no-cache) no_cache=(--no-cache); shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "build-images: unknown argument '$1'" >&2; usage >&2; exit 2 ;;
  esac
done
case $only in
  all) flavours=(cpu cuda) ;;
  cpu|cuda) flavours=("$only") ;;
  *) echo "build-images: --only takes cpu or cuda, not '$only'" >&2; exit 2 ;;
esac

BASE_IMAGE=localhost/ferrite-base:bookworm
BUILDER_IMAGE=localhost/ferrite-builder:bookworm
RUST_IMAGE=localhost/ferrite-rust:bookworm
IMAGE=localhost/ferrite

step_name="" step_started=0
started=$(date +%s)
step() { # announces a step; the ERR trap below names it when it fails
  step_name=$1 step_started=$(date +%s)
  printf '\n==> %s\n' "$1"
}
step_done() { echo "    ($1: $(( $(date +%s) - step_started )) s)"; }
die() { echo "build-images: error: $*" >&2; exit 1; }
trap 'echo "build-images: error: step \"$step_name\" failed (exit $?); the output above says why" >&2' ERR

work=$(mktemp -d /var/tmp/ferrite-images.XXXXXX)
trap 'rm -rf "$work"' EXIT

# --- 1. set-up ----------------------------------------------------------------------------
step "set-up: podman, mmdebstrap, containers.conf"
missing=()
for tool in podman:podman buildah:buildah mmdebstrap:mmdebstrap runc:runc newuidmap:uidmap; do
  command -v "${tool%%:*}" >/dev/null || missing+=("${tool#*:}")
done
if [ ${#missing[@]} -gt 0 ]; then
  [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null \
    || die "missing ${missing[*]}: install them (apt-get install ${missing[*]}) or run this as root on Debian"
  echo "installing ${missing[*]} from apt"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
# Two settings the defaults get wrong on machines like the project's build machines: the
# default ulimits exceed the hard limits there ("crun: setrlimit RLIMIT_NOFILE: Operation not
# permitted"), and crun refuses their hybrid cgroup set-up ("cgroups in hybrid mode not
# supported"); runc copes. Written only where the machine has no containers.conf of its own.
conf=/etc/containers/containers.conf
if [ ! -e "$conf" ]; then
  [ -w /etc/containers ] || die "no $conf and /etc/containers is not writable: run as root once"
  cat > "$conf" <<'EOF'
# Written by ferrite's scripts/build-images.sh: the defaults exceed this machine's hard ulimits,
# and crun refuses hybrid cgroups where runc does not.
[containers]
default_ulimits = ["nofile=16384:16384", "nproc=16384:16384"]

[engine]
runtime = "runc"
EOF
  echo "wrote $conf (runtime runc, ulimits nofile/nproc 16384)"
fi
podman --version
step_done set-up

# --- 2. the Debian base image ---------------------------------------------------------------
if [ "$refresh" = 1 ] || ! podman image exists "$BASE_IMAGE"; then
  step "base: $BASE_IMAGE from Debian packages (mmdebstrap)"
  # The machine's own apt sources (deb822) when it runs Debian 12: its mirror, and the updates
  # and security suites; elsewhere mmdebstrap's default mirror.
  sources=()
  if grep -qs '^Suites:.*bookworm' /etc/apt/sources.list.d/debian.sources; then
    sources=(/etc/apt/sources.list.d/debian.sources)
  fi
  # A mirror that serves a dated snapshot (the build machines' does) has Release files past
  # their Valid-Until: where the machine's apt is told to accept them, so is the image's.
  aptopts=() apt_config=$(apt-config dump 2>/dev/null || true)
  for option in Acquire::Check-Valid-Until Acquire::Check-Date; do
    if grep -qx "$option \"false\";" <<<"$apt_config"; then
      aptopts+=(--aptopt="$option \"false\"")
    fi
  done
  # minbase (apt, bash, coreutils, ...) and CA certificates for HTTPS; documentation, man pages
  # and translations are left out (dpkg path-exclude, kept for packages added later).
  mmdebstrap --variant=minbase --include=ca-certificates "${aptopts[@]}" \
    --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-include=/usr/share/doc/*/copyright' \
    --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/info/*' \
    --dpkgopt='path-exclude=/usr/share/locale/*' --dpkgopt='path-exclude=/usr/share/lintian/*' \
    bookworm "$work/base.tar" "${sources[@]}"
  podman import --change 'CMD ["/bin/bash"]' \
    --change 'LABEL org.opencontainers.image.description=Debian 12 minbase made by ferrite scripts/build-images.sh' \
    "$work/base.tar" "$BASE_IMAGE" >/dev/null
  rm -f "$work/base.tar"
  step_done base
else
  echo; echo "==> base: $BASE_IMAGE exists (made $(podman image inspect --format '{{.Created}}' "$BASE_IMAGE" | cut -d' ' -f1); --refresh remakes it)"
fi

# --- 3. build images ------------------------------------------------------------------------
# The Rust image is needed only to compile ferrite in the image (no --binary).
need_rust=0
if [ -n "$binary" ]; then
  [ -f "$binary" ] && [ -x "$binary" ] || die "--binary $binary: not an executable file"
  version_line=$("$binary" --version 2>&1) || die "--binary $binary does not run here: $version_line"
  grep -q '^ferrite ' <<<"$version_line" || die "--binary $binary is not ferrite: $version_line"
  # Dockerfile.cuda checks this too, but only after a minute of building.
  if [[ " ${flavours[*]} " == *" cuda "* ]] && ! grep -q 'CUDA kernels built in' <<<"$version_line"; then
    die "--binary $binary has no CUDA kernels built in, which the CUDA image needs: build it with nvcc
    and FERRITE_REQUIRE_NVCC=1 (DEVELOPERS.md; scripts/test.sh does), or pass --only cpu"
  fi
  mkdir -p "$work/prebuilt"
  cp "$binary" "$work/prebuilt/ferrite"
  binary_from=prebuilt
  # The labels tell the binary's version and commit, not the work tree's.
  version=$(echo "$version_line" | awk '{print $2}')
  commit=$(echo "$version_line" | sed -n 's/.*(commit \([^;)]*\).*/\1/p')
  echo "binary: $version_line"
else
  need_rust=1
  binary_from=source
  version=$(sed -n '/^\[workspace.package\]/,/^\[/s/^version *= *"\(.*\)"/\1/p' Cargo.toml)
  commit=$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)
  # Uncommitted changes to tracked files go into the image too: say so in its tag and label.
  if [ "$commit" != unknown ] && [ -n "$(git status --porcelain --untracked-files=no)" ]; then
    commit=$commit-dirty
  fi
fi
[ -n "$version" ] && [ -n "$commit" ] || die "could not tell the version ($version) or commit ($commit)"

build_targets=(builder)
[ "$need_rust" = 1 ] && build_targets+=(rust)
for target in "${build_targets[@]}"; do
  name=$BUILDER_IMAGE; [ "$target" = rust ] && name=$RUST_IMAGE
  if [ "$refresh" = 0 ] && podman image exists "$name"; then
    echo; echo "==> $target: $name exists (--refresh remakes it)"
    continue
  fi
  step "$target: $name (deploy/docker/Dockerfile.build)"
  # The build context: only this machine's extra CA certificates (see Dockerfile.build).
  mkdir -p "$work/build-context/ca"
  find /usr/local/share/ca-certificates -name '*.crt' -exec cp {} "$work/build-context/ca/" \; 2>/dev/null || true
  # --refresh: new packages and toolchain, not the layers cached from the old base.
  fresh=(); if [ "$refresh" = 1 ]; then fresh=(--no-cache); fi
  podman build --pull=never --target "$target" --build-arg BASE_IMAGE="$BASE_IMAGE" "${fresh[@]}" \
    -f deploy/docker/Dockerfile.build -t "$name" "$work/build-context"
  step_done "$target"
done

# --- 4, 5. the ferrite images ---------------------------------------------------------------
declare -A seconds
for flavour in "${flavours[@]}"; do
  step "$flavour: $IMAGE:$flavour, $IMAGE:$flavour-$commit (deploy/docker/Dockerfile.$flavour, binary: $binary_from)"
  extra=()
  [ "$binary_from" = prebuilt ] && extra=(--build-context "prebuilt=$work/prebuilt")
  # --format docker: the OCI image format has no HEALTHCHECK (podman would drop it).
  podman build --pull=never --format docker "${no_cache[@]}" "${extra[@]}" \
    --build-arg FERRITE_BINARY="$binary_from" \
    --build-arg BASE_IMAGE="$BASE_IMAGE" --build-arg BUILDER_IMAGE="$BUILDER_IMAGE" \
    --build-arg RUST_IMAGE="$RUST_IMAGE" \
    --build-arg FERRITE_VERSION="$version" --build-arg FERRITE_COMMIT="$commit" \
    -f "deploy/docker/Dockerfile.$flavour" -t "$IMAGE:$flavour" -t "$IMAGE:$flavour-$commit" .
  seconds[$flavour]=$(( $(date +%s) - step_started ))
  step_done "$flavour"
done

echo
echo "==> done in $(( $(date +%s) - started )) s"
for flavour in "${flavours[@]}"; do
  size=$(podman image inspect --format '{{.Size}}' "$IMAGE:$flavour")
  printf '    %-26s %5d MB  built in %4d s  (%s %s)\n' "$IMAGE:$flavour" $(( size / 1000000 )) \
    "${seconds[$flavour]}" "$version" "$commit"
done
