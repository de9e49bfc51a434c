//! `curl` in a lab container (the client pod of the published study runs `curlimages/curl`):
//! plain HTTP to a Service name or a pod address through the pod's network (`network.rs`),
//! for the options the study's scripts use (`scripts/recovery/*.sh` of
//! opscart/k8s-llm-recovery-lab): `-s`/`--silent`, `-S`/`--show-error`, `-f`/`--fail`,
//! `-o`/`--output`, `-w`/`--write-out`, `-m`/`--max-time`, `--connect-timeout`,
//! `-X`/`--request`, `-H`/`--header`, `-d`/`--data`/`--data-raw`/`--data-binary`, `--url`, and
//! short options bundled (`-sf`, `-XPOST`). Exit codes and messages are curl's (CURLcode in
//! curl's `include/curl/curl.h`, texts of curl 7.88/8.x as printed on this machine): 0, 1
//! unsupported protocol, 2 bad option, 3 malformed URL, 6 unresolved host, 7 refused, 22 HTTP
//! status of 400 or more under `--fail`, 23 the output file cannot be written, 26 `-d @file`,
//! 28 timeout, 35 https to the lab's plain HTTP, 52 empty reply, 56 receive failure. `-w`
//! prints `000` for a request that got no answer, as curl does.
//! Not imitated: the progress meter (curl prints it to stderr without `-s`), redirects
//! (curl does not follow them by default either), TLS, cookies, and anything else.
//! The connection leaves from the client pod's own address, so the runtime's request log
//! shows the pod's IP as a real cluster would.

use super::network::{PodNetwork, Route};
use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};
use tokio::sync::mpsc;

/// Where the response body goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Output {
    Stdout,
    Null,
    File(String),
}

/// One parsed `curl` command line.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Invocation {
    silent: bool,
    show_error: bool,
    fail: bool,
    pub(crate) output: Output,
    write_out: Option<String>,
    max_time: Option<Duration>,
    connect_timeout: Option<Duration>,
    method: Option<String>,
    headers: Vec<(String, String)>,
    data: Vec<String>,
    url: String,
}

impl Invocation {
    /// Whether error messages are suppressed (`-s` without `-S`).
    pub(crate) fn quiet(&self) -> bool {
        self.silent && !self.show_error
    }
}

/// What curl writes while it runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Piece {
    /// Response body bytes (to `output`).
    Body(Vec<u8>),
    /// `-w` text (always stdout).
    WriteOut(Vec<u8>),
    /// Messages (stderr).
    Stderr(Vec<u8>),
}

/// A usage error: curl's message lines, exit 2.
fn usage(msg: String) -> String {
    format!("curl: {msg}\ncurl: try 'curl --help' or 'curl --manual' for more information\n")
}

fn seconds(opt: &str, v: &str) -> Result<Duration, String> {
    match v.parse::<f64>() {
        Ok(s) if s.is_finite() && s >= 0.0 => Ok(Duration::from_secs_f64(s.min(1e9))),
        _ => Err(usage(format!(
            "option {opt}: expected a proper numerical parameter"
        ))),
    }
}

