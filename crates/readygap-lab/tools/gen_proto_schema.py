#!/usr/bin/env python3
"""Writes crates/readygap-lab/src/kube/proto_schema.rs: the field tables the lab's protobuf
decoder (src/kube/proto.rs) reads request bodies with.

Its one job: turn the Go API types of k8s.io/api and k8s.io/apimachinery (their struct tags
give each field's protobuf number and JSON name, omitempty/omitzero and `,inline`; the Go type
gives pointer, slice, map and the scalar kind) into static Rust tables, for the kinds the lab
serves and reads from protobuf. Only names, numbers and flags are written: no upstream code.

Usage (each source is a git directory and a tag, read with `git show`; a `fetch` of
github:kubernetes/api and github:kubernetes/apimachinery gives them):

    python3 crates/readygap-lab/tools/gen_proto_schema.py \
        --api /path/kubernetes+api/repo --api-rev v0.36.3 \
        --apimachinery /path/kubernetes+apimachinery/repo --apimachinery-rev v0.36.3 \
        > crates/readygap-lab/src/kube/proto_schema.rs

(kube/mod.rs declares the module `#[rustfmt::skip]`: one line a field keeps it readable.)

Why the Go types and not generated.proto: the proto files mark every field `optional` and say
nothing of Go's pointers or JSON tags, and the JSON a real API server stores is Go's
encoding/json of the decoded struct (`"resources": {}`, `"rules": null`, zero ints kept where
the tag has no omitempty). A few struct tags name the wrong wire type (DeleteOptions'
propagationPolicy says varint for a string), so the wire type comes from the Go type.
"""

import argparse
import re
import subprocess
import sys

# The top-level objects: (apiVersion, kind, package, Go type).
ROOTS = [
    ("v1", "Namespace", "core/v1", "Namespace"),
    ("v1", "Node", "core/v1", "Node"),
    ("v1", "Pod", "core/v1", "Pod"),
    ("v1", "Service", "core/v1", "Service"),
    ("v1", "Event", "core/v1", "Event"),
    ("v1", "PersistentVolumeClaim", "core/v1", "PersistentVolumeClaim"),
    ("v1", "ConfigMap", "core/v1", "ConfigMap"),
    ("v1", "Secret", "core/v1", "Secret"),
    ("v1", "ServiceAccount", "core/v1", "ServiceAccount"),
    ("apps/v1", "Deployment", "apps/v1", "Deployment"),
    ("apps/v1", "ReplicaSet", "apps/v1", "ReplicaSet"),
    ("batch/v1", "Job", "batch/v1", "Job"),
    ("discovery.k8s.io/v1", "EndpointSlice", "discovery/v1", "EndpointSlice"),
    ("events.k8s.io/v1", "Event", "events/v1", "Event"),
    ("rbac.authorization.k8s.io/v1", "Role", "rbac/v1", "Role"),
    ("rbac.authorization.k8s.io/v1", "RoleBinding", "rbac/v1", "RoleBinding"),
    ("rbac.authorization.k8s.io/v1", "ClusterRole", "rbac/v1", "ClusterRole"),
    ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding", "rbac/v1", "ClusterRoleBinding"),
    ("authentication.k8s.io/v1", "TokenRequest", "authentication/v1", "TokenRequest"),
    ("authorization.k8s.io/v1", "SelfSubjectAccessReview", "authorization/v1",
     "SelfSubjectAccessReview"),
    ("authorization.k8s.io/v1", "SelfSubjectRulesReview", "authorization/v1",
     "SelfSubjectRulesReview"),
    # Registered in every group-version: a typed client's delete sends its own (`""`: any).
    ("", "DeleteOptions", "meta/v1", "DeleteOptions"),
]

API_PACKAGES = ["core/v1", "apps/v1", "batch/v1", "rbac/v1", "discovery/v1", "events/v1",
                "authentication/v1", "authorization/v1"]
MACHINERY = {"meta/v1": "pkg/apis/meta/v1/types.go"}
IMPORTS = {
    "k8s.io/apimachinery/pkg/apis/meta/v1": "meta/v1",
    "k8s.io/apimachinery/pkg/api/resource": "resource",
    "k8s.io/apimachinery/pkg/util/intstr": "intstr",
    "k8s.io/apimachinery/pkg/runtime": "runtime",
    "k8s.io/apimachinery/pkg/types": "types",
}
for p in API_PACKAGES:
    IMPORTS["k8s.io/api/" + p] = p

# Types with their own protobuf and JSON forms (see proto.rs), by package and name.
SPECIAL = {
    ("meta/v1", "Time"): "Time",
    ("meta/v1", "MicroTime"): "MicroTime",
    ("meta/v1", "FieldsV1"): "FieldsV1",
    ("resource", "Quantity"): "Quantity",
    ("intstr", "IntOrString"): "IntOrString",
}
SCALARS = {"string": "Str", "bool": "Bool", "int32": "I32", "int64": "I64"}
EXTERNAL_SCALARS = {("types", "UID"): "string"}


