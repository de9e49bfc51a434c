//! Fault switches for the lab's runtimes, set through `POST /lab/faults {"runtime": {...}}`
//! or `LabHandle`: a hanging runtime, HTTP 500 answers.

use crate::lab::runtime::RuntimeFaults;
use serde_json::Value;

/// Apply `{"hang": bool, "http_500": bool}` to the runtimes' fault switches.
pub fn apply_runtime_faults(faults: &RuntimeFaults, v: &Value) -> Result<(), String> {
    let obj = v.as_object().ok_or("runtime faults must be an object")?;
    for (k, val) in obj {
        let on = val
            .as_bool()
            .ok_or_else(|| format!("runtime fault {k:?} must be true or false"))?;
        match k.as_str() {
            "hang" => faults.set_hang(on),
            "http_500" => faults.set_http_500(on),
            other => {
                return Err(format!(
                    "unknown runtime fault {other:?} (known: hang, http_500)"
                ));
            }
        }
    }
    Ok(())
}
