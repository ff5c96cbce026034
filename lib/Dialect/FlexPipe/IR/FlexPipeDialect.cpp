//===- FlexPipeDialect.cpp - FlexPipe dialect, attributes, types ----------===//
//
// Part of the FlexPipe project, under the Apache License v2.0 with LLVM
// Exceptions. See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#include "flexpipe/Dialect/FlexPipe/IR/FlexPipe.h"
#include "flexpipe/Support/InputLimits.h"

#include "Parsing.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace flexpipe;
using flexpipe::detail::parseOptionalPlainInteger;
using flexpipe::detail::parsePlainInteger;

#include "flexpipe/Dialect/FlexPipe/IR/FlexPipeOpsDialect.cpp.inc"

#include "flexpipe/Dialect/FlexPipe/IR/FlexPipeEnums.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "flexpipe/Dialect/FlexPipe/IR/FlexPipeAttrs.cpp.inc"

#define GET_TYPEDEF_CLASSES
#include "flexpipe/Dialect/FlexPipe/IR/FlexPipeOpsTypes.cpp.inc"

void FlexPipeDialect::initialize() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "flexpipe/Dialect/FlexPipe/IR/FlexPipeAttrs.cpp.inc"
      >();
  addTypes<
#define GET_TYPEDEF_LIST
#include "flexpipe/Dialect/FlexPipe/IR/FlexPipeOpsTypes.cpp.inc"
      >();
  addOperations<
#define GET_OP_LIST
#include "flexpipe/Dialect/FlexPipe/IR/FlexPipeOps.cpp.inc"
      >();
}

bool flexpipe::isBuiltinInstructionName(llvm::StringRef name) {
  return name == "fwd" || name == "bwd" || name == "igrad" || name == "wgrad";
}

//===----------------------------------------------------------------------===//
// ModelConfigAttr
//===----------------------------------------------------------------------===//

LogicalResult
ModelConfigAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                        int64_t hidden, int64_t heads, int64_t seq,
                        int64_t vocab) {
  if (std::string error = checkModelShape(hidden, heads, seq, vocab);
      !error.empty())
    return emitError() << "model " << error;
  return success();
}

//===----------------------------------------------------------------------===//
// Counts: integers or expressions of pp, s and m
//===----------------------------------------------------------------------===//

namespace {
/// The symbols a count may use, by position: pp (actors), s (stages), m
/// (micro-batches), round (micro-batches per round).
constexpr const char *kCountSymbolNames[] = {"pp", "s", "m", "round"};
static_assert(std::size(kCountSymbolNames) == kCountSymbols);

/// Recursive descent over the count grammar:
///   sum    := term (('+' | '-') term)*
///   term   := factor (('*' | 'floordiv' | 'ceildiv' | 'mod') factor)*
///   factor := integer | 'pp' | 's' | 'm' | 'round' | '(' sum ')'
///           | '-' factor
class CountParser {
public:
  explicit CountParser(AsmParser &parser) : parser(parser) {}

  FailureOr<AffineExpr> sum() {
    FailureOr<AffineExpr> lhs = term();
    if (failed(lhs))
      return failure();
    for (;;) {
      const bool minus = succeeded(parser.parseOptionalMinus());
      if (!minus && failed(parser.parseOptionalPlus()))
        return lhs;
      FailureOr<AffineExpr> rhs = term();
      if (failed(rhs))
        return failure();
      lhs = minus ? *lhs - *rhs : *lhs + *rhs;
    }
  }

private:
  FailureOr<AffineExpr> term() {
    FailureOr<AffineExpr> lhs = factor();
    if (failed(lhs))
      return failure();
    for (;;) {
      AffineExpr (*apply)(AffineExpr, AffineExpr);
      if (succeeded(parser.parseOptionalStar()))
        apply = [](AffineExpr a, AffineExpr b) { return a * b; };
      else if (succeeded(parser.parseOptionalKeyword("floordiv")))
        apply = [](AffineExpr a, AffineExpr b) { return a.floorDiv(b); };
      else if (succeeded(parser.parseOptionalKeyword("ceildiv")))
        apply = [](AffineExpr a, AffineExpr b) { return a.ceilDiv(b); };
      else if (succeeded(parser.parseOptionalKeyword("mod")))
        apply = [](AffineExpr a, AffineExpr b) { return a % b; };
      else
        return lhs;
      FailureOr<AffineExpr> rhs = factor();
      if (failed(rhs))
        return failure();
      lhs = apply(*lhs, *rhs);
    }
  }

