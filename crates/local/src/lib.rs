//! The local control plane of `handoff dev`: etcd + kube-apiserver started
//! as controller-runtime's envtest does (generated certificates, RBAC
//! authorization, an admin client certificate, service-account signing
//! keys), and a PostgreSQL. Both stop on drop, and their processes die with
//! ours even on SIGKILL (see [`process`]). Their files are temporary, or
//! kept in `handoff dev`'s data directory ([`home`]).
//!
//! This is what ships in the binary for `handoff dev`. The test kit built on
//! it (a shared plane per test binary, served processes, benchmark helpers)
//! is the `handoff-testkit` workspace crate, which the release build never
//! compiles.

pub mod assets;
mod control_plane;
pub mod home;
mod pki;
pub mod postgres;
pub mod process;

pub use assets::{Assets, Versions};
pub use control_plane::{ControlPlane, PlaneOptions, StaticToken, client_from, install_crds};
pub use pki::ServerTls;
pub use postgres::Postgres;
