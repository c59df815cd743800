//! `handoff`: Kubernetes-native continuation for AI agents.
//!
//! A fresh agent carries a compact *handoff* ("where I left off, next steps")
//! instead of replaying its predecessor's transcript.
//!
//! # Crates are the layers
//!
//! Each layer is a workspace crate, and a crate names only the crates below
//! it, so Cargo refuses an arrow that points up (see docs/architecture.md):
//!
//! ```text
//!  3  handoff (this crate)  the binary: `handoff dev` (control plane +
//!                           controller + bridge), the SRE's get / history /
//!                           diff / search, the agents' hooks, and the
//!                           commands that print or write what core
//!                           computes (`crd`, `preamble`)
//!  2  handoff-controller    the reconcile loops, leader-elected; the only
//!     handoff-bridge        crate that assembles loops / the MCP bridge
//!     handoff-webhook       the validating admission webhook (a Handoff's
//!                           name is its key's; the text rule for kubectl)
//!  1  handoff-kube          namespace scope, Handoff and offer I/O, settings,
//!                           the loop runner, telemetry
//!     handoff-mirror        the PostgreSQL mirror
//!     handoff-transcript    the transcript linearizer and the rescue
//!     handoff-local         the local control plane (etcd, kube-apiserver,
//!                           PostgreSQL) of `handoff dev` and the test kit
//!  0  handoff-core          types, names, time, validation, goal texts, lint,
//!                           the credential detector, every pure decision (no I/O)
//! ```
//!
//! The test kit (a shared control plane per test binary, served processes,
//! benchmark helpers) is the `handoff-testkit` crate, a dev-dependency: it
//! is never in the shipped binary.

pub mod cli;
pub mod crd;
pub mod dev;
pub mod hook;
pub mod preamble;
pub mod tables;
pub mod transfer;
