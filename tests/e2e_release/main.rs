//! The release tier: what `make release` writes, installed on a real node
//! (`make test-e2e`, as root, after the e2e suite: one node per host at a
//! time). Its own cluster, since it installs into `handoff-system` itself
//! ([`scenario`]); the cluster, images and writes helpers are the e2e
//! suite's.

#[path = "../common/mod.rs"]
mod common;
#[allow(
    dead_code,
    reason = "shared with the e2e suite; this tier uses a subset"
)]
#[path = "../e2e/harness.rs"]
mod harness;
#[allow(
    unused_imports,
    reason = "shared with the e2e suite; this tier uses a subset"
)]
#[path = "../e2e/images.rs"]
mod images;
#[allow(
    dead_code,
    reason = "shared with the e2e suite; this tier uses a subset"
)]
#[path = "../e2e/writes.rs"]
mod writes;

mod dist;
mod load;
mod scenario;
