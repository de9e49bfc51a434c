//! Recordings and file formats: JSON-lines event recordings (write, read, replay) and the
//! study's CSV schema (import, export).

pub mod jsonl;
pub mod labcsv;
