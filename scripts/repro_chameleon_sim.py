#!/usr/bin/env python3
"""ChameleonEC's Exp#1, #6 and #7 in the simulator: repair throughput of ChameleonEC against
CR, PPR and ECPipe with random sources and with RepairBoost, under moving foreground traffic
and with none.

Setting (the paper's defaults, §4): 20 nodes, RS(10,4), 64 MiB chunks in 1 MiB slices, 200
chunks lost on node 0, T_phase 20 s; links of 1 Gb/s (the paper's Exp#13 low end), because
the simulator moves bytes at the links' rate and at 10 Gb/s the whole repair would fit in one
phase and one foreground window, where the paper's prototype took minutes. Foreground: every
node's uplink and downlink carry users' traffic that holds for 15-s windows and moves between
them by 11% of the link on average (1.1 of 10 Gb/s, the fluctuation the paper measured, §2.1;
uniform steps of up to 22%), starting uniform below and kept under --fg-top of the link (0.5:
with it ECPipe's throughput drops 1.7x from no foreground, the paper's 199.9 -> 110.6 MB/s is
1.8x). Foreground takes its rate first; repair gets what it leaves. The seeds vary the series
and the placement. ChameleonEC plans each phase from the mean
foreground over the phase before it (the monitoring lag); RepairBoost plans once, from the
traffic at the start; random sources ignore it. Baselines run one repair per destination at a
time (`--max-active 1`), as the simulator's default.

With --exp12 (the paper's Exp#12): every disk reads and writes at 1/2.5 or 1/5 of the link
(the paper's 500 and 250 MB/s against 10 Gb/s), with users' I/O moving on it as on the links;
ChameleonEC, ChameleonEC-IO (planned with disk bandwidth where it is scarcer) and random
sources.

With --exp11 (the paper's Exp#11): the cluster benchmark's scenario (16 nodes, RS(6,3),
200 Mbit/s, 24 lost 8 MiB chunks, 1.5-s phases) with readers taking 8/9 of the uplink of the
node in most lost stripes from 0, 1/4 or 1/2 of the first phase: SAR against ETRP alone,
and ChameleonEC against random CR, PPR and ECPipe; the seeds vary the placement.

With --requests (the paper's Exp#1 and #2 foreground figures): on the same moving foreground,
4 closed-loop YCSB-A clients (50% reads, 50% updates of 512 KiB values, zipfian 0.99 over 1000
records on the live nodes, each client on a 1 Gb/s link of its own) run 20,000 requests each
from 5 s before the repair: repair throughput, the requests' P99 during the repair and over
the whole trace, and the interference degree T*/T - 1, for ChameleonEC against CR, PPR and
ECPipe with random sources (--baseline-active repairs at once per destination, default 1)
and with RepairBoost, and ChameleonEC with each phase's repair paced at the residual
bandwidth it planned with (--pace-repair) and with the baselines' repairs per destination. Requests share links with repair flow by flow
(weighted max-min), where the series take their rate first.

Usage: python3 scripts/repro_chameleon_sim.py [--bin path/to/kintsugi] [--seeds 3] [--exp11|--exp12|--requests] [--json]
"""
import argparse, json, os, random, statistics, subprocess, sys, tempfile

NODES = 20
WINDOW = 15.0
HORIZON = 7200.0


def series(rng, link, top):
    """A piecewise-constant foreground rate, bytes/s, one point per 15-s window: 1.1 Gb/s
    of 10 Gb/s is 11% of the link per window on average."""
    step = 0.11 * link
    pts, rate, t = [], rng.uniform(0, top * link), 0.0
    while t < HORIZON:
        pts.append([t, rate])
        rate = min(max(rate + rng.uniform(-2 * step, 2 * step), 0.0), top * link)
        t += WINDOW
    return pts


def network(seed, foreground, link, top):
    rng = random.Random(seed)
    node = {"up": link, "down": link, "disk_read": None, "disk_write": None, "seek": 0.0}
    fg = []
    if foreground:
        for n in range(NODES):
            for d in ("up", "down"):
                fg.append({"node": n, "direction": d, "points": series(rng, link, top)})
    return {"nodes": [node] * NODES, "pair_caps": [], "foreground": fg}


