"""Photographs of different sizes -> one letterboxed batch -> a torch model -> boxes back
in each photograph's own coordinates.

Runs on the GPU when CuPy and a CUDA device are there (the batch reaches torch without a
copy), and on the CPU backend otherwise. The model has random weights (nothing is
downloaded): the point is the data path and the coordinate bookkeeping.

    python examples/detector_input.py
"""
from __future__ import annotations

import numpy as np
import torch
from skimage import data

import cupyprep


def load_photos():
    names = ["astronaut", "coffee", "chelsea", "rocket", "camera"]
    photos = []
    for name in names:
        img = getattr(data, name)()
        if img.ndim == 2:
            img = np.stack([img] * 3, axis=2)
        photos.append(np.ascontiguousarray(img[:, :, ::-1]))  # BGR, as cv2.imread gives
    return names, photos


def model():
    try:
        import torchvision

        net = torchvision.models.resnet18(weights=None, num_classes=4)  # 4 outputs: one box
    except ImportError:
        net = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, stride=4), torch.nn.ReLU(),
                                  torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(8, 4))
    return net.eval()


def main():
    names, photos = load_photos()
    use_gpu = torch.cuda.is_available()
    device = "cuda" if use_gpu else "cpu"
    frames = [torch.from_numpy(p).to(device) for p in photos]
    batch, meta = cupyprep.preprocess(frames, (640, 640), mode="letterbox")  # one launch on the GPU
    print(f"batch: {tuple(batch.shape)} {batch.dtype} on {batch.device}"
          + (f" (zero-copy into torch: data_ptr {batch.data_ptr():#x})" if use_gpu else " (CPU backend)"))
    net = model().to(device)
    with torch.no_grad():
        raw = net(batch)
    print(f"model output: {tuple(raw.shape)}")
    # turn the output into one xyxy box per image inside the network canvas
    unit = torch.sigmoid(raw).sort(dim=1).values[:, [0, 1, 2, 3]]
    boxes = torch.stack([unit[:, 0], unit[:, 1], unit[:, 2], unit[:, 3]], 1) * 640
    originals = meta.to_original(boxes[:, None, :].double())  # (N, 1, 4), clipped to each photo
    for name, photo, pad, box in zip(names, photos, meta.pad, originals[:, 0].tolist()):
        print(f"{name:10s} {photo.shape[1]:4d}x{photo.shape[0]:<4d} padding t/b/l/r {pad.tolist()}  "
              f"box in the photo: [{box[0]:.1f}, {box[1]:.1f}, {box[2]:.1f}, {box[3]:.1f}]")
    # a box spanning the letterboxed image maps back to the whole photograph
    full = torch.tensor([[[meta.offset[i, 1], meta.offset[i, 0],
                           meta.offset[i, 1] + meta.resized_size[i, 1],
                           meta.offset[i, 0] + meta.resized_size[i, 0]]] for i in range(len(meta))],
                        dtype=torch.float64, device=device)
    print("image area mapped back:", meta.to_original(full)[:, 0].round().int().tolist())


if __name__ == "__main__":
    main()
