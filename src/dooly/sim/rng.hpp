#pragma once
// The simulator's random numbers: the same stream for a seed on every platform and standard library (the
// distributions of <random> are implementation-defined; these are not). xoshiro256** seeded through splitmix64;
// uniform doubles from the top 53 bits; exponential by inversion; normal by Box-Muller; gamma by Marsaglia and
// Tsang (shape < 1 through the boost U^(1/shape)).
#include <cmath>
#include <cstdint>

namespace dooly::sim {

class Rng {
 public:
  explicit Rng(uint64_t seed) {
    for (uint64_t& s : s_) s = splitmix64(seed);
  }

  uint64_t next() {
    const uint64_t result = rotl(s_[1] * 5, 7) * 9;
    const uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = rotl(s_[3], 45);
    return result;
  }

  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }               // [0, 1)
  double open_uniform() { return (static_cast<double>(next() >> 11) + 0.5) * 0x1.0p-53; }  // (0, 1)
  double exponential(double rate) { return -std::log(open_uniform()) / rate; }
  double normal() {
    const double r = std::sqrt(-2.0 * std::log(open_uniform()));
    return r * std::cos(6.283185307179586 * uniform());
  }
  double gamma(double shape, double scale) {
    if (shape < 1.0) return gamma(shape + 1.0, scale) * std::pow(open_uniform(), 1.0 / shape);
    const double d = shape - 1.0 / 3.0;
    const double c = 1.0 / std::sqrt(9.0 * d);
    while (true) {
      double x = 0, v = 0;
      do {
        x = normal();
        v = 1.0 + c * x;
      } while (v <= 0);
      v = v * v * v;
      const double u = open_uniform();
      if (u < 1.0 - 0.0331 * x * x * x * x || std::log(u) < 0.5 * x * x + d * (1.0 - v + std::log(v)))
        return d * v * scale;
    }
  }

 private:
  static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  static uint64_t splitmix64(uint64_t& x) {
    uint64_t z = (x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  uint64_t s_[4] = {};
};

}  // namespace dooly::sim
