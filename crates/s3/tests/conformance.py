#!/usr/bin/env python3
"""S3 conformance tests, written from the AWS S3 API reference, runnable against any S3
endpoint: one test per operation and per documented error.

    python3 conformance.py --endpoint http://127.0.0.1:9000 --access-key AK --secret-key SK

Each test makes its own bucket (random name) and removes it. Exit status 0 when every test
passes; the summary line says how many passed of how many. `--json` prints the results as
JSON; `--only NAME` runs the tests whose names contain NAME. The same tests run against an
independent implementation (moto's server mode) check the tests themselves.
"""
import argparse
import base64
import datetime
import hashlib
import json
import os
import random
import sys
import time
import traceback
import urllib.error
import urllib.request
import uuid
import zlib

import boto3
import botocore
from botocore.config import Config

TESTS = []
MIB = 1 << 20


def test(fn):
    TESTS.append(fn)
    return fn


class Ctx:
    def __init__(self, endpoint, ak, sk, region):
        self.endpoint, self.ak, self.sk, self.region = endpoint, ak, sk, region
        self.s3 = self.client()

    def client(self, **cfg):
        conf = Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1, "mode": "standard"}, **cfg)
        return boto3.client(
            "s3", endpoint_url=self.endpoint, aws_access_key_id=self.ak, aws_secret_access_key=self.sk,
            region_name=self.region, config=conf,
        )

    def bucket(self):
        name = "conf-" + uuid.uuid4().hex[:20]
        self.s3.create_bucket(Bucket=name)
        return name

    def empty(self, b):
        for page in self.s3.get_paginator("list_objects_v2").paginate(Bucket=b):
            for o in page.get("Contents", []):
                self.s3.delete_object(Bucket=b, Key=o["Key"])
        for u in self.s3.list_multipart_uploads(Bucket=b).get("Uploads", []):
            self.s3.abort_multipart_upload(Bucket=b, Key=u["Key"], UploadId=u["UploadId"])
        # Versions and delete markers too, by their ids.
        for page in self.s3.get_paginator("list_object_versions").paginate(Bucket=b):
            for v in page.get("Versions", []) + page.get("DeleteMarkers", []):
                self.s3.delete_object(Bucket=b, Key=v["Key"], VersionId=v["VersionId"])
        self.s3.delete_bucket(Bucket=b)

    def versioned_bucket(self):
        b = self.bucket()
        self.s3.put_bucket_versioning(Bucket=b, VersioningConfiguration={"Status": "Enabled"})
        return b


def data(n, seed):
    r = random.Random(seed)
    return r.randbytes(n)


def md5_hex(b):
    return hashlib.md5(b).hexdigest()


def b64(d):
    return base64.b64encode(d).decode()


def crc32_b64(b):
    return b64(zlib.crc32(b).to_bytes(4, "big"))


def sha256_b64(b):
    return b64(hashlib.sha256(b).digest())


def error(fn, *args, **kwargs):
    """The S3 error code and HTTP status a call fails with (AssertionError if it succeeds)."""
    try:
        fn(*args, **kwargs)
    except botocore.exceptions.ClientError as e:
        return e.response["Error"]["Code"], e.response["ResponseMetadata"]["HTTPStatusCode"]
    raise AssertionError(f"{getattr(fn, '__name__', fn)} succeeded; an error was expected")


def eq(got, want, what):
    if got != want:
        raise AssertionError(f"{what}: got {got!r}, want {want!r}")


def etag(r):
    return r["ETag"].strip('"')


# ---- buckets ----

@test
def create_head_list_delete_bucket(c):
    b = c.bucket()
    c.s3.head_bucket(Bucket=b)
    eq(b in [x["Name"] for x in c.s3.list_buckets()["Buckets"]], True, "ListBuckets names the new bucket")
    c.s3.delete_bucket(Bucket=b)
    eq(error(c.s3.head_bucket, Bucket=b)[1], 404, "HeadBucket of a deleted bucket")


@test
def delete_bucket_errors(c):
    eq(error(c.s3.delete_bucket, Bucket="conf-missing-" + uuid.uuid4().hex[:8]), ("NoSuchBucket", 404), "DeleteBucket of none")
    b = c.bucket()
    c.s3.put_object(Bucket=b, Key="k", Body=b"x")
    eq(error(c.s3.delete_bucket, Bucket=b), ("BucketNotEmpty", 409), "DeleteBucket of a non-empty bucket")
    c.empty(b)


@test
def create_bucket_invalid_name(c):
    eq(error(c.s3.create_bucket, Bucket="Not_Valid")[0], "InvalidBucketName", "CreateBucket Not_Valid")


@test
def list_buckets_paged(c):
    made = [c.bucket() for _ in range(3)]
    try:
        seen, token = [], None
        while True:
            kw = {"MaxBuckets": 1, "Prefix": "conf-"}
            if token:
                kw["ContinuationToken"] = token
            r = c.s3.list_buckets(**kw)
            eq(len(r["Buckets"]) <= 1, True, "at most MaxBuckets")
            seen += [x["Name"] for x in r["Buckets"]]
            token = r.get("ContinuationToken")
            if not token:
                break
        eq(all(m in seen for m in made), True, "every bucket on some page")
        eq(seen, sorted(seen), "buckets in name order")
        eq("Owner" in c.s3.list_buckets(), True, "ListBuckets names the owner")
    finally:
        for m in made:
            c.s3.delete_bucket(Bucket=m)


@test
def get_bucket_location(c):
    b = c.bucket()
    r = c.s3.get_bucket_location(Bucket=b)
    eq(r.get("LocationConstraint") in (None, "", c.region), True, "LocationConstraint")
    c.empty(b)


# ---- objects ----

@test
def put_get_head_round_trip(c):
    b = c.bucket()
    body = data(100_003, 1)
    r = c.s3.put_object(Bucket=b, Key="a/b c+d", Body=body, ContentType="text/x-test", Metadata={"colour": "blue"},
                        CacheControl="max-age=60", ContentDisposition='attachment; filename="x.bin"')
    eq(etag(r), md5_hex(body), "PutObject ETag is the MD5")
    g = c.s3.get_object(Bucket=b, Key="a/b c+d")
    eq(g["Body"].read(), body, "GetObject bytes")
    eq((g["ContentLength"], g["ContentType"], g["Metadata"]), (len(body), "text/x-test", {"colour": "blue"}), "GetObject headers")
    h = c.s3.head_object(Bucket=b, Key="a/b c+d")
    eq((h["ContentLength"], etag(h), h["CacheControl"], h["ContentDisposition"]),
       (len(body), md5_hex(body), "max-age=60", 'attachment; filename="x.bin"'), "HeadObject headers")
    c.empty(b)


@test
def get_object_errors(c):
    b = c.bucket()
    eq(error(c.s3.get_object, Bucket=b, Key="none"), ("NoSuchKey", 404), "GetObject of no key")
    eq(error(c.s3.head_object, Bucket=b, Key="none")[1], 404, "HeadObject of no key")
    eq(error(c.s3.get_object, Bucket=b + "-x", Key="k"), ("NoSuchBucket", 404), "GetObject in no bucket")
    c.empty(b)


