//! Scripted model servers on 127.0.0.1, one per wire API, for the agents
//! tier: the agents' real CLIs talk to them instead of a hosted model, so a
//! test decides what "the model" answers and reads what the CLI sent it.
//! Each plays a script per test and logs every request it receives: one
//! shell (`server`: listener, script, log) under three wire formats.

pub mod anthropic;
pub mod gemini;
pub mod openai;
mod server;
