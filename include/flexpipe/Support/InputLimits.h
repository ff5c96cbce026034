//===- InputLimits.h - Bounds checked before MLIR parses a file -*- C++ -*-===//
//
// Part of the FlexPipe project, under the Apache License v2.0 with LLVM
// Exceptions. See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// MLIR's parser recurses once per nesting level and converts integer
// literals of any length: about 5,000 nested `builtin.module {` overflow the
// stack, and a literal of 30,000 digits takes half a minute. A compiler that
// reads untrusted files bounds both before parsing. FlexPipe's inputs need a
// handful of levels and literals of at most 20 digits (an i64).
//
//===----------------------------------------------------------------------===//

#ifndef FLEXPIPE_SUPPORT_INPUTLIMITS_H
#define FLEXPIPE_SUPPORT_INPUTLIMITS_H

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace flexpipe {

/// Sizes the tools handle (docs/Rationale.md, "Sizes"): actor ids are 32-bit
/// and the scheduler's pool is bounded. The dialect's verifiers, the model
/// file's reader, flexpipe-tune's options and the runtime's description
/// reader check against these.
constexpr int64_t kMaxActors = 65536;
/// Micro-batches, layers and stages (and so a global batch: micro-batches
/// of one sequence).
constexpr int64_t kMaxCount = 1 << 20;
/// A model's sizes (hidden, heads, sequence length, vocabulary; 16,777,216,
/// beyond any model trained): what the runtime's layers are built with, and
/// what keeps the cost model's figures meaningful.
constexpr int64_t kMaxDimension = 1 << 24;

/// The shape rule of a transformer model, module or tower, which the
/// dialect's model attribute, the model and profile files' readers and the
/// runtime's description reader all hold to: hidden, heads and seq between 1
/// and kMaxDimension, vocab between `minVocab` (0 where a module may have no
/// embedding) and kMaxDimension, and hidden a multiple of heads. Returns ""
/// or what is wrong ("hidden 100 is not a multiple of heads 3").
inline std::string checkModelShape(int64_t hidden, int64_t heads, int64_t seq,
                                   int64_t vocab, int64_t minVocab = 1) {
  const struct {
    const char *name;
    int64_t value, low;
  } sizes[] = {{"hidden", hidden, 1},
               {"heads", heads, 1},
               {"seq", seq, 1},
               {"vocab", vocab, minVocab}};
  for (const auto &size : sizes)
    if (size.value < size.low || size.value > kMaxDimension)
      return std::string(size.name) + " must be between " +
             std::to_string(size.low) + " and " +
             std::to_string(kMaxDimension) + ", got " +
             std::to_string(size.value);
  if (hidden % heads != 0)
    return "hidden " + std::to_string(hidden) + " is not a multiple of heads " +
           std::to_string(heads);
  return {};
}

/// The deepest nesting of (), [] and {} an input may have.
constexpr int kMaxNesting = 256;
/// The longest run of digits (one literal) an input may hold.
constexpr size_t kMaxDigits = 100;

/// Checks `text` (the file `name`) against the bounds above, skipping
/// comments and string literals, and refuses a UTF-8 byte order mark (which
/// MLIR's lexer reports as "unexpected character" with nothing to see).
/// Returns "" or a located error, `NAME:LINE:COLUMN: error: ...`.
inline std::string checkInputLimits(std::string_view text,
                                    const std::string &name) {
  int depth = 0;
  size_t line = 1, column = 1, digits = 0, digitLine = 0, digitColumn = 0;
  auto error = [&](size_t l, size_t c, const std::string &what) {
    return name + ":" + std::to_string(l) + ":" + std::to_string(c) +
           ": error: " + what;
  };
  if (text.substr(0, 3) == "\xEF\xBB\xBF")
    return error(1, 1,
                 "the file starts with a UTF-8 byte order mark, which MLIR "
                 "does not read; save it as UTF-8 without one (e.g. sed -i "
                 "'1s/^\\xEF\\xBB\\xBF//' FILE)");
  for (size_t i = 0; i < text.size(); ++i, ++column) {
    const char c = text[i];
    if (c >= '0' && c <= '9') {
      if (digits++ == 0) {
        digitLine = line;
        digitColumn = column;
      }
      if (digits > kMaxDigits)
        return error(digitLine, digitColumn,
                     "a number of more than " + std::to_string(kMaxDigits) +
                         " digits; FlexPipe's counts and sizes need at most "
                         "20");
      continue;
    }
    digits = 0;
    if (c == '\n') {
      ++line;
      column = 0;
    } else if (c == '/' && i + 1 < text.size() && text[i + 1] == '/') {
      while (i + 1 < text.size() && text[i + 1] != '\n')
        ++i;
    } else if (c == '"') {
      for (++i, ++column; i < text.size() && text[i] != '"'; ++i, ++column) {
        if (text[i] == '\\')
          ++i, ++column;
        else if (text[i] == '\n')
          ++line, column = 0;
      }
    } else if (c == '(' || c == '[' || c == '{') {
      if (++depth > kMaxNesting)
        return error(line, column,
                     "nesting deeper than " + std::to_string(kMaxNesting) +
                         " levels of (), [] and {}; FlexPipe's inputs need a "
                         "handful");
    } else if (c == ')' || c == ']' || c == '}') {
      depth = depth > 0 ? depth - 1 : 0;
    }
  }
  return {};
}

} // namespace flexpipe

#endif // FLEXPIPE_SUPPORT_INPUTLIMITS_H
