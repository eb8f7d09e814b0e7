// Placeholder: replaced by the legacy family's avx512 kernels.
#include "quant/kernel_table.h"

namespace strata::quant {
void fill_legacy_avx512(KernelTable&) {}
}  // namespace strata::quant
