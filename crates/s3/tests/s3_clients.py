#!/usr/bin/env python3
"""Real S3 clients (boto3, the aws cli) against a kintsugi S3 gateway.

Usage: s3_clients.py suite | degraded-put BUCKET | degraded-check BUCKET
Environment: S3_ENDPOINT, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY.
Every check compares with an independent answer (the bytes sent, hashlib's MD5, S3's
documented error codes); the first failure raises and the exit status is non-zero.
"""
import base64
import concurrent.futures
import hashlib
import json
import os
import select
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from datetime import datetime, timedelta, timezone

import boto3
import botocore
from botocore.auth import S3SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.config import Config

ENDPOINT = os.environ["S3_ENDPOINT"]
AK = os.environ["AWS_ACCESS_KEY_ID"]
SK = os.environ["AWS_SECRET_ACCESS_KEY"]
MIB = 1 << 20


def client(secret=SK, access=AK):
    cfg = Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1}, signature_version="s3v4",
                 read_timeout=300, connect_timeout=10)
    return boto3.client("s3", endpoint_url=ENDPOINT, aws_access_key_id=access, aws_secret_access_key=secret,
                        region_name="us-east-1", config=cfg)


S3 = client()


def data(n, seed):
    """Deterministic bytes: the same seed gives the same object in another process."""
    out = bytearray()
    block = hashlib.sha256(str(seed).encode()).digest()
    while len(out) < n:
        block = hashlib.sha256(block).digest()
        out += block * 64
    return bytes(out[:n])


def error_code(fn, *args, **kwargs):
    try:
        fn(*args, **kwargs)
    except botocore.exceptions.ClientError as e:
        return e.response["Error"]["Code"], e.response["ResponseMetadata"]["HTTPStatusCode"]
    raise AssertionError(f"{fn.__name__} succeeded, an error was expected")


def check(cond, what):
    if not cond:
        raise AssertionError(what)
    print("ok:", what, flush=True)


def get(bucket, key, **kw):
    return S3.get_object(Bucket=bucket, Key=key, **kw)["Body"].read()


def round_trips(b):
    # 1 GiB adds some 16 s on two cores; S3_SMALL=1 leaves it out for a quick run.
    sizes = [0, 1, 5 * MIB + 1, 100 * MIB]
    if not os.environ.get("S3_SMALL"):
        sizes.append(1 << 30)
    for n in sizes:
        body = data(n, n)
        r = S3.put_object(Bucket=b, Key=f"rt/{n}", Body=body)
        check(r["ETag"].strip('"') == hashlib.md5(body).hexdigest(), f"PUT {n} B: ETag is the body's MD5")
        check(get(b, f"rt/{n}") == body, f"GET {n} B: byte-exact")
        h = S3.head_object(Bucket=b, Key=f"rt/{n}")
        check(h["ContentLength"] == n, f"HEAD {n} B: Content-Length")


def multipart(b, parts, key):
    up = S3.create_multipart_upload(Bucket=b, Key=key, ContentType="application/x-test", Metadata={"m": "1"})
    uid = up["UploadId"]

    def one(i_body):
        i, body = i_body
        r = S3.upload_part(Bucket=b, Key=key, UploadId=uid, PartNumber=i, Body=body)
        return {"PartNumber": i, "ETag": r["ETag"]}

    with concurrent.futures.ThreadPoolExecutor(8) as ex:
        done = list(ex.map(one, list(enumerate(parts, 1))))
    listed = []
    marker = 0
    while True:
        r = S3.list_parts(Bucket=b, Key=key, UploadId=uid, PartNumberMarker=marker, MaxParts=400)
        listed += r.get("Parts", [])
        if not r["IsTruncated"]:
            break
        marker = r["NextPartNumberMarker"]
    check([p["PartNumber"] for p in listed] == list(range(1, len(parts) + 1)), f"{len(parts)} parts listed in order, in pages")
    r = S3.complete_multipart_upload(Bucket=b, Key=key, UploadId=uid, MultipartUpload={"Parts": done})
    md5s = b"".join(hashlib.md5(p).digest() for p in parts)
    want = f"{hashlib.md5(md5s).hexdigest()}-{len(parts)}"
    check(r["ETag"].strip('"') == want, f"multipart of {len(parts)} parts: ETag is MD5 of the parts' MD5s -N")
    whole = b"".join(parts)
    check(get(b, key) == whole, f"multipart of {len(parts)} parts: byte-exact")
    h = S3.head_object(Bucket=b, Key=key)
    check(h["ContentType"] == "application/x-test" and h["Metadata"] == {"m": "1"}, "multipart keeps its type and metadata")
    check(error_code(S3.list_parts, Bucket=b, Key=key, UploadId=uid)[0] == "NoSuchUpload", "a completed upload is gone")


def multipart_errors(b):
    key = "mp/errors"
    uid = S3.create_multipart_upload(Bucket=b, Key=key)["UploadId"]
    small = S3.upload_part(Bucket=b, Key=key, UploadId=uid, PartNumber=1, Body=b"x" * 1000)
    last = S3.upload_part(Bucket=b, Key=key, UploadId=uid, PartNumber=2, Body=b"y" * 10)
    parts = [{"PartNumber": 1, "ETag": small["ETag"]}, {"PartNumber": 2, "ETag": last["ETag"]}]
    min_part = int(os.environ.get("S3_MIN_PART", 5 * MIB))
    if min_part > 1000:
        c = error_code(S3.complete_multipart_upload, Bucket=b, Key=key, UploadId=uid, MultipartUpload={"Parts": parts})
        check(c == ("EntityTooSmall", 400), f"a small part but the last: EntityTooSmall ({c})")
    bad = [{"PartNumber": 1, "ETag": '"00000000000000000000000000000000"'}, parts[1]]
    c = error_code(S3.complete_multipart_upload, Bucket=b, Key=key, UploadId=uid, MultipartUpload={"Parts": bad})
    check(c[0] == "InvalidPart", f"a wrong part ETag: InvalidPart ({c})")
    c = error_code(S3.complete_multipart_upload, Bucket=b, Key=key, UploadId=uid,
                   MultipartUpload={"Parts": list(reversed(parts))})
    check(c[0] == "InvalidPartOrder", f"parts out of order: InvalidPartOrder ({c})")
    ups = S3.list_multipart_uploads(Bucket=b).get("Uploads", [])
    check(any(u["UploadId"] == uid and u["Key"] == key for u in ups), "the upload is listed")
    S3.abort_multipart_upload(Bucket=b, Key=key, UploadId=uid)
    check(error_code(S3.list_parts, Bucket=b, Key=key, UploadId=uid)[0] == "NoSuchUpload", "an aborted upload is gone")
    ups = S3.list_multipart_uploads(Bucket=b).get("Uploads", [])
    check(all(u["UploadId"] != uid for u in ups), "an aborted upload is not listed")
    check(error_code(S3.head_object, Bucket=b, Key=key)[1] == 404, "an aborted upload leaves no object")


def ranges(b):
    n = 3 * MIB + 17
    body = data(n, 77)
    S3.put_object(Bucket=b, Key="ranges", Body=body)
    for hdr, want in [("bytes=0-0", body[:1]), (f"bytes={n - 1}-{n - 1}", body[-1:]), ("bytes=-100", body[-100:]),
                      ("bytes=1000-", body[1000:]), ("bytes=123456-2345678", body[123456:2345679]),
                      (f"bytes=0-{n + 100}", body)]:
        r = S3.get_object(Bucket=b, Key="ranges", Range=hdr)
        got = r["Body"].read()
        check(got == want, f"Range {hdr}: {len(want)} bytes, byte-exact")
        if hdr != f"bytes=0-{n + 100}":
            check(r["ResponseMetadata"]["HTTPStatusCode"] == 206, f"Range {hdr}: 206")
    c = error_code(S3.get_object, Bucket=b, Key="ranges", Range=f"bytes={n}-")
    check(c == ("InvalidRange", 416), f"a range past the end: 416 InvalidRange ({c})")


def listing(b):
    keys = [f"dir{i % 5}/sub{i % 3}/k{i:05}" for i in range(2000)] + [f"top{i:04}" for i in range(500)]
    with concurrent.futures.ThreadPoolExecutor(16) as ex:
        list(ex.map(lambda k: S3.put_object(Bucket=f"{b}", Key=k, Body=k.encode()), keys))
    everything = []
    pages = 0
    for page in S3.get_paginator("list_objects_v2").paginate(Bucket=b, PaginationConfig={"PageSize": 1000}):
        pages += 1
        everything += [o["Key"] for o in page.get("Contents", [])]
    check(everything == sorted(keys) and pages == 3, f"2,500 keys listed in key order in {pages} pages")
    prefixes, tops, pages = [], [], 0
    for page in S3.get_paginator("list_objects_v2").paginate(Bucket=b, Delimiter="/", PaginationConfig={"PageSize": 100}):
        pages += 1
        prefixes += [p["Prefix"] for p in page.get("CommonPrefixes", [])]
        tops += [o["Key"] for o in page.get("Contents", [])]
    check(prefixes == [f"dir{i}/" for i in range(5)], "delimiter: the five directories as common prefixes")
    check(tops == [f"top{i:04}" for i in range(500)] and pages == 6, f"delimiter: 500 top-level keys across {pages} pages")
    sub = []
    for page in S3.get_paginator("list_objects_v2").paginate(Bucket=b, Prefix="dir1/", Delimiter="/"):
        sub += [p["Prefix"] for p in page.get("CommonPrefixes", [])]
    check(sub == ["dir1/sub0/", "dir1/sub1/", "dir1/sub2/"], "prefix and delimiter: nested common prefixes")
    r = S3.list_objects_v2(Bucket=b, Prefix="dir2/sub1/", StartAfter="dir2/sub1/k01000", MaxKeys=10)
    want = sorted(k for k in keys if k.startswith("dir2/sub1/") and k > "dir2/sub1/k01000")[:10]
    check([o["Key"] for o in r["Contents"]] == want and r["IsTruncated"], "start-after and max-keys")
    v1 = []
    for page in S3.get_paginator("list_objects").paginate(Bucket=b, Prefix="dir3/", PaginationConfig={"PageSize": 150}):
        v1 += [o["Key"] for o in page.get("Contents", [])]
    check(v1 == sorted(k for k in keys if k.startswith("dir3/")), "ListObjects V1 with markers across pages")
    r = S3.list_objects_v2(Bucket=b, Prefix="top0001")
    check(r["Contents"][0]["ETag"].strip('"') == hashlib.md5(b"top0001").hexdigest(), "listed ETags are MD5s")


def auth(b):
    S3.put_object(Bucket=b, Key="secret.txt", Body=b"hello")
    url = S3.generate_presigned_url("get_object", Params={"Bucket": b, "Key": "secret.txt"}, ExpiresIn=300)
    check(urllib.request.urlopen(url).read() == b"hello", "presigned GET")
    for bad_url, what in [(url.replace("secret.txt", "secret.txx"), "a presigned URL for another key"),
                          (f"{ENDPOINT}/{b}/secret.txt", "an anonymous GET")]:
        try:
            urllib.request.urlopen(bad_url)
            raise AssertionError(f"{what} was served")
        except urllib.error.HTTPError as e:
            body = e.read().decode()
            check(e.code == 403 and "<Code>" in body, f"{what}: 403 with an S3 XML error")
    c = error_code(client(secret="wrong-secret-wrong").get_object, Bucket=b, Key="secret.txt")
    check(c == ("SignatureDoesNotMatch", 403), f"a wrong secret: 403 SignatureDoesNotMatch ({c})")
    c = error_code(client(access="NOBODY123").list_buckets)
    check(c[1] == 403, f"an unknown access key: 403 ({c})")


