#!/usr/bin/env bash
# Fails when a kernel of a CUDA build launches through constant memory instead of by value.
#
#   scripts/check-kernel-launches.sh BUILD_DIR
#
# Kokkos 3.4's CUDA backend passes a kernel's functor and policy by value when they take
# less than 512 bytes; otherwise it copies them into constant memory, with a host
# synchronisation on every launch (Kokkos_Cuda_KernelLaunch.hpp). The choice is made at
# compile time, and only the chosen launcher is instantiated, so a binary that contains
# Kokkos::Impl::cuda_parallel_launch_constant_memory<...> has such a kernel: this reads the
# symbols of every program and library under BUILD_DIR (no GPU needed) and names each
# offending kernel's functor. layers/launch_size.hpp checks single call sites at compile
# time; this checks all of them, Kokkos's own and lambdas included.
set -euo pipefail

die() {
  echo "check-kernel-launches: $*" >&2
  exit 2
}

(($# == 1)) || die "usage: scripts/check-kernel-launches.sh BUILD_DIR"
build="$1"
[[ -d $build ]] || die "no build directory '$build'"
[[ -f $build/CMakeCache.txt ]] || die "'$build' is not a CMake build directory (no CMakeCache.txt)"
grep -q '^TESSERA_ENABLE_CUDA:BOOL=ON' "$build/CMakeCache.txt" || die "'$build' is not a CUDA build (TESSERA_ENABLE_CUDA is not ON)"
command -v nm >/dev/null || die "nm (binutils) is not installed"

binaries=()
while IFS= read -r -d '' f; do
  # ELF files only: scripts and data in the build tree are skipped.
  [[ "$(head -c 4 "$f" | od -An -c | tr -d ' ')" == '177ELF' ]] && binaries+=("$f")
done < <(find "$build" -path '*/CMakeFiles' -prune -o -type f \( -perm -u+x -o -name '*.a' -o -name '*.so*' \) -print0)
((${#binaries[@]} > 0)) || die "no programs or libraries under '$build' (build it first)"

# The launcher's template argument is the driver, ParallelFor/Reduce/Scan<Functor, Policy, Cuda>:
# print the driver kind and the functor (a lambda shows as the function that defines it).
offenders="$(for f in "${binaries[@]}"; do nm -C "$f" 2>/dev/null; done |
  sed -n 's/.*cuda_parallel_launch_constant_memory<Kokkos::Impl::\(Parallel[A-Za-z]*\)<\(.*\)/\1 \2/p' |
  sed -E 's/__nv_hdl_wrapper_t<.*\), &\((void )?([A-Za-z_0-9:]+).*/a lambda in \2/; s/^(Parallel[A-Za-z]*) (.{0,160}).*/\1 \2/' |
  sort -u)"
if [[ -n $offenders ]]; then
  echo "check-kernel-launches: kernels whose arguments go through constant memory (a host synchronisation per launch; keep functors under 512 bytes: layers/launch_size.hpp):" >&2
  sed 's/^/  /' <<<"$offenders" >&2
  exit 1
fi
echo "check-kernel-launches: every kernel in ${#binaries[@]} binaries of $build launches by value"
