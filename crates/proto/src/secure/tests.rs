//! The records' tests: both protections, every way records arrive, tampering.
use super::*;
use crate::auth::Secret;
use crate::handshake::HandshakeError;
use tokio::io::AsyncReadExt;
use tokio::net::TcpListener;

async fn pair(
    cs: Option<Secret>,
    ss: Option<Secret>,
    cp: Protection,
    sp: Protection,
) -> (Result<Conn, HandshakeError>, Result<Conn, HandshakeError>) {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    let server = tokio::spawn(async move {
        let (s, _) = l.accept().await.unwrap();
        accept(s, ss.as_ref(), sp).await
    });
    let c = connect(TcpStream::connect(addr).await.unwrap(), cs.as_ref(), cp).await;
    (c, server.await.unwrap())
}

#[tokio::test]
async fn both_protections_carry_a_stream_both_ways_and_strangers_are_refused() {
    let k = Secret::random();
    for p in [Protection::Encrypted, Protection::Authenticated] {
        let (c, s) = pair(Some(k.clone()), Some(k.clone()), p, p).await;
        let (mut c, mut s) = (c.unwrap(), s.unwrap());
        assert_eq!(c.protection(), p);
        let data: Vec<u8> = (0..300_000u32).map(|i| (i * 7 + i / 5) as u8).collect();
        let d = data.clone();
        let w = tokio::spawn(async move {
            c.write_all(&d).await.unwrap();
            c.flush().await.unwrap();
            let mut back = vec![0u8; 5];
            c.read_exact(&mut back).await.unwrap();
            back
        });
        let mut got = vec![0u8; data.len()];
        s.read_exact(&mut got).await.unwrap();
        assert_eq!(got, data);
        s.write_all(b"thanks").await.unwrap();
        s.flush().await.unwrap();
        assert_eq!(w.await.unwrap(), b"thank");
    }
    let (c, s) = pair(Some(k.clone()), Some(Secret::random()), Protection::Encrypted, Protection::Encrypted).await;
    // The server refuses the stranger and tells it so; each side's error says which it is.
    assert!(matches!(c.unwrap_err(), HandshakeError::RefusedBy(why) if why.contains("does not know the cluster secret")));
    assert!(matches!(s.unwrap_err(), HandshakeError::RefusedPeer(why) if why.contains("does not know the cluster secret")));
    let (c, _) = pair(Some(k.clone()), Some(k.clone()), Protection::Authenticated, Protection::Encrypted).await;
    let e = c.unwrap_err().to_string();
    assert!(e.contains("encrypted") && e.contains("authenticated"), "{e}");
    let (c, _) = pair(None, Some(k.clone()), Protection::Encrypted, Protection::Encrypted).await;
    assert!(c.unwrap_err().to_string().contains("open"));
    let (c, s) = pair(None, None, Protection::Encrypted, Protection::Encrypted).await;
    assert_eq!((c.unwrap().protection(), s.unwrap().protection()), (Protection::Open, Protection::Open));
}

/// The sealed bytes of `frames` written as frames by a `mode` connection keyed `k`.
async fn sealed_stream(mode: Protection, k: [u8; 32], frames: Vec<Vec<u8>>) -> Vec<u8> {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let a = TcpStream::connect(l.local_addr().unwrap()).await.unwrap();
    let (mut b, _) = l.accept().await.unwrap();
    let w = tokio::spawn(async move {
        let mut w = Conn::sealed(a, mode, &k, &[0; 32]);
        for f in &frames {
            crate::frame::write_frame(&mut w, crate::Kind::Data, f).await.unwrap();
        }
        w.shutdown().await.unwrap();
    });
    let mut raw = Vec::new();
    b.read_to_end(&mut raw).await.unwrap();
    w.await.unwrap();
    raw
}

