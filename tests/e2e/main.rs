//! readygap end to end: the binary, the live session against the built-in lab and real
//! peers (kubectl, OpenSSH, cgroups, tmux), the dashboard's frames and keys, one module per
//! subject.

mod cast;
mod config_nodes;
mod lab_data;
mod lab_kube_cli;
mod lab_node_scripts;
mod manifests;
mod node_debug_pod;
mod node_host;
mod node_shims;
mod node_ssh;
mod oom_cgroup_v1;
mod oom_detector;
mod oom_lab;
mod peers;
mod record_sigkill;
mod replay_controls;
mod run_actions;
mod run_cli;
mod run_cluster;
mod run_faults;
mod run_lab;
mod session;
mod sources_kube;
mod sources_memory;
mod sources_runtime;
mod ui_app;
mod ui_frames;
mod ui_keys;
mod ui_panels;
mod ui_replay;
mod ui_support;
mod ui_theme;
mod ui_tmux;
