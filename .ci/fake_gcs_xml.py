"""A fake of Google Cloud Storage's XML API, written for memo's CI. It is
NOT Google Cloud Storage, nor any published emulator.

Why it exists: object_store's GCS client (the one memo uses) writes
through the XML API, with `x-goog-if-generation-match: 0` for a create
and `x-goog-if-generation-match: <generation>` for a conditional update,
and no emulator we could install from a package registry honours those
preconditions on XML uploads (checked in issue 26: fake-gcs-server 1.54.0,
which answers such a PUT with 400 "invalid uploadType" and ignores the
generation where it does accept one; gcp-storage-emulator 2026.7.19,
whose XML PUT ignores the header and which has no XML listing, HEAD,
DELETE or multipart upload; gcplocal 0.1.0; drongo 0.8.0 and cloudbox
0.2.3, which have the JSON API only, cloudbox needing Python 3.14). So
memo's GCS conformance suites run against this file.

What it implements, from Google's XML API reference
(cloud.google.com/storage/docs/xml-api/overview), and only as far as
object_store 0.14's GCS client (`src/gcp/client.rs`) calls it:

- `PUT /BUCKET/OBJECT`: a simple upload. `x-goog-if-generation-match: 0`
  succeeds only if no live object exists; `x-goog-if-generation-match: N`
  only if the live object's generation is N;
  `x-goog-if-metageneration-match: M` only if it exists with
  metageneration M (always 1 here: no metadata updates). A failed
  precondition is `412 PreconditionFailed` and changes nothing. Every
  upload makes a new generation (a number larger than any before); the
  answer carries `ETag` (the MD5 of the content, quoted),
  `x-goog-generation` and `x-goog-metageneration`. With
  `x-goog-copy-source: BUCKET/OBJECT` it is a copy, the preconditions
  applying to the destination.
- `GET` / `HEAD /BUCKET/OBJECT`: the object, with `Content-Length`,
  `ETag`, `Last-Modified`, `x-goog-generation`, `Content-Type` and the
  `x-goog-meta-*` headers it was written with; `Range` (`bytes=a-b`,
  `bytes=a-`, `bytes=-n`: 206 with `Content-Range`, 416 past the end);
  `If-Match` / `If-Unmodified-Since` (412), `If-None-Match` /
  `If-Modified-Since` (304), `x-goog-if-generation-match` (412);
  `?generation=N` (404 unless N is the live generation: no object
  versioning here). `404 NoSuchKey` for a missing object.
- `DELETE /BUCKET/OBJECT`: 204, or `404 NoSuchKey`.
- `GET /BUCKET?list-type=2`: the listing object_store reads (the S3-style
  `ListBucketResult`), in key order, with `prefix`, `delimiter`
  (`CommonPrefixes`), `start-after`, `max-keys` (at most 1,000) and
  `continuation-token` / `NextContinuationToken`.
- Multipart uploads: `POST ?uploads` (`InitiateMultipartUploadResult`),
  `PUT ?partNumber=N&uploadId=U` (the part's `ETag`), `POST ?uploadId=U`
  with `CompleteMultipartUpload` (`CompleteMultipartUploadResult`; the
  object appears whole, a new generation), `DELETE ?uploadId=U`.

Every request runs under one lock, so each conditional write is one atomic
step, as on GCS. State is in memory only; buckets are the ones named on
the command line (any other is `404 NoSuchBucket`). No authentication is
checked (the client sends none: `disable_oauth`).

What it cannot tell you: anything where Google's server differs from its
documentation, or from this reading of it; behaviour object_store does not
call (JSON API, versioning, retention, composite objects, ACLs). memo's
GCS conformance here is conformance to this fake.

Run: `python fake_gcs_xml.py --host 127.0.0.1 --port PORT --bucket NAME`.
"""

import argparse
import base64
import hashlib
import sys
import threading
import time
import urllib.parse
import xml.etree.ElementTree as ET
from email.utils import formatdate, parsedate_to_datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from xml.sax.saxutils import escape

XML = "application/xml; charset=UTF-8"
MAX_KEYS = 1000


class Obj:
    __slots__ = ("data", "generation", "etag", "mtime", "content_type", "meta")

    def __init__(self, data, generation, etag, content_type, meta):
        self.data = data
        self.generation = generation
        self.etag = etag
        self.mtime = time.time()
        self.content_type = content_type
        self.meta = meta