/// Feeds `raw` to a `mode` connection keyed `k`, cut at `cuts` with a pause at each (so
/// the reader finds only what comes before), and reads frames from it until the stream
/// ends or fails: the frames, the failure, and how many records were opened in the
/// reader's buffer.
async fn read_frames(mode: Protection, k: [u8; 32], raw: Vec<u8>, cuts: Vec<usize>) -> (Vec<Vec<u8>>, Option<String>, u64) {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let mut a = TcpStream::connect(l.local_addr().unwrap()).await.unwrap();
    let (b, _) = l.accept().await.unwrap();
    let feed = tokio::spawn(async move {
        let mut from = 0;
        for to in cuts.into_iter().chain([raw.len()]) {
            if a.write_all(&raw[from..to]).await.is_err() {
                return; // the reader gave up on a failed record
            }
            from = to;
            if to < raw.len() {
                tokio::time::sleep(std::time::Duration::from_millis(2)).await;
            }
        }
        let _ = a.shutdown().await;
    });
    let mut r = Conn::sealed(b, mode, &[0; 32], &k);
    let mut got = Vec::new();
    let failed = loop {
        match crate::frame::read_head(&mut r).await {
            Err(crate::FrameError::Closed) => break None,
            Err(e) => break Some(e.to_string()),
            Ok((_, len)) => {
                let mut body = Vec::new();
                if let Err(e) = crate::frame::read_body(&mut r, len, &mut body).await {
                    break Some(e.to_string());
                }
                got.push(body);
            }
        }
    };
    let opens = r.direct_opens();
    drop(r);
    feed.await.unwrap();
    (got, failed, opens)
}

fn frames() -> Vec<Vec<u8>> {
    let sizes = [0, 1, 5, 4095, 4096, 4097, 32768, 65535, 65536, 65537, 200_000, 3, 32768];
    sizes.iter().enumerate().map(|(i, &n)| (0..n).map(|j| (i * 31 + j * 7 + j / 251) as u8).collect()).collect()
}

/// Frames of every size around a record's and the direct read's thresholds arrive whole
/// and in order through both protections, whether the sealed bytes arrive at once or in
/// pieces (a body read partly in the reader's buffer, then finished in the record's), and
/// large bodies are opened in the reader's buffer.
#[tokio::test]
async fn frames_arrive_whole_however_the_records_arrive_and_large_bodies_open_in_place() {
    let k = [7u8; 32];
    for mode in [Protection::Encrypted, Protection::Authenticated] {
        let raw = sealed_stream(mode, k, frames()).await;
        // Cut every record after its length, inside its body and inside its tag.
        let (mut records, mut at) = (Vec::new(), 0);
        while at < raw.len() {
            let len = u32::from_be_bytes(raw[at..at + 4].try_into().unwrap()) as usize;
            records.push((at, len));
            at += 4 + len;
        }
        assert!(records.len() > frames().len(), "{mode}: frames' headers not sealed on their own");
        let cuts = |f: &dyn Fn(usize) -> usize| records.iter().map(|&(at, len)| at + f(len)).collect::<Vec<_>>();
        let ways = [
            ("at once", vec![]),
            ("cut after each record's length", cuts(&|_| 4)),
            ("cut inside each body", cuts(&|len| 4 + (len - TAG) / 3)),
            ("cut inside each tag", cuts(&|len| 4 + len - TAG + 5)),
        ];
        for (how, cuts) in ways {
            let (got, failed, opens) = read_frames(mode, k, raw.clone(), cuts).await;
            assert_eq!(failed, None, "{mode}, {how}");
            assert!(got == frames(), "{mode}, {how}: frames differ");
            // A record the socket held all of went straight into the reader's buffer.
            if how == "at once" || how == "cut after each record's length" {
                assert!(opens >= 8, "{mode}, {how}: {opens} records opened in the reader's buffer");
            }
        }
    }
}

/// A byte flipped anywhere in the sealed stream (a record's length, a header's record, a
/// large body read into the reader's buffer, a tag) fails the connection, and every frame
/// handed out before is the one sent.
#[tokio::test]
async fn a_flipped_byte_anywhere_fails_the_stream_and_nothing_altered_is_handed_out() {
    let k = [9u8; 32];
    let sent = frames();
    for mode in [Protection::Encrypted, Protection::Authenticated] {
        let raw = sealed_stream(mode, k, sent.clone()).await;
        let at: Vec<usize> = (0..40).map(|i| i * raw.len() / 40 + i % 5).chain([0, 3, 4, raw.len() - 1]).collect();
        for at in at {
            let mut bad = raw.clone();
            bad[at] ^= 0x20;
            let (got, failed, _) = read_frames(mode, k, bad, vec![]).await;
            assert!(failed.is_some(), "{mode}: byte {at} of {} flipped and not noticed", raw.len());
            assert!(got.len() < sent.len() && got[..] == sent[..got.len()], "{mode}: byte {at} flipped, frames altered");
        }
    }
}

