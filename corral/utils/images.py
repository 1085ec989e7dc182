"""Image helpers on OpenCV (RLlib 1.13's `resize`, `rgb2gray`, `imread`).

OpenCV comes with the `atari` extra (`pip install 'corral[atari]'`); it is imported on
first use.
"""

from __future__ import annotations

from typing import Any

import numpy as np


def _cv2() -> Any:
    try:
        import cv2
    except ImportError as err:
        raise ImportError(
            "corral.utils.images needs OpenCV: pip install 'corral[atari]' "
            "(opencv-python-headless)."
        ) from err
    return cv2


def resize(img: np.ndarray, height: int, width: int) -> np.ndarray:
    """`img` resized to `height` x `width` (area interpolation, as for Atari frames)."""
    cv2 = _cv2()
    return cv2.resize(img, (width, height), interpolation=cv2.INTER_AREA)


def rgb2gray(img: np.ndarray) -> np.ndarray:
    """An RGB image `[H, W, 3]` as grey `[H, W]`."""
    cv2 = _cv2()
    return cv2.cvtColor(img, cv2.COLOR_RGB2GRAY)


def imread(img_file: str) -> np.ndarray:
    """The image in `img_file` as float32 (OpenCV's channel order, BGR).

    Raises:
        FileNotFoundError: OpenCV could not read `img_file`.
    """
    img = _cv2().imread(img_file)
    if img is None:
        raise FileNotFoundError(f"imread: no image could be read from {img_file!r}")
    return img.astype(np.float32)
