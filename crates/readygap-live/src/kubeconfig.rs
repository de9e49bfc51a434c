//! Loading the cluster configuration as kubectl does, where kube-rs differs:
//!
//! - A KUBECONFIG list skips files that do not exist (client-go
//!   `tools/clientcmd/loader.go`, `ClientConfigLoadingRules.Load`: "skip missing files");
//!   only a list whose every file is missing is an error.
//! - The proxy to the API server: a kubeconfig `proxy-url` is always used (client-go
//!   `rest/transport.go` sets `http.ProxyURL` for it); otherwise the environment, as Go's
//!   `http.ProxyFromEnvironment` reads it (golang.org/x/net `http/httpproxy/proxy.go`):
//!   HTTPS_PROXY for https servers, HTTP_PROXY for http ones, never for `localhost` or a
//!   loopback address, not for hosts NO_PROXY matches. (kube-rs 5 takes HTTPS_PROXY for
//!   every scheme and matches NO_PROXY against the proxy's own address.)
//! - Exec credential plugins (EKS, GKE, AKS) run non-interactively, and their stderr goes
//!   to the file READYGAP_LOG names, never to the terminal the dashboard draws on. kube-rs
//!   inherits stdin and stderr unless `interactiveMode: Never` (kube-client
//!   `client/auth/mod.rs`, `auth_exec`); with `Never` it captures stderr and drops it on
//!   success, so a log file gets it through a `sh` wrapper.

use color_eyre::eyre::{Result, WrapErr, eyre};
use http::Uri;
use kube::config::{ExecInteractiveMode, Kubeconfig};
use std::net::IpAddr;
use std::path::{Path, PathBuf};

/// Reads every file of a KUBECONFIG-style list (one path, or several joined with the
/// platform's separator) and merges them in order. A single named file must exist; in a
/// list, missing files are skipped.
pub fn read_list(list: &Path) -> Result<Kubeconfig> {
    let paths: Vec<PathBuf> = std::env::split_paths(list)
        .filter(|p| !p.as_os_str().is_empty())
        .collect();
    let single = paths.len() == 1;
    let mut merged: Option<Kubeconfig> = None;
    let mut missing = Vec::new();
    for p in &paths {
        if !single && !p.exists() {
            tracing::warn!("kubeconfig {} does not exist; skipped", p.display());
            missing.push(p.display().to_string());
            continue;
        }
        let kc = Kubeconfig::read_from(p)
            .wrap_err_with(|| format!("reading kubeconfig {}", p.display()))?;
        merged = Some(match merged {
            Some(m) => m.merge(kc).wrap_err("merging kubeconfig files")?,
            None => kc,
        });
    }
    merged.ok_or_else(|| {
        if missing.is_empty() {
            eyre!("empty kubeconfig path")
        } else {
            eyre!("none of the kubeconfig files exist: {}", missing.join(", "))
        }
    })
}

/// The `proxy-url` of the cluster the chosen context names, if any.
pub fn cluster_proxy_url(kc: &Kubeconfig, context: Option<&str>) -> Option<String> {
    let ctx_name = context.or(kc.current_context.as_deref())?;
    let ctx = kc.contexts.iter().find(|c| c.name == ctx_name)?;
    let cluster_name = &ctx.context.as_ref()?.cluster;
    kc.clusters
        .iter()
        .find(|c| &c.name == cluster_name)?
        .cluster
        .as_ref()?
        .proxy_url
        .clone()
        .filter(|p| !p.is_empty())
}

/// Go's `parseProxy`: a value without a scheme is an http proxy.
fn parse_proxy(value: &str) -> Result<Uri> {
    let with_scheme = if value.contains("://") {
        value.to_owned()
    } else {
        format!("http://{value}")
    };
    with_scheme
        .parse::<Uri>()
        .wrap_err_with(|| format!("invalid proxy address {value:?}"))
}

