#!/usr/bin/env bash
# Installs what Tessera needs to build: Debian packages, and Kokkos built from a Debian
# source package into a cached prefix outside the repository. Idempotent: a rerun only
# checks, in seconds.
#
#   scripts/setup-deps.sh            packages + Kokkos (OpenMP backend)
#   scripts/setup-deps.sh --cuda     also Kokkos (CUDA backend, TESSERA_CUDA_ARCH, default HOPPER90)
#
# TESSERA_DEPS_PREFIX (default /opt/tessera-deps) holds the Kokkos installs.
# A user with a Kokkos of their own skips this and points Kokkos_ROOT at it.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$here/lib/common.sh"

want_cuda=0
for arg in "$@"; do
  case "$arg" in
    --cuda) want_cuda=1 ;;
    -h|--help) sed -n '2,10p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown option '$arg' (try --help)" ;;
  esac
done

# One list, read here and by the closure check in .ci/run (scripts/check-package-closure.py).
package_list="$here/lib/debian-packages.txt"
mapfile -t packages < <(sed -e 's/#.*//' -e 's/[[:space:]]//g' -e '/^$/d' "$package_list")
((${#packages[@]} > 0)) || die "no packages listed in $package_list"

install_packages() {
  local missing=()
  for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if ((${#missing[@]} == 0)); then
    log "Debian packages: all present"
    return
  fi
  [[ $(id -u) == 0 ]] || die "missing Debian packages (${missing[*]}) and not root: install them, then rerun"
  log "Debian packages: installing ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null 2>&1 \
    || die "apt-get install failed for: ${missing[*]}"
}

# A private apt configuration with deb-src entries, so that fetching sources never
# touches the machine's own apt state. Archive URI and keyring are read at run time.
private_apt() {
  local dir="$1" sources=/etc/apt/sources.list.d/debian.sources
  [[ -r $sources ]] || die "cannot read $sources to find the Debian archive"
  local uri key
  uri=$(awk '/^URIs:/ {print $2; exit}' "$sources")
  key=$(awk '/^Signed-By:/ {print $2; exit}' "$sources")
  [[ -n $uri && -n $key ]] || die "no URIs/Signed-By entry in $sources"
  mkdir -p "$dir/sources.list.d" "$dir/preferences.d" "$dir/lists/partial" "$dir/cache/archives/partial"
  cat >"$dir/sources.list.d/tessera-src.sources" <<EOF
Types: deb-src
URIs: $uri
Suites: sid bookworm
Components: main
Signed-By: $key
EOF
  APT_OPTS=(-o "Dir::Etc::SourceList=/dev/null" -o "Dir::Etc::SourceParts=$dir/sources.list.d"
            -o "Dir::Etc::Preferences=/dev/null" -o "Dir::Etc::PreferencesParts=$dir/preferences.d"
            -o "Dir::State::Lists=$dir/lists" -o "Dir::Cache=$dir/cache" -o "APT::Sandbox::User=root")
  apt-get "${APT_OPTS[@]}" update -qq
}

kokkos_version_of() {  # prints MAJOR.MINOR.PATCH as Kokkos's CMakeLists declares it
  local cml="$1/CMakeLists.txt" v=()
  for part in MAJOR MINOR PATCH; do
    v+=("$(sed -n "s/^ *set *( *Kokkos_VERSION_${part} *\([0-9]*\) *)/\1/Ip" "$cml" | head -1)")
  done
  [[ -n ${v[0]} && -n ${v[1]} && -n ${v[2]} ]] || die "cannot read the Kokkos version from $cml"
  printf '%d.%d.%02d\n' "${v[0]}" "${v[1]}" "${v[2]}"
}

# Fetches a Kokkos source tree into $KOKKOS_SRC. Routes, newest first: sid's standalone
# kokkos package, then the copy of Kokkos inside bookworm's trilinos package.
fetch_kokkos_source() {
  local work="$TESSERA_DEPS_PREFIX/work"
  rm -rf "$work"; mkdir -p "$work/dl"
  private_apt "$work/apt"
  if (cd "$work/dl" && apt-get "${APT_OPTS[@]}" source --download-only -qq kokkos/sid) >"$work/sid.log" 2>&1; then
    log "Kokkos: using sid's kokkos source package"
    tar -xf "$work"/dl/kokkos_*.orig.tar.* -C "$work"
    KOKKOS_SRC_TMP=$(find "$work" -mindepth 2 -maxdepth 2 -name CMakeLists.txt -path '*kokkos*' -printf '%h\n' | head -1)
  else
    log "Kokkos: sid's kokkos files are not served ($(grep -oE '[0-9]{3} +Not Found' "$work/sid.log" | head -1 || true)); falling back to bookworm's trilinos"
    (cd "$work/dl" && apt-get "${APT_OPTS[@]}" source --download-only -qq trilinos/bookworm) \
      || die "could not fetch bookworm's trilinos source package either"
    tar -xzf "$work"/dl/trilinos_*.orig.tar.gz -C "$work" --wildcards '*/packages/kokkos/*'
    KOKKOS_SRC_TMP=$(find "$work" -mindepth 3 -maxdepth 3 -type d -path '*/packages/kokkos' | head -1)
  fi
  [[ -n $KOKKOS_SRC_TMP && -f $KOKKOS_SRC_TMP/CMakeLists.txt ]] || die "no Kokkos tree found in the fetched source"
  local version; version=$(kokkos_version_of "$KOKKOS_SRC_TMP")
  local patches="$TESSERA_ROOT/cmake/patches/kokkos-$version"
  if [[ -d $patches ]]; then
    for p in "$patches"/*.patch; do
      patch -d "$KOKKOS_SRC_TMP" -p1 --quiet --forward <"$p" || die "patch $(basename "$p") does not apply to Kokkos $version"
    done
    log "Kokkos $version: applied $(ls "$patches"/*.patch | wc -l) patches from cmake/patches/kokkos-$version"
  fi
  rm -rf "$KOKKOS_SRC"
  mv "$KOKKOS_SRC_TMP" "$KOKKOS_SRC"
  echo "$version" >"$KOKKOS_SRC/.tessera-version"
  echo "$(patch_set_hash)" >"$KOKKOS_SRC/.tessera-patches"
  rm -rf "$work"
}

ensure_kokkos_source() {
  KOKKOS_SRC="$TESSERA_DEPS_PREFIX/src/kokkos"
  if [[ -f $KOKKOS_SRC/.tessera-patches && $(cat "$KOKKOS_SRC/.tessera-patches") == "$(patch_set_hash)" ]]; then
    return
  fi
  mkdir -p "$TESSERA_DEPS_PREFIX/src"
  fetch_kokkos_source
}

# Installs into kokkos-<version>-<backend>; kokkos-<backend> is a stable link to it.
build_kokkos() {  # backend: openmp | cuda
  local backend="$1" link
  link=$(kokkos_prefix "$backend")
  if [[ -f $link/.tessera-complete && $(cat "$link/.tessera-complete") == "$(patch_set_hash)" ]]; then
    log "Kokkos ($backend): cached at $(readlink -f "$link")"
    return
  fi
  ensure_kokkos_source
  local version; version=$(cat "$KOKKOS_SRC/.tessera-version")
  local flavour=$backend
  [[ $backend == cuda ]] && flavour="cuda-${TESSERA_CUDA_ARCH,,}"
  local prefix="$TESSERA_DEPS_PREFIX/kokkos-$version-$flavour"
  local build="$TESSERA_DEPS_PREFIX/build-$backend"
  local args=(-DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX="$prefix" -DCMAKE_CXX_STANDARD=17
              -DCMAKE_POSITION_INDEPENDENT_CODE=ON -DKokkos_ENABLE_OPENMP=ON -DKokkos_ENABLE_SERIAL=ON)
  if [[ $backend == cuda ]]; then
    command -v nvcc >/dev/null || [[ -x /usr/local/cuda/bin/nvcc ]] || die "the CUDA build of Kokkos needs nvcc (CUDA toolkit)"
    export PATH="$PATH:/usr/local/cuda/bin"
    args+=(-DKokkos_ENABLE_CUDA=ON -DKokkos_ENABLE_CUDA_LAMBDA=ON -DKokkos_ARCH_${TESSERA_CUDA_ARCH}=ON
           -DCMAKE_CXX_COMPILER="$KOKKOS_SRC/bin/nvcc_wrapper")
  fi
  log "Kokkos $version ($backend): building into $prefix"
  rm -rf "$build" "$prefix"
  cmake -S "$KOKKOS_SRC" -B "$build" "${args[@]}" >"$TESSERA_DEPS_PREFIX/kokkos-$backend-configure.log" 2>&1 \
    || die "Kokkos configure failed; see $TESSERA_DEPS_PREFIX/kokkos-$backend-configure.log"
  cmake --build "$build" -j "$(nproc)" >"$TESSERA_DEPS_PREFIX/kokkos-$backend-build.log" 2>&1 \
    || die "Kokkos build failed; see $TESSERA_DEPS_PREFIX/kokkos-$backend-build.log"
  cmake --install "$build" >/dev/null
  local installed
  installed=$(sed -n 's/^#define KOKKOS_VERSION \([0-9]*\)/\1/p' "$prefix/include/KokkosCore_config.h" | head -1)
  local expect; expect=$(echo "$version" | awk -F. '{printf "%d", $1*10000 + $2*100 + $3}')
  [[ $installed == "$expect" ]] || die "installed Kokkos reports version '$installed', expected $expect ($version)"
  patch_set_hash >"$prefix/.tessera-complete"
  ln -sfn "$prefix" "$link"
  rm -rf "$build"
  log "Kokkos $version ($backend): installed, version verified ($installed)"
}

mkdir -p "$TESSERA_DEPS_PREFIX" 2>/dev/null || die "cannot create $TESSERA_DEPS_PREFIX (set TESSERA_DEPS_PREFIX to a writable folder)"
exec 9>"$TESSERA_DEPS_PREFIX/.lock"
flock 9  # CI and a developer may set up the same machine at once
install_packages
build_kokkos openmp
((want_cuda)) && build_kokkos cuda
log "dependencies ready"
