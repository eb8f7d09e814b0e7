// Placeholder: replaced by the float family's avx2 kernels.
#include "quant/kernel_table.h"

namespace strata::quant {
void fill_float_avx2(KernelTable&) {}
}  // namespace strata::quant
