//! With a cluster secret, every connection proves knowledge of it before any request is
//! served: the cluster works for those who know it, and a peer without it, or with a wrong
//! one, is refused by nodes and coordinator alike, its request never carried out.
//! (Its own test binary: the secret is process-wide.)

use kintsugi_client::Client;
use kintsugi_codes::CodeSpec;
use kintsugi_coord::{start, CoordConfig};
use kintsugi_node::NodeConfig;
use kintsugi_plan::Shape;
use kintsugi_proto::auth::{client_handshake, set_secret, Secret};
use kintsugi_proto::{recv, send, CoordRequest, NodeRequest};
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

    // Without the handshake: the node refuses, and the chunk is not deleted.
    let loc = layout.stripes[0].chunks[0].clone();
    let mut s = TcpStream::connect(&loc.addr).await.unwrap();
    send(&mut s, &NodeRequest::DeleteChunk { chunk: loc.chunk.clone() }).await.unwrap();
    let answer: Result<serde_json::Value, _> = recv(&mut s).await;
    assert!(format!("{answer:?}").contains("authenticate first"), "{answer:?}");
    // Nor the coordinator.
    let mut s = TcpStream::connect(&addr).await.unwrap();
    send(&mut s, &CoordRequest::DeleteObject { name: "secret-object".into() }).await.unwrap();
    let answer: Result<serde_json::Value, _> = recv(&mut s).await;
    assert!(format!("{answer:?}").contains("authenticate first"), "{answer:?}");

    // With a wrong secret: refused, both ways.
    let mut s = TcpStream::connect(&loc.addr).await.unwrap();
    let err = client_handshake(&mut s, &Secret::random()).await.unwrap_err();
    assert!(err.contains("secret"), "{err}");
    let mut s = TcpStream::connect(&addr).await.unwrap();
    assert!(client_handshake(&mut s, &Secret::random()).await.is_err());

    // Nothing was carried out: the object and its chunks are intact.
    let (got, report) = client.get("secret-object", Shape::Cr, 4096).await.unwrap();
    assert_eq!(got, data);
    assert!(report.degraded.is_empty(), "no chunk was deleted by the refused request");
    for n in nodes {
        n.stop().await;
    }
}
