#!/usr/bin/env bash
# Installs what is missing, builds Tessera (CPU), and runs the main job on 4 MPI ranks.
# Extra arguments go to the program, e.g. `./scripts/demo.sh --shape 8x3x1024x1024`;
# TESSERA_RANKS sets the rank count.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh"

"$TESSERA_ROOT/scripts/setup-deps.sh"
build="${TESSERA_BUILD_DIR:-$TESSERA_ROOT/build}"
build_variant cpu "$build"
launcher=$(command -v mpiexec.mpich || command -v mpiexec) || die "no mpiexec found"
exec "$launcher" -n "${TESSERA_RANKS:-4}" "$build/apps/tessera-demo" --verbose "$@"
