//! `handoff-kube`: the Kubernetes layer every process shares — the one
//! namespace scope and paged list ([`cluster`]), Handoff I/O with one
//! identity ([`store`]), offer I/O ([`offers`]), a namespace's settings
//! ([`settings`]), what every reconcile loop shares ([`loops`]) and the one loop
//! runner ([`runner`]), and
//! logging, metrics and the health server ([`telemetry`]), and the TLS
//! certificate a server reloads when its files change ([`tls`]); the
//! apiserver's proxy chosen as kubectl chooses it ([`proxy`]).

pub mod cluster;
pub mod loops;
pub mod offers;
pub mod proxy;
pub mod runner;
pub mod settings;
pub mod store;
pub mod telemetry;
pub mod tls;
