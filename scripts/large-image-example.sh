#!/usr/bin/env bash
# The second example (docs/train-app.md): a fully convolutional denoiser trained on
# megapixel natural photographs, each image cut into 4 tiles across 4 MPI ranks.
# The photographs are scikit-image's sample images (Debian's python3-skimage), resized to
# 1024x1024; the model sees each with Gaussian noise (sigma 0.1) and learns the clean one.
# Arguments go to tessera-train and win over the settings below, e.g. --steps 100.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh"

prepare_example_build

require_photos
photos="$SKIMAGE_PHOTOS"
out="$build/large-image"
size="${TESSERA_IMAGE_SIZE:-1024x1024}"
mkdir -p "$out"
convert() {  # convert <file> <photos...>
  local file="$1"
  shift
  [[ -f "$file" ]] || "$build/apps/data/tessera-data" images --resize --size "$size" --out "$file" "$@"
}
convert "$out/photos-train-$size.h5" "$photos"/{astronaut,coffee,chelsea,rocket,motorcycle_left,horse,camera,moon}.*
convert "$out/photos-val-$size.h5" "$photos"/{hubble_deep_field,retina}.jpg

cat >"$out/example.cfg" <<CONFIG
model = denoise-dilated
data = $out/photos-train-$size.h5
val-data = $out/photos-val-$size.h5
noise = 0.1
grid = 1x2x2
batch = 2
steps = 40
optimizer = adam
lr = 0.001
save = $out/denoise-dilated.h5
metrics = $out/metrics.jsonl
CONFIG
train_example "$build" denoise-dilated "$out/example.cfg" "$out/metrics.jsonl" "$@"
