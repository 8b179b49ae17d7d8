//! Resource capacities over time: links and disks less the foreground series on them, and
//! the caps repair is held to (`Network::repair_caps`).

use crate::network::{
    res_disk_read, res_disk_write, res_down, res_repair_down, res_repair_up, res_up, res_users_down, res_users_up, Direction, Network,
};

/// (time, resource, its capacity from then on).
pub(super) type CapacityChange = (f64, u32, f64);

/// Every resource's capacity changes, in time order: a link or disk less the sum of the
/// foreground series on it (several may share one: a straggler's readers beside a network
/// file's traffic), or with elastic foreground, a link's users' flow's demand, the sum of
/// its series; and repair caps as given. Also, per node, whether repair is capped on its
/// uplink and downlink.
pub(super) fn capacity_changes(net: &Network, base: &[f64]) -> (Vec<CapacityChange>, Vec<(bool, bool)>) {
    // Per resource: its series, and whether they set a users' flow's demand (elastic).
    let mut by_res: std::collections::BTreeMap<u32, (Vec<&crate::network::Foreground>, bool)> = Default::default();
    for f in &net.foreground {
        let (r, users) = match f.direction {
            Direction::Up if net.elastic_foreground => (res_users_up(f.node), true),
            Direction::Down if net.elastic_foreground => (res_users_down(f.node), true),
            Direction::Up => (res_up(f.node), false),
            Direction::Down => (res_down(f.node), false),
            Direction::Read => (res_disk_read(f.node), false),
            Direction::Write => (res_disk_write(f.node), false),
        };
        let entry = by_res.entry(r).or_insert((Vec::new(), users));
        entry.0.push(f);
    }
    let mut out = Vec::new();
    for (r, (series, users)) in by_res {
        // One sweep over every point in time order, keeping each series' current rate and
        // their sum: a change per distinct time (series may hold thousands of points).
        let mut points: Vec<(f64, usize, f64)> =
            series.iter().enumerate().flat_map(|(i, f)| f.points.iter().map(move |&(t, rate)| (t, i, rate))).collect();
        points.sort_by(|a, b| a.0.total_cmp(&b.0));
        let mut now = vec![0.0; series.len()];
        for (k, &(t, i, rate)) in points.iter().enumerate() {
            now[i] = rate;
            if points.get(k + 1).is_some_and(|next| next.0 == t) {
                continue;
            }
            let sum: f64 = now.iter().sum();
            out.push((t, r, if users { sum } else { (base[r as usize] - sum).max(0.0) }));
        }
    }
    let mut paced = vec![(false, false); net.nodes.len()];
    for c in &net.repair_caps {
        let (r, p) = match c.direction {
            Direction::Up => (res_repair_up(c.node), &mut paced[c.node as usize].0),
            _ => (res_repair_down(c.node), &mut paced[c.node as usize].1),
        };
        *p = true;
        out.extend(c.points.iter().map(|&(t, cap)| (t, r, cap)));
    }
    out.sort_by(|a, b| a.0.total_cmp(&b.0));
    (out, paced)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::network::Foreground;

    /// Two foreground series on one link add up (a straggler's readers beside a network
    /// file's traffic); a repair cap is a capacity of its own.
    #[test]
    fn foreground_series_on_one_link_add_up() {
        let mut net = Network::homogeneous(2, 100.0);
        net.foreground.push(Foreground { node: 0, direction: Direction::Up, points: vec![(0.0, 10.0), (1.0, 0.0)] });
        net.foreground.push(Foreground { node: 0, direction: Direction::Up, points: vec![(0.5, 20.0)] });
        net.repair_caps.push(Foreground { node: 1, direction: Direction::Down, points: vec![(2.0, 30.0)] });
        let (base, _) = net.resources();
        let (changes, paced) = capacity_changes(&net, &base);
        let up0 = res_up(0);
        assert_eq!(changes, vec![(0.0, up0, 90.0), (0.5, up0, 70.0), (1.0, up0, 80.0), (2.0, res_repair_down(1), 30.0)]);
        assert_eq!(paced, vec![(false, false), (false, true)]);
    }
}
