//! Per-connection TCP settings every kintsugi process applies to the connections it opens
//! and accepts: no Nagle delay, and optionally a congestion-control algorithm of its own.
//!
//! Why the latter: the host's default may be BBR, which sizes its window from the smallest
//! round trip it has seen. Where a node's uplink and downlink are both busy behind deep
//! queues (a full-node repair on the testbed's tc links), acknowledgements wait in the same
//! queues as data, round trips grow far past that minimum, and a BBR flow stalls at its
//! window while its own path idles. Measured on the testbed, it took cubic and short queues
//! together to remove that (REPRODUCTION.md); the testbed sets both.

use std::sync::RwLock;
use tokio::net::TcpStream;

static CONGESTION: RwLock<Option<String>> = RwLock::new(None);

/// The algorithms this kernel offers, as `/proc/sys/net/ipv4/tcp_available_congestion_control`
/// lists them.
pub fn available_congestion_controls() -> Vec<String> {
    std::fs::read_to_string("/proc/sys/net/ipv4/tcp_available_congestion_control")
        .map(|s| s.split_whitespace().map(str::to_string).collect())
        .unwrap_or_default()
}

/// Sets the congestion control for every later connection of this process (`None`: the
/// host's default). Refused, with the kernel's choices, when a socket cannot take it.
pub fn set_congestion_control(name: Option<&str>) -> Result<(), String> {
    if let Some(name) = name {
        let probe = std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| format!("cannot open a socket to check '{name}': {e}"))?;
        set_on_fd(std::os::fd::AsRawFd::as_raw_fd(&probe), name).map_err(|e| {
            let offered = available_congestion_controls();
            if offered.is_empty() {
                format!("TCP congestion control '{name}' is refused: {e}")
            } else {
                format!("TCP congestion control '{name}' is refused: {e} (this kernel offers: {})", offered.join(", "))
            }
        })?;
    }
    *CONGESTION.write().unwrap_or_else(|p| p.into_inner()) = name.map(str::to_string);
    Ok(())
}

/// The congestion control this process asks for, if any.
pub fn congestion_control() -> Option<String> {
    CONGESTION.read().unwrap_or_else(|p| p.into_inner()).clone()
}

/// Raises this process's limit of open files to its hard limit: a service holds a socket
/// per connection, and the usual soft limit (1024) would let a thousand idle strangers
/// keep members out.
pub fn raise_fd_limit() {
    let mut l = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: a struct the calls read and fill.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut l) == 0 && l.rlim_cur < l.rlim_max {
            l.rlim_cur = l.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &l);
        }
    }
}

/// Applies this process's settings to a connection. Best effort: a socket that refuses
/// keeps the host's defaults (the name was checked when it was set).
pub fn tune(s: &TcpStream) {
    let _ = s.set_nodelay(true);
    if let Some(name) = congestion_control() {
        let _ = set_on_fd(std::os::fd::AsRawFd::as_raw_fd(s), &name);
    }
}

/// DSCP "Lower Effort" (RFC 8622): traffic that yields to everything else, what repair is
/// to users' reads and writes. Switches that do not know it treat it as best effort.
pub const DSCP_LOWER_EFFORT: u8 = 1;

