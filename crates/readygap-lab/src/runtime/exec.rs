//! What `kubectl exec` runs inside a lab container: a tiny interpreter, not a shell. It knows
//! `cat`, `head`, `echo`, `sleep`, `date`, `test`/`[`, `true`/`false`/`:`, `exit`, `hostname`,
//! `command -v`,
//! `grep [-E] [-q]` (the patterns of `grep.rs`), `sync`, `id [-u|-g] [-n]`,
//! `ollama ps|list|--version` (in the runtime's container), `curl` (in the other containers,
//! see `curl.rs`; the ollama image has none), and `sh -c SCRIPT` where SCRIPT
//! joins commands with `;`, `&&`, `||` or newlines, with `while COND; do ...; done` loops and
//! `if ...; then ...; else ...; fi`, single and double quotes, `$(...)` command substitution,
//! `$NAME`/`${NAME}` (read-only environment: `HOME`, `PATH`, `HOSTNAME`; anything else is
//! unset and expands to nothing), and the redirections `>/dev/null`, `2>/dev/null`, `2>&1`,
//! `>&2` and `> FILE` (only a plain container's writable node files, see `plain.rs`; any other
//! file fails as `sh` does: `cannot create FILE: ...`, status 2, the command is not run). No
//! pipes, assignments or background jobs.
//! `sleep` sleeps real time (it is the caller's sampling interval, not a simulated stage, so
//! the lab's speed does not apply).
//!
//! Output arrives as `ExecChunk`s, then one `Exit`. Dropping the `ExecStream` cancels the
//! command (a streaming `while :` loop ends); the container dying ends it with exit code 137.
//! Unknown commands print `sh: X: not found` and exit 127; missing files exit 1.

use super::format::{human_bytes, human_time, table};
use super::plain::PlainContainer;
use super::{Phase, Runtime, curl, files};
use chrono::Utc;
use futures::Stream;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// The commands every lab container runs (`curl` only in the plain ones); `command -v`
/// answers from this list.
const KNOWN: &[&str] = &[
    "cat", "head", "echo", "sleep", "true", ":", "false", "exit", "test", "[", "hostname", "date",
    "grep", "id", "sync", "ollama", "sh", "bash", "dash", "command",
];

/// One piece of an exec's output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExecChunk {
    Stdout(Vec<u8>),
    Stderr(Vec<u8>),
    /// The command ended with this code (always the last chunk).
    Exit(i32),
}

/// The output of a command running in a lab container. Dropping it cancels the command.
pub struct ExecStream {
    rx: mpsc::Receiver<ExecChunk>,
}

/// Everything an exec printed, collected.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExecOutput {
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
    /// None if the stream ended without an exit code.
    pub code: Option<i32>,
}

impl ExecOutput {
    pub fn stdout_text(&self) -> String {
        String::from_utf8_lossy(&self.stdout).into_owned()
    }
    pub fn stderr_text(&self) -> String {
        String::from_utf8_lossy(&self.stderr).into_owned()
    }
}

impl ExecStream {
    /// The next chunk, or None once the command has ended.
    pub async fn recv(&mut self) -> Option<ExecChunk> {
        self.rx.recv().await
    }

    /// Wait for the command to end and collect its output.
    pub async fn collect(mut self) -> ExecOutput {
        let mut out = ExecOutput::default();
        while let Some(chunk) = self.rx.recv().await {
            match chunk {
                ExecChunk::Stdout(b) => out.stdout.extend(b),
                ExecChunk::Stderr(b) => out.stderr.extend(b),
                ExecChunk::Exit(code) => {
                    out.code = Some(code);
                    break;
                }
            }
        }
        out
    }
}

impl Stream for ExecStream {
    type Item = ExecChunk;
    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<ExecChunk>> {
        self.rx.poll_recv(cx)
    }
}

/// The container a command runs in: the Ollama runtime's, or a plain one that sees its node.
#[derive(Clone)]
pub(crate) enum Host {
    Runtime(Arc<Runtime>),
    Plain(Arc<PlainContainer>),
}

impl Host {
    fn shutdown(&self) -> &CancellationToken {
        match self {
            Self::Runtime(rt) => &rt.shutdown,
            Self::Plain(p) => &p.shutdown,
        }
    }

    fn running_execs(&self) -> Arc<AtomicUsize> {
        match self {
            Self::Runtime(rt) => rt.running_execs.clone(),
            Self::Plain(p) => p.running_execs.clone(),
        }
    }

    fn stopped(&self) -> bool {
        match self {
            Self::Runtime(rt) => matches!(rt.phase(), Phase::Stopped | Phase::OomKilled),
            Self::Plain(p) => p.shutdown.is_cancelled(),
        }
    }

    fn slow_exec_ms(&self) -> u64 {
        match self {
            Self::Runtime(rt) => rt.spec.faults.slow_exec_ms(),
            Self::Plain(_) => 0,
        }
    }

    fn pod_name(&self) -> &str {
        match self {
            Self::Runtime(rt) => &rt.spec.pod_name,
            Self::Plain(p) => &p.spec.pod_name,
        }
    }

    fn read(&self, path: &str) -> Option<String> {
        match self {
            Self::Runtime(rt) => files::read(rt, path),
            Self::Plain(p) => p.read(path),
        }
    }

    fn is_dir(&self, path: &str) -> bool {
        match self {
            Self::Runtime(rt) => files::is_dir(rt, path),
            Self::Plain(p) => p.is_dir(path),
        }
    }

    /// Whether `path` can be opened for writing (`Err`: why not, as `sh` says it).
    fn check_write(&self, path: &str) -> Result<(), &'static str> {
        match self {
            Self::Runtime(_) => Err("Read-only file system"),
            Self::Plain(p) => p.check_write(path),
        }
    }

    fn write(&self, path: &str, bytes: &[u8]) -> Result<(), &'static str> {
        match self {
            Self::Runtime(_) => Err("Read-only file system"),
            Self::Plain(p) => p.write(path, bytes),
        }
    }

    /// An environment variable of the container (`None`: unset).
    fn var(&self, name: &str) -> Option<String> {
        match name {
            "HOME" => Some("/root".into()),
            "PATH" => Some("/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin".into()),
            "HOSTNAME" => Some(self.pod_name().to_string()),
            _ => None,
        }
    }
}

impl ExecStream {
    /// A stream fed by another producer (the real engine's processes): send chunks, the
    /// `Exit` last; a send fails once the stream was dropped (the command is cancelled).
    pub(crate) fn channel() -> (mpsc::Sender<ExecChunk>, ExecStream) {
        let (tx, rx) = mpsc::channel(64);
        (tx, ExecStream { rx })
    }
}

