//! A runtime's own load figures from its Prometheus `/metrics` text: llama-server's
//! `llamacpp:*` (with `--metrics`; tools/server/server.cpp) and vLLM's `vllm:*`
//! (vllm/v1/metrics/loggers.py), read with GETs only. Each figure is the sum of its samples
//! over their label sets (vLLM labels every sample with `model_name`); only the few names
//! readygap shows are kept, so a large or hostile body costs no memory beyond its text.

use readygap_core::event::RuntimeMetrics;

/// The metric names behind each figure, first match wins per name family.
const RUNNING: &[&str] = &["llamacpp:requests_processing", "vllm:num_requests_running"];
const WAITING: &[&str] = &["llamacpp:requests_deferred", "vllm:num_requests_waiting"];
const KV_CACHE: &[&str] = &[
    "vllm:kv_cache_usage_perc",
    "vllm:gpu_cache_usage_perc",
    "llamacpp:kv_cache_usage_ratio",
];
const TOKENS: &[&str] = &[
    "llamacpp:tokens_predicted_total",
    "vllm:generation_tokens_total",
];

/// One sample line: (metric name, value); `None` for comments, blank and malformed lines.
/// Label values may hold spaces, `}` and escaped quotes (the text format's `\"`).
fn sample(line: &str) -> Option<(&str, f64)> {
    let line = line.trim();
    if line.is_empty() || line.starts_with('#') {
        return None;
    }
    let name_end = line
        .find(|c: char| c == '{' || c.is_whitespace())
        .unwrap_or(line.len());
    let name = &line[..name_end];
    let mut rest = &line[name_end..];
    if rest.starts_with('{') {
        let mut quoted = false;
        let mut escaped = false;
        let mut close = None;
        for (i, c) in rest.char_indices() {
            match c {
                _ if escaped => escaped = false,
                '\\' if quoted => escaped = true,
                '"' => quoted = !quoted,
                '}' if !quoted => {
                    close = Some(i);
                    break;
                }
                _ => {}
            }
        }
        rest = &rest[close? + 1..];
    }
    let value: f64 = rest.split_whitespace().next()?.parse().ok()?;
    (!name.is_empty() && value.is_finite()).then_some((name, value))
}

/// The figures of a `/metrics` body; `None` when it has none of them (not a runtime that
/// exports these, or not Prometheus text).
pub fn parse(text: &str) -> Option<RuntimeMetrics> {
    let mut sums: [Option<f64>; 4] = [None; 4];
    // The name that fed each figure: a second family of the same figure does not add to it.
    let mut fed: [Option<&str>; 4] = [None; 4];
    for (name, value) in text.lines().filter_map(sample) {
        for (i, names) in [RUNNING, WAITING, KV_CACHE, TOKENS].iter().enumerate() {
            if names.contains(&name) && fed[i].is_none_or(|n| n == name) {
                fed[i] = Some(name);
                sums[i] = Some(sums[i].unwrap_or(0.0) + value);
            }
        }
    }
    // A sum past f64's range is no figure.
    let [running, waiting, kv_cache, tokens] = sums.map(|s| s.filter(|v| v.is_finite()));
    let m = RuntimeMetrics {
        running,
        waiting,
        kv_cache,
        tokens_generated: tokens,
    };
    (m != RuntimeMetrics::default()).then_some(m)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_real_llama_servers_figures() {
        let m = parse(include_str!("captured/llama-metrics.prom")).expect("figures");
        assert_eq!(m.running, Some(0.0));
        assert_eq!(m.waiting, Some(0.0));
        assert_eq!(m.tokens_generated, Some(2.0));
        assert_eq!(m.kv_cache, None, "this build exports no KV cache figure");
    }

    #[test]
    fn vllm_samples_are_summed_over_their_labels() {
        // The shape of vLLM's exposition (prometheus_client): one sample per model_name,
        // label values with spaces and escaped quotes.
        let text = r#"# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="Qwen/Qwen3-0.6B"} 2.0
vllm:num_requests_running{engine="1",model_name="a \"quoted} name"} 1.0
vllm:num_requests_waiting{engine="0",model_name="Qwen/Qwen3-0.6B"} 3.0
vllm:kv_cache_usage_perc{engine="0",model_name="Qwen/Qwen3-0.6B"} 0.25
vllm:generation_tokens_total{engine="0",model_name="Qwen/Qwen3-0.6B"} 1234.0 1700000000000
vllm:time_to_first_token_seconds_bucket{le="+Inf",model_name="x"} 7.0
"#;
        let m = parse(text).unwrap();
        assert_eq!(m.running, Some(3.0));
        assert_eq!(m.waiting, Some(3.0));
        assert_eq!(m.kv_cache, Some(0.25));
        assert_eq!(m.tokens_generated, Some(1234.0));
    }

    #[test]
    fn an_older_vllm_names_its_cache_gpu_and_one_family_feeds_a_figure() {
        let m = parse("vllm:gpu_cache_usage_perc{model_name=\"m\"} 0.5\n").unwrap();
        assert_eq!(m.kv_cache, Some(0.5));
        let both =
            "vllm:kv_cache_usage_perc{m=\"a\"} 0.5\nvllm:gpu_cache_usage_perc{m=\"a\"} 0.5\n";
        assert_eq!(parse(both).unwrap().kv_cache, Some(0.5));
    }

    #[test]
    fn no_figures_and_bad_lines() {
        assert_eq!(parse(""), None);
        let huge =
            "vllm:num_requests_running{a=\"1\"} 1e308\nvllm:num_requests_running{a=\"2\"} 1e308\n";
        assert_eq!(parse(huge), None, "an overflowing sum");
        assert_eq!(parse("{\"error\":{\"code\":501}}"), None);
        assert_eq!(parse("process_cpu_seconds_total 3\n"), None);
        assert_eq!(
            parse("llamacpp:requests_processing{unclosed=\"x 1\nllamacpp:requests_processing NaN\nllamacpp:requests_processing 1\n")
                .unwrap()
                .running,
            Some(1.0)
        );
    }
}
