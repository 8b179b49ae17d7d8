#!/usr/bin/env python3
"""HTTPS clients against a kintsugi gateway: boto3 with verify=CA and the aws cli with
--ca-bundle, plain HTTP to the TLS port, and a client that does not trust the certificate.

    s3_tls.py clients CA     every check below; exits non-zero on the first that fails
    s3_tls.py trusts CA      exit 0 if a handshake verifies against CA, 1 if it does not
    s3_tls.py reads CA       the key reads tls-bucket and cannot write it (a read-only key)

S3_ENDPOINT (https://HOST:PORT), AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY name the gateway.
"""

import hashlib
import os
import socket
import ssl
import subprocess
import sys
import tempfile
import urllib.parse

import boto3
import botocore
from botocore.config import Config

ENDPOINT = os.environ["S3_ENDPOINT"]
HOST, PORT = urllib.parse.urlparse(ENDPOINT).hostname, urllib.parse.urlparse(ENDPOINT).port


def check(cond, what):
    if not cond:
        raise AssertionError(what)
    print("ok:", what, flush=True)


def s3(verify):
    cfg = Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1}, connect_timeout=10, read_timeout=60)
    return boto3.client("s3", endpoint_url=ENDPOINT, region_name="us-east-1", verify=verify, config=cfg)


def trusts(ca):
    ctx = ssl.create_default_context(cafile=ca)
    try:
        with socket.create_connection((HOST, PORT), timeout=10) as raw:
            with ctx.wrap_socket(raw, server_hostname=HOST):
                return True
    except ssl.SSLCertVerificationError:
        return False


def clients(ca):
    c = s3(ca)
    c.create_bucket(Bucket="tls-bucket")
    body = hashlib.sha256(b"tls").digest() * (1 << 15) + b"odd"  # 1 MiB and 3 bytes
    c.put_object(Bucket="tls-bucket", Key="one", Body=body)
    check(c.get_object(Bucket="tls-bucket", Key="one")["Body"].read() == body, "boto3 over HTTPS (verify=CA): byte-exact")
    r = c.get_object(Bucket="tls-bucket", Key="one", Range="bytes=1000-200000")
    check(r["Body"].read() == body[1000:200001], "a range read over HTTPS")

    # Parts, sent aws-chunked with a trailing checksum as boto3 does over HTTPS.
    up = c.create_multipart_upload(Bucket="tls-bucket", Key="parts")["UploadId"]
    whole = body * 5 + b"tail"
    cut = 5 << 20
    parts = [{"PartNumber": n, "ETag": c.upload_part(Bucket="tls-bucket", Key="parts", UploadId=up, PartNumber=n, Body=p)["ETag"]}
             for n, p in ((1, whole[:cut]), (2, whole[cut:]))]
    c.complete_multipart_upload(Bucket="tls-bucket", Key="parts", UploadId=up, MultipartUpload={"Parts": parts})
    check(c.get_object(Bucket="tls-bucket", Key="parts")["Body"].read() == whole, "a multipart upload over HTTPS: byte-exact")

    env = dict(os.environ, AWS_DEFAULT_REGION="us-east-1")
    env.pop("AWS_PROFILE", None)
    with tempfile.TemporaryDirectory() as d:
        src = os.path.join(d, "src")
        with open(src, "wb") as f:
            f.write(body)
        aws = ["aws", "--endpoint-url", ENDPOINT, "--ca-bundle", ca]
        subprocess.run(aws + ["s3", "cp", src, "s3://tls-bucket/cli"], check=True, env=env, capture_output=True)
        out = subprocess.run(aws + ["s3", "ls", "s3://tls-bucket/"], check=True, env=env, capture_output=True, text=True).stdout
        check("cli" in out and "one" in out, "the aws cli with --ca-bundle lists over HTTPS")
        dst = os.path.join(d, "dst")
        subprocess.run(aws + ["s3", "cp", "s3://tls-bucket/cli", dst], check=True, env=env, capture_output=True)
        with open(dst, "rb") as f:
            check(f.read() == body, "the aws cli's copy back is byte-exact")

    # A client that does not trust the certificate refuses it.
    try:
        s3(True).list_buckets()
        raise AssertionError("a client without the CA was served")
    except botocore.exceptions.SSLError:
        check(True, "a client without the CA refuses the certificate")

    # Plain HTTP to the TLS port: a clear 400, then the connection closes.
    with socket.create_connection((HOST, PORT), timeout=10) as s:
        s.sendall(f"GET / HTTP/1.1\r\nHost: {HOST}\r\n\r\n".encode())
        got = b""
        while True:
            b = s.recv(4096)
            if not b:
                break
            got += b
    check(got.startswith(b"HTTP/1.1 400") and b"speaks HTTPS" in got, f"plain HTTP to the TLS port gets a 400: {got[:80]!r}")


def reads(ca):
    c = s3(ca)
    check(len(c.get_object(Bucket="tls-bucket", Key="one")["Body"].read()) == (1 << 20) + 3, "a read key reads")
    try:
        c.put_object(Bucket="tls-bucket", Key="nope", Body=b"x")
        raise AssertionError("a read key wrote")
    except botocore.exceptions.ClientError as e:
        check(e.response["Error"]["Code"] == "AccessDenied", "a read key cannot write")


if __name__ == "__main__":
    what, ca = sys.argv[1], sys.argv[2]
    if what == "clients":
        clients(ca)
    elif what == "reads":
        reads(ca)
    elif what == "trusts":
        sys.exit(0 if trusts(ca) else 1)
    else:
        sys.exit(f"unknown: {what}")
