//! The page a person sees before they are signed in: why, and what to do
//! in this mode. It names no secret and offers no form: signing in happens
//! on the laptop's terminal or at the organisation's proxy, not here.

use maud::{Markup, html};

use super::layout::Frame;
use crate::model::Mode;

/// Why the person is not signed in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SignIn {
    /// The request carried no session and no token.
    NoToken,
    /// A token came, and the cluster (or the laptop's link check) refused it.
    TokenRejected,
    /// The one-time link was opened before.
    LinkUsed,
    /// `/login` without its `token`.
    LinkMissing,
    /// The session ended.
    SessionExpired,
}

/// How to sign in, for a person who is not.
pub(crate) fn sign_in(mode: Mode, why: SignIn) -> Markup {
    let (title, reason) = reason(mode, why);
    Frame::new(None, title).page(html! {
        p { (reason) }
        h2 { "What to do" }
        @match mode {
            Mode::Laptop => {
                p {
                    "Run " code { "handoff console" } " again in your terminal. It prints a new one-time link "
                    "(and opens it when it can); open that link in this browser."
                }
                p { "Each link works once, on this computer only, so nobody else can use your console." }
            },
            Mode::Proxy => {
                p { "Sign in through your organisation's proxy: open the console's address again and sign in when asked." }
                p { "If you were signed in, your sign-in may have ended; signing in again starts a new one." }
            },
        }
    })
}

/// The page's title and the sentence saying why, in the words of the mode.
fn reason(mode: Mode, why: SignIn) -> (&'static str, &'static str) {
    match (why, mode) {
        (SignIn::NoToken, Mode::Laptop) => (
            "Sign in to the handoff console",
            "You are not signed in: this browser has not opened the console's one-time link.",
        ),
        (SignIn::NoToken, Mode::Proxy) => (
            "Sign in to the handoff console",
            "You are not signed in: no sign-in reached the console from the proxy.",
        ),
        (SignIn::TokenRejected, Mode::Laptop) => (
            "Sign-in refused",
            "This link's secret was refused: it is not the one the running console printed.",
        ),
        (SignIn::TokenRejected, Mode::Proxy) => (
            "Sign-in refused",
            "The cluster refused the sign-in the proxy sent; it may have expired.",
        ),
        (SignIn::LinkUsed, _) => (
            "This link was already used",
            "A console link works only once, and this one was opened before.",
        ),
        (SignIn::LinkMissing, _) => (
            "This link is incomplete",
            "The sign-in link is missing its secret; it may have been cut when copied.",
        ),
        (SignIn::SessionExpired, _) => (
            "Your session ended",
            "Your session with the console has ended; sign in again to go on.",
        ),
    }
}