def copy_meta_conditions(b):
    body = data(2 * MIB + 3, 5)
    r = S3.put_object(Bucket=b, Key="orig", Body=body, ContentType="image/png", Metadata={"colour": "blue"})
    etag = r["ETag"]
    h = S3.head_object(Bucket=b, Key="orig")
    check(h["ContentType"] == "image/png" and h["Metadata"] == {"colour": "blue"}, "Content-Type and x-amz-meta-* kept")
    S3.copy_object(Bucket=b, Key="copy", CopySource={"Bucket": b, "Key": "orig"})
    h = S3.head_object(Bucket=b, Key="copy")
    check(get(b, "copy") == body and h["Metadata"] == {"colour": "blue"}, "CopyObject: bytes and metadata")
    S3.copy_object(Bucket=b, Key="copy2", CopySource={"Bucket": b, "Key": "orig"}, MetadataDirective="REPLACE",
                   Metadata={"colour": "red"}, ContentType="text/plain")
    h = S3.head_object(Bucket=b, Key="copy2")
    check(h["Metadata"] == {"colour": "red"} and h["ContentType"] == "text/plain", "CopyObject REPLACE: new metadata")
    c = error_code(S3.get_object, Bucket=b, Key="orig", IfNoneMatch=etag)
    check(c[1] == 304, f"If-None-Match with the ETag: 304 ({c})")
    c = error_code(S3.get_object, Bucket=b, Key="orig", IfMatch='"0123"')
    check(c[1] == 412, f"If-Match with another ETag: 412 ({c})")
    check(get(b, "orig", IfMatch=etag) == body, "If-Match with the ETag: the object")
    future = datetime.now(timezone.utc) + timedelta(days=1)
    past = datetime.now(timezone.utc) - timedelta(days=1)
    check(error_code(S3.get_object, Bucket=b, Key="orig", IfModifiedSince=future)[1] == 304, "If-Modified-Since later: 304")
    check(error_code(S3.get_object, Bucket=b, Key="orig", IfUnmodifiedSince=past)[1] == 412, "If-Unmodified-Since earlier: 412")
    check(get(b, "orig", IfModifiedSince=past) == body, "If-Modified-Since earlier: the object")


def deletes_and_errors(b):
    for i in range(5):
        S3.put_object(Bucket=b, Key=f"del/{i}", Body=b"x")
    r = S3.delete_objects(Bucket=b, Delete={"Objects": [{"Key": f"del/{i}"} for i in range(6)]})
    check(sorted(d["Key"] for d in r["Deleted"]) == [f"del/{i}" for i in range(6)], "DeleteObjects, a missing key included")
    check(error_code(S3.get_object, Bucket=b, Key="del/1")[0] == "NoSuchKey", "a deleted key: NoSuchKey")
    check(error_code(S3.get_object, Bucket="no-such-bucket", Key="k")[0] == "NoSuchBucket", "NoSuchBucket")
    check(error_code(S3.list_objects_v2, Bucket="no-such-bucket")[0] == "NoSuchBucket", "listing a missing bucket: NoSuchBucket")
    check(S3.list_objects_v2(Bucket=b, Prefix="no-key-starts-so/")["KeyCount"] == 0, "an empty page of a bucket that exists")
    check(error_code(S3.delete_bucket, Bucket=b)[0] == "BucketNotEmpty", "deleting a bucket with objects: BucketNotEmpty")
    check(error_code(S3.create_bucket, Bucket=b)[0] in ("BucketAlreadyOwnedByYou", "BucketAlreadyExists"), "a bucket twice")
    c = error_code(S3.put_object, Bucket=b, Key="digest", Body=b"abc", ContentMD5="AAAAAAAAAAAAAAAAAAAAAA==")
    check(c[0] == "BadDigest", f"a Content-MD5 that does not match: BadDigest ({c})")
    check(error_code(S3.head_object, Bucket=b, Key="digest")[1] == 404, "a bad digest leaves no object")
    # Raw signed requests: malformed XML, an unknown operation, a negative length, a body cut short.
    for method, path, body, want, code, what in [
        ("POST", f"/{b}?delete", b"<Delete><Object><Key>x</Ke", 400, "MalformedXML", "malformed XML"),
        ("GET", f"/{b}?replication", b"", 501, "NotImplemented", "an operation not served"),
    ]:
        status, text = raw(method, path, body)
        check(status == want and f"<Code>{code}</Code>" in text, f"{what}: {status} {code} in S3 XML")
    status, text = raw("PUT", f"/{b}/neg", b"", extra={"Content-Length": "-5"}, sign_body=False)
    check(status == 400, f"a negative Content-Length: {status}")
    status, text = raw("PUT", f"/{b}/huge", b"", extra={"Content-Length": str(6 << 30)}, sign_body=False)
    check(status == 400 and "EntityTooLarge" in text, f"a 6 GiB Content-Length, no body sent: {status} EntityTooLarge")
    check(error_code(S3.head_object, Bucket=b, Key="huge")[1] == 404, "a refused PUT leaves no object")
    truncated(b)
    check(error_code(S3.head_object, Bucket=b, Key="cut")[1] == 404, "a body cut short leaves no object")


def signed_headers(method, path, body, extra=None):
    req = AWSRequest(method=method, url=ENDPOINT + path, data=body, headers=extra or {})
    S3SigV4Auth(botocore.credentials.Credentials(AK, SK), "s3", "us-east-1").add_auth(req)
    return dict(req.headers.items())


def read_to_end(s):
    """Everything a socket receives until the other side closes it."""
    out = b""
    while True:
        chunk = s.recv(65536)
        if not chunk:
            return out
        out += chunk


def raw(method, path, body, extra=None, sign_body=True):
    host, port = ENDPOINT.split("//")[1].split(":")
    headers = signed_headers(method, path, body if sign_body else b"", extra)
    headers.setdefault("Content-Length", str(len(body)))
    s = socket.create_connection((host, int(port)), timeout=30)
    lines = [f"{method} {path} HTTP/1.1", f"Host: {host}:{port}", "Connection: close"]
    lines += [f"{k}: {v}" for k, v in headers.items() if k.lower() != "host"]
    s.sendall(("\r\n".join(lines) + "\r\n\r\n").encode() + body)
    out = read_to_end(s)
    s.close()
    head, _, rest = out.partition(b"\r\n\r\n")
    return int(head.split()[1]), rest.decode(errors="replace")


def truncated(b):
    """A PUT that promises 4 MiB, sends 1 MiB and hangs up."""
    body = data(4 * MIB, 9)
    host, port = ENDPOINT.split("//")[1].split(":")
    headers = signed_headers("PUT", f"/{b}/cut", body)
    s = socket.create_connection((host, int(port)))
    lines = [f"PUT /{b}/cut HTTP/1.1", f"Host: {host}:{port}", f"Content-Length: {len(body)}"]
    lines += [f"{k}: {v}" for k, v in headers.items() if k.lower() not in ("host", "content-length")]
    s.sendall(("\r\n".join(lines) + "\r\n\r\n").encode() + body[:MIB])
    time.sleep(0.5)
    s.close()
    time.sleep(1.0)


def awscli(b):
    with tempfile.TemporaryDirectory() as d:
        src = os.path.join(d, "in.bin")
        with open(src, "wb") as f:
            f.write(data(9 * MIB + 5, 11))
        env = dict(os.environ, AWS_DEFAULT_REGION="us-east-1")
        aws = ["aws", "--endpoint-url", ENDPOINT, "--only-show-errors"]
        subprocess.run(aws + ["s3", "cp", src, f"s3://{b}/cli/in.bin"], check=True, env=env)
        subprocess.run(aws + ["s3", "cp", f"s3://{b}/cli/in.bin", os.path.join(d, "out.bin")], check=True, env=env)
        with open(src, "rb") as x, open(os.path.join(d, "out.bin"), "rb") as y:
            check(x.read() == y.read(), "aws s3 cp up and down (multipart): byte-exact")
        ls = subprocess.run(aws[:3] + ["s3", "ls", f"s3://{b}/cli/"], env=env, capture_output=True, text=True)
        check(ls.returncode == 0 and "in.bin" in ls.stdout, f"aws s3 ls ({ls.stderr.strip()})")
        # A tree whose names need escaping, synced up and down: nothing missed, byte-exact
        # (the aws cli lists with encoding-type=url and decodes what comes back).
        names = ["plus+sign key.txt", "100% sure.txt", "q?mark.txt", "hash#tag.txt", "a&b=c.txt", "ünïcødé/файл.txt",
                 "emoji 🦀.txt", "sp ace/inner+dir/x y.txt", "tilde~and'quote.txt", "semi;colon,comma.txt"]
        tree, back = os.path.join(d, "tree"), os.path.join(d, "back")
        for i, n in enumerate(names):
            os.makedirs(os.path.dirname(os.path.join(tree, n)), exist_ok=True)
            with open(os.path.join(tree, n), "wb") as f:
                f.write(data(1000 + i, 300 + i))
        subprocess.run(aws + ["s3", "sync", tree, f"s3://{b}/sync/"], check=True, env=env)
        listed = sorted(o["Key"] for p in S3.get_paginator("list_objects_v2").paginate(Bucket=b, Prefix="sync/")
                        for o in p.get("Contents", []))
        check(listed == sorted(f"sync/{n}" for n in names), f"boto3 lists every escaped name as it is: {listed}")
        v1 = sorted(o["Key"] for o in S3.list_objects(Bucket=b, Prefix="sync/").get("Contents", []))
        check(v1 == listed, f"ListObjects V1 too: {v1}")
        subprocess.run(aws + ["s3", "sync", f"s3://{b}/sync/", back], check=True, env=env)
        for i, n in enumerate(names):
            with open(os.path.join(back, n), "rb") as f:
                check(f.read() == data(1000 + i, 300 + i), f"aws s3 sync down: {n!r} byte-exact")


def suite():
    b = "suite"
    made = S3.create_bucket(Bucket=b)
    # rs:4,2 on six nodes: no node to rebuild a lost one's chunks on, and the creator is told.
    warning = made["ResponseMetadata"]["HTTPHeaders"].get("x-kintsugi-warning", "")
    check("cannot be rebuilt" in warning, f"a bucket as wide as the cluster is warned of: {warning!r}")
    S3.head_bucket(Bucket=b)
    check(b in [x["Name"] for x in S3.list_buckets()["Buckets"]], "ListBuckets")
    round_trips(b)
    empty_then_full(b)
    multipart(b, [data(5 * MIB, 1), data(5 * MIB, 2), data(MIB + 3, 3)], "mp/three")
    small = int(os.environ.get("S3_MIN_PART", 5 * MIB))
    if small <= 8192:
        multipart(b, [data(8192, 100 + i) for i in range(999)] + [data(100, 7)], "mp/thousand")
    multipart_errors(b)
    refusals(b)
    stored_headers(b)
    ranges(b)
    auth(b)
    copy_meta_conditions(b)
    deletes_and_errors(b)
    awscli(b)
    default_checksums(b)
    virtual_host(b)
    rclone_and_s3cmd()
    versions_paging()
    S3.create_bucket(Bucket="listing")
    listing("listing")
    S3.create_bucket(Bucket="empty")
    S3.delete_bucket(Bucket="empty")
    check(error_code(S3.head_bucket, Bucket="empty")[1] == 404, "an empty bucket is deleted")


def empty_then_full(b):
    """An empty PUT, then PUTs with bodies on the same pooled connection: botocore sends
    `Expect: 100-continue` on the empty one too, and if that connection is kept after an
    answer without `100 Continue`, it loses the next answer's headers (boto/botocore#3755)."""
    for i in range(3):
        S3.put_object(Bucket=b, Key=f"empty-then-full/{i}/empty", Body=b"")
        body = data(MIB + i, 40 + i)
        r = S3.put_object(Bucket=b, Key=f"empty-then-full/{i}/full", Body=body)
        check(r.get("ETag", "").strip('"') == hashlib.md5(body).hexdigest(), f"the PUT after an empty PUT gets its ETag ({i})")
        check(get(b, f"empty-then-full/{i}/full") == body, "and is stored")
    for i in range(3):
        for k in ["empty", "full"]:
            S3.delete_object(Bucket=b, Key=f"empty-then-full/{i}/{k}")


