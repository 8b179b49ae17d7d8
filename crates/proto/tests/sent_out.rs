//! `Conn::sent_out`: a RepairBoost sender's timeslot ends when its bytes have left the
//! socket for the link, so it must wait while the network cannot take them.

use kintsugi_proto::auth::Secret;
use kintsugi_proto::secure::{accept, connect, Protection};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

#[tokio::test]
async fn sent_out_waits_while_the_peer_takes_nothing_and_returns_once_it_reads() {
    let secret = Secret::random();
    for p in [Protection::Encrypted, Protection::Open] {
        let key = (p != Protection::Open).then(|| secret.clone());
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        let k2 = key.clone();
        let server = tokio::spawn(async move { accept(l.accept().await.unwrap().0, k2.as_ref(), p).await.unwrap() });
        let mut c = connect(TcpStream::connect(addr).await.unwrap(), key.as_ref(), p).await.unwrap();
        let mut s = server.await.unwrap();
        // More than the socket buffers take while the peer reads nothing: the write stalls.
        let data = vec![5u8; 32 << 20];
        assert!(tokio::time::timeout(Duration::from_millis(300), c.write_all(&data)).await.is_err(), "{p}: 32 MiB taken at once");
        let err = c.sent_out(Duration::from_millis(300)).await.unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::TimedOut, "{p}: {err}");
        // The peer reads: everything written leaves.
        let reader = tokio::spawn(async move {
            let mut buf = vec![0u8; 1 << 20];
            let mut total = 0usize;
            while let Ok(n) = s.read(&mut buf).await {
                if n == 0 {
                    break;
                }
                total += n;
            }
            total
        });
        c.sent_out(Duration::from_secs(10)).await.unwrap();
        drop(c);
        assert!(reader.await.unwrap() > 0, "{p}");
    }
}
