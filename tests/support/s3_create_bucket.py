#!/usr/bin/python3
"""Creates an S3 bucket with one SigV4-signed PUT (Python's standard library
only): the tests' object store needs a bucket before the collectors start.
usage: s3_create_bucket.py <endpoint> <region> <bucket>, credentials from
AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY. Exit 0 when it exists after."""
import datetime
import hashlib
import hmac
import os
import sys
import urllib.error
import urllib.parse
import urllib.request

endpoint, region, bucket = sys.argv[1:4]
key_id, secret = os.environ["AWS_ACCESS_KEY_ID"], os.environ["AWS_SECRET_ACCESS_KEY"]
host = urllib.parse.urlparse(endpoint).netloc
now = datetime.datetime.now(datetime.timezone.utc)
stamp, day = now.strftime("%Y%m%dT%H%M%SZ"), now.strftime("%Y%m%d")
empty = hashlib.sha256(b"").hexdigest()
headers = {"host": host, "x-amz-content-sha256": empty, "x-amz-date": stamp}
signed = ";".join(sorted(headers))
canonical = "\n".join(["PUT", "/" + bucket, ""] +
                      [f"{name}:{headers[name]}" for name in sorted(headers)] +
                      ["", signed, empty])
scope = f"{day}/{region}/s3/aws4_request"
to_sign = "\n".join(["AWS4-HMAC-SHA256", stamp, scope,
                     hashlib.sha256(canonical.encode()).hexdigest()])
key = ("AWS4" + secret).encode()
for part in (day, region, "s3", "aws4_request"):
    key = hmac.new(key, part.encode(), hashlib.sha256).digest()
signature = hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()
request = urllib.request.Request(f"{endpoint}/{bucket}", method="PUT", headers={
    "x-amz-content-sha256": empty, "x-amz-date": stamp,
    "Authorization": f"AWS4-HMAC-SHA256 Credential={key_id}/{scope}, "
                     f"SignedHeaders={signed}, Signature={signature}"})
try:
    urllib.request.urlopen(request, timeout=10)
except urllib.error.HTTPError as error:
    body = error.read().decode(errors="replace")
    if "BucketAlreadyOwnedByYou" not in body:
        sys.exit(f"create bucket {bucket} at {endpoint}: HTTP {error.code}: {body[:300]}")
