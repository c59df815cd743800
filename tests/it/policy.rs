//! The admission policies of `config/policy`, on the installation's control
//! plane (`config/default` applied by [`crate::install`]), with the real
//! kubectl (`--as` / `--as-group` impersonation) and, where an agent meets
//! them, a real MCP client through the bridge:
//!
//! - schedules cannot escalate: writing a BrainstormSchedule's spec needs
//!   the right to create Jobs in its namespace;
//! - authorship is honest and permanent: a spec-changing UPDATE can neither
//!   drop nor forge `spec.createdBy`;
//! - a Handoff's finalizers are the controller's (the garbage collector's
//!   own may be removed by anyone; `system:masters` may remove, never add);
//! - a schedule's conversation keys `<ns>/<schedule>/…` are written only by
//!   the ServiceAccounts its Jobs run as.
//!
//! Every refusal is checked by its reason (Forbidden), the policy that
//! refused and its message.

use crate::common;
use crate::common::kubectl::get_json;
use crate::install::{installed, kubectl, kubectl_stdin, must};

use std::process::Output;
use std::sync::Arc;
use std::time::{Duration, Instant};

use handoff_core::api::Handoff;
use handoff_core::api::naming::name_for_key;
use handoff_core::names::MIRROR_FINALIZER;
use handoff_testkit::TestEnv;
use kube::ResourceExt;
use kube::api::Api;
use serde_json::{Value, json};

/// The namespace `config/default` installs into.
const NS: &str = "handoff-system";
/// The controller's user name, as the policies spell it.
const CONTROLLER: &str = "system:serviceaccount:handoff-system:handoff-controller";
/// The garbage collector's user name (kube-controller-manager with
/// per-controller ServiceAccounts; its bootstrap ClusterRole may patch anything).
const GARBAGE_COLLECTOR: &str = "system:serviceaccount:kube-system:generic-garbage-collector";

const HONEST: &str = "handoff.dev-honest-handoffs";
const FINALIZERS: &str = "handoff.dev-handoff-finalizers";
const RESERVED: &str = "handoff.dev-reserved-schedule-keys";
const ESCALATION: &str = "handoff.dev-schedules-cannot-escalate";
/// A merge patch that removes every finalizer.
const DROP_FINALIZERS: &str = r#"{"metadata":{"finalizers":null}}"#;

/// Asserts `out` is a refusal by `policy` (reason Forbidden) whose message
/// holds every fragment; returns the message.
fn refused(out: Output, what: &str, policy: &str, fragments: &[&str]) -> String {
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!out.status.success(), "{what} was admitted");
    assert!(
        err.contains("(Forbidden)")
            && err.contains(&format!(
                "ValidatingAdmissionPolicy '{policy}' with binding '{policy}' denied request"
            )),
        "{what}: refused by {policy} with reason Forbidden, not by anything else: {err}"
    );
    for fragment in fragments {
        assert!(
            err.contains(fragment),
            "{what}: the message names {fragment:?}: {err}"
        );
    }
    err
}

/// Policies (and the parameters of one) load asynchronously: runs `attempt`
/// `kubectl get` of the handoff of `key` in `namespace` with output
/// `format` (`what` names it if it fails).
fn get_handoff(env: &TestEnv, namespace: &str, key: &str, format: &str, what: &str) -> String {
    let name = name_for_key(key);
    must(
        kubectl(
            env,
            &["-n", namespace, "get", "handoff", &name, "-o", format],
        ),
        what,
    )
}

/// until `policy` refuses it, undoing what an admitted attempt did.
fn eventually_refused(
    what: &str,
    policy: &str,
    mut attempt: impl FnMut() -> Output,
    mut undo: impl FnMut(),
) -> Output {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let out = attempt();
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        if !out.status.success() && err.contains(&format!("ValidatingAdmissionPolicy '{policy}'")) {
            return out;
        }
        if out.status.success() {
            undo();
        }
        assert!(
            Instant::now() < deadline,
            "{policy} did not refuse {what} within 60 s: {err}"
        );
        std::thread::sleep(Duration::from_millis(300));
    }
}

fn sa(namespace: &str, name: &str) -> String {
    format!("system:serviceaccount:{namespace}:{name}")
}

