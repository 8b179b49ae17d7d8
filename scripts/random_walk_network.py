#!/usr/bin/env python3
"""A network file for `kintsugi sim full-node --network`: N nodes of 1 Gb/s links, each link's
foreground a random walk (10-60% at the start, steps of up to 25% every 15 s, within 0-90%)
for 2,000 s. Used to time `auto`'s planning at 500 nodes (REPRODUCTION.md, issue 72).

usage: random_walk_network.py NODES SEED OUT.json
"""
import json
import random
import sys

nodes, seed, out = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
random.seed(seed)
LINK = 125e6
spec = {"up": LINK, "down": LINK, "disk_read": None, "disk_write": None, "seek": 0}
fg = []
for n in range(nodes):
    for d in ("up", "down"):
        share, points = random.uniform(0.1, 0.6), []
        for t in range(0, 2000, 15):
            points.append([t, share * LINK])
            share = min(0.9, max(0.0, share + random.uniform(-0.25, 0.25)))
        fg.append({"node": n, "direction": d, "points": points})
with open(out, "w") as f:
    json.dump({"nodes": [spec] * nodes, "foreground": fg}, f)
