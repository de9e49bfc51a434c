//! Reads the Kubernetes protobuf bodies that client-go's typed clients send (kubectl's
//! `create serviceaccount|configmap|deployment|role|…`, `create token`, `auth can-i`, typed
//! deletes) into the JSON object a JSON client would have sent for the same Go struct, so the
//! API server stores it as it stores JSON.
//!
//! The wire format:
//! - the envelope (k8s.io/apimachinery `pkg/runtime/serializer/protobuf/protobuf.go`): the
//!   magic `k8s\0`, then a `runtime.Unknown` (`pkg/runtime/generated.proto`): 1 typeMeta
//!   {1 apiVersion, 2 kind}, 2 raw (the object's own message), 3 contentEncoding,
//!   4 contentType;
//! - the object: the gogo-protobuf encoding of the Go API struct, whose fields, kinds and JSON
//!   names [`super::proto_schema`] tables (generated from the Go types' struct tags, see
//!   `tools/gen_proto_schema.py`). client-go forces protobuf for built-in kinds and does not
//!   fall back to JSON on a 415 (client-go `gentype.PrefersProtobuf`,
//!   `rest.Request.UseProtobufAsDefault`; `rest/client.go` only falls back for CBOR).
//!
//! The JSON is Go's `encoding/json` of the decoded struct: a field without omitempty is
//! written even when zero (`"port": 0`, `"rules": null` for a nil slice), omitempty drops zero
//! scalars and empty slices and maps but never a struct (`"resources": {}`), pointers are
//! written when the message had them (`"replicas": 0`), `,inline` structs are merged into
//! their parent, and `metav1.Time`, `MicroTime`, `resource.Quantity`, `intstr.IntOrString`
//! and `FieldsV1` have their own forms. Unknown fields are skipped, as gogo's decoder does.
//! The tables have no cycles (the generator refuses them), so decoding nests a bounded depth.

use base64::Engine;
use serde_json::{Map, Value, json};

/// A message: the fields of one Go struct that protobuf carries.
#[derive(Debug)]
pub struct Message {
    /// `package.Type`, for error messages.
    pub name: &'static str,
    pub fields: &'static [Field],
}

/// One field of a message.
#[derive(Debug, Clone, Copy)]
pub struct Field {
    pub number: u32,
    /// The JSON name (unused for [`Shape::Inline`]).
    pub json: &'static str,
    pub kind: Kind,
    pub shape: Shape,
    pub omit: Omit,
}

/// What one value of a field is.
#[derive(Debug, Clone, Copy)]
pub enum Kind {
    Str,
    Bool,
    I32,
    I64,
    /// `[]byte`: base64 in JSON.
    Bytes,
    Msg(&'static Message),
    /// `metav1.Time`: RFC 3339 seconds, `null` when zero.
    Time,
    /// `metav1.MicroTime`: RFC 3339 with microseconds, `null` when zero.
    MicroTime,
    /// `resource.Quantity`: its string.
    Quantity,
    /// `intstr.IntOrString`: a number or a string.
    IntOrString,
    /// `metav1.FieldsV1`: raw JSON.
    FieldsV1,
}

/// How the Go field holds its kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// `T`: always present.
    Value,
    /// `*T`: present when the message has it.
    Pointer,
    /// `[]T`.
    Repeated,
    /// `map[string]T` (entries are messages {1 key, 2 value}).
    Map,
    /// An embedded struct with `json:",inline"`: its own message, merged into the parent.
    Inline,
}

/// The JSON tag's omission option.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Omit {
    Never,
    /// `omitempty`: zero scalars, empty slices and maps, nil pointers (never structs).
    Empty,
    /// `omitzero` (only on `metav1.Time` here): the zero time.
    Zero,
}

/// A table entry (keeps the generated tables short).
pub const fn f(number: u32, json: &'static str, kind: Kind, shape: Shape, omit: Omit) -> Field {
    Field {
        number,
        json,
        kind,
        shape,
        omit,
    }
}

/// The media type of Kubernetes protobuf.
pub const CONTENT_TYPE: &str = "application/vnd.kubernetes.protobuf";

/// The envelope's magic prefix.
const MAGIC: &[u8] = b"k8s\0";

