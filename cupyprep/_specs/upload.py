"""upload.cu: cupyprep_put_words, host data written by kernel parameters (a copy a CUDA
graph can capture)."""
from __future__ import annotations

from dataclasses import dataclass

FILE = "upload.cu"


@dataclass(frozen=True)
class UploadSpec:
    name: str = "upload"
    kernel: str = "cupyprep_put_words"
    words: int = 1000  # 32-bit words one launch carries (kPutWords)
    most_launches: int = 64  # launches one call may make under capture

    @property
    def max_bytes(self):
        return self.most_launches * 4 * self.words

    def variants(self):
        return [(FILE, self.kernel)]


SPEC = UploadSpec()
CUDA_CONSTANTS = ((FILE, "kPutWords", SPEC.words),)
