#!/usr/bin/env bash
# Inference-aware readiness probe for the ollama container.
#
# Ready means: a one-token, non-streaming POST /api/generate with the served model
# answers HTTP 200 and "done":true. "The HTTP server answers" (GET /api/tags) is not
# enough: Ollama serves /api/tags long before the model can answer (the gap readygap
# measures).
#
# The ollama image has no curl, wget or python, but it has bash, so the request goes
# through bash's /dev/tcp. HTTP/1.0 with "Connection: close" makes the server close
# the connection after one response, so the reply is read to end of file.
#
# Environment (the container's own env, which exec probes inherit):
#   READYGAP_MODEL                  model to ask (required), e.g. llama3.2:3b
#   READYGAP_PROBE_TIMEOUT_SECONDS  give up after this many seconds (default 50);
#                                   keep it below the probe's timeoutSeconds
#   READYGAP_PROBE_HOST, READYGAP_PROBE_PORT  default 127.0.0.1 and 11434
# Exit status: 0 ready, 1 not ready (reason on stdout, which the kubelet records).
set -u
export LC_ALL=C

model="${READYGAP_MODEL:-}"
host="${READYGAP_PROBE_HOST:-127.0.0.1}"
port="${READYGAP_PROBE_PORT:-11434}"
timeout_s="${READYGAP_PROBE_TIMEOUT_SECONDS:-50}"

if [[ -z "$model" ]]; then
    echo "not ready: READYGAP_MODEL is not set"
    exit 1
fi
if [[ ! "$model" =~ ^[A-Za-z0-9._:/-]+$ ]]; then
    echo "not ready: READYGAP_MODEL has characters a model name cannot have: $model"
    exit 1
fi
if [[ ! "$timeout_s" =~ ^[0-9]+$ ]] || ((timeout_s < 1)); then
    echo "not ready: READYGAP_PROBE_TIMEOUT_SECONDS must be a positive integer, not $timeout_s"
    exit 1
fi

body="{\"model\":\"$model\",\"prompt\":\"Reply with exactly: READY\",\"stream\":false,\"options\":{\"num_predict\":1,\"temperature\":0}}"

if ! exec 3<>"/dev/tcp/$host/$port"; then
    echo "not ready: cannot connect to $host:$port"
    exit 1
fi

printf 'POST /api/generate HTTP/1.0\r\nHost: %s:%s\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s' \
    "$host" "$port" "${#body}" "$body" >&3

# One read to end of file (-d ''), bounded by the deadline. read returns 1 at end of
# file (the normal case here) and more than 128 when the timeout fires.
response=""
IFS= read -r -d '' -t "$timeout_s" response <&3
rc=$?
exec 3<&-
if ((rc > 128)); then
    echo "not ready: no complete answer from /api/generate within ${timeout_s}s"
    exit 1
fi

status_line="${response%%$'\r'*}"
if [[ ! "$status_line" =~ ^HTTP/1\.[01]\ 200 ]]; then
    error=""
    error_re='"error":"([^"\\]|\\.)*"'
    if [[ "$response" =~ $error_re ]]; then
        error="${BASH_REMATCH[0]}"
    fi
    echo "not ready: /api/generate answered '${status_line:-nothing}' ${error}"
    exit 1
fi
if [[ ! "$response" =~ \"done\":[[:space:]]*true ]]; then
    echo "not ready: /api/generate answered 200 without \"done\":true"
    exit 1
fi
echo "ready: $model completed a one-token generate"
exit 0
