//===- FlexPipeDialect.cpp - FlexPipe dialect, attributes, types ----------===//
//
// Part of the FlexPipe project, under the Apache License v2.0 with LLVM
// Exceptions. See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#include "flexpipe/Dialect/FlexPipe/IR/FlexPipe.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace flexpipe;

#include "flexpipe/Dialect/FlexPipe/IR/FlexPipeOpsDialect.cpp.inc"

#include "flexpipe/Dialect/FlexPipe/IR/FlexPipeEnums.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "flexpipe/Dialect/FlexPipe/IR/FlexPipeAttrs.cpp.inc"

#define GET_TYPEDEF_CLASSES
#include "flexpipe/Dialect/FlexPipe/IR/FlexPipeOpsTypes.cpp.inc"

void FlexPipeDialect::initialize() {
  registerAttributes();
  registerTypes();
  addOperations<
#define GET_OP_LIST
#include "flexpipe/Dialect/FlexPipe/IR/FlexPipeOps.cpp.inc"
      >();
}

void FlexPipeDialect::registerAttributes() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "flexpipe/Dialect/FlexPipe/IR/FlexPipeAttrs.cpp.inc"
      >();
}

void FlexPipeDialect::registerTypes() {
  addTypes<
#define GET_TYPEDEF_LIST
#include "flexpipe/Dialect/FlexPipe/IR/FlexPipeOpsTypes.cpp.inc"
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
  for (auto [name, value] :
       {std::pair<const char *, int64_t>{"hidden", hidden},
        {"heads", heads},
        {"seq", seq},
        {"vocab", vocab}})
    if (value < 1)
      return emitError() << "model " << name << " must be positive, got "
                         << value;
  if (hidden % heads != 0)
    return emitError() << "model hidden size " << hidden
                       << " must be a multiple of the number of heads "
                       << heads;
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
  int64_t fwdUnit = 1, bwdUnit = 1;
  if (succeeded(parser.parseOptionalComma()) &&
      (parser.parseInteger(fwdUnit) || parser.parseComma() ||
       parser.parseInteger(bwdUnit)))
    return {};
  if (parser.parseGreater())
    return {};
  return getChecked([&] { return parser.emitError(loc); },
                    parser.getContext(), *kind, fwdUnit, bwdUnit);
}

void CttpAttr::print(AsmPrinter &printer) const {
  printer << '<' << stringifyCttpKind(getKind());
  if (getFwdUnit() != 1 || getBwdUnit() != 1)
    printer << ", " << getFwdUnit() << ", " << getBwdUnit();
  printer << '>';
}

LogicalResult CttpAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                               CttpKind, int64_t fwdUnit, int64_t bwdUnit) {
  if (fwdUnit < 1 || bwdUnit < 1)
    return emitError() << "scheduling units must be at least 1, got "
                       << fwdUnit << " (forward) and " << bwdUnit
                       << " (backward)";
  return success();
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
  std::optional<int64_t> interval;
  if (succeeded(parser.parseOptionalComma())) {
    int64_t value;
    if (parser.parseInteger(value))
      return {};
    interval = value;
  }
  if (parser.parseGreater())
    return {};
  return getChecked([&] { return parser.emitError(loc); },
                    parser.getContext(), *order, interval);
}

void StpAttr::print(AsmPrinter &printer) const {
  printer << '<' << stringifyStageOrder(getOrder());
  if (getInterval())
    printer << ", " << *getInterval();
  printer << '>';
}

LogicalResult StpAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                              StageOrder, std::optional<int64_t> interval) {
  if (interval && *interval < 1)
    return emitError() << "a stage traversal interval must be at least 1, got "
                       << *interval << "; omit it to take the first item";
  return success();
}

//===----------------------------------------------------------------------===//
// StageInfoAttr: `<"module", layers[, first][, last]>`
//===----------------------------------------------------------------------===//

Attribute StageInfoAttr::parse(AsmParser &parser, Type) {
  llvm::SMLoc loc = parser.getCurrentLocation();
  std::string module;
  int64_t layers;
  if (parser.parseLess() || parser.parseString(&module) ||
      parser.parseComma() || parser.parseInteger(layers))
    return {};
  bool first = false, last = false;
  while (succeeded(parser.parseOptionalComma())) {
    if (succeeded(parser.parseOptionalKeyword("first")))
      first = true;
    else if (succeeded(parser.parseOptionalKeyword("last")))
      last = true;
    else {
      parser.emitError(parser.getCurrentLocation(),
                       "expected 'first' or 'last'");
      return {};
    }
  }
  if (parser.parseGreater())
    return {};
  return getChecked([&] { return parser.emitError(loc); },
                    parser.getContext(),
                    StringAttr::get(parser.getContext(), module), layers, first,
                    last);
}

void StageInfoAttr::print(AsmPrinter &printer) const {
  printer << "<\"" << getModule().getValue() << "\", " << getLayers();
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
  return success();
}
