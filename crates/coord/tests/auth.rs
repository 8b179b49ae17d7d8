//! With a cluster secret, every connection proves knowledge of it before any request is
//! served: the cluster works for those who know it, and a peer without it, with a wrong
//! one, with another protection, or of the previous protocol version (its handshake kept
//! here as a fixture), is refused by nodes and coordinator alike with a reason, its request
//! never carried out. (Its own test binary: the secret is process-wide.)

use kintsugi_client::Client;
use kintsugi_codes::CodeSpec;
use kintsugi_coord::{start, CoordConfig};
use kintsugi_node::NodeConfig;
use kintsugi_plan::Shape;
use kintsugi_proto::auth::{set_secret, Secret};
use kintsugi_proto::secure::{self, Protection};

use std::time::Duration;
use tokio::net::TcpStream;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_holders_of_the_secret_are_served() {
    set_secret(Some(Secret::random()));
    let dir = tempfile::tempdir().unwrap();
    let cfg = CoordConfig {
        listen: "127.0.0.1:0".into(),
        data_dir: dir.path().join("coord"),
        dead_after_ms: 800,
        chunk_size: 16 << 10,
        auto_repair: false,
        ..Default::default()
    };
    let coord = start(cfg).await.unwrap();
    let addr = coord.addr.to_string();
    let mut nodes = Vec::new();
    for i in 0..6 {
        let c = NodeConfig {
            id: i,
            data_dir: dir.path().join(format!("n{i}")),
            coordinator: Some(addr.clone()),
            heartbeat_ms: 100,
            ..Default::default()
        };
        nodes.push(kintsugi_node::start(c).await.unwrap());
    }
    let client = Client::new(&addr);
    for _ in 0..100 {
        if client.status().await.map(|s| s.nodes.iter().filter(|n| n.alive).count()) == Ok(6) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let code: CodeSpec = "rs:4,2".parse().unwrap();
    let data: Vec<u8> = (0..100_000u32).map(|i| (i * 7 + 3) as u8).collect();
    let layout = client.put("secret-object", &data, code, 0).await.expect("members are served");
    assert_eq!(client.get("secret-object", Shape::Ppr, 4096).await.unwrap().0, data);

    // A request without the handshake, protocol 1's handshake and protocol 2's (nodes of the
    // two previous releases): refused, naming both versions, and the chunk is not deleted.
    let loc = layout.stripes[0].chunks[0].clone();
    for target in [loc.addr.clone(), addr.clone()] {
        let mut s = TcpStream::connect(&target).await.unwrap();
        let answer = protocol_v1::request(&mut s, &serde_json::json!({"op": "delete_chunk", "chunk": loc.chunk.as_str()})).await;
        assert_eq!(answer["auth"], "refused", "{answer}");
        let why = answer["reason"].as_str().unwrap();
        assert!(why.contains(&format!("protocol {}", kintsugi_proto::secure::PROTOCOL_VERSION)) && why.contains("protocol 1"), "{why}");
        let mut s = TcpStream::connect(&target).await.unwrap();
        let why = protocol_v1::client_handshake(&mut s).await.unwrap_err();
        assert!(why.contains(&format!("protocol {}", kintsugi_proto::secure::PROTOCOL_VERSION)) && why.contains("protocol 1"), "{why}");
        let s = TcpStream::connect(&target).await.unwrap();
        let why = protocol_v2::connect(s, kintsugi_proto::auth::secret().as_ref().unwrap()).await.unwrap_err();
        assert!(why.contains(&format!("protocol {}", kintsugi_proto::secure::PROTOCOL_VERSION)) && why.contains("protocol 2"), "{why}");
    }
    let mut s = TcpStream::connect(&addr).await.unwrap();
    let answer = protocol_v1::request(&mut s, &serde_json::json!({"op": "delete_object", "name": "secret-object"})).await;
    assert_eq!(answer["auth"], "refused", "{answer}");

    // With a wrong secret, or another protection: refused, both ways.
    for target in [&loc.addr, &addr] {
        let s = TcpStream::connect(target).await.unwrap();
        let err = secure::connect(s, Some(&Secret::random()), Protection::Encrypted).await.unwrap_err();
        assert!(err.to_string().contains("secret"), "{err}");
        let s = TcpStream::connect(target).await.unwrap();
        let err = secure::connect(s, kintsugi_proto::auth::secret().as_ref(), Protection::Authenticated).await.unwrap_err();
        let err = err.to_string();
        assert!(err.contains("encrypted") && err.contains("authenticated"), "{err}");
        // A peer without a secret is told the cluster is not open.
        let s = TcpStream::connect(target).await.unwrap();
        let err = secure::connect(s, None, Protection::Encrypted).await.unwrap_err();
        assert!(err.to_string().contains("open"), "{err}");
    }

    // Nothing was carried out: the object and its chunks are intact.
    let (got, report) = client.get("secret-object", Shape::Cr, 4096).await.unwrap();
    assert_eq!(got, data);
    assert!(report.degraded.is_empty(), "no chunk was deleted by the refused request");
    for n in nodes {
        n.stop().await;
    }
}

/// Protocol 1's connecting side, as the previous release ran it: a JSON `hello` with a nonce
/// over the ordinary control frames, expecting a `challenge` (or a `refused`) back.
mod protocol_v1 {
    use kintsugi_proto::{read_frame, write_frame, Frame, Kind};
    use tokio::net::TcpStream;

    /// One JSON control frame out, one back.
    pub async fn request(s: &mut TcpStream, msg: &serde_json::Value) -> serde_json::Value {
        write_frame(s, Kind::Control, msg.to_string().as_bytes()).await.unwrap();
        match read_frame(s).await.unwrap() {
            Frame::Control(body) => serde_json::from_slice(&body).unwrap(),
            Frame::Data(_) => panic!("a data frame for an answer"),
        }
    }

    pub async fn client_handshake(s: &mut TcpStream) -> Result<(), String> {
        let nonce: String = rand::random::<[u8; 32]>().iter().map(|b| format!("{b:02x}")).collect();
        let answer = request(s, &serde_json::json!({ "auth": "hello", "nonce": nonce })).await;
        match answer["auth"].as_str() {
            Some("challenge") => Ok(()),
            Some("refused") => Err(answer["reason"].as_str().unwrap_or("").to_string()),
            _ => Err(format!("unexpected answer {answer}")),
        }
    }
}

/// Protocol 2's connecting side, as the previous release ran it: the same sealed handshake
/// under version 2 (`KSGN`, u16 2, the protection; then the Noise message under the hashed
/// secret), after which it would have sent JSON control messages carrying the planner's
/// own graphs. Returns the service's refusal.
mod protocol_v2 {
    use kintsugi_proto::auth::Secret;
    use sha2::{Digest, Sha256};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpStream;

    pub async fn connect(mut s: TcpStream, secret: &Secret) -> Result<(), String> {
        let pre = *b"KSGN\x00\x02\x02"; // protocol 2, encrypted
        let psk: [u8; 32] =
            Sha256::new().chain_update(b"kintsugi cluster secret, noise psk").chain_update(secret.expose()).finalize().into();
        let params = "Noise_NNpsk0_25519_AESGCM_SHA256".parse().unwrap();
        let mut h = snow::Builder::new(params).prologue(&pre).unwrap().psk(0, &psk).unwrap().build_initiator().unwrap();
        let mut m = [0u8; 256];
        let n = h.write_message(&[], &mut m).unwrap();
        let mut hello = pre.to_vec();
        hello.extend_from_slice(&(n as u16).to_be_bytes());
        hello.extend_from_slice(&m[..n]);
        s.write_all(&hello).await.map_err(|e| e.to_string())?;
        let status = s.read_u8().await.map_err(|e| e.to_string())?;
        let len = s.read_u16().await.map_err(|e| e.to_string())? as usize;
        let mut body = vec![0u8; len];
        s.read_exact(&mut body).await.map_err(|e| e.to_string())?;
        match status {
            1 => Err(String::from_utf8_lossy(&body).into_owned()),
            _ => Ok(()),
        }
    }
}
