//! Agent identities and the bridge serving them, as most bridge suites
//! begin: a writer's or a groomer's token, and a namespace with its bridge.

use handoff_testkit::TestEnv;

use super::{Bridge, agent_token, apply_agent_roles};

/// The token of `name`, an `implement` agent bound to handoff-writer.
pub(crate) async fn writer_token(env: &TestEnv, namespace: &str, name: &str) -> String {
    agent_token(
        env,
        namespace,
        name,
        Some("implement"),
        Some("handoff-writer"),
    )
    .await
}

/// The token of `name`, a `refine` agent bound to handoff-groomer.
pub(crate) async fn groomer_token(env: &TestEnv, namespace: &str, name: &str) -> String {
    agent_token(
        env,
        namespace,
        name,
        Some("refine"),
        Some("handoff-groomer"),
    )
    .await
}

/// A namespace with the agent roles applied, a bridge serving it, and the
/// token of a writer there.
pub(crate) struct Served {
    pub(crate) ns: String,
    pub(crate) bridge: Bridge,
    pub(crate) token: String,
}

/// [`Served`] in a new namespace named after `prefix`, the writer's
/// ServiceAccount named `writer`.
pub(crate) async fn served(env: &TestEnv, prefix: &str, writer: &str) -> Served {
    let ns = env.namespace(prefix).await;
    apply_agent_roles(env);
    let bridge = Bridge::start(env, &ns);
    let token = writer_token(env, &ns, writer).await;
    Served { ns, bridge, token }
}

/// The shared control plane's kubeconfig, every user acting with `token`
/// instead of the admin's credentials.
pub(crate) fn kubeconfig_with_token(env: &TestEnv, token: &str) -> kube::config::Kubeconfig {
    let mut kubeconfig = env.kubeconfig().clone();
    for auth in &mut kubeconfig.auth_infos {
        auth.auth_info = Some(kube::config::AuthInfo {
            token: Some(token.to_owned().into()),
            ..Default::default()
        });
    }
    kubeconfig
}

/// A client of the shared control plane acting with `token`.
pub(crate) async fn client_with_token(env: &TestEnv, token: &str) -> kube::Client {
    handoff_testkit::client_from(&kubeconfig_with_token(env, token))
        .await
        .expect("client")
}
