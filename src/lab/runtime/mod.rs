//! The Ollama-compatible runtime of one lab pod.
