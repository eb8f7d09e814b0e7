// Placeholder: replaced by the float family's avx512 kernels.
#include "quant/kernel_table.h"

namespace strata::quant {
void fill_float_avx512(KernelTable&) {}
}  // namespace strata::quant