/// A Handoff manifest; `created_by` and `finalizers` only when given.
fn handoff(
    name: &str,
    namespace: &str,
    key: &str,
    created_by: Option<&str>,
    finalizers: &[&str],
) -> String {
    let mut spec =
        json!({"handoffKey": key, "project": "shop", "body": "state: testing the policies"});
    if let Some(writer) = created_by {
        spec["createdBy"] = json!(writer);
    }
    let mut metadata = json!({"name": name, "namespace": namespace});
    if !finalizers.is_empty() {
        metadata["finalizers"] = json!(finalizers);
    }
    json!({"apiVersion": "handoff.dev/v1alpha1", "kind": "Handoff", "metadata": metadata, "spec": spec})
        .to_string()
}

fn create_as(env: &TestEnv, user: &str, manifest: &str) -> Output {
    kubectl_stdin(env, &["create", "-f", "-", "--as", user], manifest)
}

/// `kubectl -n <ns> patch <kind>/<name> --type=merge -p <patch> --as <user> [extra]`.
fn patch_as(
    env: &TestEnv,
    namespace: &str,
    object: &str,
    patch: &str,
    user: &str,
    extra: &[&str],
) -> Output {
    let mut args = vec![
        "-n", namespace, "patch", object, "--type", "merge", "-p", patch, "--as", user,
    ];
    args.extend(extra);
    kubectl(env, &args)
}

/// `patch_as` of the Handoff stored under `key`.
fn patch_handoff(
    env: &TestEnv,
    namespace: &str,
    key: &str,
    patch: &str,
    user: &str,
    extra: &[&str],
) -> Output {
    let object = format!("handoff/{}", name_for_key(key));
    patch_as(env, namespace, &object, patch, user, extra)
}

/// `kubectl -n <ns> label <object…> <label> --as <user>`: a metadata-only update.
fn label_as(env: &TestEnv, namespace: &str, object: &[&str], label: &str, user: &str) -> Output {
    let mut args = vec!["-n", namespace, "label"];
    args.extend(object);
    args.extend([label, "--as", user]);
    kubectl(env, &args)
}

/// `kubectl -n <ns> delete handoff <name> --wait=false --as <user>`.
fn delete_handoff_as(env: &TestEnv, namespace: &str, name: &str, user: &str) -> Output {
    kubectl(
        env,
        &[
            "-n",
            namespace,
            "delete",
            "handoff",
            name,
            "--wait=false",
            "--as",
            user,
        ],
    )
}

fn delete(env: &TestEnv, namespace: &str, object: &str) {
    let _ = kubectl(
        env,
        &[
            "-n",
            namespace,
            "delete",
            object,
            "--ignore-not-found",
            "--wait=false",
        ],
    );
}

/// Applies `yaml` as the admin.
fn apply(env: &TestEnv, yaml: &str, what: &str) {
    must(
        kubectl_stdin(env, &["apply", "--server-side", "-f", "-"], yaml),
        what,
    );
}

/// A Role in `namespace` bound to ServiceAccount `subject` there.
fn role_for(namespace: &str, subject: &str, name: &str, rules: Value) -> String {
    let role = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
        "metadata": {"name": name, "namespace": namespace}, "rules": rules});
    let binding = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": {"name": format!("{name}-{subject}"), "namespace": namespace},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
        "subjects": [{"kind": "ServiceAccount", "name": subject, "namespace": namespace}]});
    format!("{role}\n---\n{binding}\n")
}

/// A BrainstormSchedule manifest; its Jobs run as the given ServiceAccounts
/// (`None`: the template names none, so `default`).
fn schedule(
    name: &str,
    namespace: &str,
    refine_sa: Option<&str>,
    brainstorm_sa: Option<&str>,
) -> String {
    let template = |account: Option<&str>| {
        let mut pod = json!({"restartPolicy": "Never",
                             "containers": [{"name": "agent", "image": "agent:1"}]});
        if let Some(account) = account {
            pod["serviceAccountName"] = json!(account);
        }
        json!({"spec": {"template": {"spec": pod}}})
    };
    json!({"apiVersion": "handoff.dev/v1alpha1", "kind": "BrainstormSchedule",
           "metadata": {"name": name, "namespace": namespace},
           "spec": {"project": "shop", "schedule": "0 6 * * *", "suspend": true,
                    "refine": {"jobTemplate": template(refine_sa)},
                    "brainstorm": {"jobTemplate": template(brainstorm_sa)}}})
    .to_string()
}

