"""PTX of every kernel variant, for checking that a change of layout changed no kernel.

    python -m benchmarks.dev.ptx_fingerprint --out before.json [--arch sm_75 sm_80 sm_90]
    python -m benchmarks.dev.ptx_fingerprint --compare before.json after.json

Each kernel file is compiled through NVRTC (no GPU needed) with all of its name
expressions; the PTX is cut into its ``.entry`` functions, and each variant's entry (with
the module-scope declarations it names: shared and constant arrays) is hashed after one
normalization: NVRTC names a file's anonymous namespace after the file, so moving code
between files renames ``_INTERNAL_<hash>_<len>_<file>`` prefixes and nothing else.
``--compare`` matches variants by name expression and prints every one that differs.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import re
import sys
from collections import defaultdict

_ENTRY = re.compile(r"^(?:\.visible\s+|\.weak\s+)*\.entry\s+(\S+?)\s*\(", re.MULTILINE)
_INTERNAL = re.compile(r"(\d+)(_INTERNAL_[0-9a-f]{8}_)")
_GLOBAL_DECL = re.compile(
    r"^(?:\.visible\s+|\.extern\s+|\.weak\s+)*\.(?:shared|const|global)\s.*?([A-Za-z_$][\w$]*)\s*"
    r"(?:\[[^\]]*\])*\s*(?:=.*)?;\s*$", re.MULTILINE)


def _compile(source, filename, exprs, arch, options):
    from cupy_backends.cuda.libs import nvrtc

    prog = nvrtc.createProgram(source, filename, [], [])
    try:
        for e in exprs:
            nvrtc.addNameExpression(prog, e)
        nvrtc.compileProgram(prog, list(options) + [f"-arch={arch}"])
        lowered = {e: nvrtc.getLoweredName(prog, e) for e in exprs}
        ptx = nvrtc.getPTX(prog)
        return (ptx.decode() if isinstance(ptx, bytes) else ptx), lowered
    finally:
        nvrtc.destroyProgram(prog)


def _entries(ptx):
    """{mangled name: entry text} and the module-scope declarations by symbol."""
    starts = [(m.start(), m.group(1)) for m in _ENTRY.finditer(ptx)]
    out = {}
    for i, (pos, name) in enumerate(starts):
        end = starts[i + 1][0] if i + 1 < len(starts) else len(ptx)
        out[name] = ptx[pos:end]
    decls = {m.group(1): m.group(0) for m in _GLOBAL_DECL.finditer(ptx[:starts[0][0]] if starts else ptx)}
    return out, decls


def _normal(text):
    # a mangled name of a file's anonymous namespace is <length>_INTERNAL_<...file...>:
    # drop exactly <length> characters
    out, pos = [], 0
    for m in _INTERNAL.finditer(text):
        if m.start() < pos:
            continue
        out.append(text[pos:m.start()])
        out.append("<internal>")
        pos = m.start(2) + int(m.group(1))
    out.append(text[pos:])
    return "".join(out)


def fingerprint(archs):
    from cupyprep import _kernels

    by_file = defaultdict(list)
    for filename, expr in _kernels.variants():
        by_file[filename].append(expr)
    result = {}
    for arch in archs:
        table = {}
        for filename, exprs in sorted(by_file.items()):
            ptx, lowered = _compile(_kernels.read_source(filename), filename, exprs, arch,
                                    _kernels.NVRTC_OPTIONS)
            entries, decls = _entries(ptx)
            for expr, name in lowered.items():
                body = entries[name]
                used = [d for sym, d in sorted(decls.items()) if sym in body]
                text = _normal("\n".join(used) + "\n" + body)
                table[expr] = hashlib.sha256(text.encode()).hexdigest()
            print(f"{arch} {filename}: {len(exprs)} variants", file=sys.stderr, flush=True)
        result[arch] = table
    return result


def compare(before_path, after_path):
    before, after = (json.load(open(p)) for p in (before_path, after_path))
    bad = 0
    for arch in sorted(set(before) | set(after)):
        b, a = before.get(arch, {}), after.get(arch, {})
        for expr in sorted(set(b) | set(a)):
            if b.get(expr) != a.get(expr):
                bad += 1
                what = "missing after" if expr not in a else "new" if expr not in b else "differs"
                print(f"{arch} {what}: {expr}")
        print(f"{arch}: {len(b)} before, {len(a)} after")
    print("identical" if not bad else f"{bad} differences")
    return bad


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m benchmarks.dev.ptx_fingerprint", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out")
    p.add_argument("--arch", nargs="*", default=["sm_75", "sm_80", "sm_90"])
    p.add_argument("--compare", nargs=2, metavar=("BEFORE", "AFTER"))
    args = p.parse_args(argv)
    if args.compare:
        raise SystemExit(1 if compare(*args.compare) else 0)
    result = fingerprint(args.arch)
    with open(args.out, "w") as f:
        json.dump(result, f, indent=0, sort_keys=True)


if __name__ == "__main__":
    main()
