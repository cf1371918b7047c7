"""Triton Inference Server Python backend: a YOLO head's rows to detections in each
original image's pixels, on the GPU, for the ensemble preprocess -> detector -> postprocess.

Every request carries ``HEAD`` (``[b, boxes, 5 + classes]`` float32 / float16 rows ``(cx,
cy, w, h, obj, cls...)`` on the network canvas: YOLOv5's output; parameter ``objectness``
``false`` for YOLOv8's rows ``(cx, cy, w, h, cls...)``, its ``[b, 4 + classes, boxes]``
output transposed to rows first) and ``META`` (``[b, 8]`` int64, the preprocess model's
output: original size, resized size, offset, canvas size). ``execute`` concatenates the heads of all
the requests it is handed and runs ``decode_yolo``, ``multiclass_nms`` and the mapping back
once for the whole batch, then answers each request with its slice: ``BOXES`` ``[b, D, 4]``
float32 xyxy in original pixels, ``SCORES`` ``[b, D]``, ``CLASSES`` ``[b, D]`` int64 and
``COUNT`` ``[b, 1]`` int64 (EfficientNMS's padded layout: slots past the count hold zeros
and -1).

``D`` is the outputs' first dim in config.pbtxt; ``iou_threshold``, ``score_threshold``,
``top_k`` and ``class_agnostic`` come from its parameters. No torch: CuPy arrays cross
through DLPack, NumPy on a KIND_CPU instance.
"""
import contextlib
import json

import numpy as np
import triton_python_backend_utils as pb_utils

import cupyprep


def read_config(model_config):
    """``(objectness, nms options)`` from the model configuration."""
    boxes = pb_utils.get_output_config_by_name(model_config, "BOXES")
    if boxes is None:
        raise pb_utils.TritonModelException("postprocess: the configuration has no output 'BOXES'")
    dims = [int(d) for d in boxes["dims"]]
    if len(dims) != 2 or dims[1] != 4 or dims[0] < 1:
        raise pb_utils.TritonModelException(f"postprocess: output 'BOXES' dims: expected [D, 4], got {dims}")
    params = {k: v["string_value"] for k, v in model_config.get("parameters", {}).items()}
    options = {"max_detections": dims[0],
               "iou_threshold": float(params.get("iou_threshold", 0.45)),
               "score_threshold": float(params.get("score_threshold", 0.25)),
               "class_agnostic": params.get("class_agnostic", "false").lower() in ("1", "true", "yes")}
    if "top_k" in params:
        options["top_k"] = int(params["top_k"])
    objectness = params.get("objectness", "true").lower() in ("1", "true", "yes")
    return objectness, options


def meta_of(rows):
    """A :class:`cupyprep.PreprocessMeta` from the preprocess model's ``META`` rows (host
    int64 ``[N, 8]``: original, resized and canvas (height, width), offset (y, x)); every
    row on one canvas."""
    rows = np.asarray(rows, np.int64).reshape(-1, 8)
    canvases = np.unique(rows[:, 6:8], axis=0)
    if len(canvases) > 1:
        raise ValueError(f"META: expected one canvas size in a batch, got {canvases.tolist()}")
    return cupyprep.PreprocessMeta(orig_size=rows[:, 0:2], resized_size=rows[:, 2:4],
                                   offset=rows[:, 4:6], size=tuple(int(v) for v in canvases[0]))


class TritonPythonModel:
    def initialize(self, args):
        self.model_config = json.loads(args["model_config"])
        self.objectness, self.options = read_config(self.model_config)
        self.on_gpu = args.get("model_instance_kind", "CPU") == "GPU"
        self.xp = np
        if self.on_gpu:
            import cupy

            self.xp = cupy
            cupy.cuda.Device(int(args.get("model_instance_device_id", 0))).use()
            self.stream = cupy.cuda.Stream(non_blocking=True)
        self.warm()

    def warm(self):
        """Compile the kernels a request launches: two images' heads of 3 classes (decode,
        NMS for this configuration, the mapping)."""
        width = (5 if self.objectness else 4) + 3
        head = self.xp.zeros((2, 8, width), np.float32)
        head[..., 2:4] = 4
        head[..., 4:] = 0.9
        rows = np.array([[32, 32, 32, 32, 0, 0, 32, 32]] * 2, np.int64)
        with self._stream():
            self._run(head, rows)
        if self.on_gpu:
            self.stream.synchronize()

    def _stream(self):
        return self.stream if self.on_gpu else contextlib.nullcontext()

    def _array(self, tensor):
        if not self.on_gpu:
            return tensor.as_numpy()
        if tensor.is_cpu():
            return self.xp.asarray(tensor.as_numpy())
        return self.xp.from_dlpack(tensor.to_dlpack())

    def _host(self, tensor):
        if tensor.is_cpu():
            return tensor.as_numpy()
        import cupy

        return cupy.asnumpy(cupy.from_dlpack(tensor.to_dlpack()))

    def _run(self, head, rows):
        boxes, scores = cupyprep.decode_yolo(head, objectness=self.objectness)
        det = cupyprep.multiclass_nms(boxes, scores, **self.options)
        return det.to_original(meta_of(rows))

    def execute(self, requests):
        responses = [None] * len(requests)
        heads, metas, owners = [], [], []
        with self._stream():
            for i, request in enumerate(requests):
                head = pb_utils.get_input_tensor_by_name(request, "HEAD")
                meta = pb_utils.get_input_tensor_by_name(request, "META")
                if head is None or meta is None:
                    responses[i] = pb_utils.InferenceResponse(
                        output_tensors=[], error=pb_utils.TritonError("postprocess: expected inputs 'HEAD' and 'META'"))
                    continue
                h, m = self._array(head), self._host(meta)
                if h.ndim != 3 or m.shape != (h.shape[0], 8) or (heads and h.shape[1:] != heads[0].shape[1:]):
                    responses[i] = pb_utils.InferenceResponse(output_tensors=[], error=pb_utils.TritonError(
                        f"postprocess: expected HEAD [b, boxes, rows] like the batch's and META [b, 8], got "
                        f"{list(h.shape)} and {list(m.shape)}"))
                    continue
                heads.append(h)
                metas.append(m)
                owners.append((i, h.shape[0]))
            if heads:
                # one launch of each op for every request: the heads side by side
                head = heads[0] if len(heads) == 1 else self.xp.concatenate(heads)
                det = self._run(head, np.concatenate(metas))
                start = 0
                for i, count in owners:
                    part = slice(start, start + count)
                    start += count
                    responses[i] = pb_utils.InferenceResponse(output_tensors=[
                        self._tensor("BOXES", det.boxes[part]), self._tensor("SCORES", det.scores[part]),
                        self._tensor("CLASSES", det.classes[part]),
                        self._tensor("COUNT", det.counts[part].reshape(-1, 1))])
            if self.on_gpu:
                self.stream.synchronize()
        return responses

    def _tensor(self, name, array):
        array = self.xp.ascontiguousarray(array)
        if self.on_gpu:
            return pb_utils.Tensor.from_dlpack(name, array)
        return pb_utils.Tensor(name, array)
