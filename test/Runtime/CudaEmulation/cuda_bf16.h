//===- cuda_bf16.h - CUDA's bf16 type, emulated on the CPU ------*- C++ -*-===//
//
// Part of the FlexPipe project, under the Apache License v2.0 with LLVM
// Exceptions. See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// The part of CUDA's bf16 the CUDA backend uses, for the emulation test: the
// 16-bit storage type and its conversions to and from float (rounding to
// nearest even, as __float2bfloat16 does; NaN stays NaN).
//
//===----------------------------------------------------------------------===//

#ifndef FLEXPIPE_TEST_CUDA_EMULATION_CUDA_BF16_H
#define FLEXPIPE_TEST_CUDA_EMULATION_CUDA_BF16_H

#include <cstdint>
#include <cstring>

struct __nv_bfloat16 {
  uint16_t bits;
};

inline float __bfloat162float(__nv_bfloat16 value) {
  const uint32_t bits = static_cast<uint32_t>(value.bits) << 16;
  float out;
  std::memcpy(&out, &bits, sizeof out);
  return out;
}

inline __nv_bfloat16 __float2bfloat16(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  if ((bits & 0x7fffffffu) > 0x7f800000u) // NaN: keep it quiet and NaN
    return {static_cast<uint16_t>((bits >> 16) | 0x40u)};
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return {static_cast<uint16_t>(bits >> 16)};
}

#endif // FLEXPIPE_TEST_CUDA_EMULATION_CUDA_BF16_H
