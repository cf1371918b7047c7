"""A stand-in for Triton's ``triton_python_backend_utils`` (the surface a Python-backend
model uses), so tests drive ``model.py`` without a server: ``Tensor`` (numpy, or any
``__dlpack__`` array: CuPy on the device), ``InferenceRequest``, ``InferenceResponse``,
``TritonError``, ``TritonModelException``, the ``get_*_by_name`` helpers,
``triton_string_to_numpy``, and ``model_config_json`` turning a ``config.pbtxt`` into the
JSON string Triton passes as ``args["model_config"]`` (int64 fields such as ``dims`` as
strings, protobuf's JSON mapping; repeated fields as lists; maps as objects)."""
from __future__ import annotations

import json
import re

import numpy as np

_TYPES = {"TYPE_BOOL": np.bool_, "TYPE_UINT8": np.uint8, "TYPE_UINT16": np.uint16,
          "TYPE_UINT32": np.uint32, "TYPE_UINT64": np.uint64, "TYPE_INT8": np.int8,
          "TYPE_INT16": np.int16, "TYPE_INT32": np.int32, "TYPE_INT64": np.int64,
          "TYPE_FP16": np.float16, "TYPE_FP32": np.float32, "TYPE_FP64": np.float64,
          "TYPE_STRING": np.object_}


class TritonModelException(Exception):
    pass


class TritonError:
    def __init__(self, message):
        self._message = message

    def message(self):
        return self._message


class Tensor:
    """A named tensor: host memory (NumPy) or device memory (kept as the array it came
    as); like the backend's, ``from_dlpack`` takes only C-contiguous tensors."""

    def __init__(self, name, array):
        if not isinstance(array, np.ndarray):
            raise TritonModelException(f"Tensor({name!r}): expected a numpy array, got {type(array)}")
        self._name, self._array = name, array

    @staticmethod
    def from_dlpack(name, tensor):
        if type(tensor).__name__ == "PyCapsule":
            import cupy

            tensor = cupy.from_dlpack(tensor)
        if not hasattr(tensor, "__dlpack__"):
            raise TritonModelException(f"from_dlpack({name!r}): expected a DLPack capsule or an object "
                                       f"with __dlpack__, got {type(tensor)}")
        if not tensor.flags.c_contiguous:
            raise TritonModelException(f"from_dlpack({name!r}): the tensor is not C-contiguous")
        out = Tensor.__new__(Tensor)
        out._name, out._array = name, tensor
        return out

    def name(self):
        return self._name

    def is_cpu(self):
        return isinstance(self._array, np.ndarray)

    def as_numpy(self):
        if not self.is_cpu():
            raise TritonModelException(f"tensor {self._name!r} is in GPU memory: use to_dlpack")
        return self._array

    def to_dlpack(self):
        return self._array.__dlpack__()

    def shape(self):
        return list(self._array.shape)

    def array(self):
        """The test's view of the data (not in Triton's API)."""
        return self._array


class InferenceRequest:
    def __init__(self, inputs, requested_output_names=(), model_name="", request_id=""):
        self._inputs = list(inputs)
        self._outputs = list(requested_output_names)
        self._id = request_id

    def inputs(self):
        return self._inputs

    def requested_output_names(self):
        return self._outputs

    def request_id(self):
        return self._id


class InferenceResponse:
    def __init__(self, output_tensors, error=None):
        self._outputs = list(output_tensors)
        self._error = error

    def output_tensors(self):
        return self._outputs

    def has_error(self):
        return self._error is not None

    def error(self):
        return self._error


def get_input_tensor_by_name(request, name):
    return next((t for t in request.inputs() if t.name() == name), None)


def get_output_tensor_by_name(response, name):
    return next((t for t in response.output_tensors() if t.name() == name), None)


def get_input_config_by_name(model_config, name):
    return next((c for c in model_config.get("input", []) if c["name"] == name), None)


def get_output_config_by_name(model_config, name):
    return next((c for c in model_config.get("output", []) if c["name"] == name), None)


def triton_string_to_numpy(triton_type):
    return _TYPES[triton_type]


# --- config.pbtxt (protobuf text format) to Triton's model_config JSON ----------------------
_REPEATED = {"input", "output", "dims", "instance_group", "step", "gpus", "preferred_batch_size"}
_MAPS = {"parameters", "input_map", "output_map"}
_INT64 = {"dims", "max_queue_delay_microseconds", "preferred_batch_size"}
_TOKEN = re.compile(r'\s*(?:#[^\n]*\n?)*\s*("(?:[^"\\]|\\.)*"|[{}\[\]:,]|[^\s{}\[\]:,"#]+)')


def _tokens(text):
    pos, out = 0, []
    while True:
        m = _TOKEN.match(text, pos)
        if not m or m.end() == pos:
            break
        out.append(m.group(1))
        pos = m.end()
    rest = text[pos:].strip()
    while rest.startswith("#"):
        rest = rest.split("\n", 1)[1].strip() if "\n" in rest else ""
    if rest:
        raise ValueError(f"config.pbtxt: cannot read from {rest[:40]!r}")
    return out


def _scalar(tok, key):
    if tok.startswith('"'):
        return json.loads(tok)
    if tok in ("true", "false"):
        return tok == "true"
    if re.fullmatch(r"-?\d+", tok):
        return tok if key in _INT64 else int(tok)
    if re.fullmatch(r"-?[\d.]+(e-?\d+)?", tok):
        return float(tok)
    return tok  # an enum name


def _message(toks, i, end):
    obj = {}
    while toks[i] != end:
        key = toks[i]
        i += 1
        if toks[i] == ":":
            i += 1
        if toks[i] == "[":
            i += 1
            values = []
            while toks[i] != "]":
                if toks[i] == "{":
                    value, i = _message(toks, i + 1, "}")
                else:
                    value = _scalar(toks[i], key)
                values.append(value)
                i += 1
                if toks[i] == ",":
                    i += 1
            i += 1
            obj.setdefault(key, []).extend(values)
            continue
        if toks[i] == "{":
            value, i = _message(toks, i + 1, "}")
        else:
            value = _scalar(toks[i], key)
        i += 1
        if toks[i] == ",":
            i += 1
        if key in _MAPS:
            obj.setdefault(key, {})[value["key"]] = value["value"]
        elif key in _REPEATED:
            obj.setdefault(key, []).append(value)
        else:
            obj[key] = value
    return obj, i


def model_config_json(pbtxt_text):
    """The JSON string Triton hands ``initialize`` as ``args["model_config"]``."""
    toks = _tokens(pbtxt_text) + ["<end>"]
    obj, _ = _message(toks, 0, "<end>")
    return json.dumps(obj)
