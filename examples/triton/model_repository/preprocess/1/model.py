"""Triton Inference Server Python backend: images in, a model-ready batch out, on the GPU.

Every request carries ``IMAGE``, a batch of uint8 HWC images (``[b, H, W, 3]``, BGR as
decoders give them; each request its own size). ``execute`` gathers the images of all the
requests Triton's dynamic batcher hands it into one ragged list and preprocesses them with
one ``cupyprep.preprocess`` launch; each response's ``INPUT`` is that request's slice of the
one output, and ``META`` its images' geometry (``[b, 8]`` int64: original height and width,
resized height and width, offset y and x on the canvas, the canvas height and width), which ``postprocess`` uses to map boxes back.

Tensors cross through DLPack both ways, without a copy and without torch: inputs in GPU
memory are read where they are (``to_dlpack`` -> ``cupy.from_dlpack``), inputs Triton put in
CPU memory are copied up once, and outputs are CuPy arrays handed back with
``pb_utils.Tensor.from_dlpack``. A KIND_CPU instance runs the same code on NumPy (the CPU
backend, the same results where the op is exact).

Configuration (config.pbtxt): the output ``INPUT``'s dims give the canvas (``[3, H, W]``,
NCHW, or ``[H, W, 3]``, NHWC) and its data type the output dtype (TYPE_FP32 / TYPE_FP16);
``parameters`` give ``mode``, ``interpolation``, ``pad_value``, ``scale``, ``mean``,
``std`` and ``swap_rb`` (comma-separated numbers, ``true`` / ``false``).

``initialize`` compiles the kernels a request will launch by running one preprocess of a
small ragged batch (the exact variant: ``cupyprep.warmup("preprocess")`` would compile all
of the op's variants), so the first request does not stall on NVRTC.
"""
import contextlib
import json

import numpy as np
import triton_python_backend_utils as pb_utils

import cupyprep

_DTYPES = {"TYPE_FP32": "float32", "TYPE_FP16": "float16", "TYPE_UINT8": "uint8"}
_MODES = ("letterbox", "stretch", "center_crop", "letterbox_top_left")


def _floats(text):
    values = tuple(float(v) for v in text.split(","))
    return values[0] if len(values) == 1 else values


def read_config(model_config):
    """``(size, options)`` for ``cupyprep.preprocess`` from the model configuration."""
    out = pb_utils.get_output_config_by_name(model_config, "INPUT")
    if out is None:
        raise pb_utils.TritonModelException("preprocess: the configuration has no output 'INPUT'")
    dims = [int(d) for d in out["dims"]]
    if len(dims) != 3 or 3 not in (dims[0], dims[2]):
        raise pb_utils.TritonModelException(
            f"preprocess: output 'INPUT' dims: expected [3, H, W] or [H, W, 3], got {dims}")
    layout = "NCHW" if dims[0] == 3 else "NHWC"
    size = tuple(dims[1:]) if layout == "NCHW" else tuple(dims[:2])
    dtype = _DTYPES.get(out["data_type"])
    if dtype is None:
        raise pb_utils.TritonModelException(
            f"preprocess: output 'INPUT' data_type: expected one of {sorted(_DTYPES)}, got {out['data_type']}")
    params = {k: v["string_value"] for k, v in model_config.get("parameters", {}).items()}
    options = {"layout": layout, "dtype": dtype}
    if "mode" in params:
        options["mode"] = params["mode"]
    if "interpolation" in params:
        options["interpolation"] = params["interpolation"]
    for key in ("pad_value", "scale", "mean", "std"):
        if key in params:
            options[key] = _floats(params[key])
    if "swap_rb" in params:
        options["swap_rb"] = params["swap_rb"].strip().lower() in ("1", "true", "yes")
    return size, options


class TritonPythonModel:
    def initialize(self, args):
        self.model_config = json.loads(args["model_config"])
        self.size, self.options = read_config(self.model_config)
        self.on_gpu = args.get("model_instance_kind", "CPU") == "GPU"
        self.xp = np
        if self.on_gpu:
            import cupy

            self.xp = cupy
            self.device = int(args.get("model_instance_device_id", 0))
            cupy.cuda.Device(self.device).use()
            # requests run on a stream of this instance; execute waits for it before the
            # responses go (the consumer of a DLPack output names no stream to wait on)
            self.stream = cupy.cuda.Stream(non_blocking=True)
        self.warm()

    def warm(self):
        """Compile (or load from CuPy's cache) the kernel variant requests launch: a ragged
        list of uint8 3-channel images, this configuration's output."""
        with self.stream if self.on_gpu else contextlib.nullcontext():
            self._run([self.xp.zeros((5, 7, 3), np.uint8), self.xp.zeros((9, 4, 3), np.uint8)])
        if self.on_gpu:
            self.stream.synchronize()

    def _images(self, request):
        """The request's images as device (or NumPy) arrays, or a TritonError naming what
        is wrong."""
        tensor = pb_utils.get_input_tensor_by_name(request, "IMAGE")
        if tensor is None:
            return pb_utils.TritonError("preprocess: the request has no input 'IMAGE'")
        if not self.on_gpu:
            batch = tensor.as_numpy()
        elif tensor.is_cpu():
            batch = self.xp.asarray(tensor.as_numpy())  # Triton placed it in host memory
        else:
            batch = self.xp.from_dlpack(tensor.to_dlpack())
        if batch.dtype != np.uint8 or batch.ndim != 4 or batch.shape[3] != 3:
            return pb_utils.TritonError(f"preprocess: input 'IMAGE': expected uint8 [batch, H, W, 3], got "
                                        f"{batch.dtype} {list(batch.shape)}")
        if 0 in batch.shape[1:3]:
            return pb_utils.TritonError(f"preprocess: input 'IMAGE': expected images of at least 1 x 1, "
                                        f"got {list(batch.shape)}")
        return batch

    def _run(self, images):
        """One preprocess launch over every image; ``(batch, meta rows (N, 8) int64)``."""
        batch, meta = cupyprep.preprocess(images, self.size, **self.options)
        canvas = np.tile(np.array(meta.size, np.int64), (len(meta), 1))
        rows = np.concatenate([meta.orig_size, meta.resized_size, meta.offset, canvas], axis=1).astype(np.int64)
        return batch, rows

    def execute(self, requests):
        responses = [None] * len(requests)
        images, owners = [], []
        with self.stream if self.on_gpu else contextlib.nullcontext():
            for i, request in enumerate(requests):
                got = self._images(request)
                if isinstance(got, pb_utils.TritonError):
                    responses[i] = pb_utils.InferenceResponse(output_tensors=[], error=got)
                    continue
                images.extend(got[j] for j in range(got.shape[0]))
                owners.append((i, got.shape[0]))
            if images:
                try:
                    batch, rows = self._run(images)
                except (TypeError, ValueError) as exc:  # refused before any launch
                    for i, _ in owners:
                        responses[i] = pb_utils.InferenceResponse(
                            output_tensors=[], error=pb_utils.TritonError(f"preprocess: {exc}"))
                    return responses
                meta = self.xp.asarray(rows)
                start = 0
                for i, count in owners:
                    part = slice(start, start + count)
                    start += count
                    responses[i] = pb_utils.InferenceResponse(output_tensors=[
                        self._tensor("INPUT", batch[part]), self._tensor("META", meta[part])])
            if self.on_gpu:
                self.stream.synchronize()
        return responses

    def _tensor(self, name, array):
        if self.on_gpu:
            return pb_utils.Tensor.from_dlpack(name, array)
        return pb_utils.Tensor(name, array)

    def finalize(self):
        pass
