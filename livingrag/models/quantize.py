"""Run ONNX Runtime's dynamic int8 quantization in a child process: ``python -m
livingrag.models.quantize SOURCE TARGET``.

The quantizer's shape inference writes scratch files (``sym_shape_infer_temp.onnx`` and an
external-data file named by a UUID) into the *current directory*; run in-process, they land in
whatever directory the user started livingrag from. :func:`livingrag.models.onnx_embedder.quantize_int8`
therefore runs this module with a private scratch directory as its working directory (the
working directory is per process, so changing it inside a serving process would move it under
every other thread too).
"""

from __future__ import annotations

import sys


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python -m livingrag.models.quantize SOURCE.onnx TARGET.onnx", file=sys.stderr)
        return 2
    from onnxruntime.quantization import QuantType, quantize_dynamic

    quantize_dynamic(argv[0], argv[1], per_channel=True, weight_type=QuantType.QInt8)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
