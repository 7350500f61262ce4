// Scalar IEEE half and bfloat16 conversions, bit-exact (round to nearest even on narrowing).
#pragma once

#include <cstdint>
#include <cstring>

namespace loom {

inline float bits_to_f32(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline uint32_t f32_to_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

inline float fp16_to_f32(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  uint32_t exp = (h >> 10) & 0x1f;
  uint32_t mant = h & 0x3ff;
  if (exp == 0) {
    if (mant == 0) return bits_to_f32(sign);
    // subnormal: value = mant * 2^-24
    float v = static_cast<float>(mant) * (1.0f / 16777216.0f);
    return sign ? -v : v;
  }
  if (exp == 31) return bits_to_f32(sign | 0x7f800000u | (mant << 13));
  return bits_to_f32(sign | ((exp + 112) << 23) | (mant << 13));
}

inline uint16_t f32_to_fp16(float f) {
  uint32_t x = f32_to_bits(f);
  uint32_t sign = (x >> 16) & 0x8000;
  uint32_t absx = x & 0x7fffffff;
  if (absx > 0x7f800000) return static_cast<uint16_t>(sign | 0x7e00);  // NaN
  if (absx >= 0x477ff000) return static_cast<uint16_t>(sign | 0x7c00);  // overflow -> inf
  if (absx < 0x38800000) {  // subnormal or zero in half
    // round(|f| * 2^24) with round-to-nearest-even
    float a = bits_to_f32(absx) * 16777216.0f;
    uint32_t m = static_cast<uint32_t>(a);
    float rem = a - static_cast<float>(m);
    if (rem > 0.5f || (rem == 0.5f && (m & 1))) ++m;
    return static_cast<uint16_t>(sign | m);
  }
  uint32_t exp = ((absx >> 23) - 112) << 10;
  uint32_t mant = absx & 0x7fffff;
  uint32_t h = exp | (mant >> 13);
  uint32_t round = mant & 0x1fff;
  if (round > 0x1000 || (round == 0x1000 && (h & 1))) ++h;
  return static_cast<uint16_t>(sign | h);
}

inline float bf16_to_f32(uint16_t b) { return bits_to_f32(static_cast<uint32_t>(b) << 16); }

inline uint16_t f32_to_bf16(float f) {
  uint32_t x = f32_to_bits(f);
  if ((x & 0x7fffffff) > 0x7f800000) return static_cast<uint16_t>((x >> 16) | 0x40);  // quiet NaN
  uint32_t lsb = (x >> 16) & 1;
  return static_cast<uint16_t>((x + 0x7fff + lsb) >> 16);
}

}  // namespace loom
