//! The integration suites of `handoff`, one test binary: one link step,
//! and one shared control plane (etcd + kube-apiserver, started on first
//! use) and PostgreSQL for every suite, a namespace per test. The
//! reliability suites (`tests/reliability_*.rs`) stay separate binaries:
//! they stop and restart their own control planes and PostgreSQL.
//!
//! Each module is one capability's suite; `cargo test --test it mcp::`
//! runs one of them.

#[path = "../common/mod.rs"]
mod common;

mod admission;
mod controller;
mod crd;
mod examples;
mod harness;
mod hooks;
mod hooks_copilot;
mod install;
mod jsonrpc_fuzz;
mod mcp;
mod mirror;
mod mirror_bridge;
mod mirror_tls;
mod newcomer;
mod offers;
mod policy;
mod postgres;
mod revisions;
mod schedule;
mod search;
mod secrets;
mod sre_cli;
mod tenancy;
#[path = "../../crates/transcript/tests/support/mod.rs"]
mod transcript_support;
mod transfer;
mod twins;
mod webhook_certs;
mod writes;