/// Why a body could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProtoError {
    /// Not a well-formed protobuf object: the API server answers 400.
    Malformed(String),
    /// A well-formed envelope of a kind the lab has no table for.
    UnknownKind { api_version: String, kind: String },
}

impl std::fmt::Display for ProtoError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ProtoError::Malformed(m) => write!(f, "{m}"),
            ProtoError::UnknownKind { api_version, kind } => write!(
                f,
                "the lab reads no protobuf of kind {kind:?} (apiVersion {api_version:?})"
            ),
        }
    }
}

fn malformed(m: impl Into<String>) -> ProtoError {
    ProtoError::Malformed(m.into())
}

/// One field's value on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wire<'a> {
    Varint(u64),
    Fixed64(u64),
    Bytes(&'a [u8]),
    Fixed32(u32),
}

impl Wire<'_> {
    fn type_number(&self) -> u8 {
        match self {
            Wire::Varint(_) => 0,
            Wire::Fixed64(_) => 1,
            Wire::Bytes(_) => 2,
            Wire::Fixed32(_) => 5,
        }
    }
}

fn varint(buf: &mut &[u8]) -> Result<u64, ProtoError> {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let (&b, rest) = buf
            .split_first()
            .ok_or_else(|| malformed("unexpected EOF"))?;
        *buf = rest;
        v |= u64::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            return Ok(v);
        }
    }
    Err(malformed("integer overflow"))
}

fn take<'a>(buf: &mut &'a [u8], n: usize) -> Result<&'a [u8], ProtoError> {
    if n > buf.len() {
        return Err(malformed("unexpected EOF"));
    }
    let (head, rest) = buf.split_at(n);
    *buf = rest;
    Ok(head)
}

/// The fields of one message, in wire order: (field number, value).
pub fn fields(mut buf: &[u8]) -> Result<Vec<(u32, Wire<'_>)>, ProtoError> {
    let mut out = Vec::new();
    while !buf.is_empty() {
        let key = varint(&mut buf)?;
        let number = u32::try_from(key >> 3)
            .ok()
            .filter(|n| *n > 0)
            .ok_or_else(|| malformed(format!("illegal field number {}", key >> 3)))?;
        let value = match key & 7 {
            0 => Wire::Varint(varint(&mut buf)?),
            1 => Wire::Fixed64(u64::from_le_bytes(take(&mut buf, 8)?.try_into().unwrap())),
            2 => {
                let len =
                    usize::try_from(varint(&mut buf)?).map_err(|_| malformed("invalid length"))?;
                Wire::Bytes(take(&mut buf, len)?)
            }
            5 => Wire::Fixed32(u32::from_le_bytes(take(&mut buf, 4)?.try_into().unwrap())),
            w => return Err(malformed(format!("illegal wireType {w}"))),
        };
        out.push((number, value));
    }
    Ok(out)
}

/// The last length-delimited value of field `n` (a string, bytes or a message).
pub fn bytes_of<'a>(fields: &[(u32, Wire<'a>)], n: u32) -> Option<&'a [u8]> {
    fields.iter().rev().find_map(|(f, v)| match v {
        Wire::Bytes(b) if *f == n => Some(*b),
        _ => None,
    })
}

/// A body's envelope: the object's apiVersion, kind and message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Envelope<'a> {
    pub api_version: String,
    pub kind: String,
    pub raw: &'a [u8],
}

/// Whether a body starts with the protobuf envelope's magic.
pub fn is_protobuf(body: &[u8]) -> bool {
    body.starts_with(MAGIC)
}

/// Open the envelope (`k8s\0` + runtime.Unknown).
pub fn envelope(body: &[u8]) -> Result<Envelope<'_>, ProtoError> {
    let rest = body.strip_prefix(MAGIC).ok_or_else(|| {
        malformed("the protobuf body does not start with the Kubernetes magic number")
    })?;
    let unknown = fields(rest)?;
    let text = |fs: &[(u32, Wire<'_>)], n| {
        String::from_utf8_lossy(bytes_of(fs, n).unwrap_or_default()).into_owned()
    };
    let type_meta = fields(bytes_of(&unknown, 1).unwrap_or_default())?;
    let encoding = text(&unknown, 3);
    if !encoding.is_empty() {
        return Err(malformed(format!(
            "unsupported protobuf contentEncoding {encoding:?}"
        )));
    }
    Ok(Envelope {
        api_version: text(&type_meta, 1),
        kind: text(&type_meta, 2),
        raw: bytes_of(&unknown, 2).unwrap_or_default(),
    })
}