#[test]
fn config_policy_installs_each_policy_with_its_binding() {
    let env = installed();
    for policy in [HONEST, FINALIZERS, RESERVED, ESCALATION] {
        let got = get_json(env, &["validatingadmissionpolicy", policy]);
        assert_eq!(got["spec"]["failurePolicy"], json!("Fail"), "{policy}");
        let binding = get_json(env, &["validatingadmissionpolicybinding", policy]);
        assert_eq!(binding["spec"]["policyName"], json!(policy));
        assert_eq!(
            binding["spec"]["validationActions"],
            json!(["Deny", "Audit"])
        );
    }
    // Only the reserved-keys policy takes parameters, and it holds that one rule.
    let reserved = get_json(env, &["validatingadmissionpolicy", RESERVED]);
    assert_eq!(
        reserved["spec"]["paramKind"],
        json!({"apiVersion": "handoff.dev/v1alpha1", "kind": "BrainstormSchedule"})
    );
    assert_eq!(
        reserved["spec"]["validations"].as_array().map(Vec::len),
        Some(1)
    );
}

/// A user who may write BrainstormSchedules but not create Jobs cannot
/// create one or change its spec (the message names the missing right);
/// with the right to create Jobs the same schedule is accepted, and a
/// change that leaves spec alone (a label) needs no such right.
#[test]
fn a_schedule_needs_the_right_to_create_its_jobs() {
    let env = installed();
    let ns = tokio_ns(env, "policy-schedule");
    let schedules = json!([{"apiGroups": ["handoff.dev"], "resources": ["brainstormschedules"],
                            "verbs": ["get", "create", "update", "patch"]}]);
    let jobs = json!([{"apiGroups": ["batch"], "resources": ["jobs"], "verbs": ["create"]}]);
    apply(
        env,
        &role_for(&ns, "schedule-owner", "schedules", schedules.clone()),
        "schedule-owner",
    );
    apply(
        env,
        &role_for(&ns, "platform-owner", "schedules", schedules),
        "platform-owner",
    );
    apply(
        env,
        &role_for(&ns, "platform-owner", "jobs", jobs),
        "platform-owner jobs",
    );
    let owner = sa(&ns, "schedule-owner");
    let platform = sa(&ns, "platform-owner");
    let manifest = schedule("daily", &ns, Some("agent-refine"), None);

    let out = eventually_refused(
        "a schedule created without the right to create jobs",
        ESCALATION,
        || create_as(env, &owner, &manifest),
        || delete(env, &ns, "brainstormschedule/daily"),
    );
    refused(
        out,
        "a schedule created without the right to create jobs",
        ESCALATION,
        &[
            &format!(
                "creating a BrainstormSchedule requires the right to create jobs (batch) in namespace {ns}"
            ),
            &format!("user \"{owner}\" may not"),
            "ServiceAccount \"agent-refine\" (refine) and \"default\" (brainstorm)",
        ],
    );
    must(
        create_as(env, &platform, &manifest),
        "the platform owner creates the schedule",
    );

    // Labels, annotations: no Job changes, no Job right needed.
    must(
        label_as(
            env,
            &ns,
            &["brainstormschedule", "daily"],
            "team=shop",
            &owner,
        ),
        "a label by the schedule owner",
    );
    // The spec is what the controller runs: changing it needs the right too.
    let resume = r#"{"spec":{"suspend":false}}"#;
    refused(
        patch_as(env, &ns, "brainstormschedule/daily", resume, &owner, &[]),
        "a spec change without the right to create jobs",
        ESCALATION,
        &[
            "changing the spec of a BrainstormSchedule requires the right to create jobs (batch)",
            &owner,
        ],
    );
    must(
        patch_as(env, &ns, "brainstormschedule/daily", resume, &platform, &[]),
        "a spec change by the platform owner",
    );
}

