# ECPipe full-node recovery in the simulator: RS(10,4) on 19 storage nodes (one fails, 64
# lost chunks), 1-16 extra requestor nodes; CR, PPR and ECPipe with smallest-id helpers vs
# ECPipe with greedy LRU helpers. Run from the repository root after `cargo build --release`.
import json, subprocess, statistics
import os
K=os.environ.get("KINTSUGI", "target/release/kintsugi")
def run(args):
    return json.loads(subprocess.run([K]+args+["--json"],capture_output=True,text=True,check=True).stdout)
print("requestors,method,scheduler,median_rate_mb_s")
for r in [1,2,4,8,16]:
    res={}
    for m,s in [("cr","index"),("ppr","index"),("ecpipe","index"),("ecpipe","greedy")]:
        rates=[run(["sim","full-node","--model","slice","--nodes","19","--chunks","64","--code","rs:10,4","--method",m,"--scheduler",s,"--requestors",str(r),"--max-active","all","--chunk","64MiB","--slice","1MiB","--link","1gbit","--seed",str(seed)])["throughput_mb_s"] for seed in (1,2,3)]
        res[(m,s)]=statistics.median(rates)
        print(f"{r},{m},{s},{res[(m,s)]:.1f}", flush=True)
    print(f"# r={r}: ecpipe/cr {res[('ecpipe','index')]/res[('cr','index')]:.2f}x, greedy gain {(res[('ecpipe','greedy')]/res[('ecpipe','index')]-1)*100:.1f}%")
