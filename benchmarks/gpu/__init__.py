"""The GPU check: one command that runs every CUDA test of the core and times the core on one device, in minutes.

    python -m benchmarks.gpu                  # on a GPU: a 240 s budget (--budget), sizes up to 65,536
    python -m benchmarks.gpu --quick          # smaller sizes, a 100 s budget
    python -m benchmarks.gpu --device cpu     # the same code paths on the CPU (the test suite runs it, tiny)

It needs torch, numpy, scipy and pytest only, and runs from the repository root without installing the project
(nothing of Hydra, OmegaConf, DVC or MLflow is imported: tests/test_gpu_check.py runs it with those blocked). In
order, each step within the budget (benchmarks.gpu.budget: a step whose predicted cost does not fit is skipped and
listed):

  1. the tests marked `cuda`, in a child pytest on the device (benchmarks.gpu.parity): parity of the device with
     the CPU path and float64 references (tests/test_device_parity.py) and tests/test_encoding.py's CUDA tests;
  2. the peak memory bandwidth: from the device's properties and by a measured copy (benchmarks.gpu.bandwidth);
  3. for each --sizes n x d: the encoding, its diagnostics and the full matrices on the device and on the CPU path,
     against torch.cdist + matmul and the float32-angle formula on the same device, with errors against float64
     references and the write bandwidth of the full matrices (benchmarks.gpu.pe_timings);
  4. for each --sweep-pairs P: the sweep's projection of P weight pairs x 2 sentences, a torch port on the device
     against torch's batched SVD there and the core's numpy weighted_pca on the CPU (benchmarks.gpu.sweep_timings);
  5. the largest n whose full float64 matrices fit, computed there for real, and the error beyond it
     (benchmarks.gpu.memory_probe);
  6. the length experiment's model: --length-steps training steps and one evaluation per position family at the
     documented config's sizes, on the device and on the CPU path, and the documented config's time projected from
     them (benchmarks.gpu.length_timings).

It prints a table and writes one JSON (--out; default benchmarks/results/gpu-check-<device>-<name>.json) holding
the device, the versions, every test's outcome and recorded figures, and every measured row. Exit status 1 when a
test fails, the full matrices at the largest n do not fit after all, or the error beyond it is not the core's clear
one.
"""