/// The table of a top-level object, by apiVersion and kind.
pub fn root(api_version: &str, kind: &str) -> Option<&'static Message> {
    super::proto_schema::ROOTS
        .iter()
        .find(|(v, k, _)| *k == kind && (v.is_empty() || *v == api_version))
        .map(|(_, _, m)| *m)
}

/// Decode a protobuf request body into the JSON object (with its apiVersion and kind).
pub fn decode_object(body: &[u8]) -> Result<Value, ProtoError> {
    let env = envelope(body)?;
    let message = root(&env.api_version, &env.kind).ok_or_else(|| ProtoError::UnknownKind {
        api_version: env.api_version.clone(),
        kind: env.kind.clone(),
    })?;
    let mut obj = Map::new();
    // TypeMeta: `json:"apiVersion,omitempty"`, `json:"kind,omitempty"`.
    if !env.kind.is_empty() {
        obj.insert("kind".into(), json!(env.kind));
    }
    if !env.api_version.is_empty() {
        obj.insert("apiVersion".into(), json!(env.api_version));
    }
    decode_into(message, env.raw, &mut obj)?;
    Ok(Value::Object(obj))
}

/// Decode one message into a JSON object.
pub fn decode(message: &'static Message, buf: &[u8]) -> Result<Value, ProtoError> {
    let mut obj = Map::new();
    decode_into(message, buf, &mut obj)?;
    Ok(Value::Object(obj))
}

fn decode_into(
    message: &'static Message,
    buf: &[u8],
    out: &mut Map<String, Value>,
) -> Result<(), ProtoError> {
    let wire = fields(buf).map_err(|e| in_message(e, message))?;
    for field in message.fields {
        let values: Vec<Wire<'_>> = wire
            .iter()
            .filter(|(n, _)| *n == field.number)
            .map(|(_, v)| *v)
            .collect();
        let at = |e: ProtoError| in_field(e, message, field);
        match field.shape {
            Shape::Inline => {
                let Kind::Msg(inner) = field.kind else {
                    return Err(malformed(format!(
                        "{}: inline of a non-message",
                        message.name
                    )));
                };
                decode_into(inner, &concat(&values, field, message)?, out)?;
            }
            Shape::Value | Shape::Pointer => {
                // The last value of a scalar; every occurrence of a message merged (protobuf's
                // rule), which is the decoding of their concatenation.
                let merged;
                let wire = if values.len() > 1 && is_message(field.kind) {
                    merged = concat(&values, field, message)?;
                    Some(Wire::Bytes(&merged))
                } else {
                    values.last().copied()
                };
                let value = match wire {
                    Some(v) => Some(one(field.kind, v).map_err(at)?),
                    None if field.shape == Shape::Value => Some(zero(field.kind)?),
                    None => None,
                };
                match value {
                    None if field.omit == Omit::Never => {
                        out.insert(field.json.into(), Value::Null);
                    }
                    None => {}
                    Some(v) if field.shape == Shape::Value && omitted(field, &v) => {}
                    Some(v) => {
                        out.insert(field.json.into(), v);
                    }
                }
            }
            Shape::Repeated => {
                let mut items = Vec::new();
                for v in values {
                    match (field.kind, v) {
                        // A packed repeated scalar: varints one after another.
                        (Kind::Bool | Kind::I32 | Kind::I64, Wire::Bytes(mut b)) => {
                            while !b.is_empty() {
                                let n = varint(&mut b).map_err(at)?;
                                items.push(one(field.kind, Wire::Varint(n)).map_err(at)?);
                            }
                        }
                        _ => items.push(one(field.kind, v).map_err(at)?),
                    }
                }
                if !items.is_empty() {
                    out.insert(field.json.into(), Value::Array(items));
                } else if field.omit == Omit::Never {
                    out.insert(field.json.into(), Value::Null);
                }
            }
            Shape::Map => {
                let mut map = Map::new();
                for v in values {
                    let Wire::Bytes(entry) = v else {
                        return Err(at(wrong_wire(v)));
                    };
                    let entry = fields(entry).map_err(at)?;
                    let key = match entry.iter().rev().find(|(n, _)| *n == 1) {
                        Some((_, w)) => one(Kind::Str, *w).map_err(at)?,
                        None => json!(""),
                    };
                    let value = match entry.iter().rev().find(|(n, _)| *n == 2) {
                        Some((_, w)) => one(field.kind, *w).map_err(at)?,
                        None => zero(field.kind)?,
                    };
                    map.insert(key.as_str().unwrap_or_default().to_owned(), value);
                }
                if !map.is_empty() {
                    out.insert(field.json.into(), Value::Object(map));
                } else if field.omit == Omit::Never {
                    out.insert(field.json.into(), Value::Null);
                }
            }
        }
    }
    Ok(())
}