/// Marks what `s` sends from now on with DSCP `dscp` (0-63; 0 is best effort): the IPv4
/// TOS byte or the IPv6 traffic class, whose top six bits it is. The ECN bits stay the
/// kernel's.
pub fn set_dscp(s: &TcpStream, dscp: u8) -> std::io::Result<()> {
    if dscp > 63 {
        return Err(std::io::Error::new(std::io::ErrorKind::InvalidInput, "a DSCP is 0 to 63"));
    }
    let (level, name) = dscp_option(s)?;
    let value: libc::c_int = (dscp as libc::c_int) << 2;
    // SAFETY: the fd is an open socket for the duration of the call; the value is a c_int
    // of the size given, as IP_TOS and IPV6_TCLASS take.
    let rc = unsafe {
        libc::setsockopt(
            std::os::fd::AsRawFd::as_raw_fd(s),
            level,
            name,
            (&value as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// `SIOCOUTQNSD` (linux/sockios.h): bytes in a TCP socket's send queue not yet sent.
const SIOCOUTQNSD: libc::c_ulong = 0x894B;

/// Bytes written to `s` that the kernel has not yet sent on the network (sent but not yet
/// acknowledged is not counted): zero once the last byte has gone to the link's queue.
pub fn unsent_bytes(s: &TcpStream) -> std::io::Result<usize> {
    let mut n: libc::c_int = 0;
    // SAFETY: SIOCOUTQNSD writes one c_int to the pointer, which outlives the call; the fd
    // is an open socket for its duration.
    let rc = unsafe { libc::ioctl(std::os::fd::AsRawFd::as_raw_fd(s), SIOCOUTQNSD as _, &mut n as *mut libc::c_int) };
    if rc == 0 {
        Ok(n.max(0) as usize)
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// The socket option holding `s`'s DSCP: IPv4's TOS byte or IPv6's traffic class.
fn dscp_option(s: &TcpStream) -> std::io::Result<(libc::c_int, libc::c_int)> {
    Ok(match s.local_addr()? {
        std::net::SocketAddr::V4(_) => (libc::IPPROTO_IP, libc::IP_TOS),
        std::net::SocketAddr::V6(_) => (libc::IPPROTO_IPV6, libc::IPV6_TCLASS),
    })
}

/// The DSCP `s` marks its packets with.
pub fn dscp(s: &TcpStream) -> std::io::Result<u8> {
    let (level, name) = dscp_option(s)?;
    let mut value: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: value outlives the call and len is its size; the kernel writes at most len bytes.
    let rc =
        unsafe { libc::getsockopt(std::os::fd::AsRawFd::as_raw_fd(s), level, name, (&mut value as *mut libc::c_int).cast(), &mut len) };
    if rc == 0 {
        Ok((value as u8) >> 2)
    } else {
        Err(std::io::Error::last_os_error())
    }
}

fn set_on_fd(fd: std::os::fd::RawFd, name: &str) -> std::io::Result<()> {
    if name.is_empty() || name.len() > 15 || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
        return Err(std::io::Error::new(std::io::ErrorKind::InvalidInput, "not an algorithm's name"));
    }
    // SAFETY: fd is an open socket for the duration of the call; the option value is a
    // byte string of the given length, as TCP_CONGESTION takes.
    let rc = unsafe { libc::setsockopt(fd, libc::IPPROTO_TCP, libc::TCP_CONGESTION, name.as_ptr().cast(), name.len() as libc::socklen_t) };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The congestion control a connection runs, as the kernel reports it.
    fn congestion_of(s: &TcpStream) -> Option<String> {
        let mut buf = [0u8; 16];
        let mut len = buf.len() as libc::socklen_t;
        // SAFETY: buf outlives the call and len is its size; the kernel writes at most len bytes.
        let rc = unsafe {
            libc::getsockopt(std::os::fd::AsRawFd::as_raw_fd(s), libc::IPPROTO_TCP, libc::TCP_CONGESTION, buf.as_mut_ptr().cast(), &mut len)
        };
        (rc == 0).then(|| String::from_utf8_lossy(&buf[..len as usize]).trim_end_matches('\0').to_string())
    }

    #[tokio::test]
    async fn connections_take_the_chosen_algorithm_and_bad_names_are_refused() {
        assert!(set_congestion_control(Some("no-such-cc")).is_err());
        assert!(set_congestion_control(Some("surely_not_a_cc")).unwrap_err().contains("refused"));
        // reno is built into every Linux kernel.
        set_congestion_control(Some("reno")).unwrap();
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let a = TcpStream::connect(l.local_addr().unwrap()).await.unwrap();
        let (b, _) = l.accept().await.unwrap();
        tune(&a);
        tune(&b);
        assert_eq!(congestion_of(&a).as_deref(), Some("reno"));
        assert_eq!(congestion_of(&b).as_deref(), Some("reno"));
        set_congestion_control(None).unwrap();
    }

    #[tokio::test]
    async fn dscp_marks_what_the_socket_sends_on_ipv4_and_ipv6() {
        for host in ["127.0.0.1:0", "[::1]:0"] {
            let Ok(l) = tokio::net::TcpListener::bind(host).await else { continue };
            let a = TcpStream::connect(l.local_addr().unwrap()).await.unwrap();
            let (b, _) = l.accept().await.unwrap();
            assert_eq!(dscp(&b).unwrap(), 0, "{host}: unmarked by default");
            set_dscp(&b, DSCP_LOWER_EFFORT).unwrap();
            assert_eq!(dscp(&b).unwrap(), DSCP_LOWER_EFFORT, "{host}");
            set_dscp(&b, 46).unwrap();
            assert_eq!(dscp(&b).unwrap(), 46, "{host}");
            assert_eq!(dscp(&a).unwrap(), 0, "{host}: the other end keeps its own");
            assert!(set_dscp(&b, 64).is_err());
        }
    }

    #[tokio::test]
    async fn unsent_bytes_count_what_the_peer_has_no_room_for_then_fall_to_zero() {
        use tokio::io::AsyncReadExt;
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let a = TcpStream::connect(l.local_addr().unwrap()).await.unwrap();
        let (mut b, _) = l.accept().await.unwrap();
        assert_eq!(unsent_bytes(&a).unwrap(), 0);
        // Write until the kernel takes no more while the peer reads nothing: its receive
        // window closes, and what our send buffer still holds cannot be sent.
        let piece = vec![7u8; 64 << 10];
        let (mut written, mut blocked) = (0, 0);
        while blocked < 2 {
            match a.try_write(&piece) {
                Ok(n) => (written, blocked) = (written + n, 0),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    blocked += 1;
                    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
                }
                Err(e) => panic!("{e}"),
            }
        }
        let stuck = unsent_bytes(&a).unwrap();
        assert!(stuck > 0 && stuck < written, "{stuck} of {written} bytes unsent");
        // The peer reads it all: nothing is left to send.
        let mut got = vec![0u8; 1 << 20];
        let mut total = 0;
        while total < written {
            let n = b.read(&mut got).await.unwrap();
            assert!(n > 0);
            total += n;
        }
        let mut left = usize::MAX;
        for _ in 0..100 {
            left = unsent_bytes(&a).unwrap();
            if left == 0 {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        assert_eq!(left, 0);
    }
}
