"""CPU kernel emulator: runs the real ``kernels/*.cu`` on the host, under sanitizers.

Each kernel variant (a source file and a ``name_expression``) is compiled by the host C++
compiler into one small executable, with AddressSanitizer and UndefinedBehaviorSanitizer,
after ``emu_cuda.h`` (the CUDA built-ins) and before ``emu_runner.cpp`` (the grid
scheduler, whose bulk is compiled once into an object every variant links). Executables
are kept in a cache directory keyed by a hash of everything that goes into them. A launch
runs that executable once: the arguments travel through its stdin, every array becomes its
own heap allocation of exactly its size, the grid runs, and the arrays' bytes come back
through its stdout into the NumPy arrays. A sanitizer report, an
emulator check (say a warp shuffle with the wrong mask) or a crash makes the process exit
nonzero, and the launch raises :class:`EmulatorError` with the report.

What the emulator shows: out-of-bounds reads and writes of the arrays and of shared
memory, undefined behaviour in the kernel's C++ (signed overflow, misaligned access,
invalid shifts, out-of-range array indexing...), barrier deadlocks, warp collectives
called with a mask that does not match the lanes taking part, wrong argument types and
counts, and the kernel's results for comparison with a reference.

What it cannot show:

* Races. The threads of a block run one at a time on the CPU and switch only at
  ``__syncthreads`` and warp collectives, so a missing barrier or a data race between
  threads usually goes unnoticed: the results look right.
* Timing and performance: nothing here says how fast a kernel is, whether its accesses
  coalesce, or whether it has bank conflicts or register spills.
* Warp divergence and the memory-ordering effects of the GPU. Lanes of a warp meet only
  at explicit collectives; code that silently relies on lockstep execution without
  ``__syncwarp`` behaves differently. Fences and atomics are trivially ordered.
* Uninitialised shared memory. ``__shared__`` becomes a function-local static: blocks run
  one after another and each starts with what the previous block left (zeros for the
  first), where the GPU gives undefined contents.
* Float results where the GPU contracts ``a * b + c`` into an FMA. The host build uses
  ``-ffp-contract=off``; kernels that need bit-exact results across both spell the
  operations with ``__fmul_rn`` / ``__fadd_rn`` / ``__fmaf_rn``. The fast intrinsics
  (``__expf``, ``__fdividef``, ``rsqrtf``...) use the accurate host functions, not the
  GPU's approximations.
* Texture and surface hardware, dynamic shared memory, cooperative groups, inline PTX,
  clocks and sleeps: a source using them raises :class:`UnsupportedFeatureError` when the
  variant is compiled.
* Barriers: a barrier opens once every thread of the block that has not exited waits at
  it. On the GPU a barrier that some threads skip by returning early is undefined
  behaviour; here it works.
* Warp collectives must name exactly the lanes of the warp that have not exited in their
  mask (``0xffffffff`` for a full warp); other masks are reported even where the GPU
  would accept them.
* Accesses that stay inside the memory of a NumPy array but outside the elements of the
  view passed (the gaps of a strided view, or a neighbouring view when two overlapping
  views share one buffer) are not reported.
"""
from __future__ import annotations

import contextlib
import ctypes
import hashlib
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import threading
from bisect import bisect_right
from pathlib import Path

import numpy as np

from .. import _kernels
from .._arrays import byte_span
from .._kernels import KernelCompileError

__all__ = [
    "Emulator",
    "EmulatedKernel",
    "EmulatorError",
    "UnsupportedFeatureError",
    "PointerTable",
    "Records",
    "emulate",
]

_HERE = Path(__file__).resolve().parent
_SHIM = _HERE / "emu_cuda.h"
_RUNNER = _HERE / "emu_runner.cpp"
_FORMAT = "cupyprep-emulator-1"

# -fno-threadsafe-statics: threads never run concurrently, so the __shared__ statics need no
# initialisation guards.
_BASE_FLAGS = (
    "-std=c++17",
    "-O1",
    "-g",
    "-fno-omit-frame-pointer",
    "-ffp-contract=off",
    "-fno-threadsafe-statics",
    "-DCUPYPREP_EMULATOR",
)
# object-size is left out: AddressSanitizer reports the same overruns with the allocation
# and its size, where UBSan's check would only say "insufficient space".
_SANITIZE_FLAGS = (
    "-fsanitize=address,undefined",
    "-fno-sanitize=object-size",
    "-fno-sanitize-recover=all",
)
_ASAN_OPTIONS = (
    "detect_leaks=0:halt_on_error=1:abort_on_error=0:allocator_may_return_null=1"
    ":color=never:print_summary=1"
)
_UBSAN_OPTIONS = "print_stacktrace=1:halt_on_error=1:abort_on_error=1:color=never"
_NOISE = re.compile(
    r"^==\d+==WARNING: ASan doesn't fully support makecontext/swapcontext.*\n?", re.MULTILINE
)

_MAX_THREADS_PER_BLOCK = 1024
_MAX_BLOCK = (1024, 1024, 64)
_MAX_GRID = (2**31 - 1, 65535, 65535)