@test
def put_object_bad_content_md5(c):
    b = c.bucket()
    wrong = b64(hashlib.md5(b"other").digest())
    eq(error(c.s3.put_object, Bucket=b, Key="k", Body=b"body", ContentMD5=wrong), ("BadDigest", 400), "a wrong Content-MD5")
    eq(error(c.s3.head_object, Bucket=b, Key="k")[1], 404, "nothing stored")
    c.empty(b)


@test
def empty_object(c):
    b = c.bucket()
    r = c.s3.put_object(Bucket=b, Key="empty", Body=b"")
    eq(etag(r), md5_hex(b""), "ETag of nothing")
    eq(c.s3.get_object(Bucket=b, Key="empty")["Body"].read(), b"", "an empty body")
    c.empty(b)


@test
def ranges(c):
    b = c.bucket()
    body = data(10_000, 2)
    c.s3.put_object(Bucket=b, Key="k", Body=body)
    for rng, want in [("bytes=0-0", body[:1]), ("bytes=100-199", body[100:200]), ("bytes=-10", body[-10:]), ("bytes=9990-", body[9990:])]:
        g = c.s3.get_object(Bucket=b, Key="k", Range=rng)
        eq((g["ResponseMetadata"]["HTTPStatusCode"], g["Body"].read()), (206, want), rng)
    g = c.s3.get_object(Bucket=b, Key="k", Range="bytes=100-199")
    eq(g["ContentRange"], "bytes 100-199/10000", "Content-Range")
    eq(error(c.s3.get_object, Bucket=b, Key="k", Range="bytes=10000-10001"), ("InvalidRange", 416), "a range past the end")
    c.empty(b)


@test
def conditional_reads(c):
    b = c.bucket()
    r = c.s3.put_object(Bucket=b, Key="k", Body=b"abc")
    e = r["ETag"]
    eq(c.s3.get_object(Bucket=b, Key="k", IfMatch=e)["Body"].read(), b"abc", "If-Match of the ETag")
    eq(error(c.s3.get_object, Bucket=b, Key="k", IfMatch='"0000"'), ("PreconditionFailed", 412), "If-Match of another")
    eq(error(c.s3.get_object, Bucket=b, Key="k", IfNoneMatch=e)[1], 304, "If-None-Match of the ETag")
    eq(error(c.s3.head_object, Bucket=b, Key="k", IfNoneMatch=e)[1], 304, "HEAD If-None-Match of the ETag")
    c.empty(b)


@test
def conditional_writes(c):
    b = c.bucket()
    c.s3.put_object(Bucket=b, Key="new", Body=b"1", IfNoneMatch="*")
    eq(error(c.s3.put_object, Bucket=b, Key="new", Body=b"2", IfNoneMatch="*"), ("PreconditionFailed", 412), "If-None-Match: * on a key that exists")
    eq(c.s3.get_object(Bucket=b, Key="new")["Body"].read(), b"1", "the first write stays")
    e = c.s3.head_object(Bucket=b, Key="new")["ETag"]
    eq(error(c.s3.put_object, Bucket=b, Key="new", Body=b"3", IfMatch='"00000000000000000000000000000000"')[1], 412, "If-Match of another ETag")
    c.s3.put_object(Bucket=b, Key="new", Body=b"4", IfMatch=e)
    eq(c.s3.get_object(Bucket=b, Key="new")["Body"].read(), b"4", "If-Match of the ETag writes")
    c.empty(b)


@test
def delete_object_and_objects(c):
    b = c.bucket()
    for k in ["a", "b", "c"]:
        c.s3.put_object(Bucket=b, Key=k, Body=k.encode())
    eq(c.s3.delete_object(Bucket=b, Key="a")["ResponseMetadata"]["HTTPStatusCode"], 204, "DeleteObject")
    eq(c.s3.delete_object(Bucket=b, Key="never")["ResponseMetadata"]["HTTPStatusCode"], 204, "DeleteObject of no key")
    r = c.s3.delete_objects(Bucket=b, Delete={"Objects": [{"Key": "b"}, {"Key": "c"}, {"Key": "none"}]})
    eq(sorted(d["Key"] for d in r["Deleted"]), ["b", "c", "none"], "DeleteObjects names each key")
    r = c.s3.delete_objects(Bucket=b, Delete={"Objects": [{"Key": "x"}], "Quiet": True})
    eq(r.get("Deleted", []), [], "a quiet DeleteObjects names none")
    eq(c.s3.list_objects_v2(Bucket=b)["KeyCount"], 0, "all gone")
    c.empty(b)


@test
def copy_object(c):
    b = c.bucket()
    body = data(70_001, 3)
    c.s3.put_object(Bucket=b, Key="src", Body=body, ContentType="a/b", Metadata={"m": "1"})
    r = c.s3.copy_object(Bucket=b, Key="dst", CopySource={"Bucket": b, "Key": "src"})
    eq(r["CopyObjectResult"]["ETag"].strip('"'), md5_hex(body), "copy's ETag")
    h = c.s3.head_object(Bucket=b, Key="dst")
    eq((h["ContentType"], h["Metadata"]), ("a/b", {"m": "1"}), "COPY keeps metadata")
    c.s3.copy_object(Bucket=b, Key="dst2", CopySource={"Bucket": b, "Key": "src"}, MetadataDirective="REPLACE",
                     ContentType="c/d", Metadata={"n": "2"})
    h = c.s3.head_object(Bucket=b, Key="dst2")
    eq((h["ContentType"], h["Metadata"]), ("c/d", {"n": "2"}), "REPLACE replaces metadata")
    eq(c.s3.get_object(Bucket=b, Key="dst2")["Body"].read(), body, "copied bytes")
    eq(error(c.s3.copy_object, Bucket=b, Key="x", CopySource={"Bucket": b, "Key": "none"})[0], "NoSuchKey", "copy of no key")
    eq(error(c.s3.copy_object, Bucket=b, Key="x", CopySource={"Bucket": b, "Key": "src"}, CopySourceIfMatch='"0"')[1], 412,
       "copy-source-if-match of another ETag")
    c.empty(b)


@test
def object_tagging(c):
    b = c.bucket()
    c.s3.put_object(Bucket=b, Key="t", Body=b"x", Tagging="project=blue%20sky&owner=me")
    tags = {t["Key"]: t["Value"] for t in c.s3.get_object_tagging(Bucket=b, Key="t")["TagSet"]}
    eq(tags, {"project": "blue sky", "owner": "me"}, "x-amz-tagging on PUT")
    eq(c.s3.get_object(Bucket=b, Key="t")["TagCount"], 2, "GetObject's tag count")
    c.s3.put_object_tagging(Bucket=b, Key="t", Tagging={"TagSet": [{"Key": "k", "Value": "v"}]})
    eq(c.s3.get_object_tagging(Bucket=b, Key="t")["TagSet"], [{"Key": "k", "Value": "v"}], "PutObjectTagging replaces them")
    eq(c.s3.get_object(Bucket=b, Key="t")["Body"].read(), b"x", "the bytes stay")
    c.s3.copy_object(Bucket=b, Key="copy", CopySource={"Bucket": b, "Key": "t"})
    eq(c.s3.get_object_tagging(Bucket=b, Key="copy")["TagSet"], [{"Key": "k", "Value": "v"}], "a copy keeps the tags")
    c.s3.copy_object(Bucket=b, Key="copy2", CopySource={"Bucket": b, "Key": "t"}, TaggingDirective="REPLACE", Tagging="a=1")
    eq(c.s3.get_object_tagging(Bucket=b, Key="copy2")["TagSet"], [{"Key": "a", "Value": "1"}], "TaggingDirective REPLACE")
    c.s3.delete_object_tagging(Bucket=b, Key="t")
    eq(c.s3.get_object_tagging(Bucket=b, Key="t")["TagSet"], [], "DeleteObjectTagging")
    eleven = {"TagSet": [{"Key": f"k{i}", "Value": "v"} for i in range(11)]}
    # The reference names InvalidTag for tags that fail validation; AWS itself (and moto)
    # answer BadRequest to too many: either, with 400.
    got = error(c.s3.put_object_tagging, Bucket=b, Key="t", Tagging=eleven)
    eq(got in (("InvalidTag", 400), ("BadRequest", 400)), True, f"eleven tags are refused ({got})")
    eq(c.s3.get_object_tagging(Bucket=b, Key="t")["TagSet"], [], "and change nothing")
    eq(error(c.s3.get_object_tagging, Bucket=b, Key="none")[0], "NoSuchKey", "tags of no key")
    c.empty(b)


