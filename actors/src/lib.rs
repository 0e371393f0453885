//! # exitcrawl-actors — the I/O side of exitcrawl
//!
//! The pure core (`exitcrawl`) decides; this crate carries the decisions out. It owns
//! sockets, timers and mailboxes.
//!
//! - [`net`]: how one exit talks to the network — an awc client whose every TCP connection
//!   leaves from the exit's own source IP, a shared DNS cache, and the classification of
//!   connection failures (exit's fault or site's fault).

#![warn(missing_docs)]

pub mod net;
