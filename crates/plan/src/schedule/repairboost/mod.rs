//! RepairBoost (Lin et al., ATC'21): every lost chunk's repair graph (its RDAG) is mapped
//! onto nodes so that upload and download repair traffic balance over the whole cluster
//! ([`balance`], the paper's Algorithm 1), then transfers are ordered timeslot by timeslot
//! by maximum matching ([`timeslot`]).

pub mod balance;
pub mod timeslot;
