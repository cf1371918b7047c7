"""What every kernel family's spec shares: the C type of each NumPy dtype, and the
constants that kernels/common.cuh defines for all of them."""
from __future__ import annotations

import numpy as np

# numpy dtype -> the C type name expressions give it (kernels/common.cuh: cp_half)
C_TYPES = {
    np.dtype(np.uint8): "unsigned char",
    np.dtype(np.uint16): "unsigned short",
    np.dtype(np.float16): "cp_half",
    np.dtype(np.float32): "float",
}

# Images whose per-image data go to a kernel by value (a list's records, preprocess's
# plans, PreprocessMeta's mapping); a longer list's go in one device table.
IMAGES_BY_VALUE = 64

# Constants written both here and in a kernel source: (file, C++ name, value). A test
# reads each source and checks they agree.
CUDA_CONSTANTS = (("common.cuh", "kImagesByValue", IMAGES_BY_VALUE),)


def ctype(dtype) -> str:
    """The C type of a NumPy dtype, as name expressions spell it."""
    return C_TYPES[np.dtype(dtype)]


def cbool(flag) -> str:
    """A C++ bool template argument."""
    return "true" if flag else "false"