def versions_paging():
    """2,500 versions of 100 keys: ListObjectVersions pages them in S3's order (keys in
    order, each one's versions newest first), with the SDK's paginator and with small pages."""
    b = "versions"
    S3.create_bucket(Bucket=b)
    S3.put_bucket_versioning(Bucket=b, VersioningConfiguration={"Status": "Enabled"})
    keys = [f"k/{i:03d}" for i in range(100)]

    def writer(w):
        # Each writer owns its keys, so that each key's versions have one order.
        s3 = client()
        mine = {k: [] for k in keys[w::8]}
        for round_ in range(25):
            for k in mine:
                body = data(17 + (round_ * 31 + len(mine[k])) % 200, f"{k}/{round_}")
                mine[k].append(s3.put_object(Bucket=b, Key=k, Body=body)["VersionId"])
        return mine

    written = {}
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        for mine in pool.map(writer, range(8)):
            written.update(mine)
    want = [(k, v, i == 0) for k in sorted(written) for i, v in enumerate(reversed(written[k]))]
    check(len(want) == 2500 and len({v for _, v, _ in want}) == 2500, "2,500 versions with distinct ids")
    got = []
    for page in S3.get_paginator("list_object_versions").paginate(Bucket=b):
        got += [(v["Key"], v["VersionId"], v["IsLatest"]) for v in page.get("Versions", [])]
    check(got == want, "the paginator lists 2,500 versions in S3's order, the latest of each key marked")
    got, kw, pages = [], {}, 0
    while True:
        p = S3.list_object_versions(Bucket=b, MaxKeys=333, **kw)
        pages += 1
        got += [(v["Key"], v["VersionId"], v["IsLatest"]) for v in p.get("Versions", [])]
        if not p["IsTruncated"]:
            break
        kw = {"KeyMarker": p["NextKeyMarker"], "VersionIdMarker": p["NextVersionIdMarker"]}
    check(got == want and pages == 8, f"pages of 333 by key and version markers ({pages} pages)")
    k = keys[37]
    for i, v in enumerate(written[k][::6]):
        check(get(b, k, VersionId=v) == data(17 + (i * 6 * 31 + i * 6) % 200, f"{k}/{i * 6}"), f"{k} version {i * 6} by id")


def degraded_put(b):
    """Objects in bucket `b`, which the caller made with the code to test."""
    for i, n in enumerate([1, 1000, 3 * MIB + 1, 20 * MIB + 7]):
        S3.put_object(Bucket=b, Key=f"o{i}", Body=data(n, 1000 + i))


def degraded_check(b):
    for i, n in enumerate([1, 1000, 3 * MIB + 1, 20 * MIB + 7]):
        check(get(b, f"o{i}") == data(n, 1000 + i), f"{b}: GET of {n} B with nodes down is byte-exact")
        check(get(b, f"o{i}", Range="bytes=-1") == data(n, 1000 + i)[-1:], f"{b}: last byte with nodes down")