def git_show(repo, rev, path):
    return subprocess.run(["git", "--git-dir", repo, "show", f"{rev}:{path}"],
                          check=True, capture_output=True, text=True).stdout


class Package:
    def __init__(self, key, sources):
        self.key = key
        self.structs = {}  # name -> [(go name, type expr, tag)]
        self.named = {}  # name -> type expr
        self.imports = {}
        for src in sources:
            self.parse(src)

    def parse(self, src):
        for m in re.finditer(r'^\s*(\w+\s+)?"([^"]+)"\s*$', imports_block(src), re.M):
            path = m.group(2)
            alias = (m.group(1) or "").strip() or path.rsplit("/", 1)[-1]
            if path in IMPORTS:
                self.imports[alias] = IMPORTS[path]
        # Whole-line comments, then block comments (a few structs comment fields out).
        src = "\n".join(l for l in src.split("\n") if not l.strip().startswith("//"))
        src = re.sub(r"/\*.*?\*/", "", src, flags=re.S)
        lines = src.split("\n")
        i = 0
        while i < len(lines):
            line = lines[i]
            m = re.match(r"^type (\w+) struct \{\s*$", line)
            if m:
                fields = []
                i += 1
                while not lines[i].startswith("}"):
                    f = parse_field(lines[i])
                    if f:
                        fields.append(f)
                    i += 1
                self.structs[m.group(1)] = fields
            else:
                m = re.match(r"^type (\w+) =?\s*([\w.\[\]*]+)\s*(//.*)?$", line)
                if m:
                    self.named[m.group(1)] = m.group(2)
            i += 1


def imports_block(src):
    m = re.search(r"^import \((.*?)^\)", src, re.M | re.S)
    return m.group(1) if m else ""


def parse_field(line):
    line = line.strip()
    if not line or line.startswith("//"):
        return None
    m = re.match(r"^(\w+)\s+([^\s`]+)\s+`(.*)`\s*(//.*)?$", line)
    if m:
        return m.group(1), m.group(2), m.group(3)
    m = re.match(r"^([\w.*]+)\s+`(.*)`\s*(//.*)?$", line)
    if m:
        return None, m.group(1), m.group(2)
    m = re.match(r"^(\w+)\s+([^\s`]+)\s*(//.*)?$", line)
    if m:  # a field with no tags: not serialized by either codec we care about
        return m.group(1), m.group(2), ""
    raise SystemExit(f"cannot parse struct field: {line!r}")


def tag(tags, key):
    m = re.search(key + r':"([^"]*)"', tags)
    return m.group(1) if m else None


