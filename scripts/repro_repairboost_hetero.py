#!/usr/bin/env python3
"""RepairBoost on heterogeneous links in the simulator (its §3.4 and Exp. 6, Fig. 14).

Networks (16 nodes, RS(6,3), 100 lost 64 MiB chunks, node 0 fails):
  racks-0.1  4 racks of 4 nodes, 1 Gb/s NICs, 0.1 Gb/s between any two nodes of different racks
  racks-0.05 the same with 0.05 Gb/s between racks (the paper's 14a and 14b, with the
             inter-cluster throttle read as a cap per pair of nodes)
  nics       no caps; NICs of 1, 0.5, 0.25 and 0.1 Gb/s, four nodes each
Schedulers: random (RAN), repairboost-rtb (balance only), repairboost (balance + timeslots),
repairboost-poll (balance + the polling order). Prints seconds per cell.

Usage: python3 scripts/repro_repairboost_hetero.py [path/to/kintsugi]
"""
import json, os, subprocess, sys, tempfile

BIN = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "target", "release", "kintsugi")
SCHEDULERS = ["random", "repairboost-rtb", "repairboost", "repairboost-poll"]


def node(rate):
    return {"up": rate, "down": rate, "disk_read": None, "disk_write": None, "seek": 0.0}


def racks(inter_bits):
    caps = [[a, b, inter_bits / 8] for a in range(16) for b in range(16) if a != b and a // 4 != b // 4]
    return {"nodes": [node(125e6)] * 16, "pair_caps": caps}


def nics():
    return {"nodes": [node([1e9, 0.5e9, 0.25e9, 0.1e9][i // 4] / 8) for i in range(16)], "pair_caps": []}


def main():
    nets = {"racks-0.1": racks(0.1e9), "racks-0.05": racks(0.05e9), "nics": nics()}
    with tempfile.TemporaryDirectory() as d:
        print("| network | method | " + " | ".join(SCHEDULERS) + " | balance only vs RAN |")
        print("|---|---|" + "---|" * (len(SCHEDULERS) + 1))
        for name, net in nets.items():
            path = os.path.join(d, name + ".json")
            with open(path, "w") as f:
                json.dump(net, f)
            for method in ["cr", "ppr", "ecpipe"]:
                secs = []
                for s in SCHEDULERS:
                    out = subprocess.run([BIN, "sim", "full-node", "--nodes", "16", "--code", "rs:6,3", "--chunks", "100",
                                          "--network", path, "--scheduler", s, "--method", method, "--json"],
                                         check=True, capture_output=True, text=True).stdout
                    secs.append(json.loads(out)["repair_seconds"])
                gain = secs[0] / secs[1] - 1
                print(f"| {name} | {method} | " + " | ".join(f"{x:.1f}" for x in secs) + f" | {gain:+.0%} |")


if __name__ == "__main__":
    main()