def stored_headers(b):
    """Cache-Control, Content-Disposition, Content-Encoding, Content-Language and Expires are
    stored with the object and returned on GET and HEAD, kept by a copy, replaced by a copy
    that says REPLACE, set by a multipart upload, and overridden by response-* parameters."""
    expires = datetime(2031, 5, 17, 8, 30, 0, tzinfo=timezone.utc)
    sent = {"CacheControl": "max-age=3600, public", "ContentDisposition": 'attachment; filename="report 1.pdf"',
            "ContentEncoding": "identity", "ContentLanguage": "fr-CA", "Expires": expires, "ContentType": "application/pdf"}

    def same(r, want, what):
        for k, v in want.items():
            check(r.get(k) == v, f"{what}: {k} is {r.get(k)!r}, not {v!r}")

    S3.put_object(Bucket=b, Key="h/put", Body=b"headers", **sent)
    same(S3.head_object(Bucket=b, Key="h/put"), sent, "HEAD after PUT")
    g = S3.get_object(Bucket=b, Key="h/put")
    same(g, sent, "GET after PUT")
    check(g["Body"].read() == b"headers", "GET body")
    o = S3.get_object(Bucket=b, Key="h/put", ResponseContentDisposition="inline", ResponseCacheControl="no-store",
                      ResponseContentType="text/plain")
    same(o, {"ContentDisposition": "inline", "CacheControl": "no-store", "ContentType": "text/plain",
             "ContentLanguage": "fr-CA"}, "GET with response-* overrides")
    S3.copy_object(Bucket=b, Key="h/copy", CopySource={"Bucket": b, "Key": "h/put"})
    same(S3.head_object(Bucket=b, Key="h/copy"), sent, "a copy keeps them")
    S3.copy_object(Bucket=b, Key="h/replaced", CopySource={"Bucket": b, "Key": "h/put"}, MetadataDirective="REPLACE",
                   CacheControl="no-cache", ContentType="text/csv")
    r = S3.head_object(Bucket=b, Key="h/replaced")
    same(r, {"CacheControl": "no-cache", "ContentType": "text/csv"}, "a REPLACE copy sets them")
    check("ContentDisposition" not in r and "Expires" not in r, f"a REPLACE copy drops the others: {r}")
    up = S3.create_multipart_upload(Bucket=b, Key="h/mp", **sent)["UploadId"]
    e = S3.upload_part(Bucket=b, Key="h/mp", UploadId=up, PartNumber=1, Body=b"one part")["ETag"]
    S3.complete_multipart_upload(Bucket=b, Key="h/mp", UploadId=up, MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": e}]})
    same(S3.head_object(Bucket=b, Key="h/mp"), sent, "HEAD after a multipart upload")
    for k in ["h/put", "h/copy", "h/replaced", "h/mp"]:
        S3.delete_object(Bucket=b, Key=k)


def refusals(b):
    """Requests for guarantees the store does not give: each answered with S3's error, none
    changing anything."""
    later = datetime.now(timezone.utc) + timedelta(days=30)
    key = bytes(range(32))
    puts = [
        ({"ACL": "public-read"}, "AccessControlListNotSupported"),
        ({"ACL": "public-read-write"}, "AccessControlListNotSupported"),
        ({"ACL": "authenticated-read"}, "AccessControlListNotSupported"),
        ({"GrantRead": 'uri="http://acs.amazonaws.com/groups/global/AllUsers"'}, "AccessControlListNotSupported"),
        ({"StorageClass": "GLACIER"}, "InvalidStorageClass"),
        ({"StorageClass": "DEEP_ARCHIVE"}, "InvalidStorageClass"),
        ({"StorageClass": "STANDARD_IA"}, "InvalidStorageClass"),
        ({"ServerSideEncryption": "AES256"}, "NotImplemented"),
        ({"ServerSideEncryption": "aws:kms", "SSEKMSKeyId": "alias/x"}, "NotImplemented"),
        # (with its MD5 given, botocore sends the key as it is: base64)
        ({"SSECustomerAlgorithm": "AES256", "SSECustomerKey": base64.b64encode(key).decode(),
          "SSECustomerKeyMD5": "AAAAAAAAAAAAAAAAAAAAAA=="}, "InvalidArgument"),
        ({"ObjectLockMode": "COMPLIANCE", "ObjectLockRetainUntilDate": later}, "InvalidRequest"),
        ({"ObjectLockMode": "GOVERNANCE", "ObjectLockRetainUntilDate": later}, "InvalidRequest"),
        ({"ObjectLockLegalHoldStatus": "ON"}, "InvalidRequest"),
        ({"WebsiteRedirectLocation": "/elsewhere"}, "NotImplemented"),
        ({"WriteOffsetBytes": 0}, "NotImplemented"),
    ]
    refused = 0
    for i, (extra, want) in enumerate(puts):
        got = error_code(S3.put_object, Bucket=b, Key=f"refused/{i}", Body=b"x", **extra)
        check(got[0] == want and 400 <= got[1] < 600, f"PUT with {sorted(extra)}: {got}, not {want}")
        check(error_code(S3.head_object, Bucket=b, Key=f"refused/{i}")[1] == 404, f"PUT with {sorted(extra)} stored nothing")
        refused += 1
    for i, (extra, want) in enumerate(puts[:3] + puts[4:5] + puts[7:8] + puts[10:11]):
        got = error_code(S3.create_multipart_upload, Bucket=b, Key=f"refused/mp{i}", **extra)
        check(got[0] == want, f"CreateMultipartUpload with {sorted(extra)}: {got}, not {want}")
        refused += 1
    uploads = S3.list_multipart_uploads(Bucket=b, Prefix="refused/").get("Uploads", [])
    check(uploads == [], f"no multipart upload was started: {uploads}")
    S3.put_object(Bucket=b, Key="refused-source", Body=b"source")
    for i, (extra, want) in enumerate([puts[0], puts[4], puts[7], puts[10], puts[13]]):
        got = error_code(S3.copy_object, Bucket=b, Key=f"refused/copy{i}", CopySource={"Bucket": b, "Key": "refused-source"},
                         **extra)
        check(got[0] == want, f"CopyObject with {sorted(extra)}: {got}, not {want}")
        check(error_code(S3.head_object, Bucket=b, Key=f"refused/copy{i}")[1] == 404, "a refused copy wrote nothing")
        refused += 1
    got = error_code(S3.get_object, Bucket=b, Key="refused-source", SSECustomerAlgorithm="AES256", SSECustomerKey=key)
    check(got == ("InvalidRequest", 400), f"GET with an SSE-C key of an object that has none: {got}")
    for extra, want in [({"ACL": "public-read"}, "AccessControlListNotSupported"),
                        ({"GrantRead": 'uri="http://acs.amazonaws.com/groups/global/AllUsers"'}, "AccessControlListNotSupported")]:
        got = error_code(S3.create_bucket, Bucket="refused-bucket", **extra)
        check(got[0] == want, f"CreateBucket with {sorted(extra)}: {got}, not {want}")
        check(error_code(S3.head_bucket, Bucket="refused-bucket")[1] == 404, f"CreateBucket with {sorted(extra)} made nothing")
        refused += 1
    # Whole operations the store does not serve, and object lock on a bucket not versioned.
    for op, kw, want in [(S3.put_object_lock_configuration, {"ObjectLockConfiguration": {"ObjectLockEnabled": "Enabled"}},
                          "InvalidBucketState"),
                         (S3.put_bucket_encryption, {"ServerSideEncryptionConfiguration": {
                             "Rules": [{"ApplyServerSideEncryptionByDefault": {"SSEAlgorithm": "AES256"}}]}}, "NotImplemented"),
                         (S3.put_bucket_acl, {"ACL": "public-read"}, "AccessControlListNotSupported")]:
        got = error_code(op, Bucket=b, **kw)
        check(got[0] == want, f"{op.__name__}: {got}, not {want}")
        refused += 1
    S3.delete_object(Bucket=b, Key="refused-source")
    check(refused >= 20, f"{refused} refusals")
    print(f"refusals: {refused} requests for unsupported guarantees refused, none changed anything")


def unreadable_check(b):
    """Too many nodes down to read: a 503 (retry later) before any byte, never a 200 whose
    body breaks off; the metadata still answers HEAD."""
    refused = 0
    for i, n in enumerate([1, 1000, 3 * MIB + 1, 20 * MIB + 7]):
        try:
            # A small object may still be whole on the nodes that are up (its stripe's
            # other data chunks are zeros): then it reads back, whole.
            r = S3.get_object(Bucket=b, Key=f"o{i}")
            check(r["Body"].read() == data(n, 1000 + i), f"{b}: a GET that answers 200 sends the whole object")
        except botocore.exceptions.ClientError as e:
            got = e.response["Error"]["Code"], e.response["ResponseMetadata"]["HTTPStatusCode"]
            check(got == ("ServiceUnavailable", 503), f"{b}: GET of an unreadable {n} B object: {got}, not 503 before its body")
            refused += 1
        check(S3.head_object(Bucket=b, Key=f"o{i}")["ContentLength"] == n, f"{b}: HEAD still answers")
    check(refused >= 2, f"{b}: the large objects are unreadable with four of nine nodes down ({refused} refused)")
    # The SDKs' standard retry mode retries the transient (503, with Retry-After) and stops
    # at once on the permanent (404, 400).
    retrying = boto3.client("s3", endpoint_url=ENDPOINT, aws_access_key_id=AK, aws_secret_access_key=SK, region_name="us-east-1",
                            config=Config(s3={"addressing_style": "path"}, retries={"mode": "standard", "max_attempts": 3}))
    try:
        retrying.get_object(Bucket=b, Key="o3")
        raise AssertionError("the 20 MiB object read back with four of nine nodes down")
    except botocore.exceptions.ClientError as e:
        meta = e.response["ResponseMetadata"]
        check(meta["HTTPHeaders"].get("retry-after") == "1", f"a 503 says when to retry: {meta['HTTPHeaders']}")
        # max_attempts counts retries in botocore's configuration: three after the first.
        check(meta["RetryAttempts"] == 3, f"boto3's standard mode retried the 503: {meta['RetryAttempts']} retries")
    for call, kw, code in [(retrying.get_object, {"Bucket": b, "Key": "none"}, "NoSuchKey"),
                           (retrying.put_object, {"Bucket": b, "Key": "bad", "Body": b"x", "StorageClass": "GLACIER"}, "InvalidStorageClass")]:
        try:
            call(**kw)
            raise AssertionError(f"{code} expected")
        except botocore.exceptions.ClientError as e:
            got = (e.response["Error"]["Code"], e.response["ResponseMetadata"]["RetryAttempts"])
            check(got == (code, 0), f"a permanent error is not retried: {got}")
    env = dict(os.environ, AWS_DEFAULT_REGION="us-east-1", AWS_RETRY_MODE="standard", AWS_MAX_ATTEMPTS="3")
    with tempfile.TemporaryDirectory() as d:
        cli = subprocess.run(["aws", "--endpoint-url", ENDPOINT, "--debug", "s3api", "get-object", "--bucket", b, "--key", "o3",
                              os.path.join(d, "o3")], env=env, capture_output=True, text=True)
        tries = cli.stderr.count('"GET /' + b + '/o3')  # one debug line per request sent
        retried = cli.stderr.count("Retry needed") + cli.stderr.count("retry needed")
        check(cli.returncode != 0 and "ServiceUnavailable" in cli.stderr, "the aws cli reports the 503")
        print(f"aws cli: {retried} retries, {tries} requests", flush=True)
        check(retried >= 2, f"the aws cli's standard mode retried it ({retried} retries, {tries} requests)")


def default_checksums(b):
    """boto3 exactly as installed (no signature or checksum settings): its default checksums
    on PUT and on a multipart upload are verified and stored, and its GETs validate them."""
    plain = boto3.client("s3", endpoint_url=ENDPOINT, aws_access_key_id=AK, aws_secret_access_key=SK,
                         region_name="us-east-1", config=Config(s3={"addressing_style": "path"}))
    body = data(MIB + 17, 40)
    r = plain.put_object(Bucket=b, Key="dc/put", Body=body)
    check(any(k.startswith("Checksum") and k != "ChecksumType" for k in r), f"a default PUT's checksum is answered: {sorted(r)}")
    got = plain.get_object(Bucket=b, Key="dc/put", ChecksumMode="ENABLED")
    check(got["Body"].read() == body, "a default GET (checksum validated by boto3) byte-exact")
    with tempfile.TemporaryDirectory() as d:
        src = os.path.join(d, "big")
        with open(src, "wb") as f:
            f.write(data(17 * MIB + 3, 41))
        from boto3.s3.transfer import TransferConfig
        cfg = TransferConfig(multipart_threshold=8 * MIB, multipart_chunksize=8 * MIB)
        plain.upload_file(src, b, "dc/multi", Config=cfg)
        h = plain.head_object(Bucket=b, Key="dc/multi", ChecksumMode="ENABLED")
        check(h["ETag"].strip('"').endswith("-3"), f"upload_file made 3 parts: {h['ETag']}")
        check("ChecksumCRC32" in h or "ChecksumCRC64NVME" in h, f"the multipart object's checksum is stored: {sorted(h)}")
        plain.download_file(b, "dc/multi", os.path.join(d, "back"))
        with open(src, "rb") as x, open(os.path.join(d, "back"), "rb") as y:
            check(x.read() == y.read(), "upload_file and download_file with default checksums: byte-exact")
    # A body whose checksum does not match what it says: refused, nothing stored.
    bad = {"ChecksumCRC32": "AAAAAA=="}
    check(error_code(plain.put_object, Bucket=b, Key="dc/bad", Body=b"abc", **bad)[0] == "BadDigest", "a wrong CRC32 is BadDigest")
    check(error_code(plain.head_object, Bucket=b, Key="dc/bad")[1] == 404, "and stores nothing")


def virtual_host(b):
    """Virtual-hosted-style requests (bucket.s3.localhost): the gateway's test domain."""
    real = socket.getaddrinfo

    def loopback(host, *a, **kw):
        return real("127.0.0.1" if str(host).endswith(".localhost") or host == "localhost" else host, *a, **kw)

    socket.getaddrinfo = loopback
    try:
        port = ENDPOINT.rsplit(":", 1)[1]
        vh = boto3.client("s3", endpoint_url=f"http://s3.localhost:{port}", aws_access_key_id=AK, aws_secret_access_key=SK,
                          region_name="us-east-1", config=Config(s3={"addressing_style": "virtual"}, retries={"max_attempts": 1}))
        r = vh.put_object(Bucket=b, Key="vh/key", Body=b"virtual")
        check(r["ResponseMetadata"]["HTTPStatusCode"] == 200, "a virtual-hosted PUT")
        check(vh.get_object(Bucket=b, Key="vh/key")["Body"].read() == b"virtual", "a virtual-hosted GET")
        check(get(b, "vh/key") == b"virtual", "the same object in path style")
        keys = [o["Key"] for o in vh.list_objects_v2(Bucket=b, Prefix="vh/").get("Contents", [])]
        check(keys == ["vh/key"], f"a virtual-hosted listing: {keys}")
    finally:
        socket.getaddrinfo = real


def rclone_and_s3cmd():
    """rclone sync and check --download, and s3cmd with a configuration of only its keys and
    endpoint (so its region is "US", which the gateway redirects to us-east-1 as S3 does)."""
    host = ENDPOINT.split("//")[1]
    with tempfile.TemporaryDirectory() as d:
        tree = os.path.join(d, "tree")
        names = ["a+b.bin", "100%.bin", "sp ace/x y.bin", "q?#&.bin", "ünï/😀.bin", "big.bin"]
        for i, n in enumerate(names):
            os.makedirs(os.path.dirname(os.path.join(tree, n)), exist_ok=True)
            with open(os.path.join(tree, n), "wb") as f:
                f.write(data(12 * MIB + 1 if n == "big.bin" else 3000 + i, 500 + i))
        env = dict(os.environ, RCLONE_CONFIG_K_TYPE="s3", RCLONE_CONFIG_K_PROVIDER="Other", RCLONE_CONFIG_K_ACCESS_KEY_ID=AK,
                   RCLONE_CONFIG_K_SECRET_ACCESS_KEY=SK, RCLONE_CONFIG_K_ENDPOINT=ENDPOINT)
        env.pop("AWS_CA_BUNDLE", None)  # rclone refuses a CA bundle with its own transport
        rclone = ["rclone", "--config", os.path.join(d, "none.conf"), "--s3-upload-cutoff", "5M", "--s3-chunk-size", "5M"]
        subprocess.run(rclone + ["mkdir", "k:rclone"], check=True, env=env)
        subprocess.run(rclone + ["sync", tree, "k:rclone"], check=True, env=env)
        c = subprocess.run(rclone + ["check", "--download", tree, "k:rclone"], env=env, capture_output=True, text=True)
        check(c.returncode == 0, f"rclone check --download: {c.stderr.strip()[-500:]}")
        subprocess.run(rclone + ["sync", "k:rclone", os.path.join(d, "back")], check=True, env=env)
        for n in names:
            with open(os.path.join(tree, n), "rb") as x, open(os.path.join(d, "back", n), "rb") as y:
                check(x.read() == y.read(), f"rclone sync down: {n!r} byte-exact")
        cfg = os.path.join(d, "s3cfg")
        with open(cfg, "w") as f:
            f.write(f"[default]\naccess_key = {AK}\nsecret_key = {SK}\nhost_base = {host}\nhost_bucket = {host}\nuse_https = False\n")
        s3cmd = ["s3cmd", "-c", cfg]
        subprocess.run(s3cmd + ["mb", "s3://s3cmd-bucket"], check=True, capture_output=True)
        subprocess.run(s3cmd + ["put", "--multipart-chunk-size-mb=5", os.path.join(tree, "big.bin"), "s3://s3cmd-bucket/big+1.bin"], check=True, capture_output=True)
        subprocess.run(s3cmd + ["get", "--force", "s3://s3cmd-bucket/big+1.bin", os.path.join(d, "s3cmd.bin")], check=True,
                       capture_output=True)
        with open(os.path.join(tree, "big.bin"), "rb") as x, open(os.path.join(d, "s3cmd.bin"), "rb") as y:
            check(x.read() == y.read(), "s3cmd put (multipart) and get with its default configuration: byte-exact")
        ls = subprocess.run(s3cmd + ["ls", "s3://s3cmd-bucket"], capture_output=True, text=True)
        check("big+1.bin" in ls.stdout, f"s3cmd ls: {ls.stdout.strip()} {ls.stderr.strip()}")
        subprocess.run(s3cmd + ["del", "s3://s3cmd-bucket/big+1.bin"], check=True, capture_output=True)
        subprocess.run(s3cmd + ["rb", "s3://s3cmd-bucket"], check=True, capture_output=True)


def cut_read(b):
    """A GET whose body fails after its head: the connection is reset, never closed cleanly
    as if the (short) body were whole. Puts a 64 MiB object, reads its head and first MiB,
    says READING and waits for a line on stdin (the test stops nodes meanwhile), then reads
    on until the connection breaks."""
    S3.create_bucket(Bucket=b)
    size = 64 * MIB
    S3.put_object(Bucket=b, Key="big", Body=data(size, 77))
    host, port = ENDPOINT.split("//")[1].split(":")
    headers = signed_headers("GET", f"/{b}/big", b"")
    s = socket.create_connection((host, int(port)))
    lines = [f"GET /{b}/big HTTP/1.1", f"Host: {host}:{port}"] + [f"{k}: {v}" for k, v in headers.items() if k.lower() != "host"]
    s.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
    got = b""
    while b"\r\n\r\n" not in got:
        got += s.recv(65536)
    head, body = got.split(b"\r\n\r\n", 1)
    check(head.startswith(b"HTTP/1.1 200"), f"the GET began: {head[:40]!r}")
    while len(body) < MIB:
        body += s.recv(65536)
    print("READING", flush=True)
    sys.stdin.readline()
    outcome = "whole"
    try:
        while len(body) < size:
            piece = s.recv(1 << 20)
            if not piece:
                outcome = "closed"
                break
            body += piece
    except ConnectionResetError:
        outcome = "reset"
    check(outcome == "reset", f"a body that broke off after {len(body)} of {size} bytes ended with: {outcome}")
    check(body == data(size, 77)[:len(body)], "the bytes before the break are the object's")


def cors_setup(b, origin):
    """A bucket whose CORS rules allow `origin` to GET and PUT, an object in it; prints a
    presigned GET and a presigned PUT (SigV4) for the browser to fetch."""
    S3.create_bucket(Bucket=b)
    S3.put_object(Bucket=b, Key="hello.txt", Body=b"cross-origin bytes")
    S3.put_bucket_cors(Bucket=b, CORSConfiguration={"CORSRules": [{"AllowedOrigins": [origin], "AllowedMethods": ["GET", "PUT"],
                                                                    "AllowedHeaders": ["*"], "MaxAgeSeconds": 60}]})
    print("GET", S3.generate_presigned_url("get_object", Params={"Bucket": b, "Key": "hello.txt"}, ExpiresIn=600))
    print("PUT", S3.generate_presigned_url("put_object", Params={"Bucket": b, "Key": "from-browser.txt"}, ExpiresIn=600))


def cors_check(b):
    """What the browser PUT through its preflight is there."""
    check(get(b, "from-browser.txt") == b"written by the browser", "the browser's cross-origin PUT stored its body")


def lifecycle_setup():
    """Three buckets with lifecycle rules (the gateway runs with a day of a second or two):
    lc-plain (expiry by prefix, tag and size; a disabled rule; an upload to abort), lc-versions
    (noncurrent versions beyond the newest one; a lone delete marker) and lc-bulk (300 keys
    to expire, each into a delete marker)."""
    S3.create_bucket(Bucket="lc-plain")
    for i in range(5):
        S3.put_object(Bucket="lc-plain", Key=f"logs/{i}", Body=data(100 + i, i))
    for i in range(3):
        S3.put_object(Bucket="lc-plain", Key=f"keep/{i}", Body=data(100 + i, 10 + i))
    S3.put_object(Bucket="lc-plain", Key="tagged/x", Body=b"x", Tagging="class=tmp")
    S3.put_object(Bucket="lc-plain", Key="tagged/y", Body=b"y", Tagging="class=keep")
    S3.put_object(Bucket="lc-plain", Key="sized/big", Body=data(2000, 20))
    S3.put_object(Bucket="lc-plain", Key="sized/small", Body=data(10, 21))
    up = S3.create_multipart_upload(Bucket="lc-plain", Key="mp/obj")["UploadId"]
    for n in (1, 2):
        S3.upload_part(Bucket="lc-plain", Key="mp/obj", UploadId=up, PartNumber=n, Body=data(100 << 10, 30 + n))
    rules = [
        {"ID": "logs", "Filter": {"Prefix": "logs/"}, "Status": "Enabled", "Expiration": {"Days": 1}},
        {"ID": "tmp", "Filter": {"Tag": {"Key": "class", "Value": "tmp"}}, "Status": "Enabled", "Expiration": {"Days": 1}},
        {"ID": "sized", "Filter": {"And": {"Prefix": "sized/", "ObjectSizeGreaterThan": 1000}}, "Status": "Enabled",
         "Expiration": {"Days": 1}},
        {"ID": "uploads", "Filter": {"Prefix": ""}, "Status": "Enabled", "AbortIncompleteMultipartUpload": {"DaysAfterInitiation": 1}},
        {"ID": "off", "Filter": {"Prefix": "keep/"}, "Status": "Disabled", "Expiration": {"Days": 1}},
    ]
    S3.put_bucket_lifecycle_configuration(Bucket="lc-plain", LifecycleConfiguration={"Rules": rules})
    got = S3.get_bucket_lifecycle_configuration(Bucket="lc-plain")["Rules"]
    check([r["ID"] for r in got] == [r["ID"] for r in rules], "GetBucketLifecycleConfiguration answers the rules put")
    check(got[2]["Filter"] == rules[2]["Filter"] and got[4]["Status"] == "Disabled", "filters and status answered as put")

    S3.create_bucket(Bucket="lc-versions")
    S3.put_bucket_versioning(Bucket="lc-versions", VersioningConfiguration={"Status": "Enabled"})
    for i in range(4):
        S3.put_object(Bucket="lc-versions", Key="k", Body=data(1000 + i, 40 + i))
    S3.put_object(Bucket="lc-versions", Key="gone", Body=b"soon gone")
    S3.delete_object(Bucket="lc-versions", Key="gone")
    S3.put_bucket_lifecycle_configuration(Bucket="lc-versions", LifecycleConfiguration={"Rules": [
        {"ID": "old", "Filter": {"Prefix": "k"}, "Status": "Enabled",
         "NoncurrentVersionExpiration": {"NoncurrentDays": 1, "NewerNoncurrentVersions": 1}},
        {"ID": "markers", "Filter": {"Prefix": "gone"}, "Status": "Enabled", "Expiration": {"ExpiredObjectDeleteMarker": True},
         "NoncurrentVersionExpiration": {"NoncurrentDays": 1}},
    ]})

    S3.create_bucket(Bucket="lc-bulk")
    S3.put_bucket_versioning(Bucket="lc-bulk", VersioningConfiguration={"Status": "Enabled"})
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda i: S3.put_object(Bucket="lc-bulk", Key=f"bulk/{i:04}", Body=data(10, 100 + i)), range(300)))
    S3.put_object(Bucket="lc-bulk", Key="stay/0", Body=b"stays")
    S3.put_bucket_lifecycle_configuration(Bucket="lc-bulk", LifecycleConfiguration={"Rules": [
        {"ID": "bulk", "Filter": {"Prefix": "bulk/"}, "Status": "Enabled", "Expiration": {"Days": 1}}]})


