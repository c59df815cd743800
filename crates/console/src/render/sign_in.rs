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
    let (title, reason) = reason(why);
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

fn reason(why: SignIn) -> (&'static str, &'static str) {
    match why {
        SignIn::NoToken => ("Sign in to the handoff console", "You are not signed in."),
        SignIn::TokenRejected => (
            "Sign-in refused",
            "The credentials that came with this request were refused.",
        ),
        SignIn::LinkUsed => (
            "This link was already used",
            "A console link works only once, and this one was opened before.",
        ),
        SignIn::LinkMissing => (
            "This link is incomplete",
            "The sign-in link is missing its secret; it may have been cut when copied.",
        ),
        SignIn::SessionExpired => (
            "Your session ended",
            "Your session with the console has ended.",
        ),
    }
}