class EmulatorError(RuntimeError):
    """A kernel launch failed under the emulator (sanitizer report, emulator check, crash).

    ``report`` holds the process's stderr (the sanitizer report), ``variant`` names the
    kernel, ``returncode`` is the exit status.
    """

    def __init__(self, message, *, variant=None, report="", returncode=None):
        self.variant = variant
        self.report = report
        self.returncode = returncode
        super().__init__(message)


class UnsupportedFeatureError(KernelCompileError):
    """The kernel source uses a CUDA feature the emulator does not model.

    ``features`` lists ``(feature, location)`` pairs.
    """

    def __init__(self, filename, name_expression, features):
        self.features = list(features)
        lines = [
            f"{where}: {feature} is not supported by the cupyprep kernel emulator"
            for feature, where in self.features
        ]
        super().__init__(filename, name_expression, "\n".join(lines))


class PointerTable:
    """A device array of pointers to the given arrays (``None`` gives a NULL entry).

    Passed for a kernel parameter such as ``const T* const* rows`` (or ``T**``, or an
    ``unsigned long long*`` the kernel casts), as a ragged batch is handed to a kernel.
    """

    def __init__(self, arrays):
        self.arrays = list(arrays)
        for i, a in enumerate(self.arrays):
            if a is not None and not isinstance(a, np.ndarray):
                raise TypeError(
                    f"PointerTable entry {i}: expected a numpy.ndarray or None, "
                    f"got {type(a).__name__}"
                )

    def __len__(self):
        return len(self.arrays)

    def __repr__(self):
        return f"PointerTable({len(self.arrays)} arrays)"

    def _records(self):
        return Records(bytes(8 * len(self.arrays)), [(8 * i, a) for i, a in enumerate(self.arrays)])


class Records:
    """Bytes that hold device pointers, such as a ragged batch's per-image records (each an
    image's pointer, size and strides), passed by value or in device memory.

    ``data`` is the bytes (a bytes-like object, or a NumPy array whose bytes are taken) and
    ``pointers`` a list of ``(byte offset, array or None)``: the 8 bytes at each offset
    then hold that array's device address (NULL for None) instead of what ``data`` has
    there. Passed for a pointer parameter, it is a device buffer holding those bytes; for a
    by-value parameter (a struct), the parameter's bytes, exactly the struct's size.
    """

    def __init__(self, data, pointers):
        self.data = data.tobytes() if isinstance(data, np.ndarray) else bytes(data)
        self.pointers = [(int(at), a) for at, a in pointers]
        for at, a in self.pointers:
            if a is not None and not isinstance(a, np.ndarray):
                raise TypeError(
                    f"Records pointer at byte {at}: expected a numpy.ndarray or None, "
                    f"got {type(a).__name__}"
                )
            if at < 0 or at + 8 > len(self.data) or at % 8:
                raise ValueError(
                    f"Records pointer at byte {at}: expected an 8-byte aligned offset within "
                    f"the {len(self.data)} bytes"
                )

    @property
    def arrays(self):
        return [a for _, a in self.pointers if a is not None]

    def __repr__(self):
        return f"Records({len(self.data)} bytes, {len(self.pointers)} pointers)"


# --- source preparation and scanning ---------------------------------------------------------
_BEGIN_RE = re.compile(r"^// begin (\S+)$")
_END_RE = re.compile(r"^// end (\S+)$")
_PRAGMA_ONCE_RE = re.compile(r"^\s*#\s*pragma\s+once\b")
_SYS_INCLUDE_RE = re.compile(r"^\s*#\s*include\s*<[^>]+>\s*$")
_NAME_EXPR_RE = re.compile(r"^[A-Za-z_][\w:<>, *&()\[\]+\-.]*$")


def _quote(path: str) -> str:
    return path.replace("\\", "\\\\").replace('"', '\\"')


def _prepare(source: str, label: str) -> str:
    """The kernel text for the emulator build, inside an anonymous namespace.

    The namespace gives every kernel function internal linkage, so the function-local
    statics ``__shared__`` turns into get AddressSanitizer's redzones (they would not as
    the weak symbols of template instantiations). ``#line`` directives map the text that
    :func:`cupyprep._kernels.read_source` inlined back to its files and lines (an inlined
    include stands for its one ``#include`` line), so compiler errors and sanitizer reports
    point into the real sources.
    """
    folder = label.rsplit("/", 1)[0] + "/" if "/" in label else ""

    out = ["namespace {", f'#line 1 "{_quote(label)}"']
    stack = []  # enclosing files: (name, line of the #include)
    current, lineno = label, 1
    for text in source.split("\n"):
        begin = _BEGIN_RE.match(text)
        end = _END_RE.match(text)
        if begin:
            stack.append((current, lineno))
            current, lineno = folder + begin.group(1), 1
            out.append(text)
            out.append(f'#line 1 "{_quote(current)}"')
            continue
        if end and stack and current == folder + end.group(1):
            current, lineno = stack.pop()
            lineno += 1
            out.append(text)
            out.append(f'#line {lineno} "{_quote(current)}"')
            continue
        if _PRAGMA_ONCE_RE.match(text):
            out.append("")
        elif _SYS_INCLUDE_RE.match(text):
            # system headers must not land inside the namespace, nor see the CUDA macros
            out.extend(
                [
                    "}",
                    '#pragma push_macro("__noinline__")',
                    "#undef __noinline__",
                    text,
                    '#pragma pop_macro("__noinline__")',
                    "namespace {",
                    f'#line {lineno + 1} "{_quote(current)}"',
                ]
            )
        else:
            out.append(text)
        lineno += 1
    out.append("}  // namespace")
    return "\n".join(out) + "\n"


