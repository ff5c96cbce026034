// The backends keep different attention arrays (the CPU backend the scores,
// the CUDA backend none), and the CPU backend computes in fp32;
// flexpipe-compile warns when the model file prices the other kind, or
// 2-byte activations for the CPU backend, since the peak the ranks are told
// to expect is then off.

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

// The CPU backend computes in fp32: a model priced in bf16 (the default
// dtype) predicted half the activation memory the ranks keep (85.3 KiB
// measured against 45.9 predicted on a small GPT), without a word.
// RUN: sed 's/^dtype: fp32/dtype: bf16/' %configs/models/tiny.yaml > %t/bf16.yaml
// RUN: flexpipe-compile %schedules/1f1b.mlir --model %t/bf16.yaml --cluster %configs/clusters/cpu.yaml --emit=cpp -o %t/e 2>&1 | FileCheck %s --check-prefix=DTYPE
// DTYPE: flexpipe-compile: warning: the cpu backend computes in fp32, but '{{.*}}bf16.yaml' prices bf16 activations (dtype bf16, also the default): the peak activation memory predicted for the ranks is half what they keep; say 'dtype: fp32' there for this backend
// RUN: grep -v '^dtype' %configs/models/tiny.yaml > %t/nodtype.yaml
// RUN: flexpipe-compile %schedules/1f1b.mlir --model %t/nodtype.yaml --cluster %configs/clusters/cpu.yaml --emit=cpp -o %t/f 2>&1 | FileCheck %s --check-prefix=DTYPE-DEFAULT
// DTYPE-DEFAULT: warning: the cpu backend computes in fp32, but '{{.*}}nodtype.yaml' prices bf16 activations
// The CUDA backend's precision is chosen when the ranks start
// (FLEXPIPE_CUDA_MATH): no warning there.
// RUN: sed 's/^dtype: fp32/dtype: bf16\nattention: flash/' %configs/models/tiny.yaml > %t/bf16-flash.yaml
// RUN: flexpipe-compile %schedules/1f1b.mlir --model %t/bf16-flash.yaml --cluster %configs/clusters/cpu.yaml --backend=cuda --emit=cpp -o %t/g 2>&1 | FileCheck %s --check-prefix=QUIET --allow-empty
