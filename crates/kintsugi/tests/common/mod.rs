//! Helpers shared by integration tests (each test file uses some of them).
#![allow(dead_code)]

pub mod etcd;
pub mod history;
pub mod procs;
pub mod untrusted;
