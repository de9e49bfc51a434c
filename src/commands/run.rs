//! `readygap run`: headless recovery trials on the cluster, or on the built-in lab started
//! in-process (`--lab`). Ctrl-C (SIGINT), SIGTERM and SIGHUP end the current trial cleanly
//! and still print and record what was measured.

use crate::args::RunArgs;
use color_eyre::eyre::{Result, eyre};
use readygap_live::run::{RunOutput, run_trials};
use std::io::Write;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// `readygap run`.
pub async fn run(args: RunArgs) -> Result<i32> {
    let cancel = CancellationToken::new();
    let c = cancel.clone();
    tokio::spawn(async move {
        let signal = crate::signals::quit().await;
        eprintln!("interrupted ({signal}): ending the current trial");
        c.cancel();
    });
    let out = run_with(args, cancel).await?;
    std::io::stdout().write_all(out.stdout.as_bytes())?;
    Ok(out.code)
}

/// `readygap run` with a given cancel token (tests cancel it as Ctrl-C would).
pub async fn run_with(args: RunArgs, cancel: CancellationToken) -> Result<RunOutput> {
    let mut config = args.to_config();
    config.session.verdicts = args.session.verdict_thresholds()?;
    config.session.dcgm = args.session.dcgm_source()?;
    let mut lab = None;
    if let Some(profile) = &args.lab {
        let p = readygap_lab::engine::profiles::resolve(
            args.engine,
            profile,
            args.session.model.as_deref(),
        )
        .map_err(|e| eyre!("lab profile: {e}"))?;
        if config.session.model.is_none() {
            config.session.model = Some(p.model.clone());
        }
        let mut o = readygap_lab::serve::LabOptions::new(p);
        o.engine = args.engine;
        o.shape = args.lab_server;
        o.speed = args.lab_speed;
        if let Some(v) = &args.lab_ollama_version {
            o.profile.ollama_version =
                readygap_lab::ollama_version::check(v).map_err(|e| eyre!(e))?;
        }
        if let Some(limit) = args.lab_memory_limit {
            o.profile.memory_limit_bytes = limit;
        }
        o.scenario = args.lab_scenario;
        let h = readygap_lab::serve::serve(o).await?;
        h.wait_ready(Duration::from_secs(120)).await?;
        config.session.cluster.kubeconfig = Some(h.kubeconfig.clone());
        config.session.cluster.context = None;
        config.session.cluster.namespace = Some(h.namespace.clone());
        lab = Some(h);
    }
    let result = run_trials(&config, cancel).await;
    if let Some(l) = lab {
        l.shutdown().await;
    }
    result
}
