// Placeholder: replaced by the float family's scalar kernels.
#include "quant/kernel_table.h"

namespace strata::quant {
void fill_float_scalar(KernelTable&) {}
}  // namespace strata::quant
