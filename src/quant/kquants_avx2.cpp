// Placeholder: replaced by the kquants family's avx2 kernels.
#include "quant/kernel_table.h"

namespace strata::quant {
void fill_kquants_avx2(KernelTable&) {}
}  // namespace strata::quant
