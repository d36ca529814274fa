#!/usr/bin/env bash
# Packs a CUDA build to run on a GPU machine that cannot build it (a compute node with no
# compiler, no package registry and no MPI): the build's programs and test lists, MPICH's
# launcher, HDF5's h5diff, h5dump and h5ls, and every shared library they load that a CUDA
# machine lacks (glibc, the C++ runtime and the CUDA libraries — runtime, cuBLAS, cuDNN,
# NCCL — come from the GPU machine). scripts/gpu-check.sh --bundle FILE unpacks and runs it.
#
#   scripts/gpu-bundle.sh [--build DIR] [--out FILE]
#
#   --build DIR   the CUDA build (default: build-cuda in the checkout)
#   --out FILE    the bundle, a .tar.xz (default: DIR/tessera-gpu-bundle.tar.xz)
#
# The test lists keep the paths of this machine; gpu-check.sh rewrites them where it unpacks.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh"

usage() { awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "${BASH_SOURCE[0]}"; }
build="$TESSERA_ROOT/build-cuda"
out=""
while (($#)); do
  case "$1" in
    -h|--help) usage; exit 0 ;;
    --build|--out)
      (($# >= 2)) && [[ -n $2 ]] || { printf 'gpu-bundle: %s needs a value\n' "$1" >&2; exit 2; }
      [[ $1 == --build ]] && build="$2" || out="$2"
      shift 2 ;;
    *) printf 'gpu-bundle: unknown option %s\n' "$1" >&2; usage >&2; exit 2 ;;
  esac
done
[[ -f $build/CMakeCache.txt ]] || die "$build is not a build directory (no CMakeCache.txt)"
grep -q '^TESSERA_ENABLE_CUDA:BOOL=ON' "$build/CMakeCache.txt" || die "$build is not a CUDA build (TESSERA_ENABLE_CUDA is not ON)"
build="$(cd "$build" && pwd)"
out="${out:-$build/tessera-gpu-bundle.tar.xz}"

stage="$(mktemp -d)"
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/build" "$stage/lib" "$stage/bin"

# Programs and what the tests read from the build tree, at their relative paths.
(cd "$build" && find . -path ./CMakeFiles -prune -o -path '*/CMakeFiles/*' -prune -o -path ./Testing -prune -o \
   -type f \( -executable -o -name CTestTestfile.cmake -o -name '*.cfg' -o -path './tests/*.txt' \) -print) >"$stage/files"
(cd "$build" && tar -cf - -T "$stage/files") | tar -xf - -C "$stage/build"
programs=()
is_elf() { [[ $(head -c 4 "$1" | od -An -c | tr -d ' ') == '177ELF' ]]; }
while read -r f; do
  [[ -x $build/$f ]] && is_elf "$build/$f" && programs+=("$build/$f")
done <"$stage/files"
for p in "${programs[@]}"; do strip --strip-unneeded "$stage/build/${p#"$build"/}"; done

# MPICH's launcher (mpiexec is Hydra) and its proxy.
mpiexec="$(readlink -f "$(command -v mpiexec)")"
proxy="$(dirname "$mpiexec")/hydra_pmi_proxy"
[[ -x $proxy ]] || die "no hydra_pmi_proxy beside $mpiexec: only MPICH's Hydra launcher can be bundled"
cp "$mpiexec" "$stage/bin/mpiexec"
cp "$proxy" "$stage/bin/hydra_pmi_proxy"
programs+=("$mpiexec" "$proxy")

# HDF5's tools, which tests that compare checkpoints run (a GPU machine rarely has them).
tools=()
for var in TESSERA_H5DIFF TESSERA_H5DUMP TESSERA_H5LS; do
  tool="$(sed -n "s/^$var:FILEPATH=//p" "$build/CMakeCache.txt")"
  [[ -x $tool ]] || continue
  cp "$(readlink -f "$tool")" "$stage/bin/$(basename "$tool")"
  programs+=("$tool")
  tools+=("$tool")
done

# Shared libraries: all that the programs load, less glibc's and CUDA's own.
skip='^(libc|libm|libdl|librt|libpthread|libresolv|ld-linux-x86-64|libstdc\+\+|libgcc_s|libcudart|libcublas|libcublasLt|libcudnn[a-z_]*|libnccl|libcuda)\.so'
for p in "${programs[@]}"; do ldd "$p"; done | awk '/=> \//{print $1, $3}' | sort -u | while read -r name path; do
  [[ $name =~ $skip ]] || cp -L "$path" "$stage/lib/$name"
done
# UCX loads its transports from ucx/ beside libucs.
ucs="$(ldd "${programs[0]}" | awk '/libucs\.so/{print $3}')"
if [[ -n $ucs && -d $(dirname "$ucs")/ucx ]]; then
  mkdir -p "$stage/lib/ucx"
  cp -L "$(dirname "$ucs")"/ucx/*.so.0 "$stage/lib/ucx/"
  for m in "$stage"/lib/ucx/*.so.0; do ldd "$m"; done | awk '/=> \//{print $1, $3}' | sort -u | while read -r name path; do
    [[ $name =~ $skip || -e $stage/lib/$name ]] || cp -L "$path" "$stage/lib/$name"
  done
fi

{
  echo "build_dir=$build"
  echo "source_dir=$TESSERA_ROOT"
  echo "mpiexec=$(command -v mpiexec)"
  echo "cmake=$(command -v cmake)"
  echo "tools=${tools[*]}"
  echo "made=$(date -u +%FT%TZ) on $(hostname)"
  echo "cuda=$(nvcc --version 2>/dev/null | tail -1 || echo unknown)"
} >"$stage/manifest"
rm "$stage/files"
XZ_OPT="-6 -T$(nproc)" tar -cJf "$out" -C "$stage" .
log "wrote $out ($(du -h "$out" | cut -f1)): ${#programs[@]} programs, $(ls "$stage/lib" | wc -l) libraries"
