// Shared by every kernel: buffers are reached by device address (uint64 in push constants).
#extension GL_EXT_buffer_reference : require
#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require
#extension GL_EXT_shader_explicit_arithmetic_types_int16 : require
#extension GL_EXT_shader_16bit_storage : require

layout(buffer_reference, std430, buffer_reference_align = 4) buffer Floats { float v[]; };
layout(buffer_reference, std430, buffer_reference_align = 4) buffer Ints { int v[]; };
layout(buffer_reference, std430, buffer_reference_align = 4) buffer Uints { uint v[]; };
// Quantized blocks are only 2-byte aligned (Q4_0 is 18 bytes): read them as 16-bit words.
layout(buffer_reference, std430, buffer_reference_align = 2) buffer Halfs { uint16_t v[]; };

uint u16_at(uint64_t base, uint byte_offset) { return uint(Halfs(base).v[byte_offset >> 1]); }
// Byte `i` of the data at `base` (base is 2-byte aligned).
uint byte_at(uint64_t base, uint i) { return (u16_at(base, i & ~1u) >> ((i & 1u) * 8u)) & 0xffu; }
int sbyte_at(uint64_t base, uint i) { return int(byte_at(base, i) << 24) >> 24; }
float f16_at(uint64_t base, uint byte_offset) {
  return unpackHalf2x16(u16_at(base, byte_offset)).x;
}
// Little-endian 32-bit word at an even byte offset.
uint u32_at(uint64_t base, uint byte_offset) {
  return u16_at(base, byte_offset) | (u16_at(base, byte_offset + 2u) << 16);
}

// Element i (64-bit index) of a float array at `base`.
float ldf(uint64_t base, uint64_t i) { return Floats(base + 4ul * i).v[0]; }
void stf(uint64_t base, uint64_t i, float value) { Floats(base + 4ul * i).v[0] = value; }
