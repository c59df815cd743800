//! The console's suites, one test binary: one link step and one shared
//! control plane (etcd + kube-apiserver, started on first use by
//! `handoff_testkit::shared()`), a namespace per test. Each module is one
//! suite; `cargo test --test console front::` runs one of them.
//!
//! - `front`: the console's front doors and guards over plain HTTP against
//!   the real binary: the one-time link, the cookie, Host, Origin and CSRF,
//!   the security headers, proxy mode's bearer, live updates.

mod front;