_UNSUPPORTED = [
    (r"\bextern\b[^;{}()]*?\b__shared__\b|\b__shared__\b[^;{}()]*?\bextern\b",
     "dynamic shared memory (extern __shared__)"),
    (r"\bcooperative_groups\b|\bthis_grid\s*\(|\bgrid_group\b", "cooperative groups"),
    (r"\b(?:asm|__asm__|__asm)\b", "inline assembly (asm statements)"),
    (r"\btexture\s*<|\bsurface\s*<|\bcuda(?:Texture|Surface)Object_t\b"
     r"|\b(?:tex|surf)(?:1D|2D|3D|Cubemap)\w*\b", "texture and surface objects"),
    (r"\bclock(?:64)?\s*\(|\b__globaltimer\b", "clock()/clock64()"),
    (r"\b__nanosleep\b", "__nanosleep"),
    (r"\b__(?:shfl|shfl_up|shfl_down|shfl_xor|ballot|any|all)\b",
     "warp functions without _sync (__shfl, __ballot, __any, __all)"),
    (r"\b__(?:match_any|match_all|reduce_add|reduce_min|reduce_max|reduce_and|reduce_or"
     r"|reduce_xor)_sync\b", "__match_*_sync / __reduce_*_sync"),
    (r"\b__managed__\b", "managed memory (__managed__)"),
    (r"<<<", "kernel launches from device code (dynamic parallelism)"),
    (r"\bcuda[A-Z]\w*", "CUDA runtime API calls in device code"),
    (r"\b__(?!fadd_r[zd]\b)(?:fadd|fsub|fmul|fdiv|fmaf|fsqrt|frcp|frsqrt|dadd|dsub|dmul|ddiv|fma|"
     r"dsqrt|drcp)_r[zud]\b",
     "directed-rounding float intrinsics (only the _rn forms, __fadd_rz and __fadd_rd are emulated)"),
    (r"\b__(?:half|half2|nv_bfloat16|nv_bfloat162)\b|\b__(?:float2half|half2float)\w*",
     "cuda_fp16/cuda_bf16 types (use cp_half from common.cuh)"),
    (r"\b__(?:isGlobal|isShared|isConstant|isLocal|cvta_\w+)\b", "address-space intrinsics"),
    (r"\b(?:__brkpt|__prof_trigger)\b", "__brkpt/__prof_trigger"),
    (r"\b(?:memcpy_async|__pipeline_\w+)\b", "asynchronous copies (memcpy_async, pipelines)"),
]
_UNSUPPORTED = [(re.compile(p), name) for p, name in _UNSUPPORTED]
_FIBER_RE = re.compile(
    r"\b(?:__syncthreads(?:_count|_and|_or)?|__syncwarp|__shfl(?:_up|_down|_xor)?_sync"
    r"|__ballot_sync|__any_sync|__all_sync|__activemask)\b"
)
_LINEMARKER_RE = re.compile(r'^# (\d+) "((?:[^"\\]|\\.)*)"((?: \d+)*)\s*$')
_LITERAL_RE = re.compile(r'"(?:[^"\\\n]|\\.)*"|\'(?:[^\'\\\n]|\\.)*\'')


def _scan(preprocessed: str):
    """Unsupported features and whether fibers are needed, from preprocessed text.

    Only text from the kernel's own files is looked at (not system headers), with string
    and character literals blanked.
    """
    chunks, starts, where = [], [], []
    pos = 0
    current, lineno, system = "<source>", 1, False
    for line in preprocessed.split("\n"):
        m = _LINEMARKER_RE.match(line)
        if m:
            current, lineno = m.group(2), int(m.group(1))
            system = "3" in m.group(3).split()
            continue
        if line.startswith("#"):  # other directives the preprocessor leaves (#pragma)
            lineno += 1
            continue
        if not system and not current.startswith("<"):
            text = _LITERAL_RE.sub('""', line) + "\n"
            starts.append(pos)
            where.append(f"{current}:{lineno}")
            chunks.append(text)
            pos += len(text)
        lineno += 1
    text = "".join(chunks)
    found = []
    for regex, feature in _UNSUPPORTED:
        m = regex.search(text)
        if m:
            found.append((feature, where[bisect_right(starts, m.start()) - 1]))
    return found, bool(_FIBER_RE.search(text))


# --- compiler ------------------------------------------------------------------------------
@contextlib.contextmanager
def _file_lock(path: Path):
    try:
        import fcntl
    except ImportError:  # not POSIX: the atomic renames alone keep the cache consistent
        yield
        return
    with open(path, "a") as f:
        fcntl.flock(f.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f.fileno(), fcntl.LOCK_UN)


_compiler_ids: dict[str, str] = {}


