# Shared by the scripts in scripts/: paths and small helpers. Sourced, not run.
TESSERA_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
TESSERA_DEPS_PREFIX="${TESSERA_DEPS_PREFIX:-/opt/tessera-deps}"
TESSERA_CUDA_ARCH="${TESSERA_CUDA_ARCH:-HOPPER90}"

log() { printf '[tessera] %s\n' "$*" >&2; }
die() { printf 'tessera: error: %s\n' "$*" >&2; exit 1; }

# The Python venv with a CPU-only torch for the benchmarks (scripts/setup-bench.sh).
bench_venv_default() { printf '%s\n' "${TESSERA_BENCH_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/tessera/bench-venv}"; }

# Stable location of the Kokkos install for a backend (openmp | cuda).
kokkos_prefix() { printf '%s/kokkos-%s\n' "$TESSERA_DEPS_PREFIX" "$1"; }

# Changes whenever a patch file or the CUDA arch changes, so cached builds are redone.
patch_set_hash() {
  { cat "$TESSERA_ROOT"/cmake/patches/kokkos-*/*.patch 2>/dev/null; echo "$TESSERA_CUDA_ARCH"; } \
    | sha256sum | cut -c1-16
}

# The cmake arguments of one variant of Tessera (cpu | cuda | sanitize), one per line.
variant_args() {
  case "$1" in
    cpu) printf '%s\n' "-DKokkos_ROOT=$(kokkos_prefix openmp)" ;;
    sanitize) printf '%s\n' "-DKokkos_ROOT=$(kokkos_prefix openmp)" -DTESSERA_SANITIZE=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo ;;
    cuda) printf '%s\n' -DTESSERA_ENABLE_CUDA=ON "-DKokkos_ROOT=$(kokkos_prefix cuda)" \
                         "-DCMAKE_CXX_COMPILER=$(kokkos_prefix cuda)/bin/nvcc_wrapper" ;;
    *) die "unknown build variant '$1'" ;;
  esac
}

# Configures and builds one variant of Tessera: cpu | cuda | sanitize.
#   build_variant <variant> <build dir> [extra cmake arguments...]
build_variant() {
  local variant="$1" dir="$2"
  shift 2
  local args
  args=$(variant_args "$variant") || exit 1
  mapfile -t args <<<"$args"
  if [[ $variant == cuda ]]; then export PATH="$PATH:/usr/local/cuda/bin"; fi  # nvcc_wrapper calls nvcc from PATH
  mkdir -p "$dir"
  cmake -S "$TESSERA_ROOT" -B "$dir" "${args[@]}" "$@" >"$dir/configure.log" 2>&1 \
    || { cat "$dir/configure.log" >&2; die "configuring the $variant build failed"; }
  log "building ($variant) in $dir"
  cmake --build "$dir" -j "$(nproc)" >"$dir/build.log" 2>&1 \
    || { grep -E -B2 -A12 'error|Error' "$dir/build.log" | head -120 >&2; die "the $variant build failed; full log: $dir/build.log"; }
}

# Where the examples find photographs: scikit-image's sample images (Debian's python3-skimage).
SKIMAGE_PHOTOS=/usr/lib/python3/dist-packages/skimage/data
require_photos() {
  [[ -f "$SKIMAGE_PHOTOS/astronaut.png" ]] || die "no scikit-image sample photographs at $SKIMAGE_PHOTOS (install python3-skimage)"
}

# Runs tessera-train of build <build> on ${TESSERA_RANKS:-4} ranks with config <file>; the
# remaining arguments go to tessera-train and win over the file. A fresh run starts a fresh
# metrics file <metrics>.
#   train_example <build> <what> <config file> <metrics file> [tessera-train arguments...]
train_example() {
  local build="$1" what="$2" config="$3" metrics="$4"
  shift 4
  rm -f "$metrics"
  local launcher
  launcher=$(command -v mpiexec.mpich || command -v mpiexec) || die "no mpiexec found"
  log "training $what on ${TESSERA_RANKS:-4} ranks (settings: $config)"
  "$launcher" -n "${TESSERA_RANKS:-4}" "$build/apps/tessera-train" --config "$config" "$@"
}

# The demo's layout (scripts/demo.sh, bench/mainjob): one rank a core of this machine and
# never more — 2x2 tiles of every image from 4 cores up (the remaining factor of 4 on
# samples), halves on 2 or 3 cores, one rank on 1; TESSERA_RANKS sets the count instead.
demo_ranks() {
  local cores
  cores="$(nproc)"
  if [[ -n ${TESSERA_RANKS:-} ]]; then
    [[ $TESSERA_RANKS =~ ^[1-9][0-9]*$ ]] || die "TESSERA_RANKS must be a positive whole number, got '$TESSERA_RANKS'"
    echo "$TESSERA_RANKS"
  elif ((cores >= 4)); then echo $((cores / 4 * 4))
  elif ((cores >= 2)); then echo 2
  else echo 1
  fi
}
# The demo's grid for `ranks` ranks: 2x2 over space when 4 divide them, else 1x2 when 2 do.
demo_grid() {
  local ranks="$1"
  if ((ranks % 4 == 0)); then echo "$((ranks / 4))x2x2"
  elif ((ranks % 2 == 0)); then echo "$((ranks / 2))x1x2"
  else echo "${ranks}x1x1"
  fi
}

# The directory of the Fashion-MNIST IDX files (SOURCE, default Debian's
# dataset-fashion-mnist). Where they are missing it says so and fails with 77, the skip
# code: use as  source_dir="$(fashion_mnist_source)" || exit 77
fashion_mnist_source() {
  local dir="${SOURCE:-/usr/share/datasets/fashion-mnist}" file
  for file in train-images-idx3-ubyte.gz train-labels-idx1-ubyte.gz t10k-images-idx3-ubyte.gz t10k-labels-idx1-ubyte.gz; do
    if [[ ! -f $dir/$file ]]; then
      echo "tessera: skip: no Fashion-MNIST IDX files in $dir (install dataset-fashion-mnist)" >&2
      return 77
    fi
  done
  printf '%s\n' "$dir"
}

# The demo's HDF5 data set, printed as its directory: made with MAKE_DATA (tessera-data) from
# the IDX files in SOURCE_DIR into BUILD/data/fashion-mnist when missing there, or, with
# LIMIT > 0, a set of the first LIMIT images made in SCRATCH (a smoke test's).
#   fashion_mnist_h5 MAKE_DATA SOURCE_DIR BUILD SCRATCH LIMIT
fashion_mnist_h5() {
  local make_data="$1" source_dir="$2" build="$3" scratch="$4" limit="$5" data
  if ((limit > 0)); then
    data="$scratch/data"
    "$make_data" fashion-mnist --source "$source_dir" --out "$data" --limit "$limit" >/dev/null || return 1
  else
    data="$build/data/fashion-mnist"
    if [[ ! -f $data/fashion-mnist-train.h5 || ! -f $data/fashion-mnist-test.h5 ]]; then
      "$make_data" fashion-mnist --source "$source_dir" --out "$data" >&2 || return 1
    fi
  fi
  printf '%s\n' "$data"
}

# One of the demo's settings: the value of the `key = value` line <key> of the config
# scripts/demo.sh writes; <default> when it sets none (no default: an error).
#   demo_setting <key> [default]
demo_setting() {
  local value
  value="$(awk -v key="$1" '/<<CONFIG$/ { on = 1; next } /^CONFIG$/ { on = 0 }
                            on && $1 == key && $2 == "=" { print $3; exit }' "$TESSERA_ROOT/scripts/demo.sh")"
  if [[ -z $value ]]; then
    [[ $# -ge 2 ]] || die "scripts/demo.sh sets no '$1'"
    value="$2"
  fi
  printf '%s\n' "$value"
}

# What every example does first: install the dependencies and build the CPU variant in
# ${TESSERA_BUILD_DIR:-<repo>/build}; sets `build`. TESSERA_PREBUILT_BUILD names a build
# to use as it is instead (the examples' smoke tests run inside one).
prepare_example_build() {
  if [[ -n ${TESSERA_PREBUILT_BUILD:-} ]]; then
    build="$(cd "$TESSERA_PREBUILT_BUILD" && pwd)" || die "no build directory '$TESSERA_PREBUILT_BUILD'"
    return
  fi
  "$TESSERA_ROOT/scripts/setup-deps.sh"
  build="${TESSERA_BUILD_DIR:-$TESSERA_ROOT/build}"
  build_variant cpu "$build"
}

# The arguments every bench/*/ script runner takes: <build dir> [python]. -h/--help prints
# the calling script's header comment (exit 0), no argument prints it to stderr (exit 2).
# Sets `build` (absolute) and `python` (default: the bench venv's); then checks that each
# named program of the build exists (paths in the build), e.g.
#   bench_arguments "$@" -- bench/layers/bench_layers apps/tessera-train
bench_arguments() {
  local script="${BASH_SOURCE[1]}"
  local header='NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }'
  case "${1:-}" in
    -h|--help) awk "$header" "$script"; exit 0 ;;
    ""|--) awk "$header" "$script" >&2; exit 2 ;;
  esac
  build="$(cd "$1" && pwd)" || die "no build directory '$1'"
  python="$(bench_venv_default)/bin/python"
  if [[ $# -ge 2 && $2 != -- ]]; then python="$2"; fi
  while [[ $# -gt 0 && $1 != -- ]]; do shift; done
  [[ $# -gt 0 ]] && shift
  local exe
  for exe in "$@"; do
    [[ -x "$build/$exe" ]] || die "$build/$exe is missing: cmake --build $build --target $(basename "$exe")"
  done
}

# ccache keys on paths relative to the checkout, so clones at other paths (CI's fresh
# clone, a second worktree) share its entries.
export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$TESSERA_ROOT}"
export CCACHE_NOHASHDIR="${CCACHE_NOHASHDIR:-1}"