@test
def bucket_tagging(c):
    b = c.bucket()
    eq(error(c.s3.get_bucket_tagging, Bucket=b)[0], "NoSuchTagSet", "a bucket without tags")
    c.s3.put_bucket_tagging(Bucket=b, Tagging={"TagSet": [{"Key": "team", "Value": "storage"}]})
    eq(c.s3.get_bucket_tagging(Bucket=b)["TagSet"], [{"Key": "team", "Value": "storage"}], "GetBucketTagging")
    c.s3.put_object(Bucket=b, Key="k", Body=b"still a bucket")
    eq(c.s3.get_object(Bucket=b, Key="k")["Body"].read(), b"still a bucket", "a tagged bucket serves as before")
    c.s3.delete_bucket_tagging(Bucket=b)
    eq(error(c.s3.get_bucket_tagging, Bucket=b)[0], "NoSuchTagSet", "DeleteBucketTagging")
    c.empty(b)


@test
def bucket_cors(c):
    b = c.bucket()
    eq(error(c.s3.get_bucket_cors, Bucket=b)[0], "NoSuchCORSConfiguration", "a bucket without CORS")
    rules = [{"AllowedOrigins": ["https://app.example.com"], "AllowedMethods": ["GET", "PUT"],
              "AllowedHeaders": ["content-type", "x-amz-*"], "ExposeHeaders": ["ETag"], "MaxAgeSeconds": 600}]
    c.s3.put_bucket_cors(Bucket=b, CORSConfiguration={"CORSRules": rules})
    got = c.s3.get_bucket_cors(Bucket=b)["CORSRules"]
    eq((got[0]["AllowedOrigins"], got[0]["AllowedMethods"], got[0]["MaxAgeSeconds"]), (["https://app.example.com"], ["GET", "PUT"], 600),
       "GetBucketCors")
    bad = [{"AllowedOrigins": ["*"], "AllowedMethods": ["PATCH"]}]
    eq(error(c.s3.put_bucket_cors, Bucket=b, CORSConfiguration={"CORSRules": bad})[1], 400, "an unsupported method is refused")
    c.s3.put_object(Bucket=b, Key="k", Body=b"cors")
    url = f"{c.endpoint}/{b}/k"

    def preflight(origin, method, headers=""):
        h = {"Origin": origin, "Access-Control-Request-Method": method}
        if headers:
            h["Access-Control-Request-Headers"] = headers
        try:
            r = urllib.request.urlopen(urllib.request.Request(url, method="OPTIONS", headers=h))
            return r.status, r.headers
        except urllib.error.HTTPError as e:
            return e.code, e.headers

    # Rules apply within a few seconds on every gateway (S3 says bucket settings propagate).
    deadline = time.time() + 10
    while True:
        status, h = preflight("https://app.example.com", "PUT", "Content-Type, x-amz-date")
        if status == 200 or time.time() > deadline:
            break
        time.sleep(0.2)
    eq(status, 200, "a preflight a rule allows")
    eq((h.get("Access-Control-Allow-Origin"), h.get("Access-Control-Max-Age")), ("https://app.example.com", "600"), "its headers")
    eq("PUT" in h.get("Access-Control-Allow-Methods", ""), True, "the methods allowed")
    eq(preflight("https://evil.example.net", "GET")[0], 403, "an origin no rule allows")
    eq(preflight("https://app.example.com", "DELETE")[0], 403, "a method no rule allows")
    eq(preflight("https://app.example.com", "PUT", "authorization-x")[0], 403, "a header no rule allows")
    get = c.s3.generate_presigned_url("get_object", Params={"Bucket": b, "Key": "k"}, ExpiresIn=300)
    r = urllib.request.urlopen(urllib.request.Request(get, headers={"Origin": "https://app.example.com"}))
    eq((r.read(), r.headers.get("Access-Control-Allow-Origin"), r.headers.get("Access-Control-Expose-Headers")),
       (b"cors", "https://app.example.com", "ETag"), "an actual request from an allowed origin")
    c.s3.delete_bucket_cors(Bucket=b)
    eq(error(c.s3.get_bucket_cors, Bucket=b)[0], "NoSuchCORSConfiguration", "DeleteBucketCors")
    c.empty(b)


# ---- listings ----

@test
def list_objects_v2_prefix_delimiter_paging(c):
    b = c.bucket()
    keys = ["a/1", "a/2", "b/1", "c", "d+e", "f g"]
    for k in keys:
        c.s3.put_object(Bucket=b, Key=k, Body=b"x")
    r = c.s3.list_objects_v2(Bucket=b, Delimiter="/")
    eq([p["Prefix"] for p in r["CommonPrefixes"]], ["a/", "b/"], "common prefixes")
    eq([o["Key"] for o in r["Contents"]], ["c", "d+e", "f g"], "keys beside them")
    r = c.s3.list_objects_v2(Bucket=b, Prefix="a/")
    eq([o["Key"] for o in r["Contents"]], ["a/1", "a/2"], "by prefix")
    seen, token = [], None
    while True:
        kw = {"Bucket": b, "MaxKeys": 2}
        if token:
            kw["ContinuationToken"] = token
        r = c.s3.list_objects_v2(**kw)
        eq(r["KeyCount"] <= 2, True, "at most MaxKeys")
        seen += [o["Key"] for o in r.get("Contents", [])]
        if not r["IsTruncated"]:
            break
        token = r["NextContinuationToken"]
    eq(seen, sorted(keys), "every key once, in order")
    r = c.s3.list_objects_v2(Bucket=b, StartAfter="c")
    eq([o["Key"] for o in r["Contents"]], ["d+e", "f g"], "StartAfter")
    r = c.s3.list_objects_v2(Bucket=b, FetchOwner=True, MaxKeys=1)
    eq("Owner" in r["Contents"][0], True, "FetchOwner names the owner")
    eq(error(c.s3.list_objects_v2, Bucket=b + "-x")[0], "NoSuchBucket", "listing no bucket")
    c.empty(b)


