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

// The attention sink (gpt-oss): one more logit in the softmax denominator only, so the final
// weights sum to less than 1: L gains e^sink, both rescaled to the larger maximum.
void add_sink(inout float M, inout float L, inout float ACC[8], float sink, uint dims) {
  precise const float m_new = max(M, sink);
  precise const float a = exp(M - m_new);
  precise const float l_new = L * a + exp(sink - m_new);
  for (uint i = 0u; i < dims; ++i) {
    precise const float v = ACC[i] * a;
    ACC[i] = v;
  }
  L = l_new;
  M = m_new;
}

// Sliding-window layers see the last `window` positions (0: all): the first one token t sees.
uint first_position(uint n_pos, uint window) {
  return window != 0u && n_pos > window ? n_pos - window : 0u;
}
