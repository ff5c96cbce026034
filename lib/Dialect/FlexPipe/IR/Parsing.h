//===- Parsing.h - Helpers of the dialect's custom parsers ------*- C++ -*-===//
//
// Part of the FlexPipe project, under the Apache License v2.0 with LLVM
// Exceptions. See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// What the ops' and attributes' hand-written parsers share: MLIR's integer
// parser also takes the keywords `true` and `false` (as -1 and 0), which no
// FlexPipe count, index or stage means; these read an integer without them.
//
//===----------------------------------------------------------------------===//

#ifndef FLEXPIPE_LIB_DIALECT_FLEXPIPE_IR_PARSING_H
#define FLEXPIPE_LIB_DIALECT_FLEXPIPE_IR_PARSING_H

#include "mlir/IR/OpImplementation.h"
#include "llvm/ADT/StringExtras.h"

namespace flexpipe::detail {

/// The bare identifier at `loc` in the source, if one starts there (read
/// as MLIR's lexer reads it, a character at a time).
inline llvm::StringRef identifierAt(llvm::SMLoc loc) {
  const char *begin = loc.getPointer(), *end = begin;
  if (!(llvm::isAlpha(*end) || *end == '_'))
    return {};
  while (llvm::isAlnum(*end) || *end == '_' || *end == '$' || *end == '.')
    ++end;
  return llvm::StringRef(begin, end - begin);
}

/// parseOptionalInteger, with `true` and `false` refused at the keyword.
template <typename IntT>
mlir::OptionalParseResult parseOptionalPlainInteger(mlir::AsmParser &parser,
                                                    IntT &value) {
  llvm::SMLoc loc = parser.getCurrentLocation();
  llvm::StringRef word = identifierAt(loc);
  if (word == "true" || word == "false")
    return mlir::ParseResult(parser.emitError(loc)
                             << "expected an integer, not '" << word << "'");
  return parser.parseOptionalInteger(value);
}

/// parseInteger, with `true` and `false` refused at the keyword.
template <typename IntT>
mlir::ParseResult parsePlainInteger(mlir::AsmParser &parser, IntT &value) {
  llvm::SMLoc loc = parser.getCurrentLocation();
  mlir::OptionalParseResult parsed = parseOptionalPlainInteger(parser, value);
  if (!parsed.has_value())
    return parser.emitError(loc, "expected integer value");
  return *parsed;
}

} // namespace flexpipe::detail

#endif // FLEXPIPE_LIB_DIALECT_FLEXPIPE_IR_PARSING_H
