//! # exitcrawl-actors
//!
//! The actix actors that carry out the decisions of the `exitcrawl` policy core: one
//! `ExitActor` per source IP, a `SchedulerActor`, a `LimiterActor` and a `HealthActor`.
//! Being built (issue 3); the core crate is usable on its own meanwhile.