@test
def list_objects_v1_marker(c):
    b = c.bucket()
    for k in ["a", "b", "c"]:
        c.s3.put_object(Bucket=b, Key=k, Body=b"x")
    r = c.s3.list_objects(Bucket=b, Marker="a", MaxKeys=1)
    eq(([o["Key"] for o in r["Contents"]], r["IsTruncated"]), (["b"], True), "V1 after a marker")
    c.empty(b)


@test
def list_object_versions_unversioned(c):
    b = c.bucket()
    c.s3.put_object(Bucket=b, Key="k1", Body=b"x")
    c.s3.put_object(Bucket=b, Key="k2", Body=b"y")
    r = c.s3.list_object_versions(Bucket=b)
    v = r["Versions"]
    eq([(x["Key"], x["VersionId"], x["IsLatest"]) for x in v], [("k1", "null", True), ("k2", "null", True)], "each object's one version")
    c.empty(b)


# ---- multipart ----

def upload_parts(c, b, key, parts, **create):
    u = c.s3.create_multipart_upload(Bucket=b, Key=key, **create)["UploadId"]
    done = []
    for i, p in enumerate(parts, 1):
        kw = {}
        if create.get("ChecksumAlgorithm"):
            kw["ChecksumAlgorithm"] = create["ChecksumAlgorithm"]
        r = c.s3.upload_part(Bucket=b, Key=key, UploadId=u, PartNumber=i, Body=p, **kw)
        part = {"PartNumber": i, "ETag": r["ETag"]}
        for f in ("ChecksumCRC32", "ChecksumCRC32C", "ChecksumSHA1", "ChecksumSHA256"):
            if f in r:
                part[f] = r[f]
        done.append(part)
    return u, done


@test
def multipart_upload(c):
    b = c.bucket()
    parts = [data(5 * MIB, 10), data(5 * MIB, 11), data(123, 12)]
    u, done = upload_parts(c, b, "big", parts)
    r = c.s3.list_parts(Bucket=b, Key="big", UploadId=u)
    eq([(p["PartNumber"], p["Size"]) for p in r["Parts"]], [(1, 5 * MIB), (2, 5 * MIB), (3, 123)], "ListParts")
    eq(u in [x["UploadId"] for x in c.s3.list_multipart_uploads(Bucket=b).get("Uploads", [])], True, "ListMultipartUploads")
    r = c.s3.complete_multipart_upload(Bucket=b, Key="big", UploadId=u, MultipartUpload={"Parts": done})
    want = hashlib.md5(b"".join(hashlib.md5(p).digest() for p in parts)).hexdigest() + "-3"
    eq(etag(r), want, "multipart ETag")
    eq(c.s3.get_object(Bucket=b, Key="big")["Body"].read(), b"".join(parts), "multipart bytes")
    c.empty(b)


@test
def multipart_errors(c):
    b = c.bucket()
    u, done = upload_parts(c, b, "small", [data(100, 1), data(100, 2)])
    eq(error(c.s3.complete_multipart_upload, Bucket=b, Key="small", UploadId=u, MultipartUpload={"Parts": done})[0],
       "EntityTooSmall", "a part under 5 MiB but the last")
    # Parts large enough, so that each error below is the only one.
    u, done = upload_parts(c, b, "k", [data(5 * MIB, 1), data(5 * MIB, 2)])
    wrong = [{"PartNumber": 1, "ETag": '"00000000000000000000000000000000"'}]
    eq(error(c.s3.complete_multipart_upload, Bucket=b, Key="k", UploadId=u, MultipartUpload={"Parts": wrong})[0],
       "InvalidPart", "a part with another ETag")
    eq(error(c.s3.complete_multipart_upload, Bucket=b, Key="k", UploadId=u, MultipartUpload={"Parts": done[::-1]})[0],
       "InvalidPartOrder", "parts out of order")
    c.s3.abort_multipart_upload(Bucket=b, Key="k", UploadId=u)
    eq(error(c.s3.list_parts, Bucket=b, Key="k", UploadId=u)[0], "NoSuchUpload", "an aborted upload")
    c.empty(b)


@test
def list_multipart_uploads_paged(c):
    b = c.bucket()
    keys = ["a/1", "a/2", "b+c", "d/x/y", "e"]
    ids = {k: c.s3.create_multipart_upload(Bucket=b, Key=k)["UploadId"] for k in keys}
    r = c.s3.list_multipart_uploads(Bucket=b, Delimiter="/")
    eq(([u["Key"] for u in r.get("Uploads", [])], [p["Prefix"] for p in r.get("CommonPrefixes", [])]),
       (["b+c", "e"], ["a/", "d/"]), "uploads and common prefixes")
    seen, kw = [], {"Bucket": b, "MaxUploads": 2}
    while True:
        r = c.s3.list_multipart_uploads(**kw)
        seen += [(u["Key"], u["UploadId"]) for u in r.get("Uploads", [])]
        if not r["IsTruncated"]:
            break
        kw.update(KeyMarker=r["NextKeyMarker"], UploadIdMarker=r["NextUploadIdMarker"])
    eq(seen, [(k, ids[k]) for k in keys], "every upload once, in key order, two a page")
    r = c.s3.list_multipart_uploads(Bucket=b, Prefix="a/")
    eq([u["Key"] for u in r["Uploads"]], ["a/1", "a/2"], "by prefix")
    c.empty(b)


@test
def multipart_complete_twice(c):
    b = c.bucket()
    u, done = upload_parts(c, b, "k", [data(5 * MIB, 3), data(10, 4)])
    first = c.s3.complete_multipart_upload(Bucket=b, Key="k", UploadId=u, MultipartUpload={"Parts": done})
    again = c.s3.complete_multipart_upload(Bucket=b, Key="k", UploadId=u, MultipartUpload={"Parts": done})
    eq(etag(again), etag(first), "a repeated completion answers the same object")
    c.empty(b)


@test
def upload_part_copy_ranges(c):
    b = c.bucket()
    src = data(6 * MIB + 7, 5)
    c.s3.put_object(Bucket=b, Key="src", Body=src)
    u = c.s3.create_multipart_upload(Bucket=b, Key="dst")["UploadId"]
    r1 = c.s3.upload_part_copy(Bucket=b, Key="dst", UploadId=u, PartNumber=1, CopySource={"Bucket": b, "Key": "src"},
                               CopySourceRange=f"bytes=0-{5 * MIB - 1}")
    r2 = c.s3.upload_part_copy(Bucket=b, Key="dst", UploadId=u, PartNumber=2, CopySource={"Bucket": b, "Key": "src"},
                               CopySourceRange=f"bytes={5 * MIB}-{len(src) - 1}")
    eq(r1["CopyPartResult"]["ETag"].strip('"'), md5_hex(src[:5 * MIB]), "the part's ETag is its bytes' MD5")
    parts = [{"PartNumber": 1, "ETag": r1["CopyPartResult"]["ETag"]}, {"PartNumber": 2, "ETag": r2["CopyPartResult"]["ETag"]}]
    c.s3.complete_multipart_upload(Bucket=b, Key="dst", UploadId=u, MultipartUpload={"Parts": parts})
    eq(c.s3.get_object(Bucket=b, Key="dst")["Body"].read(), src, "copied in two ranges")
    eq(error(c.s3.upload_part_copy, Bucket=b, Key="dst", UploadId="x" * 32, PartNumber=1, CopySource={"Bucket": b, "Key": "src"})[0],
       "NoSuchUpload", "UploadPartCopy to no upload")
    c.empty(b)


