#!/usr/bin/env python3
"""Measures a Rust source tree (a reviewer's tool, run by hand: `python3 scripts/modgraph.py cycles crates/readygap-core/src`): `loc ROOT...` counts non-blank, non-comment lines outside
#[cfg(test)] items; `cycles CRATE_SRC [depth]` lists the strongly connected components of the
module import graph (edges: every `crate::`/`super::`/`self::` path, in `use` trees and inline)."""
import os, re, sys
from collections import defaultdict

def strip_tests(text):
    # drop every item introduced by #[cfg(test)] (a `mod tests { ... }` or a single fn/use)
    out, i = [], 0
    lines = text.split('\n')
    n = len(lines)
    while i < n:
        if lines[i].strip() == '#[cfg(test)]':
            # skip attribute + following item: until braces balance after the first '{' or a ';'
            depth, seen = 0, False
            i += 1
            while i < n:
                l = re.sub(r'//.*', '', lines[i])
                l = re.sub(r'"(\\.|[^"\\])*"', '""', l)
                depth += l.count('{') - l.count('}')
                if '{' in l: seen = True
                i += 1
                if (seen and depth <= 0) or (not seen and l.rstrip().endswith(';')):
                    break
            continue
        out.append(lines[i]); i += 1
    return '\n'.join(out)

def code_lines(text):
    c = 0
    for l in text.split('\n'):
        s = l.strip()
        if not s or s.startswith('//'): continue
        c += 1
    return c

def rs_files(root):
    for d, _, fs in os.walk(root):
        for f in fs:
            if f.endswith('.rs'): yield os.path.join(d, f)

def modpath(src, f):
    rel = os.path.relpath(f, src)[:-3].split(os.sep)
    if rel[-1] in ('mod', 'lib', 'main'): rel = rel[:-1]
    return tuple(rel)

def expand(tree):
    tree = re.sub(r'\s+', '', tree)
    # returns list of paths (strings with ::)
    def parse(s, i):
        items, cur = [], ''
        while i < len(s):
            ch = s[i]
            if ch == '{':
                subs, i = parse(s, i+1)
                items += [cur + x for x in subs] or [cur.rstrip(':')]
                cur = ''
                continue
            if ch == '}':
                if cur: items.append(cur)
                return items, i+1
            if ch == ',':
                if cur: items.append(cur)
                cur = ''; i += 1; continue
            cur += ch; i += 1
        if cur: items.append(cur)
        return items, i
    return parse(tree, 0)[0]

def edges_of(text, me, mods, is_modrs):
    text = re.sub(r'//[^\n]*', '', text)
    paths = []
    for m in re.finditer(r'\buse\s+([^;]+);', text):
        paths += expand(m.group(1))
    for m in re.finditer(r'\b((?:crate|super|self)(?:::\w+)+)', text):
        paths.append(m.group(1))
    out = set()
    for p in paths:
        p = re.sub(r'\bas\b.*', '', p)
        seg = [x for x in p.split('::') if x]
        if not seg: continue
        if seg[0] == 'crate': base, rest = (), seg[1:]
        elif seg[0] in ('super', 'self'):
            base = list(me) if is_modrs else list(me)  # module path of this file
            rest = seg
            b = list(me)
            while rest and rest[0] in ('super', 'self'):
                if rest[0] == 'super': b = b[:-1]
                rest = rest[1:]
            base = tuple(b)
        else: continue
        full = base + tuple(rest)
        # longest existing module prefix
        tgt = None
        for k in range(len(full), -1, -1):
            if full[:k] in mods: tgt = full[:k]; break
        if tgt is None or tgt == me: continue
        out.add(tgt)
    return out

def scc(nodes, adj):
    idx, low, st, on, res, c = {}, {}, [], set(), [], [0]
    sys.setrecursionlimit(10000)
    def sc(v):
        idx[v] = low[v] = c[0]; c[0] += 1; st.append(v); on.add(v)
        for w in adj[v]:
            if w not in idx: sc(w); low[v] = min(low[v], low[w])
            elif w in on: low[v] = min(low[v], idx[w])
        if low[v] == idx[v]:
            comp = []
            while True:
                w = st.pop(); on.discard(w); comp.append(w)
                if w == v: break
            res.append(comp)
    for v in nodes:
        if v not in idx: sc(v)
    return res

def cycles(src, depth, tests):
    files = list(rs_files(src))
    mods = {modpath(src, f): f for f in files}
    adj = defaultdict(set)
    for m, f in mods.items():
        t = open(f).read()
        if not tests: t = strip_tests(t)
        for tgt in edges_of(t, m, mods, f.endswith('mod.rs')):
            a, b = m[:depth] if depth else m, tgt[:depth] if depth else tgt
            if a == b: continue
            # a module using its own ancestor (or descendant) is not a cycle of jobs at this depth
            if depth == 0 and (a[:len(b)] == b or b[:len(a)] == a): continue
            adj[a].add(b)
    nodes = set(adj) | {x for v in adj.values() for x in v}
    comps = [c for c in scc(sorted(nodes), adj) if len(c) > 1]
    for c in comps:
        cs = set(c)
        print('cycle:', ' '.join('::'.join(x) or 'crate' for x in sorted(c)))
        for a in sorted(c):
            for b in sorted(adj[a] & cs):
                print('   ', '::'.join(a) or 'crate', '->', '::'.join(b) or 'crate')
    print(len(comps), 'cycles')

if __name__ == '__main__':
    cmd = sys.argv[1]
    if cmd == 'loc':
        tot = 0
        for root in sys.argv[2:]:
            for f in rs_files(root) if os.path.isdir(root) else [root]:
                tot += code_lines(strip_tests(open(f).read()))
        print(tot)
    elif cmd == 'locraw':
        tot = 0
        for root in sys.argv[2:]:
            for f in rs_files(root) if os.path.isdir(root) else [root]:
                tot += code_lines(open(f).read())
        print(tot)
    elif cmd == 'cycles':
        src = sys.argv[2]; depth = int(sys.argv[3]) if len(sys.argv) > 3 else 0
        tests = len(sys.argv) > 4 and sys.argv[4] == 'tests'
        cycles(src, depth, tests)
