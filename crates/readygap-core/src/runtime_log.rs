//! The runtime's own log as readygap reads it, pure: what one line of Ollama's or llama.cpp
//! server's log says ([`parse_line`]: a request, with T3/T4 in it; [`mark`]: the server
//! listening, a model load begun or done), and the bounded tail of the focused pod's
//! container log that the Log view (`L`) shows ([`Tail`]).
//!
//! Request lines:
//! - Ollama: gin's default logger (gin-gonic/gin `logger.go` `defaultLogFormatter`;
//!   ollama/ollama `server/routes.go` builds its router with `gin.Default()`):
//!   `[GIN] 2025/06/01 - 10:00:03 | 200 |  3.267612345s |  10.0.0.1 | POST  "/api/generate"`.
//!   The line is written when the handler returns, after the response: its instant is T4,
//!   T4 − latency (Go's `Duration.String`) is T3.
//! - llama.cpp server (ggml-org/llama.cpp `tools/server/server-http.cpp`,
//!   `log_server_request`, called after the response): `… request: POST /completion
//!   127.0.0.1 200` in older servers (info level), `… done request: POST …` at trace level
//!   in current ones, whose request logger is off unless enabled (verbose). The line has no
//!   latency: only T4.
//!
//! Start-up lines, as the peers' builds print them (the tests hold lines copied from their
//! output): Ollama 0.12.6 logs with `log/slog`'s text handler, `msg="Listening on
//! 127.0.0.1:11434 (version 0.12.6)"` (`server/routes.go` `Serve`), `msg="starting runner"`
//! and `msg="llama runner started in 0.54 seconds"` (`llm/server.go`: the runner's start and
//! the model loaded); llama-server logs `srv    load_model: loading model '…'`,
//! `srv  llama_server: model loaded` and `srv  llama_server: listening on http://…`
//! (`tools/server/server.cpp`; older builds `main: model loaded`, `main: server is listening
//! on http://…`). vLLM (the v1 engine of `vllm/vllm-openai:v0.10.1`, which the vllm overlay
//! pins) logs its start-up phases before it serves HTTP at all: `Model loading took 0.2574
//! GiB and 2.148 seconds` (`vllm/v1/worker/gpu_model_runner.py` `load_model`), `Available
//! KV cache memory: 1.50 GiB` (`vllm/v1/worker/gpu_worker.py`
//! `determine_available_memory`), `GPU KV cache size: 49,152 tokens`
//! (`vllm/v1/core/kv_cache_utils.py`), `Graph capturing finished in 8 secs, took 0.31 GiB`
//! (`gpu_model_runner.py` `capture_model`), `init engine (profile, create kv cache, warmup
//! model) took 28.44 seconds` (`vllm/v1/engine/core.py`), then `Starting vLLM API server 0
//! on http://0.0.0.0:8000` (`vllm/entrypoints/openai/api_server.py`).

use crate::event::{LoggedRequest, Timestamp};
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;

