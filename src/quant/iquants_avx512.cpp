// Placeholder: replaced by the iquants family's avx512 kernels.
#include "quant/kernel_table.h"

namespace strata::quant {
void fill_iquants_avx512(KernelTable&) {}
}  // namespace strata::quant