def _compiler_id(cxx: str) -> str:
    ident = _compiler_ids.get(cxx)
    if ident is None:
        try:
            out = subprocess.run(
                [cxx, "--version"], capture_output=True, text=True, check=True, encoding="utf-8",
                errors="replace",
            ).stdout
        except (OSError, subprocess.CalledProcessError) as exc:
            raise EmulatorError(
                f"the kernel emulator needs a C++ compiler; running {cxx!r} failed: {exc}"
            ) from None
        ident = _compiler_ids[cxx] = out.strip()
    return ident


def _default_cache_dir() -> Path:
    env = os.environ.get("CUPYPREP_EMULATOR_CACHE")
    if env:
        return Path(env)
    return Path.home() / ".cache" / "cupyprep" / "emulator"


class _Param:
    __slots__ = ("size", "align", "kind", "pointee", "pointee_size", "type")

    def __init__(self, line: str):
        size, align, kind, pointee, psize, rest = line.split(" ", 5)
        self.size, self.align, self.pointee_size = int(size), int(align), int(psize)
        self.kind, self.pointee = kind, pointee
        m = re.search(r"\[with T = (.*)\]$", rest)
        self.type = (m.group(1) if m else rest).replace("{anonymous}::", "")

    def to_json(self):
        return [self.size, self.align, self.kind, self.pointee, self.pointee_size, self.type]

    @classmethod
    def from_json(cls, item):
        p = cls.__new__(cls)
        p.size, p.align, p.kind, p.pointee, p.pointee_size, p.type = item
        return p


_SCALAR_NAMES = {
    ("i", 1): "np.int8", ("i", 2): "np.int16", ("i", 4): "np.int32", ("i", 8): "np.int64",
    ("u", 1): "np.uint8", ("u", 2): "np.uint16", ("u", 4): "np.uint32", ("u", 8): "np.uint64",
    ("f", 2): "np.float16", ("f", 4): "np.float32", ("f", 8): "np.float64",
    ("b", 1): "np.bool_",
}


# --- the launch -------------------------------------------------------------------------------
def _dims(what: str, value) -> tuple[int, int, int]:
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        dims = (int(value),)
    elif isinstance(value, tuple) and 1 <= len(value) <= 3:
        dims = tuple(value)
        for d in dims:
            if not isinstance(d, (int, np.integer)) or isinstance(d, bool):
                raise TypeError(f"{what}: expected ints, got {value!r}")
        dims = tuple(int(d) for d in dims)
    else:
        raise TypeError(f"{what}: expected an int or a tuple of 1 to 3 ints, got {value!r}")
    dims = dims + (1,) * (3 - len(dims))
    limits = _MAX_GRID if what == "grid" else _MAX_BLOCK
    for d, lim in zip(dims, limits):
        if not 1 <= d <= lim:
            raise ValueError(f"{what} {dims}: each dimension must be in 1..{list(limits)}")
    if what == "block" and dims[0] * dims[1] * dims[2] > _MAX_THREADS_PER_BLOCK:
        raise ValueError(f"block {dims}: more than {_MAX_THREADS_PER_BLOCK} threads")
    return dims


def _span(a: np.ndarray) -> tuple[int, int]:
    """Lowest and one-past-highest byte address the array's elements cover (the ops' own
    overlap test, :func:`cupyprep._arrays.byte_span`; an empty array sits at its pointer,
    where buffer offsets are counted from)."""
    if a.size == 0:
        ptr = a.__array_interface__["data"][0]
        return ptr, ptr
    return byte_span(a)


def _root_lo(a: np.ndarray) -> int:
    root = a
    while isinstance(root.base, np.ndarray):
        root = root.base
    return _span(root)[0]


class _Group:
    """Arrays whose memory overlaps travel as one buffer (so aliasing works as on a GPU)."""

    __slots__ = ("lo", "hi", "members", "index")

    def __init__(self, lo, hi, member):
        self.lo, self.hi, self.members, self.index = lo, hi, [member], -1


def _describe_arg(i, param):
    return f"args[{i}] ({param.type})"


def _check_array(i, param, a: np.ndarray):
    if a.dtype.hasobject:
        raise TypeError(f"{_describe_arg(i, param)}: object arrays cannot act as device memory")
    pk, ps = param.pointee, param.pointee_size
    if pk == "p":
        raise TypeError(
            f"{_describe_arg(i, param)}: the kernel takes a pointer to pointers; "
            "pass a cupyprep.testing.PointerTable"
        )
    kind = a.dtype.kind
    if pk == "f" and not (kind == "f" and a.itemsize == ps):
        raise TypeError(
            f"{_describe_arg(i, param)}: got a {a.dtype} array for a pointer to a "
            f"{ps}-byte float"
        )
    if pk in "iube" and not (kind in "iub" and a.itemsize == ps):
        raise TypeError(
            f"{_describe_arg(i, param)}: got a {a.dtype} array for a pointer to a "
            f"{ps}-byte integer"
        )