/// Go's `time.ParseDuration` for the forms `Duration.String` prints (`812ns`, `1.5µs`,
/// `3.2676ms`, `3.267612345s`, `1m2.5s`, `1h0m0s`), in milliseconds.
pub fn go_duration_ms(s: &str) -> Option<f64> {
    let s = s.trim();
    if s == "0" || s == "0s" {
        return Some(0.0);
    }
    let mut rest = s;
    let mut total = 0.0;
    while !rest.is_empty() {
        let num_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        if num_len == 0 {
            return None;
        }
        let n: f64 = rest[..num_len].parse().ok()?;
        rest = &rest[num_len..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let factor = match &rest[..unit_len] {
            "ns" => 1e-6,
            "us" | "µs" | "μs" => 1e-3,
            "ms" => 1.0,
            "s" => 1e3,
            "m" => 60e3,
            "h" => 3600e3,
            _ => return None,
        };
        rest = &rest[unit_len..];
        total += n * factor;
    }
    (!s.is_empty()).then_some(total)
}

/// One request line of `pod`'s runtime log (without the timestamp prefix), if it is one.
pub fn parse_line(pod: &str, text: &str) -> Option<LoggedRequest> {
    let text = text.trim_end();
    if let Some(gin) = text.strip_prefix("[GIN]") {
        let parts: Vec<&str> = gin.split('|').collect();
        if parts.len() < 5 {
            return None;
        }
        let status: u16 = parts[1].trim().parse().ok()?;
        let latency_ms = go_duration_ms(parts[2]);
        let client = Some(parts[3].trim().to_string()).filter(|c| !c.is_empty());
        let tail = parts[4..].join("|");
        let (method, path) = tail.trim().split_once(char::is_whitespace)?;
        let path = path.trim();
        let path = path
            .strip_prefix('"')
            .and_then(|p| p.strip_suffix('"'))
            .unwrap_or(path)
            .to_string();
        return Some(LoggedRequest {
            pod: pod.to_string(),
            method: method.to_string(),
            path,
            status,
            latency_ms,
            client,
        });
    }
    // llama.cpp: `... request: POST /completion 127.0.0.1 200`
    let (_, req) = text.split_once("request: ")?;
    let f: Vec<&str> = req.split_whitespace().collect();
    if f.len() < 4 || !f[0].chars().all(|c| c.is_ascii_uppercase()) {
        return None;
    }
    Some(LoggedRequest {
        pod: pod.to_string(),
        method: f[0].to_string(),
        path: f[1].to_string(),
        status: f[3].parse().ok()?,
        latency_ms: None,
        client: Some(f[2].to_string()),
    })
}

/// What readygap reads in a log line: the start-up steps and the inferences.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LogMark {
    /// A model load began (Ollama starts a runner; llama-server opens the file).
    ModelLoading,
    /// vLLM: the weights are in GPU memory (`Model loading took X GiB and Y seconds`).
    WeightsLoaded,
    /// vLLM: the memory profile run measured what is left for the KV cache (`Available KV
    /// cache memory: X GiB`).
    KvCacheProfiled,
    /// vLLM: the KV cache is allocated (`GPU KV cache size: N tokens`).
    KvCacheAllocated,
    /// vLLM: the CUDA graphs are captured (`Graph capturing finished in N secs, took X
    /// GiB`).
    GraphsCaptured,
    /// vLLM: the engine is up (`init engine (profile, create kv cache, warmup model) took X
    /// seconds`).
    EngineReady,
    /// The model is loaded (Ollama, llama-server).
    ModelLoaded,
    /// The server answers HTTP from now on (its own word for T2).
    Listening,
    /// A request line of an inference (T3/T4 of an observed trial come from these).
    Inference,
    /// The engine ran out of GPU memory (see [`gpu_out_of_memory`]).
    GpuOutOfMemory,
}

impl LogMark {
    /// A short name for the screen and the report.
    pub fn label(self) -> &'static str {
        match self {
            LogMark::Listening => "listening",
            LogMark::ModelLoading => "model load",
            LogMark::ModelLoaded => "model loaded",
            LogMark::WeightsLoaded => "weights loaded",
            LogMark::KvCacheProfiled => "kv cache profiled",
            LogMark::KvCacheAllocated => "kv cache allocated",
            LogMark::GraphsCaptured => "graphs captured",
            LogMark::EngineReady => "engine ready",
            LogMark::Inference => "inference",
            LogMark::GpuOutOfMemory => "GPU out of memory",
        }
    }

    /// The name of its mark in a trial's marks and the reports (`weights_loaded`).
    pub fn name(self) -> &'static str {
        match self {
            LogMark::Listening => "listening",
            LogMark::ModelLoading => "model_loading",
            LogMark::ModelLoaded => "model_loaded",
            LogMark::WeightsLoaded => "weights_loaded",
            LogMark::KvCacheProfiled => "kv_cache_profiled",
            LogMark::KvCacheAllocated => "kv_cache_allocated",
            LogMark::GraphsCaptured => "graphs_captured",
            LogMark::EngineReady => "engine_ready",
            LogMark::Inference => "inference",
            LogMark::GpuOutOfMemory => "gpu_out_of_memory",
        }
    }

    /// A start-up step (not a request, not an error).
    pub fn is_startup(self) -> bool {
        !matches!(self, LogMark::Inference | LogMark::GpuOutOfMemory)
    }
}

