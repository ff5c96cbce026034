//===- FuzzParse.cpp - Fuzz target: the parser and the verifiers ----------===//
//
// Part of the FlexPipe project, under the Apache License v2.0 with LLVM
// Exceptions. See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// Any text as a FlexPipe spec or schedule: the input limits, MLIR's parser
// with the dialect's custom syntax, and every op verifier. A module that
// verifies must print (custom and generic form) and read back to the same
// text: the printer and the parser agree.
//
//===----------------------------------------------------------------------===//

#include "FuzzMlir.h"

using namespace flexpipe::fuzz;

FLEXPIPE_FUZZ_TARGET(parse) {
  FuzzContext fuzz;
  const std::string text(reinterpret_cast<const char *>(data), size);
  mlir::OwningOpRef<mlir::ModuleOp> module = fuzz.parse(text);
  if (!module)
    return;
  for (bool generic : {false, true}) {
    const std::string printed = print(*module, generic);
    FuzzContext again;
    mlir::OwningOpRef<mlir::ModuleOp> reread =
        again.parse(printed, /*limits=*/false);
    FUZZ_CHECK(reread, printed.c_str());
    FUZZ_CHECK(print(*reread, generic) == printed, printed.c_str());
  }
}