@test
def get_by_part_number(c):
    b = c.bucket()
    parts = [data(5 * MIB, 6), data(1000, 7)]
    u, done = upload_parts(c, b, "mp", parts)
    c.s3.complete_multipart_upload(Bucket=b, Key="mp", UploadId=u, MultipartUpload={"Parts": done})
    g = c.s3.get_object(Bucket=b, Key="mp", PartNumber=2)
    eq((g["Body"].read(), g["PartsCount"], g["ContentLength"]), (parts[1], 2, 1000), "GET part 2")
    h = c.s3.head_object(Bucket=b, Key="mp", PartNumber=1)
    eq((h["ContentLength"], h["PartsCount"]), (5 * MIB, 2), "HEAD part 1")
    c.s3.put_object(Bucket=b, Key="whole", Body=b"12345")
    eq(c.s3.get_object(Bucket=b, Key="whole", PartNumber=1)["Body"].read(), b"12345", "an object put whole is its part 1")
    eq(error(c.s3.get_object, Bucket=b, Key="mp", PartNumber=3)[1], 416, "a part past the last")
    c.empty(b)


# ---- checksums ----

@test
def checksums_on_put_and_get(c):
    b = c.bucket()
    body = data(300_001, 8)
    r = c.s3.put_object(Bucket=b, Key="s", Body=body, ChecksumAlgorithm="SHA256")
    eq(r["ChecksumSHA256"], sha256_b64(body), "PutObject answers the SHA-256")
    g = c.s3.get_object(Bucket=b, Key="s", ChecksumMode="ENABLED")
    eq((g["Body"].read(), g["ChecksumSHA256"]), (body, sha256_b64(body)), "GetObject answers it when asked")
    h = c.s3.head_object(Bucket=b, Key="s", ChecksumMode="ENABLED")
    eq(h["ChecksumSHA256"], sha256_b64(body), "HeadObject too")
    r = c.s3.put_object(Bucket=b, Key="c", Body=body, ChecksumCRC32=crc32_b64(body))
    eq(r["ChecksumCRC32"], crc32_b64(body), "a CRC32 sent is stored")
    c.empty(b)


@test
def checksum_mismatch_is_bad_digest(c):
    b = c.bucket()
    eq(error(c.s3.put_object, Bucket=b, Key="k", Body=b"abc", ChecksumCRC32=crc32_b64(b"abd"))[0], "BadDigest", "a wrong CRC32")
    eq(error(c.s3.head_object, Bucket=b, Key="k")[1], 404, "nothing stored")
    c.empty(b)


@test
def multipart_composite_checksum(c):
    b = c.bucket()
    parts = [data(5 * MIB, 20), data(777, 21)]
    u, done = upload_parts(c, b, "k", parts, ChecksumAlgorithm="SHA256")
    eq([p["ChecksumSHA256"] for p in done], [sha256_b64(p) for p in parts], "each part's SHA-256")
    r = c.s3.complete_multipart_upload(Bucket=b, Key="k", UploadId=u, MultipartUpload={"Parts": done})
    want = b64(hashlib.sha256(b"".join(hashlib.sha256(p).digest() for p in parts)).digest()) + "-2"
    eq(r["ChecksumSHA256"], want, "COMPOSITE: the checksum of the parts' checksums")
    c.empty(b)


@test
def multipart_full_object_crc(c):
    b = c.bucket()
    parts = [data(5 * MIB, 22), data(999, 23)]
    u, done = upload_parts(c, b, "k", parts, ChecksumAlgorithm="CRC32", ChecksumType="FULL_OBJECT")
    r = c.s3.complete_multipart_upload(Bucket=b, Key="k", UploadId=u, MultipartUpload={"Parts": done})
    eq((r["ChecksumCRC32"], r.get("ChecksumType")), (crc32_b64(b"".join(parts)), "FULL_OBJECT"), "FULL_OBJECT: the whole body's CRC32")
    c.empty(b)


# ---- signatures, presigned requests, forms ----

@test
def bad_signature_is_refused(c):
    other = Ctx(c.endpoint, c.ak, c.sk + "x", c.region).s3
    eq(error(other.list_buckets), ("SignatureDoesNotMatch", 403), "a wrong secret")
    unknown = Ctx(c.endpoint, "AKIDUNKNOWN0000000000", c.sk, c.region).s3
    eq(error(unknown.list_buckets)[1], 403, "an unknown access key")


@test
def presigned_get_and_put(c):
    b = c.bucket()
    # SigV4 for the PUT (SigV2, boto3's default for presigning, signs the Content-Type,
    # which urllib sets on a body); the GET with boto3's default.
    v4 = c.client(signature_version="s3v4")
    put = v4.generate_presigned_url("put_object", Params={"Bucket": b, "Key": "p"}, ExpiresIn=300)
    req = urllib.request.Request(put, data=b"presigned body", method="PUT", headers={"Content-Type": "application/octet-stream"})
    eq(urllib.request.urlopen(req).status, 200, "presigned PUT")
    get = c.s3.generate_presigned_url("get_object", Params={"Bucket": b, "Key": "p"}, ExpiresIn=300)
    eq(urllib.request.urlopen(get).read(), b"presigned body", "presigned GET")
    c.empty(b)


@test
def post_object_form_upload(c):
    b = c.bucket()
    post = c.s3.generate_presigned_post(b, "form/up.txt", Conditions=[["content-length-range", 1, 1 << 20]], ExpiresIn=300)
    boundary = uuid.uuid4().hex
    body = b""
    for k, v in post["fields"].items():
        body += f'--{boundary}\r\nContent-Disposition: form-data; name="{k}"\r\n\r\n{v}\r\n'.encode()
    body += f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="up.txt"\r\nContent-Type: text/plain\r\n\r\n'.encode()
    body += b"form bytes\r\n" + f"--{boundary}--\r\n".encode()
    req = urllib.request.Request(post["url"], data=body, method="POST", headers={"Content-Type": f"multipart/form-data; boundary={boundary}"})
    eq(urllib.request.urlopen(req).status in (200, 204), True, "POST Object")
    eq(c.s3.get_object(Bucket=b, Key="form/up.txt")["Body"].read(), b"form bytes", "the form's file")
    c.empty(b)


# ---- versioning ----

def headers(e):
    return e.response["ResponseMetadata"]["HTTPHeaders"]


def client_error(fn, *args, **kwargs):
    try:
        fn(*args, **kwargs)
    except botocore.exceptions.ClientError as e:
        return e
    raise AssertionError(f"{getattr(fn, '__name__', fn)} succeeded; an error was expected")


@test
def versioning_state(c):
    b = c.bucket()
    eq(c.s3.get_bucket_versioning(Bucket=b).get("Status"), None, "a new bucket's versioning")
    c.s3.put_bucket_versioning(Bucket=b, VersioningConfiguration={"Status": "Enabled"})
    eq(c.s3.get_bucket_versioning(Bucket=b).get("Status"), "Enabled", "after enabling")
    c.s3.put_bucket_versioning(Bucket=b, VersioningConfiguration={"Status": "Suspended"})
    eq(c.s3.get_bucket_versioning(Bucket=b).get("Status"), "Suspended", "after suspending")
    eq(error(c.s3.get_bucket_versioning, Bucket="conf-missing-" + uuid.uuid4().hex[:8]), ("NoSuchBucket", 404), "of no bucket")
    c.empty(b)


