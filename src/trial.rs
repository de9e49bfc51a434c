//! Trial runner (stub while building).
