//! Recordings and file formats: JSON-lines event recordings (write, read, replay) and the
//! study's CSV schema (import, export) (the asciicast v2 export renders through the UI: it lives in the binary).

pub mod index;
pub mod jsonl;
pub mod labcsv;
