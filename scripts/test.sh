#!/usr/bin/env bash
# Installs what is missing, builds Tessera (CPU), and runs its tests with ctest.
# Extra arguments go to ctest, e.g. `./scripts/test.sh -L unit` or `-R halo`.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh"

"$TESSERA_ROOT/scripts/setup-deps.sh"
build="${TESSERA_BUILD_DIR:-$TESSERA_ROOT/build}"
build_variant cpu "$build"
cd "$build"
ctest --output-on-failure -j "$(nproc)" "$@"