def all_versions(b):
    out = []
    for page in S3.get_paginator("list_object_versions").paginate(Bucket=b):
        out += [(v["Key"], v["VersionId"], False, v["IsLatest"]) for v in page.get("Versions", [])]
        out += [(v["Key"], v["VersionId"], True, v["IsLatest"]) for v in page.get("DeleteMarkers", [])]
    return out


def lifecycle_check():
    """What the rules left, checked against what they say (not against the store's answer)."""
    keys = sorted(o["Key"] for p in S3.get_paginator("list_objects_v2").paginate(Bucket="lc-plain") for o in p.get("Contents", []))
    check(keys == ["keep/0", "keep/1", "keep/2", "sized/small", "tagged/y"],
          f"lc-plain keeps exactly what no enabled rule matches: {keys}")
    for i in range(3):
        check(get("lc-plain", f"keep/{i}") == data(100 + i, 10 + i), f"keep/{i} byte-exact")
    check(S3.list_multipart_uploads(Bucket="lc-plain").get("Uploads", []) == [], "the incomplete upload was aborted")
    vs = all_versions("lc-versions")
    k = [v for v in vs if v[0] == "k"]
    check(len(k) == 2 and not any(v[2] for v in k), f"k keeps its current version and one noncurrent: {k}")
    bodies = sorted(get("lc-versions", "k", VersionId=v[1]) for v in k)
    check(bodies == sorted([data(1003, 43), data(1002, 42)]), "the two newest versions of k, byte-exact")
    check(not [v for v in vs if v[0] == "gone"], "the lone delete marker and the version under it are gone")
    vs = all_versions("lc-bulk")
    per = {}
    for key, _, marker, latest in vs:
        per.setdefault(key, []).append((marker, latest))
    bulk = {k: v for k, v in per.items() if k.startswith("bulk/")}
    check(len(bulk) == 300, f"300 bulk keys listed: {len(bulk)}")
    bad = {k: v for k, v in bulk.items() if sorted(v) != [(False, False), (True, True)]}
    check(not bad, f"each bulk key expired exactly once (one delete marker over its version): {list(bad.items())[:5]}")
    check(per.get("stay/0") == [(False, True)] and get("lc-bulk", "stay/0") == b"stays", "stay/0 untouched")
    for i in (0, 150, 299):
        check(get("lc-bulk", f"bulk/{i:04}", VersionId=[v[1] for v in vs if v[0] == f"bulk/{i:04}" and not v[2]][0]) == data(10, 100 + i),
              f"bulk/{i:04}'s version under its marker byte-exact")


def slow_clients(b):
    """Slowloris: 200 connections send a request's head a byte a second, and 50 uploads
    declaring 4 GiB stall after 1,000 bytes (they hold only what they sent of the memory
    budget). Meanwhile a 6-byte PUT and a 10 MiB GET complete, about as fast as alone; the
    heads are closed at their deadline, and the idle limit ends the uploads, each answered
    RequestTimeout. A GET whose client stops reading is cut off."""
    IDLE_LIMIT = 8  # seconds: the gateway's idle timeout in both tests that run this
    S3.create_bucket(Bucket=b)
    host, port = ENDPOINT.split("//")[1].split(":")
    ten = data(10 * MIB, 10)
    S3.put_object(Bucket=b, Key="ten", Body=ten)

    def timed():
        t = time.time()
        S3.put_object(Bucket=b, Key="small", Body=b"hello!")
        put = time.time() - t
        t = time.time()
        if get(b, "ten") != ten:
            raise AssertionError("the 10 MiB GET is not whole")
        return put, time.time() - t

    def median5():
        runs = [timed() for _ in range(5)]
        return sorted(r[0] for r in runs)[2], sorted(r[1] for r in runs)[2]

    alone = median5()
    heads = []
    for i in range(200):
        s = socket.create_connection((host, int(port)), timeout=60)
        s.sendall(b"G")
        heads.append(s)
    trickle = threading.Event()

    def trickling():
        line = f"ET /{b}/ten HTTP/1.1\r\nHost: {host}:{port}\r\nX-Slow: ".encode() + b"a" * 1000
        for at in range(len(line)):
            if trickle.wait(1.0):
                return
            for s in heads:
                try:
                    s.send(line[at:at + 1])
                except OSError:
                    pass

    threading.Thread(target=trickling, daemon=True).start()
    stalled, sent_at = [], []
    for i in range(50):
        headers = signed_headers("PUT", f"/{b}/stall{i}", b"")
        s = socket.create_connection((host, int(port)), timeout=60)
        lines = [f"PUT /{b}/stall{i} HTTP/1.1", f"Host: {host}:{port}", "Content-Length: 4294967296"]
        lines += [f"{k}: {v}" for k, v in headers.items() if k.lower() not in ("host", "content-length")]
        s.sendall(("\r\n".join(lines) + "\r\n\r\n").encode() + b"x" * 1000)
        stalled.append(s)
        sent_at.append(time.time())
    answered = {}  # when each stalled upload was first answered (select does not consume it)

    def watching():
        pending = {s.fileno(): i for i, s in enumerate(stalled)}
        deadline = time.time() + 120
        while pending and time.time() < deadline:
            ready, _, _ = select.select(list(pending), [], [], 0.05)
            for fd in ready:
                answered[pending.pop(fd)] = time.time()

    watcher = threading.Thread(target=watching, daemon=True)
    watcher.start()
    time.sleep(0.5)  # for the gateway to take their heads (the checks hold either way)
    loaded = median5()
    print(f"slowloris: 6-byte PUT {loaded[0] * 1000:.1f} ms (alone {alone[0] * 1000:.1f}), "
          f"10 MiB GET {loaded[1] * 1000:.1f} ms (alone {alone[1] * 1000:.1f})", flush=True)
    # Twice as long as alone, with 50 ms for a loopback's scheduling noise on a busy machine.
    check(loaded[0] < 2 * alone[0] + 0.05 and loaded[1] < 2 * alone[1] + 0.05,
          "the PUT and the GET beside 200 slow heads and 50 stalled uploads take at most twice as long")
    check(get(b, "small") == b"hello!", "a PUT beside fifty stalled uploads completed")
    closed = 0
    for s in heads:
        s.settimeout(30)
        try:
            while s.recv(65536):
                pass
            closed += 1
        except socket.timeout:
            pass
        except OSError:  # reset: closed too
            closed += 1
        s.close()
    trickle.set()
    check(closed == 200, "the 200 slow heads were closed at their deadline")
    watcher.join(130)
    # Answered by the idle limit (8 s after their last byte), not before: a gateway that
    # refused them at once would pass the checks above without holding them.
    early = sorted(round(answered[i] - sent_at[i], 1) for i in answered if answered[i] - sent_at[i] < IDLE_LIMIT - 1)
    check(len(answered) == 50 and not early,
          f"the stalled uploads were answered once idle for the limit ({len(answered)} answered; early: {early})")
    timed_out = 0
    for s in stalled:
        out = read_to_end(s)
        s.close()
        if out.startswith(b"HTTP/1.1 400") and b"RequestTimeout" in out:
            timed_out += 1
        else:
            print(f"a stalled upload was answered otherwise: {out[:200]!r}")
    check(timed_out == 50, f"every stalled upload is answered RequestTimeout ({timed_out} of 50)")
    s = socket.create_connection((host, int(port)), timeout=60)
    s.sendall(f"PUT /{b}/slow HTTP/1.1\r\nHost: {host}:{port}\r\n".encode())
    started = time.time()
    while s.recv(65536):  # whatever it is told (hyper may answer 408), then the end; a timeout raises
        pass
    check(time.time() - started < 30, f"the slow head's connection was closed after {time.time() - started:.1f} s")
    s.close()
    check(sorted(o["Key"] for o in S3.list_objects_v2(Bucket=b).get("Contents", [])) == ["small", "ten"],
          "nothing of the stalled uploads is stored")
    # A GET whose client stops reading: cut off once its writes wait past the idle limit.
    big = data(32 * MIB, 5)  # more than the socket buffers on both sides hold
    S3.put_object(Bucket=b, Key="big", Body=big)
    headers = signed_headers("GET", f"/{b}/big", b"")
    s = socket.create_connection((host, int(port)), timeout=60)
    lines = [f"GET /{b}/big HTTP/1.1", f"Host: {host}:{port}"] + [f"{k}: {v}" for k, v in headers.items() if k.lower() != "host"]
    s.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
    got = len(s.recv(4096))
    time.sleep(12)  # the stimulus: a client that reads nothing for longer than the idle limit (8 s)
    try:
        while True:
            chunk = s.recv(1 << 20)
            if not chunk:
                break
            got += len(chunk)
    except ConnectionResetError:
        pass
    s.close()
    check(got < len(big), f"the unread GET was cut off after {got} of {len(big)} bytes")
    check(get(b, "big") == big, "a GET that reads is served in full")


