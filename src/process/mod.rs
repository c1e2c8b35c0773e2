//! Everything that runs or talks to another process: the proxy's IO driver and lifecycle
//! (`proxy`), the server as a child process (`child`), the synchronous MCP client (`client`) and
//! the capture procedure built on it (`capture`), package runners resolved and pinned outside the
//! sandbox (`packages`), and human diagnostics on stderr (`diag`).
//!
//! This is where threads, pipes, signals and clocks live. Decisions are not made here: the proxy
//! hands every frame to `gate::session` and executes what it returns. It does not know the
//! command line (`cli` calls in with plain values).

pub mod capture;
pub mod child;
pub mod client;
pub mod diag;
pub mod packages;
pub mod proxy;
