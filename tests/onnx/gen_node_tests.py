"""Write the ONNX backend node tests (the generators the `onnx` PyPI package ships) to a folder.

Run: python3 tests/onnx/gen_node_tests.py OUT_DIR      (needs `pip install onnx`)
Each case becomes OUT_DIR/<name>/model.onnx plus test_data_set_N/{input,output}_K.pb, the
layout of onnx's own backend test data, and OUT_DIR/<name>/meta.txt holds its tolerances
(`rtol atol`). `might onnx-test OUT_DIR` runs them.
"""
import os
import sys

import onnx
from onnx import numpy_helper
from onnx.backend.test.case.node import collect_testcases


def write_value(path, value, proto_type):
    # node tests of the scored set hold tensors only; others are written as serialized protos
    if isinstance(value, onnx.TensorProto):
        t = value
    else:
        try:
            t = numpy_helper.from_array(value)
        except Exception:
            return False
    with open(path, "wb") as f:
        f.write(t.SerializeToString())
    return True


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "target/onnx-node-tests"
    os.makedirs(out, exist_ok=True)
    n = 0
    for case in collect_testcases(None):
        d = os.path.join(out, case.name)
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "model.onnx"), "wb") as f:
            f.write(case.model.SerializeToString())
        with open(os.path.join(d, "meta.txt"), "w") as f:
            f.write(f"{case.rtol} {case.atol}\n")
        for i, (inputs, outputs) in enumerate(case.data_sets or []):
            ds = os.path.join(d, f"test_data_set_{i}")
            os.makedirs(ds, exist_ok=True)
            for k, v in enumerate(inputs):
                write_value(os.path.join(ds, f"input_{k}.pb"), v, None)
            for k, v in enumerate(outputs):
                write_value(os.path.join(ds, f"output_{k}.pb"), v, None)
        n += 1
    print(f"wrote {n} node test cases to {out} (onnx {onnx.__version__})")


if __name__ == "__main__":
    main()
