//! Placement: where chunks go and how they move. Stripe-layout placement (`stripes`),
//! Geometric Partitioning's layout (`geo_layout`) and its small-size buckets, the moves of
//! a put whose node died (`upload_moves`), of one chunk (`chunk_move`), and rebalancing.

pub(crate) mod chunk_move;
pub mod geo_layout;
pub(crate) mod rebalance;
pub(crate) mod small_bucket;
pub(crate) mod stripes;
pub(crate) mod upload_moves;
