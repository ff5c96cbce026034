// For test/Runtime/exec-ops-errors.mlir: a second definition of @log_norms
// (examples/ops/ActivationNorms.cpp has the first).
#include "flexpipe/Runtime/UserOps.h"

FLEXPIPE_OPERATION(log_norms)(flexpipe::rt::OpContext &) {}
