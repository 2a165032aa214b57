#!/usr/bin/env python3
"""Import cycles between the modules of memo-runtime/src.

Run from the repository root: `python3 tools/module_cycles.py` (or give
another source folder). A module is a file (foo.rs or foo/mod.rs). An edge
A -> B exists when A's code (comments and `mod tests` left out) names B by a
`crate::`, `super::` or `self::` path. Edges between a module and its own
ancestors or descendants are ignored (a child always sees its parent; a
parent declares its children); every other edge is lifted to the two
children of the modules' common ancestor, so a cycle through submodules
(a/x.rs -> b.rs -> a/y.rs) shows as one between siblings (a <-> b). Prints
each strongly connected component of more than one module, with its edges,
except those made only of testing/ modules."""
import os, re, sys
root = sys.argv[1] if len(sys.argv) > 1 else 'memo-runtime/src'
mods = {}
for d, _, fs in os.walk(root):
    for f in fs:
        if not f.endswith('.rs'): continue
        p = os.path.join(d, f); rel = os.path.relpath(p, root)[:-3].split(os.sep)
        if rel[-1] in ('mod', 'lib'): rel = rel[:-1]
        mods[tuple(rel)] = p
def resolve(path):
    # longest prefix of path that is a module
    for n in range(len(path), 0, -1):
        if tuple(path[:n]) in mods: return tuple(path[:n])
    return ()
edges = {m: set() for m in mods}
for m, p in mods.items():
    src = open(p).read()
    src = src.split('\n#[cfg(test)]\nmod tests')[0]
    src = '\n'.join(l for l in src.split('\n') if not l.lstrip().startswith('//'))
    # expand use-groups crudely: take every path-like token
    for mt in re.finditer(r'\b(crate|super|self)((?:::\s*\{?\s*\w+)+)', src):
        head, rest = mt.group(1), [s for s in re.split(r'[:\s{]+', mt.group(2)) if s]
        base = list(m)
        if head == 'crate': base = []
        elif head == 'super':
            base = list(m[:-1])
            while rest and rest[0] == 'super': base = base[:-1]; rest = rest[1:]
        target = resolve(base + rest)
        if not target or target == m: continue
        if target[:len(m)] == m or m[:len(target)] == target: continue
        # lift both ends to the children of their common ancestor, so that
        # a cycle through submodules shows as one between siblings
        c = 0
        while c < min(len(m), len(target)) and m[c] == target[c]: c += 1
        a, b = m[:c + 1], target[:c + 1]
        edges.setdefault(a, set()).add(b); edges.setdefault(b, set())
# Tarjan
index = {}; low = {}; stack = []; on = set(); out = []; i = [0]
sys.setrecursionlimit(10000)
def sc(v):
    index[v] = low[v] = i[0]; i[0] += 1; stack.append(v); on.add(v)
    for w in edges[v]:
        if w not in index: sc(w); low[v] = min(low[v], low[w])
        elif w in on: low[v] = min(low[v], index[w])
    if low[v] == index[v]:
        comp = []
        while True:
            w = stack.pop(); on.discard(w); comp.append(w)
            if w == v: break
        if len(comp) > 1: out.append(comp)
for v in list(edges):
    if v not in index: sc(v)
bad = 0
for comp in out:
    names = sorted('::'.join(c) or 'crate' for c in comp)
    if all(n.startswith('testing') for n in names): continue
    bad += 1
    print('cycle:', ', '.join(names))
    for a in comp:
        for b in edges[a]:
            if b in comp: print('   ', '::'.join(a), '->', '::'.join(b))
print(f'{bad} cycle(s) outside testing/-only components')