class State:
    def __init__(self, buckets):
        self.lock = threading.Lock()
        self.buckets = {name: {} for name in buckets}
        self.uploads = {}  # upload id -> (bucket, key, content type, meta, {part: bytes})
        self.last_generation = 0
        self.next_upload = 0

    def generation(self):
        # Microseconds since the epoch, as GCS's look, but always larger
        # than the last one handed out.
        now = time.time_ns() // 1000
        self.last_generation = max(now, self.last_generation + 1)
        return self.last_generation


def quoted_md5(data):
    return '"' + hashlib.md5(data).hexdigest() + '"'


def iso(ts):
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ts)) + ".%03dZ" % (int(ts * 1000) % 1000)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # TCP_NODELAY: a response's headers and body are two writes, and with
    # Nagle's algorithm on, the second waits for the client's delayed ACK
    # (some 40 ms a request).
    disable_nagle_algorithm = True
    server_version = "memo-fake-gcs-xml"
    state = None  # set in main

    def log_message(self, fmt, *args):  # quiet: CI keeps the log small
        pass

    # --- plumbing -----------------------------------------------------------

    def body(self):
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            chunks = []
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip(), 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return b"".join(chunks)
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def send(self, status, body=b"", headers=(), content_type=None, head=False, length=None):
        self.send_response(status)
        for name, value in headers:
            self.send_header(name, value)
        if content_type:
            self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body) if length is None else length))
        # Headers and body in one write.
        self._headers_buffer.append(b"\r\n")
        if body and not head:
            self._headers_buffer.append(body)
        self.flush_headers()

    def error(self, status, code, message, head=False):
        body = (
            "<?xml version='1.0' encoding='UTF-8'?><Error><Code>%s</Code>"
            "<Message>%s</Message></Error>" % (code, escape(message))
        ).encode()
        self.send(status, body, content_type=XML, head=head)

    def precondition_failed(self, head=False):
        self.error(412, "PreconditionFailed",
                   "At least one of the pre-conditions you specified did not hold.", head)

    def target(self):
        """(bucket name, objects of the bucket or None, key or "", query)."""
        url = urllib.parse.urlsplit(self.path)
        query = urllib.parse.parse_qs(url.query, keep_blank_values=True)
        path = url.path.lstrip("/")
        # object_store percent-encodes the bucket too, and a key whole
        # (its "/" as %2F): split at the first literal "/", then decode.
        bucket, _, key = path.partition("/")
        bucket = urllib.parse.unquote(bucket)
        return bucket, self.state.buckets.get(bucket), urllib.parse.unquote(key), query

    def preconditions_hold(self, obj):
        match = self.headers.get("x-goog-if-generation-match")
        if match is not None:
            if int(match) == 0:
                if obj is not None:
                    return False
            elif obj is None or obj.generation != int(match):
                return False
        meta = self.headers.get("x-goog-if-metageneration-match")
        if meta is not None and (obj is None or int(meta) != 1):
            return False
        return True

    def object_headers(self, obj):
        headers = [
            ("ETag", obj.etag),
            ("Last-Modified", formatdate(obj.mtime, usegmt=True)),
            ("x-goog-generation", str(obj.generation)),
            ("x-goog-metageneration", "1"),
            ("x-goog-stored-content-length", str(len(obj.data))),
        ]
        headers += [("x-goog-meta-" + k, v) for k, v in obj.meta.items()]
        return headers

    def written_meta(self):
        content_type = self.headers.get("Content-Type") or "application/octet-stream"
        meta = {k[len("x-goog-meta-"):]: v for k, v in self.headers.items()
                if k.lower().startswith("x-goog-meta-")}
        return content_type, meta

    # --- methods ------------------------------------------------------------

    def do_PUT(self):
        data = self.body()
        bucket, objects, key, query = self.target()
        if objects is None:
            return self.error(404, "NoSuchBucket", "The specified bucket does not exist.")
        if not key:
            return self.error(400, "InvalidArgument", "bucket creation is not supported")
        state = self.state
        if "uploadId" in query:
            with state.lock:
                upload = state.uploads.get(query["uploadId"][0])
                if upload is None or upload[:2] != (bucket, key):
                    return self.error(404, "NoSuchUpload", "The requested upload was not found.")
                upload[4][int(query["partNumber"][0])] = data
            return self.send(200, headers=[("ETag", quoted_md5(data))])
        source = self.headers.get("x-goog-copy-source")
        with state.lock:
            if source is not None:
                src_bucket, _, src_key = urllib.parse.unquote(source.lstrip("/")).partition("/")
                src = state.buckets.get(src_bucket, {}).get(src_key)
                if src is None:
                    return self.error(404, "NoSuchKey", "The specified key does not exist.")
                data, content_type, meta = src.data, src.content_type, dict(src.meta)
            else:
                content_type, meta = self.written_meta()
            if not self.preconditions_hold(objects.get(key)):
                return self.precondition_failed()
            obj = Obj(data, state.generation(), quoted_md5(data), content_type, meta)
            objects[key] = obj
        if source is not None:
            body = ("<?xml version='1.0' encoding='UTF-8'?><CopyObjectResult>"
                    "<LastModified>%s</LastModified><ETag>%s</ETag></CopyObjectResult>"
                    % (iso(obj.mtime), escape(obj.etag))).encode()
            return self.send(200, body, self.object_headers(obj), XML)
        self.send(200, headers=self.object_headers(obj))

    def do_POST(self):
        data = self.body()
        bucket, objects, key, query = self.target()
        if objects is None:
            return self.error(404, "NoSuchBucket", "The specified bucket does not exist.")
        state = self.state
        if "uploads" in query:
            content_type, meta = self.written_meta()
            with state.lock:
                state.next_upload += 1
                upload_id = "upload-%d" % state.next_upload
                state.uploads[upload_id] = (bucket, key, content_type, meta, {})
            body = ("<?xml version='1.0' encoding='UTF-8'?><InitiateMultipartUploadResult>"
                    "<Bucket>%s</Bucket><Key>%s</Key><UploadId>%s</UploadId>"
                    "</InitiateMultipartUploadResult>"
                    % (escape(bucket), escape(key), upload_id)).encode()
            return self.send(200, body, content_type=XML)
        if "uploadId" in query:
            try:
                root = ET.fromstring(data)
                parts = [(int(p.findtext("PartNumber")), p.findtext("ETag"))
                         for p in root.iter("Part")]
            except (ET.ParseError, TypeError, ValueError):
                return self.error(400, "MalformedXML", "The XML you provided was not well-formed.")
            with state.lock:
                upload = state.uploads.get(query["uploadId"][0])
                if upload is None or upload[:2] != (bucket, key):
                    return self.error(404, "NoSuchUpload", "The requested upload was not found.")
                stored = upload[4]
                if [n for n, _ in parts] != sorted({n for n, _ in parts}):
                    return self.error(400, "InvalidPartOrder", "The parts are not in order.")
                for number, etag in parts:
                    if number not in stored or quoted_md5(stored[number]) != etag:
                        return self.error(400, "InvalidPart", "A part was not found.")
                whole = b"".join(stored[n] for n, _ in parts)
                digest = hashlib.md5(b"".join(hashlib.md5(stored[n]).digest() for n, _ in parts))
                etag = '"%s-%d"' % (digest.hexdigest(), len(parts))
                obj = Obj(whole, state.generation(), etag, upload[2], upload[3])
                objects[key] = obj
                del state.uploads[query["uploadId"][0]]
            body = ("<?xml version='1.0' encoding='UTF-8'?><CompleteMultipartUploadResult>"
                    "<Bucket>%s</Bucket><Key>%s</Key><ETag>%s</ETag>"
                    "</CompleteMultipartUploadResult>"
                    % (escape(bucket), escape(key), escape(etag))).encode()
            return self.send(200, body, self.object_headers(obj), XML)
        self.error(400, "InvalidArgument", "unsupported POST")

    def do_DELETE(self):
        self.body()
        bucket, objects, key, query = self.target()
        if objects is None:
            return self.error(404, "NoSuchBucket", "The specified bucket does not exist.")
        with self.state.lock:
            if "uploadId" in query:
                self.state.uploads.pop(query["uploadId"][0], None)
                return self.send(204)
            obj = objects.get(key)
            if obj is None:
                return self.error(404, "NoSuchKey", "The specified key does not exist.")
            if not self.preconditions_hold(obj):
                return self.precondition_failed()
            del objects[key]
        self.send(204)

    def do_HEAD(self):
        self.do_GET(head=True)

    def do_GET(self, head=False):
        self.body()
        bucket, objects, key, query = self.target()
        if objects is None:
            return self.error(404, "NoSuchBucket", "The specified bucket does not exist.", head)
        if not key:
            return self.list(objects, bucket, query)
        with self.state.lock:
            obj = objects.get(key)
        if obj is None or ("generation" in query and query["generation"][0] != str(obj.generation)):
            return self.error(404, "NoSuchKey", "The specified key does not exist.", head)
        if not self.preconditions_hold(obj):
            return self.precondition_failed(head)
        if_match = self.headers.get("If-Match")
        if if_match is not None and if_match not in ("*", obj.etag):
            return self.precondition_failed(head)
        since = self.headers.get("If-Unmodified-Since")
        if since is not None and int(obj.mtime) > parsedate_to_datetime(since).timestamp():
            return self.precondition_failed(head)
        headers = self.object_headers(obj)
        if_none_match = self.headers.get("If-None-Match")
        if if_none_match is not None and if_none_match in ("*", obj.etag):
            return self.send(304, headers=headers, head=True, length=0)
        since = self.headers.get("If-Modified-Since")
        if since is not None and int(obj.mtime) <= parsedate_to_datetime(since).timestamp():
            return self.send(304, headers=headers, head=True, length=0)
        data, size = obj.data, len(obj.data)
        wanted = self.headers.get("Range")
        if wanted is None:
            return self.send(200, data, headers, obj.content_type, head)
        first, _, last = wanted.partition("=")[2].partition("-")
        if first == "":
            start, end = max(size - int(last), 0), size - 1
        else:
            start = int(first)
            end = min(int(last), size - 1) if last else size - 1
        if start >= size or start > end:
            headers.append(("Content-Range", "bytes */%d" % size))
            return self.error(416, "InvalidRange", "The requested range cannot be satisfied.", head)
        headers.append(("Content-Range", "bytes %d-%d/%d" % (start, end, size)))
        self.send(206, data[start:end + 1], headers, obj.content_type, head)

    def list(self, objects, bucket, query):
        if query.get("list-type", [""])[0] != "2":
            return self.error(400, "InvalidArgument", "only list-type=2 listings are implemented")
        prefix = query.get("prefix", [""])[0]
        delimiter = query.get("delimiter", [""])[0]
        max_keys = min(int(query.get("max-keys", [MAX_KEYS])[0]), MAX_KEYS)
        after = query.get("start-after", [""])[0]
        token = query.get("continuation-token", [""])[0]
        if token:
            after = max(after, base64.urlsafe_b64decode(token.encode()).decode())
        with self.state.lock:
            keys = sorted(k for k in objects if k.startswith(prefix) and k > after)
            entries, prefixes, last, truncated = [], [], None, False
            for key in keys:
                if delimiter:
                    cut = key.find(delimiter, len(prefix))
                    if cut >= 0:
                        common = key[:cut + len(delimiter)]
                        if prefixes and prefixes[-1] == common:
                            last = key
                            continue
                        if len(entries) + len(prefixes) == max_keys:
                            truncated = True
                            break
                        prefixes.append(common)
                        last = key
                        continue
                if len(entries) + len(prefixes) == max_keys:
                    truncated = True
                    break
                entries.append((key, objects[key]))
                last = key
            # A common prefix's later keys belong to it: skip past them.
            if truncated and prefixes and last.startswith(prefixes[-1]):
                last = prefixes[-1] + "\U0010ffff"
        out = ["<?xml version='1.0' encoding='UTF-8'?>",
               "<ListBucketResult xmlns='http://doc.s3.amazonaws.com/2006-03-01'>",
               "<Name>%s</Name><Prefix>%s</Prefix><KeyCount>%d</KeyCount>"
               "<MaxKeys>%d</MaxKeys><IsTruncated>%s</IsTruncated>"
               % (escape(bucket), escape(prefix), len(entries) + len(prefixes), max_keys,
                  "true" if truncated else "false")]
        for key, obj in entries:
            out.append("<Contents><Key>%s</Key><Generation>%d</Generation>"
                       "<MetaGeneration>1</MetaGeneration><LastModified>%s</LastModified>"
                       "<ETag>%s</ETag><Size>%d</Size></Contents>"
                       % (escape(key), obj.generation, iso(obj.mtime), escape(obj.etag),
                          len(obj.data)))
        for common in prefixes:
            out.append("<CommonPrefixes><Prefix>%s</Prefix></CommonPrefixes>" % escape(common))
        if truncated:
            next_token = base64.urlsafe_b64encode(last.encode()).decode()
            out.append("<NextContinuationToken>%s</NextContinuationToken>" % next_token)
        out.append("</ListBucketResult>")
        self.send(200, "".join(out).encode(), content_type=XML)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--bucket", action="append", required=True)
    args = parser.parse_args()
    Handler.state = State(args.bucket)
    server = ThreadingHTTPServer((args.host, args.port), Handler)
    server.daemon_threads = True
    print("fake GCS XML API on http://%s:%d, buckets %s" % (args.host, args.port, args.bucket),
          flush=True)
    server.serve_forever()


if __name__ == "__main__":
    sys.exit(main())
