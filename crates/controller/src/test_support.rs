//! What the unit tests of several loops build alike, so that each test
//! states only what is its own.

/// An apiserver refusal with HTTP status `code`, as the loops' steps see
/// one (the tests of each loop's per-step errors).
pub(crate) fn api_error(code: u16) -> kube::Error {
    kube::Error::Api(
        kube::core::Status::failure("x", "y")
            .with_code(code)
            .boxed(),
    )
}
