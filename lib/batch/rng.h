// A fully specified random generator and our own distributions, so that a scenario generates the
// same batch bit for bit on any machine and standard library (std:: distributions are
// implementation-defined). xoshiro256** seeded through splitmix64; only integer arithmetic and
// exactly rounded IEEE operations (+, -, *, /) are used.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace mla {

class Rng {
 public:
  explicit Rng(uint64_t seed) {
    uint64_t x = seed;
    for (auto& s : s_) s = splitmix64(x);
  }

  // A generator for an independent named stream: Rng(seed).fork(k) differs for each k.
  Rng fork(uint64_t stream) const {
    uint64_t x = s_[0] ^ (stream * 0x9E3779B97F4A7C15ull) ^ (s_[3] << 1);
    return Rng(splitmix64(x));
  }

  uint64_t next_u64() {
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

  // Uniform integer in [0, n), n >= 1, without modulo bias (rejection sampling).
  uint64_t below(uint64_t n) {
    const uint64_t limit = UINT64_MAX - UINT64_MAX % n;
    uint64_t x;
    do { x = next_u64(); } while (x >= limit);
    return x % n;
  }

  // Uniform integer in [lo, hi] (inclusive), lo <= hi.
  int64_t uniform_int(int64_t lo, int64_t hi) {
    return lo + static_cast<int64_t>(below(static_cast<uint64_t>(hi - lo) + 1));
  }

  // Uniform double in [0, 1) with 53 random bits.
  double uniform01() { return static_cast<double>(next_u64() >> 11) * 0x1.0p-53; }

  // Uniform double in [lo, hi).
  double uniform(double lo, double hi) { return lo + (hi - lo) * uniform01(); }

  // Approximately normal (Irwin-Hall: sum of 12 uniforms minus 6 has mean 0, variance 1),
  // bounded to +-6 sigma. No transcendental functions, so identical everywhere.
  double normal(double mean, double sigma) {
    double s = 0.0;
    for (int i = 0; i < 12; ++i) s += uniform01();
    return mean + sigma * (s - 6.0);
  }

  bool bernoulli(double p) { return uniform01() < p; }

  template <typename T>
  void shuffle(std::vector<T>& v) {
    for (size_t i = v.size(); i > 1; --i) std::swap(v[i - 1], v[below(i)]);
  }

 private:
  static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  static uint64_t splitmix64(uint64_t& x) {
    uint64_t z = (x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  uint64_t s_[4];
};

}  // namespace mla
