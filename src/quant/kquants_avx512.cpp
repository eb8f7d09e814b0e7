// Placeholder: replaced by the kquants family's avx512 kernels.
#include "quant/kernel_table.h"

namespace strata::quant {
void fill_kquants_avx512(KernelTable&) {}
}  // namespace strata::quant