def mpu_begin(b, state):
    """Begins an upload of two parts and keeps what completing it needs in `state`."""
    S3.create_bucket(Bucket=b)
    uid = S3.create_multipart_upload(Bucket=b, Key="retried")["UploadId"]
    parts = [data(MIB, "retried-1"), data(1001, "retried-2")]
    done = [{"PartNumber": i, "ETag": S3.upload_part(Bucket=b, Key="retried", UploadId=uid, PartNumber=i, Body=p)["ETag"]}
            for i, p in enumerate(parts, 1)]
    with open(state, "w") as f:
        json.dump({"upload": uid, "parts": done}, f)


def mpu_complete(b, state):
    """Completes the upload in `state` (again, if it was); the object must be whole either way."""
    with open(state) as f:
        st = json.load(f)
    r = S3.complete_multipart_upload(Bucket=b, Key="retried", UploadId=st["upload"], MultipartUpload={"Parts": st["parts"]})
    whole = data(MIB, "retried-1") + data(1001, "retried-2")
    md5s = hashlib.md5(whole[:MIB]).digest() + hashlib.md5(whole[MIB:]).digest()
    check(r["ETag"].strip('"') == f"{hashlib.md5(md5s).hexdigest()}-2", "the completion answers the multipart ETag")
    check(get(b, "retried") == whole, "the completed object is byte-exact")


