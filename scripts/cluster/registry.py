#!/usr/bin/env python3
"""A read-only image registry for cluster.sh's images, on the node's own address.

  registry.py IMAGES_DIR ADDRESS PORT

Serves the OCI layouts IMAGES_DIR/*.oci.tar (built by oci.py) over the registry API's
pull side (OCI distribution spec: GET/HEAD /v2/, /v2/NAME/manifests/REF, /v2/NAME/blobs/DIGEST),
straight from the tars. containerd's hosts.toml sends every pull for the usual registries here
(docker.io, ghcr.io, registry.k8s.io, ...), so:
  - a pod whose image is one built here pulls it even with imagePullPolicy Always (an image
    tagged :latest, e.g. `kubectl run ... --image=curlimages/curl`);
  - a pull of any other image fails at once with "not found" instead of leaving the machine.
An image NAME is matched by its repository (e.g. curlimages/curl) and, when containerd says
which registry it wanted (the ?ns= query), by that registry too.
"""
import glob
import http.server
import json
import os
import re
import sys
import tarfile

MANIFEST_TYPES = ("application/vnd.oci.image.manifest.v1+json",
                  "application/vnd.docker.distribution.manifest.v2+json")


def load(images_dir):
    tags = {}  # (registry, repository, tag) -> digest
    blobs = {}  # digest -> (tar path, offset, size)
    media = {}  # manifest digest -> media type
    for path in sorted(glob.glob(os.path.join(images_dir, "*.oci.tar"))):
        with tarfile.open(path) as tar:
            index = None
            for m in tar.getmembers():
                if m.name in ("index.json", "./index.json"):
                    index = json.load(tar.extractfile(m))
                mm = re.match(r"^(?:\./)?blobs/sha256/([0-9a-f]{64})$", m.name)
                if mm and m.isfile():
                    blobs["sha256:" + mm.group(1)] = (path, m.offset_data, m.size)
            for desc in (index or {}).get("manifests", []):
                name = desc.get("annotations", {}).get("io.containerd.image.name", "")
                mm = re.match(r"^([^/]+)/(.+):([^:/]+)$", name)
                if not mm:
                    continue
                tags[(mm.group(1), mm.group(2), mm.group(3))] = desc["digest"]
                media[desc["digest"]] = desc.get("mediaType", MANIFEST_TYPES[0])
    return tags, blobs, media


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "readygap-cluster-registry/1"

    def log_message(self, fmt, *args):
        sys.stderr.write("%s %s\n" % (self.log_date_time_string(), fmt % args))

    def error(self, code, what):
        body = json.dumps({"errors": [{"code": what, "message": what.lower().replace("_", " ")}]}).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def blob(self, digest, content_type):
        found = self.server.blobs.get(digest)
        if not found:
            return self.error(404, "BLOB_UNKNOWN")
        path, offset, size = found
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(size))
        self.send_header("Docker-Content-Digest", digest)
        self.send_header("Docker-Distribution-API-Version", "registry/2.0")
        self.end_headers()
        if self.command == "HEAD":
            return
        with open(path, "rb") as f:
            f.seek(offset)
            left = size
            while left:
                chunk = f.read(min(left, 1 << 20))
                if not chunk:
                    break
                self.wfile.write(chunk)
                left -= len(chunk)

    def do_GET(self):
        path, _, query = self.path.partition("?")
        params = dict(p.partition("=")[::2] for p in query.split("&") if p)
        if path in ("/v2", "/v2/"):
            body = b"{}"
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Docker-Distribution-API-Version", "registry/2.0")
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)
            return
        m = re.match(r"^/v2/(.+)/(manifests|blobs)/([^/]+)$", path)
        if not m:
            return self.error(404, "NAME_UNKNOWN")
        repo, kind, ref = m.groups()
        ns = params.get("ns")
        if kind == "blobs":
            return self.blob(ref, "application/octet-stream")
        tags = self.server.tags
        names = [k for k in tags if k[1] == repo and (ns is None or k[0] == ns)]
        if not names:
            return self.error(404, "NAME_UNKNOWN")
        if ref.startswith("sha256:"):
            digest = ref if any(tags[k] == ref for k in names) else None
        else:
            digest = next((tags[k] for k in names if k[2] == ref), None)
        if not digest:
            return self.error(404, "MANIFEST_UNKNOWN")
        return self.blob(digest, self.server.media.get(digest, MANIFEST_TYPES[0]))

    do_HEAD = do_GET


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    images_dir, addr, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
    server = http.server.ThreadingHTTPServer((addr, port), Handler)
    server.daemon_threads = True
    server.tags, server.blobs, server.media = load(images_dir)
    for (reg, repo, tag), digest in sorted(server.tags.items()):
        sys.stderr.write("serving %s/%s:%s %s\n" % (reg, repo, tag, digest))
    sys.stderr.flush()
    server.serve_forever()


if __name__ == "__main__":
    main()