def with_disks(net, seed, disk, top):
    """Every node's disk reads and writes at `disk` bytes/s, with users' I/O moving on them as
    on the links (ChameleonEC Exp#12: storage the scarce resource)."""
    rng = random.Random(seed * 7919)
    net["nodes"] = [dict(n, disk_read=disk, disk_write=disk) for n in net["nodes"]]
    for n in range(NODES):
        for d in ("read", "write"):
            net["foreground"].append({"node": n, "direction": d, "points": series(rng, disk, top)})
    return net


def header(*columns):
    """A markdown table's first two lines."""
    print("| " + " | ".join(columns) + " |")
    print("|" + "---|" * len(columns))


def dumped(a, rows):
    """With --json, prints the raw rows and says so."""
    if a.json:
        print(json.dumps(rows, indent=1))
    return a.json


def exp12(a):
    """ChameleonEC and ChameleonEC-IO against random sources as storage tightens."""
    link = a.link_gbit * 1e9 / 8
    rows = []
    with tempfile.TemporaryDirectory() as d:
        for ratio in (2.5, 5.0):
            for seed in range(1, a.seeds + 1):
                path = os.path.join(d, f"net-{ratio}-{seed}.json")
                with open(path, "w") as f:
                    json.dump(with_disks(network(seed, True, link, a.fg_top), seed, link / ratio, a.fg_top), f)
                row = {"ratio": ratio, "seed": seed}
                for sched in ("chameleon", "chameleon-io"):
                    row[sched] = sim(a, path, sched, "ecpipe", seed)
                for method in ("cr", "ppr", "ecpipe"):
                    row[f"random+{method}"] = sim(a, path, "random", method, seed)
                rows.append(row)
                print(f"storage 1/{ratio} of the link, seed {seed}: done", file=sys.stderr)
    if dumped(a, rows):
        return
    med = statistics.median
    header('network : storage', 'random CR / PPR / ECPipe MB/s', 'ChameleonEC MB/s', 'its gain over the three', 'ChameleonEC-IO MB/s', 'IO over ChameleonEC: median (range)')
    for ratio in (2.5, 5.0):
        rs = [r for r in rows if r["ratio"] == ratio]
        base = [med(r[f"random+{m}"] for r in rs) for m in ("cr", "ppr", "ecpipe")]
        gains = [med(r["chameleon"] / r[f"random+{m}"] - 1 for r in rs) for m in ("cr", "ppr", "ecpipe")]
        io = [r["chameleon-io"] / r["chameleon"] - 1 for r in rs]
        print(f"| {ratio} | {' / '.join(f'{b:.1f}' for b in base)} | {med(r['chameleon'] for r in rs):.1f} | "
              f"{' / '.join(f'{g:+.1%}' for g in gains)} | {med(r['chameleon-io'] for r in rs):.1f} | "
              f"{med(io):+.1%} ({min(io):+.1%} to {max(io):+.1%}) |")


def exp11(a):
    """SAR against ETRP alone, and ChameleonEC against CR, PPR and ECPipe with random sources,
    with the paper's straggler (readers taking 8/9 of one participant's uplink) from 0, 1/4
    or 1/2 of the first phase; the cluster benchmark's scenario (`kintsugi bench sar`)."""
    phase = 1.5
    base = [a.bin, "sim", "full-node", "--nodes", "16", "--code", "rs:6,3", "--chunks", "24", "--chunk", "8MiB",
            "--link", "200mbit", "--json"]
    rows = []
    for seed in range(1, a.seeds + 1):
        for at in (None, 0.0, 0.25, 0.5):
            extra = [] if at is None else ["--straggler-at", str(at * phase)]
            row = {"seed": seed, "at": at}
            for name, args in [("sar", ["--scheduler", "chameleon", "--phase-seconds", str(phase)]),
                               ("etrp", ["--scheduler", "chameleon", "--phase-seconds", str(phase), "--no-sar"]),
                               ("cr", ["--scheduler", "random", "--method", "cr"]),
                               ("ppr", ["--scheduler", "random", "--method", "ppr"]),
                               ("ecpipe", ["--scheduler", "random", "--method", "ecpipe"])]:
                out = subprocess.run(base + ["--seed", str(seed)] + args + extra, check=True, capture_output=True, text=True).stdout
                row[name] = json.loads(out)["repair_seconds"]
            rows.append(row)
        print(f"seed {seed}: done", file=sys.stderr)
    if dumped(a, rows):
        return
    med = statistics.median
    header('straggler at', 'ETRP s', 'ETRP+SAR s', 'SAR over ETRP: median (range)', 'random CR / PPR / ECPipe s', 'ChameleonEC (SAR) over CR / PPR / ECPipe')
    for at in (None, 0.0, 0.25, 0.5):
        rs = [r for r in rows if r["at"] == at]
        g = [r["etrp"] / r["sar"] - 1 for r in rs]
        over = [med(r[m] / r["sar"] - 1 for r in rs) for m in ("cr", "ppr", "ecpipe")]
        print(f"| {'none' if at is None else f'{at:g} of a phase'} | {med(r['etrp'] for r in rs):.2f} | {med(r['sar'] for r in rs):.2f} | "
              f"{med(g):+.1%} ({min(g):+.1%} to {max(g):+.1%}) | {' / '.join(f'{med(r[m] for r in rs):.2f}' for m in ('cr', 'ppr', 'ecpipe'))} | "
              f"{' / '.join(f'{x:+.1%}' for x in over)} |")


