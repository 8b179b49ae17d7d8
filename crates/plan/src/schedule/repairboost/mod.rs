//! RepairBoost (Lin et al., ATC'21): every lost chunk's repair graph (its RDAG) is mapped
//! onto nodes so that upload and download repair traffic balance over the whole cluster
//! ([`balance`], the paper's Algorithm 1, then [`rebalance`], ours: chains of moves that
//! lower the busiest link further), then transfers are ordered timeslot by timeslot
//! by maximum matching ([`timeslot`]), or by the paper's polling mode for heterogeneous
//! links ([`polling`], scheduler `repairboost-poll`).

pub mod balance;
mod matching;
pub mod polling;
pub mod rebalance;
pub mod timeslot;