/// The engine's own words for running out of GPU memory, as each prints them:
/// - vLLM refusing to start on a GPU others already fill (`vllm/v1/worker/gpu_worker.py`
///   `init_device`): `ValueError: Free memory on device (13.91/79.33 GiB) on startup is less
///   than desired GPU memory utilization (0.9, 71.4 GiB). Decrease GPU memory utilization or
///   reduce GPU memory used by other processes.`;
/// - PyTorch's caching allocator (vLLM, TGI; `c10/cuda/CUDACachingAllocator.cpp`):
///   `torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a
///   total capacity of 79.19 GiB of which 1.06 GiB is free.` (older: `RuntimeError: CUDA out
///   of memory.`);
/// - ggml's CUDA backend (llama.cpp, and Ollama's runner, which prints its lines;
///   `ggml/src/ggml-cuda/ggml-cuda.cu` `ggml_backend_cuda_buffer_type_alloc_buffer`):
///   `… allocating 4096.00 MiB on device 0: cudaMalloc failed: out of memory`.
pub fn gpu_out_of_memory(text: &str) -> bool {
    text.contains("CUDA out of memory")
        || text.contains("cudaMalloc failed: out of memory")
        || (text.contains("Free memory on device")
            && text.contains("less than desired GPU memory utilization"))
}

/// What the line `text` (without the kubelet's timestamp) marks, if anything.
pub fn mark(text: &str) -> Option<LogMark> {
    if gpu_out_of_memory(text) {
        return Some(LogMark::GpuOutOfMemory);
    }
    if text.starts_with("[GIN]") || text.contains("request: ") {
        return parse_line("", text)
            .filter(LoggedRequest::is_inference)
            .map(|_| LogMark::Inference);
    }
    // Ollama (slog's text handler quotes a message with spaces).
    if let Some((_, msg)) = text.split_once(" msg=") {
        let msg = msg.trim_start_matches('"');
        return if msg.starts_with("Listening on ") {
            Some(LogMark::Listening)
        } else if msg.starts_with("starting runner") {
            Some(LogMark::ModelLoading)
        } else if msg.starts_with("llama runner started in ") {
            Some(LogMark::ModelLoaded)
        } else {
            None
        };
    }
    // vLLM (its logger: `LEVEL MM-DD HH:MM:SS [file.py:line] message`, the engine core's
    // lines prefixed `(EngineCore_DP0 pid=N)`).
    const VLLM: [(&str, LogMark); 6] = [
        ("] Model loading took ", LogMark::WeightsLoaded),
        ("] Available KV cache memory: ", LogMark::KvCacheProfiled),
        ("] GPU KV cache size: ", LogMark::KvCacheAllocated),
        ("] Graph capturing finished in ", LogMark::GraphsCaptured),
        (
            "] init engine (profile, create kv cache, warmup model) took ",
            LogMark::EngineReady,
        ),
        ("] Starting vLLM API server", LogMark::Listening),
    ];
    if let Some((_, m)) = VLLM.iter().find(|(needle, _)| text.contains(needle)) {
        return Some(*m);
    }
    // llama-server.
    if text.contains("load_model: loading model") {
        Some(LogMark::ModelLoading)
    } else if text.contains("llama_server: model loaded") || text.contains("main: model loaded") {
        Some(LogMark::ModelLoaded)
    } else if text.contains("listening on http://") {
        Some(LogMark::Listening)
    } else {
        None
    }
}

/// Lines the tail keeps (a pod's start-up is ~300 lines of Ollama's log, most of them the
/// model loader's metadata dump).
pub const TAIL_LINES: usize = 1000;

/// A line is cut to this many characters.
pub const LINE_CHARS: usize = 1000;

/// One line of the tail.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TailLine {
    /// When the kubelet says it was written.
    pub ts: Timestamp,
    pub pod: String,
    pub text: String,
    pub mark: Option<LogMark>,
}

/// How the tail of a pod's log stands.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Following {
    /// Lines come as the container writes them.
    Yes,
    /// The stream ended: the container stopped (a restart follows it again).
    Ended,
    /// The log cannot be read: why.
    Failed(String),
}

/// The Log view's lines: the latest [`TAIL_LINES`] of the pods followed, oldest first, and
/// how the latest pod's log stands.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Tail {
    pub lines: VecDeque<TailLine>,
    /// The pod followed last, and how its log stands.
    pub following: Option<(String, Following)>,
}

impl Tail {
    /// A line written at `ts`; one already held (the same pod, instant and text: the Log
    /// view's follower and the start-up follower both read a start-up line) is not kept
    /// twice.
    pub fn line(&mut self, ts: Timestamp, pod: &str, text: &str) {
        let text: String = text.chars().take(LINE_CHARS).collect();
        let held = self
            .lines
            .iter()
            .any(|l| l.ts == ts && l.pod == pod && l.text == text);
        if held {
            return;
        }
        if self.lines.len() == TAIL_LINES {
            self.lines.pop_front();
        }
        let mark = mark(&text);
        self.lines.push_back(TailLine {
            ts,
            pod: pod.to_string(),
            text,
            mark,
        });
    }

