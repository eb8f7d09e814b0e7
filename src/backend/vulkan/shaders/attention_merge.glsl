// Softmax states of attention blocks merged in block order; attention.comp (one workgroup, all
// blocks) and attention_combine.comp (split blocks) share it, so both round alike (precise: no
// contraction into FMAs that one build could fuse and the other not).
#define BLOCK_POSITIONS 512u

// (M, L, ACC) += block (m, l, acc): both rescaled to the larger maximum. M = -inf (nothing yet)
// makes the first block's state the running one, exactly.
void merge_block(inout float M, inout float L, inout float ACC[8], float m, float l, float acc[8],
                 uint dims) {
  precise const float m_new = max(M, m);
  precise const float a = exp(M - m_new), b = exp(m - m_new);
  precise const float l_new = L * a + l * b;
  for (uint i = 0u; i < dims; ++i) {
    precise const float v = ACC[i] * a + acc[i] * b;
    ACC[i] = v;
  }
  L = l_new;
  M = m_new;
}
