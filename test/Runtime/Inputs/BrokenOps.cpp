// For test/Runtime/exec-ops-errors.mlir: a runtime operation that does not
// compile.
#include "flexpipe/Runtime/UserOps.h"

FLEXPIPE_OPERATION(log_norms)(flexpipe::rt::OpContext &ctx) {
  ctx.getOutput().no_such_member();
}
