//! The network-namespace testbed: nodes in their own namespaces behind tc-shaped veth links,
//! driven by the client commands; a node failure, a degraded read and a repair; then `down`
//! removes every namespace and interface. Needs root and iproute2: skips itself otherwise
//! (CI runs as root).

use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_kintsugi");

fn root_with_iproute() -> bool {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    root && Command::new("ip").arg("-V").output().is_ok() && Command::new("tc").arg("-V").output().is_ok()
}

fn run(args: &[&str], coord: &str) -> std::process::Output {
    Command::new(BIN).args(args).env("KINTSUGI_COORDINATOR", coord).output().unwrap()
}

#[test]
fn testbed_up_repair_down() {
    if !root_with_iproute() {
        eprintln!("SKIPPED testbed_up_repair_down: needs root and iproute2 (CI runs it as root)");
        return;
    }
    // One retry on a fresh testbed: a rare flake of the namespace networking right after
    // `up` is still being investigated (see the testbed notes); a failing retry fails the test.
    let base = std::process::id() % 45;
    if let Err(first) = attempt(base) {
        eprintln!("testbed attempt 1 failed, retrying on a fresh testbed: {first}");
        attempt(base + 45).unwrap();
    }
}

fn attempt(tag: u32) -> Result<(), String> {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("tb");
    let d = dir.to_str().unwrap();
    // A name and subnet of its own, so that runs (or a developer's testbed) never collide.
    let name = format!("kt{tag}");
    let octet = (150 + tag).to_string();
    let coord_s = format!("10.{octet}.0.1:7400");
    let coord = coord_s.as_str();
    std::env::remove_var("KINTSUGI_SECRET_FILE");
    let _ = run(&["testbed", "down", "--name", &name, "--dir", d], coord);
    let up = run(
        &[
            "testbed",
            "up",
            "--nodes",
            "7",
            "--link",
            "400mbit",
            "--mtu",
            "9000",
            "--pace",
            "0.9",
            "--repair-class",
            "0.2",
            "--name",
            &name,
            "--octet",
            &octet,
            "--dir",
            d,
        ],
        coord,
    );
    if !up.status.success() {
        let _ = run(&["testbed", "down", "--name", &name, "--dir", d], coord);
        return Err(format!("testbed up: {}", String::from_utf8_lossy(&up.stderr)));
    }
    // The testbed made a cluster secret and says where: the client commands below use it.
    let secret = String::from_utf8_lossy(&up.stdout)
        .lines()
        .find_map(|l| l.strip_prefix("export KINTSUGI_SECRET_FILE=").map(str::to_string))
        .ok_or("testbed up printed no secret file")?;
    std::env::set_var("KINTSUGI_SECRET_FILE", secret);
    let check = || -> Result<(), String> {
        let file = tmp.path().join("in.bin");
        let bytes: Vec<u8> = (0..700_001u32).map(|i| (i.wrapping_mul(2246822519) >> 11) as u8).collect();
        std::fs::write(&file, &bytes).unwrap();
        let ok = |args: &[&str]| -> Result<String, String> {
            let o = run(args, coord);
            if o.status.success() {
                Ok(String::from_utf8_lossy(&o.stdout).to_string())
            } else {
                Err(format!("{args:?}: {}", String::from_utf8_lossy(&o.stderr)))
            }
        };
        // Every node must be live before the write (placement needs six of seven).
        for _ in 0..150 {
            let st: serde_json::Value = serde_json::from_str(&ok(&["status", "--json"])?).unwrap();
            if st["nodes"].as_array().unwrap().iter().all(|n| n["alive"] == true) {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        // The nodes' connections run cubic, the testbed's default, whatever the host's: node
        // 1's heartbeats to the coordinator are one, seen from inside its namespace.
        // Right after `up` a heartbeat connection may be between two attempts (the first
        // handshakes on fresh namespaces are sometimes lost and retried), so wait for one.
        let ss = || Command::new("ip").args(["netns", "exec", &format!("{name}n1"), "ss", "-tinH", "state", "established"]).output();
        for attempt in 0..50 {
            let Some(o) = ss().ok().filter(|o| o.status.success()) else { break };
            let text = String::from_utf8_lossy(&o.stdout).to_string();
            if text.trim().is_empty() {
                if attempt == 49 {
                    return Err("node 1 has no established connection 5 s after every node was live".into());
                }
                std::thread::sleep(std::time::Duration::from_millis(100));
                continue;
            }
            if !text.contains("cubic") {
                return Err(format!("node 1's connections do not run cubic: {text}"));
            }
            break;
        }
        // Jumbo frames (`--mtu 9000`) on node 1's link.
        let link = Command::new("ip").args(["netns", "exec", &format!("{name}n1"), "ip", "link", "show", &format!("{name}p1")]).output();
        let link = link.map(|o| String::from_utf8_lossy(&o.stdout).to_string()).unwrap_or_default();
        if !link.contains("mtu 9000") {
            return Err(format!("node 1's link is not at MTU 9000: {link}"));
        }
        // `--pace 0.9`: every node paces what it sends at 90% of the link, and receives
        // unshaped (tc shapes both ways).
        let mut paced = 0;
        for p in std::fs::read_dir("/proc").unwrap().flatten() {
            let args: Vec<String> = std::fs::read(p.path().join("cmdline"))
                .unwrap_or_default()
                .split(|&b| b == 0)
                .map(|a| String::from_utf8_lossy(a).to_string())
                .collect();
            if !(args.iter().any(|a| a == "node") && args.iter().any(|a| a.starts_with(d))) {
                continue;
            }
            let value = |flag: &str| args.iter().position(|a| a == flag).and_then(|i| args.get(i + 1)).cloned();
            if value("--uplink") != Some("45000000B/s".into()) || value("--downlink").is_some() || value("--link").is_some() {
                return Err(format!("a node of the paced testbed runs with {args:?}"));
            }
            paced += 1;
        }
        if paced != 7 {
            return Err(format!("{paced} paced node processes of 7"));
        }
        // `--repair-class 0.2`: every node's uplink (in its namespace) and downlink (the
        // bridge's port) carry repair in HTB class 1:20, matched by its DSCP mark.
        let repair_class_bytes = || -> Result<u64, String> {
            let mut total = 0;
            for i in 0..7 {
                let up = Command::new("ip")
                    .args(["netns", "exec", &format!("{name}n{i}"), "tc", "-s", "class", "show", "dev", &format!("{name}p{i}")])
                    .output();
                let down = Command::new("tc").args(["-s", "class", "show", "dev", &format!("{name}v{i}")]).output();
                for out in [up, down] {
                    let text = String::from_utf8_lossy(&out.map_err(|e| e.to_string())?.stdout).to_string();
                    let sent = text
                        .split("class htb ")
                        .find(|c| c.starts_with("1:20 "))
                        .and_then(|c| c.split("Sent ").nth(1))
                        .and_then(|c| c.split_whitespace().next())
                        .and_then(|n| n.parse::<u64>().ok())
                        .ok_or_else(|| format!("node {i} has no repair class: {text}"))?;
                    total += sent;
                }
            }
            Ok(total)
        };
        ok(&["put", "obj", file.to_str().unwrap(), "--code", "rs:4,2", "--chunk-size", "64KiB"])?;
        let stat: serde_json::Value = serde_json::from_str(&ok(&["stat", "obj", "--json"])?).unwrap();
        let victim = stat["stripes"][0]["chunks"][0]["node"].as_u64().unwrap().to_string();
        ok(&["fail", &victim])?;
        std::thread::sleep(std::time::Duration::from_millis(500));
        let out = tmp.path().join("out.bin");
        let got: serde_json::Value =
            serde_json::from_str(&ok(&["get", "obj", "--out", out.to_str().unwrap(), "--method", "ecpipe-cyclic", "--json"])?).unwrap();
        if std::fs::read(&out).unwrap() != bytes || got["degraded_reads"].as_array().unwrap().is_empty() {
            return Err("degraded read over the testbed did not return the object".into());
        }
        // Users' writes and degraded reads are not repair: nothing went in its class.
        let before = repair_class_bytes()?;
        if before != 0 {
            return Err(format!("{before} bytes of writes and degraded reads went in the repair class"));
        }
        let rep: serde_json::Value = serde_json::from_str(&ok(&["repair", "--method", "ppr", "--json"])?).unwrap();
        if rep["failed"] != 0 || rep["repaired"].as_u64().unwrap_or(0) == 0 {
            return Err(format!("repair over the testbed: {rep}"));
        }
        // Every rebuilt byte crossed at least a helper's uplink and the destination's
        // downlink in the repair class.
        let marked = repair_class_bytes()?;
        let rebuilt = rep["bytes"].as_u64().unwrap_or(u64::MAX);
        if marked < 2 * rebuilt {
            return Err(format!("{marked} bytes in the repair class for {rebuilt} rebuilt"));
        }
        ok(&["get", "obj", "--out", out.to_str().unwrap()])?;
        if std::fs::read(&out).unwrap() != bytes {
            return Err("object differs after repair".into());
        }
        Ok(())
    };
    let result = check();
    if result.is_err() {
        let st = run(&["status"], coord);
        eprintln!("status at failure:\n{}{}", String::from_utf8_lossy(&st.stdout), String::from_utf8_lossy(&st.stderr));
        for e in std::fs::read_dir(&dir).unwrap().flatten() {
            if e.file_name().to_string_lossy().ends_with(".log") {
                eprintln!("--- {}:\n{}", e.path().display(), std::fs::read_to_string(e.path()).unwrap_or_default());
            }
        }
    }
    let down = run(&["testbed", "down", "--name", &name, "--dir", d], coord);
    assert!(down.status.success(), "{}", String::from_utf8_lossy(&down.stderr));
    let ns = String::from_utf8_lossy(&Command::new("ip").args(["netns", "list"]).output().unwrap().stdout).to_string();
    assert!(!ns.lines().any(|l| l.starts_with(&format!("{name}n"))), "namespaces left behind: {ns}");
    assert!(!std::path::Path::new(&format!("/sys/class/net/{name}br")).exists(), "bridge left behind");
    result
}

/// `testbed up --queues peer`: every node's uplink and downlink share their rate among its
/// peers round robin, an HTB class each; an object written and read over it comes back
/// whole, and its bytes went through the classes of the peers that sent them.
#[test]
fn per_peer_queues_carry_each_peers_traffic_in_its_own_class() {
    if !root_with_iproute() {
        eprintln!("SKIPPED per_peer_queues_carry_each_peers_traffic_in_its_own_class: needs root and iproute2 (CI runs it as root)");
        return;
    }
    let tag = std::process::id() % 40;
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("tb");
    let d = dir.to_str().unwrap();
    let (name, octet) = (format!("kq{tag}"), (60 + tag).to_string());
    let coord_s = format!("10.{octet}.0.1:7400");
    let coord = coord_s.as_str();
    // Not `run`: the other test sets KINTSUGI_SECRET_FILE for this whole process, to a file
    // of its own testbed that may be gone by now.
    let run = |args: &[&str], coord: &str| {
        Command::new(BIN).args(args).env("KINTSUGI_COORDINATOR", coord).env_remove("KINTSUGI_SECRET_FILE").output().unwrap()
    };
    let _ = run(&["testbed", "down", "--name", &name, "--dir", d], coord);
    let up = run(
        &["testbed", "up", "--nodes", "3", "--link", "200mbit", "--queues", "peer", "--name", &name, "--octet", &octet, "--dir", d],
        coord,
    );
    let check = || -> Result<(), String> {
        if !up.status.success() {
            return Err(format!("testbed up: {}", String::from_utf8_lossy(&up.stderr)));
        }
        let secret = String::from_utf8_lossy(&up.stdout)
            .lines()
            .find_map(|l| l.strip_prefix("export KINTSUGI_SECRET_FILE=").map(str::to_string))
            .ok_or("testbed up printed no secret file")?;
        let ok = |args: &[&str]| -> Result<String, String> {
            let o = Command::new(BIN).args(args).env("KINTSUGI_COORDINATOR", coord).env("KINTSUGI_SECRET_FILE", &secret).output().unwrap();
            match o.status.success() {
                true => Ok(String::from_utf8_lossy(&o.stdout).to_string()),
                false => Err(format!("{args:?}: {}", String::from_utf8_lossy(&o.stderr))),
            }
        };
        // Bytes each class of one interface sent, by class id ("1:10").
        let class_bytes = |ns: Option<String>, dev: String| -> Result<Vec<(String, u64)>, String> {
            let mut cmd = match &ns {
                Some(ns) => {
                    let mut c = Command::new("ip");
                    c.args(["netns", "exec", ns, "tc"]);
                    c
                }
                None => Command::new("tc"),
            };
            let out = cmd.args(["-s", "class", "show", "dev", &dev]).output().map_err(|e| e.to_string())?;
            let text = String::from_utf8_lossy(&out.stdout).to_string();
            Ok(text
                .split("class htb ")
                .skip(1)
                .filter_map(|c| {
                    let id = c.split_whitespace().next()?.to_string();
                    let sent = c.split("Sent ").nth(1)?.split_whitespace().next()?.parse().ok()?;
                    Some((id, sent))
                })
                .collect())
        };
        let file = tmp.path().join("in.bin");
        let bytes: Vec<u8> = (0..3_000_001u32).map(|i| (i.wrapping_mul(2654435761) >> 13) as u8).collect();
        std::fs::write(&file, &bytes).unwrap();
        ok(&["put", "obj", file.to_str().unwrap(), "--code", "rs:2,1", "--chunk-size", "256KiB"])?;
        let out = tmp.path().join("out.bin");
        ok(&["get", "obj", "--out", out.to_str().unwrap()])?;
        if std::fs::read(&out).unwrap() != bytes {
            return Err("the object read back differs".into());
        }
        // Per node: a class for the root namespace (1:10), one for each other node, one for
        // anything else, under the link's; what the client wrote crossed each node's
        // downlink in the root namespace's class, what it read each data node's uplink.
        let (mut down_from_host, mut up_to_host) = (0, 0);
        for i in 0..3 {
            let up = class_bytes(Some(format!("{name}n{i}")), format!("{name}p{i}"))?;
            let down = class_bytes(None, format!("{name}v{i}"))?;
            for (side, classes) in [("uplink", &up), ("downlink", &down)] {
                let mut ids: Vec<&str> = classes.iter().map(|c| c.0.as_str()).collect();
                ids.sort();
                if ids != ["1:1", "1:10", "1:11", "1:12", "1:2"] {
                    return Err(format!("node {i}'s {side} has classes {ids:?}"));
                }
            }
            let host = |c: &Vec<(String, u64)>| c.iter().find(|c| c.0 == "1:10").map_or(0, |c| c.1);
            down_from_host += host(&down);
            up_to_host += host(&up);
        }
        let len = bytes.len() as u64;
        // RS(2,1): the object and half again written, the object read (headers on top).
        if down_from_host < len * 3 / 2 || up_to_host < len {
            return Err(format!("{down_from_host} bytes from the client into the nodes, {up_to_host} back, for {len}"));
        }
        Ok(())
    };
    let result = check();
    let down = run(&["testbed", "down", "--name", &name, "--dir", d], coord);
    assert!(down.status.success(), "{}", String::from_utf8_lossy(&down.stderr));
    result.unwrap();
}

/// `testbed up` refuses to start while another process (a coordinator of an earlier
/// testbed, say) still holds its coordinator's address: its own coordinator could not bind
/// it, and the nodes would register with the stale one. It says so and leaves nothing behind.
#[test]
fn testbed_up_refuses_a_coordinator_address_another_process_holds() {
    if !root_with_iproute() {
        eprintln!("SKIPPED testbed_up_refuses_a_coordinator_address_another_process_holds: needs root and iproute2 (CI runs it as root)");
        return;
    }
    let tag = std::process::id() % 30;
    let (name, octet) = (format!("ks{tag}"), 110 + tag as u8);
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path().join("tb");
    let d = d.to_str().unwrap();
    let coord = format!("10.{octet}.0.1:7400");
    let _ = run(&["testbed", "down", "--name", &name, "--dir", d], &coord);
    // A listener on the address before any interface has it (IP_FREEBIND), as a process of
    // a testbed torn down around it keeps its socket.
    // SAFETY: plain socket calls on a descriptor this test owns; the option and address
    // are values of the sizes passed.
    let fd = unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM, 0);
        assert!(fd >= 0);
        let one: libc::c_int = 1;
        let ok = libc::setsockopt(fd, libc::IPPROTO_IP, libc::IP_FREEBIND, (&one as *const libc::c_int).cast(), 4);
        assert_eq!(ok, 0);
        let mut sa: libc::sockaddr_in = std::mem::zeroed();
        sa.sin_family = libc::AF_INET as libc::sa_family_t;
        sa.sin_port = 7400u16.to_be();
        sa.sin_addr.s_addr = u32::from_ne_bytes([10, octet, 0, 1]);
        let len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
        assert_eq!(libc::bind(fd, (&sa as *const libc::sockaddr_in).cast(), len), 0, "{}", std::io::Error::last_os_error());
        assert_eq!(libc::listen(fd, 8), 0);
        fd
    };
    let up = Command::new(BIN)
        .args(["testbed", "up", "--nodes", "1", "--name", &name, "--octet", &octet.to_string(), "--dir", d])
        .env_remove("KINTSUGI_SECRET_FILE")
        .output()
        .unwrap();
    let left = std::path::Path::new(&format!("/sys/class/net/{name}br")).exists();
    if up.status.success() || left {
        let _ = run(&["testbed", "down", "--name", &name, "--dir", d], &coord);
    }
    // SAFETY: closes the descriptor opened above, once.
    unsafe { libc::close(fd) };
    let err = String::from_utf8_lossy(&up.stderr);
    assert!(!up.status.success(), "testbed up started beside a process holding {coord}");
    assert!(err.contains(&format!("cannot take the coordinator's address {coord}")), "{err}");
    assert!(!left, "testbed up left its bridge behind");
}
