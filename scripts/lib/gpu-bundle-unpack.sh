# Unpacking a bundle from scripts/gpu-bundle.sh on the GPU machine. Sourced by
# scripts/gpu-check.sh (after common.sh), not run.

# unpack_bundle FILE DIR [PYTHON]: the bundle's build tree becomes DIR, its launcher and
# libraries DIR/bundle-runtime; the test lists and configs are pointed at this checkout, DIR,
# the bundle's mpiexec, this machine's cmake and PYTHON; PATH and LD_LIBRARY_PATH are set
# for this shell and its children. Refuses to replace a directory that is not a bundle's.
unpack_bundle() {
  local file="$1" dir="$2" python="${3:-python3}"
  if [[ -e $dir && ! -e $dir/bundle-runtime/manifest ]]; then
    die "--build $dir exists and was not unpacked from a bundle: name an empty or new directory"
  fi
  local stage
  stage="$(mktemp -d)"
  tar -xJf "$file" -C "$stage" || die "$file is not a bundle from scripts/gpu-bundle.sh (tar could not unpack it)"
  [[ -f $stage/manifest && -d $stage/build ]] || die "$file is not a bundle from scripts/gpu-bundle.sh (no manifest)"
  rm -rf "$dir"
  mkdir -p "$(dirname "$dir")"
  mv "$stage/build" "$dir"
  mkdir -p "$dir/bundle-runtime"
  mv "$stage/manifest" "$stage/lib" "$stage/bin" "$dir/bundle-runtime/"
  rm -rf "$stage"
  dir="$(cd "$dir" && pwd)"

  local old_build old_source old_mpiexec old_cmake
  old_build="$(sed -n 's/^build_dir=//p' "$dir/bundle-runtime/manifest")"
  old_source="$(sed -n 's/^source_dir=//p' "$dir/bundle-runtime/manifest")"
  old_mpiexec="$(sed -n 's/^mpiexec=//p' "$dir/bundle-runtime/manifest")"
  old_cmake="$(sed -n 's/^cmake=//p' "$dir/bundle-runtime/manifest")"
  local cmake_now python_now venv
  cmake_now="$(command -v cmake)" || die "cmake (with ctest) is not on PATH"
  python_now="$(command -v "$python" || echo "$python")"
  venv="$(bench_venv_default)/bin/python"
  # The build path goes first: it lies inside the source path.
  find "$dir" \( -name CTestTestfile.cmake -o -name '*.cfg' \) -print0 | xargs -0 sed -i \
    -e "s#$old_build#$dir#g" -e "s#$old_source#$TESSERA_ROOT#g" \
    -E -e "s#$old_mpiexec([\"; ])#$dir/bundle-runtime/bin/mpiexec\\1#g" \
    -e "s#$old_cmake([\"; ])#$cmake_now\\1#g" -e "s#\"$venv\"#\"$python_now\"#g"
  local tool
  for tool in $(sed -n 's/^tools=//p' "$dir/bundle-runtime/manifest"); do
    find "$dir" -name CTestTestfile.cmake -print0 | xargs -0 sed -i "s#\"$tool\"#\"$dir/bundle-runtime/bin/$(basename "$tool")\"#g"
  done
  find "$dir" -name CTestTestfile.cmake -exec cp {} {}.relocated \;

  bundle_env "$dir"
  log "bundle unpacked into $dir (built $(sed -n 's/^made=//p' "$dir/bundle-runtime/manifest")); CUDA libraries from $libdirs"
}

# bundle_env DIR: PATH and LD_LIBRARY_PATH for the bundle unpacked in DIR, with the CUDA
# libraries of this machine (its toolkit, or the wheels beside its torch); sets libdirs.
bundle_env() {
  local dir="$1"
  libdirs=""; local lib found
  for lib in libcudart.so.13 libcublas.so.13 libcublasLt.so.13 libcudnn.so.9 libnccl.so.2; do
    # The wheels beside a torch first: their cuDNN and NCCL are the versions torch was built
    # with (a system cuDNN may be older than the headers the bundle was built against).
    found="$(find /opt /usr/local -name "$lib" 2>/dev/null | awk '!f {print; f = 1}' || true)"
    [[ -n $found ]] || found="$(ldconfig -p 2>/dev/null | awk -v l="$lib" '$1 == l && !f {print $NF; f = 1}' || true)"
    [[ -n $found ]] || die "this machine has no $lib (a CUDA 13 toolkit, cuDNN 9 and NCCL 2 are needed)"
    [[ :$libdirs: == *:$(dirname "$found"):* ]] || libdirs+="${libdirs:+:}$(dirname "$found")"
  done
  export PATH="$dir/bundle-runtime/bin:$PATH"
  export LD_LIBRARY_PATH="$dir/bundle-runtime/lib:$libdirs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  export HYDRA_LAUNCHER=fork  # one node: no ssh
  local missing
  missing="$(find "$dir" -type f -executable -path '*/tests/*' -print -quit | xargs ldd | awk '/not found/{print $1}' | tr '\n' ' ' || true)"
  [[ -z $missing ]] || die "the bundle's programs miss libraries here: $missing"
}

# set_bundle_launcher DIR LAUNCHER TIMEOUT: every test program of the unpacked bundle in DIR
# runs under LAUNCHER (a ;-list, empty for none; inside mpiexec for MPI tests) with TIMEOUT
# seconds, as TESSERA_TEST_LAUNCHER and TESSERA_TEST_TIMEOUT do when configuring.
set_bundle_launcher() {
  local dir="$1" launcher="$2" timeout="$3" words="" w
  if [[ -n $launcher ]]; then
    IFS=';' read -ra launcher <<<"$launcher"
    for w in "${launcher[@]}"; do words+="\"$w\" "; done
  fi
  local mpiexec="$dir/bundle-runtime/bin/mpiexec" f
  while IFS= read -r -d '' f; do
    sed -E -e "s#^(add_test\\(\\[=\\[[^]]*\\]=\\] \"$mpiexec\" \"-n\" \"[0-9]+\" )#\\1$words#" \
           -e "\\#^add_test\\(\\[=\\[[^]]*\\]=\\] \"$mpiexec\"#!s#^(add_test\\(\\[=\\[[^]]*\\]=\\] )(\"$dir/)#\\1$words\\2#" \
           -e "s#TIMEOUT \"[0-9]+\"#TIMEOUT \"$timeout\"#" "$f" >"${f%.relocated}"
  done < <(find "$dir" -name CTestTestfile.cmake.relocated -print0)
}