@test
def versioning_three_versions_read_by_id(c):
    b = c.versioned_bucket()
    bodies = [data(1000 + 777 * i, 40 + i) for i in range(3)]
    ids = [c.s3.put_object(Bucket=b, Key="k", Body=x)["VersionId"] for x in bodies]
    eq(len(set(ids)), 3, "three distinct version ids")
    for i, (v, x) in enumerate(zip(ids, bodies)):
        r = c.s3.get_object(Bucket=b, Key="k", VersionId=v)
        eq(r["Body"].read(), x, f"version {i} by id")
        eq(r["VersionId"], v, "the version answered")
        eq(c.s3.head_object(Bucket=b, Key="k", VersionId=v)["ContentLength"], len(x), f"HEAD of version {i}")
        r = c.s3.get_object(Bucket=b, Key="k", VersionId=v, Range="bytes=10-19")
        eq(r["Body"].read(), x[10:20], f"a range of version {i}")
    eq(c.s3.get_object(Bucket=b, Key="k")["Body"].read(), bodies[2], "the latest")
    vs = c.s3.list_object_versions(Bucket=b)["Versions"]
    eq([(v["Key"], v["VersionId"], v["IsLatest"]) for v in vs], [("k", ids[2], True), ("k", ids[1], False), ("k", ids[0], False)],
       "versions newest first, the latest marked")
    eq([v["Size"] for v in vs], [len(x) for x in reversed(bodies)], "their sizes")
    eq([v["ETag"].strip('"') for v in vs], [md5_hex(x) for x in reversed(bodies)], "their ETags")
    eq([o["Key"] for o in c.s3.list_objects_v2(Bucket=b)["Contents"]], ["k"], "a key is listed once")
    c.empty(b)


@test
def versioning_delete_marker_and_its_removal(c):
    b = c.versioned_bucket()
    v1 = c.s3.put_object(Bucket=b, Key="k", Body=b"one")["VersionId"]
    v2 = c.s3.put_object(Bucket=b, Key="k", Body=b"two")["VersionId"]
    d = c.s3.delete_object(Bucket=b, Key="k")
    eq(d.get("DeleteMarker"), True, "a delete writes a marker")
    marker = d["VersionId"]
    eq(error(c.s3.get_object, Bucket=b, Key="k"), ("NoSuchKey", 404), "GET of a deleted key")
    eq(c.s3.list_objects_v2(Bucket=b).get("Contents", []), [], "a deleted key is not listed")
    eq(c.s3.get_object(Bucket=b, Key="k", VersionId=v1)["Body"].read(), b"one", "older versions stay readable")
    r = c.s3.list_object_versions(Bucket=b)
    eq([(m["VersionId"], m["IsLatest"]) for m in r["DeleteMarkers"]], [(marker, True)], "the marker listed as latest")
    eq([(v["VersionId"], v["IsLatest"]) for v in r["Versions"]], [(v2, False), (v1, False)], "the versions below it")
    eq(error(c.s3.delete_bucket, Bucket=b), ("BucketNotEmpty", 409), "versions keep a bucket from being deleted")
    eq(c.s3.delete_object(Bucket=b, Key="k", VersionId=marker).get("VersionId"), marker, "deleting the marker by id")
    eq(c.s3.get_object(Bucket=b, Key="k")["Body"].read(), b"two", "the version below is latest again")
    c.s3.delete_object(Bucket=b, Key="k", VersionId=v2)
    eq(c.s3.get_object(Bucket=b, Key="k")["Body"].read(), b"one", "deleting the latest by id restores the one before")
    eq(error(c.s3.get_object, Bucket=b, Key="k", VersionId=v2), ("NoSuchVersion", 404), "a deleted version")
    c.empty(b)


@test
def versioning_delete_marker_answers(c):
    b = c.versioned_bucket()
    c.s3.put_object(Bucket=b, Key="k", Body=b"one")
    marker = c.s3.delete_object(Bucket=b, Key="k")["VersionId"]
    e = client_error(c.s3.get_object, Bucket=b, Key="k")
    eq(headers(e).get("x-amz-delete-marker"), "true", "the 404 of a deleted key says a delete marker is latest")
    eq(headers(e).get("x-amz-version-id"), marker, "and names it")
    e = client_error(c.s3.get_object, Bucket=b, Key="k", VersionId=marker)
    eq(e.response["ResponseMetadata"]["HTTPStatusCode"], 405, "GET of a marker by id (MethodNotAllowed)")
    eq(headers(e).get("x-amz-delete-marker"), "true", "says it is a marker")
    r = c.s3.delete_object(Bucket=b, Key="k", VersionId=marker)
    eq((r.get("DeleteMarker"), r.get("VersionId")), (True, marker), "deleting the marker by id says it was one")
    eq(error(c.s3.get_object, Bucket=b, Key="k", VersionId="not a version id")[1], 400, "a malformed version id")
    c.empty(b)


@test
def versioning_listing_pages_in_order(c):
    b = c.versioned_bucket()
    keys = [f"d{i % 3}/k{i:02d}" for i in range(12)] + ["top"]
    put = {}
    r = random.Random(5)
    for n in range(60):
        k = r.choice(keys)
        if r.random() < 0.15 and k in put:
            v = c.s3.delete_object(Bucket=b, Key=k)["VersionId"]
        else:
            v = c.s3.put_object(Bucket=b, Key=k, Body=data(r.randrange(0, 300), n))["VersionId"]
        put.setdefault(k, []).insert(0, v)
    want = [(k, v) for k in sorted(put) for v in put[k]]
    got, kw = [], {}
    while True:
        p = c.s3.list_object_versions(Bucket=b, MaxKeys=7, **kw)
        page = [(x["Key"], x["VersionId"]) for x in p.get("Versions", []) + p.get("DeleteMarkers", [])]
        eq(len(page) <= 7, True, "a page holds at most MaxKeys")
        # Within a page, S3 lists versions and markers apart: order them by where they stand.
        got += sorted(page, key=lambda kv: want.index(kv))
        if not p["IsTruncated"]:
            break
        kw = {"KeyMarker": p["NextKeyMarker"], "VersionIdMarker": p["NextVersionIdMarker"]}
    eq(got, want, "every version once, keys in order, each newest first")
    p = c.s3.list_object_versions(Bucket=b, Delimiter="/", Prefix="")
    eq(sorted(x["Prefix"] for x in p.get("CommonPrefixes", [])), sorted({k.split("/")[0] + "/" for k in put if "/" in k}), "common prefixes")
    eq({x["Key"] for x in p.get("Versions", []) + p.get("DeleteMarkers", [])}, {k for k in put if "/" not in k}, "keys beside them")
    p = c.s3.list_object_versions(Bucket=b, Prefix="d1/")
    eq({x["Key"] for x in p.get("Versions", []) + p.get("DeleteMarkers", [])}, {k for k in put if k.startswith("d1/")}, "under a prefix")
    c.empty(b)