/// `spec.createdBy` in a spec-changing UPDATE: it cannot be dropped (by
/// merge patch or replace), nor set to someone else; the new writer may
/// take authorship over under its own name. Objects written without one
/// (GitOps) stay free to change without one; metadata-only updates claim
/// nothing.
#[test]
fn authorship_is_honest_and_permanent() {
    let env = installed();
    let ns = tokio_ns(env, "policy-author");
    let writer_role = json!([{"apiGroups": ["handoff.dev"], "resources": ["handoffs"],
                              "verbs": ["get", "create", "update", "patch"]}]);
    for who in ["writer", "other"] {
        apply(
            env,
            &role_for(&ns, who, "handoff-writing", writer_role.clone()),
            who,
        );
    }
    let writer = sa(&ns, "writer");
    let other = sa(&ns, "other");
    must(
        create_as(
            env,
            &writer,
            &handoff(
                &name_for_key("acme/api#1"),
                &ns,
                "acme/api#1",
                Some(&writer),
                &[],
            ),
        ),
        "an honest create",
    );

    let strip = r#"{"spec":{"createdBy":null,"body":"rewritten, unsigned"}}"#;
    let out = eventually_refused(
        "a spec change that drops createdBy",
        HONEST,
        || patch_handoff(env, &ns, "acme/api#1", strip, &writer, &[]),
        || {},
    );
    refused(
        out,
        "a spec change that drops createdBy",
        HONEST,
        &[
            "spec.createdBy may not be removed (rule: authorship is permanent)",
            &format!("written by \"{writer}\""),
        ],
    );
    refused(
        patch_handoff(env, &ns, "acme/api#1", strip, &other, &[]),
        "another writer dropping createdBy",
        HONEST,
        &[
            "spec.createdBy may not be removed",
            &format!("set spec.createdBy to \"{other}\""),
        ],
    );
    // kubectl replace of a manifest without createdBy (what used to pass).
    let current = get_handoff(env, &ns, "acme/api#1", "json", "get");
    let mut unsigned: Value = serde_json::from_str(&current).expect("json");
    unsigned["spec"]
        .as_object_mut()
        .expect("spec")
        .remove("createdBy");
    unsigned["spec"]["body"] = json!("replaced, unsigned");
    refused(
        kubectl_stdin(
            env,
            &["replace", "-f", "-", "--as", &writer],
            &unsigned.to_string(),
        ),
        "a replace without createdBy",
        HONEST,
        &["spec.createdBy may not be removed"],
    );
    // Changing it to another identity.
    let forged = format!(r#"{{"spec":{{"createdBy":"{other}","body":"claimed for other"}}}}"#);
    refused(
        patch_handoff(env, &ns, "acme/api#1", &forged, &writer, &[]),
        "createdBy changed to another identity",
        HONEST,
        &[
            "spec.createdBy must be the requesting user",
            &format!("got \"{other}\""),
            &format!("made by \"{writer}\""),
        ],
    );
    // No identity is exempt: not even the controller rewrites content
    // under another's name (it only ever writes metadata and status).
    refused(
        patch_handoff(
            env,
            &ns,
            "acme/api#1",
            r#"{"spec":{"body":"rewritten by the controller"}}"#,
            CONTROLLER,
            &[],
        ),
        "the controller changing content signed by another",
        HONEST,
        &[
            "spec.createdBy must be the requesting user",
            &format!("made by \"{CONTROLLER}\""),
        ],
    );
    // The real new writer signs with its own name: authorship moves honestly.
    let taken = format!(r#"{{"spec":{{"createdBy":"{other}","body":"continued by other"}}}}"#);
    must(
        patch_handoff(env, &ns, "acme/api#1", &taken, &other, &[]),
        "another writer continues under its own name",
    );
    // A metadata-only update claims nothing.
    must(
        label_as(
            env,
            &ns,
            &["handoff", &name_for_key("acme/api#1")],
            "kind=issue",
            &writer,
        ),
        "a label by a writer who is not the author",
    );
    // Written without createdBy (GitOps): changing it without one is fine.
    must(
        create_as(
            env,
            &writer,
            &handoff(&name_for_key("acme/api#2"), &ns, "acme/api#2", None, &[]),
        ),
        "a create without createdBy",
    );
    must(
        patch_handoff(
            env,
            &ns,
            "acme/api#2",
            r#"{"spec":{"body":"edited"}}"#,
            &other,
            &[],
        ),
        "an unsigned handoff edited without createdBy",
    );
    let stored = get_handoff(env, &ns, "acme/api#1", "jsonpath={.spec.createdBy}", "get");
    assert_eq!(stored, other);
}

/// Finalizers on Handoffs: writers may neither add (on UPDATE or CREATE)
/// nor remove them, admins may not add them; the controller adds and
/// removes its own; the garbage collector removes `foregroundDeletion`;
/// members of `system:masters` remove the controller's (break-glass).
#[test]
fn only_the_controller_adds_or_removes_handoff_finalizers() {
    let env = installed();
    let ns = tokio_ns(env, "policy-finalizers");
    let writer_role = json!([{"apiGroups": ["handoff.dev"], "resources": ["handoffs"],
                              "verbs": ["get", "create", "update", "patch"]}]);
    apply(
        env,
        &role_for(&ns, "writer", "handoff-writing", writer_role),
        "writer",
    );
    let writer = sa(&ns, "writer");
    must(
        create_as(
            env,
            &writer,
            &handoff(
                &name_for_key("acme/api#3"),
                &ns,
                "acme/api#3",
                Some(&writer),
                &[],
            ),
        ),
        "a create without finalizers",
    );

    let hold = r#"{"metadata":{"finalizers":["example.com/hold"]}}"#;
    let out = eventually_refused(
        "a writer adding a finalizer",
        FINALIZERS,
        || patch_handoff(env, &ns, "acme/api#3", hold, &writer, &[]),
        || {
            let _ = patch_handoff(env, &ns, "acme/api#3", DROP_FINALIZERS, CONTROLLER, &[]);
        },
    );
    refused(
        out,
        "a writer adding a finalizer",
        FINALIZERS,
        &[
            "finalizer \"example.com/hold\" may not be added by user",
            &writer,
            "only the handoff controller adds finalizers to a Handoff",
        ],
    );
    refused(
        create_as(
            env,
            &writer,
            &handoff(
                &name_for_key("acme/api#4"),
                &ns,
                "acme/api#4",
                Some(&writer),
                &["example.com/hold"],
            ),
        ),
        "a create with a finalizer",
        FINALIZERS,
        &["finalizer \"example.com/hold\" may not be added", &writer],
    );
    // Not even an admin adds one (the break-glass only removes).
    refused(
        patch_handoff(
            env,
            &ns,
            "acme/api#3",
            hold,
            "sre",
            &["--as-group", "system:masters"],
        ),
        "system:masters adding a finalizer",
        FINALIZERS,
        &["finalizer \"example.com/hold\" may not be added by user \"sre\""],
    );

    // The controller's own metadata write: labels and its finalizer.
    let controller_patch = format!(
        r#"{{"metadata":{{"labels":{{"project":"shop"}},"finalizers":["{MIRROR_FINALIZER}"]}}}}"#
    );
    must(
        patch_handoff(env, &ns, "acme/api#3", &controller_patch, CONTROLLER, &[]),
        "the controller adds its finalizer and a label",
    );
    refused(
        patch_handoff(env, &ns, "acme/api#3", DROP_FINALIZERS, &writer, &[]),
        "a writer removing the controller's finalizer",
        FINALIZERS,
        &[
            &format!("finalizer \"{MIRROR_FINALIZER}\" may not be removed by user \"{writer}\""),
            "break-glass: members of system:masters",
        ],
    );

    // A foreground delete: the apiserver adds foregroundDeletion (inside the
    // DELETE), and the garbage collector removes it when the dependents are gone.
    must(
        kubectl(
            env,
            &[
                "-n",
                &ns,
                "delete",
                "handoff",
                &name_for_key("acme/api#3"),
                "--cascade=foreground",
                "--wait=false",
            ],
        ),
        "a foreground delete",
    );
    let finalizers = || {
        let out = get_handoff(
            env,
            &ns,
            "acme/api#3",
            "jsonpath={.metadata.finalizers}",
            "finalizers",
        );
        serde_json::from_str::<Vec<String>>(&out).unwrap_or_default()
    };
    assert_eq!(finalizers(), [MIRROR_FINALIZER, "foregroundDeletion"]);
    must(
        patch_handoff(
            env,
            &ns,
            "acme/api#3",
            &format!(r#"{{"metadata":{{"finalizers":["{MIRROR_FINALIZER}"]}}}}"#),
            GARBAGE_COLLECTOR,
            &[],
        ),
        "the garbage collector removes foregroundDeletion",
    );
    assert_eq!(finalizers(), [MIRROR_FINALIZER]);
    refused(
        patch_handoff(env, &ns, "acme/api#3", DROP_FINALIZERS, &writer, &[]),
        "a writer removing the controller's finalizer from a terminating handoff",
        FINALIZERS,
        &[&format!(
            "finalizer \"{MIRROR_FINALIZER}\" may not be removed"
        )],
    );
    // Break-glass: the controller is gone, an admin lets the deletion finish.
    must(
        patch_handoff(
            env,
            &ns,
            "acme/api#3",
            DROP_FINALIZERS,
            "sre",
            &["--as-group", "system:masters"],
        ),
        "system:masters removes the controller's finalizer",
    );
    let gone = kubectl(
        env,
        &["-n", &ns, "get", "handoff", &name_for_key("acme/api#3")],
    );
    assert!(
        !gone.status.success() && String::from_utf8_lossy(&gone.stderr).contains("NotFound"),
        "the deletion finished"
    );
}

/// The keys `<ns>/<schedule>/…` of a schedule's Jobs: free while no
/// schedule exists; then written only by the ServiceAccount of the
/// matching Job template (`default` when it names none), refused to any
/// other writer through kubectl and through the bridge (`write_handoff`
/// carries the policy's message); deletes and metadata-only updates stay
/// free.
#[tokio::test(flavor = "multi_thread")]
async fn a_schedules_keys_are_written_only_by_its_jobs_identities() {
    let env = installed();
    let ns = env.namespace("policy-keys").await;
    let writer_token = common::agents::writer_token(env, &ns, "writer").await;
    let refiner_token = common::agents::groomer_token(env, &ns, "refiner").await;
    let brainstormer_token = common::agent_token(
        env,
        &ns,
        "brainstormer",
        Some("brainstorm"),
        Some("handoff-writer"),
    )
    .await;
    common::agents::groomer_token(env, &ns, "groomer").await;
    let writer = sa(&ns, "writer");
    let refiner = sa(&ns, "refiner");
    let brainstormer = sa(&ns, "brainstormer");
    let refine_key = format!("{ns}/daily/refine");
    let notes_key = format!("{ns}/daily/notes");
    let bridge = common::Bridge::start(env, &ns);
    let write = |token: &str, profile: &str, key: &str, body: &str| {
        let plan = json!([common::call(
            "write_handoff",
            json!({"handoff_key": key, "project": "shop", "body": body})
        )]);
        tokio::task::block_in_place(|| bridge.drive(token, profile, plan)).remove(0)
    };

    // No schedule yet: the keys are anyone's.
    common::ok(&write(
        &writer_token,
        "implement",
        &notes_key,
        "## State\nbefore any schedule",
    ));
    // Nor in a namespace without schedules (parameterNotFoundAction: Allow).
    let elsewhere = env.namespace("policy-keys-free").await;
    let free_writer = common::agents::writer_token(env, &elsewhere, "writer").await;
    let other_bridge = common::Bridge::start(env, &elsewhere);
    let free = tokio::task::block_in_place(|| {
        other_bridge.drive(
            &free_writer,
            "implement",
            json!([common::call("write_handoff",
                json!({"handoff_key": format!("{elsewhere}/daily/refine"), "project": "shop", "body": "free"}))]),
        )
    });
    common::ok(&free[0]);

    // Two schedules: `daily` runs refine as `refiner`, brainstorm as
    // `brainstormer`; `nightly` names no ServiceAccount (Jobs run as `default`).
    apply(
        env,
        &schedule("daily", &ns, Some("refiner"), Some("brainstormer")),
        "schedule daily",
    );
    apply(
        env,
        &schedule("nightly", &ns, None, None),
        "schedule nightly",
    );

    // kubectl, as a writer that is not the schedule's identity.
    let manifest = handoff(
        &name_for_key(&refine_key),
        &ns,
        &refine_key,
        Some(&writer),
        &[],
    );
    let out = tokio::task::block_in_place(|| {
        eventually_refused(
            "a writer creating a schedule's refine key",
            RESERVED,
            || create_as(env, &writer, &manifest),
            || delete(env, &ns, &format!("handoff/{}", name_for_key(&refine_key))),
        )
    });
    refused(
        out,
        "a writer creating a schedule's refine key",
        RESERVED,
        &[
            &format!("handoff key \"{refine_key}\" is reserved for BrainstormSchedule \"daily\""),
            &format!("only {refiner} may write it"),
            &format!("not user \"{writer}\""),
        ],
    );
    // The bridge answers with the policy's message, not a generic error.
    let text = common::err_text(&write(
        &writer_token,
        "implement",
        &refine_key,
        "## State\nsteering refine",
    ));
    for fragment in [
        "an admission policy refused the write",
        RESERVED,
        &format!("handoff key \"{refine_key}\" is reserved for BrainstormSchedule \"daily\""),
        &format!("only {refiner} may write it"),
        &format!("not user \"{writer}\""),
    ] {
        assert!(
            text.contains(fragment),
            "write_handoff names {fragment:?}: {text}"
        );
    }
    // Each Job's identity writes its own key; either writes other keys
    // under the prefix; neither writes the other's.
    common::ok(&write(
        &refiner_token,
        "refine",
        &refine_key,
        "## State\ngroomed",
    ));
    let brainstorm_key = format!("{ns}/daily/brainstorm");
    let text = common::err_text(&write(
        &refiner_token,
        "refine",
        &brainstorm_key,
        "## State\nnot mine",
    ));
    assert!(
        text.contains(&format!("only {brainstormer} may write it")),
        "{text}"
    );
    common::ok(&write(
        &brainstormer_token,
        "brainstorm",
        &brainstorm_key,
        "## State\nproposed",
    ));
    let scratch = format!("{ns}/daily/scratch");
    common::ok(&write(
        &refiner_token,
        "refine",
        &scratch,
        "## State\nrefine's scratch",
    ));
    common::ok(&write(
        &brainstormer_token,
        "brainstorm",
        &scratch,
        "## State\nbrainstorm's scratch",
    ));
    // The key written before the schedule existed: its content is reserved now ...
    let text = common::err_text(&write(
        &writer_token,
        "implement",
        &notes_key,
        "## State\nafter the schedule",
    ));
    assert!(
        text.contains(&format!("only {refiner} or {brainstormer} may write it")),
        "{text}"
    );
    // ... while a metadata-only update is not a write of the key.
    must(
        label_as(
            env,
            &ns,
            &["handoff", &name_for_key(&notes_key)],
            "kind=notes",
            &writer,
        ),
        "a label on a reserved key",
    );
    // A template without serviceAccountName: the Job runs as `default`.
    let writes = json!([{"apiGroups": ["handoff.dev"], "resources": ["handoffs"],
                         "verbs": ["get", "create", "update", "patch"]}]);
    apply(
        env,
        &role_for(&ns, "default", "handoff-writing", writes),
        "default may write handoffs",
    );
    let nightly = format!("{ns}/nightly/brainstorm");
    refused(
        create_as(
            env,
            &writer,
            &handoff(&name_for_key(&nightly), &ns, &nightly, None, &[]),
        ),
        "a writer creating the nightly schedule's key",
        RESERVED,
        &[
            "reserved for BrainstormSchedule \"nightly\"",
            &format!("only {} may write it", sa(&ns, "default")),
        ],
    );
    must(
        create_as(
            env,
            &sa(&ns, "default"),
            &handoff(&name_for_key(&nightly), &ns, &nightly, None, &[]),
        ),
        "the default ServiceAccount writes the nightly key",
    );
    // Deleting is not writing: a groomer that is not the schedule's removes the key.
    must(
        delete_handoff_as(env, &ns, &name_for_key(&refine_key), &sa(&ns, "groomer")),
        "a groomer deletes a reserved key",
    );
}

/// The Handoff loop, run with the controller's ServiceAccount and
/// config/rbac's rights under every policy: it labels and counts a
/// handoff an agent wrote (on a schedule's reserved key, too) and removes
/// the mirror finalizer an earlier release added (only the controller's
/// identity may add or remove it). The policies exempt no one from the
/// createdBy rules: the controller passes because it never changes a spec.
#[tokio::test(flavor = "multi_thread")]
async fn the_controller_keeps_labels_and_finalizers_working_under_the_policies() {
    use handoff_core::time::SystemClock;
    use handoff_testkit::controller::InProcess;

    let env = installed();
    let ns = env.namespace("policy-controller").await;
    common::agent_token(env, &ns, "refiner", Some("refine"), Some("handoff-groomer")).await;
    let refiner = sa(&ns, "refiner");
    apply(
        env,
        &schedule("daily", &ns, Some("refiner"), None),
        "schedule",
    );
    let url = tokio::task::spawn_blocking(handoff_testkit::shared_postgres_url)
        .await
        .expect("postgres");
    // The Lease config/rbac allows: handoff-controller in handoff-system.
    let controller = InProcess::new(&ns, "policy-test", Arc::new(SystemClock))
        .mirror(&url)
        .options(|o| {
            o.lease_namespace = Some(NS.into());
            o.concurrency = 4;
            o.mirror_resync_interval = Duration::from_secs(60);
        })
        .start(controller_client(env).await);

    // Written by hand as the refine Job's identity, without labels.
    let key = format!("{ns}/daily/refine");
    let name = name_for_key(&key);
    let created = tokio::task::block_in_place(|| {
        create_as(
            env,
            &refiner,
            &handoff(&name, &ns, &key, Some(&refiner), &[]),
        )
    });
    must(created, "the refine identity writes its key");
    // The finalizer an earlier release's controller applied (its field
    // manager, its identity).
    let controller_user = "system:serviceaccount:handoff-system:handoff-controller";
    let legacy = format!(
        "apiVersion: handoff.dev/v1alpha1\nkind: Handoff\nmetadata:\n  name: {name}\n  \
         namespace: {ns}\n  finalizers: [{MIRROR_FINALIZER}]\n"
    );
    tokio::task::block_in_place(|| {
        must(
            kubectl_stdin(
                env,
                &[
                    "apply",
                    "--server-side",
                    "--field-manager",
                    handoff_core::names::CONTROLLER_FIELD_MANAGER,
                    "--as",
                    controller_user,
                    "-f",
                    "-",
                ],
                &legacy,
            ),
            "the controller's identity applies the old finalizer",
        )
    });
    let api: Api<Handoff> = Api::namespaced(env.client().await, &ns);
    let handled = handoff_testkit::wait::eventually(
        "labels and status by the controller, the old finalizer removed",
        Duration::from_secs(60),
        || async {
            let h = api.get(&name).await.ok()?;
            let labelled = h.labels().get("project").map(String::as_str) == Some("shop");
            let unfinalized = h.finalizers().is_empty();
            let counted = h.status.as_ref().and_then(|s| s.revision) == Some(1);
            (labelled && unfinalized && counted).then_some(h)
        },
    )
    .await;
    assert_eq!(
        handled.spec.created_by.as_deref(),
        Some(refiner.as_str()),
        "the spec is the writer's"
    );

    // Deleted by a groomer: nothing holds it.
    tokio::task::block_in_place(|| must(delete_handoff_as(env, &ns, &name, &refiner), "delete"));
    handoff_testkit::wait::eventually("the deletion", Duration::from_secs(60), || async {
        api.get_opt(&name).await.ok()?.is_none().then_some(())
    })
    .await;
    controller.stop().await;
}

/// A client acting as the controller's ServiceAccount of the installation.
async fn controller_client(env: &TestEnv) -> kube::Client {
    use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
    use k8s_openapi::api::core::v1::ServiceAccount;
    let request = TokenRequest {
        spec: Some(TokenRequestSpec {
            expiration_seconds: Some(3600),
            ..Default::default()
        }),
        ..Default::default()
    };
    let token = Api::<ServiceAccount>::namespaced(env.client().await, NS)
        .create_token_request("handoff-controller", &Default::default(), &request)
        .await
        .expect("token request")
        .status
        .and_then(|s| s.token)
        .expect("issued token");
    let mut kubeconfig = env.kubeconfig().clone();
    for auth in &mut kubeconfig.auth_infos {
        auth.auth_info = Some(kube::config::AuthInfo {
            token: Some(token.clone().into()),
            ..Default::default()
        });
    }
    handoff_testkit::client_from(&kubeconfig)
        .await
        .expect("client")
}

/// A fresh namespace from a synchronous test.
fn tokio_ns(env: &'static TestEnv, prefix: &'static str) -> String {
    std::thread::spawn(move || {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime")
            .block_on(env.namespace(prefix))
    })
    .join()
    .expect("namespace")
}
