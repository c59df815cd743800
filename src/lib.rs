//! `handoff`: Kubernetes-native continuation for AI agents.
//!
//! A fresh agent carries a compact *handoff* ("where I left off, next steps")
//! instead of replaying its predecessor's transcript. The layout follows the
//! architecture:
//!
//! - [`api`]: the custom resource types and the pure key → name mapping.
//! - [`store`]: the one place that talks `Handoff` to the apiserver.
//! - [`mcp`]: the MCP bridge (`handoff mcp`): the contract's four tools and the offer tools, gated by agent profile.
//! - [`controller`]: `handoff controller`, the leader-elected reconcile loops.
//! - [`mirror`]: the PostgreSQL mirror the controller keeps and the bridge reads.
//! - [`goals`]: the continuation preamble, the refine and brainstorm goal texts.
//! - [`schedule`]: the refine → brainstorm barrier of `BrainstormSchedule`s.
//! - [`offers`]: handoffs offered to a destination agent, and their lifecycle.
//! - [`transcript`]: linearizes another agent's transcript into a handoff document.
//! - [`testing`]: a real local control plane (etcd + kube-apiserver + PostgreSQL)
//!   shared by the integration suites and `handoff dev`.
//! - [`dev`]: `handoff dev`, the embedded default for a laptop with no cluster.
//! - [`telemetry`]: logging setup.

pub mod api;
pub mod controller;
pub mod dev;
pub mod goals;
pub mod mcp;
pub mod mirror;
pub mod names;
pub mod offers;
pub mod schedule;
pub mod store;
pub mod telemetry;
pub mod testing;
pub mod time;
pub mod transcript;
