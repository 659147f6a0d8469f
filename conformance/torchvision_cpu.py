"""Lets PyPI's torchvision import beside PyTorch's CPU build, in the conformance environment only.

PyPI's torchvision is built against CUDA torch: its C++ extension does not load beside the CPU build, and
then `torchvision._meta_registrations` fails at import, registering fake kernels for `torchvision::nms`
and `torchvision::qnms`, two operators that only the extension defines. SGLang imports torchvision at
module level (image processors of multimodal models; nothing the checks call), so this declares those two
operator schemas, as the extension would, just before torchvision is first imported. Installed into the
environment's site-packages with a .pth line by `make conformance`; torch is imported only then.
"""

from __future__ import annotations

import importlib.abc
import sys

_SCHEMA = "(Tensor dets, Tensor scores, float iou_threshold) -> Tensor"  # torchvision/csrc/ops/nms.cpp


class _DeclareNmsBeforeTorchvision(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path, target=None):
        if fullname == "torchvision":
            sys.meta_path.remove(self)
            import torch

            for op in ("nms", "qnms"):
                if not _defined(torch, op):  # the extension did load after all
                    torch.library.define(f"torchvision::{op}", _SCHEMA)
        return None  # the normal finders import the real package


def _defined(torch, op: str) -> bool:
    try:
        getattr(torch.ops.torchvision, op)
    except (AttributeError, RuntimeError):
        return False
    return True


sys.meta_path.insert(0, _DeclareNmsBeforeTorchvision())
