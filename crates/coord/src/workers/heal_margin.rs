//! Whether the cluster can heal itself: a lost node's chunks are rebuilt on a node that
//! holds no chunk of their stripe, so a cluster whose widest stripe spans every live node
//! cannot rebuild anything until the node returns or one is added. This keeps the widest
//! code in use (learnt from the stripes at start, then from each put) so that `status`,
//! the status page and a metric can say so before a node is lost, not after.

use crate::coordinator::Coordinator;
use std::sync::Arc;
use tokio::sync::watch;

/// Live nodes beyond the widest code: at 0 (or below) a lost node cannot be rebuilt.
pub(crate) fn spare_nodes(widest: usize, placeable: usize) -> i64 {
    placeable as i64 - widest as i64
}

/// What `status` says when the cluster cannot heal a lost node, if it cannot.
pub(crate) fn warning(widest: usize, placeable: usize) -> Option<String> {
    (widest > 0 && spare_nodes(widest, placeable) <= 0).then(|| {
        format!(
            "the widest code in use spans {widest} nodes and {placeable} node(s) can take chunks: a lost node's chunks \
             cannot be rebuilt until it returns or a node is added"
        )
    })
}

impl Coordinator {
    /// The heal warning for the cluster as it is now.
    pub(crate) fn heal_warning(&self) -> Option<String> {
        let placeable = self.placeable().map(|p| p.len()).unwrap_or(0);
        warning(self.code_widths.widest(), placeable)
    }
}

/// Learns the widest code of the stripes stored, a page at a time, off the request path.
pub(crate) async fn scan(coord: Arc<Coordinator>, mut stop: watch::Receiver<bool>) {
    let mut after = 0;
    loop {
        if *stop.borrow() {
            return;
        }
        let c = coord.clone();
        let page = tokio::task::spawn_blocking(move || c.meta.stripes_from(after, 1000)).await;
        let page = match page {
            Ok(Ok(p)) => p,
            Ok(Err(e)) => {
                tracing::warn!("reading the stripes' codes: {e}; the heal warning counts new puts only");
                return;
            }
            Err(_) => return,
        };
        let Some(last) = page.last() else { return };
        after = last.id;
        for s in &page {
            coord.code_widths.observe(s.nodes.len());
        }
        tokio::select! {
            _ = tokio::task::yield_now() => {}
            _ = stop.changed() => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workers::code_widths::CodeWidths;

    #[test]
    fn a_code_as_wide_as_the_cluster_is_warned_of() {
        assert!(warning(0, 3).is_none(), "nothing stored");
        assert!(warning(8, 9).is_none());
        let w = warning(9, 9).unwrap();
        assert!(w.contains("9 nodes") && w.contains("cannot be rebuilt"), "{w}");
        assert!(warning(9, 8).is_some());
        let widths = CodeWidths::default();
        widths.observe(6);
        widths.observe(9);
        widths.observe(3);
        assert_eq!((widths.widest(), spare_nodes(widths.widest(), 10)), (9, 1));
    }
}
