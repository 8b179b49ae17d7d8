//! What the coordinator runs without being asked, each on its own period until it stops:
//! automatic repair, the heal-margin scan, sealing open Geo stripes, Geo compaction. (The
//! garbage collector lives with `objects`, the index publisher with `object_index`.)

pub(crate) mod auto_repair;
pub(crate) mod code_widths;
pub(crate) mod geo_compaction;
pub(crate) mod heal_margin;
pub(crate) mod said_at;
pub(crate) mod seal;
