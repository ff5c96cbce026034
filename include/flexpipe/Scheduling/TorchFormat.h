//===- TorchFormat.h - PyTorch's pipeline schedule CSV ----------*- C++ -*-===//
//
// Part of the FlexPipe project, under the Apache License v2.0 with LLVM
// Exceptions. See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// PyTorch's `torch.distributed.pipelining` reads a schedule as CSV, one row
// per rank, one action per cell (`_PipelineScheduleRuntime._load_csv`):
//
//  - compute_only: `<stage><F|B|I|W><mb>`; empty cells are idle slots of its
//    lock-step grid. PyTorch adds the communication itself.
//  - compute_comms: also `SEND_F` / `SEND_B` (the sender's stage), `RECV_F` /
//    `RECV_B` (the receiver's stage), one `WAIT_SEND_F` / `WAIT_SEND_B` per
//    send, and `REDUCE_GRAD` + `WAIT_REDUCE_GRAD` after a stage's last
//    backward (the gradient scaling by 1/m and data-parallel reduction).
//
// PyTorch's runtime posts a receive where RECV stands and waits for it at the
// computation that needs it; a send does not block its sender's host, but on
// NCCL a pair's transfers run on one stream in the order posted, and a send
// waits there for its receive. Messages carry no tag: between two ranks the
// n-th receive takes the n-th send (one FIFO channel per ordered pair,
// ChannelRule::PerPair). Its stages form one chain
// 0 -> 1 -> ... -> S-1, each stage on exactly one rank.
//
//===----------------------------------------------------------------------===//

#ifndef FLEXPIPE_SCHEDULING_TORCHFORMAT_H
#define FLEXPIPE_SCHEDULING_TORCHFORMAT_H

#include "flexpipe/Scheduling/Export.h"
#include "flexpipe/Scheduling/Program.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <string>
#include <vector>

namespace flexpipe::sched {

/// Fails when PyTorch's format cannot express `program`, saying why in one
/// sentence that names the feature (a replicated or shared stage, a
/// registered instruction or collective, a stage graph that is not one
/// chain). A refusal of one op (a registered instruction or collective)
/// sets `*at`, when given, to its actor and index in that actor's program.
llvm::Error checkTorchExpressible(const Program &program,
                                  std::pair<int32_t, int32_t> *at = nullptr);

/// Orders the transfers of a program with its communication inserted (and
/// valid under ChannelRule::PerStage) the way PyTorch's own lowering of a
/// compute_only schedule does: in lock-step rounds over the actors, each
/// posts a receive at the moment its sender sends. Between two actors the
/// transfers, both ways, then come in one order on both sides, which
/// PyTorch's NCCL point-to-point needs (it runs a pair's transfers on one
/// stream in the order posted, and a send waits there for its receive), and
/// the receives from each peer come in its send order (its messages have no
/// tag: ChannelRule::PerPair). Computations keep their order; a receive
/// posted before other work becomes asynchronous, waited right before the
/// computation that needs it. Fails when the program is not valid.
llvm::Error orderTransfersPerPair(Program &program);

/// Fails when two actors of `program` (one chain of stages, as PyTorch's
/// format has) post their transfers with each other in different orders
/// (the n-th transfer of one is not the n-th of the other, a send matching
/// a receive), naming the first such transfer. With `cells` (as
/// parseTorchCsv gives them) the error is a TorchCsvError at that
/// transfer's cell.
llvm::Error
checkPairOrder(const Program &program,
               const std::vector<std::vector<int32_t>> *cells = nullptr);

/// PyTorch's compute_only CSV: one row per actor, computations in order, an
/// empty cell for each idle step of `timeline` (the step model's). The
/// program must be expressible (checkTorchExpressible succeeds).
std::string formatTorchCsv(const Program &program, const Timeline &timeline);

/// PyTorch's compute_comms CSV of a program with its communication inserted:
/// transfers ordered per actor pair (orderTransfersPerPair, checked with the
/// verifier under ChannelRule::PerPair and checkPairOrder), a WAIT_SEND_F
/// right after the local backward of the sent activation (it proves that the
/// peer posted its receive), a WAIT_SEND_B at the end, and REDUCE_GRAD +
/// WAIT_REDUCE_GRAD after each stage's last backward, as PyTorch's own lowering
/// places them. Fails when the program is not expressible or not valid.
llvm::Expected<std::string> formatTorchCsvComms(const Program &program);

/// `text` with its lines ended by LF alone: lines end in LF, CRLF or a lone
/// CR, as Python's csv module reads them (a lone CR ran two rows into one
/// cell). parseTorchCsv reads the lines so, and its line numbers count
/// them.
std::string torchCsvLines(llvm::StringRef text);

/// Whether `text` can be shown on a terminal as it is: UTF-8 without
/// control bytes. The CSV reader's messages escape a cell that is not;
/// flexpipe-compile does not echo such a source line.
bool isTerminalSafe(llvm::StringRef text);

/// What parseTorchCsv finds wrong, where: a 1-based `line` and `column`
/// (column 0: the whole line; line 0: the whole file). Its message
/// (llvm::toString) reads "line L, column C: what"; flexpipe-compile prints
/// it at FILE:L:C with the line.
class TorchCsvError : public llvm::ErrorInfo<TorchCsvError> {
public:
  static char ID;
  TorchCsvError(int32_t line, int32_t column, std::string what)
      : line(line), column(column), what(std::move(what)) {}
  void log(llvm::raw_ostream &os) const override;
  std::error_code convertToErrorCode() const override {
    return llvm::inconvertibleErrorCode();
  }
  int32_t line, column;
  std::string what;
};

/// Reads either format. Stages form one chain 0 -> 1 -> ... in stage order;
/// rank r's row becomes actor r. A compute_comms file keeps its transfers
/// (peers from where the neighbouring stage runs) and sets `comms`: a receive
/// is posted where it stands and waited right before the computation that
/// needs it, as in PyTorch's runtime; a send that a WAIT_SEND_* waits for
/// (after it, once) is asynchronous, completed by a wait at that cell;
/// REDUCE_GRAD, WAIT_REDUCE_GRAD, UNSHARD and RESHARD do not order data and
/// are dropped once checked (a stage of their rank, REDUCE_GRAD after the
/// stage's last backward);
/// OVERLAP_F_B runs its sub-actions in order. A compute_only file gives
/// computations only (comms false). `cells[a][i]` (when given) is the
/// column (1-based, in characters) of the cell that op i of actor a comes
/// from; row a is line a + 1; 0 for the waits the reader adds. Fails with
/// a TorchCsvError.
llvm::Error parseTorchCsv(const std::string &text, Program &program,
                          bool *comms = nullptr,
                          std::vector<std::vector<int32_t>> *cells = nullptr);

} // namespace flexpipe::sched

#endif // FLEXPIPE_SCHEDULING_TORCHFORMAT_H
