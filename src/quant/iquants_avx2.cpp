// Placeholder: replaced by the iquants family's avx2 kernels.
#include "quant/kernel_table.h"

namespace strata::quant {
void fill_iquants_avx2(KernelTable&) {}
}  // namespace strata::quant
