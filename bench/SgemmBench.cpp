//===- SgemmBench.cpp - This machine's single-thread sgemm rate -----------===//
//
// Part of the FlexPipe project, under the Apache License v2.0 with LLVM
// Exceptions. See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// The yardstick of bench/cpu-compute.sh: OpenBLAS's single-thread sgemm rate
// (the library the CPU runtime multiplies with) at the shapes of a GPT's
// forward per micro-batch (T tokens, hidden H, vocabulary V): QKV, attention
// output, the two MLP products and the LM head, plus a 1024^3 product.
// Prints one line per shape and the FLOP-weighted rate over the model's
// shapes ("model-shape sgemm rate").
//
// Usage: flexpipe-bench-sgemm T H V [seconds per shape, default 0.5]
//
//===----------------------------------------------------------------------===//

#include "BenchArgs.h"
#include <cblas.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {

/// GFLOP/s of C[m x n] = A[m x k] B[k x n], repeated for about `seconds`.
double rate(int m, int n, int k, double seconds) {
  std::vector<float> a(static_cast<size_t>(m) * k, 0.5f),
      b(static_cast<size_t>(k) * n, 0.25f), c(static_cast<size_t>(m) * n);
  using Clock = std::chrono::steady_clock;
  auto run = [&] {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1.0f,
                a.data(), k, b.data(), n, 0.0f, c.data(), n);
  };
  run(); // warm-up
  int64_t reps = 0;
  const auto start = Clock::now();
  double elapsed = 0;
  do {
    run();
    ++reps;
    elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  } while (elapsed < seconds);
  return 2.0 * m * n * k * reps / elapsed / 1e9;
}

} // namespace

int main(int argc, char **argv) {
  if (argc == 2 && flexpipe::bench::printsUsage(
                       argv[1], "flexpipe-bench-sgemm T H V [seconds]"))
    return 0;
  if (argc < 4) {
    std::fprintf(stderr, "usage: flexpipe-bench-sgemm T H V [seconds]\n");
    return 1;
  }
  const int t = std::atoi(argv[1]), h = std::atoi(argv[2]),
            v = std::atoi(argv[3]);
  if (t < 1 || h < 1 || v < 1) {
    std::fprintf(stderr, "flexpipe-bench-sgemm: T, H, V must be positive\n");
    return 1;
  }
  const std::optional<double> parsed =
      argc > 4 ? flexpipe::bench::parseSeconds(
                     "flexpipe-bench-sgemm", argv[4],
                     "flexpipe-bench-sgemm T H V [seconds]")
               : 0.5;
  if (!parsed)
    return 1;
  const double seconds = *parsed;
  openblas_set_num_threads(1);
  struct Shape {
    const char *name;
    int m, n, k;
  } shapes[] = {{"qkv", t, 3 * h, h},
                {"attention out", t, h, h},
                {"mlp fc1", t, 4 * h, h},
                {"mlp fc2", t, h, 4 * h},
                {"lm head", t, v, h}};
  double flops = 0, seconds_total = 0;
  for (const Shape &s : shapes) {
    const double r = rate(s.m, s.n, s.k, seconds);
    const double f = 2.0 * s.m * s.n * s.k;
    flops += f;
    seconds_total += f / (r * 1e9);
    std::printf("sgemm %-14s %5d x %5d x %5d: %7.1f GFLOP/s\n", s.name, s.m,
                s.n, s.k, r);
  }
  std::printf("sgemm 1024 x 1024 x 1024: %7.1f GFLOP/s\n",
              rate(1024, 1024, 1024, seconds));
  std::printf("model-shape sgemm rate: %.1f GFLOP/s (one thread)\n",
              flops / seconds_total / 1e9);
  return 0;
}
