//! Helpers shared by integration tests (each test file uses some of them).
#![allow(dead_code)]

pub mod procs;
pub mod untrusted;