impl PlainContainer {
    /// Run a command inside the container (`kubectl exec`). Dropping the stream cancels it.
    pub fn exec(self: &Arc<Self>, argv: Vec<String>) -> ExecStream {
        self.execs_started.fetch_add(1, Ordering::SeqCst);
        spawn(Host::Plain(self.clone()), argv)
    }
}

/// Start `argv` in the container.
pub(crate) fn spawn(host: Host, argv: Vec<String>) -> ExecStream {
    let (tx, rx) = mpsc::channel(64);
    let running = ExecGuard::new(host.running_execs());
    tokio::spawn(async move {
        let _running = running;
        if host.stopped() {
            let _ = tx
                .send(ExecChunk::Stderr(
                    b"error: container is not running\n".to_vec(),
                ))
                .await;
            let _ = tx.send(ExecChunk::Exit(126)).await;
            return;
        }
        let shell = Shell { host, tx };
        let code = match shell.run_argv(&argv, &Redirect::default()).await {
            Flow::Status(code) | Flow::Exit(code) => code,
            Flow::Killed => 137,
            Flow::Cancelled => return,
        };
        let _ = shell.tx.send(ExecChunk::Exit(code)).await;
    });
    ExecStream { rx }
}

/// Counts a running exec until dropped.
struct ExecGuard(Arc<AtomicUsize>);

impl ExecGuard {
    fn new(counter: Arc<AtomicUsize>) -> Self {
        counter.fetch_add(1, Ordering::SeqCst);
        Self(counter)
    }
}

impl Drop for ExecGuard {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// How a command ended, and whether the script goes on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Flow {
    Status(i32),
    /// `exit N`: the script stops.
    Exit(i32),
    /// The reader went away.
    Cancelled,
    /// The container died.
    Killed,
}

/// Where a stream of a command goes.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
enum Target {
    #[default]
    Stdout,
    Stderr,
    Null,
    /// A file of the container (opened when the command starts).
    File(String),
}

/// Where stdout and stderr of a command go.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Redirect {
    stdout: Target,
    stderr: Target,
}

impl Default for Redirect {
    fn default() -> Self {
        Self {
            stdout: Target::Stdout,
            stderr: Target::Stderr,
        }
    }
}

// ---- parsing ----

/// A piece of a word: literal text, or a `$(...)` command substitution (split into fields
/// on whitespace unless inside double quotes).
#[derive(Debug, Clone, PartialEq, Eq)]
enum Part {
    Lit(String),
    Subst {
        script: String,
        quoted: bool,
    },
    /// `$NAME` or `${NAME}`: an environment variable (unset ones expand to nothing).
    Var {
        name: String,
        quoted: bool,
    },
}

/// A word of a command, expanded when the command runs.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
struct Word(Vec<Part>);

impl Word {
    fn push(&mut self, c: char) {
        match self.0.last_mut() {
            Some(Part::Lit(s)) => s.push(c),
            _ => self.0.push(Part::Lit(c.to_string())),
        }
    }

    /// The word's text when it has no substitution (keywords, `2>` detection).
    fn literal(&self) -> Option<&str> {
        match self.0.as_slice() {
            [] => Some(""),
            [Part::Lit(s)] => Some(s),
            _ => None,
        }
    }
}

/// Read a variable name after `$` (`NAME` or `{NAME}`); `None` when `$` starts none, so it
/// stays a literal `$`.
fn read_var(
    chars: &mut std::iter::Peekable<std::str::Chars<'_>>,
) -> Result<Option<String>, String> {
    let start = |c: &char| c.is_ascii_alphabetic() || *c == '_';
    if chars.peek() == Some(&'{') {
        chars.next();
        let mut name = String::new();
        loop {
            match chars.next() {
                Some('}') if !name.is_empty() => return Ok(Some(name)),
                Some(c) if c.is_ascii_alphanumeric() || c == '_' => name.push(c),
                _ => return Err("Bad substitution".into()),
            }
        }
    }
    if !chars.peek().is_some_and(start) {
        return Ok(None);
    }
    let mut name = String::new();
    while let Some(&c) = chars.peek() {
        if !(c.is_ascii_alphanumeric() || c == '_') {
            break;
        }
        name.push(c);
        chars.next();
    }
    Ok(Some(name))
}

/// Read the script of a `$(...)` after its `$(`, up to the matching `)`.
fn read_subst(chars: &mut std::iter::Peekable<std::str::Chars<'_>>) -> Result<String, String> {
    let mut script = String::new();
    let mut depth = 1;
    let mut quote: Option<char> = None;
    loop {
        let Some(c) = chars.next() else {
            return Err("Syntax error: end of file unexpected (expecting \")\")".into());
        };
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), _) => {}
            (None, '\'' | '"') => quote = Some(c),
            (None, '(') => depth += 1,
            (None, ')') => {
                depth -= 1;
                if depth == 0 {
                    return Ok(script);
                }
            }
            _ => {}
        }
        script.push(c);
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Token {
    Word(Word),
    Semi,
    And,
    Or,
    /// `[fd]>target` or `[fd]>&fd`.
    Redir {
        fd: u8,
        target: String,
    },
}

