//! Fault switches for the lab's runtimes, set through `POST /lab/faults {"runtime": {...}}`:
//! a hanging runtime, HTTP 500 answers, slow exec, a runtime that crashes mid-inference.

use crate::runtime::RuntimeFaults;
use serde_json::Value;

/// Apply `{"hang": bool, "http_500": bool, "slow_exec_ms": n, "crash_mid_inference": bool}`
/// to the runtimes' switches.
pub fn apply_runtime_faults(faults: &RuntimeFaults, v: &Value) -> Result<(), String> {
    let obj = v.as_object().ok_or("runtime faults must be an object")?;
    for (k, val) in obj {
        let flag = || {
            val.as_bool()
                .ok_or_else(|| format!("runtime fault {k:?} must be true or false"))
        };
        match k.as_str() {
            "hang" => faults.set_hang(flag()?),
            "http_500" => faults.set_http_500(flag()?),
            "crash_mid_inference" => faults.set_crash_mid_inference(flag()?),
            "slow_exec_ms" => faults.set_slow_exec_ms(
                val.as_u64()
                    .ok_or("runtime fault \"slow_exec_ms\" must be a whole number")?,
            ),
            other => {
                return Err(format!(
                    "unknown runtime fault {other:?} (known: hang, http_500, slow_exec_ms, crash_mid_inference)"
                ));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn switches_and_errors() {
        let f = RuntimeFaults::new();
        apply_runtime_faults(
            &f,
            &json!({"hang": true, "http_500": true, "slow_exec_ms": 250, "crash_mid_inference": true}),
        )
        .unwrap();
        assert!(f.hang() && f.http_500() && f.crash_mid_inference());
        assert!(f.take_crash_mid_inference() && !f.crash_mid_inference());
        assert_eq!(f.slow_exec_ms(), 250);
        apply_runtime_faults(&f, &json!({"hang": false})).unwrap();
        assert!(!f.hang());
        assert!(apply_runtime_faults(&f, &json!({"hang": "yes"})).is_err());
        assert!(apply_runtime_faults(&f, &json!({"nope": true})).is_err());
        assert!(apply_runtime_faults(&f, &json!([1])).is_err());
    }
}
