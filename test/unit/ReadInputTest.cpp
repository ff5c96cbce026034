//===- ReadInputTest.cpp - Input files read with a bound ------------------===//
//
// Part of the FlexPipe project, under the Apache License v2.0 with LLVM
// Exceptions. See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#include "flexpipe/Support/ReadInput.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/raw_ostream.h"

#include <catch2/catch.hpp>

using flexpipe::readInputFile;

TEST_CASE("an input file is read whole, up to its bound", "[support]") {
  llvm::SmallString<128> path;
  int fd = -1;
  REQUIRE(!llvm::sys::fs::createTemporaryFile("read-input", "txt", fd, path));
  const std::string text(3 << 20, 'x'); // several of the reader's chunks
  {
    llvm::raw_fd_ostream out(fd, /*shouldClose=*/true);
    out << text;
  }
  auto read = readInputFile(path);
  REQUIRE(read);
  CHECK((*read)->getBuffer() == text);
  CHECK((*read)->getBufferIdentifier() == path.str());
  // One byte over the bound is refused.
  auto over = readInputFile(path, text.size() - 1);
  REQUIRE(!over);
  CHECK(over.getError() == std::errc::file_too_large);
  CHECK(readInputFile(path, text.size()));
  llvm::sys::fs::remove(path);
  // An endless device stops at the bound (it read until memory ran out).
  auto endless = readInputFile("/dev/zero", 1 << 20);
  REQUIRE(!endless);
  CHECK(endless.getError() == std::errc::file_too_large);
  CHECK(flexpipe::readInputError(endless.getError())
            .find("or endless") != std::string::npos);
  CHECK(!readInputFile("/no/such/file"));
}
