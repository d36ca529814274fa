#!/usr/bin/env bash
# The first run on a GPU, in one command. On a machine with an NVIDIA GPU: installs what the
# CUDA build needs (scripts/setup-deps.sh --cuda), builds the CUDA variant, runs its tests
# (every test of a CUDA build carries the label `cuda`: partition invariance on every grid,
# two training runs bit-identical) plainly, then each under compute-sanitizer, then the
# layer benchmarks beside PyTorch's cuDNN (where PYTHON's torch sees the GPU) and the halo
# benchmark. Results go to bench/results/{tests,layers,halo}-gpu-<date>.md.
#
#   scripts/gpu-check.sh [--build DIR] [--bundle FILE] [--python PY] [--tools LIST]
#                        [--jobs N] [--sanitize-tests REGEX] [--skip-deps] [--skip-bench]
#
#   --build DIR    the CUDA build directory (default: build-cuda in the checkout)
#   --bundle FILE  run a build packed elsewhere by scripts/gpu-bundle.sh instead of building
#                  (a GPU node with no compiler or registry): unpacked into --build's
#                  directory, its test lists pointed at this checkout and the bundle's
#                  mpiexec; nothing is installed
#   --jobs N       tests run at once, all sharing the GPUs (default: the GPU count)
#   --sanitize-tests REGEX
#                  only the tests matching REGEX run under compute-sanitizer (default: all)
#   --python PY    a python with a CUDA torch (default: the bench venv's; without a CUDA
#                  torch the layer table has Tessera's column only)
#   --tools LIST   compute-sanitizer tools, comma-separated (default:
#                  memcheck,racecheck,synccheck; "none" skips the sanitizer passes)
#   --skip-deps    do not run scripts/setup-deps.sh --cuda
#   --skip-bench   stop after the tests
#
# Where no NVIDIA GPU is visible it refuses with one line and exit status 1, before doing
# anything (TESSERA_NVIDIA_SMI names the nvidia-smi to ask; default: the one on PATH).
# Unknown options: the usage and exit status 2.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh"

usage() { awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "${BASH_SOURCE[0]}"; }
bad_usage() {
  printf 'gpu-check: %s\n' "$1" >&2
  usage >&2
  exit 2
}

build="$TESSERA_ROOT/build-cuda"
python="$(bench_venv_default)/bin/python"
tools="memcheck,racecheck,synccheck"
deps=1
bench=1
bundle=""
jobs=""
sanitize_tests=""
while (($#)); do
  case "$1" in
    -h|--help) usage; exit 0 ;;
    --build|--python|--tools|--bundle|--jobs|--sanitize-tests)
      (($# >= 2)) && [[ -n $2 ]] || bad_usage "$1 needs a value"
      case "$1" in
        --build) build="$2" ;;
        --python) python="$2" ;;
        --tools) tools="$2" ;;
        --bundle) bundle="$2" ;;
        --jobs) jobs="$2" ;;
        --sanitize-tests) sanitize_tests="$2" ;;
      esac
      shift 2 ;;
    --skip-deps) deps=0; shift ;;
    --skip-bench) bench=0; shift ;;
    *) bad_usage "unknown option '$1'" ;;
  esac
done
[[ $tools =~ ^(none|(memcheck|racecheck|synccheck|initcheck)(,(memcheck|racecheck|synccheck|initcheck))*)$ ]] \
  || bad_usage "--tools '$tools' is not a comma-separated list of memcheck, racecheck, synccheck, initcheck (or none)"
[[ -z $jobs || $jobs =~ ^[1-9][0-9]*$ ]] || bad_usage "--jobs '$jobs' is not a positive whole number"
[[ -z $bundle || -f $bundle ]] || bad_usage "--bundle '$bundle' is not a file"

# No GPU, no run: one line, before anything is installed or built.
smi="${TESSERA_NVIDIA_SMI:-nvidia-smi}"
command -v "$smi" >/dev/null 2>&1 || die "no NVIDIA GPU here ($smi not found): gpu-check needs a machine with one"
gpus="$("$smi" -L 2>/dev/null | grep -c '^GPU [0-9]' || true)"
((gpus > 0)) || die "no NVIDIA GPU here ($smi lists no device): gpu-check needs a machine with one"

export PATH="$PATH:/usr/local/cuda/bin"
jobs="${jobs:-$gpus}"
if [[ -n $bundle ]]; then
  source "$TESSERA_ROOT/scripts/lib/gpu-bundle-unpack.sh"
  unpack_bundle "$bundle" "$build" "$python"
else
  ((deps)) && "$TESSERA_ROOT/scripts/setup-deps.sh" --cuda
  build_variant cuda "$build"
fi
build="$(cd "$build" && pwd)"
sanitizer="$(command -v compute-sanitizer || true)"
[[ $tools == none || -n $sanitizer ]] || die "compute-sanitizer not found (it comes with the CUDA toolkit; put its bin/ on PATH)"

