//! JSON-lines recordings: a versioned header line, then one [`Event`] per line, each line
//! flushed as it is written so a killed process leaves a file that replays up to the kill.
//!
//! The reader names `FILE:LINE` for a malformed line; a torn last line (no newline at the end
//! and not valid JSON: the writer was killed mid-write) is a warning, and everything before it
//! is kept.

use crate::event::{Event, Timestamp};
use serde::{Deserialize, Serialize};
use std::fs::File;
use std::io::{BufRead, BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};

/// The recording format's name in the header.
pub const FORMAT: &str = "readygap-recording";
/// The current format version.
pub const VERSION: u32 = 1;

/// The first line of a recording.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Header {
    pub format: String,
    pub version: u32,
    /// readygap's version that wrote the file.
    pub tool_version: String,
    #[serde(with = "crate::event::ts_format")]
    pub started: Timestamp,
    #[serde(default)]
    pub context: String,
    #[serde(default)]
    pub namespace: String,
    #[serde(default)]
    pub target: String,
    /// Settings in force (probe interval, model, access mode, ...).
    #[serde(default)]
    pub settings: serde_json::Value,
}

impl Header {
    pub fn new(started: Timestamp, context: &str, namespace: &str, target: &str) -> Self {
        Header {
            format: FORMAT.into(),
            version: VERSION,
            tool_version: env!("CARGO_PKG_VERSION").into(),
            started,
            context: context.into(),
            namespace: namespace.into(),
            target: target.into(),
            settings: serde_json::Value::Null,
        }
    }
}

/// Errors reading a recording.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}:{line}: {message}")]
    Malformed {
        path: PathBuf,
        line: usize,
        message: String,
    },
}

/// Writes a recording, one flushed line per event.
pub struct Recorder {
    out: BufWriter<File>,
    path: PathBuf,
    buf: Vec<u8>,
    written: u64,
}

impl Recorder {
    /// Create (truncate) `path` and write the header.
    pub fn create(path: &Path, header: &Header) -> std::io::Result<Recorder> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)?;
        }
        let file = File::create(path)?;
        let mut r = Recorder {
            out: BufWriter::new(file),
            path: path.to_path_buf(),
            buf: Vec::with_capacity(512),
            written: 0,
        };
        r.line(header)?;
        Ok(r)
    }

    fn line<T: Serialize>(&mut self, value: &T) -> std::io::Result<()> {
        self.buf.clear();
        serde_json::to_writer(&mut self.buf, value).map_err(std::io::Error::other)?;
        self.buf.push(b'\n');
        self.out.write_all(&self.buf)?;
        self.out.flush()
    }

    /// Append one event and flush it.
    pub fn write(&mut self, ev: &Event) -> std::io::Result<()> {
        self.line(ev)?;
        self.written += 1;
        Ok(())
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Events written so far.
    pub fn written(&self) -> u64 {
        self.written
    }
}

/// The event as it goes into a recording made with responses left out: an inference's
/// response text is dropped (its timing, status and Ollama's durations stay).
pub fn redacted(ev: &Event) -> std::borrow::Cow<'_, Event> {
    use crate::event::EventKind;
    match &ev.kind {
        EventKind::InferenceDone(r) if r.response.is_some() => {
            let mut e = ev.clone();
            if let EventKind::InferenceDone(r) = &mut e.kind {
                r.response = None;
            }
            std::borrow::Cow::Owned(e)
        }
        _ => std::borrow::Cow::Borrowed(ev),
    }
}

/// A header for a recording made with prompts left out: the settings' `prompt` is removed.
pub fn redact_header(h: &mut Header) {
    if let Some(o) = h.settings.as_object_mut() {
        o.remove("prompt");
    }
}

/// A recording read whole.
#[derive(Debug, Clone)]
pub struct Recording {
    pub header: Header,
    pub events: Vec<Event>,
    /// Non-fatal problems (a torn last line).
    pub warnings: Vec<String>,
}

/// Read a whole recording into memory.
pub fn read(path: &Path) -> Result<Recording, ReadError> {
    read_from(path, open(path)?)
}

/// Read a whole recording from a reader; `path` names it in messages.
pub fn read_from(path: &Path, reader: impl BufRead) -> Result<Recording, ReadError> {
    let mut events = Vec::new();
    let (header, warnings) = for_each_from(path, reader, |ev| events.push(ev))?;
    Ok(Recording {
        header,
        events,
        warnings,
    })
}

