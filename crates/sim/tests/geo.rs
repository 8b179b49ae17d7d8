//! ECPipe's weighted path selection on the paper's EC2 link matrices: the chosen path is
//! never slower than random paths, and a pipelined repair runs at about the pace of its
//! slowest link.

use kintsugi_plan::schedule::weighted_path::best_path;
use kintsugi_sim::scenario::{Geo, EC2_ASIA, EC2_NA};
use kintsugi_sim::{engine, SimOptions};
use rand::seq::{IndexedRandom, SliceRandom};
use rand::SeedableRng;

#[test]
fn weighted_path_beats_random_paths() {
    let mut rng = rand::rngs::StdRng::seed_from_u64(2);
    for matrix in [EC2_NA, EC2_ASIA] {
        let g = Geo { matrix, chunk: 4 << 20, slice: 128 << 10, lost: 5 };
        let net = g.network();
        let others: Vec<usize> = (0..Geo::NODES).filter(|&i| i != g.lost).collect();
        let time = |hs: &[usize]| engine::run(&net, &[g.job(hs).unwrap()], &SimOptions::default()).unwrap().makespan;
        let weight = |x: usize, y: usize| 1.0 / g.link(x as u32, y as u32);
        let (best, w) = best_path(&others, g.lost, 12, &weight).unwrap();
        let t_best = time(&best);
        // Pipelined: about chunk / slowest link (1/w bytes/s), plus filling the pipe.
        let bound = g.chunk as f64 * w;
        assert!(t_best >= bound * 0.999 && t_best < bound * 1.3, "{t_best} vs slowest-link time {bound}");
        for _ in 0..4 {
            let mut hs: Vec<usize> = others.choose_multiple(&mut rng, 12).copied().collect();
            hs.shuffle(&mut rng);
            assert!(t_best <= time(&hs) * 1.001, "the weighted path is at least as fast as a random one");
        }
    }
}