def requests(a):
    """Foreground P99 and interference degree from simulated YCSB-A requests (Exp#1, #2)."""
    link = a.link_gbit * 1e9 / 8
    rows = []
    runs = [("chameleon", "ecpipe"), ("chameleon-paced", "ecpipe"), ("chameleon-capped", "ecpipe")] + \
        [(s, m) for s in ("random", "repairboost") for m in ("cr", "ppr", "ecpipe")]
    load = ["--fg-clients", "4", "--fg-requests", "20000", "--fg-start", "5"]
    with tempfile.TemporaryDirectory() as d:
        for seed in range(1, a.seeds + 1):
            path = os.path.join(d, f"net-{seed}.json")
            with open(path, "w") as f:
                json.dump(network(seed, True, link, a.fg_top), f)
            row = {"seed": seed}
            for sched, method in runs:
                extra = load + (["--pace-repair"] if sched == "chameleon-paced" else [])
                if sched in ("random", "chameleon-capped"):
                    extra += ["--max-active", str(a.baseline_active)]
                row[f"{sched}+{method}"] = sim(a, path, sched.split("-")[0], method, seed, extra=extra, whole=True)
            rows.append(row)
            print(f"seed {seed}: done", file=sys.stderr)
    if dumped(a, rows):
        return
    med = statistics.median
    paper = {"random+cr": ("+23.5%", "-18.2%", "-45.9%"), "random+ppr": ("+31.4%", "-9.1%", "-50.2%"),
             "random+ecpipe": ("+65.6%", "-17.6%", "-56.7%"), "repairboost+cr": ("+34.8%", "-", "-"),
             "repairboost+ppr": ("+16.7%", "-", "-"), "repairboost+ecpipe": ("+46.2%", "-", "-")}
    header('run', 'repair MB/s', 'P99 ms during repair / whole trace', 'interference', "ChameleonEC's change: throughput, P99 (whole trace), interference", 'paper')
    for k in [f"{s}+{m}" for s, m in runs]:
        rs = [r[k] for r in rows]
        c = [r["chameleon+ecpipe"] for r in rows]
        line = (f"| {k} | {med(x['throughput_mb_s'] for x in rs):.1f} | "
                f"{med(x['foreground']['during_repair']['p99_ms'] for x in rs):.1f} / {med(x['foreground']['whole_trace']['p99_ms'] for x in rs):.1f} | "
                f"{med(x['foreground']['interference'] for x in rs):.3f} | ")
        if k.startswith("chameleon"):
            print(line + "- | - |")
            continue
        print(line + f"{change(rs, c)} | {' / '.join(paper[k])} |")
    capped = [r["chameleon-capped+ecpipe"] for r in rows]
    print(f"\nChameleonEC at the baselines' {a.baseline_active} repair(s) per destination, against them: throughput, P99 (whole trace), interference")
    for m in ("cr", "ppr", "ecpipe"):
        print(f"- random+{m}: {change([r[f'random+{m}'] for r in rows], capped)}")


def change(base, new):
    """Medians of the new run's relative change over the base: throughput, whole-trace P99, interference."""
    med = statistics.median
    tp = med(y["throughput_mb_s"] / x["throughput_mb_s"] - 1 for x, y in zip(base, new))
    p99 = med(y["foreground"]["whole_trace"]["p99_ms"] / x["foreground"]["whole_trace"]["p99_ms"] - 1 for x, y in zip(base, new))
    intf = med(y["foreground"]["interference"] / x["foreground"]["interference"] - 1 for x, y in zip(base, new))
    return f"{tp:+.1%}, {p99:+.1%}, {intf:+.1%}"


