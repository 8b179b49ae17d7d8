//! The node's link capacity when nobody configured one: the speed the kernel reports for the
//! interface its traffic to the coordinator leaves by (`/sys/class/net/IFACE/speed`, Mbit/s),
//! so that residual bandwidth, and ChameleonEC and SAR with it, work on a cluster nobody
//! tuned. Some virtual interfaces report none (loopback; a VXLAN tunnel with no lower device
//! and a bridge without ports report -1; a bridge reports its fastest port, a veth 10 Gbit/s),
//! and a NIC without a link reports -1: the node then says so and its monitor measures the link,
//! except over loopback ([`link_capacity`], [`measures_link`]).

use std::net::{IpAddr, Ipv4Addr, SocketAddr, ToSocketAddrs, UdpSocket};
use std::path::Path;

/// A link speed found, and where.
#[derive(Clone, Debug, PartialEq)]
pub struct Discovered {
    pub bytes_per_second: f64,
    pub interface: String,
}

/// The speed of the interface that routes to `coordinator` (HOST:PORT).
pub fn discover(coordinator: &str) -> Result<Discovered, String> {
    let addr: SocketAddr = coordinator
        .to_socket_addrs()
        .map_err(|e| format!("cannot resolve the coordinator {coordinator}: {e}"))?
        .next()
        .ok_or_else(|| format!("the coordinator {coordinator} resolves to no address"))?;
    let interface = interface_towards(addr)?;
    let bytes_per_second = interface_speed(Path::new("/sys"), &interface)?;
    Ok(Discovered { bytes_per_second, interface })
}

/// Whether the coordinator is reached over a loopback interface: processes on one host,
/// with no link between them whose speed could be read or measured.
pub fn coordinator_on_loopback(coordinator: &str) -> bool {
    let Some(addr) = coordinator.to_socket_addrs().ok().and_then(|mut a| a.next()) else { return false };
    interface_towards(addr).is_ok_and(|i| is_loopback(Path::new("/sys"), &i))
}

/// Whether interface `iface` is a loopback one (`lo`, or IFF_LOOPBACK in its sysfs flags).
pub fn is_loopback(sys: &Path, iface: &str) -> bool {
    const IFF_LOOPBACK: u32 = 0x8;
    if iface == "lo" {
        return true;
    }
    if iface.is_empty() || iface.contains('/') || iface.starts_with('.') {
        return false;
    }
    std::fs::read_to_string(sys.join("class/net").join(iface).join("flags"))
        .ok()
        .and_then(|t| u32::from_str_radix(t.trim().trim_start_matches("0x"), 16).ok())
        .is_some_and(|f| f & IFF_LOOPBACK != 0)
}

/// The interface traffic to `dest` leaves by: loopback for this host's own addresses, else
/// the longest-prefix route of the kernel's main table (IPv4).
fn interface_towards(dest: SocketAddr) -> Result<String, String> {
    // Connecting a UDP socket sends nothing; it picks the source address the kernel would.
    let unspecified: SocketAddr =
        if dest.is_ipv4() { "0.0.0.0:0".parse().expect("an address") } else { "[::]:0".parse().expect("an address") };
    let local = UdpSocket::bind(unspecified)
        .and_then(|s| s.connect(dest).and_then(|_| s.local_addr()))
        .map_err(|e| format!("no route to the coordinator {dest}: {e}"))?;
    if dest.ip().is_loopback() || local.ip() == dest.ip() {
        return Ok("lo".into());
    }
    let IpAddr::V4(v4) = dest.ip() else {
        return Err(format!("the coordinator {dest} is IPv6: finding its interface is not supported; set link_capacity"));
    };
    let table = std::fs::read_to_string("/proc/net/route").map_err(|e| format!("cannot read /proc/net/route: {e}"))?;
    route_interface(&table, v4).ok_or_else(|| format!("no route to the coordinator {dest} in /proc/net/route"))
}