  FailureOr<AffineExpr> factor() {
    MLIRContext *ctx = parser.getContext();
    llvm::SMLoc loc = parser.getCurrentLocation();
    if (succeeded(parser.parseOptionalLParen())) {
      FailureOr<AffineExpr> inner = sum();
      if (failed(inner) || parser.parseRParen())
        return failure();
      return inner;
    }
    if (succeeded(parser.parseOptionalMinus())) {
      FailureOr<AffineExpr> inner = factor();
      if (failed(inner))
        return failure();
      return -*inner;
    }
    int64_t value;
    OptionalParseResult integer = parseOptionalPlainInteger(parser, value);
    if (integer.has_value()) {
      if (failed(*integer))
        return failure();
      if (!budget.take(llvm::AbsoluteValue(value)))
        return parser.emitError(loc) << AffineLiteralBudget::exceeded(
                   // As written (hex stays hex).
                   llvm::StringRef(loc.getPointer()).take_while([](char c) {
                     return llvm::isAlnum(c) || c == '_';
                   }),
                   "count");
      return getAffineConstantExpr(value, ctx);
    }
    StringRef name;
    if (succeeded(parser.parseOptionalKeyword(&name))) {
      if (!budget.take(std::nullopt))
        return parser.emitError(loc)
               << AffineLiteralBudget::exceeded(name, "count");
      for (auto [position, symbol] : llvm::enumerate(kCountSymbolNames))
        if (name == symbol)
          return getAffineSymbolExpr(position, ctx);
      return parser.emitError(loc)
             << "unknown symbol '" << name
             << "' in a count; a count may use pp (actors), s (stages), m "
                "(micro-batches) and round (micro-batches per round)";
    }
    return parser.emitError(loc)
           << "expected a count: an integer or an expression of pp, s, m and "
              "round";
  }

  AsmParser &parser;
  AffineLiteralBudget budget;
};

/// Prints `expr` over the count symbols; `parenthesize` wraps sums and
/// products that appear as operands of a tighter operator.
void printCount(llvm::raw_ostream &os, AffineExpr expr, bool parenthesize) {
  if (auto constant = dyn_cast<AffineConstantExpr>(expr)) {
    if (parenthesize && constant.getValue() < 0)
      os << '(' << constant.getValue() << ')';
    else
      os << constant.getValue();
    return;
  }
  if (auto symbol = dyn_cast<AffineSymbolExpr>(expr)) {
    os << (symbol.getPosition() < kCountSymbols
               ? kCountSymbolNames[symbol.getPosition()]
               : "?");
    return;
  }
  auto binary = cast<AffineBinaryOpExpr>(expr);
  if (parenthesize)
    os << '(';
  AffineExpr lhs = binary.getLHS(), rhs = binary.getRHS();
  switch (binary.getKind()) {
  case AffineExprKind::Add: {
    printCount(os, lhs, false);
    // a + (-c) and a + b * (-1) read as subtractions.
    if (auto constant = dyn_cast<AffineConstantExpr>(rhs);
        constant && constant.getValue() < 0) {
      os << " - " << -constant.getValue();
      break;
    }
    if (auto product = dyn_cast<AffineBinaryOpExpr>(rhs);
        product && product.getKind() == AffineExprKind::Mul)
      if (auto factor = dyn_cast<AffineConstantExpr>(product.getRHS());
          factor && factor.getValue() < 0) {
        os << " - ";
        printCount(os, product.getLHS(), true);
        if (factor.getValue() != -1)
          os << " * " << -factor.getValue();
        break;
      }
    // A sum on the right keeps its parentheses: `a + b + c` reads back as
    // (a + b) + c, which MLIR folds into another tree than a + (b + c), so
    // the print would change at every round trip.
    os << " + ";
    printCount(os, rhs, rhs.getKind() == AffineExprKind::Add);
    break;
  }
  default: {
    const char *op = binary.getKind() == AffineExprKind::Mul        ? " * "
                     : binary.getKind() == AffineExprKind::FloorDiv ? " floordiv "
                     : binary.getKind() == AffineExprKind::CeilDiv  ? " ceildiv "
                                                                    : " mod ";
    printCount(os, lhs, true);
    os << op;
    printCount(os, rhs, true);
    break;
  }
  }
  if (parenthesize)
    os << ')';
}
} // namespace

ParseResult flexpipe::parseCountExpr(AsmParser &parser, AffineMap &count) {
  FailureOr<AffineExpr> expr = CountParser(parser).sum();
  if (failed(expr))
    return failure();
  count = AffineMap::get(0, kCountSymbols, *expr);
  return success();
}