/// Whether NO_PROXY (one entry of it) matches `host:port` (Go's `useProxy` matchers: `*`,
/// an IP with optional port, a CIDR, a domain matching itself and its subdomains, with an
/// optional leading `.` or `*.`).
fn no_proxy_matches(entry: &str, host: &str, port: u16) -> bool {
    let entry = entry.trim().to_ascii_lowercase();
    if entry.is_empty() {
        return false;
    }
    if entry == "*" {
        return true;
    }
    let ip: Option<IpAddr> = host.parse().ok();
    if let Some((net, bits)) = entry.split_once('/')
        && let (Ok(net), Ok(bits), Some(ip)) = (net.parse::<IpAddr>(), bits.parse::<u8>(), ip)
    {
        return cidr_contains(net, bits, ip);
    }
    let (ehost, eport) = match entry.rsplit_once(':') {
        Some((h, p)) if !h.is_empty() && p.parse::<u16>().is_ok() && !h.contains(':') => {
            (h, p.parse::<u16>().ok())
        }
        _ => (entry.as_str(), None),
    };
    let ehost = ehost.trim_start_matches('[').trim_end_matches(']');
    let port_ok = eport.is_none_or(|p| p == port);
    if let Ok(eip) = ehost.parse::<IpAddr>() {
        return ip == Some(eip) && port_ok;
    }
    let domain = ehost.trim_start_matches('*').trim_start_matches('.');
    let host = host.to_ascii_lowercase();
    port_ok && (host == domain || host.ends_with(&format!(".{domain}")))
}

fn cidr_contains(net: IpAddr, bits: u8, ip: IpAddr) -> bool {
    let (n, i, width) = match (net, ip) {
        (IpAddr::V4(n), IpAddr::V4(i)) => (u32::from(n).into(), u32::from(i).into(), 32),
        (IpAddr::V6(n), IpAddr::V6(i)) => (u128::from(n), u128::from(i), 128),
        _ => return false,
    };
    // The addresses agree on their first `bits` bits (a shift by the whole width: /0).
    bits <= width && (n ^ i).checked_shr(u32::from(width - bits)).unwrap_or(0) == 0
}

/// The proxy to reach `server` through: the kubeconfig's `proxy-url` if set, else the
/// environment (`env` looks a variable up) as Go reads it.
pub fn proxy_for(
    server: &Uri,
    kubeconfig_proxy: Option<&str>,
    env: impl Fn(&str) -> Option<String>,
) -> Result<Option<Uri>> {
    if let Some(p) = kubeconfig_proxy.filter(|p| !p.is_empty()) {
        return parse_proxy(p).map(Some);
    }
    let any = |names: &[&str]| names.iter().find_map(|n| env(n).filter(|v| !v.is_empty()));
    let https = server.scheme_str() == Some("https");
    let proxy = if https {
        any(&["HTTPS_PROXY", "https_proxy"])
    } else {
        any(&["HTTP_PROXY", "http_proxy"])
    };
    let Some(proxy) = proxy else {
        return Ok(None);
    };
    let host = server
        .host()
        .unwrap_or_default()
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_ascii_lowercase();
    let port = server.port_u16().unwrap_or(if https { 443 } else { 80 });
    let loopback = host == "localhost" || host.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback());
    let no_proxy = any(&["NO_PROXY", "no_proxy"]).unwrap_or_default();
    if loopback
        || no_proxy
            .split(',')
            .any(|e| no_proxy_matches(e, &host, port))
    {
        return Ok(None);
    }
    parse_proxy(&proxy).map(Some)
}

/// The variable the exec plugin wrapper appends stderr to.
const PLUGIN_LOG_VAR: &str = "READYGAP_EXEC_PLUGIN_LOG";

