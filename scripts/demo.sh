#!/usr/bin/env bash
# The main job: installs what is missing, builds Tessera (CPU), converts Fashion-MNIST and
# trains the fashion-cnn preset with every image cut into tiles across MPI ranks, then
# evaluates on the 10,000 test images and writes a checkpoint, the learned first-layer
# filters as a PNG, and per-step metrics (docs/training.md).
#
# Ranks and grid come from the cores this machine gives the script (nproc), one rank a
# core and never more: 4 cores or more split every image 2x2 (a 2-D spatial grid), with
# the remaining factor of 4 on samples (8 cores: 2x2x2); 2 or 3 cores split it in two
# (1x1x2); 1 core runs 1x1x1. TESSERA_RANKS sets the rank count instead (the grid follows
# the same rule). Options after the script name go to tessera-train and win over the
# demo's settings, e.g. `./scripts/demo.sh --epochs 5` or `./scripts/demo.sh --grid 2x1x1`.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh"

prepare_example_build

data="$build/data/fashion-mnist"
if [[ ! -f "$data/fashion-mnist-train.h5" || ! -f "$data/fashion-mnist-test.h5" ]]; then
  "$build/apps/data/tessera-data" fashion-mnist --out "$data"
fi

cores="$(nproc)"
ranks="$(demo_ranks)" || exit 1
export TESSERA_RANKS="$ranks"
log "$cores cores: $ranks ranks on grid $(demo_grid "$ranks") (TESSERA_RANKS and --grid override)"

out="$build/demo"
mkdir -p "$out"
# The demo's settings as a config file, so that any of them can be overridden on the
# command line (tessera-train lets the command line win over --config).
cat >"$out/demo.cfg" <<CONFIG
model = fashion-cnn
data = $data/fashion-mnist-train.h5
val-data = $data/fashion-mnist-test.h5
grid = $(demo_grid "$ranks")
batch = 64
epochs = 2
optimizer = adam
lr = 0.002
save = $out/fashion-cnn.h5
filters-png = $out/filters.png
metrics = $out/metrics.jsonl
CONFIG
train_example "$build" fashion-cnn "$out/demo.cfg" "$out/metrics.jsonl" "$@"
log "checkpoint, filters and metrics are in $out"