/// Parse the arguments after `curl`. Err: the text to print on stderr (exit 2).
pub(crate) fn parse(args: &[String]) -> Result<Invocation, String> {
    let mut inv = Invocation {
        silent: false,
        show_error: false,
        fail: false,
        output: Output::Stdout,
        write_out: None,
        max_time: None,
        connect_timeout: None,
        method: None,
        headers: Vec::new(),
        data: Vec::new(),
        url: String::new(),
    };
    let mut urls = Vec::new();
    let mut it = args.iter();
    // (long name, takes a value)
    let long = |name: &str| -> Option<(char, bool)> {
        Some(match name {
            "silent" => ('s', false),
            "show-error" => ('S', false),
            "fail" => ('f', false),
            "output" => ('o', true),
            "write-out" => ('w', true),
            "max-time" => ('m', true),
            "connect-timeout" => ('C', true),
            "request" => ('X', true),
            "header" => ('H', true),
            "data" | "data-raw" | "data-binary" | "data-ascii" => ('d', true),
            "url" => ('U', true),
            "no-progress-meter" | "no-buffer" | "http1.1" | "compressed" => ('-', false),
            _ => return None,
        })
    };
    let short_takes_value = |c: char| matches!(c, 'o' | 'w' | 'm' | 'X' | 'H' | 'd');
    let short_known = |c: char| matches!(c, 's' | 'S' | 'f' | 'N') || short_takes_value(c);
    while let Some(arg) = it.next() {
        let mut opts: Vec<(char, Option<String>, String)> = Vec::new();
        if let Some(name) = arg.strip_prefix("--") {
            let Some((c, takes)) = long(name) else {
                return Err(usage(format!("option {arg}: is unknown")));
            };
            let value = if takes {
                match it.next() {
                    Some(v) => Some(v.clone()),
                    None => return Err(usage(format!("option {arg}: requires parameter"))),
                }
            } else {
                None
            };
            opts.push((c, value, arg.clone()));
        } else if arg.len() > 1 && arg.starts_with('-') {
            let chars: Vec<char> = arg[1..].chars().collect();
            let mut i = 0;
            while i < chars.len() {
                let c = chars[i];
                if !short_known(c) {
                    return Err(usage(format!("option -{c}: is unknown")));
                }
                if short_takes_value(c) {
                    let rest: String = chars[i + 1..].iter().collect();
                    let value = if !rest.is_empty() {
                        rest
                    } else {
                        match it.next() {
                            Some(v) => v.clone(),
                            None => return Err(usage(format!("option -{c}: requires parameter"))),
                        }
                    };
                    opts.push((c, Some(value), format!("-{c}")));
                    break;
                }
                opts.push((c, None, format!("-{c}")));
                i += 1;
            }
        } else {
            urls.push(arg.clone());
        }
        for (c, value, name) in opts {
            let v = value.unwrap_or_default();
            match c {
                's' => inv.silent = true,
                'S' => inv.show_error = true,
                'f' => inv.fail = true,
                'o' => {
                    inv.output = if v == "/dev/null" {
                        Output::Null
                    } else if v == "-" {
                        Output::Stdout
                    } else {
                        Output::File(v)
                    }
                }
                'w' => inv.write_out = Some(v),
                'm' => inv.max_time = Some(seconds(&name, &v)?),
                'C' => inv.connect_timeout = Some(seconds(&name, &v)?),
                'X' => inv.method = Some(v),
                'H' => {
                    if let Some((k, val)) = v.split_once(':') {
                        inv.headers
                            .push((k.trim().to_string(), val.trim().to_string()));
                    }
                }
                'd' => inv.data.push(v),
                'U' => urls.push(v),
                _ => {}
            }
        }
    }
    match urls.len() {
        0 => Err(usage("no URL specified".into())),
        1 => {
            inv.url = urls.remove(0);
            Ok(inv)
        }
        _ => Err(usage("the lab's curl takes one URL per command".into())),
    }
}

/// One HTTP client per source address (the client pod's IP), never keeping a connection
/// (pod IPs are reused by later pods).
fn client(from: Option<Ipv4Addr>) -> Option<reqwest::Client> {
    static CLIENTS: OnceLock<Mutex<HashMap<Option<Ipv4Addr>, reqwest::Client>>> = OnceLock::new();
    let mut clients = CLIENTS.get_or_init(Default::default).lock().ok()?;
    if let Some(c) = clients.get(&from) {
        return Some(c.clone());
    }
    let c = reqwest::Client::builder()
        .no_proxy()
        .redirect(reqwest::redirect::Policy::none())
        .pool_max_idle_per_host(0)
        .http1_only()
        .local_address(from.map(IpAddr::V4))
        .build()
        .ok()?;
    clients.insert(from, c.clone());
    Some(c)
}

/// What the transfer measured, for `-w`.
#[derive(Default)]
struct Stats {
    code: u16,
    total: Duration,
    starttransfer: Duration,
    size: u64,
    url: String,
}

fn write_out(format: &str, s: &Stats) -> String {
    let mut out = String::new();
    let mut chars = format.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '%' if chars.peek() == Some(&'{') => {
                chars.next();
                let name: String = chars.by_ref().take_while(|c| *c != '}').collect();
                match name.as_str() {
                    "http_code" | "response_code" => out.push_str(&format!("{:03}", s.code)),
                    "time_total" => out.push_str(&format!("{:.6}", s.total.as_secs_f64())),
                    "time_starttransfer" => {
                        out.push_str(&format!("{:.6}", s.starttransfer.as_secs_f64()))
                    }
                    "size_download" => out.push_str(&s.size.to_string()),
                    "url_effective" | "url" => out.push_str(&s.url),
                    _ => {}
                }
            }
            '%' if chars.peek() == Some(&'%') => {
                chars.next();
                out.push('%');
            }
            '\\' => match chars.next() {
                Some('n') => out.push('\n'),
                Some('r') => out.push('\r'),
                Some('t') => out.push('\t'),
                Some(c) => {
                    out.push('\\');
                    out.push(c);
                }
                None => out.push('\\'),
            },
            c => out.push(c),
        }
    }
    out
}

