//! Samples a collector reads at each scrape (counts kept elsewhere, in atomics or the
//! cluster's state): one value, or one family of labelled values, in one call.

use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::registry::Unit;
use std::fmt::Result;

/// A counter's current value.
pub fn counter(e: &mut DescriptorEncoder, name: &str, help: &str, unit: Option<&Unit>, v: u64) -> Result {
    let c = ConstCounter::new(v);
    c.encode(e.encode_descriptor(name, help, unit, c.metric_type())?)
}

/// A gauge's current value.
pub fn gauge(e: &mut DescriptorEncoder, name: &str, help: &str, unit: Option<&Unit>, v: f64) -> Result {
    let g = ConstGauge::new(v);
    g.encode(e.encode_descriptor(name, help, unit, g.metric_type())?)
}

/// A counter family: one value per label set.
pub fn counters<L: EncodeLabelSet>(
    e: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    unit: Option<&Unit>,
    samples: impl IntoIterator<Item = (L, u64)>,
) -> Result {
    let mut m = e.encode_descriptor(name, help, unit, ConstCounter::new(0u64).metric_type())?;
    for (labels, v) in samples {
        ConstCounter::new(v).encode(m.encode_family(&labels)?)?;
    }
    Ok(())
}

/// A gauge family: one value per label set.
pub fn gauges<L: EncodeLabelSet>(
    e: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    unit: Option<&Unit>,
    samples: impl IntoIterator<Item = (L, f64)>,
) -> Result {
    let mut m = e.encode_descriptor(name, help, unit, ConstGauge::new(0.0).metric_type())?;
    for (labels, v) in samples {
        ConstGauge::new(v).encode(m.encode_family(&labels)?)?;
    }
    Ok(())
}
