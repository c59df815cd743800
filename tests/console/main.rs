//! The console's suites, one test binary: one link step and one shared
//! control plane (etcd + kube-apiserver, started on first use by
//! `handoff_testkit::shared()`), a namespace per test. Each module is one
//! suite; `cargo test --test console front::` runs one of them.
//!
//! - `data`: the console's reads and actions (`handoff_console::data`)
//!   called in-process as people with Roles, against the apiserver and
//!   the PostgreSQL mirror.
//! - `front`: the console's front doors and guards over plain HTTP against
//!   the real binary: the one-time link, the cookie, Host, Origin and CSRF,
//!   the security headers, proxy mode's bearer, live updates.
//! - `browser_*`: the console in a real headless Chromium (testkit's
//!   `browser`): sign-in, DNS rebinding, proxy mode as a viewer and as
//!   nobody (`browser_front`); list, open, diff, search, reject, delete and
//!   live updates (`browser_pages`); the hostile corpus inert
//!   (`browser_hostile`); axe-core and the keyboard on every main page, and
//!   the documentation's screenshots (`browser_a11y`). `browser_world` is
//!   what they stand on.

mod browser_a11y;
mod browser_front;
mod browser_hostile;
mod browser_pages;
mod browser_world;
#[path = "../common/mod.rs"]
mod common;
mod data;
mod front;
