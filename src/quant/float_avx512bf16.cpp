// Placeholder: replaced by the BF16 dot product with AVX512_BF16.
#include "quant/kernel_table.h"

namespace strata::quant {
void fill_float_avx512bf16(KernelTable&) {}
}  // namespace strata::quant
