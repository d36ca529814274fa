# Shared by the scripts in scripts/: paths and small helpers. Sourced, not run.
TESSERA_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
TESSERA_DEPS_PREFIX="${TESSERA_DEPS_PREFIX:-/opt/tessera-deps}"
TESSERA_CUDA_ARCH="${TESSERA_CUDA_ARCH:-HOPPER90}"

log() { printf '[tessera] %s\n' "$*" >&2; }
die() { printf 'tessera: error: %s\n' "$*" >&2; exit 1; }

# Stable location of the Kokkos install for a backend (openmp | cuda).
kokkos_prefix() { printf '%s/kokkos-%s\n' "$TESSERA_DEPS_PREFIX" "$1"; }

# Changes whenever a patch file or the CUDA arch changes, so cached builds are redone.
patch_set_hash() {
  { cat "$TESSERA_ROOT"/cmake/patches/kokkos-*/*.patch 2>/dev/null; echo "$TESSERA_CUDA_ARCH"; } \
    | sha256sum | cut -c1-16
}