bool AffineLiteralBudget::take(std::optional<uint64_t> magnitude) {
  constexpr uint64_t kLimit = uint64_t(1) << 62;
  const uint64_t factor = std::max<uint64_t>(magnitude.value_or(2), 2);
  if (product > kLimit / factor)
    return false;
  product *= factor;
  return true;
}

std::string AffineLiteralBudget::exceeded(llvm::StringRef token,
                                          llvm::StringRef what) {
  return ("at '" + token + "' this " + what +
          "'s constants and names multiply past 2^62; MLIR folds them in "
          "wrapping arithmetic while it parses the expression, so it cannot "
          "be read as written")
      .str();
}

void flexpipe::printCountExpr(llvm::raw_ostream &os, AffineMap count) {
  printCount(os, count.getResult(0), false);
}

std::optional<int64_t> flexpipe::evaluateCount(AffineMap count, int64_t pp,
                                               int64_t s, int64_t m) {
  AffineExpr value = count.getResult(0).replaceDimsAndSymbols(
      {}, countSymbolValues(count.getContext(), pp, s, m));
  if (auto constant = dyn_cast<AffineConstantExpr>(value))
    return constant.getValue();
  return std::nullopt;
}

SmallVector<AffineExpr> flexpipe::countSymbolValues(MLIRContext *context,
                                                    int64_t pp, int64_t s,
                                                    int64_t m) {
  return {getAffineConstantExpr(pp, context), getAffineConstantExpr(s, context),
          getAffineConstantExpr(m, context),
          getAffineConstantExpr(microbatchesPerRound(pp, m), context)};
}

int64_t flexpipe::microbatchesPerRound(int64_t pp, int64_t m) {
  // The most rounds (at most m / pp) whose last, smallest round still holds
  // pp micro-batches: a shorter last round leaves the pipeline half empty.
  for (int64_t rounds = pp > 0 ? m / pp : 1; rounds > 1; --rounds) {
    const int64_t size = (m + rounds - 1) / rounds;
    if (m - (rounds - 1) * size >= pp)
      return size;
  }
  return m;
}

/// A constant count below 1 is an error at once; an expression is checked
/// when the spec is scheduled.
static LogicalResult verifyCount(function_ref<InFlightDiagnostic()> emitError,
                                 AffineMap count, StringRef what,
                                 StringRef hint = "") {
  if (!count)
    return success();
  if (count.getNumDims() != 0 || count.getNumSymbols() != kCountSymbols ||
      count.getNumResults() != 1)
    return emitError() << what << " must be a count over pp, s, m and round";
  if (auto constant = dyn_cast<AffineConstantExpr>(count.getResult(0));
      constant && constant.getValue() < 1)
    return emitError() << what << " must be at least 1, got "
                       << constant.getValue() << hint;
  return success();
}

//===----------------------------------------------------------------------===//
// CttpAttr: `<kind>` or `<kind, fwd_unit, bwd_unit>`
//===----------------------------------------------------------------------===//

Attribute CttpAttr::parse(AsmParser &parser, Type) {
  llvm::SMLoc loc = parser.getCurrentLocation();
  StringRef keyword;
  if (parser.parseLess() || parser.parseKeyword(&keyword))
    return {};
  std::optional<CttpKind> kind = symbolizeCttpKind(keyword);
  if (!kind) {
    parser.emitError(loc) << "unknown computation-type traversal priority '"
                          << keyword
                          << "'; expected bwd_first, fwd_first or interleaved";
    return {};
  }
  AffineMap fwdUnit, bwdUnit;
  if ((succeeded(parser.parseOptionalComma()) &&
       (parseCountExpr(parser, fwdUnit) || parser.parseComma() ||
        parseCountExpr(parser, bwdUnit))) ||
      parser.parseGreater())
    return {};
  // Units of 1 are the default and print as nothing.
  auto isOne = [](AffineMap unit) {
    auto constant = dyn_cast<AffineConstantExpr>(unit.getResult(0));
    return constant && constant.getValue() == 1;
  };
  if (fwdUnit && isOne(fwdUnit) && isOne(bwdUnit))
    fwdUnit = bwdUnit = AffineMap();
  return getChecked([&] { return parser.emitError(loc); },
                    parser.getContext(), *kind, fwdUnit, bwdUnit);
}

void CttpAttr::print(AsmPrinter &printer) const {
  printer << '<' << stringifyCttpKind(getKind());
  // A unit left out of the pair is the default, 1.
  if (getFwdUnit() || getBwdUnit())
    for (AffineMap unit : {getFwdUnit(), getBwdUnit()}) {
      printer << ", ";
      if (unit)
        printCountExpr(printer.getStream(), unit);
      else
        printer << 1;
    }
  printer << '>';
}

