// Placeholder: replaced by the legacy family's avx2 kernels.
#include "quant/kernel_table.h"

namespace strata::quant {
void fill_legacy_avx2(KernelTable&) {}
}  // namespace strata::quant
