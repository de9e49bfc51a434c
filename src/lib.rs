//! readygap: a terminal dashboard and instrument for LLM recovery experiments on Kubernetes.
//!
//! This is the binary's library: the command line ([`cli`], one module per command under
//! [`commands`]), the config file ([`config`]) and the dashboard ([`ui`]). Everything that
//! happens is a [`readygap_core::event::Event`]; the screen, the statistics and the
//! recordings are functions of the event stream (see `readygap-core`); `readygap-live`
//! produces the events of a live cluster, `readygap-lab` is the built-in lab.

pub mod args;
pub mod cast;
pub mod cli;
pub mod commands;
pub mod config;
pub mod signals;
pub mod ui;