#[tokio::test]
async fn another_protocol_version_is_refused_naming_both() {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    let server = tokio::spawn(async move { accept(l.accept().await.unwrap().0, None, Protection::Encrypted).await });
    let mut t = TcpStream::connect(addr).await.unwrap();
    t.write_all(b"KSGN\x00\x07\x00").await.unwrap();
    let mut answer = Vec::new();
    t.read_to_end(&mut answer).await.unwrap();
    assert_eq!(answer[0], 1);
    let text = String::from_utf8_lossy(&answer[3..]).to_string();
    assert!(text.contains(&format!("protocol {PROTOCOL_VERSION}")) && text.contains("protocol 7"), "{text}");
    assert!(server.await.unwrap().is_err());
}

/// A writer and a reader, `mode`, keyed alike (no handshake).
async fn keyed(mode: Protection) -> (Conn, Conn) {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let a = TcpStream::connect(l.local_addr().unwrap()).await.unwrap();
    let (b, _) = l.accept().await.unwrap();
    match mode {
        Protection::Open => (Conn::open(a), Conn::open(b)),
        _ => (Conn::sealed(a, mode, &[1; 32], &[2; 32]), Conn::sealed(b, mode, &[2; 32], &[1; 32])),
    }
}

/// Frames whose bodies are sealed where they lie, between frames written the usual way,
/// arrive whole and in order through every protection; sealed, the bodies are opened in
/// the reader's buffer.
#[tokio::test]
async fn bodies_given_up_to_the_connection_arrive_whole_through_every_protection() {
    for mode in [Protection::Encrypted, Protection::Authenticated, Protection::Open] {
        let (mut w, mut r) = keyed(mode).await;
        let writer = tokio::spawn(async move {
            for (i, f) in frames().into_iter().chain(frames()).enumerate() {
                if i % 3 == 2 {
                    crate::frame::write_frame(&mut w, crate::Kind::Data, &f).await.unwrap();
                } else {
                    let mut given = f.clone();
                    crate::frame::write_data_giving_up(&mut w, &mut given).await.unwrap();
                    if mode == Protection::Encrypted && f.len() >= DIRECT && f.len() <= RECORD {
                        assert_ne!(given, f, "a large body not sealed in place");
                    }
                }
            }
            w.shutdown().await.unwrap();
        });
        let mut got = Vec::new();
        loop {
            match crate::frame::read_head(&mut r).await {
                Err(crate::FrameError::Closed) => break,
                Err(e) => panic!("{mode}: {e}"),
                Ok((_, len)) => {
                    let mut body = Vec::new();
                    crate::frame::read_body(&mut r, len, &mut body).await.unwrap();
                    got.push(body);
                }
            }
        }
        writer.await.unwrap();
        let sent: Vec<Vec<u8>> = frames().into_iter().chain(frames()).collect();
        assert!(got == sent, "{mode}: frames differ");
        if mode != Protection::Open {
            assert!(r.direct_opens() > 0, "{mode}: no body opened in the reader's buffer");
        }
    }
}

/// A body's write cut short (its future dropped while the peer reads nothing) leaves part
/// of a record on the stream: later writes are refused, and the reader gets every whole
/// frame before it, then an error, never a frame altered.
#[tokio::test]
async fn a_write_cut_short_inside_a_record_refuses_later_writes() {
    for mode in [Protection::Encrypted, Protection::Authenticated] {
        let (mut w, mut r) = keyed(mode).await;
        let body: Vec<u8> = (0..RECORD).map(|i| (i * 13 + i / 7) as u8).collect();
        let mut whole = 0;
        loop {
            let mut given = body.clone();
            let write = crate::frame::write_data_giving_up(&mut w, &mut given);
            match tokio::time::timeout(std::time::Duration::from_millis(200), write).await {
                Ok(r) => r.unwrap(),
                Err(_) => break,
            }
            whole += 1;
        }
        let e = crate::frame::write_frame(&mut w, crate::Kind::Data, b"later").await.unwrap_err();
        assert!(e.to_string().contains("cut short"), "{mode}: {e}");
        drop(w);
        let mut got = 0;
        let failed = loop {
            match crate::frame::read_head(&mut r).await {
                Err(e) => break e,
                Ok((_, len)) => {
                    let mut b = Vec::new();
                    match crate::frame::read_body(&mut r, len, &mut b).await {
                        Ok(()) => assert!(b == body, "{mode}: frame {got} altered"),
                        Err(e) => break e,
                    }
                    got += 1;
                }
            }
        };
        assert_eq!(got, whole, "{mode}: {failed}");
        assert!(!matches!(failed, crate::FrameError::Closed), "{mode}: a cut record read as a clean close");
    }
}
