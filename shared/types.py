"""Array aliases shared by every node."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]
UInt8Array = npt.NDArray[np.uint8]

__all__ = ["BoolArray", "FloatArray", "IntArray", "UInt8Array"]