fn tokenize(script: &str) -> Result<Vec<Token>, String> {
    let mut tokens = Vec::new();
    let mut chars = script.chars().peekable();
    let mut word = Word::default();
    let mut in_word = false;
    fn flush(tokens: &mut Vec<Token>, word: &mut Word, in_word: &mut bool) {
        if *in_word {
            tokens.push(Token::Word(std::mem::take(word)));
            *in_word = false;
        }
    }
    while let Some(c) = chars.next() {
        match c {
            ' ' | '\t' => flush(&mut tokens, &mut word, &mut in_word),
            '\n' | ';' => {
                flush(&mut tokens, &mut word, &mut in_word);
                tokens.push(Token::Semi);
            }
            '#' if !in_word => {
                // A comment runs to the end of the line.
                for c in chars.by_ref() {
                    if c == '\n' {
                        tokens.push(Token::Semi);
                        break;
                    }
                }
            }
            '&' => {
                flush(&mut tokens, &mut word, &mut in_word);
                if chars.peek() == Some(&'&') {
                    chars.next();
                    tokens.push(Token::And);
                } else {
                    return Err("background jobs (&) are not supported".into());
                }
            }
            '|' => {
                flush(&mut tokens, &mut word, &mut in_word);
                if chars.peek() == Some(&'|') {
                    chars.next();
                    tokens.push(Token::Or);
                } else {
                    return Err("pipes (|) are not supported".into());
                }
            }
            '>' => {
                let fd = match (in_word, word.literal()) {
                    (false, _) => 1,
                    (true, Some("1")) => 1,
                    (true, Some("2")) => 2,
                    (true, _) => {
                        flush(&mut tokens, &mut word, &mut in_word);
                        1
                    }
                };
                word = Word::default();
                in_word = false;
                if chars.peek() == Some(&'>') {
                    chars.next();
                }
                let mut target = String::new();
                if chars.peek() == Some(&'&') {
                    chars.next();
                    target.push('&');
                }
                while chars.peek().is_some_and(|c| *c == ' ' || *c == '\t') {
                    chars.next();
                }
                while let Some(&c) = chars.peek() {
                    if c.is_whitespace() || ";&|".contains(c) {
                        break;
                    }
                    target.push(c);
                    chars.next();
                }
                if target.is_empty() || target == "&" {
                    return Err("syntax error: redirection without a target".into());
                }
                tokens.push(Token::Redir { fd, target });
            }
            '\'' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(c) => word.push(c),
                        None => return Err("unterminated quoted string".into()),
                    }
                }
            }
            '"' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('$') if chars.peek() == Some(&'(') => {
                            chars.next();
                            let script = read_subst(&mut chars)?;
                            word.0.push(Part::Subst {
                                script,
                                quoted: true,
                            });
                        }
                        Some('$') => match read_var(&mut chars)? {
                            Some(name) => word.0.push(Part::Var { name, quoted: true }),
                            None => word.push('$'),
                        },
                        Some('\\') => match chars.next() {
                            Some(c @ ('"' | '\\' | '$' | '`')) => word.push(c),
                            Some(c) => {
                                word.push('\\');
                                word.push(c);
                            }
                            None => return Err("unterminated quoted string".into()),
                        },
                        Some(c) => word.push(c),
                        None => return Err("unterminated quoted string".into()),
                    }
                }
            }
            '$' if chars.peek() == Some(&'(') => {
                chars.next();
                in_word = true;
                let script = read_subst(&mut chars)?;
                word.0.push(Part::Subst {
                    script,
                    quoted: false,
                });
            }
            '$' => {
                in_word = true;
                match read_var(&mut chars)? {
                    Some(name) => word.0.push(Part::Var {
                        name,
                        quoted: false,
                    }),
                    None => word.push('$'),
                }
            }
            '\\' => {
                in_word = true;
                match chars.next() {
                    Some('\n') => {}
                    Some(c) => word.push(c),
                    None => {}
                }
            }
            c => {
                in_word = true;
                word.push(c);
            }
        }
    }
    flush(&mut tokens, &mut word, &mut in_word);
    Ok(tokens)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Connector {
    Always,
    IfOk,
    IfFailed,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Node {
    Simple {
        argv: Vec<Word>,
        redirect: Redirect,
    },
    While {
        until: bool,
        cond: Vec<(Connector, Node)>,
        body: Vec<(Connector, Node)>,
    },
    If {
        cond: Vec<(Connector, Node)>,
        then: Vec<(Connector, Node)>,
        otherwise: Vec<(Connector, Node)>,
    },
}

type List = Vec<(Connector, Node)>;

struct Parser {
    tokens: Vec<Token>,
    pos: usize,
}

const KEYWORDS: [&str; 9] = [
    "while", "until", "do", "done", "if", "then", "else", "fi", "elif",
];

impl Parser {
    fn peek_word(&self) -> Option<&str> {
        match self.tokens.get(self.pos) {
            Some(Token::Word(w)) => w.literal(),
            _ => None,
        }
    }

    fn expect_word(&mut self, word: &str) -> Result<(), String> {
        if self.peek_word() == Some(word) {
            self.pos += 1;
            Ok(())
        } else {
            Err(format!("Syntax error: expecting \"{word}\""))
        }
    }

    /// Commands until one of `stops` appears in command position (or the end).
    fn list(&mut self, stops: &[&str]) -> Result<List, String> {
        let mut items = Vec::new();
        let mut connector = Connector::Always;
        loop {
            while self.tokens.get(self.pos) == Some(&Token::Semi) {
                self.pos += 1;
            }
            match self.tokens.get(self.pos) {
                None => break,
                Some(Token::Word(w)) if w.literal().is_some_and(|l| stops.contains(&l)) => break,
                Some(Token::And | Token::Or) => {
                    return Err("Syntax error: \"&&\" or \"||\" unexpected".into());
                }
                _ => {}
            }
            let node = self.command()?;
            items.push((connector, node));
            connector = match self.tokens.get(self.pos) {
                Some(Token::And) => {
                    self.pos += 1;
                    Connector::IfOk
                }
                Some(Token::Or) => {
                    self.pos += 1;
                    Connector::IfFailed
                }
                _ => Connector::Always,
            };
        }
        if connector != Connector::Always {
            return Err("Syntax error: end of file unexpected".into());
        }
        Ok(items)
    }

    fn command(&mut self) -> Result<Node, String> {
        match self.peek_word() {
            Some(kw @ ("while" | "until")) => {
                let until = kw == "until";
                self.pos += 1;
                let cond = self.list(&["do"])?;
                self.expect_word("do")?;
                let body = self.list(&["done"])?;
                self.expect_word("done")?;
                if cond.is_empty() || body.is_empty() {
                    return Err("Syntax error: empty loop".into());
                }
                Ok(Node::While { until, cond, body })
            }
            Some("if") => {
                self.pos += 1;
                let cond = self.list(&["then"])?;
                self.expect_word("then")?;
                let then = self.list(&["else", "fi", "elif"])?;
                let otherwise = match self.peek_word() {
                    Some("else") => {
                        self.pos += 1;
                        self.list(&["fi"])?
                    }
                    Some("elif") => return Err("elif is not supported".into()),
                    _ => Vec::new(),
                };
                self.expect_word("fi")?;
                Ok(Node::If {
                    cond,
                    then,
                    otherwise,
                })
            }
            Some(w) if KEYWORDS.contains(&w) => Err(format!("Syntax error: \"{w}\" unexpected")),
            _ => {
                let mut argv = Vec::new();
                let mut redirect = Redirect::default();
                while let Some(token) = self.tokens.get(self.pos) {
                    match token {
                        Token::Word(w) => argv.push(w.clone()),
                        Token::Redir { fd, target } => {
                            let to = match target.as_str() {
                                "/dev/null" => Target::Null,
                                "&1" => redirect.stdout.clone(),
                                "&2" => redirect.stderr.clone(),
                                other => Target::File(other.to_string()),
                            };
                            if *fd == 2 {
                                redirect.stderr = to;
                            } else {
                                redirect.stdout = to;
                            }
                        }
                        Token::Semi | Token::And | Token::Or => break,
                    }
                    self.pos += 1;
                }
                Ok(Node::Simple { argv, redirect })
            }
        }
    }
}

fn parse(script: &str) -> Result<List, String> {
    let mut parser = Parser {
        tokens: tokenize(script)?,
        pos: 0,
    };
    let list = parser.list(&[])?;
    if parser.pos < parser.tokens.len() {
        let what = match &parser.tokens[parser.pos] {
            Token::Word(w) => w.literal().unwrap_or("$(...)").to_string(),
            _ => "token".into(),
        };
        return Err(format!("Syntax error: \"{what}\" unexpected"));
    }
    Ok(list)
}

// ---- running ----

struct Shell {
    host: Host,
    tx: mpsc::Sender<ExecChunk>,
}

type BoxFlow<'a> = Pin<Box<dyn Future<Output = Flow> + Send + 'a>>;

impl Shell {
    /// Write to where `target` points. False if the reader is gone.
    async fn write(&self, target: &Target, bytes: Vec<u8>) -> bool {
        let chunk = match target {
            Target::Null => return true,
            Target::Stdout => ExecChunk::Stdout(bytes),
            Target::Stderr => ExecChunk::Stderr(bytes),
            Target::File(path) => match self.host.write(path, &bytes) {
                Ok(()) => return true,
                // The kernel refused the value (drop_caches takes 1, 2 or 3).
                Err(why) => ExecChunk::Stderr(format!("sh: 1: write error: {why}\n").into_bytes()),
            },
        };
        self.tx.send(chunk).await.is_ok()
    }

    async fn out(&self, r: &Redirect, text: impl Into<Vec<u8>>) -> Result<(), Flow> {
        if self.write(&r.stdout, text.into()).await {
            Ok(())
        } else {
            Err(Flow::Cancelled)
        }
    }

    async fn err(&self, r: &Redirect, text: impl Into<Vec<u8>>) -> Result<(), Flow> {
        if self.write(&r.stderr, text.into()).await {
            Ok(())
        } else {
            Err(Flow::Cancelled)
        }
    }

    /// Wait, unless the reader goes away or the container dies.
    async fn sleep(&self, d: Duration) -> Result<(), Flow> {
        tokio::select! {
            _ = tokio::time::sleep(d) => Ok(()),
            _ = self.tx.closed() => Err(Flow::Cancelled),
            _ = self.host.shutdown().cancelled() => Err(Flow::Killed),
        }
    }

    fn run_list<'a>(&'a self, list: &'a [(Connector, Node)]) -> BoxFlow<'a> {
        Box::pin(async move {
            let mut status = 0;
            for (connector, node) in list {
                let run = match connector {
                    Connector::Always => true,
                    Connector::IfOk => status == 0,
                    Connector::IfFailed => status != 0,
                };
                if !run {
                    continue;
                }
                match self.run_node(node).await {
                    Flow::Status(s) => status = s,
                    other => return other,
                }
            }
            Flow::Status(status)
        })
    }

    fn run_node<'a>(&'a self, node: &'a Node) -> BoxFlow<'a> {
        Box::pin(async move {
            match node {
                Node::Simple { argv, redirect } => {
                    // Files are opened before the command runs; a refused one skips it (2).
                    for target in [&redirect.stdout, &redirect.stderr] {
                        if let Target::File(path) = target
                            && let Err(why) = self.host.check_write(path)
                        {
                            let msg = format!("sh: 1: cannot create {path}: {why}\n");
                            return match self.err(&Redirect::default(), msg).await {
                                Ok(()) => Flow::Status(2),
                                Err(flow) => flow,
                            };
                        }
                    }
                    match self.expand(argv, redirect).await {
                        Ok(argv) => self.run_argv(&argv, redirect).await,
                        Err(flow) => flow,
                    }
                }
                Node::While { until, cond, body } => {
                    let mut status = 0;
                    loop {
                        if self.tx.is_closed() {
                            return Flow::Cancelled;
                        }
                        if self.host.shutdown().is_cancelled() {
                            return Flow::Killed;
                        }
                        let ok = match self.run_list(cond).await {
                            Flow::Status(s) => s == 0,
                            other => return other,
                        };
                        if ok == *until {
                            return Flow::Status(status);
                        }
                        match self.run_list(body).await {
                            Flow::Status(s) => status = s,
                            other => return other,
                        }
                        // A loop whose body takes no time still lets the runtime breathe.
                        tokio::task::yield_now().await;
                    }
                }
                Node::If {
                    cond,
                    then,
                    otherwise,
                } => match self.run_list(cond).await {
                    Flow::Status(0) => self.run_list(then).await,
                    Flow::Status(_) => self.run_list(otherwise).await,
                    other => other,
                },
            }
        })
    }

    /// Expand words: run each `$(...)` and put its output (without trailing newlines) in;
    /// an unquoted substitution is split into fields on whitespace, as sh does.
    async fn expand(&self, words: &[Word], r: &Redirect) -> Result<Vec<String>, Flow> {
        let mut argv = Vec::with_capacity(words.len());
        for word in words {
            let mut fields = vec![String::new()];
            let only_unquoted = !word.0.is_empty()
                && word.0.iter().all(|p| {
                    matches!(
                        p,
                        Part::Subst { quoted: false, .. } | Part::Var { quoted: false, .. }
                    )
                });
            for part in &word.0 {
                let last = fields.len() - 1;
                match part {
                    Part::Lit(s) => fields[last].push_str(s),
                    Part::Subst {
                        script,
                        quoted: true,
                    } => fields[last].push_str(&self.capture(script, r).await?),
                    Part::Var { name, quoted: true } => {
                        fields[last].push_str(&self.host.var(name).unwrap_or_default());
                    }
                    Part::Var {
                        name,
                        quoted: false,
                    } => {
                        let value = self.host.var(name).unwrap_or_default();
                        let mut pieces = value.split_whitespace();
                        if let Some(first) = pieces.next() {
                            fields[last].push_str(first);
                        }
                        fields.extend(pieces.map(str::to_string));
                    }
                    Part::Subst {
                        script,
                        quoted: false,
                    } => {
                        let out = self.capture(script, r).await?;
                        let mut pieces = out.split_whitespace();
                        if let Some(first) = pieces.next() {
                            fields[last].push_str(first);
                        }
                        fields.extend(pieces.map(str::to_string));
                    }
                }
            }
            if only_unquoted && fields.len() == 1 && fields[0].is_empty() {
                continue;
            }
            argv.extend(fields);
        }
        Ok(argv)
    }

    /// Run `script` in a subshell and return what it printed; its stderr goes to ours.
    async fn capture(&self, script: &str, r: &Redirect) -> Result<String, Flow> {
        let list = match parse(script) {
            Ok(list) => list,
            Err(e) => {
                self.err(r, format!("sh: 1: {e}\n")).await?;
                return Ok(String::new());
            }
        };
        let (tx, mut rx) = mpsc::channel(64);
        let child = Shell {
            host: self.host.clone(),
            tx,
        };
        let run = async move {
            let flow = child.run_list(&list).await;
            drop(child);
            flow
        };
        let collect = async {
            let mut out = Vec::new();
            while let Some(chunk) = rx.recv().await {
                match chunk {
                    ExecChunk::Stdout(b) => out.extend(b),
                    ExecChunk::Stderr(b) => {
                        if !self.write(&r.stderr, b).await {
                            return Err(Flow::Cancelled);
                        }
                    }
                    ExecChunk::Exit(_) => {}
                }
            }
            Ok(out)
        };
        let (flow, out) = tokio::select! {
            both = async { tokio::join!(run, collect) } => both,
            _ = self.tx.closed() => return Err(Flow::Cancelled),
        };
        match flow {
            Flow::Cancelled | Flow::Killed => return Err(flow),
            Flow::Status(_) | Flow::Exit(_) => {}
        }
        let mut text = String::from_utf8_lossy(&out?).into_owned();
        while text.ends_with('\n') {
            text.pop();
        }
        Ok(text)
    }

    fn run_argv<'a>(&'a self, argv: &'a [String], r: &'a Redirect) -> BoxFlow<'a> {
        Box::pin(async move {
            match self.command(argv, r).await {
                Ok(status) => status,
                Err(flow) => flow,
            }
        })
    }

    async fn command(&self, argv: &[String], r: &Redirect) -> Result<Flow, Flow> {
        let Some(first) = argv.first() else {
            return Ok(Flow::Status(0));
        };
        let slow = self.host.slow_exec_ms();
        if slow > 0 {
            self.sleep(Duration::from_millis(slow)).await?;
        }
        if self.host.shutdown().is_cancelled() {
            return Err(Flow::Killed);
        }
        let name = first
            .strip_prefix("/usr/bin/")
            .or_else(|| first.strip_prefix("/bin/"))
            .or_else(|| first.strip_prefix("/usr/local/bin/"))
            .unwrap_or(first);
        let args = &argv[1..];
        let status = match name {
            "cat" => self.cat(args, r).await?,
            "head" => self.head(args, r).await?,
            "echo" => self.echo(args, r).await?,
            "sleep" => self.sleep_cmd(args, r).await?,
            "true" | ":" => 0,
            "false" => 1,
            "exit" => {
                let code = args.first().and_then(|a| a.parse().ok()).unwrap_or(0);
                return Ok(Flow::Exit(code));
            }
            "test" => self.test(args),
            "[" => {
                if args.last().map(String::as_str) != Some("]") {
                    self.err(r, "sh: [: missing ]\n").await?;
                    2
                } else {
                    self.test(&args[..args.len() - 1])
                }
            }
            "hostname" => {
                self.out(r, format!("{}\n", self.host.pod_name())).await?;
                0
            }
            "date" => self.date(args, r).await?,
            "grep" => self.grep(args, r).await?,
            "id" => self.id(args, r).await?,
            // Nothing is buffered in the lab: there is nothing to flush.
            "sync" => 0,
            "ollama" => self.ollama(args, r).await?,
            // Mounted by the NVIDIA container runtime into a container given a GPU only.
            "nvidia-smi" if matches!(&self.host, Host::Runtime(rt) if rt.spec.gpus > 0) => {
                self.nvidia_smi(args, r).await?
            }
            // The ollama image has no curl; the lab's other containers stand for images that
            // have it (curlimages/curl, the study's client pod).
            "curl" if matches!(self.host, Host::Plain(_)) => self.curl(args, r).await?,
            "sh" | "bash" | "dash" => return self.sh(args, r).await,
            "command" => self.command_v(args, r).await?,
            _ => {
                self.err(r, format!("sh: {first}: not found\n")).await?;
                127
            }
        };
        Ok(Flow::Status(status))
    }

    /// `command -v NAME...`: each name this container can run, printed; status 1 when one
    /// is missing (POSIX `command`, as dash and bash answer it).
    async fn command_v(&self, args: &[String], r: &Redirect) -> Result<i32, Flow> {
        let Some(("-v", names)) = args.split_first().map(|(f, n)| (f.as_str(), n)) else {
            self.err(r, "sh: command: only -v NAME is known here\n")
                .await?;
            return Ok(2);
        };
        let mut status = if names.is_empty() { 1 } else { 0 };
        for name in names {
            let known = KNOWN.contains(&name.as_str())
                || (name == "curl" && matches!(self.host, Host::Plain(_)));
            if known {
                self.out(r, format!("{name}\n")).await?;
            } else {
                status = 1;
            }
        }
        Ok(status)
    }

    async fn sh(&self, args: &[String], r: &Redirect) -> Result<Flow, Flow> {
        let script = match args {
            [flag, script, ..] if flag == "-c" => script,
            [] => return Ok(Flow::Status(0)),
            _ => {
                self.err(r, "sh: only `sh -c SCRIPT` is supported here\n")
                    .await?;
                return Ok(Flow::Status(2));
            }
        };
        match parse(script) {
            Ok(list) => Ok(match self.run_list(&list).await {
                Flow::Exit(code) => Flow::Status(code),
                other => other,
            }),
            Err(e) => {
                self.err(r, format!("sh: 1: {e}\n")).await?;
                Ok(Flow::Status(2))
            }
        }
    }

    async fn cat(&self, files: &[String], r: &Redirect) -> Result<i32, Flow> {
        let mut status = 0;
        for file in files {
            match self.host.read(file) {
                Some(text) => self.out(r, text).await?,
                None => {
                    let why = if self.host.is_dir(file) {
                        "Is a directory"
                    } else {
                        "No such file or directory"
                    };
                    self.err(r, format!("cat: {file}: {why}\n")).await?;
                    status = 1;
                }
            }
        }
        Ok(status)
    }

    async fn head(&self, args: &[String], r: &Redirect) -> Result<i32, Flow> {
        let mut lines = 10usize;
        let mut files = Vec::new();
        let mut i = 0;
        while i < args.len() {
            let a = &args[i];
            let count = if a == "-n" {
                i += 1;
                Some(args.get(i).map(String::as_str).unwrap_or(""))
            } else if let Some(n) = a.strip_prefix("-n") {
                Some(n)
            } else if a.len() > 1
                && a.starts_with('-')
                && a[1..].chars().all(|c| c.is_ascii_digit())
            {
                Some(&a[1..])
            } else {
                files.push(a.clone());
                None
            };
            if let Some(count) = count {
                match count.parse() {
                    Ok(n) => lines = n,
                    Err(_) => {
                        self.err(r, format!("head: invalid number of lines: '{count}'\n"))
                            .await?;
                        return Ok(1);
                    }
                }
            }
            i += 1;
        }
        let many = files.len() > 1;
        let mut status = 0;
        for (k, file) in files.iter().enumerate() {
            let Some(text) = self.host.read(file) else {
                self.err(
                    r,
                    format!("head: cannot open '{file}' for reading: No such file or directory\n"),
                )
                .await?;
                status = 1;
                continue;
            };
            let mut out = String::new();
            if many {
                if k > 0 {
                    out.push('\n');
                }
                out.push_str(&format!("==> {file} <==\n"));
            }
            for line in text.split_inclusive('\n').take(lines) {
                out.push_str(line);
            }
            self.out(r, out).await?;
        }
        Ok(status)
    }

    /// `curl` (see `curl.rs`): its pieces go where the command's redirections point; the
    /// container dying ends it with 137, the reader leaving cancels it.
    async fn curl(&self, args: &[String], r: &Redirect) -> Result<i32, Flow> {
        let Host::Plain(p) = &self.host else {
            return Ok(127);
        };
        let inv = match curl::parse(args) {
            Ok(inv) => inv,
            Err(msg) => {
                self.err(r, msg).await?;
                return Ok(2);
            }
        };
        let body_target = match &inv.output {
            curl::Output::Stdout => r.stdout.clone(),
            curl::Output::Null => Target::Null,
            curl::Output::File(path) => match self.host.check_write(path) {
                Ok(()) => Target::File(path.clone()),
                Err(_) => Target::Null,
            },
        };
        let unwritable =
            matches!(&inv.output, curl::Output::File(path) if self.host.check_write(path).is_err());
        let (tx, mut rx) = mpsc::channel(16);
        let network = p.spec.network.clone();
        let transfer = async {
            let code = curl::run(&inv, &network, &tx).await;
            drop(tx);
            code
        };
        let forward = async {
            while let Some(piece) = rx.recv().await {
                let ok = match piece {
                    curl::Piece::Body(b) => self.write(&body_target, b).await,
                    curl::Piece::WriteOut(b) => self.write(&r.stdout, b).await,
                    curl::Piece::Stderr(b) => self.write(&r.stderr, b).await,
                };
                if !ok {
                    return Err(Flow::Cancelled);
                }
            }
            Ok(())
        };
        let (code, forwarded) = tokio::select! {
            both = async { tokio::join!(transfer, forward) } => both,
            _ = self.tx.closed() => return Err(Flow::Cancelled),
            _ = self.host.shutdown().cancelled() => return Err(Flow::Killed),
        };
        forwarded?;
        if unwritable && code == 0 {
            if !inv.quiet() {
                self.err(r, "curl: (23) Failure writing output to destination\n")
                    .await?;
            }
            return Ok(23);
        }
        Ok(code)
    }

    async fn echo(&self, args: &[String], r: &Redirect) -> Result<i32, Flow> {
        let (newline, words) = match args.first().map(String::as_str) {
            Some("-n") => (false, &args[1..]),
            _ => (true, args),
        };
        let mut text = words.join(" ");
        if newline {
            text.push('\n');
        }
        self.out(r, text).await?;
        Ok(0)
    }

    async fn sleep_cmd(&self, args: &[String], r: &Redirect) -> Result<i32, Flow> {
        let Some(arg) = args.first() else {
            self.err(r, "sleep: missing operand\n").await?;
            return Ok(1);
        };
        let (number, unit) = match arg.char_indices().last() {
            Some((i, c @ ('s' | 'm' | 'h' | 'd'))) => (&arg[..i], c),
            _ => (arg.as_str(), 's'),
        };
        let factor = match unit {
            'm' => 60.0,
            'h' => 3600.0,
            'd' => 86400.0,
            _ => 1.0,
        };
        match number.parse::<f64>() {
            Ok(s) if s.is_finite() && s >= 0.0 => {
                self.sleep(Duration::from_secs_f64((s * factor).min(1e9)))
                    .await?;
                Ok(0)
            }
            _ => {
                self.err(r, format!("sleep: invalid time interval '{arg}'\n"))
                    .await?;
                Ok(1)
            }
        }
    }

    fn test(&self, args: &[String]) -> i32 {
        let exists = |f: &str| self.host.read(f).is_some() || self.host.is_dir(f);
        let ok = match args {
            [] => false,
            [word] => !word.is_empty(),
            [op, file] => match op.as_str() {
                "-e" | "-r" => exists(file),
                "-f" | "-s" => self.host.read(file).is_some(),
                "-d" => self.host.is_dir(file),
                "-n" => !file.is_empty(),
                "-z" => file.is_empty(),
                "!" => file.is_empty(),
                _ => return 2,
            },
            [a, op, b] => match op.as_str() {
                "=" | "==" => a == b,
                "!=" => a != b,
                _ => return 2,
            },
            _ => return 2,
        };
        if ok { 0 } else { 1 }
    }

    async fn date(&self, args: &[String], r: &Redirect) -> Result<i32, Flow> {
        use std::fmt::Write;
        let now = Utc::now();
        let fmt = match args.first().map(String::as_str) {
            None => "%a %b %e %H:%M:%S UTC %Y",
            Some(f) if f.starts_with('+') => &f[1..],
            Some(other) => {
                self.err(r, format!("date: invalid date '{other}'\n"))
                    .await?;
                return Ok(1);
            }
        };
        let mut text = String::new();
        // chrono reports an unknown specifier as a formatting error.
        if write!(text, "{}", now.format(fmt)).is_err() {
            self.err(r, format!("date: invalid format '{fmt}'\n"))
                .await?;
            return Ok(1);
        }
        self.out(r, format!("{text}\n")).await?;
        Ok(0)
    }

    /// `grep [-E] [-q] PATTERN FILE...` (see `grep` for the patterns known).
    async fn grep(&self, args: &[String], r: &Redirect) -> Result<i32, Flow> {
        let mut extended = false;
        let mut quiet = false;
        let mut rest = args;
        while let Some(flag) = rest.first().filter(|a| a.starts_with('-') && a.len() > 1) {
            if flag == "--" {
                rest = &rest[1..];
                break;
            }
            for c in flag[1..].chars() {
                match c {
                    'E' => extended = true,
                    'q' => quiet = true,
                    _ => {
                        self.err(
                            r,
                            format!("grep: the lab's grep knows only -E and -q, not -{c}\n"),
                        )
                        .await?;
                        return Ok(2);
                    }
                }
            }
            rest = &rest[1..];
        }
        let Some((pattern, files)) = rest.split_first() else {
            self.err(r, "Usage: grep [-E] [-q] PATTERN FILE...\n")
                .await?;
            return Ok(2);
        };
        if files.is_empty() {
            self.err(r, "grep: reading standard input is not supported here\n")
                .await?;
            return Ok(2);
        }
        let pattern = match super::grep::Pattern::new(pattern, extended) {
            Ok(p) => p,
            Err(e) => {
                self.err(r, format!("grep: {e}\n")).await?;
                return Ok(2);
            }
        };
        let mut found = false;
        let mut failed = false;
        for file in files {
            let Some(text) = self.host.read(file) else {
                let why = if self.host.is_dir(file) {
                    "Is a directory"
                } else {
                    "No such file or directory"
                };
                self.err(r, format!("grep: {file}: {why}\n")).await?;
                failed = true;
                continue;
            };
            let mut out = String::new();
            for line in text.lines().filter(|l| pattern.is_match(l)) {
                found = true;
                if files.len() > 1 {
                    out.push_str(file);
                    out.push(':');
                }
                out.push_str(line);
                out.push('\n');
            }
            if !quiet && !out.is_empty() {
                self.out(r, out).await?;
            }
        }
        // As GNU grep: 0 when a line matched, else 2 after an error, else 1.
        Ok(if found {
            0
        } else if failed {
            2
        } else {
            1
        })
    }

    /// `id`, `id -u`, `id -un` (lab containers run as root).
    async fn id(&self, args: &[String], r: &Redirect) -> Result<i32, Flow> {
        let flags: String = args
            .iter()
            .map(|a| a.strip_prefix('-').unwrap_or("?"))
            .collect();
        let mut sorted: Vec<char> = flags.chars().collect();
        sorted.sort_unstable();
        let text = match sorted.iter().collect::<String>().as_str() {
            "" => "uid=0(root) gid=0(root) groups=0(root)",
            "u" => "0",
            "g" => "0",
            "nu" => "root",
            "gn" => "root",
            _ => {
                self.err(
                    r,
                    format!("id: unsupported arguments {args:?} (known: -u, -g, -n)\n"),
                )
                .await?;
                return Ok(1);
            }
        };
        self.out(r, format!("{text}\n")).await?;
        Ok(0)
    }

    /// `nvidia-smi --query-gpu=index,uuid,memory.used,memory.total
    /// --format=csv,noheader,nounits` (the one query readygap runs): a line per simulated
    /// GPU, memory in MiB, as the real one prints it.
    async fn nvidia_smi(&self, args: &[String], r: &Redirect) -> Result<i32, Flow> {
        let Host::Runtime(rt) = &self.host else {
            return Ok(127);
        };
        let want = readygap_core::gpu::NVIDIA_SMI_QUERY[1..].to_vec();
        if args.iter().map(String::as_str).collect::<Vec<_>>() != want {
            let only = want.join(" ");
            self.err(r, format!("the lab's nvidia-smi knows only: {only}\n"))
                .await?;
            return Ok(2);
        }
        let mib = |b: u64| b >> 20;
        let text: String = rt
            .gpu_memory()
            .iter()
            .enumerate()
            .map(|(i, (uuid, used))| {
                format!(
                    "{i}, {uuid}, {}, {}\n",
                    mib(*used),
                    mib(super::GPU_VRAM_BYTES)
                )
            })
            .collect();
        self.out(r, text).await?;
        Ok(0)
    }

    async fn ollama(&self, args: &[String], r: &Redirect) -> Result<i32, Flow> {
        let Host::Runtime(rt) = &self.host else {
            self.err(r, "sh: ollama: not found\n").await?;
            return Ok(127);
        };
        let sub = args.first().map(String::as_str).unwrap_or("");
        if matches!(sub, "--version" | "-v") {
            let version = rt.spec.profile.ollama_version.clone();
            self.out(r, format!("ollama version is {version}\n"))
                .await?;
            return Ok(0);
        }
        if !matches!(sub, "ps" | "list" | "ls") {
            self.err(
                r,
                "Error: the lab's ollama CLI knows only: ps, list, --version\n",
            )
            .await?;
            return Ok(1);
        }
        if !rt.listening.load(Ordering::SeqCst) {
            self.err(
                r,
                "Error: could not connect to ollama app, is it running?\n",
            )
            .await?;
            return Ok(1);
        }
        let now = Utc::now();
        let text = if sub == "ps" {
            let context = rt.spec.profile.context_length.to_string();
            let rows: Vec<Vec<String>> = rt
                .resident_models()
                .into_iter()
                .map(|m| {
                    vec![
                        m.spec.name.clone(),
                        m.spec.short_id().to_string(),
                        human_bytes(m.spec.resident_bytes),
                        processor(m.spec.resident_bytes, m.vram),
                        context.clone(),
                        human_time(m.expires_at, now),
                    ]
                })
                .collect();
            table(
                &["NAME", "ID", "SIZE", "PROCESSOR", "CONTEXT", "UNTIL"],
                &rows,
            )
        } else {
            let rows: Vec<Vec<String>> = rt
                .spec
                .disk
                .entries()
                .into_iter()
                .map(|(m, modified)| {
                    vec![
                        m.name.clone(),
                        m.short_id().to_string(),
                        human_bytes(m.disk_bytes),
                        human_time(modified, now),
                    ]
                })
                .collect();
            table(&["NAME", "ID", "SIZE", "MODIFIED"], &rows)
        };
        self.out(r, text).await?;
        Ok(0)
    }
}