class Gen:
    def __init__(self, packages):
        self.packages = packages
        self.messages = {}  # ident -> (go name, [field rust exprs])
        self.order = []

    def resolve(self, pkg, expr):
        """A type expression -> ('scalar', kind) | ('special', kind) | ('struct', pkg, name)
        | ('slice', elem) | ('map', key, value) | ('ptr', elem) | ('bytes',)."""
        if expr.startswith("*"):
            return ("ptr", self.resolve(pkg, expr[1:]))
        if expr == "[]byte":
            return ("bytes",)
        if expr.startswith("[]"):
            return ("slice", self.resolve(pkg, expr[2:]))
        if expr.startswith("map["):
            depth, j = 0, 3
            while True:
                if expr[j] == "[":
                    depth += 1
                elif expr[j] == "]":
                    depth -= 1
                    if depth == 0:
                        break
                j += 1
            return ("map", self.resolve(pkg, expr[4:j]), self.resolve(pkg, expr[j + 1:]))
        if expr in SCALARS:
            return ("scalar", SCALARS[expr])
        if "." in expr:
            alias, name = expr.split(".", 1)
            target = self.packages[pkg].imports.get(alias)
            if target is None:
                raise SystemExit(f"{pkg}: unknown import {alias} in {expr}")
        else:
            target, name = pkg, expr
        if (target, name) in SPECIAL:
            return ("special", SPECIAL[(target, name)])
        if (target, name) in EXTERNAL_SCALARS:
            return self.resolve(target, EXTERNAL_SCALARS[(target, name)])
        p = self.packages.get(target)
        if p is None:
            raise SystemExit(f"no package {target} for {expr}")
        if name in p.structs:
            return ("struct", target, name)
        if name in p.named:
            return self.resolve(target, p.named[name])
        raise SystemExit(f"{target}: unknown type {name}")

    def ident(self, pkg, name):
        return (pkg.replace("/", "_") + "_" + re.sub(r"(?<!^)(?=[A-Z][a-z])", "_", name)).upper()

    def message(self, pkg, name):
        ident = self.ident(pkg, name)
        if ident in self.messages:
            # The decoder recurses through the tables: a cycle would let a body nest without
            # bound (none of the lab's kinds has one; a new root with one needs a depth limit).
            if self.messages[ident] is None:
                raise SystemExit(f"{pkg}.{name} contains itself")
            return ident
        self.messages[ident] = None
        fields = []
        for go_name, expr, tags in self.packages[pkg].structs[name]:
            js = tag(tags, "json")
            pb = tag(tags, "protobuf")
            if js == "-" or (pb is not None and pb == "-"):
                continue
            if pb is None:
                if js and js.startswith(",inline") and go_name is None:
                    continue  # TypeMeta and ListMeta-like embeds: the envelope carries them
                if pb is None and not tags:
                    continue
                raise SystemExit(f"{pkg}.{name}.{go_name}: no protobuf tag ({tags})")
            parts = pb.split(",")
            number = int(parts[1])
            opts = (js or "").split(",")
            json_name = opts[0] or go_name
            inline = "inline" in opts[1:]
            omit = "Zero" if "omitzero" in opts[1:] else ("Empty" if "omitempty" in opts[1:] else "Never")
            t = self.resolve(pkg, expr)
            fields.append(self.field(f"{pkg}.{name}.{go_name}", number, json_name, t, omit, inline))
        self.messages[ident] = (f"{pkg}.{name}", fields)
        self.order.append(ident)
        return ident

    def kind(self, where, t):
        if t[0] == "scalar":
            return t[1]
        if t[0] == "bytes":
            return "Bytes"
        if t[0] == "special":
            return t[1]
        if t[0] == "struct":
            return f"Msg(&{self.message(t[1], t[2])})"
        raise SystemExit(f"{where}: unsupported element type {t}")

    def field(self, where, number, json_name, t, omit, inline):
        if inline:
            if t[0] != "struct":
                raise SystemExit(f"{where}: inline of a non-struct")
            return (number, "", self.kind(where, t), "Inline", "Never")
        if omit == "Zero" and not (t[0] == "special" and t[1] == "Time"):
            raise SystemExit(f"{where}: omitzero is only read on metav1.Time")
        if t[0] == "ptr":
            return (number, json_name, self.kind(where, t[1]), "Pointer", omit)
        if t[0] == "slice":
            return (number, json_name, self.kind(where, t[1]), "Repeated", omit)
        if t[0] == "map":
            key, value = t[1], t[2]
            if key != ("scalar", "Str"):
                raise SystemExit(f"{where}: map key {key}")
            return (number, json_name, self.kind(where, value), "Map", omit)
        return (number, json_name, self.kind(where, t), "Value", omit)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--api", required=True)
    ap.add_argument("--api-rev", required=True)
    ap.add_argument("--apimachinery", required=True)
    ap.add_argument("--apimachinery-rev", required=True)
    a = ap.parse_args()
    packages = {}
    for p in API_PACKAGES:
        packages[p] = Package(p, [git_show(a.api, a.api_rev, f"{p}/types.go")])
    for p, path in MACHINERY.items():
        packages[p] = Package(p, [git_show(a.apimachinery, a.apimachinery_rev, path)])
    gen = Gen(packages)
    roots = [(av, k, gen.message(p, n)) for av, k, p, n in ROOTS]
    out = sys.stdout
    out.write("// @generated by crates/readygap-lab/tools/gen_proto_schema.py from the Go API types of\n")
    out.write(f"// k8s.io/api {a.api_rev} and k8s.io/apimachinery {a.apimachinery_rev}: do not edit.\n")
    out.write("//! The protobuf field tables of the objects the lab reads from protobuf bodies (see\n")
    out.write("//! `proto`): for each Go struct, its fields' numbers, JSON names, kinds and shapes.\n\n")
    out.write("use super::proto::{Kind::*, Message, Omit::*, Shape::*, f};\n\n")
    out.write("/// The top-level objects: (apiVersion, kind, message).\n")
    out.write("pub static ROOTS: &[(&str, &str, &Message)] = &[\n")
    for av, k, ident in roots:
        out.write(f'    ("{av}", "{k}", &{ident}),\n')
    out.write("];\n")
    for ident in sorted(gen.order):
        go_name, fields = gen.messages[ident]
        out.write(f"\npub static {ident}: Message = Message {{\n")
        out.write(f'    name: "{go_name}",\n')
        out.write("    fields: &[\n")
        for number, json_name, kind, shape, omit in sorted(fields, key=lambda x: x[0]):
            out.write(f'        f({number}, "{json_name}", {kind}, {shape}, {omit}),\n')
        out.write("    ],\n};\n")
    print(f"{len(gen.order)} messages", file=sys.stderr)


if __name__ == "__main__":
    main()
