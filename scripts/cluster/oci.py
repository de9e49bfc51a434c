#!/usr/bin/env python3
"""Builds OCI image layouts without a container engine or a registry, for cluster.sh.

  oci.py layer OUT.tar DEST=SRC [DEST=SRC ...]
      a layer tar holding the file SRC at the path DEST (relative, e.g. usr/bin/ollama),
      owned by root, mode and mtime from SRC; `DEST=@dir` adds an empty directory and
      `DEST=->TARGET` a symlink.
  oci.py image OUT.tar --name REF [--name REF2 ...] [--layer L.tar ...] [--entrypoint JSON] [--cmd JSON]
               [--env K=V ...] [--expose PORT/PROTO ...] [--workdir DIR] [--user U]
               [--label K=V ...]
      an OCI image layout (oci-layout, index.json, blobs/sha256) as one tar, for
      `ctr -n k8s.io images import`: one index entry per REF, each carrying
      io.containerd.image.name=REF (containerd names the image REF) and
      org.opencontainers.image.ref.name=its tag; all point at the one manifest.

Layers are stored uncompressed (media type ...layer.v1.tar): no gzip pass over hundreds of
MB, and the layer digest is its diff ID. A layer tar shared by two images (the Debian base)
is the same blob in both, stored once by containerd.
"""
import hashlib
import io
import json
import os
import shutil
import sys
import tarfile
import tempfile


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest(), os.path.getsize(path)


def cmd_layer(argv):
    out, specs = argv[0], argv[1:]
    tmp = out + ".tmp"
    with tarfile.open(tmp, "w", format=tarfile.PAX_FORMAT) as tar:
        for spec in specs:
            dest, src = spec.split("=", 1)
            dest = dest.lstrip("/")
            if src == "@dir":
                ti = tarfile.TarInfo(dest)
                ti.type, ti.mode, ti.mtime = tarfile.DIRTYPE, 0o755, 0
                tar.addfile(ti)
                continue
            if src.startswith("->"):
                ti = tarfile.TarInfo(dest)
                ti.type, ti.linkname, ti.mode, ti.mtime = tarfile.SYMTYPE, src[2:], 0o777, 0
                tar.addfile(ti)
                continue
            ti = tar.gettarinfo(src, arcname=dest)
            ti.uid = ti.gid = 0
            ti.uname = ti.gname = "root"
            if ti.isfile():
                with open(src, "rb") as f:
                    tar.addfile(ti, f)
            else:
                tar.addfile(ti)
    os.replace(tmp, out)


def cmd_image(argv):
    out = argv[0]
    opts = {"layer": [], "env": [], "expose": [], "label": [], "name": []}
    single = {}
    i = 1
    while i < len(argv):
        key = argv[i].lstrip("-")
        val = argv[i + 1]
        i += 2
        if key in opts:
            opts[key].append(val)
        else:
            single[key] = val
    work = tempfile.mkdtemp(prefix="oci-", dir=os.path.dirname(os.path.abspath(out)))
    try:
        blobs = os.path.join(work, "blobs", "sha256")
        os.makedirs(blobs)

        def put_bytes(data, media_type):
            digest = hashlib.sha256(data).hexdigest()
            with open(os.path.join(blobs, digest), "wb") as f:
                f.write(data)
            return {"mediaType": media_type, "digest": "sha256:" + digest, "size": len(data)}

        layers, diff_ids = [], []
        for layer in opts["layer"]:
            digest, size = sha256_file(layer)
            dst = os.path.join(blobs, digest)
            try:
                os.link(layer, dst)
            except OSError:
                shutil.copyfile(layer, dst)
            layers.append({"mediaType": "application/vnd.oci.image.layer.v1.tar",
                           "digest": "sha256:" + digest, "size": size})
            diff_ids.append("sha256:" + digest)
        config = {
            "architecture": "amd64",
            "os": "linux",
            "config": {
                "Env": opts["env"] or ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"],
            },
            "rootfs": {"type": "layers", "diff_ids": diff_ids},
            "history": [{"created_by": "readygap scripts/cluster.sh (oci.py)"} for _ in diff_ids],
        }
        c = config["config"]
        if "entrypoint" in single:
            c["Entrypoint"] = json.loads(single["entrypoint"])
        if "cmd" in single:
            c["Cmd"] = json.loads(single["cmd"])
        if "workdir" in single:
            c["WorkingDir"] = single["workdir"]
        if "user" in single:
            c["User"] = single["user"]
        if opts["expose"]:
            c["ExposedPorts"] = {p: {} for p in opts["expose"]}
        if opts["label"]:
            c["Labels"] = dict(kv.split("=", 1) for kv in opts["label"])
        cfg = put_bytes(json.dumps(config, sort_keys=True).encode(),
                        "application/vnd.oci.image.config.v1+json")
        manifest = {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
                    "config": cfg, "layers": layers}
        man = put_bytes(json.dumps(manifest, sort_keys=True).encode(),
                        "application/vnd.oci.image.manifest.v1+json")
        man["platform"] = {"architecture": "amd64", "os": "linux"}
        entries = []
        for name in opts["name"]:
            tag = name.rsplit(":", 1)[1] if ":" in name.rsplit("/", 1)[-1] else "latest"
            entries.append(dict(man, annotations={"io.containerd.image.name": name,
                                                  "org.opencontainers.image.ref.name": tag}))
        index = {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json",
                 "manifests": entries}
        with open(os.path.join(work, "index.json"), "w") as f:
            json.dump(index, f)
        with open(os.path.join(work, "oci-layout"), "w") as f:
            json.dump({"imageLayoutVersion": "1.0.0"}, f)
        tmp = out + ".tmp"
        with tarfile.open(tmp, "w") as tar:
            for entry in ("oci-layout", "index.json", "blobs"):
                tar.add(os.path.join(work, entry), arcname=entry)
        os.replace(tmp, out)
        print(man["digest"])
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main():
    if len(sys.argv) < 3 or sys.argv[1] not in ("layer", "image"):
        sys.exit(__doc__)
    {"layer": cmd_layer, "image": cmd_image}[sys.argv[1]](sys.argv[2:])


if __name__ == "__main__":
    main()
