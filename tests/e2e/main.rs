//! The e2e tier: the project as Pods on a real node (`make test-e2e`, run
//! by `make test`, as root). One cluster per test binary
//! ([`harness::e2e`]: the local control plane, one node with containerd,
//! the kubelet, the controller-manager, the scheduler, kube-proxy and
//! CoreDNS), the project's images imported with no registry, and
//! `config/default` installed once ([`install::installed`]; the opt-in
//! `config/console` beside it for [`console`]). Laid out as
//! kubebuilder's `test/e2e`: each module is one scenario's suite.

#[path = "../common/mod.rs"]
mod common;

mod agent;
mod claude_job;
mod console;
mod harness;
mod images;
mod install;
mod leader;
mod liveness;
mod namespaces;
mod quota;
mod schedule;
mod writes;
