//! Encodes one Clay(10,4,13) stripe of CHUNK bytes per chunk ITER times: a fixed amount of
//! work for `perf stat` (cycles per byte), which a shared machine's timing noise does not
//! blur as much as wall-clock rates. Usage: clay_encode [CHUNK] [ITER] [encode|decode|repair]
use kintsugi_codes::{ClayCode, Code};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let len: usize = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(4 << 20);
    let iter: usize = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(50);
    let op = args.get(3).map(String::as_str).unwrap_or("encode");
    let code = ClayCode::new(10, 4, 13).unwrap();
    let mut x = 7u64;
    let data: Vec<Vec<u8>> = (0..10)
        .map(|_| {
            (0..len)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    x as u8
                })
                .collect()
        })
        .collect();
    let mut parity = vec![vec![0u8; len]; 4];
    let dr: Vec<&[u8]> = data.iter().map(|d| d.as_slice()).collect();
    {
        let mut pr: Vec<&mut [u8]> = parity.iter_mut().map(|p| p.as_mut_slice()).collect();
        code.encode(&dr, &mut pr).unwrap();
    }
    let all: Vec<&[u8]> = dr.iter().copied().chain(parity.iter().map(|p| p.as_slice())).collect();
    let mut out = vec![vec![0u8; len]; 4];
    let dec = code.decoder(&[0, 1, 2, 3], &(4..14).collect::<Vec<_>>()).unwrap();
    let helpers = code.choose_helpers(0, &(1..14).collect::<Vec<_>>()).unwrap();
    let eq = code.repair_equation(0, &helpers).unwrap();
    let reads: Vec<Vec<u8>> =
        eq.terms.iter().map(|t| t.byte_ranges(256, len).unwrap().into_iter().flat_map(|r| all[t.helper][r].to_vec()).collect()).collect();
    let rr: Vec<&[u8]> = reads.iter().map(|r| r.as_slice()).collect();
    let t0 = std::time::Instant::now();
    for _ in 0..iter {
        match op {
            "decode" => {
                let srcs: Vec<&[u8]> = (4..14).map(|i| all[i]).collect();
                let mut o: Vec<&mut [u8]> = out.iter_mut().map(|p| p.as_mut_slice()).collect();
                dec.apply(&srcs, &mut o).unwrap();
            }
            "repair" => code.repair(0, &helpers, &rr, &mut out[0]).unwrap(),
            _ => {
                let mut o: Vec<&mut [u8]> = out.iter_mut().map(|p| p.as_mut_slice()).collect();
                code.encode(&dr, &mut o).unwrap();
            }
        }
    }
    let secs = t0.elapsed().as_secs_f64();
    eprintln!("{op} {len} x{iter}: {secs:.3} s, {:.2} GB/s of data", (10 * len * iter) as f64 / secs / 1e9);
}