/// The PROCESSOR column of `ollama ps` (cmd/cmd.go ListRunningHandler).
fn processor(size: u64, vram: u64) -> String {
    match (size, vram) {
        (_, 0) => "100% CPU".into(),
        (s, v) if s == v => "100% GPU".into(),
        (s, v) if v > s || s == 0 => "Unknown".into(),
        (s, v) => {
            let cpu = ((s - v) as f64 / s as f64 * 100.0).round() as i64;
            format!("{cpu}%/{}% CPU/GPU", 100 - cpu)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lit(s: &str) -> Word {
        Word(vec![Part::Lit(s.to_string())])
    }

    fn simple(argv: &[&str]) -> Node {
        Node::Simple {
            argv: argv.iter().map(|s| lit(s)).collect(),
            redirect: Redirect::default(),
        }
    }

    #[test]
    fn scripts_parse_into_lists_loops_and_redirections() {
        let list =
            parse("while :; do head -n 50 /a /b; echo '@@ x'; sleep 0.05; done").expect("parse");
        assert_eq!(
            list,
            vec![(
                Connector::Always,
                Node::While {
                    until: false,
                    cond: vec![(Connector::Always, simple(&[":"]))],
                    body: vec![
                        (Connector::Always, simple(&["head", "-n", "50", "/a", "/b"])),
                        (Connector::Always, simple(&["echo", "@@ x"])),
                        (Connector::Always, simple(&["sleep", "0.05"])),
                    ],
                }
            )]
        );
        let list = parse("cat /x 2>/dev/null || cat /y && echo \"a \\\"b\\\"\"").expect("parse");
        assert_eq!(list.len(), 3);
        assert_eq!(
            list[0].1,
            Node::Simple {
                argv: vec![lit("cat"), lit("/x")],
                redirect: Redirect {
                    stdout: Target::Stdout,
                    stderr: Target::Null
                }
            }
        );
        assert_eq!(list[1].0, Connector::IfFailed);
        assert_eq!(list[2], (Connector::IfOk, simple(&["echo", "a \"b\""])));
        let list = parse("if test -e /f; then cat /f; else echo no; fi").expect("parse");
        assert!(matches!(&list[0].1, Node::If { otherwise, .. } if otherwise.len() == 1));
        let redirected = parse("echo hi >&2").expect("parse");
        assert!(matches!(
            &redirected[0].1,
            Node::Simple { redirect, .. } if redirect.stdout == Target::Stderr
        ));
    }

    #[test]
    fn command_substitutions_nest_and_remember_quoting() {
        let list = parse("echo \"t $(date +%s)\" $(cat \"/a b\" $(echo ')'))").expect("parse");
        let Node::Simple { argv, .. } = &list[0].1 else {
            panic!("not a simple command: {list:?}");
        };
        assert_eq!(
            argv,
            &vec![
                lit("echo"),
                Word(vec![
                    Part::Lit("t ".into()),
                    Part::Subst {
                        script: "date +%s".into(),
                        quoted: true
                    }
                ]),
                Word(vec![Part::Subst {
                    script: "cat \"/a b\" $(echo ')')".into(),
                    quoted: false
                }]),
            ]
        );
        assert!(parse("echo $(date").is_err());
    }

    proptest::proptest! {
        #[test]
        fn any_script_parses_or_fails_without_panicking(script in "[ -~\\n$()'\"&|;>µ]{0,80}") {
            let _ = parse(&script);
        }
    }

    #[test]
    fn bad_scripts_are_errors_not_panics() {
        for bad in [
            "while :; do echo",
            "echo 'open",
            "cat a | head",
            "done",
            "echo a &&",
            "&& echo",
            "echo > ",
            "sleep 1 &",
            "if true; then echo",
            "echo ${",
            "echo ${A-b}",
        ] {
            assert!(parse(bad).is_err(), "{bad:?} should not parse");
        }
    }

    fn node_container(privileged: bool) -> Arc<PlainContainer> {
        use super::super::{NodeCache, PlainSpec};
        PlainContainer::start(PlainSpec {
            pod_name: "readygap-node-lab-node-1".into(),
            node_name: "lab-node-1".into(),
            node_cache: Arc::new(NodeCache::new(false)),
            host_proc: Some("/host/proc".into()),
            privileged,
            node_anon_bytes: Arc::new(|| 0),
            on_drop: Arc::new(|_, _| {}),
            network: Default::default(),
        })
    }

    async fn run(c: &Arc<PlainContainer>, script: &str) -> ExecOutput {
        let out = c.exec(vec!["sh".into(), "-c".into(), script.into()]);
        tokio::time::timeout(Duration::from_secs(20), out.collect())
            .await
            .expect("the command ends")
    }

    /// `command -v` as dash answers it: each known name printed, status 1 when one is not;
    /// the memory reader's detection asks it for `head` and `sleep`.
    #[tokio::test]
    async fn command_v_names_what_the_container_runs() {
        let c = node_container(false);
        let out = run(&c, "command -v head sleep curl").await;
        assert_eq!(
            (out.code, out.stdout_text().as_str()),
            (Some(0), "head\nsleep\ncurl\n")
        );
        let out = run(&c, "command -v head nope || echo missing").await;
        assert_eq!(out.stdout_text(), "head\nmissing\n");
        // The clause of readygap's detection script (readygap-live sources/memory.rs).
        let script = "if command -v head >/dev/null 2>&1 && command -v sleep >/dev/null 2>&1; then echo coreutils; fi";
        let out = run(&c, script).await;
        assert!(
            out.stdout_text().lines().any(|l| l == "coreutils"),
            "{out:?}"
        );
    }

    #[tokio::test]
    async fn grep_forms_and_statuses() {
        let c = node_container(true);
        let out = run(&c, "grep \"^cpu \" /host/proc/stat").await;
        assert_eq!(out.code, Some(0));
        assert_eq!(
            out.stdout_text().lines().count(),
            1,
            "{}",
            out.stdout_text()
        );
        let out = run(
            &c,
            "grep -E \"^(MemTotal|Cached|SwapFree):\" /host/proc/meminfo",
        )
        .await;
        let text = out.stdout_text();
        let keys: Vec<&str> = text
            .lines()
            .map(|l| l.split(':').next().unwrap_or(""))
            .collect();
        assert_eq!(keys, ["MemTotal", "Cached", "SwapFree"]);
        let out = run(&c, "grep ^Nope: /host/proc/meminfo || echo none").await;
        assert_eq!((out.code, out.stdout_text().as_str()), (Some(0), "none\n"));
        let out = run(&c, "grep -q ^Cached: /host/proc/meminfo && echo yes").await;
        assert_eq!(out.stdout_text(), "yes\n");
        let out = run(&c, "grep x /nope").await;
        assert_eq!(out.code, Some(2));
        assert!(
            out.stderr_text().contains("No such file"),
            "{}",
            out.stderr_text()
        );
        let out = run(&c, "grep 'a*' /host/proc/meminfo").await;
        assert_eq!(out.code, Some(2));
        let out = run(&c, "sync && ollama ps").await;
        assert_eq!(out.code, Some(127), "no ollama in a plain container");
        let out = run(&c, "echo hi > /etc/motd; echo after").await;
        assert_eq!(out.stdout_text(), "after\n");
        assert!(
            out.stderr_text()
                .contains("cannot create /etc/motd: Read-only file system")
        );
    }
}
