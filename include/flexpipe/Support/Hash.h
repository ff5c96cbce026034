//===- Hash.h - The one text hash of FlexPipe -------------------*- C++ -*-===//
//
// Part of the FlexPipe project, under the Apache License v2.0 with LLVM
// Exceptions. See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// 64-bit FNV-1a: the schedule hash every rank compares, the check sum of a
// schedule description and of a checkpoint, the CUDA bootstrap's host key.
// Not cryptographic: it finds accidents (a changed file, ranks compiled from
// different specs), not forgeries. Header-only, so that the compiler, the
// runtime library and the backends share it without a link dependency.
//
//===----------------------------------------------------------------------===//

#ifndef FLEXPIPE_SUPPORT_HASH_H
#define FLEXPIPE_SUPPORT_HASH_H

#include <cstdint>
#include <string_view>

namespace flexpipe {

/// FNV-1a's 64-bit offset basis (0xcbf29ce484222325). It read
/// 1469598103934665603, a digit short: checksums that tools built from the
/// documented algorithm could not reproduce.
constexpr uint64_t kFnv1aOffset = 14695981039346656037ULL;
/// The mistyped basis, kept where older files and the weights' random
/// streams need it: an earlier FlexPipe's checkpoints (version 1) and
/// schedule descriptions are told apart from damaged ones with it, and every
/// parameter's initial values follow from it (runtime/lib/ModelData.cpp).
constexpr uint64_t kFnv1aLegacyOffset = 1469598103934665603ULL;

/// FNV-1a of `bytes`, continuing from `h` (chain calls to hash several
/// pieces as one).
inline uint64_t fnv1a(std::string_view bytes, uint64_t h = kFnv1aOffset) {
  for (char c : bytes)
    h = (h ^ static_cast<uint8_t>(c)) * 1099511628211ULL;
  return h;
}

} // namespace flexpipe

#endif // FLEXPIPE_SUPPORT_HASH_H