def sim(a, path, scheduler, method, seed, phase=None, extra=(), whole=False):
    cmd = [a.bin, "sim", "full-node", "--nodes", str(NODES), "--code", "rs:10,4", "--chunks", "200", "--chunk", "64MiB",
           "--slice", "1MiB", "--network", path, "--scheduler", scheduler, "--method", method, "--seed", str(seed),
           "--phase-seconds", str(phase or a.phase), "--json"] + (["--no-sar"] if a.no_sar else []) + list(extra)
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out) if whole else json.loads(out)["throughput_mb_s"]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default=os.path.join(os.path.dirname(__file__), "..", "target", "release", "kintsugi"))
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--link-gbit", type=float, default=1.0, help="every node's link, Gb/s (default 1)")
    ap.add_argument("--fg-top", type=float, default=0.5,
                    help="foreground never above this share of a link; it starts uniform below it (default 0.5)")
    ap.add_argument("--phase", type=float, default=20.0, help="ChameleonEC's phase, seconds (default 20, the paper's)")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--exp12", action="store_true",
                    help="Exp#12 instead: disks at 1/2.5 and 1/5 of the link with moving users' I/O; ChameleonEC-IO")
    ap.add_argument("--no-sar", action="store_true", help="ChameleonEC without straggler-aware re-scheduling (ETRP alone)")
    ap.add_argument("--exp11", action="store_true",
                    help="Exp#11 instead: SAR vs ETRP and vs random CR/PPR/ECPipe with a straggler (16 nodes, RS(6,3))")
    ap.add_argument("--baseline-active", default="1",
                    help="with --requests: repairs at once per destination for random sources (1, 3 as Ceph's osd_recovery_max_active, or all)")
    ap.add_argument("--requests", action="store_true",
                    help="Exp#1/#2's foreground figures instead: YCSB-A requests beside the repair, their P99 and T*/T - 1")
    a = ap.parse_args()
    if a.requests:
        return requests(a)
    if a.exp12:
        return exp12(a)
    if a.exp11:
        return exp11(a)
    rows = []
    with tempfile.TemporaryDirectory() as d:
        for foreground in (True, False):
            for seed in range(1, a.seeds + 1):
                path = os.path.join(d, f"net-{foreground}-{seed}.json")
                with open(path, "w") as f:
                    json.dump(network(seed, foreground, a.link_gbit * 1e9 / 8, a.fg_top), f)
                row = {"foreground": foreground, "seed": seed, "chameleon": sim(a, path, "chameleon", "ecpipe", seed),
                       # The ablation: one plan at the start, no phases (so no re-planning).
                       "chameleon_one_plan": sim(a, path, "chameleon", "ecpipe", seed, phase=1e6)}
                for sched in ("random", "repairboost"):
                    for method in ("cr", "ppr", "ecpipe"):
                        row[f"{sched}+{method}"] = sim(a, path, sched, method, seed)
                rows.append(row)
                print(f"seed {seed}, foreground {foreground}: done", file=sys.stderr)
    if dumped(a, rows):
        return
    paper = {
        (True, "random"): {"cr": "+23.5%", "ppr": "+31.4%", "ecpipe": "+65.6%"},
        (True, "repairboost"): {"cr": "+34.8%", "ppr": "+16.7%", "ecpipe": "+46.2%"},
        (False, "random"): {"cr": "+25.0-41.3%", "ppr": "(all three)", "ecpipe": ""},
    }
    header('foreground', 'baseline', 'baseline MB/s (median)', 'ChameleonEC MB/s', 'ChameleonEC over it: median (range)', 'paper')
    for foreground in (True, False):
        rs = [r for r in rows if r["foreground"] == foreground]
        for sched, method in [(s, m) for s in ("random", "repairboost") for m in ("cr", "ppr", "ecpipe")] + [("chameleon", "one plan")]:
            k = f"{sched}+{method}" if sched != "chameleon" else "chameleon_one_plan"
            gains = [r["chameleon"] / r[k] - 1 for r in rs]
            print(f"| {'YCSB-like' if foreground else 'none'} | {k} | {statistics.median(r[k] for r in rs):.1f} | "
                  f"{statistics.median(r['chameleon'] for r in rs):.1f} | {statistics.median(gains):+.1%} "
                  f"({min(gains):+.1%} to {max(gains):+.1%}) | {paper.get((foreground, sched), {}).get(method, '-')} |")


if __name__ == "__main__":
    main()