@test
def versioning_suspended_writes_the_null_version(c):
    b = c.versioned_bucket()
    v1 = c.s3.put_object(Bucket=b, Key="k", Body=b"versioned")["VersionId"]
    c.s3.put_bucket_versioning(Bucket=b, VersioningConfiguration={"Status": "Suspended"})
    c.s3.put_object(Bucket=b, Key="k", Body=b"null one")
    c.s3.put_object(Bucket=b, Key="k", Body=b"null two")
    vs = c.s3.list_object_versions(Bucket=b)["Versions"]
    eq([v["VersionId"] for v in vs], ["null", v1], "a suspended bucket's puts replace the null version")
    eq(c.s3.get_object(Bucket=b, Key="k", VersionId="null")["Body"].read(), b"null two", "the null version by id")
    c.s3.put_bucket_versioning(Bucket=b, VersioningConfiguration={"Status": "Enabled"})
    v3 = c.s3.put_object(Bucket=b, Key="k", Body=b"again")["VersionId"]
    vs = c.s3.list_object_versions(Bucket=b)["Versions"]
    eq([v["VersionId"] for v in vs], [v3, "null", v1], "re-enabled: the null version is kept")
    eq(c.s3.get_object(Bucket=b, Key="k", VersionId="null")["Body"].read(), b"null two", "and reads")
    c.empty(b)


@test
def versioning_of_objects_written_before_it(c):
    b = c.bucket()
    c.s3.put_object(Bucket=b, Key="old", Body=b"before")
    c.s3.put_bucket_versioning(Bucket=b, VersioningConfiguration={"Status": "Enabled"})
    v = c.s3.put_object(Bucket=b, Key="old", Body=b"after")["VersionId"]
    vs = c.s3.list_object_versions(Bucket=b)["Versions"]
    eq([x["VersionId"] for x in vs], [v, "null"], "an object written before versioning is the null version")
    eq(c.s3.get_object(Bucket=b, Key="old", VersionId="null")["Body"].read(), b"before", "and reads by it")
    c.empty(b)


@test
def versioning_null_version_id_on_reads(c):
    b = c.bucket()
    c.s3.put_object(Bucket=b, Key="plain", Body=b"p")
    eq("VersionId" in c.s3.get_object(Bucket=b, Key="plain"), False, "no version id in a bucket never versioned")
    c.s3.put_bucket_versioning(Bucket=b, VersioningConfiguration={"Status": "Enabled"})
    eq(c.s3.get_object(Bucket=b, Key="plain").get("VersionId"), "null", "GET of the null version says so")
    eq(c.s3.head_object(Bucket=b, Key="plain").get("VersionId"), "null", "and HEAD")
    c.empty(b)


@test
def versioning_copy_from_a_version(c):
    b = c.versioned_bucket()
    v1 = c.s3.put_object(Bucket=b, Key="src", Body=b"first body")["VersionId"]
    c.s3.put_object(Bucket=b, Key="src", Body=b"second body")
    r = c.s3.copy_object(Bucket=b, Key="dst", CopySource={"Bucket": b, "Key": "src", "VersionId": v1})
    eq(r.get("CopySourceVersionId"), v1, "the source version answered")
    eq(c.s3.get_object(Bucket=b, Key="dst")["Body"].read(), b"first body", "the copy is of that version")
    eq(c.s3.get_object(Bucket=b, Key="dst", VersionId=r["VersionId"])["Body"].read(), b"first body", "the copy's own version")
    # Restoring: an old version copied onto its own key becomes the latest.
    c.s3.copy_object(Bucket=b, Key="src", CopySource={"Bucket": b, "Key": "src", "VersionId": v1})
    eq(c.s3.get_object(Bucket=b, Key="src")["Body"].read(), b"first body", "restored")
    eq(len(c.s3.list_object_versions(Bucket=b, Prefix="src")["Versions"]), 3, "as a third version")
    c.empty(b)


@test
def versioning_tags_and_deletes_by_version(c):
    b = c.versioned_bucket()
    v1 = c.s3.put_object(Bucket=b, Key="k", Body=b"1")["VersionId"]
    v2 = c.s3.put_object(Bucket=b, Key="k", Body=b"2")["VersionId"]
    c.s3.put_object_tagging(Bucket=b, Key="k", VersionId=v1, Tagging={"TagSet": [{"Key": "age", "Value": "old"}]})
    eq(c.s3.get_object_tagging(Bucket=b, Key="k", VersionId=v1)["TagSet"], [{"Key": "age", "Value": "old"}], "the old version's tags")
    eq(c.s3.get_object_tagging(Bucket=b, Key="k")["TagSet"], [], "the latest has none")
    r = c.s3.delete_objects(Bucket=b, Delete={"Objects": [{"Key": "k", "VersionId": v1}, {"Key": "k"}]})
    by = {(d["Key"], d.get("VersionId")): d for d in r["Deleted"]}
    eq((("k", v1) in by), True, "the version deleted by id is named")
    markers = [d for d in r["Deleted"] if d.get("DeleteMarker")]
    eq(len(markers), 1, "the delete without an id wrote a marker")
    vs = c.s3.list_object_versions(Bucket=b)
    eq([v["VersionId"] for v in vs["Versions"]], [v2], "the other version stays")
    eq([m["VersionId"] for m in vs["DeleteMarkers"]], [markers[0]["DeleteMarkerVersionId"]], "below the marker")
    c.empty(b)


