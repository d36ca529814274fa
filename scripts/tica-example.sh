#!/usr/bin/env bash
# The unsupervised example (docs/train-app.md, "The TICA example"): the first stage of the
# Le et al. (2012) network trained with reconstruction TICA on natural photographs — the
# scikit-image sample images (Debian's python3-skimage) cut into 200x200 frames — on 4 MPI
# ranks, each holding the untied filters of its quarter of the positions. Draws the learned
# first-layer filters into filters.png.
# Arguments go to tessera-train and win over the settings below, e.g. --steps 1000.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh"

prepare_example_build

require_photos
photos="$SKIMAGE_PHOTOS"
out="$build/tica"
mkdir -p "$out"
frames="$out/frames-200x200.h5"
[[ -f "$frames" ]] || "$build/apps/data/tessera-data" images --tile --size 200x200 --out "$frames" \
  "$photos"/{astronaut,coffee,chelsea,rocket,motorcycle_left,motorcycle_right,horse,hubble_deep_field,retina}.* \
  "$photos"/{grass,gravel,brick,camera,moon,coins,page,text,clock_motion}.*

# lcn first: each frame's local contrast, as the network's own LCN gives the later stages.
cat >"$out/example.cfg" <<CONFIG
model = lcn(k=9),local(out=8,k=18,stride=4),l2pool(k=5,stride=1,pad=2)
objective = tica
data = $frames
grid = 1x2x2
batch = 8
steps = 200
optimizer = adamw
lr = 0.003
weight-decay = 5
save = $out/tica.h5
filters-png = $out/filters.png
metrics = $out/metrics.jsonl
CONFIG
train_example "$build" "TICA (stage 1 of le2012)" "$out/example.cfg" "$out/metrics.jsonl" "$@"
log "checkpoint, filters and metrics are in $out"
