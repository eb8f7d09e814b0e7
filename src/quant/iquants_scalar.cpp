// Placeholder: replaced by the iquants family's scalar kernels.
#include "quant/kernel_table.h"

namespace strata::quant {
void fill_iquants_scalar(KernelTable&) {}
}  // namespace strata::quant