LogicalResult CttpAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                               CttpKind, AffineMap fwdUnit,
                               AffineMap bwdUnit) {
  if (failed(verifyCount(emitError, fwdUnit, "scheduling units")))
    return failure();
  return verifyCount(emitError, bwdUnit, "scheduling units");
}

//===----------------------------------------------------------------------===//
// StpAttr: `<order>` or `<order, interval>`
//===----------------------------------------------------------------------===//

Attribute StpAttr::parse(AsmParser &parser, Type) {
  llvm::SMLoc loc = parser.getCurrentLocation();
  StringRef keyword;
  if (parser.parseLess() || parser.parseKeyword(&keyword))
    return {};
  std::optional<StageOrder> order = symbolizeStageOrder(keyword);
  if (!order) {
    parser.emitError(loc) << "unknown stage traversal priority '" << keyword
                          << "'; expected breadth_first or depth_first";
    return {};
  }
  AffineMap interval;
  if ((succeeded(parser.parseOptionalComma()) &&
       parseCountExpr(parser, interval)) ||
      parser.parseGreater())
    return {};
  return getChecked([&] { return parser.emitError(loc); },
                    parser.getContext(), *order, interval);
}

void StpAttr::print(AsmPrinter &printer) const {
  printer << '<' << stringifyStageOrder(getOrder());
  if (getInterval()) {
    printer << ", ";
    printCountExpr(printer.getStream(), getInterval());
  }
  printer << '>';
}

LogicalResult StpAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                              StageOrder, AffineMap interval) {
  return verifyCount(emitError, interval, "a stage traversal interval",
                     "; omit it to take the first item");
}

//===----------------------------------------------------------------------===//
// TokenType: `!flexpipe.token`, no parameters
//===----------------------------------------------------------------------===//

Type TokenType::parse(AsmParser &parser) {
  if (succeeded(parser.parseOptionalLess())) {
    parser.emitError(parser.getCurrentLocation())
        << "!flexpipe.token takes no parameters";
    return {};
  }
  return TokenType::get(parser.getContext());
}

void TokenType::print(AsmPrinter &) const {}

//===----------------------------------------------------------------------===//
// StageInfoAttr: `<"module", layers[, first][, last]>`
//===----------------------------------------------------------------------===//

Attribute StageInfoAttr::parse(AsmParser &parser, Type) {
  llvm::SMLoc loc = parser.getCurrentLocation();
  std::string module;
  int64_t layers;
  if (parser.parseLess() || parser.parseString(&module) ||
      parser.parseComma() || parsePlainInteger(parser, layers))
    return {};
  bool first = false, last = false;
  while (succeeded(parser.parseOptionalComma())) {
    llvm::SMLoc at = parser.getCurrentLocation();
    bool *flag = succeeded(parser.parseOptionalKeyword("first"))  ? &first
                 : succeeded(parser.parseOptionalKeyword("last")) ? &last
                                                                  : nullptr;
    if (!flag) {
      parser.emitError(at, "expected 'first' or 'last'");
      return {};
    }
    // (A repeated flag was taken once without a word.)
    if (*flag) {
      parser.emitError(at) << "'" << (flag == &first ? "first" : "last")
                           << "' is given twice";
      return {};
    }
    *flag = true;
  }
  if (parser.parseGreater())
    return {};
  return getChecked([&] { return parser.emitError(loc); },
                    parser.getContext(),
                    StringAttr::get(parser.getContext(), module), layers, first,
                    last);
}

void StageInfoAttr::print(AsmPrinter &printer) const {
  // Escaped: a module named g"m printed "g"m", which did not parse again.
  printer << '<';
  printer.printString(getModule().getValue());
  printer << ", " << getLayers();
  if (getFirst())
    printer << ", first";
  if (getLast())
    printer << ", last";
  printer << '>';
}

LogicalResult
StageInfoAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                      StringAttr module, int64_t layers, bool, bool) {
  if (!module || module.getValue().empty())
    return emitError() << "a stage_info needs the module's name";
  if (layers < 0)
    return emitError() << "a stage cannot hold " << layers << " layers";
  // As a module's `layers` (the runtime's description, with int layer
  // indices, truncated 2^62 to 0).
  if (layers > kMaxCount)
    return emitError() << "a stage cannot hold " << layers
                       << " layers; at most " << kMaxCount;
  return success();
}