/// The interface of the longest-prefix route to `dest` that is up, from /proc/net/route's
/// text (addresses in hex as the kernel holds them: network byte order in memory).
pub fn route_interface(table: &str, dest: Ipv4Addr) -> Option<String> {
    let addr = |hex: &str| u32::from_str_radix(hex, 16).ok().map(|v| u32::from_be_bytes(v.to_ne_bytes()));
    let d = u32::from(dest);
    table
        .lines()
        .skip(1)
        .filter_map(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            let (net, flags, mask) = (addr(f.get(1)?)?, u16::from_str_radix(f.get(3)?, 16).ok()?, addr(f.get(7)?)?);
            const RTF_UP: u16 = 1;
            (flags & RTF_UP != 0 && d & mask == net & mask).then(|| (mask.count_ones(), f[0].to_string()))
        })
        .max_by_key(|(bits, _)| *bits)
        .map(|(_, iface)| iface)
}

/// An interface's speed in bytes per second, from `{sys}/class/net/{iface}/speed` (Mbit/s).
pub fn interface_speed(sys: &Path, iface: &str) -> Result<f64, String> {
    if iface.is_empty() || iface.contains('/') || iface.starts_with('.') {
        return Err(format!("'{iface}' is not an interface name"));
    }
    let path = sys.join("class/net").join(iface).join("speed");
    let text = std::fs::read_to_string(&path).map_err(|e| format!("{iface} reports no speed ({}: {e})", path.display()))?;
    match text.trim().parse::<i64>() {
        Ok(mbit) if mbit > 0 => Ok(mbit as f64 * 1e6 / 8.0),
        Ok(v) => Err(format!("{iface} reports an unknown speed ({v}: no link, or a virtual interface)")),
        Err(_) => Err(format!("{iface} reports a speed that is not a number: '{}'", text.trim())),
    }
}

/// The link's (up, down) bytes per second and where they came from: configured
/// (`link_capacity`, else the emulated links), or else the speed the kernel reports for the
/// interface towards the coordinator; (0, 0) when neither says (the monitor then measures
/// it, unless the coordinator is on this host's loopback: see [`measures_link`]).
pub(crate) fn link_capacity(cfg: &crate::NodeConfig, coord: &str) -> ((f64, f64), String) {
    let (up, down) = (cfg.link_capacity.or(cfg.uplink), cfg.link_capacity.or(cfg.downlink));
    if up.is_some() || down.is_some() {
        return ((up.unwrap_or(0.0), down.unwrap_or(0.0)), "configured".into());
    }
    match discover(coord) {
        Ok(d) => {
            tracing::info!(
                "node {}: link capacity {:.0} Mbit/s, as {} reports (link_capacity overrides it)",
                cfg.id,
                d.bytes_per_second * 8.0 / 1e6,
                d.interface
            );
            ((d.bytes_per_second, d.bytes_per_second), d.interface)
        }
        Err(e) if coordinator_on_loopback(coord) => {
            tracing::warn!(
                "node {}: link capacity unknown ({e}); the coordinator is on this host's loopback, where nodes share no link to measure, so repair planning gets no residual bandwidth from this node: set link_capacity (--link-capacity)",
                cfg.id
            );
            ((0.0, 0.0), String::new())
        }
        Err(e) => {
            tracing::warn!(
                "node {}: link capacity unknown ({e}); until this node has carried at least 8 Mbit/s, repair planning gets no residual bandwidth from it, and then the most it carried in a period stands for its capacity: set link_capacity (--link-capacity)",
                cfg.id
            );
            ((0.0, 0.0), String::new())
        }
    }
}

/// Whether a node with no capacity configured or reported measures its link. Not over
/// loopback: one host's processes have no link between them, and each would measure its
/// own peak from whatever it happened to carry, so plans made from links alone would differ
/// from node to node by chance.
pub(crate) fn measures_link(capacity: (f64, f64), coord: &str) -> bool {
    capacity == (0.0, 0.0) && !coordinator_on_loopback(coord)
}

#[cfg(test)]
mod tests {
    use super::*;

