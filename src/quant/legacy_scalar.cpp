// Placeholder: replaced by the legacy family's scalar kernels.
#include "quant/kernel_table.h"

namespace strata::quant {
void fill_legacy_scalar(KernelTable&) {}
}  // namespace strata::quant
