// Placeholder: replaced by the kquants family's scalar kernels.
#include "quant/kernel_table.h"

namespace strata::quant {
void fill_kquants_scalar(KernelTable&) {}
}  // namespace strata::quant
