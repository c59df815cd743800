//! Who is calling, and with which credentials the bridge acts for them.
//!
//! Over HTTP every request carries `Authorization: Bearer <token>` (an
//! agent's projected ServiceAccount token, or a static dev token). The
//! bridge never uses its own rights for handoffs: it builds a client that
//! sends the caller's token (token passthrough), so the apiserver's RBAC
//! decides every read and write, and it asks the apiserver who the token
//! belongs to with a SelfSubjectReview (that name becomes `spec.createdBy`).
//! Clients and identities are cached per token, bounded in size and age.
//!
//! Authentication cannot be amplified: however many requests carry a new
//! token at once, the bridge makes one review for it (single flight, keyed
//! by the token's SHA-256), and a token the apiserver rejected is answered
//! 401 from a bounded, short-lived cache of rejected hashes. An unknown
//! token costs one request on the pooled connections of a client without
//! credentials; only an accepted token gets a client of its own.
//!
//! The agent profile comes from the caller's ServiceAccount label
//! `handoff.dev/profile` when present (read with the bridge's own identity,
//! which may `get` ServiceAccounts of the namespace it serves only), else
//! from the `X-Handoff-Profile` request header. A header can therefore pick
//! a profile, but never widen what RBAC allows. The same read gives the
//! agent the caller is (label `handoff.dev/agent`): the destination an offer
//! names may reject it. An account is an agent only in its own namespace:
//! called in another (a `/mcp/ns/<namespace>` route), it is no agent there,
//! whatever its label, so one team's admin cannot make an account another
//! team's agent ([`Caller::agent`]). A caller whose ServiceAccount the
//! bridge may not read gets its profile from the header only, and is no
//! agent.
//!
//! When the bridge answers from the PostgreSQL mirror instead of the
//! apiserver, RBAC is not in the path, so the bridge asks first: a
//! SelfSubjectAccessReview made with the caller's own token ([`Caller::may`]),
//!
//! By concern: [`caller`] (a caller, its access reviews, its labels),
//! [`resolver`] (bearer tokens to callers, single flight), [`cache`] (the
//! bounded TTL cache of tokens) and [`namespace`] (which namespace a call
//! is in).

mod cache;
mod caller;
mod namespace;
mod resolver;

pub use self::caller::{ACCESS_TTL, Caller, who_am_i};
pub use self::namespace::NamespaceError;
pub use self::resolver::{AuthError, ResolverSettings, TokenResolver, bearer_token, with_timeouts};

/// The request header that names a profile when the ServiceAccount has no label.
pub const PROFILE_HEADER: &str = "x-handoff-profile";
