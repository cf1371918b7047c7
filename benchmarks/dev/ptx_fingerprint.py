"""PTX of every kernel variant, for checking that a change of layout changed no kernel.

    python -m benchmarks.dev.ptx_fingerprint --out before.json [--arch sm_75 sm_80 sm_90]
    python -m benchmarks.dev.ptx_fingerprint --compare before.json after.json

Each kernel file is compiled through NVRTC (no GPU needed) with all of its name
expressions; the PTX is cut into its functions, and each variant's ``.entry`` (with the
``.func`` functions it calls, which NVRTC puts after the module's last entry, and the
module-scope declarations they name: shared and constant arrays) is hashed after
normalizing what depends on the file and on the entry's place in it, not on the code:
the anonymous namespace's names (``<len>_INTERNAL_<hash>_<len>_<file>_<hash>[_<pid>]`` and
``<len>_GLOBAL__N__...`` likewise, the hash differing between compiles), and the numbers
that count the module's functions (``$L__BB<function>_<block>``, ``__local_depot<function>``,
``// callseq <call>``). ``--compare`` matches variants by name expression and prints every
one that differs.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import re
import sys
from collections import defaultdict

_FUNCTION = re.compile(
    r"^(?:\.visible\s+|\.weak\s+)*\.(entry|func)\s+(?:\([^)]*\)\s*)?([A-Za-z_$][\w$]*)", re.MULTILINE)
_ANON = re.compile(r"(\d+)(?:_INTERNAL_|_GLOBAL__N__)[0-9a-f]{8}_(\d+)_")
_COUNTERS = [(re.compile(r"\$L__BB\d+_"), "$L__BB_"), (re.compile(r"__local_depot\d+"), "__local_depot"),
             (re.compile(r"// callseq \d+"), "// callseq")]
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


def _functions(ptx):
    """{mangled name: (kind, definition text)} of the module's function definitions, each
    up to its closing brace (prototypes left out)."""
    starts = [(m.start(), m.group(1), m.group(2)) for m in _FUNCTION.finditer(ptx)]
    out = {}
    for i, (pos, kind, name) in enumerate(starts):
        text = ptx[pos:starts[i + 1][0] if i + 1 < len(starts) else len(ptx)]
        body = re.search(r"^\{$", text, re.MULTILINE)
        head_end = re.search(r"^;$", text, re.MULTILINE)
        if body is None or (head_end is not None and head_end.start() < body.start()):
            continue
        depth = 0
        for k in range(body.start(), len(text)):
            depth += {"{": 1, "}": -1}.get(text[k], 0)
            if depth == 0:
                break
        out[name] = (kind, text[:k + 1])
    return out


def _decls(ptx):
    """The module-scope declarations (before the first entry) by symbol."""
    first = re.search(r"^(?:\.visible\s+|\.weak\s+)*\.entry\s", ptx, re.MULTILINE)
    return {m.group(1): m.group(0) for m in _GLOBAL_DECL.finditer(ptx[:first.start()] if first else ptx)}


def _normal(text):
    # a mangled name of the anonymous namespace is <length>_INTERNAL_<hash>_<n>_<file>_<hash>,
    # sometimes followed by _<pid> (likewise _GLOBAL__N__): drop exactly <length>
    # characters, <length> being the end of a run of digits (a pid before it ends in digits)
    out, pos = [], 0
    while (m := _ANON.search(text, pos)) is not None:
        digits, start = m.group(1), m.start(1) + len(m.group(1))
        end = m.end() + int(m.group(2))  # past the file's name
        tail = re.match(r"_[0-9a-f]{8}(?:_\d+)?", text[end:])
        length = None
        for k in range(1, len(digits) + 1):
            rest = int(digits[-k:]) - (end - start)  # _<hash>, or _<hash>_<pid>
            if tail and (rest == 9 or 10 < rest <= tail.end()):
                length = k
                break
        if length is None:
            out.append(text[pos:m.end()])
            pos = m.end()
            continue
        out.append(text[pos:start - length] + "<internal>")
        pos = start + int(digits[-length:])
    out.append(text[pos:])
    text = "".join(out)
    for pattern, plain in _COUNTERS:
        text = pattern.sub(plain, text)
    return text


def _entry_text(name, functions, decls):
    """Entry ``name`` with the functions it calls (by name, transitively) and the
    declarations they all name."""
    seen, todo = [name], [name]
    while todo:
        body = functions[todo.pop()][1]
        for other, (kind, _) in functions.items():
            if kind == "func" and other not in seen and other in body:
                seen.append(other)
                todo.append(other)
    texts = [functions[name][1]] + sorted(functions[f][1] for f in seen[1:])
    used = [d for sym, d in sorted(decls.items()) if any(sym in t for t in texts)]
    return "\n".join(used) + "\n" + "\n".join(texts)


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
            functions, decls = _functions(ptx), _decls(ptx)
            for expr, name in lowered.items():
                text = _normal(_entry_text(name, functions, decls))
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