/// Make every exec credential plugin of `kc` non-interactive, with its stderr appended to
/// `log` (when given) instead of the terminal.
pub fn quiet_exec_plugins(kc: &mut Kubeconfig, log: Option<&Path>) {
    for auth in kc.auth_infos.iter_mut() {
        let Some(exec) = auth.auth_info.as_mut().and_then(|a| a.exec.as_mut()) else {
            continue;
        };
        exec.interactive_mode = Some(ExecInteractiveMode::Never);
        let (Some(log), Some(command)) = (log, exec.command.clone()) else {
            continue;
        };
        let mut args = vec![
            "-c".to_owned(),
            format!("exec \"$0\" \"$@\" 2>>\"${PLUGIN_LOG_VAR}\""),
            command,
        ];
        args.extend(exec.args.take().unwrap_or_default());
        exec.command = Some("/bin/sh".to_owned());
        exec.args = Some(args);
        let mut var = std::collections::HashMap::new();
        var.insert("name".to_owned(), PLUGIN_LOG_VAR.to_owned());
        var.insert("value".to_owned(), log.display().to_string());
        exec.env.get_or_insert_with(Vec::new).push(var);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |k| {
            vars.iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| (*v).to_owned())
        }
    }

    fn uri(s: &str) -> Uri {
        s.parse().unwrap()
    }

    #[test]
    fn the_environment_proxy_follows_go() {
        let vars = [
            ("HTTPS_PROXY", "http://proxy.corp:3128"),
            ("NO_PROXY", "10.0.0.0/8,.internal,api.example.org:6443"),
        ];
        let p = |server: &str| proxy_for(&uri(server), None, env(&vars)).unwrap();
        // Used when NO_PROXY does not match.
        assert_eq!(
            p("https://api.example.com:6443"),
            Some(uri("http://proxy.corp:3128"))
        );
        assert_eq!(
            p("https://192.168.1.10:6443"),
            Some(uri("http://proxy.corp:3128"))
        );
        // Not when it does (CIDR, domain suffix, host:port), nor for loopback.
        assert_eq!(p("https://10.1.2.3:6443"), None);
        assert_eq!(p("https://k8s.internal"), None);
        assert_eq!(p("https://api.example.org:6443"), None);
        assert_eq!(
            p("https://api.example.org:443"),
            Some(uri("http://proxy.corp:3128"))
        );
        assert_eq!(p("https://127.0.0.1:6443"), None);
        assert_eq!(p("https://localhost:6443"), None);
        // HTTPS_PROXY is for https servers only.
        assert_eq!(p("http://api.example.com:8080"), None);
        let http = [("http_proxy", "proxy.corp:3128")];
        assert_eq!(
            proxy_for(&uri("http://api.example.com"), None, env(&http)).unwrap(),
            Some(uri("http://proxy.corp:3128"))
        );
        let all = [
            ("HTTPS_PROXY", "socks5://127.0.0.1:1080"),
            ("NO_PROXY", "*"),
        ];
        assert_eq!(
            proxy_for(&uri("https://api.example.com"), None, env(&all)).unwrap(),
            None
        );
    }

    #[test]
    fn a_kubeconfig_proxy_url_wins() {
        let vars = [("HTTPS_PROXY", "http://proxy.corp:3128"), ("NO_PROXY", "*")];
        assert_eq!(
            proxy_for(
                &uri("https://127.0.0.1:6443"),
                Some("socks5://127.0.0.1:1080"),
                env(&vars)
            )
            .unwrap(),
            Some(uri("socks5://127.0.0.1:1080"))
        );
    }

    #[test]
    fn exec_plugins_are_wrapped_to_the_log() {
        let mut kc: Kubeconfig = serde_yaml_ng::from_str(
            "users:\n- name: u\n  user:\n    exec:\n      apiVersion: client.authentication.k8s.io/v1\n      command: aws\n      args: [eks, get-token]\n",
        )
        .unwrap();
        quiet_exec_plugins(&mut kc, Some(Path::new("/tmp/r.log")));
        let exec = kc.auth_infos[0]
            .auth_info
            .as_ref()
            .unwrap()
            .exec
            .as_ref()
            .unwrap();
        assert_eq!(exec.interactive_mode, Some(ExecInteractiveMode::Never));
        assert_eq!(exec.command.as_deref(), Some("/bin/sh"));
        assert_eq!(
            exec.args.as_deref().unwrap()[2..],
            ["aws".to_owned(), "eks".into(), "get-token".into()]
        );
        let env = exec.env.as_ref().unwrap();
        assert_eq!(env[0]["name"], PLUGIN_LOG_VAR);
        assert_eq!(env[0]["value"], "/tmp/r.log");
    }
}
