//! Recordings and file formats: JSON-lines event recordings (write, read, replay) and the
//! study's CSV schema (import, export), asciicast v2 export.

pub mod cast;
pub mod index;
pub mod jsonl;
pub mod labcsv;
