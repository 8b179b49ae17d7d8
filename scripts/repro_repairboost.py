# RepairBoost vs RAN and the RTB/TS ablations in the simulator: 16 nodes, 100 lost 64 MiB
# chunks, 1 MiB packets, 1 Gb/s, seeds 1-5. Run from the repository root after
# `cargo build --release`; prints CSV (median repair seconds and gain over RAN).
import json, subprocess, statistics, sys
import os
K=os.environ.get("KINTSUGI", "target/release/kintsugi")
def run(args):
    out=subprocess.run([K]+args+["--json"],capture_output=True,text=True,check=True).stdout
    return json.loads(out)
rows=[]
print("code,method,scheduler,median_s,min_s,max_s,gain_vs_random_pct")
for code in ["rs:6,3","lrc:6,2,2"]:
    for m in ["cr","ppr","ecpipe"]:
        base=None
        for s in ["random","repairboost","repairboost-rtb","repairboost-ts"]:
            t=[run(["sim","full-node","--model","slice","--nodes","16","--chunks","100","--code",code,"--method",m,"--scheduler",s,"--max-active","all","--chunk","64MiB","--slice","1MiB","--link","1gbit","--seed",str(seed)])["repair_seconds"] for seed in (1,2,3,4,5)]
            med=statistics.median(t)
            if s=="random": base=med
            print(f"{code},{m},{s},{med:.2f},{min(t):.2f},{max(t):.2f},{(base/med-1)*100:.1f}", flush=True)