/// Run the transfer; pieces go to `tx`; the exit code is returned. Dropping the future
/// aborts the transfer.
pub(crate) async fn run(inv: &Invocation, net: &PodNetwork, tx: &mpsc::Sender<Piece>) -> i32 {
    let start = Instant::now();
    let mut stats = Stats {
        url: inv.url.clone(),
        ..Default::default()
    };
    let (code, msg) = transfer(inv, net, tx, start, &mut stats).await;
    stats.total = start.elapsed();
    if let Some(msg) = msg
        && !inv.quiet()
    {
        let _ = tx
            .send(Piece::Stderr(
                format!("curl: ({code}) {msg}\n").into_bytes(),
            ))
            .await;
    }
    if let Some(f) = &inv.write_out {
        let _ = tx
            .send(Piece::WriteOut(write_out(f, &stats).into_bytes()))
            .await;
    }
    code
}

/// The transfer proper: (exit code, error message).
async fn transfer(
    inv: &Invocation,
    net: &PodNetwork,
    tx: &mpsc::Sender<Piece>,
    start: Instant,
    stats: &mut Stats,
) -> (i32, Option<String>) {
    let text = if inv.url.contains("://") {
        inv.url.clone()
    } else {
        format!("http://{}", inv.url)
    };
    let Ok(mut url) = reqwest::Url::parse(&text) else {
        return (
            3,
            Some("URL using bad/illegal format or missing URL".into()),
        );
    };
    match url.scheme() {
        "http" => {}
        "https" => {
            return (
                35,
                Some("TLS connect error: the lab serves plain HTTP (wrong version number)".into()),
            );
        }
        other => {
            return (
                1,
                Some(format!(
                    "Protocol \"{other}\" not supported or disabled in libcurl"
                )),
            );
        }
    }
    let Some(host) = url.host_str().map(str::to_string) else {
        return (
            3,
            Some("URL using bad/illegal format or missing URL".into()),
        );
    };
    let port = url.port_or_known_default().unwrap_or(80);
    stats.url = url.to_string();
    let for_max = |elapsed: Duration| format!("{} milliseconds", elapsed.as_millis());
    let Ok(ip) = net.resolve(&host) else {
        return (6, Some(format!("Could not resolve host: {host}")));
    };
    let target = match net.route(ip, port) {
        Route::To(addr) => addr,
        Route::Refused => {
            return (
                7,
                Some(format!(
                    "Failed to connect to {host} port {port} after {} ms: Couldn't connect to server",
                    start.elapsed().as_millis()
                )),
            );
        }
        Route::Blackhole => {
            // Nobody answers: the attempt lasts until the connect timeout (curl's default is
            // 300 s) or the whole operation's limit.
            let limit = [inv.connect_timeout, inv.max_time]
                .into_iter()
                .flatten()
                .min()
                .unwrap_or(Duration::from_secs(300));
            tokio::time::sleep(limit).await;
            return (
                28,
                Some(format!(
                    "Connection timed out after {}",
                    for_max(start.elapsed())
                )),
            );
        }
    };
    let Some(client) = client(net.pod_ip) else {
        return (2, Some("Failed to initialize".into()));
    };
    // The request goes to the endpoint's address with the URL's Host, as through kube-proxy.
    let host_header = match url.port() {
        Some(p) => format!("{host}:{p}"),
        None => host.clone(),
    };
    let _ = url.set_ip_host(target.ip());
    let _ = url.set_port(Some(target.port()));
    let method = match (&inv.method, inv.data.is_empty()) {
        (Some(m), _) => m.clone(),
        (None, false) => "POST".into(),
        (None, true) => "GET".into(),
    };
    let Ok(method) = reqwest::Method::from_bytes(method.as_bytes()) else {
        return (
            3,
            Some("URL using bad/illegal format or missing URL".into()),
        );
    };
    let mut req = client
        .request(method, url)
        .header("Host", host_header)
        .header("User-Agent", "curl/8.11.1")
        .header("Accept", "*/*");
    if !inv.data.is_empty() {
        if inv.data.iter().any(|d| d.starts_with('@')) {
            return (
                26,
                Some("Failed to open/read local data from file/application".into()),
            );
        }
        if !inv
            .headers
            .iter()
            .any(|(k, _)| k.eq_ignore_ascii_case("content-type"))
        {
            req = req.header("Content-Type", "application/x-www-form-urlencoded");
        }
        req = req.body(inv.data.join("&"));
    }
    for (k, v) in &inv.headers {
        if !v.is_empty() {
            req = req.header(k.as_str(), v.as_str());
        }
    }
    let deadline = inv.max_time.map(|m| start + m);
    let until_deadline = || async move {
        match deadline {
            Some(at) => tokio::time::sleep_until(at.into()).await,
            None => std::future::pending().await,
        }
    };
    let timed_out = |received: u64, total: Option<u64>| {
        let of = match total {
            Some(t) => format!("{received} out of {t}"),
            None => received.to_string(),
        };
        (
            28,
            Some(format!(
                "Operation timed out after {} with {of} bytes received",
                for_max(start.elapsed())
            )),
        )
    };
    let response = tokio::select! {
        r = req.send() => r,
        _ = until_deadline() => return timed_out(0, None),
    };
    let mut response = match response {
        Ok(r) => r,
        Err(e) if e.is_connect() => {
            return (
                7,
                Some(format!(
                    "Failed to connect to {host} port {port} after {} ms: Couldn't connect to server",
                    start.elapsed().as_millis()
                )),
            );
        }
        Err(_) => return (52, Some("Empty reply from server".into())),
    };
    stats.code = response.status().as_u16();
    stats.starttransfer = start.elapsed();
    let length = response.content_length();
    if inv.fail && stats.code >= 400 {
        return (
            22,
            Some(format!("The requested URL returned error: {}", stats.code)),
        );
    }
    loop {
        let chunk = tokio::select! {
            c = response.chunk() => c,
            _ = until_deadline() => return timed_out(stats.size, length),
        };
        match chunk {
            Ok(Some(bytes)) => {
                stats.size += bytes.len() as u64;
                if tx.send(Piece::Body(bytes.to_vec())).await.is_err() {
                    return (23, Some("Failure writing output to destination".into()));
                }
            }
            Ok(None) => return (0, None),
            Err(_) => return (56, Some("Recv failure: Connection reset by peer".into())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &[&str]) -> Vec<String> {
        s.iter().map(|a| a.to_string()).collect()
    }

    #[test]
    fn the_studys_command_lines_parse() {
        let inv = parse(&args(&[
            "--connect-timeout",
            "1",
            "--max-time",
            "2",
            "-s",
            "-o",
            "/dev/null",
            "-w",
            "%{http_code}",
            "http://ollama:11434/api/tags",
        ]))
        .unwrap();
        assert!(inv.silent && !inv.fail);
        assert_eq!(inv.output, Output::Null);
        assert_eq!(inv.connect_timeout, Some(Duration::from_secs(1)));
        assert_eq!(inv.max_time, Some(Duration::from_secs(2)));
        assert_eq!(inv.write_out.as_deref(), Some("%{http_code}"));
        let inv = parse(&args(&[
            "-sf",
            "-XPOST",
            "http://127.0.0.1:11434/api/generate",
            "-H",
            "Content-Type: application/json",
            "-d",
            "{}",
        ]))
        .unwrap();
        assert!(inv.silent && inv.fail);
        assert_eq!(inv.method.as_deref(), Some("POST"));
        assert_eq!(
            inv.headers,
            [("Content-Type".to_string(), "application/json".to_string())]
        );
        assert_eq!(inv.data, ["{}"]);
    }

    #[test]
    fn bad_options_are_curls_usage_errors() {
        let e = parse(&args(&["--bogus", "x"])).unwrap_err();
        assert!(e.starts_with("curl: option --bogus: is unknown\n"), "{e}");
        let e = parse(&args(&["-X"])).unwrap_err();
        assert!(
            e.starts_with("curl: option -X: requires parameter\n"),
            "{e}"
        );
        let e = parse(&args(&["-m", "soon", "http://x/"])).unwrap_err();
        assert!(e.contains("expected a proper numerical parameter"), "{e}");
        assert!(
            parse(&args(&["-s"]))
                .unwrap_err()
                .contains("no URL specified")
        );
    }

    #[test]
    fn write_out_formats_like_curl() {
        let s = Stats {
            code: 0,
            total: Duration::from_millis(1500),
            ..Default::default()
        };
        assert_eq!(write_out("%{http_code}", &s), "000");
        assert_eq!(
            write_out("%{http_code}\\n%{time_total} 100%%", &s),
            "000\n1.500000 100%"
        );
    }
}