    // As /proc/net/route prints it on a little-endian host: a default route by eth0, a
    // /24 by eth1, a /16 by eth0 and a route that is down.
    fn table() -> String {
        let hex = |a: [u8; 4]| format!("{:08X}", u32::from_ne_bytes(a));
        let row = |iface: &str, net: [u8; 4], flags: u16, mask: [u8; 4]| {
            format!("{iface}\t{}\t{}\t{flags:04X}\t0\t0\t0\t{}\t0\t0\t0\n", hex(net), hex([10, 0, 0, 1]), hex(mask))
        };
        let mut t = "Iface\tDestination\tGateway\tFlags\tRefCnt\tUse\tMetric\tMask\tMTU\tWindow\tIRTT\n".to_string();
        t += &row("eth0", [0, 0, 0, 0], 3, [0, 0, 0, 0]);
        t += &row("eth1", [192, 168, 7, 0], 1, [255, 255, 255, 0]);
        t += &row("eth0", [192, 168, 0, 0], 1, [255, 255, 0, 0]);
        t += &row("eth9", [172, 16, 0, 0], 0, [255, 255, 0, 0]);
        t
    }

    #[test]
    fn the_longest_prefix_that_is_up_wins() {
        let t = table();
        assert_eq!(route_interface(&t, Ipv4Addr::new(192, 168, 7, 9)).as_deref(), Some("eth1"));
        assert_eq!(route_interface(&t, Ipv4Addr::new(192, 168, 8, 9)).as_deref(), Some("eth0"));
        // The down route is not taken: the default one is.
        assert_eq!(route_interface(&t, Ipv4Addr::new(172, 16, 1, 1)).as_deref(), Some("eth0"));
        assert_eq!(route_interface("Iface\tDestination\n", Ipv4Addr::new(1, 2, 3, 4)), None);
        assert_eq!(route_interface("Iface\nbroken line\n", Ipv4Addr::new(1, 2, 3, 4)), None);
    }

    #[test]
    fn loopback_is_told_by_name_or_flags() {
        let sys = tempfile::tempdir().unwrap();
        for (iface, flags) in [("lo2", "0x9\n"), ("eth0", "0x1003\n"), ("odd", "junk")] {
            let d = sys.path().join("class/net").join(iface);
            std::fs::create_dir_all(&d).unwrap();
            std::fs::write(d.join("flags"), flags).unwrap();
        }
        assert!(is_loopback(sys.path(), "lo"));
        assert!(is_loopback(sys.path(), "lo2"));
        assert!(!is_loopback(sys.path(), "eth0"));
        assert!(!is_loopback(sys.path(), "odd"));
        assert!(!is_loopback(sys.path(), "missing"));
        assert!(!is_loopback(sys.path(), "../etc"));
        assert!(coordinator_on_loopback("127.0.0.1:7000"));
    }

    #[test]
    fn speeds_as_sysfs_reports_them() {
        let sys = tempfile::tempdir().unwrap();
        let put = |iface: &str, text: &str| {
            let d = sys.path().join("class/net").join(iface);
            std::fs::create_dir_all(&d).unwrap();
            std::fs::write(d.join("speed"), text).unwrap();
        };
        put("eth0", "25000\n");
        put("eth1", "-1\n");
        put("eth2", "fast\n");
        assert_eq!(interface_speed(sys.path(), "eth0").unwrap(), 25e9 / 8.0);
        assert!(interface_speed(sys.path(), "eth1").unwrap_err().contains("unknown speed"));
        assert!(interface_speed(sys.path(), "eth2").unwrap_err().contains("not a number"));
        assert!(interface_speed(sys.path(), "eth3").unwrap_err().contains("no speed"));
        assert!(interface_speed(sys.path(), "../../etc").is_err());
    }

    #[test]
    fn a_coordinator_on_this_host_is_reached_by_loopback() {
        // Loopback reports no speed: the node runs without, and says why.
        assert_eq!(interface_towards("127.0.0.1:7400".parse().unwrap()).unwrap(), "lo");
        let err = discover("127.0.0.1:7400").unwrap_err();
        assert!(err.contains("lo"), "{err}");
        assert!(discover("no-such-host.invalid:7400").is_err());
    }
}