/// Stream a recording: call `f` for each event in file order, without holding them all.
/// Returns the header and the warnings.
pub fn for_each(path: &Path, f: impl FnMut(Event)) -> Result<(Header, Vec<String>), ReadError> {
    for_each_from(path, open(path)?, f)
}

fn open(path: &Path) -> Result<BufReader<File>, ReadError> {
    let file = File::open(path).map_err(|source| ReadError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    Ok(BufReader::with_capacity(1 << 16, file))
}

/// [`for_each`] over any reader; `path` names it in messages.
pub fn for_each_from(
    path: &Path,
    mut reader: impl BufRead,
    mut f: impl FnMut(Event),
) -> Result<(Header, Vec<String>), ReadError> {
    let io = |source| ReadError::Io {
        path: path.to_path_buf(),
        source,
    };
    let malformed = |line: usize, message: String| ReadError::Malformed {
        path: path.to_path_buf(),
        line,
        message,
    };
    let mut buf = Vec::with_capacity(1024);
    let mut warnings = Vec::new();

    let n = reader.read_until(b'\n', &mut buf).map_err(io)?;
    if n == 0 {
        return Err(malformed(1, "empty file: no recording header".into()));
    }
    let header: Header = serde_json::from_slice(trim_eol(&buf))
        .map_err(|e| malformed(1, format!("not a readygap recording header: {e}")))?;
    if header.format != FORMAT {
        return Err(malformed(
            1,
            format!("format is {:?}, expected {FORMAT:?}", header.format),
        ));
    }
    if header.version > VERSION {
        return Err(malformed(
            1,
            format!(
                "recording version {} is newer than this readygap reads ({VERSION})",
                header.version
            ),
        ));
    }

    // Lines are parsed in parallel, chunk by chunk, and handed to `f` in file order: parsing
    // JSON is the cost of a replay, applying an event is ~10x cheaper.
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get().min(4));
    let mut first_line = 2usize;
    let mut chunk: Vec<u8> = Vec::with_capacity(CHUNK_BYTES + 4096);
    // Where each line of the chunk ends, as `read_until` found it (no second scan).
    let mut ends: Vec<usize> = Vec::new();
    loop {
        chunk.clear();
        ends.clear();
        while chunk.len() < CHUNK_BYTES {
            if reader.read_until(b'\n', &mut chunk).map_err(io)? == 0 {
                break;
            }
            ends.push(chunk.len());
        }
        if chunk.is_empty() {
            break;
        }
        let mut start = 0;
        let lines: Vec<&[u8]> = ends
            .iter()
            .map(|&end| {
                let line = &chunk[start..end];
                start = end;
                line
            })
            .collect();
        let per = lines.len().div_ceil(workers).max(1);
        let parsed: Vec<Vec<Parsed>> = std::thread::scope(|scope| {
            let handles: Vec<_> = lines
                .chunks(per)
                .map(|part| scope.spawn(move || part.iter().map(|l| parse_line(l)).collect()))
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().unwrap_or_default())
                .collect()
        });
        let mut line = first_line;
        for p in parsed.into_iter().flatten() {
            match p {
                Parsed::Event(ev) => f(*ev),
                Parsed::Blank => {}
                Parsed::Torn(e) => warnings.push(format!(
                    "{}:{line}: torn last line skipped (the writer stopped mid-line: {e})",
                    path.display()
                )),
                Parsed::Bad(e) => return Err(malformed(line, e)),
            }
            line += 1;
        }
        first_line = line;
    }
    Ok((header, warnings))
}

/// How much of a recording is read and parsed at once.
const CHUNK_BYTES: usize = 4 << 20;

enum Parsed {
    Event(Box<Event>),
    Blank,
    /// The last line, without its newline, does not parse: the writer was killed mid-line.
    Torn(String),
    Bad(String),
}

fn parse_line(raw: &[u8]) -> Parsed {
    let complete = raw.last() == Some(&b'\n');
    let text = trim_eol(raw);
    if text.iter().all(u8::is_ascii_whitespace) {
        return Parsed::Blank;
    }
    match serde_json::from_slice::<Event>(text) {
        Ok(ev) => Parsed::Event(Box::new(ev)),
        Err(e) if !complete => Parsed::Torn(e.to_string()),
        Err(e) => Parsed::Bad(e.to_string()),
    }
}