date="$(date +%F)"
results="$TESSERA_ROOT/bench/results"
mkdir -p "$results"
device="$("$smi" --query-gpu=name,driver_version,memory.total --format=csv,noheader | head -1)"
tests_md="$results/tests-gpu-$date.md"
{
  echo "# The CUDA build's tests — $date"
  echo
  echo "Written by \`scripts/gpu-check.sh\`. GPU: $device ($gpus visible). $(nvcc --version | tail -1)."
  echo
} >"$tests_md"

# ctest over the `cuda` label with TESSERA_TEST_LAUNCHER = the given launcher (empty: none);
# appends the summary to the results file. Returns ctest's status.
run_tests() {
  local title="$1" launcher="$2" timeout="$3" log="$build/gpu-check-${1// /-}.log" status=0 select=()
  if [[ -n $bundle ]]; then
    set_bundle_launcher "$build" "$launcher" "$timeout"
  else
    cmake -S "$TESSERA_ROOT" -B "$build" "-DTESSERA_TEST_LAUNCHER=$launcher" "-DTESSERA_TEST_TIMEOUT=$timeout" \
      >"$build/gpu-check-configure.log" 2>&1 || { cat "$build/gpu-check-configure.log" >&2; die "reconfiguring $build failed"; }
  fi
  [[ -n $launcher && -n $sanitize_tests ]] && select=(-R "$sanitize_tests")
  # The launch check reads the symbols of the programs; a bundle's are stripped, so it runs
  # where the build was made (CI does, after the CUDA build), not here.
  [[ -n $bundle ]] && select+=(-E '^kernels_launch_by_value$')
  log "tests: $title"
  # Slurm and multi-host tests start daemons and namespaces of their own: not a GPU check.
  ctest --test-dir "$build" -L cuda -LE 'slurm|multihost' "${select[@]}" --output-on-failure -j "$jobs" >"$log" 2>&1 || status=$?
  {
    echo "## $title"
    echo
    echo '```'
    sed -n '/tests passed/,$p' "$log"
    echo '```'
    echo
  } >>"$tests_md"
  tail -3 "$log" >&2
  return "$status"
}
failed=()
restore() {
  if [[ -n $bundle ]]; then set_bundle_launcher "$build" "" 300
  else cmake -S "$TESSERA_ROOT" -B "$build" -DTESSERA_TEST_LAUNCHER= -DTESSERA_TEST_TIMEOUT=300 >/dev/null 2>&1; fi
}
trap restore EXIT
run_tests "plain" "" 300 || failed+=("plain")
if [[ $tools != none ]]; then
  IFS=, read -ra tool_list <<<"$tools"
  for tool in "${tool_list[@]}"; do
    # Sanitized programs run 10-100x slower: a longer timeout; any report fails the test.
    # Only the test program is followed (not processes it may start), and errors that
    # libraries return to their own probes are not reports (NCCL asks for kernels of other
    # architectures at start-up); Tessera checks every status it is handed.
    run_tests "compute-sanitizer $tool" \
      "$sanitizer;--tool;$tool;--target-processes;application-only;--report-api-errors;no;--error-exitcode;86;--print-limit;20" 6000 \
      || failed+=("$tool")
  done
fi
restore
log "test results: $tests_md"

if ((bench)); then
  if "$python" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
    DEVICE=cuda OUT="$results/layers-gpu-$date.md" "$TESSERA_ROOT/bench/layers/run.sh" "$build" "$python"
  else
    log "layers: $python has no CUDA torch: Tessera's times only (pass --python with one for the comparison)"
    {
      echo "# bench_layers on the CUDA build — $date (no CUDA torch for the comparison)"
      echo
      echo "GPU: $device."
      echo
      echo '```'
      "$build/bench/layers/bench_layers"
      echo '```'
    } >"$results/layers-gpu-$date.md"
  fi
  halo_md="$results/halo-gpu-$date.md"
  {
    echo "# bench_halo on the CUDA build — $date"
    echo
    echo "Written by \`scripts/gpu-check.sh\`. GPU: $device ($gpus visible); ranks beyond the GPU count share one."
    for transport in mpi-staged nccl; do
      for ranks in 2 4; do
        # NCCL wants one GPU a rank.
        [[ $transport == nccl ]] && ((ranks > gpus)) && continue
        echo
        echo "## $transport, $ranks ranks"
        echo
        echo '```'
        mpiexec -n "$ranks" "$build/bench/halo/bench_halo" --transport "$transport" 2>&1 || echo "(exit status $?)"
        echo '```'
      done
    done
  } >"$halo_md"
  log "halo results: $halo_md"
fi

((${#failed[@]} == 0)) || die "tests failed: ${failed[*]} (logs: $build/gpu-check-*.log; summary: $tests_md)"
log "gpu-check: all passed"
