//! A real local control plane for tests and `handoff dev`.