fn in_message(e: ProtoError, message: &Message) -> ProtoError {
    match e {
        ProtoError::Malformed(m) => malformed(format!("{}: {m}", message.name)),
        other => other,
    }
}

fn in_field(e: ProtoError, message: &Message, field: &Field) -> ProtoError {
    match e {
        ProtoError::Malformed(m) if !m.contains(": ") => malformed(format!(
            "{} field {} ({}): {m}",
            message.name, field.number, field.json
        )),
        other => other,
    }
}

fn wrong_wire(v: Wire<'_>) -> ProtoError {
    malformed(format!("wrong wireType = {}", v.type_number()))
}

fn is_message(kind: Kind) -> bool {
    !matches!(
        kind,
        Kind::Str | Kind::Bool | Kind::I32 | Kind::I64 | Kind::Bytes
    )
}

fn concat(values: &[Wire<'_>], field: &Field, message: &Message) -> Result<Vec<u8>, ProtoError> {
    let mut buf = Vec::new();
    for v in values {
        match v {
            Wire::Bytes(b) => buf.extend_from_slice(b),
            other => return Err(in_field(wrong_wire(*other), message, field)),
        }
    }
    Ok(buf)
}

/// Whether omitempty/omitzero drops a present Value-shaped field.
fn omitted(field: &Field, v: &Value) -> bool {
    match field.omit {
        Omit::Never => false,
        Omit::Zero => v.is_null(),
        // Go's omitempty never drops a struct (messages, times, quantities, int-or-strings).
        Omit::Empty => match field.kind {
            Kind::Str | Kind::Bytes => v.as_str().is_none_or(str::is_empty),
            Kind::Bool => v == &json!(false),
            Kind::I32 | Kind::I64 => v.as_i64() == Some(0),
            _ => false,
        },
    }
}

/// The JSON of a Go zero value of a kind.
fn zero(kind: Kind) -> Result<Value, ProtoError> {
    Ok(match kind {
        Kind::Str => json!(""),
        Kind::Bool => json!(false),
        Kind::I32 | Kind::I64 => json!(0),
        // A nil []byte, a nil FieldsV1.Raw and the zero time are written as null.
        Kind::Bytes | Kind::Time | Kind::MicroTime | Kind::FieldsV1 => Value::Null,
        Kind::Quantity => json!("0"),
        Kind::IntOrString => json!(0),
        Kind::Msg(m) => decode(m, &[])?,
    })
}

/// The JSON of one value of a kind.
fn one(kind: Kind, v: Wire<'_>) -> Result<Value, ProtoError> {
    match (kind, v) {
        (Kind::Bool, Wire::Varint(n)) => Ok(json!(n != 0)),
        // gogo truncates a varint to the field's width, as Go's conversions do.
        (Kind::I32, Wire::Varint(n)) => Ok(json!(n as i32)),
        (Kind::I64, Wire::Varint(n)) => Ok(json!(n as i64)),
        // Go's encoding/json writes invalid UTF-8 as U+FFFD.
        (Kind::Str, Wire::Bytes(b)) => Ok(json!(String::from_utf8_lossy(b))),
        (Kind::Bytes, Wire::Bytes(b)) => {
            Ok(json!(base64::engine::general_purpose::STANDARD.encode(b)))
        }
        (Kind::Msg(m), Wire::Bytes(b)) => decode(m, b),
        (Kind::Time, Wire::Bytes(b)) => time(b, false),
        (Kind::MicroTime, Wire::Bytes(b)) => time(b, true),
        (Kind::Quantity, Wire::Bytes(b)) => quantity(b),
        (Kind::IntOrString, Wire::Bytes(b)) => int_or_string(b),
        (Kind::FieldsV1, Wire::Bytes(b)) => fields_v1(b),
        (_, v) => Err(wrong_wire(v)),
    }
}

fn varint_field(fs: &[(u32, Wire<'_>)], n: u32) -> Result<u64, ProtoError> {
    match fs.iter().rev().find(|(f, _)| *f == n) {
        None => Ok(0),
        Some((_, Wire::Varint(v))) => Ok(*v),
        Some((_, v)) => Err(wrong_wire(*v)),
    }
}

/// `metav1.Time` and `MicroTime`: a Timestamp {1 seconds, 2 nanos}; an empty message is the
/// zero time (`null`). Time keeps whole seconds, as its Unmarshal does
/// (apimachinery `pkg/apis/meta/v1/time_proto.go`, `micro_time_proto.go`).
fn time(b: &[u8], micro: bool) -> Result<Value, ProtoError> {
    if b.is_empty() {
        return Ok(Value::Null);
    }
    let fs = fields(b)?;
    let seconds = varint_field(&fs, 1)? as i64;
    let nanos = if micro {
        varint_field(&fs, 2)? as i32
    } else {
        0
    };
    let t = u32::try_from(nanos)
        .ok()
        .and_then(|n| chrono::DateTime::from_timestamp(seconds, n))
        .ok_or_else(|| malformed(format!("timestamp out of range: {seconds}s {nanos}ns")))?;
    Ok(json!(if micro {
        super::objects::micro_time(t)
    } else {
        t.format("%Y-%m-%dT%H:%M:%SZ").to_string()
    }))
}

/// `resource.Quantity`: {1 string}, the canonical form the client wrote.
fn quantity(b: &[u8]) -> Result<Value, ProtoError> {
    let fs = fields(b)?;
    let s = String::from_utf8_lossy(bytes_of(&fs, 1).unwrap_or_default()).into_owned();
    if s.is_empty() {
        return Err(malformed("quantities must not be empty"));
    }
    Ok(json!(s))
}

/// `intstr.IntOrString`: {1 type (0 int, 1 string), 2 intVal, 3 strVal}.
fn int_or_string(b: &[u8]) -> Result<Value, ProtoError> {
    let fs = fields(b)?;
    match varint_field(&fs, 1)? {
        0 => Ok(json!(varint_field(&fs, 2)? as i32)),
        1 => Ok(json!(String::from_utf8_lossy(
            bytes_of(&fs, 3).unwrap_or_default()
        ))),
        t => Err(malformed(format!("impossible IntOrString.Type {t}"))),
    }
}

/// `metav1.FieldsV1`: {1 Raw}, JSON bytes written as they are.
fn fields_v1(b: &[u8]) -> Result<Value, ProtoError> {
    let fs = fields(b)?;
    match bytes_of(&fs, 1) {
        None => Ok(Value::Null),
        Some(raw) => {
            serde_json::from_slice(raw).map_err(|e| malformed(format!("fieldsV1 is not JSON: {e}")))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(n: u32, wire: u8) -> Vec<u8> {
        enc_varint(u64::from(n) << 3 | u64::from(wire))
    }

    fn enc_varint(mut v: u64) -> Vec<u8> {
        let mut out = Vec::new();
        loop {
            let b = (v & 0x7f) as u8;
            v >>= 7;
            if v == 0 {
                out.push(b);
                return out;
            }
            out.push(b | 0x80);
        }
    }

    fn bytes(n: u32, b: &[u8]) -> Vec<u8> {
        let mut out = key(n, 2);
        out.extend(enc_varint(b.len() as u64));
        out.extend_from_slice(b);
        out
    }

    fn var(n: u32, v: u64) -> Vec<u8> {
        let mut out = key(n, 0);
        out.extend(enc_varint(v));
        out
    }

    fn wrap(api_version: &str, kind: &str, raw: &[u8]) -> Vec<u8> {
        let tm = [bytes(1, api_version.as_bytes()), bytes(2, kind.as_bytes())].concat();
        [MAGIC.to_vec(), bytes(1, &tm), bytes(2, raw)].concat()
    }

    #[test]
    fn reader_reads_every_wire_type_and_refuses_truncation() {
        let buf = [
            var(1, 300),
            key(2, 1),
            7u64.to_le_bytes().to_vec(),
            bytes(3, b"abc"),
            key(4, 5),
            9u32.to_le_bytes().to_vec(),
        ]
        .concat();
        assert_eq!(
            fields(&buf).unwrap(),
            vec![
                (1, Wire::Varint(300)),
                (2, Wire::Fixed64(7)),
                (3, Wire::Bytes(b"abc")),
                (4, Wire::Fixed32(9)),
            ]
        );
        assert!(fields(&buf[..buf.len() - 1]).is_err());
        assert!(fields(&bytes(1, b"abc")[..3]).is_err());
        // Groups (wire types 3 and 4) are not part of Kubernetes' protobuf.
        assert!(fields(&key(1, 3)).is_err());
    }

    #[test]
    fn go_json_rules_for_absent_and_zero_fields() {
        // A Service with only a name and one port {port 80, targetPort 8080 as a string}.
        let meta = bytes(1, b"web");
        let target = [var(1, 1), bytes(3, b"http")].concat();
        let port = [var(3, 80), bytes(4, &target)].concat();
        let spec = bytes(1, &port);
        let raw = [bytes(1, &meta), bytes(2, &spec)].concat();
        let obj = decode_object(&wrap("v1", "Service", &raw)).unwrap();
        assert_eq!(obj["kind"], "Service");
        assert_eq!(obj["apiVersion"], "v1");
        assert_eq!(obj["metadata"], json!({"name": "web"}));
        // ServicePort: port and targetPort have no omitempty / are structs; name has it.
        assert_eq!(
            obj["spec"]["ports"],
            json!([{"port": 80, "targetPort": "http"}])
        );
        // A struct is never omitted: status is {} with its own empty fields dropped.
        assert_eq!(obj["status"], json!({"loadBalancer": {}}));
    }

    #[test]
    fn pointers_keep_zero_values_and_maps_and_lists_read() {
        // DeploymentSpec.replicas is *int32: 0 is kept; LabelSelector.matchLabels a map.
        let sel = bytes(1, &[bytes(1, b"app"), bytes(2, b"x")].concat());
        let spec = [var(1, 0), bytes(2, &sel), var(5, 0)].concat();
        let raw = bytes(2, &spec);
        let obj = decode_object(&wrap("apps/v1", "Deployment", &raw)).unwrap();
        let spec = &obj["spec"];
        assert_eq!(spec["replicas"], 0);
        assert!(spec.get("minReadySeconds").is_none(), "{spec}");
        assert_eq!(spec["selector"], json!({"matchLabels": {"app": "x"}}));
        // PodSpec.containers has no omitempty: a nil slice is null, as Go writes it.
        assert_eq!(spec["template"]["spec"]["containers"], Value::Null);
        assert_eq!(spec["strategy"], json!({}));
    }

    #[test]
    fn packed_and_unpacked_repeated_scalars_and_negative_ints() {
        // PodSecurityContext.supplementalGroups []int64 (field 4), runAsUser *int64 (2).
        let packed = [enc_varint(1), enc_varint(2)].concat();
        let sc = [bytes(4, &packed), var(4, 3), var(2, (-5i64) as u64)].concat();
        let ps = bytes(14, &sc);
        let tmpl = bytes(2, &ps);
        let raw = bytes(2, &bytes(3, &tmpl));
        let obj = decode_object(&wrap("apps/v1", "Deployment", &raw)).unwrap();
        let sc = &obj["spec"]["template"]["spec"]["securityContext"];
        assert_eq!(sc["supplementalGroups"], json!([1, 2, 3]));
        assert_eq!(sc["runAsUser"], -5);
    }

    #[test]
    fn times_quantities_and_bytes() {
        // ObjectMeta.creationTimestamp (8): empty is omitted (omitzero); deletionTimestamp (9).
        let ts = var(1, 1_700_000_000);
        let meta = [bytes(1, b"c"), bytes(8, &[]), bytes(9, &ts)].concat();
        // Secret.data map[string][]byte (2).
        let data = bytes(2, &[bytes(1, b"k"), bytes(2, b"\x00\xff")].concat());
        let raw = [bytes(1, &meta), data].concat();
        let obj = decode_object(&wrap("v1", "Secret", &raw)).unwrap();
        assert!(obj["metadata"].get("creationTimestamp").is_none());
        assert_eq!(obj["metadata"]["deletionTimestamp"], "2023-11-14T22:13:20Z");
        assert_eq!(obj["data"], json!({"k": "AP8="}));
        // A PVC's resources.requests: map[string]Quantity.
        let q = bytes(1, b"1Gi");
        let req = bytes(2, &[bytes(1, b"storage"), bytes(2, &q)].concat());
        let spec = bytes(2, &req);
        let obj = decode_object(&wrap("v1", "PersistentVolumeClaim", &bytes(2, &spec))).unwrap();
        assert_eq!(obj["spec"]["resources"]["requests"]["storage"], "1Gi");
    }

    #[test]
    fn repeated_message_fields_merge_and_unknown_fields_are_skipped() {
        // ObjectMeta sent in two pieces, and a field number the table does not know.
        let raw = [
            bytes(1, &bytes(1, b"a")),
            bytes(1, &bytes(3, b"ns")),
            var(99, 1),
        ]
        .concat();
        let obj = decode_object(&wrap("v1", "ConfigMap", &raw)).unwrap();
        assert_eq!(obj["metadata"], json!({"name": "a", "namespace": "ns"}));
    }

    #[test]
    fn every_root_decodes_its_zero_value() {
        for (api_version, kind, _) in super::super::proto_schema::ROOTS {
            let v = if api_version.is_empty() {
                "v1"
            } else {
                api_version
            };
            let obj = decode_object(&wrap(v, kind, &[])).unwrap();
            assert_eq!(obj["kind"], *kind);
        }
        let pod = decode_object(&wrap("v1", "Pod", &[])).unwrap();
        // Go's zero Pod: empty structs kept, nil slices without omitempty null.
        assert_eq!(pod["spec"], json!({"containers": null}));
        assert_eq!(pod["metadata"], json!({}));
        assert_eq!(pod["status"], json!({}));
    }

    #[test]
    fn errors_name_the_problem() {
        assert!(matches!(
            decode_object(b"{}"),
            Err(ProtoError::Malformed(_))
        ));
        assert_eq!(
            decode_object(&wrap("v1", "Widget", &[])),
            Err(ProtoError::UnknownKind {
                api_version: "v1".into(),
                kind: "Widget".into()
            })
        );
        // A string field sent as a varint.
        let e = decode_object(&wrap("v1", "ConfigMap", &bytes(1, &var(1, 5)))).unwrap_err();
        assert!(e.to_string().contains("wrong wireType"), "{e}");
        // DeleteOptions is read whatever the group-version.
        let obj = decode_object(&wrap("apps/v1", "DeleteOptions", &var(1, 0))).unwrap();
        assert_eq!(obj["gracePeriodSeconds"], 0);
    }

    /// Drop `"creationTimestamp": null` (kubectl before 1.33 writes it; omitzero since).
    fn without_null_creation_timestamps(v: &mut Value) {
        match v {
            Value::Object(m) => {
                if m.get("creationTimestamp") == Some(&Value::Null) {
                    m.remove("creationTimestamp");
                }
                m.values_mut().for_each(without_null_creation_timestamps);
            }
            Value::Array(a) => a.iter_mut().for_each(without_null_creation_timestamps),
            _ => {}
        }
    }

    #[test]
    fn kubectl_fixtures_decode_to_kubectl_json() {
        let dir =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/k8s-protobuf");
        let mut checked = Vec::new();
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().and_then(|e| e.to_str()) != Some("pb") {
                continue;
            }
            let body = std::fs::read(&path).unwrap();
            let got = decode_object(&body).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            let mut want: Value =
                serde_json::from_slice(&std::fs::read(path.with_extension("json")).unwrap())
                    .unwrap();
            without_null_creation_timestamps(&mut want);
            assert_eq!(got, want, "{}", path.display());
            checked.push(path.file_stem().unwrap().to_string_lossy().into_owned());
        }
        for kind in [
            "serviceaccount",
            "configmap",
            "deployment",
            "role",
            "rolebinding",
            "job",
        ] {
            for v in ["v1.32", "v1.37"] {
                let name = format!("{kind}.kubectl-{v}");
                assert!(
                    checked.contains(&name),
                    "fixture {name} missing: {checked:?}"
                );
            }
        }
    }
}