def object_lock(b):
    """Object lock through boto3: COMPLIANCE never yields, GOVERNANCE only to the bypass, a
    legal hold to nothing; retention is only extended; every delete path is held."""
    S3.create_bucket(Bucket=b, ObjectLockEnabledForBucket=True)
    check(S3.get_bucket_versioning(Bucket=b).get("Status") == "Enabled", "a lock bucket is versioned from the start")
    S3.put_object_lock_configuration(Bucket=b, ObjectLockConfiguration={
        "ObjectLockEnabled": "Enabled", "Rule": {"DefaultRetention": {"Mode": "GOVERNANCE", "Days": 1}}})
    cfg = S3.get_object_lock_configuration(Bucket=b)["ObjectLockConfiguration"]
    check(cfg["Rule"]["DefaultRetention"] == {"Mode": "GOVERNANCE", "Days": 1}, f"the default retention reads back: {cfg}")
    check(error_code(S3.put_bucket_versioning, Bucket=b, VersioningConfiguration={"Status": "Suspended"})
          == ("InvalidBucketState", 409), "versioning of a lock bucket is not suspended")

    until = datetime.now(timezone.utc) + timedelta(days=1)
    body = data(100_001, "locked")
    vc = S3.put_object(Bucket=b, Key="c", Body=body, ObjectLockMode="COMPLIANCE", ObjectLockRetainUntilDate=until)["VersionId"]
    h = S3.head_object(Bucket=b, Key="c")
    check(h["ObjectLockMode"] == "COMPLIANCE" and abs((h["ObjectLockRetainUntilDate"] - until).total_seconds()) < 1,
          f"HEAD answers the retention: {h.get('ObjectLockMode')} {h.get('ObjectLockRetainUntilDate')}")
    check(error_code(S3.delete_object, Bucket=b, Key="c", VersionId=vc) == ("AccessDenied", 403), "a COMPLIANCE version is not deleted")
    check(error_code(S3.delete_object, Bucket=b, Key="c", VersionId=vc, BypassGovernanceRetention=True) == ("AccessDenied", 403),
          "nor with the governance bypass")
    r = S3.delete_objects(Bucket=b, Delete={"Objects": [{"Key": "c", "VersionId": vc}]}, BypassGovernanceRetention=True)
    check([e["Code"] for e in r.get("Errors", [])] == ["AccessDenied"], f"nor by DeleteObjects: {r}")
    check(error_code(S3.put_object_retention, Bucket=b, Key="c", VersionId=vc,
                     Retention={"Mode": "COMPLIANCE", "RetainUntilDate": until - timedelta(hours=1)}, BypassGovernanceRetention=True)
          == ("AccessDenied", 403), "a COMPLIANCE retention is not shortened")
    check(error_code(S3.put_object_retention, Bucket=b, Key="c", VersionId=vc,
                     Retention={"Mode": "GOVERNANCE", "RetainUntilDate": until + timedelta(days=1)}) == ("AccessDenied", 403),
          "nor weakened to GOVERNANCE")
    later = until + timedelta(days=2)
    S3.put_object_retention(Bucket=b, Key="c", VersionId=vc, Retention={"Mode": "COMPLIANCE", "RetainUntilDate": later})
    r = S3.get_object_retention(Bucket=b, Key="c", VersionId=vc)["Retention"]
    check(r["Mode"] == "COMPLIANCE" and abs((r["RetainUntilDate"] - later).total_seconds()) < 1, "a retention is extended")
    # Overwritten and deleted without a version id: a new version and a marker; the locked one stays.
    S3.put_object(Bucket=b, Key="c", Body=b"newer")
    m = S3.delete_object(Bucket=b, Key="c")
    check(m.get("DeleteMarker") is True, "a delete without a version id writes a marker over a locked version")
    check(S3.get_object(Bucket=b, Key="c", VersionId=vc)["Body"].read() == body, "the locked version reads back whole")

    vg = S3.put_object(Bucket=b, Key="g", Body=b"governed")["VersionId"]
    h = S3.head_object(Bucket=b, Key="g", VersionId=vg)
    check(h["ObjectLockMode"] == "GOVERNANCE", "the bucket's default retention applies to a write without one")
    check(error_code(S3.delete_object, Bucket=b, Key="g", VersionId=vg) == ("AccessDenied", 403), "GOVERNANCE keeps without the bypass")
    S3.put_object_legal_hold(Bucket=b, Key="g", VersionId=vg, LegalHold={"Status": "ON"})
    check(S3.get_object_legal_hold(Bucket=b, Key="g", VersionId=vg)["LegalHold"]["Status"] == "ON", "a legal hold reads back")
    check(error_code(S3.delete_object, Bucket=b, Key="g", VersionId=vg, BypassGovernanceRetention=True) == ("AccessDenied", 403),
          "a legal hold keeps even with the bypass")
    S3.put_object_legal_hold(Bucket=b, Key="g", VersionId=vg, LegalHold={"Status": "OFF"})
    S3.delete_object(Bucket=b, Key="g", VersionId=vg, BypassGovernanceRetention=True)
    check(error_code(S3.head_object, Bucket=b, Key="g", VersionId=vg)[1] == 404, "GOVERNANCE yields to the bypass once the hold is off")

    up = S3.create_multipart_upload(Bucket=b, Key="m", ObjectLockMode="COMPLIANCE", ObjectLockRetainUntilDate=until)["UploadId"]
    e = S3.upload_part(Bucket=b, Key="m", UploadId=up, PartNumber=1, Body=b"multi")["ETag"]
    vm = S3.complete_multipart_upload(Bucket=b, Key="m", UploadId=up, MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": e}]})["VersionId"]
    check(S3.head_object(Bucket=b, Key="m")["ObjectLockMode"] == "COMPLIANCE", "a multipart upload's lock is its object's")
    check(error_code(S3.delete_object, Bucket=b, Key="m", VersionId=vm) == ("AccessDenied", 403), "a locked multipart object is kept")
    up = S3.create_multipart_upload(Bucket=b, Key="aborted", ObjectLockLegalHoldStatus="ON")["UploadId"]
    S3.abort_multipart_upload(Bucket=b, Key="aborted", UploadId=up)
    check(error_code(S3.list_parts, Bucket=b, Key="aborted", UploadId=up)[0] == "NoSuchUpload", "an upload asking for a lock still aborts")

    S3.create_bucket(Bucket=b + "-plain")
    check(error_code(S3.put_object, Bucket=b + "-plain", Key="k", Body=b"x", ObjectLockLegalHoldStatus="ON")
          == ("InvalidRequest", 400), "a lock asked in a bucket without lock is refused")
    check(error_code(S3.get_object_lock_configuration, Bucket=b + "-plain")[0] == "ObjectLockConfigurationNotFoundError",
          "a bucket without lock has no configuration")
    with open(os.environ["LOCK_STATE"], "w") as f:
        json.dump({"c": vc, "m": vm}, f)


def object_lock_check(b):
    """After the coordinator's restart: the locked versions are still kept."""
    with open(os.environ["LOCK_STATE"]) as f:
        st = json.load(f)
    got = error_code(S3.delete_object, Bucket=b, Key="c", VersionId=st["c"], BypassGovernanceRetention=True)
    check(got == ("AccessDenied", 403), f"after a restart the COMPLIANCE version is still kept: {got}")
    check(S3.get_object(Bucket=b, Key="c", VersionId=st["c"])["Body"].read() == data(100_001, "locked"), "and reads back whole")


def scoped_keys():
    """Keys kept in the cluster, each allowed what its grants say (KEYS: name=AK:SK,...)."""
    keys = dict((n, v.split(":", 1)) for n, v in (kv.split("=", 1) for kv in os.environ["KEYS"].split(",")))
    as_ = {n: client(secret=sk, access=ak) for n, (ak, sk) in keys.items()}
    ro, rw, none, maker = as_["ro"], as_["rw"], as_["none"], as_["maker"]
    S3.create_bucket(Bucket="shared")
    S3.create_bucket(Bucket="private")
    S3.put_object(Bucket="shared", Key="a", Body=b"shared bytes")
    S3.put_object(Bucket="private", Key="b", Body=b"private bytes")
    denied = ("AccessDenied", 403)

    check(ro.get_object(Bucket="shared", Key="a")["Body"].read() == b"shared bytes", "a read key reads its bucket")
    check(len(ro.list_objects_v2(Bucket="shared")["Contents"]) == 1, "a read key lists its bucket")
    check(error_code(ro.put_object, Bucket="shared", Key="x", Body=b"x") == denied, "a read key cannot PUT")
    check(error_code(ro.delete_object, Bucket="shared", Key="a") == denied, "a read key cannot DELETE")
    check(error_code(ro.list_objects_v2, Bucket="private") == denied, "a key without a bucket cannot list it")
    check(error_code(ro.get_object, Bucket="private", Key="b") == denied, "nor read it")
    check([b["Name"] for b in ro.list_buckets()["Buckets"]] == ["shared"], "ListBuckets shows a key its buckets only")
    check(error_code(ro.create_bucket, Bucket="ro-made") == denied, "a key without the flag cannot create buckets")
    url = ro.generate_presigned_url("get_object", Params={"Bucket": "shared", "Key": "a"}, ExpiresIn=300)
    check(urllib.request.urlopen(url).read() == b"shared bytes", "a presigned GET carries its signer's read permission")
    put_url = ro.generate_presigned_url("put_object", Params={"Bucket": "shared", "Key": "p"}, ExpiresIn=300)
    try:
        urllib.request.urlopen(urllib.request.Request(put_url, data=b"p", method="PUT"))
        raise AssertionError("a presigned PUT of a read key was served")
    except urllib.error.HTTPError as e:
        check(e.code == 403, "a presigned PUT carries no more than its signer's read permission")

    rw.put_object(Bucket="shared", Key="x", Body=b"written")
    check(S3.get_object(Bucket="shared", Key="x")["Body"].read() == b"written", "a write key PUTs")
    rw.copy_object(Bucket="shared", Key="c", CopySource={"Bucket": "shared", "Key": "a"})
    check(error_code(rw.copy_object, Bucket="shared", Key="d", CopySource={"Bucket": "private", "Key": "b"}) == denied,
          "a copy needs read where it comes from")
    rw.delete_object(Bucket="shared", Key="x")
    check(error_code(rw.put_bucket_versioning, Bucket="shared", VersioningConfiguration={"Status": "Enabled"}) == denied,
          "a write key does not change the bucket's settings")
    check(error_code(rw.delete_bucket, Bucket="shared") == denied, "nor delete it")

    check(error_code(none.list_objects_v2, Bucket="shared") == denied, "a key with no grant lists nothing")
    check(none.list_buckets().get("Buckets", []) == [], "and sees no bucket")

    maker.create_bucket(Bucket="made")
    maker.put_object(Bucket="made", Key="k", Body=b"mine")
    maker.put_bucket_versioning(Bucket="made", VersioningConfiguration={"Status": "Enabled"})
    check([b["Name"] for b in maker.list_buckets()["Buckets"]] == ["made"], "a key owns the bucket it creates")
    check(error_code(maker.get_object, Bucket="shared", Key="a") == denied, "and no other")

    host, port = ENDPOINT.split("//")[1].split(":")
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(f"GET /shared/a HTTP/1.1\r\nHost: {host}:{port}\r\nConnection: close\r\n\r\n".encode())
        got = read_to_end(sock)
    check(got.startswith(b"HTTP/1.1 403"), f"an anonymous GET is refused: {got[:40]!r}")


def policies():
    """Bucket policies: a public prefix anonymous clients may read and list and nothing else,
    a Deny that overrules a key's grant, a Deny of plain HTTP that holds even for a bootstrap
    key (which may still remove it), and what the gateway does not evaluate refused."""
    import json
    keys = dict((n, v.split(":", 1)) for n, v in (kv.split("=", 1) for kv in os.environ["KEYS"].split(",")))
    ro_ak, ro_sk = keys["ro"]
    ro = client(secret=ro_sk, access=ro_ak)
    anon = boto3.client("s3", endpoint_url=ENDPOINT, region_name="us-east-1",
                        config=Config(signature_version=botocore.UNSIGNED, s3={"addressing_style": "path"},
                                      retries={"max_attempts": 1}))
    denied = ("AccessDenied", 403)
    S3.create_bucket(Bucket="site")
    S3.put_object(Bucket="site", Key="public/a.html", Body=b"<p>public</p>")
    S3.put_object(Bucket="site", Key="private/b", Body=b"private")
    check(error_code(anon.get_object, Bucket="site", Key="public/a.html") == denied, "without a policy nothing is public")
    check(error_code(S3.get_bucket_policy, Bucket="site")[0] == "NoSuchBucketPolicy", "no policy yet")
    public = {"Version": "2012-10-17", "Statement": [
        {"Sid": "PublicRead", "Effect": "Allow", "Principal": "*", "Action": "s3:GetObject",
         "Resource": "arn:aws:s3:::site/public/*"},
        {"Sid": "PublicList", "Effect": "Allow", "Principal": "*", "Action": "s3:ListBucket", "Resource": "arn:aws:s3:::site",
         "Condition": {"StringLike": {"s3:prefix": "public/*"}}}]}
    S3.put_bucket_policy(Bucket="site", Policy=json.dumps(public))
    check(json.loads(S3.get_bucket_policy(Bucket="site")["Policy"]) == public, "the policy reads back")
    check(anon.get_object(Bucket="site", Key="public/a.html")["Body"].read() == b"<p>public</p>",
          "an anonymous GET under the public prefix is served")
    check(anon.head_object(Bucket="site", Key="public/a.html")["ContentLength"] == 13, "and HEAD")
    check(error_code(anon.get_object, Bucket="site", Key="private/b") == denied, "but not outside it")
    check(error_code(anon.put_object, Bucket="site", Key="public/x", Body=b"x") == denied, "an anonymous PUT is refused")
    check(error_code(anon.delete_object, Bucket="site", Key="public/a.html") == denied, "an anonymous DELETE is refused")
    listed = [o["Key"] for o in anon.list_objects_v2(Bucket="site", Prefix="public/")["Contents"]]
    check(listed == ["public/a.html"], f"an anonymous listing of the public prefix: {listed}")
    check(error_code(anon.list_objects_v2, Bucket="site") == denied, "an anonymous listing of the whole bucket is refused")
    check(error_code(anon.list_buckets) == denied, "anonymous ListBuckets is refused")
    check(error_code(anon.get_object, Bucket="shared", Key="a") == denied, "another bucket stays closed")

    no_a = {"Version": "2012-10-17", "Statement": [
        {"Effect": "Deny", "Principal": {"AWS": [ro_ak]}, "Action": "s3:GetObject", "Resource": "arn:aws:s3:::shared/a"}]}
    S3.put_bucket_policy(Bucket="shared", Policy=json.dumps(no_a))
    check(error_code(ro.get_object, Bucket="shared", Key="a") == denied, "a policy's Deny overrules the key's read grant")
    check(len(ro.list_objects_v2(Bucket="shared")["Contents"]) >= 1, "and only what it names")
    tls_only = {"Version": "2012-10-17", "Statement": [
        {"Effect": "Deny", "Principal": "*", "Action": "s3:*", "Resource": ["arn:aws:s3:::shared", "arn:aws:s3:::shared/*"],
         "Condition": {"Bool": {"aws:SecureTransport": "false"}}}]}
    S3.put_bucket_policy(Bucket="shared", Policy=json.dumps(tls_only))
    check(error_code(S3.get_object, Bucket="shared", Key="a") == denied, "a Deny of plain HTTP holds for a bootstrap key")
    S3.delete_bucket_policy(Bucket="shared")
    check(S3.get_object(Bucket="shared", Key="a")["Body"].read() == b"shared bytes", "which may remove the policy")

    for bad, why in [
        ({"Effect": "Allow", "Principal": "*", "Action": "s3:GetObject", "Resource": "arn:aws:s3:::site/*",
          "Condition": {"DateGreaterThan": {"aws:CurrentTime": "2030-01-01T00:00:00Z"}}}, "an operator not evaluated"),
        ({"Effect": "Allow", "Principal": "*", "Action": "s3:GetObject", "Resource": "arn:aws:s3:::shared/*"},
         "another bucket's resource"),
        ({"Effect": "Allow", "NotPrincipal": {"AWS": ro_ak}, "Action": "s3:GetObject", "Resource": "arn:aws:s3:::site/*"},
         "NotPrincipal"),
    ]:
        got = error_code(S3.put_bucket_policy, Bucket="site", Policy=json.dumps({"Version": "2012-10-17", "Statement": [bad]}))
        check(got == ("MalformedPolicy", 400), f"a policy with {why} is refused: {got}")
    check(json.loads(S3.get_bucket_policy(Bucket="site")["Policy"]) == public, "a refused policy changes nothing")
    S3.delete_bucket_policy(Bucket="site")
    check(error_code(anon.get_object, Bucket="site", Key="public/a.html") == denied, "the policy removed, nothing is public")


def acls():
    """Canned ACLs in a bucket whose Object Ownership takes them: an object's opens it to
    anonymous or signed reads, the bucket's to listing and writing; BucketOwnerEnforced
    turns them off again (KEYS as scoped-keys: `none` signs but holds no grant)."""
    keys = dict((n, v.split(":", 1)) for n, v in (kv.split("=", 1) for kv in os.environ["KEYS"].split(",")))
    none = client(secret=keys["none"][1], access=keys["none"][0])
    anon = boto3.client("s3", endpoint_url=ENDPOINT, region_name="us-east-1",
                        config=Config(signature_version=botocore.UNSIGNED, s3={"addressing_style": "path"},
                                      retries={"max_attempts": 1}))
    denied = ("AccessDenied", 403)
    S3.create_bucket(Bucket="acl-on", ObjectOwnership="ObjectWriter")
    rule = S3.get_bucket_ownership_controls(Bucket="acl-on")["OwnershipControls"]["Rules"][0]
    check(rule["ObjectOwnership"] == "ObjectWriter", f"the ownership reads back: {rule}")
    S3.put_object(Bucket="acl-on", Key="pub", Body=b"for everyone", ACL="public-read")
    S3.put_object(Bucket="acl-on", Key="priv", Body=b"for the owner")
    check(anon.get_object(Bucket="acl-on", Key="pub")["Body"].read() == b"for everyone", "a public-read object is read anonymously")
    check(error_code(anon.get_object, Bucket="acl-on", Key="priv") == denied, "a private one is not")
    grants = S3.get_object_acl(Bucket="acl-on", Key="pub")["Grants"]
    check(any(g["Grantee"].get("URI", "").endswith("/AllUsers") and g["Permission"] == "READ" for g in grants),
          f"GetObjectAcl names AllUsers READ: {grants}")
    check(error_code(anon.list_objects_v2, Bucket="acl-on") == denied, "a private bucket is not listed anonymously")
    S3.put_bucket_acl(Bucket="acl-on", ACL="public-read")
    check(len(anon.list_objects_v2(Bucket="acl-on")["Contents"]) == 2, "a public-read bucket is listed anonymously")
    check(error_code(anon.put_object, Bucket="acl-on", Key="new", Body=b"x") == denied, "but not written")
    S3.put_bucket_acl(Bucket="acl-on", ACL="public-read-write")
    anon.put_object(Bucket="acl-on", Key="new", Body=b"written by anyone")
    check(S3.get_object(Bucket="acl-on", Key="new")["Body"].read() == b"written by anyone", "a public-read-write bucket takes anonymous writes")
    S3.put_object_acl(Bucket="acl-on", Key="priv", ACL="authenticated-read")
    check(error_code(anon.get_object, Bucket="acl-on", Key="priv") == denied, "authenticated-read is not anonymous")
    check(none.get_object(Bucket="acl-on", Key="priv")["Body"].read() == b"for the owner", "but any signed key reads it")
    got = error_code(S3.put_bucket_ownership_controls, Bucket="acl-on",
                     OwnershipControls={"Rules": [{"ObjectOwnership": "BucketOwnerEnforced"}]})
    check(got[0] == "InvalidBucketAclWithObjectOwnership", f"enforcing ownership over a public bucket ACL is refused: {got}")
    S3.put_bucket_acl(Bucket="acl-on", ACL="private")
    S3.put_bucket_ownership_controls(Bucket="acl-on", OwnershipControls={"Rules": [{"ObjectOwnership": "BucketOwnerEnforced"}]})
    check(error_code(anon.get_object, Bucket="acl-on", Key="pub") == denied, "with ownership enforced, ACLs grant nothing")
    got = error_code(S3.put_object, Bucket="acl-on", Key="x", Body=b"x", ACL="public-read")
    check(got[0] == "AccessControlListNotSupported", f"and are refused: {got}")


def scoped_revoked():
    """The `ro` key was revoked at REVOKED_AT (epoch seconds): refused within a second."""
    keys = dict((n, v.split(":", 1)) for n, v in (kv.split("=", 1) for kv in os.environ["KEYS"].split(",")))
    ak, sk = keys["ro"]
    ro = client(secret=sk, access=ak)
    revoked_at = float(os.environ["REVOKED_AT"])
    while True:
        try:
            ro.head_object(Bucket="shared", Key="a")
        except botocore.exceptions.ClientError as e:
            if e.response["ResponseMetadata"]["HTTPStatusCode"] == 403:
                break
            raise
        if time.time() - revoked_at > 5:
            raise AssertionError("a revoked key still served after 5 s")
        time.sleep(0.05)
    took = time.time() - revoked_at
    check(took < 1.5, f"a revoked key is refused {took:.2f} s after its revocation")
    check(error_code(ro.list_objects_v2, Bucket="shared")[0] == "InvalidAccessKeyId", "as a key that does not exist")


MARK_SEALED = b"kintsugi: this must not be seen!"  # 32 bytes, in every encrypted object
MARK_PLAIN = b"kintsugi: stored as it was sent."  # 32 bytes, in an object stored unencrypted
SSE_C_KEY = hashlib.sha256(b"the customer's own key").digest()
SSE_C = {"SSECustomerAlgorithm": "AES256", "SSECustomerKey": SSE_C_KEY}
SOURCE_C = {"CopySourceSSECustomerAlgorithm": "AES256", "CopySourceSSECustomerKey": SSE_C_KEY}


def marked(n, seed, mark=MARK_SEALED):
    """n bytes with `mark` at every 4 KiB."""
    d = bytearray(data(n, seed))
    for at in range(0, n - len(mark) + 1, 4096):
        d[at:at + len(mark)] = mark
    return bytes(d)


MP_PARTS = [300_001, 300_001, 4321]


def sse_objects():
    """Every encrypted object of `sse-put`: (bucket, key, its bytes, what reading it takes)."""
    s3, c = marked(3 * MIB + 12345, 1), marked(2 * MIB + 777, 2)
    mp = [marked(n, 10 + i) for i, n in enumerate(MP_PARTS)]
    return [
        ("enc", "s3", s3, {}),
        ("enc", "c", c, SSE_C),
        ("enc", "empty", b"", {}),
        ("dflt", "d", marked(MIB + 3, 3), {}),
        ("enc", "mp-c", b"".join(mp), SSE_C),
        ("dflt", "mp", b"".join(reversed(mp)), {}),
        ("enc", "upc", c[100:400_101] + mp[2], {}),
        ("enc", "c-to-s3", c, {}),
        ("dflt", "s3-to-c", s3, SSE_C),
    ]


def sse_put():
    """Objects sealed every way: SSE-S3, SSE-C, a bucket's default, multipart (each part
    sealed), UploadPartCopy and CopyObject from one encryption to another; and one plain."""
    objs = {(b, k): (body, extra) for b, k, body, extra in sse_objects()}
    for b in ["enc", "dflt", "plain"]:
        S3.create_bucket(Bucket=b)
    check(error_code(S3.get_bucket_encryption, Bucket="dflt")[0] == "ServerSideEncryptionConfigurationNotFoundError",
          "a bucket has no default encryption until given one")
    S3.put_bucket_encryption(Bucket="dflt", ServerSideEncryptionConfiguration={
        "Rules": [{"ApplyServerSideEncryptionByDefault": {"SSEAlgorithm": "AES256"}}]})
    rule = S3.get_bucket_encryption(Bucket="dflt")["ServerSideEncryptionConfiguration"]["Rules"][0]
    check(rule["ApplyServerSideEncryptionByDefault"]["SSEAlgorithm"] == "AES256", f"the default reads back: {rule}")
    for key in ["s3", "empty"]:
        body = objs[("enc", key)][0]
        r = S3.put_object(Bucket="enc", Key=key, Body=body, ServerSideEncryption="AES256")
        check(r["ServerSideEncryption"] == "AES256", f"PUT {key} answers SSE-S3")
        check(r["ETag"].strip('"') == hashlib.md5(body).hexdigest(), "an SSE-S3 object's ETag is its bytes' MD5")
    c = objs[("enc", "c")][0]
    r = S3.put_object(Bucket="enc", Key="c", Body=c, **SSE_C)
    key_md5 = base64.b64encode(hashlib.md5(SSE_C_KEY).digest()).decode()
    check(r["SSECustomerAlgorithm"] == "AES256" and r["SSECustomerKeyMD5"] == key_md5, "PUT with SSE-C answers the key's MD5")
    check(r["ETag"].strip('"') != hashlib.md5(c).hexdigest(), "an SSE-C object's ETag is not its bytes' MD5")
    r = S3.put_object(Bucket="dflt", Key="d", Body=objs[("dflt", "d")][0])
    check(r.get("ServerSideEncryption") == "AES256", "a plain PUT into the default-encrypted bucket is sealed")
    mp = [marked(n, 10 + i) for i, n in enumerate(MP_PARTS)]
    for b, key, parts, extra in [("enc", "mp-c", mp, SSE_C), ("dflt", "mp", list(reversed(mp)), {})]:
        u = S3.create_multipart_upload(Bucket=b, Key=key, **extra)["UploadId"]
        done = []
        for n, part in enumerate(parts, 1):
            r = S3.upload_part(Bucket=b, Key=key, UploadId=u, PartNumber=n, Body=part, **extra)
            done.append({"PartNumber": n, "ETag": r["ETag"]})
        if extra:
            got = error_code(S3.upload_part, Bucket=b, Key=key, UploadId=u, PartNumber=9, Body=b"x")
            check(got[1] == 400, f"a part of an SSE-C upload without the key is refused: {got}")
        listed = S3.list_parts(Bucket=b, Key=key, UploadId=u)["Parts"]
        check([p["Size"] for p in listed] == [len(p) for p in parts], "ListParts gives the parts' own sizes")
        r = S3.complete_multipart_upload(Bucket=b, Key=key, UploadId=u, MultipartUpload={"Parts": done})
    u = S3.create_multipart_upload(Bucket="enc", Key="upc", ServerSideEncryption="AES256")["UploadId"]
    r1 = S3.upload_part_copy(Bucket="enc", Key="upc", UploadId=u, PartNumber=1, CopySource={"Bucket": "enc", "Key": "c"},
                             CopySourceRange="bytes=100-400100", **SOURCE_C)
    r2 = S3.upload_part(Bucket="enc", Key="upc", UploadId=u, PartNumber=2, Body=mp[2])
    S3.complete_multipart_upload(Bucket="enc", Key="upc", UploadId=u, MultipartUpload={"Parts": [
        {"PartNumber": 1, "ETag": r1["CopyPartResult"]["ETag"]}, {"PartNumber": 2, "ETag": r2["ETag"]}]})
    got = error_code(S3.copy_object, Bucket="enc", Key="nope", CopySource={"Bucket": "enc", "Key": "c"})
    check(got[1] == 400, f"a copy of an SSE-C object without its key is refused: {got}")
    r = S3.copy_object(Bucket="enc", Key="c-to-s3", CopySource={"Bucket": "enc", "Key": "c"}, ServerSideEncryption="AES256",
                       **SOURCE_C)
    check(r["ServerSideEncryption"] == "AES256", "the copy is sealed by SSE-S3")
    S3.copy_object(Bucket="dflt", Key="s3-to-c", CopySource={"Bucket": "enc", "Key": "s3"}, **SSE_C)
    S3.put_object(Bucket="plain", Key="p", Body=marked(MIB, 9, MARK_PLAIN))
    print("sse-put: every object written")


def sse_check():
    """Every encrypted object reads back byte-exact whole, in odd ranges and by part; keys
    are demanded and checked; listings give the plaintext's sizes."""
    import random
    rng = random.Random(int(os.environ.get("SSE_SEED", "1")))
    sizes = {}
    for b, key, body, extra in sse_objects():
        n = len(body)
        sizes[(b, key)] = n
        got = get(b, key, **extra)
        check(got == body, f"{b}/{key}: {n} bytes whole")
        h = S3.head_object(Bucket=b, Key=key, **extra)
        check(h["ContentLength"] == n, f"{b}/{key}: HEAD gives {h['ContentLength']} bytes")
        if extra:
            check(h["SSECustomerAlgorithm"] == "AES256", "HEAD says SSE-C")
        else:
            check(h["ServerSideEncryption"] == "AES256", "HEAD says SSE-S3")
        if n == 0:
            continue
        cases = [(0, 1), (n - 1, n), (min(4095, n - 1), min(n, 4097 + 65536)), (min(65535, n - 1), min(n, 65537))]
        cases += [sorted((rng.randrange(n), rng.randrange(n) + 1)) for _ in range(4)]
        for a, e in cases:
            if a >= e:
                continue
            got = get(b, key, Range=f"bytes={a}-{e - 1}", **extra)
            check(got == body[a:e], f"{b}/{key}: bytes {a}-{e - 1}")
    parts = [marked(n, 10 + i) for i, n in enumerate(MP_PARTS)]
    check(get("enc", "mp-c", PartNumber=2, **SSE_C) == parts[1], "part 2 of an encrypted multipart object")
    got = error_code(S3.get_object, Bucket="enc", Key="c")
    check(got == ("InvalidRequest", 400), f"GET of an SSE-C object without its key: {got}")
    wrong = {"SSECustomerAlgorithm": "AES256", "SSECustomerKey": hashlib.sha256(b"a wrong key").digest()}
    got = error_code(S3.get_object, Bucket="enc", Key="c", **wrong)
    check(got[1] == 403, f"GET with a wrong key: {got}")
    check(error_code(S3.head_object, Bucket="enc", Key="c")[1] == 400, "HEAD without the key")
    check(error_code(S3.head_object, Bucket="enc", Key="c", **wrong)[1] == 403, "HEAD with a wrong key")
    got = error_code(S3.get_object, Bucket="enc", Key="s3", **SSE_C)
    check(got == ("InvalidRequest", 400), f"an SSE-C key for an SSE-S3 object: {got}")
    for b in ["enc", "dflt"]:
        for o in S3.list_objects_v2(Bucket=b)["Contents"]:
            check(o["Size"] == sizes[(b, o["Key"])], f"{b}/{o['Key']} listed at {o['Size']} bytes")
    print("sse-check: every encrypted object byte-exact")


if __name__ == "__main__":
    what = sys.argv[1]
    if what == "suite":
        suite()
    elif what == "degraded-put":
        degraded_put(sys.argv[2])
    elif what == "degraded-check":
        degraded_check(sys.argv[2])
    elif what == "cors-setup":
        cors_setup(sys.argv[2], sys.argv[3])
    elif what == "cors-check":
        cors_check(sys.argv[2])
    elif what == "slow-clients":
        slow_clients(sys.argv[2])
    elif what == "lifecycle-setup":
        lifecycle_setup()
    elif what == "lifecycle-check":
        lifecycle_check()
    elif what == "cut-read":
        cut_read(sys.argv[2])
    elif what == "scoped-keys":
        scoped_keys()
    elif what == "policies":
        policies()
    elif what == "acls":
        acls()
    elif what == "scoped-revoked":
        scoped_revoked()
    elif what == "object-lock":
        object_lock(sys.argv[2])
    elif what == "object-lock-check":
        object_lock_check(sys.argv[2])
    elif what == "mpu-begin":
        mpu_begin(sys.argv[2], sys.argv[3])
    elif what == "mpu-complete":
        mpu_complete(sys.argv[2], sys.argv[3])
    elif what == "sse-put":
        sse_put()
    elif what == "sse-check":
        sse_check()
    elif what == "unreadable-check":
        unreadable_check(sys.argv[2])
    else:
        sys.exit(f"unknown: {what}")
