// The backends keep different attention arrays (the CPU backend the scores,
// the CUDA backend none); flexpipe-compile warns when the model file prices
// the other kind, since the peak the ranks are told to expect is then off.

// RUN: rm -rf %t && mkdir -p %t
// RUN: sed 's/^dtype: fp32/dtype: fp32\nattention: flash/' %configs/models/tiny.yaml > %t/flash.yaml

// RUN: flexpipe-compile %schedules/1f1b.mlir --model %configs/models/tiny.yaml --cluster %configs/clusters/cpu.yaml --backend=cuda --emit=cpp -o %t/a 2>&1 | FileCheck %s --check-prefix=CUDA
// CUDA: flexpipe-compile: warning: the cuda backend's attention keeps no scores (it recomputes them), but '{{.*}}tiny.yaml' prices it as materialized: the peak activation memory predicted for the ranks counts scores they do not keep; say 'attention: flash' there for this backend

// RUN: flexpipe-compile %schedules/1f1b.mlir --model %t/flash.yaml --cluster %configs/clusters/cpu.yaml --emit=cpp -o %t/b 2>&1 | FileCheck %s --check-prefix=CPU
// CPU: flexpipe-compile: warning: the cpu backend's attention keeps its s x s scores per head, but '{{.*}}flash.yaml' prices it as flash: the peak activation memory predicted for the ranks leaves out the scores they keep; say 'attention: materialized' there for this backend

// Matching files: no warning.
// RUN: flexpipe-compile %schedules/1f1b.mlir --model %t/flash.yaml --cluster %configs/clusters/cpu.yaml --backend=cuda-emulation --emit=cpp -o %t/c 2>&1 | FileCheck %s --check-prefix=QUIET --allow-empty
// RUN: flexpipe-compile %schedules/1f1b.mlir --model %configs/models/tiny.yaml --cluster %configs/clusters/cpu.yaml --emit=cpp -o %t/d 2>&1 | FileCheck %s --check-prefix=QUIET --allow-empty
// QUIET-NOT: warning