def _scalar_bytes(i, param, x) -> bytes:
    # np.float64 and np.complex128 subclass Python's float and complex: test NumPy first
    if isinstance(x, (bool, int, float, complex)) and not isinstance(x, np.generic):
        hint = _SCALAR_NAMES.get((param.kind, param.size), "a NumPy scalar")
        raise TypeError(
            f"{_describe_arg(i, param)}: got a Python {type(x).__name__}; pass an explicit "
            f"NumPy scalar ({hint}) so the kernel gets exactly the bytes it expects"
        )
    if not isinstance(x, np.generic):
        raise TypeError(
            f"{_describe_arg(i, param)}: expected a NumPy scalar, got {type(x).__name__}"
        )
    dt = x.dtype
    k = param.kind
    ok = dt.itemsize == param.size and (
        (k == "f" and dt.kind == "f")
        or (k == "i" and dt.kind == "i")
        or (k == "u" and dt.kind == "u")
        or (k == "b" and dt.kind == "b")
        or (k == "e" and dt.kind in "iu")
        or k in "cx"
    )
    if not ok:
        hint = _SCALAR_NAMES.get((k, param.size))
        raise TypeError(
            f"{_describe_arg(i, param)}: got np.{dt.name}"
            + (f"; pass {hint}" if hint else f"; the kernel expects {param.size} bytes")
        )
    return x.tobytes()


class EmulatedKernel:
    """One compiled kernel variant; call it like a ``cupy.RawKernel``."""

    def __init__(self, emulator, exe, meta, label, name_expression, error_name=None):
        self._emulator = emulator
        self._error_name = error_name or label
        self._exe = str(exe)
        self.label = label
        self.name_expression = name_expression
        self.uses_fibers = bool(meta["fibers"])
        self.params = [_Param.from_json(p) for p in meta["params"]]

    @property
    def variant(self):
        return f"{self.label} {self.name_expression}"

    def __repr__(self):
        return f"<EmulatedKernel {self.variant}>"

    def __call__(self, grid, block, args, shared_mem=0, stream=None,
                 enable_cooperative_groups=False):
        del stream  # launches run to completion in order
        grid3 = _dims("grid", grid)
        block3 = _dims("block", block)
        if shared_mem:
            raise UnsupportedFeatureError(
                self._error_name, self.name_expression,
                [(f"dynamic shared memory (shared_mem={shared_mem})", "launch")],
            )
        if enable_cooperative_groups:
            raise UnsupportedFeatureError(
                self._error_name, self.name_expression, [("cooperative launches", "launch")]
            )
        if not isinstance(args, (tuple, list)):
            raise TypeError(f"args: expected a tuple, got {type(args).__name__}")
        if len(args) != len(self.params):
            sig = ", ".join(p.type for p in self.params)
            raise TypeError(
                f"{self.variant} takes {len(self.params)} arguments ({sig}), got {len(args)}"
            )

        # Check every argument and collect the arrays.
        arrays = []
        for i, (param, x) in enumerate(zip(self.params, args)):
            if param.kind == "p":
                if isinstance(x, np.ndarray):
                    _check_array(i, param, x)
                    arrays.append(x)
                elif isinstance(x, PointerTable):
                    if not (param.pointee in "pv" or (param.pointee in "iu"
                                                     and param.pointee_size == 8)):
                        raise TypeError(
                            f"{_describe_arg(i, param)}: a PointerTable needs a pointer to "
                            "pointers (or to 64-bit integers)"
                        )
                    arrays.extend(a for a in x.arrays if a is not None)
                elif isinstance(x, Records):
                    arrays.extend(x.arrays)
                elif x is None:
                    pass
                else:
                    raise TypeError(
                        f"{_describe_arg(i, param)}: expected a numpy.ndarray, a PointerTable, "
                        f"Records or None, got {type(x).__name__}"
                    )
            elif isinstance(x, Records):
                if len(x.data) != param.size:
                    raise TypeError(
                        f"{_describe_arg(i, param)}: Records of {len(x.data)} bytes for a "
                        f"parameter of {param.size}"
                    )
                arrays.extend(x.arrays)
            elif isinstance(x, (np.ndarray, PointerTable)) or x is None:
                raise TypeError(
                    f"{_describe_arg(i, param)}: the kernel takes this parameter by value; "
                    f"got {type(x).__name__}"
                )

        # Arrays whose bytes overlap share one buffer; every other array gets its own.
        spans = {}
        for a in arrays:
            if id(a) not in spans:
                spans[id(a)] = (a, *_span(a))
        groups: list[_Group] = []
        where: dict[int, _Group] = {}
        last = None  # the latest group of nonzero size
        for a, lo, hi in sorted(spans.values(), key=lambda t: (t[1], t[2])):
            if hi > lo and last is not None and lo < last.hi:
                last.hi = max(last.hi, hi)
                last.members.append(a)
                where[id(a)] = last
                continue
            g = _Group(lo, hi, a)
            groups.append(g)
            where[id(a)] = g
            if hi > lo:
                last = g

        record = bytearray()
        parts = []
        nbuf = 0
        for g in groups:
            g.index = nbuf
            nbuf += 1
            root = min(g.members, key=lambda a: _span(a)[0])
            pad = (g.lo - _root_lo(root)) % 256 if g.lo >= _root_lo(root) else 0
            size = g.hi - g.lo
            parts.append(struct.pack("<IQQ", 0, size, pad))
            parts.append(ctypes.string_at(g.lo, size) if size else b"")

        def ref(a):
            g = where[id(a)]
            return g.index, a.__array_interface__["data"][0] - g.lo

        names = [[] for _ in groups]  # what each buffer holds, for error reports

        def pointer_list(i, records, label):
            entries = [struct.pack("<I", len(records.pointers))]
            for j, (at, a) in enumerate(records.pointers):
                if a is None:
                    entries.append(struct.pack("<QiQ", at, -1, 0))
                else:
                    idx, off = ref(a)
                    names[idx].append(f"args[{i}]{label}[{j}]")
                    entries.append(struct.pack("<QiQ", at, idx, off))
            return b"".join(entries)

        param_parts = []
        for i, (param, x) in enumerate(zip(self.params, args)):
            if param.kind == "p":
                if isinstance(x, np.ndarray):
                    idx, off = ref(x)
                    names[idx].append(_describe_arg(i, param))
                    param_parts.append(struct.pack("<IIiQ", 1, 8, idx, off))
                elif isinstance(x, (PointerTable, Records)):
                    label = ".arrays" if isinstance(x, PointerTable) else ".pointers"
                    rec = x._records() if isinstance(x, PointerTable) else x
                    parts.append(struct.pack("<IQQ", 1, len(rec.data), 0))
                    parts.append(rec.data)
                    parts.append(pointer_list(i, rec, label))
                    names.append([f"{_describe_arg(i, param)}, the {type(x).__name__} itself"])
                    param_parts.append(struct.pack("<IIiQ", 1, 8, nbuf, 0))
                    nbuf += 1
                else:
                    param_parts.append(struct.pack("<II", 2, 8))
            elif isinstance(x, Records):
                param_parts.append(struct.pack("<II", 3, len(x.data)) + x.data
                                   + pointer_list(i, x, ".pointers"))
            else:
                data = _scalar_bytes(i, param, x)
                param_parts.append(struct.pack("<II", 0, len(data)) + data)

        record += b"CPEMU01\0"
        record += struct.pack(
            "<10I", *grid3, *block3, 1 if self.uses_fibers else 0,
            self._emulator.stack_size // 1024, nbuf, len(self.params),
        )
        record += b"".join(parts)
        record += b"".join(param_parts)

        stdout, stderr = self._emulator._run(self, bytes(record), names)

        expected = sum(g.hi - g.lo for g in groups)
        if len(stdout) != expected:
            raise EmulatorError(
                f"{self.variant}: the emulator returned {len(stdout)} bytes, "
                f"expected {expected}\n{stderr}",
                variant=self.variant, report=stderr,
            )
        pos = 0
        view = memoryview(stdout)
        for g in groups:
            size = g.hi - g.lo
            out = view[pos:pos + size]
            pos += size
            if size == 0:
                continue
            before = ctypes.string_at(g.lo, size)
            if out == before:
                continue
            if any(a.flags.writeable for a in g.members):
                ctypes.memmove(g.lo, bytes(out), size)
            else:
                culprits = [
                    f"args[{i}]" for i, x in enumerate(args)
                    if isinstance(x, np.ndarray) and where.get(id(x)) is g
                ] or ["an array in a PointerTable or Records"]
                raise EmulatorError(
                    f"{self.variant}: the kernel wrote to read-only memory "
                    f"({', '.join(culprits)})",
                    variant=self.variant,
                )