    /// The follower of `pod` started, ended or failed.
    pub fn follow(&mut self, pod: &str, state: Following) {
        self.following = Some((pod.to_string(), state));
    }

    /// The lines of `pod` held, in the order they were written (lines from two followers
    /// arrive interleaved).
    pub fn of_pod(&self, pod: &str) -> Vec<&TailLine> {
        let mut lines: Vec<&TailLine> = self.lines.iter().filter(|l| l.pod == pod).collect();
        lines.sort_by_key(|l| l.ts);
        lines
    }

    /// When the latest line of `pod` was written (a new follower of it skips what came
    /// before).
    pub fn last_of(&self, pod: &str) -> Option<Timestamp> {
        self.lines.iter().rev().find(|l| l.pod == pod).map(|l| l.ts)
    }

    /// The start-up marks of `pod` between `from` and `to` (the Timeline's ticks).
    pub fn startup_marks<'a>(
        &'a self,
        pod: &'a str,
        from: Timestamp,
        to: Timestamp,
    ) -> impl Iterator<Item = (Timestamp, LogMark)> + 'a {
        self.lines
            .iter()
            .filter(move |l| l.pod == pod && l.ts >= from && l.ts <= to)
            .filter_map(|l| Some((l.ts, l.mark.filter(|m| m.is_startup())?)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_durations_parse() {
        assert_eq!(go_duration_ms("3.2676s"), Some(3267.6));
        assert_eq!(go_duration_ms("  812µs"), Some(0.812));
        assert_eq!(go_duration_ms("1m2.5s"), Some(62_500.0));
        assert_eq!(go_duration_ms("15.2ms"), Some(15.2));
        assert_eq!(go_duration_ms("0s"), Some(0.0));
        assert_eq!(go_duration_ms("soon"), None);
        assert_eq!(go_duration_ms(""), None);
    }

    #[test]
    fn gin_lines_parse() {
        let r = parse_line(
            "p",
            "[GIN] 2025/06/01 - 10:00:03 | 200 |  3.2676s |        10.0.0.1 | POST     \"/api/generate\"",
        )
        .unwrap();
        assert_eq!(
            (r.method.as_str(), r.path.as_str(), r.status),
            ("POST", "/api/generate", 200)
        );
        assert_eq!(r.latency_ms, Some(3267.6));
        assert_eq!(r.client.as_deref(), Some("10.0.0.1"));
        assert!(r.is_inference());
        let r = parse_line(
            "p",
            "[GIN] 2025/06/01 - 10:00:03 | 500 |   1.1s | 127.0.0.1 | POST \"/api/chat\"",
        )
        .unwrap();
        assert_eq!(r.status, 500);
        let tags = parse_line(
            "p",
            "[GIN] 2025/06/01 - 10:00:03 | 200 | 512µs | 127.0.0.1 | GET \"/api/tags\"",
        )
        .unwrap();
        assert!(!tags.is_inference());
        assert!(parse_line("p", "time=2025 level=INFO msg=\"Listening\"").is_none());
        assert!(parse_line("p", "[GIN] garbage").is_none());
    }

    #[test]
    fn llama_cpp_lines_parse_without_latency() {
        let r = parse_line(
            "p",
            "srv  log_server_r: request: POST /completion 127.0.0.1 200",
        )
        .unwrap();
        assert_eq!(
            (r.method.as_str(), r.path.as_str(), r.status),
            ("POST", "/completion", 200)
        );
        assert_eq!(r.latency_ms, None);
        assert!(r.is_inference());
    }

    /// Lines copied from the output of the peers' Ollama 0.12.6 and llama-server builds
    /// (`ollama serve` and `llama-server -m smollm2.gguf`, one generation each).
    #[test]
    fn start_up_lines_of_the_real_servers_are_marked() {
        let ollama = [
            (
                r#"time=2026-12-07T01:58:48.936Z level=INFO source=routes.go:1564 msg="Listening on 127.0.0.1:18434 (version 0.12.6)""#,
                Some(LogMark::Listening),
            ),
            (
                r#"time=2026-12-07T01:58:49.463Z level=INFO source=server.go:400 msg="starting runner" cmd="/usr/bin/ollama runner --model /root/.ollama/models/blobs/sha256-b179""#,
                Some(LogMark::ModelLoading),
            ),
            (
                r#"time=2026-12-07T01:58:49.502Z level=INFO source=server.go:1272 msg="waiting for llama runner to start responding""#,
                None,
            ),
            (
                r#"time=2026-12-07T01:58:50.004Z level=INFO source=server.go:1310 msg="llama runner started in 0.54 seconds""#,
                Some(LogMark::ModelLoaded),
            ),
            (
                r#"time=2026-12-07T01:58:49.490Z level=INFO source=runner.go:929 msg="Server listening on 127.0.0.1:45001""#,
                None,
            ),
            (
                "llama_model_loader: - kv   2:                       general.name str              = Smollm2 135M 8k Lc100K Mix1 Ep2",
                None,
            ),
            (
                r#"[GIN] 2026/12/07 - 01:58:52 | 200 |  3.567636485s |       127.0.0.1 | POST     "/api/generate""#,
                Some(LogMark::Inference),
            ),
            (
                r#"[GIN] 2026/12/07 - 01:58:49 | 200 |    1.005396ms |       127.0.0.1 | GET      "/api/tags""#,
                None,
            ),
        ];
        let llama = [
            (
                "0.00.030.688 I srv    load_model: loading model '/root/.cache/readygap/peers/gguf/gemma3.gguf'",
                Some(LogMark::ModelLoading),
            ),
            (
                "0.03.585.000 I srv  llama_server: model loaded",
                Some(LogMark::ModelLoaded),
            ),
            (
                "0.03.589.148 I srv  llama_server: listening on http://127.0.0.1:18435",
                Some(LogMark::Listening),
            ),
            (
                "main: server is listening on http://0.0.0.0:8080 - starting the main loop",
                Some(LogMark::Listening),
            ),
            (
                "0.03.935.427 I slot print_timing: id  3 | task 0 |       total time =     289.29 ms /     6 tokens",
                None,
            ),
            (
                "srv  log_server_r: request: POST /completion 127.0.0.1 200",
                Some(LogMark::Inference),
            ),
        ];
        for (line, want) in ollama.iter().chain(llama.iter()) {
            assert_eq!(mark(line), *want, "{line}");
        }
    }

    /// vLLM's start-up as its v1 engine logs it (the lines of a vLLM 0.10/0.11 start-up
    /// on one GPU, message formats from the files named in the module's comment).
    #[test]
    fn vllm_start_up_phases_are_marked_in_order() {
        let lines = [
            (
                "(EngineCore_DP0 pid=212) INFO 10-06 12:00:20 [gpu_model_runner.py:1971] Model loading took 0.2574 GiB and 2.148012 seconds",
                Some(LogMark::WeightsLoaded),
            ),
            (
                "(EngineCore_DP0 pid=212) INFO 10-06 12:00:30 [gpu_worker.py:276] Available KV cache memory: 1.50 GiB",
                Some(LogMark::KvCacheProfiled),
            ),
            (
                "(EngineCore_DP0 pid=212) INFO 10-06 12:00:31 [kv_cache_utils.py:1087] GPU KV cache size: 49,152 tokens",
                Some(LogMark::KvCacheAllocated),
            ),
            (
                "(EngineCore_DP0 pid=212) INFO 10-06 12:00:31 [kv_cache_utils.py:1091] Maximum concurrency for 8,192 tokens per request: 6.00x",
                None,
            ),
            (
                "Capturing CUDA graphs (mixed prefill-decode, PIECEWISE): 100%|██████████| 11/11",
                None,
            ),
            (
                "(EngineCore_DP0 pid=212) INFO 10-06 12:00:40 [gpu_model_runner.py:3480] Graph capturing finished in 8 secs, took 0.31 GiB",
                Some(LogMark::GraphsCaptured),
            ),
            (
                "(EngineCore_DP0 pid=212) INFO 10-06 12:00:40 [core.py:214] init engine (profile, create kv cache, warmup model) took 19.71 seconds",
                Some(LogMark::EngineReady),
            ),
            (
                "(APIServer pid=1) INFO 10-06 12:00:41 [api_server.py:1971] Starting vLLM API server 0 on http://0.0.0.0:8000",
                Some(LogMark::Listening),
            ),
            ("INFO:     Application startup complete.", None),
            (
                r#"INFO:     10.0.0.1:51234 - "POST /v1/completions HTTP/1.1" 200 OK"#,
                None,
            ),
        ];
        for (line, want) in lines {
            assert_eq!(mark(line), want, "{line}");
        }
        let names: Vec<&str> = lines
            .iter()
            .filter_map(|(_, m)| m.map(LogMark::name))
            .collect();
        assert!(names.iter().any(|n| n.contains("weights")));
        assert!(names.iter().any(|n| n.contains("kv_cache")));
        assert!(names.iter().any(|n| n.contains("graph")));
    }

    /// Each engine's out-of-memory line, in its words (the sources cited on
    /// `gpu_out_of_memory`), is a mark of its own, neither a start-up step nor a request;
    /// lines that only talk about memory are not.
    #[test]
    fn each_engines_gpu_out_of_memory_line_is_marked() {
        let oom = [
            "(EngineCore_DP0 pid=16388) ERROR 03-01 21:32:52 [core.py:708] ValueError: Free memory on device (13.91/79.33 GiB) on startup is less than desired GPU memory utilization (0.95, 75.36 GiB). Decrease GPU memory utilization or reduce GPU memory used by other processes.",
            "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.19 GiB of which 1.06 GiB is free.",
            "ggml_backend_cuda_buffer_type_alloc_buffer: allocating 4096.00 MiB on device 0: cudaMalloc failed: out of memory",
        ];
        for line in oom {
            assert_eq!(mark(line), Some(LogMark::GpuOutOfMemory), "{line}");
            assert!(!LogMark::GpuOutOfMemory.is_startup());
        }
        for line in [
            "(EngineCore_DP0 pid=212) INFO 10-06 12:00:30 [gpu_worker.py:276] Available KV cache memory: 1.50 GiB",
            "ggml_backend_cuda_buffer_type_alloc_buffer: allocating 4096.00 MiB on device 0",
            "Free memory on device is fine",
        ] {
            assert_ne!(mark(line), Some(LogMark::GpuOutOfMemory), "{line}");
        }
    }

    #[test]
    fn the_tail_is_bounded_and_knows_each_pods_last_line() {
        let at = |s: i64| chrono::DateTime::from_timestamp(1_800_000_000 + s, 0).unwrap();
        let mut t = Tail::default();
        for i in 0..(TAIL_LINES as i64 + 5) {
            t.line(
                at(i),
                if i % 2 == 0 { "a" } else { "b" },
                &"x".repeat(2 * LINE_CHARS),
            );
        }
        assert_eq!(t.lines.len(), TAIL_LINES);
        assert_eq!(
            t.lines.front().map(|l| l.ts),
            Some(at(5)),
            "the oldest went first"
        );
        assert!(t.lines.iter().all(|l| l.text.chars().count() == LINE_CHARS));
        assert_eq!(t.last_of("b"), Some(at(TAIL_LINES as i64 + 3)));
        assert_eq!(t.following, None, "only the follower says it follows");
        t.line(at(6), "a", &"x".repeat(LINE_CHARS));
        assert_eq!(t.lines.len(), TAIL_LINES, "a line held is not kept twice");
        assert_eq!(t.lines.front().map(|l| l.ts), Some(at(5)));
        t.follow("a", Following::Failed("forbidden".into()));
        assert_eq!(
            t.following,
            Some(("a".into(), Following::Failed("forbidden".into())))
        );
        assert_eq!(t.last_of("c"), None);
    }

    #[test]
    fn start_up_marks_are_those_of_the_pod_in_the_window() {
        let at = |s: i64| chrono::DateTime::from_timestamp(1_800_000_000 + s, 0).unwrap();
        let mut t = Tail::default();
        t.line(at(1), "new", r#"time=x level=INFO source=routes.go:1564 msg="Listening on [::]:11434 (version 0.12.6)""#);
        t.line(
            at(2),
            "old",
            r#"time=x level=INFO source=server.go:400 msg="starting runner" cmd=x"#,
        );
        t.line(
            at(3),
            "new",
            r#"time=x level=INFO source=server.go:400 msg="starting runner" cmd=x"#,
        );
        t.line(
            at(4),
            "new",
            r#"[GIN] 2026/12/07 - 01:58:52 | 200 |  3.5s | 127.0.0.1 | POST "/api/generate""#,
        );
        t.line(
            at(9),
            "new",
            r#"time=x level=INFO source=server.go:1310 msg="llama runner started in 5.54 seconds""#,
        );
        t.line(at(0), "new", "written first, read last");
        let order: Vec<_> = t.of_pod("new").iter().map(|l| l.ts).collect();
        assert_eq!(order, vec![at(0), at(1), at(3), at(4), at(9)]);
        let marks: Vec<_> = t.startup_marks("new", at(0), at(5)).collect();
        assert_eq!(
            marks,
            vec![(at(1), LogMark::Listening), (at(3), LogMark::ModelLoading)]
        );
    }
}
