#!/usr/bin/env python3
"""Rewrite a GGUF file with its 2-D weight matrices in another ggml type.

For benchmarks and tests: the same model in f32, f16, bf16, Q8_0, Q4_0,
Q4_1, Q5_0 or Q5_1 (the types the PyPI `gguf` package can quantize).
Every matrix with a row length that is whole blocks of the type is
dequantized with `gguf.quants.dequantize` and requantized with
`gguf.quants.quantize`; vectors (norm gains) stay f32; metadata is copied.
Note that a quantized source loses nothing by going up (Q4_1 -> f16 holds
the same values) but stacks errors going across (Q4_1 -> Q4_0).

    python3 tools/gguf_retype.py IN.gguf OUT.gguf --type q8_0
"""
import argparse
import sys

import gguf
import numpy as np

TYPES = {
    "f32": gguf.GGMLQuantizationType.F32,
    "f16": gguf.GGMLQuantizationType.F16,
    "bf16": gguf.GGMLQuantizationType.BF16,
    "q8_0": gguf.GGMLQuantizationType.Q8_0,
    "q4_0": gguf.GGMLQuantizationType.Q4_0,
    "q4_1": gguf.GGMLQuantizationType.Q4_1,
    "q5_0": gguf.GGMLQuantizationType.Q5_0,
    "q5_1": gguf.GGMLQuantizationType.Q5_1,
}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("input")
    ap.add_argument("output")
    ap.add_argument("--type", required=True, choices=sorted(TYPES))
    args = ap.parse_args()
    qtype = TYPES[args.type]
    block = gguf.GGML_QUANT_SIZES[qtype][0]

    reader = gguf.GGUFReader(args.input)
    arch = reader.fields[gguf.Keys.General.ARCHITECTURE].contents()
    writer = gguf.GGUFWriter(args.output, arch)
    for field in reader.fields.values():
        if field.name == gguf.Keys.General.ARCHITECTURE or field.name.startswith("GGUF."):
            continue
        if field.name == gguf.Keys.General.FILE_TYPE:
            continue  # no longer true
        val_type = field.types[0]
        sub_type = field.types[-1] if val_type == gguf.GGUFValueType.ARRAY else None
        writer.add_key_value(field.name, field.contents(), val_type, sub_type=sub_type)

    for t in reader.tensors:
        shape = [int(n) for n in reversed(t.shape)]  # numpy order: rows first
        values = gguf.quants.dequantize(t.data, t.tensor_type).reshape(shape).astype(np.float32)
        if len(shape) == 2 and shape[-1] % block == 0:
            data = gguf.quants.quantize(values, qtype)
            writer.add_tensor(t.name, data, raw_shape=data.shape, raw_dtype=qtype)
        else:
            writer.add_tensor(t.name, values)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