@test
def versioning_multipart_makes_a_version(c):
    b = c.versioned_bucket()
    v1 = c.s3.put_object(Bucket=b, Key="big", Body=b"small first")["VersionId"]
    body = data(5 * MIB + 1234, 9)
    u = c.s3.create_multipart_upload(Bucket=b, Key="big")["UploadId"]
    e1 = c.s3.upload_part(Bucket=b, Key="big", UploadId=u, PartNumber=1, Body=body[:5 * MIB])["ETag"]
    e2 = c.s3.upload_part(Bucket=b, Key="big", UploadId=u, PartNumber=2, Body=body[5 * MIB:])["ETag"]
    r = c.s3.complete_multipart_upload(Bucket=b, Key="big", UploadId=u,
                                       MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": e1}, {"PartNumber": 2, "ETag": e2}]})
    v2 = r["VersionId"]
    eq(v2 != v1, True, "the completed upload is a new version")
    eq(c.s3.get_object(Bucket=b, Key="big", VersionId=v2)["Body"].read() == body, True, "its bytes")
    eq(c.s3.get_object(Bucket=b, Key="big", VersionId=v1)["Body"].read(), b"small first", "the version before stays")
    c.empty(b)


@test
def bucket_lifecycle_configuration(c):
    b = c.bucket()
    eq(error(c.s3.get_bucket_lifecycle_configuration, Bucket=b), ("NoSuchLifecycleConfiguration", 404), "a bucket without rules")
    rules = [
        {"ID": "logs", "Filter": {"Prefix": "logs/"}, "Status": "Enabled", "Expiration": {"Days": 30}},
        {"ID": "old", "Filter": {"And": {"Prefix": "data/", "Tags": [{"Key": "k", "Value": "v"}], "ObjectSizeGreaterThan": 10}},
         "Status": "Disabled", "NoncurrentVersionExpiration": {"NoncurrentDays": 7, "NewerNoncurrentVersions": 2}},
        {"ID": "mpu", "Filter": {"Prefix": ""}, "Status": "Enabled", "AbortIncompleteMultipartUpload": {"DaysAfterInitiation": 3}},
        {"ID": "date", "Filter": {"Prefix": "d/"}, "Status": "Enabled",
         "Expiration": {"Date": datetime.datetime(2030, 1, 1, tzinfo=datetime.timezone.utc)}},
    ]
    c.s3.put_bucket_lifecycle_configuration(Bucket=b, LifecycleConfiguration={"Rules": rules})
    got = {r["ID"]: r for r in c.s3.get_bucket_lifecycle_configuration(Bucket=b)["Rules"]}
    eq(sorted(got), ["date", "logs", "mpu", "old"], "the rules put")
    eq(got["logs"]["Expiration"], {"Days": 30}, "expiration in days")
    eq(got["old"]["Filter"], rules[1]["Filter"], "an And filter with tags and a size")
    eq(got["old"]["NoncurrentVersionExpiration"], rules[1]["NoncurrentVersionExpiration"], "noncurrent expiration")
    eq(got["old"]["Status"], "Disabled", "status")
    eq(got["date"]["Expiration"]["Date"].year, 2030, "expiration on a date")
    bad = [
        ([{"ID": "x", "Filter": {"Prefix": ""}, "Status": "Enabled", "Expiration": {"Days": 0}}], "InvalidArgument", "Days 0"),
        ([{"ID": "x", "Filter": {"Prefix": ""}, "Status": "Enabled"}], "InvalidRequest", "a rule with no action"),
        ([{"ID": "x", "Filter": {"Prefix": ""}, "Status": "Enabled", "Expiration": {"Days": 1}},
          {"ID": "x", "Filter": {"Prefix": "b"}, "Status": "Enabled", "Expiration": {"Days": 1}}], "InvalidArgument", "two rules with one ID"),
        ([{"ID": "x", "Filter": {"Prefix": ""}, "Status": "Enabled",
           "Expiration": {"Date": datetime.datetime(2030, 1, 1, 12, tzinfo=datetime.timezone.utc)}}], "InvalidArgument",
         "a date not at midnight"),
        ([{"ID": "x", "Filter": {"Tag": {"Key": "a", "Value": "b"}}, "Status": "Enabled",
           "AbortIncompleteMultipartUpload": {"DaysAfterInitiation": 1}}], "InvalidRequest", "abort uploads with a tag filter"),
    ]
    for r, code, what in bad:
        eq(error(c.s3.put_bucket_lifecycle_configuration, Bucket=b, LifecycleConfiguration={"Rules": r})[0], code, what)
    eq(len(c.s3.get_bucket_lifecycle_configuration(Bucket=b)["Rules"]), 4, "a refused configuration changes nothing")
    c.s3.delete_bucket_lifecycle(Bucket=b)
    eq(error(c.s3.get_bucket_lifecycle_configuration, Bucket=b)[0], "NoSuchLifecycleConfiguration", "deleted")
    eq(error(c.s3.put_bucket_lifecycle_configuration, Bucket=b + "-none", LifecycleConfiguration={"Rules": rules})[0],
       "NoSuchBucket", "no such bucket")
    c.empty(b)


@test
def bucket_lifecycle_transitions_are_refused(c):
    """One storage class: a transition is refused, never accepted and ignored."""
    b = c.bucket()
    r = [{"ID": "t", "Filter": {"Prefix": ""}, "Status": "Enabled", "Transitions": [{"Days": 30, "StorageClass": "GLACIER"}]}]
    eq(error(c.s3.put_bucket_lifecycle_configuration, Bucket=b, LifecycleConfiguration={"Rules": r})[1], 501, "a transition")
    c.empty(b)


@test
def object_lock_retention_and_legal_hold(c):
    """A version under GOVERNANCE retention or a legal hold is not deleted; the bypass
    header lifts the first and not the second."""
    b = "conf-" + uuid.uuid4().hex[:20]
    c.s3.create_bucket(Bucket=b, ObjectLockEnabledForBucket=True)
    eq(c.s3.get_bucket_versioning(Bucket=b).get("Status"), "Enabled", "a lock bucket is versioned")
    eq(c.s3.get_object_lock_configuration(Bucket=b)["ObjectLockConfiguration"]["ObjectLockEnabled"], "Enabled", "lock enabled")
    until = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(days=1)
    v = c.s3.put_object(Bucket=b, Key="k", Body=b"kept", ObjectLockMode="GOVERNANCE", ObjectLockRetainUntilDate=until)["VersionId"]
    eq(c.s3.head_object(Bucket=b, Key="k")["ObjectLockMode"], "GOVERNANCE", "HEAD answers the mode")
    eq(error(c.s3.delete_object, Bucket=b, Key="k", VersionId=v), ("AccessDenied", 403), "a retained version")
    c.s3.put_object_legal_hold(Bucket=b, Key="k", VersionId=v, LegalHold={"Status": "ON"})
    eq(c.s3.get_object_legal_hold(Bucket=b, Key="k", VersionId=v)["LegalHold"]["Status"], "ON", "GetObjectLegalHold")
    eq(error(c.s3.delete_object, Bucket=b, Key="k", VersionId=v, BypassGovernanceRetention=True)[1], 403,
       "a held version, even with the bypass")
    c.s3.put_object_legal_hold(Bucket=b, Key="k", VersionId=v, LegalHold={"Status": "OFF"})
    c.s3.delete_object(Bucket=b, Key="k", VersionId=v, BypassGovernanceRetention=True)
    eq(error(c.s3.head_object, Bucket=b, Key="k", VersionId=v)[1], 404, "deleted with the bypass")
    c.empty(b)
    plain = c.bucket()
    eq(error(c.s3.get_object_lock_configuration, Bucket=plain)[0], "ObjectLockConfigurationNotFoundError", "a bucket without lock")
    c.empty(plain)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--endpoint", required=True)
    ap.add_argument("--access-key", default=os.environ.get("AWS_ACCESS_KEY_ID"))
    ap.add_argument("--secret-key", default=os.environ.get("AWS_SECRET_ACCESS_KEY"))
    ap.add_argument("--region", default="us-east-1")
    ap.add_argument("--only", default="")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    if not a.access_key or not a.secret_key:
        ap.error("keys are needed: --access-key and --secret-key (or AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY)")
    c = Ctx(a.endpoint, a.access_key, a.secret_key, a.region)
    results = []
    for t in TESTS:
        if a.only not in t.__name__:
            continue
        started = time.time()
        try:
            t(c)
            results.append({"test": t.__name__, "ok": True, "seconds": round(time.time() - started, 3)})
        except Exception as e:  # a failed check or an unexpected error: both fail the test
            detail = str(e) if isinstance(e, AssertionError) else traceback.format_exc(limit=3)
            results.append({"test": t.__name__, "ok": False, "error": detail})
    passed = sum(r["ok"] for r in results)
    if a.json:
        print(json.dumps({"endpoint": a.endpoint, "passed": passed, "total": len(results), "results": results}, indent=1))
    else:
        for r in results:
            print(("PASS " if r["ok"] else "FAIL ") + r["test"] + ("" if r["ok"] else ": " + r["error"]))
        print(f"conformance: {passed} of {len(results)} passed against {a.endpoint}")
    sys.exit(0 if passed == len(results) else 1)


if __name__ == "__main__":
    main()