fn trim_eol(b: &[u8]) -> &[u8] {
    let b = b.strip_suffix(b"\n").unwrap_or(b);
    b.strip_suffix(b"\r").unwrap_or(b)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{EventKind, Source};

    fn ev(ms: i64, text: &str) -> Event {
        Event::new(
            chrono::DateTime::from_timestamp_millis(1_800_000_000_000 + ms).unwrap(),
            Source::Session,
            EventKind::Note { text: text.into() },
        )
    }

    fn header() -> Header {
        Header::new(ev(0, "").ts, "ctx", "ns", "deployment/ollama")
    }

    #[test]
    fn round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub/r.jsonl");
        let mut r = Recorder::create(&path, &header()).unwrap();
        let events = vec![ev(1, "a"), ev(2, "b")];
        for e in &events {
            r.write(e).unwrap();
        }
        drop(r);
        let rec = read(&path).unwrap();
        assert_eq!(rec.events, events);
        assert_eq!(rec.header, header());
        assert!(rec.warnings.is_empty());
    }

    #[test]
    fn malformed_line_names_file_and_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bad.jsonl");
        let mut text = serde_json::to_string(&header()).unwrap();
        text.push('\n');
        text.push_str(&serde_json::to_string(&ev(1, "a")).unwrap());
        text.push_str("\n{\"ts\":\"nope\"}\n");
        text.push_str(&serde_json::to_string(&ev(2, "b")).unwrap());
        text.push('\n');
        std::fs::write(&path, text).unwrap();
        let err = read(&path).unwrap_err().to_string();
        assert!(
            err.starts_with(&format!("{}:3: ", path.display())),
            "error was: {err}"
        );
    }

    #[test]
    fn torn_last_line_is_a_warning_and_keeps_the_rest() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("torn.jsonl");
        let mut text = serde_json::to_string(&header()).unwrap();
        text.push('\n');
        text.push_str(&serde_json::to_string(&ev(1, "a")).unwrap());
        text.push('\n');
        let full = serde_json::to_string(&ev(2, "b")).unwrap();
        text.push_str(&full[..full.len() / 2]);
        std::fs::write(&path, text).unwrap();
        let rec = read(&path).unwrap();
        assert_eq!(rec.events, vec![ev(1, "a")]);
        assert_eq!(rec.warnings.len(), 1);
        assert!(rec.warnings[0].contains(":3: torn last line"));
    }

    #[test]
    fn redaction_drops_responses_and_the_prompt_only() {
        use crate::event::{InferenceResult, RuntimeDurations};
        let done = Event::new(
            ev(5, "").ts,
            Source::Runtime,
            EventKind::InferenceDone(InferenceResult {
                request_id: 3,
                ok: true,
                http_status: Some(200),
                error: None,
                durations: RuntimeDurations {
                    total_ns: Some(9),
                    ..Default::default()
                },
                response: Some("READY".into()),
                done_at: None,
            }),
        );
        let r = redacted(&done);
        let EventKind::InferenceDone(res) = &r.kind else {
            panic!("kind changed")
        };
        assert_eq!(res.response, None);
        assert_eq!(res.durations.total_ns, Some(9));
        assert_eq!((res.ok, res.http_status, r.ts), (true, Some(200), done.ts));
        // Other events pass untouched (borrowed, not copied).
        let note = ev(1, "a");
        assert!(matches!(redacted(&note), std::borrow::Cow::Borrowed(_)));
        let mut h = header();
        h.settings = serde_json::json!({"prompt": "secret", "model": "m"});
        redact_header(&mut h);
        assert_eq!(h.settings, serde_json::json!({"model": "m"}));
    }

    #[test]
    fn not_a_recording() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.jsonl");
        std::fs::write(&path, "{\"format\":\"other\",\"version\":1}\n").unwrap();
        let err = read(&path).unwrap_err().to_string();
        assert!(err.contains(":1: "), "{err}");
        std::fs::write(&path, "").unwrap();
        assert!(read(&path).unwrap_err().to_string().contains("empty file"));
    }
}
