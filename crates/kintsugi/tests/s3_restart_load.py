#!/usr/bin/env python3
"""Steady S3 load across restarts of the store, as the restart tests drive it.

Threads PUT, GET, LIST and multipart uploads with boto3 in standard retry mode (as
applications run it), spread over the gateways of S3_ENDPOINT (comma-separated), until
STOP_FILE exists, then read back every object a PUT was acknowledged for. Each request is
counted under the phase named in PHASE_FILE when it began (the test writes "steady",
"graceful", "killed", ...); a request that ran into the next phase is counted under
"FIRST>NEXT" (one in flight at a kill -9 is "...>killed"). Progress (acknowledged PUTs) goes to PROGRESS_FILE; the summary,
as JSON, to stdout.

    S3_ENDPOINT=http://... AWS_ACCESS_KEY_ID=... AWS_SECRET_ACCESS_KEY=... \
        s3_restart_load.py BUCKET PHASE_FILE PROGRESS_FILE STOP_FILE
"""

import hashlib
import json
import os
import random
import sys
import threading
import time

import boto3
import botocore
from botocore.config import Config

THREADS = int(os.environ.get("LOAD_THREADS", "4"))
ENDPOINTS = os.environ["S3_ENDPOINT"].split(",")
# Parts of multipart uploads: the gateway is started with a small minimum part size.
PART = int(os.environ.get("LOAD_PART", str(5 << 20)))


def client(t=0):
    cfg = Config(s3={"addressing_style": "path"}, retries={"mode": "standard", "max_attempts": 10},
                 signature_version="s3v4", connect_timeout=5, read_timeout=60)
    return boto3.client("s3", endpoint_url=ENDPOINTS[t % len(ENDPOINTS)], region_name="us-east-1", config=cfg)


def body(key, size):
    """The bytes of `key`: derived from its name, so a read can be checked without a copy."""
    out = bytearray()
    block = hashlib.sha256(key.encode()).digest()
    while len(out) < size:
        block = hashlib.sha256(block).digest()
        out += block * 128
    return bytes(out[:size])


def main():
    bucket, phase_file, progress_file, stop_file = sys.argv[1:5]
    s3 = client(0)
    try:
        s3.create_bucket(Bucket=bucket)
    except botocore.exceptions.ClientError as e:
        if e.response["Error"]["Code"] != "BucketAlreadyOwnedByYou":
            raise
    lock = threading.Lock()
    acked = {}  # key -> size
    counts = {}  # (phase, op, outcome) -> n
    latencies = {}  # phase -> [seconds]
    errors = []

    def phase():
        try:
            with open(phase_file) as f:
                return f.read().strip() or "steady"
        except FileNotFoundError:
            return "steady"

    def count(ph, op, outcome, seconds=None, err=None):
        ended = phase()
        if ended != ph:
            ph = f"{ph}>{ended}"
        with lock:
            counts[(ph, op, outcome)] = counts.get((ph, op, outcome), 0) + 1
            if seconds is not None:
                latencies.setdefault(ph, []).append(seconds)
            if err is not None and len(errors) < 20:
                errors.append(f"{ph} {op}: {err}")

    def worker(t):
        c = client(t)
        rng = random.Random(t)
        n = 0
        while not os.path.exists(stop_file):
            ph = phase()
            choice = rng.random()
            started = time.monotonic()
            if choice < 0.5 or not acked:
                key = f"t{t}/o{n}"
                n += 1
                size = rng.choice([1, 1000, 64 << 10, 300_001, 1 << 20, (3 << 20) + 5])
                try:
                    c.put_object(Bucket=bucket, Key=key, Body=body(key, size))
                    with lock:
                        acked[key] = size
                    count(ph, "put", "ok", time.monotonic() - started)
                except Exception as e:  # noqa: BLE001 - every failure is counted
                    count(ph, "put", "failed", err=repr(e))
            elif choice < 0.6:
                key = f"t{t}/m{n}"
                n += 1
                whole = body(key, 2 * PART + 1001)
                try:
                    up = c.create_multipart_upload(Bucket=bucket, Key=key)["UploadId"]
                    parts = []
                    for i, at in enumerate(range(0, len(whole), PART)):
                        r = c.upload_part(Bucket=bucket, Key=key, UploadId=up, PartNumber=i + 1, Body=whole[at:at + PART])
                        parts.append({"PartNumber": i + 1, "ETag": r["ETag"]})
                    c.complete_multipart_upload(Bucket=bucket, Key=key, UploadId=up, MultipartUpload={"Parts": parts})
                    with lock:
                        acked[key] = len(whole)
                    count(ph, "multipart", "ok", time.monotonic() - started)
                except Exception as e:  # noqa: BLE001
                    count(ph, "multipart", "failed", err=repr(e))
            elif choice < 0.9:
                with lock:
                    key, size = rng.choice(list(acked.items()))
                try:
                    got = c.get_object(Bucket=bucket, Key=key)["Body"].read()
                    count(ph, "get", "ok" if got == body(key, size) else "wrong", time.monotonic() - started)
                except Exception as e:  # noqa: BLE001
                    count(ph, "get", "failed", err=repr(e))
            else:
                try:
                    c.list_objects_v2(Bucket=bucket, Prefix=f"t{t}/", MaxKeys=50)
                    count(ph, "list", "ok", time.monotonic() - started)
                except Exception as e:  # noqa: BLE001
                    count(ph, "list", "failed", err=repr(e))

    def progress():
        while not os.path.exists(stop_file):
            with lock:
                n = len(acked)
            tmp = progress_file + ".tmp"
            with open(tmp, "w") as f:
                f.write(str(n))
            os.replace(tmp, progress_file)
            time.sleep(0.1)

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(THREADS)]
    threads.append(threading.Thread(target=progress))
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    # Every acknowledged object, read back.
    verified = wrong = unreadable = 0
    for key, size in sorted(acked.items()):
        try:
            got = s3.get_object(Bucket=bucket, Key=key)["Body"].read()
        except Exception as e:  # noqa: BLE001
            unreadable += 1
            errors.append(f"verify {key}: {e!r}")
            continue
        if got == body(key, size):
            verified += 1
        else:
            wrong += 1
    p99 = {}
    for ph, xs in latencies.items():
        xs.sort()
        p99[ph] = xs[min(len(xs) - 1, int(0.99 * len(xs)))]
    print(json.dumps({
        "acknowledged": len(acked),
        "verified": verified,
        "wrong": wrong,
        "unreadable": unreadable,
        "counts": [{"phase": p, "op": o, "outcome": r, "n": n} for (p, o, r), n in sorted(counts.items())],
        "p99_seconds": p99,
        "errors": errors,
    }))


if __name__ == "__main__":
    main()