class Emulator:
    """Compiles kernel variants for the CPU and launches them on NumPy arrays.

    Parameters
    ----------
    sanitize : bool
        Build with AddressSanitizer and UndefinedBehaviorSanitizer (the point of it; off
        only to run faster).
    cache_dir : path, optional
        Where compiled variants are kept across processes; ``$CUPYPREP_EMULATOR_CACHE``
        or ``~/.cache/cupyprep/emulator`` by default.
    timeout : float, optional
        Seconds a launch may take (a spin-wait on another thread never ends here, since
        threads only switch at barriers); ``$CUPYPREP_EMULATOR_TIMEOUT`` or 600.
    stack_size : int
        Bytes of stack per thread of a block when threads run as fibers.

    ``compile_count`` counts the variants this object had to compile (not found in the
    cache), ``launch_count`` the launches.
    """

    def __init__(self, sanitize=True, cache_dir=None, *, timeout=None, stack_size=256 * 1024,
                 cxx=None):
        self.sanitize = bool(sanitize)
        self.cache_dir = Path(cache_dir) if cache_dir is not None else _default_cache_dir()
        if timeout is None:
            timeout = float(os.environ.get("CUPYPREP_EMULATOR_TIMEOUT", "600"))
        self.timeout = timeout
        if stack_size < 64 * 1024 or stack_size % 4096:
            raise ValueError("stack_size: expected a multiple of 4096 of at least 64 KiB")
        self.stack_size = int(stack_size)
        self.cxx = cxx or os.environ.get("CUPYPREP_EMULATOR_CXX", "g++")
        self.compile_count = 0
        self.launch_count = 0
        self._kernels: dict[tuple[str, str], EmulatedKernel] = {}
        self._lock = threading.Lock()
        self._key_locks: dict[str, threading.Lock] = {}
        env = dict(os.environ)
        # the caller's options first, so ours (which the launch relies on) win
        for name, ours in (("ASAN_OPTIONS", _ASAN_OPTIONS), ("UBSAN_OPTIONS", _UBSAN_OPTIONS)):
            env[name] = f"{env[name]}:{ours}" if env.get(name) else ours
        self._env = env

    def __repr__(self):
        return f"<Emulator sanitize={self.sanitize} cache_dir={str(self.cache_dir)!r}>"

    # -- compiling --------------------------------------------------------------------------
    def records(self, data, pointers):
        """A kernel argument of per-image records (``_launch.ragged_records``): ``data``
        (a structured NumPy scalar or bytes) whose pointer fields at the byte offsets of
        ``pointers`` (``(offset, array)`` pairs) are patched to the arrays' copies."""
        return Records(data, pointers)

    def get_function(self, filename: str, name_expression: str) -> EmulatedKernel:
        """The kernel ``name_expression`` of ``kernels/<filename>``, compiled for the CPU."""
        return self.get_function_from_source(
            _kernels.read_source(filename), name_expression, label=f"kernels/{filename}",
            _error_name=filename,
        )

    def get_function_from_source(self, source: str, name_expression: str,
                                 label: str = "<source>", *, _error_name=None) -> EmulatedKernel:
        """Like :meth:`get_function` for a source given as text.

        ``label`` names the source in compiler errors and sanitizer reports.
        """
        if not _NAME_EXPR_RE.match(name_expression) or "\n" in name_expression:
            raise ValueError(f"name_expression: not a C++ name: {name_expression!r}")
        memo = (hashlib.sha256(source.encode()).hexdigest(), name_expression, label)
        fn = self._kernels.get(memo)
        if fn is not None:
            return fn
        flags = _BASE_FLAGS + (_SANITIZE_FLAGS if self.sanitize else ())
        kernel_text = _prepare(source, label)
        key_material = json.dumps(
            [
                _FORMAT,
                kernel_text,
                name_expression,
                flags,
                _SHIM.read_text(encoding="utf-8"),
                _RUNNER.read_text(encoding="utf-8"),
                self.cxx,
                _compiler_id(self.cxx),
            ]
        )
        key = hashlib.sha256(key_material.encode()).hexdigest()[:40]
        with self._lock:
            key_lock = self._key_locks.setdefault(key, threading.Lock())
        with key_lock:
            fn = self._kernels.get(memo)
            if fn is None:
                exe, meta = self._build(key, kernel_text, name_expression, label, flags,
                                        _error_name or label)
                fn = EmulatedKernel(self, exe, meta, label, name_expression, _error_name)
                self._kernels[memo] = fn
        return fn

    def _runtime_object(self, flags) -> Path:
        """The runner's runtime part, compiled once per build configuration."""
        material = json.dumps(
            [_FORMAT, "runtime", flags, _SHIM.read_text(encoding="utf-8"),
             _RUNNER.read_text(encoding="utf-8"), self.cxx, _compiler_id(self.cxx)]
        )
        key = hashlib.sha256(material.encode()).hexdigest()[:40]
        obj = self.cache_dir / f"runtime-{key}.o"
        if obj.is_file():
            return obj
        self.cache_dir.mkdir(parents=True, exist_ok=True)
        with _file_lock(self.cache_dir / f"runtime-{key}.lock"):
            if obj.is_file():
                return obj
            build = Path(tempfile.mkdtemp(prefix=".build-", dir=self.cache_dir))
            try:
                cc = subprocess.run(
                    [self.cxx, *flags, "-DCUPYPREP_EMU_RUNNER_PART=1", "-include", str(_SHIM),
                     "-c", str(_RUNNER), "-o", "runtime.o"],
                    capture_output=True, text=True, encoding="utf-8", errors="replace",
                    cwd=build,
                )
                if cc.returncode != 0:
                    raise EmulatorError(f"compiling the emulator's runtime failed:\n{cc.stderr}")
                os.replace(build / "runtime.o", obj)
            finally:
                shutil.rmtree(build, ignore_errors=True)
        return obj

    def _build(self, key, kernel_text, name_expression, label, flags, error_name):
        exe = self.cache_dir / f"{key}.exe"
        meta_path = self.cache_dir / f"{key}.json"

        def cached():
            try:
                meta = json.loads(meta_path.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                return None
            return meta if exe.is_file() else None

        meta = cached()
        if meta is not None:
            return exe, meta
        self.cache_dir.mkdir(parents=True, exist_ok=True)
        # One compile per variant even when several processes (pytest workers) want it.
        with _file_lock(self.cache_dir / f"{key}.lock"):
            meta = cached()
            if meta is not None:
                return exe, meta
            return self._compile(exe, meta_path, kernel_text, name_expression, label, flags,
                                 error_name)

    def _compile(self, exe, meta_path, kernel_text, name_expression, label, flags, error_name):
        pre = subprocess.run(
            [self.cxx, "-E", "-x", "c++", "-std=c++17", "-DCUPYPREP_EMULATOR", "-"],
            input=kernel_text, capture_output=True, text=True, encoding="utf-8", errors="replace",
        )
        if pre.returncode != 0:
            raise KernelCompileError(error_name, name_expression, pre.stderr)
        unsupported, fibers = _scan(pre.stdout)
        if unsupported:
            raise UnsupportedFeatureError(error_name, name_expression, unsupported)

        build = Path(tempfile.mkdtemp(prefix=".build-", dir=self.cache_dir))
        try:
            main = build / "main.cpp"
            main.write_text(
                kernel_text
                + "#define CUPYPREP_EMU_RUNNER_PART 2\n"
                + '#line 1 "cupyprep/testing/emu_runner.cpp"\n'
                + _RUNNER.read_text(encoding="utf-8")
                + '\n#line 1 "<emulator main>"\n'
                + "int main(int argc, char** argv) {\n"
                + f"    auto kernel = &{name_expression};\n"
                + "    return cupyprep_emu::runner_main(argc, argv, kernel);\n"
                + "}\n",
                encoding="utf-8",
            )
            tmp_exe = build / "kernel.exe"
            runtime = self._runtime_object(flags)
            cc = subprocess.run(
                [self.cxx, *flags, f"-fdebug-prefix-map={build}=.", "-include", str(_SHIM),
                 main.name, str(runtime), "-o", tmp_exe.name],
                capture_output=True, text=True, encoding="utf-8", errors="replace", cwd=build,
            )
            self.compile_count += 1
            if cc.returncode != 0:
                raise KernelCompileError(error_name, name_expression, cc.stderr)
            desc = subprocess.run(
                [str(tmp_exe), "--describe"], capture_output=True, text=True, env=self._env,
                encoding="utf-8", errors="replace",
            )
            lines = desc.stdout.splitlines()
            if desc.returncode != 0 or not lines or not lines[0].startswith(
                    "cupyprep-emulator-signature "):
                raise EmulatorError(
                    f"{label} {name_expression}: reading the kernel's parameters failed\n"
                    f"{desc.stderr}", variant=f"{label} {name_expression}", report=desc.stderr,
                )
            params = [_Param(line) for line in lines[1:]]
            meta = {
                "label": label,
                "name_expression": name_expression,
                "fibers": fibers,
                "params": [p.to_json() for p in params],
            }
            (build / "meta.json").write_text(json.dumps(meta), encoding="utf-8")
            # Publish atomically: the executable first, then the metadata that marks it done.
            os.replace(tmp_exe, exe)
            os.replace(build / "meta.json", meta_path)
        finally:
            shutil.rmtree(build, ignore_errors=True)
        return exe, meta

    # -- launching -----------------------------------------------------------------------------
    def _run(self, kernel: EmulatedKernel, record: bytes, names):
        try:
            proc = subprocess.run(
                [kernel._exe], input=record, capture_output=True, env=self._env,
                timeout=self.timeout,
            )
        except subprocess.TimeoutExpired as exc:
            report = (exc.stderr or b"").decode(errors="replace")
            raise EmulatorError(
                f"{kernel.variant}: the launch took longer than {self.timeout} s (a thread "
                "spinning on a value another thread sets never ends under the emulator: "
                "threads only switch at barriers and warp collectives)",
                variant=kernel.variant, report=report,
            ) from None
        self.launch_count += 1
        stderr = _NOISE.sub("", proc.stderr.decode(errors="replace"))
        if proc.returncode != 0:
            raise EmulatorError(
                _failure_message(kernel, proc.returncode, stderr, names),
                variant=kernel.variant, report=stderr, returncode=proc.returncode,
            )
        if stderr:
            sys.stderr.write(stderr)  # the kernel's printf output
        return proc.stdout, stderr


_BUFFER_LINE_RE = re.compile(r"^(cupyprep emulator: buffer #(\d+) at \[[^)\n]*\))$", re.MULTILINE)


def _failure_message(kernel, returncode, stderr, names) -> str:
    def label(m):
        k = int(m.group(2))
        held = ", ".join(names[k]) if k < len(names) and names[k] else "unused"
        return f"{m.group(1)}: {held}"

    stderr = _BUFFER_LINE_RE.sub(label, stderr)
    summary = None
    for pattern in (
        r"ERROR: AddressSanitizer: [^\n]*",
        r"runtime error: [^\n]*",
        r"cupyprep emulator: error: [^\n]*",
        r"AddressSanitizer:DEADLYSIGNAL",
    ):
        m = re.search(pattern, stderr)
        if m:
            summary = m.group(0)
            break
    if summary is None:
        summary = f"the emulated launch exited with status {returncode}"
    return f"{kernel.variant}: {summary}\n{stderr.rstrip()}"


@contextlib.contextmanager
def emulate(sanitize=True, cache_dir=None):
    """Run every kernel launch of cupyprep on the CPU emulator inside the ``with`` block.

    Yields the :class:`Emulator`. NumPy arrays stand in for device memory.
    """
    em = Emulator(sanitize=sanitize, cache_dir=cache_dir)
    with _kernels.use_emulator(em):
        yield em
