#include "lib/checks/compare.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>

namespace mla {

namespace {

double bf16_value(uint16_t b) {
  const uint32_t u = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// Records a mismatching pair (a, r) as the worst one when its absolute error is larger.
void note_mismatch(Metrics& m, int64_t i, double ref, double got) {
  const bool finite = std::isfinite(ref) && std::isfinite(got);
  const double abs_err = finite ? std::fabs(got - ref) : std::numeric_limits<double>::infinity();
  if (m.worst_index < 0 || !(abs_err <= m.max_abs_err)) {
    m.worst_index = i;
    m.worst_ref = ref;
    m.worst_got = got;
  }
  if (finite) {
    m.max_abs_err = std::isnan(m.max_abs_err) ? abs_err : std::max(m.max_abs_err, abs_err);
    const double rel = ref != 0.0 ? abs_err / std::fabs(ref) : std::numeric_limits<double>::infinity();
    m.max_rel_err = std::isnan(m.max_rel_err) ? rel : std::max(m.max_rel_err, rel);
  }
}

void init_exact(Metrics& m, int64_t n) {
  m.elements = n;
  m.max_abs_err = 0.0;
  m.max_rel_err = 0.0;
}

}  // namespace

Metrics compare_bf16_exact(const std::vector<uint16_t>& ref, const std::vector<uint16_t>& got) {
  Metrics m;
  init_exact(m, static_cast<int64_t>(ref.size()));
  const size_t n = std::min(ref.size(), got.size());
  for (size_t i = 0; i < n; ++i) {
    if (ref[i] == got[i]) continue;
    const double r = bf16_value(ref[i]), g = bf16_value(got[i]);
    if (std::isnan(r) && std::isnan(g)) continue;
    ++m.mismatches;
    if (std::isfinite(r) != std::isfinite(g)) ++m.nonfinite_mismatches;
    note_mismatch(m, static_cast<int64_t>(i), r, g);
  }
  m.mismatches += static_cast<int64_t>(std::max(ref.size(), got.size()) - n);
  m.bit_exact = m.mismatches == 0;
  return m;
}

Metrics compare_bytes_exact(const std::vector<uint8_t>& ref, const std::vector<uint8_t>& got,
                            const std::vector<bool>* untouched) {
  Metrics m;
  init_exact(m, static_cast<int64_t>(ref.size()));
  const size_t n = std::min(ref.size(), got.size());
  for (size_t i = 0; i < n; ++i) {
    if (ref[i] == got[i]) continue;
    if (untouched && (*untouched)[i]) {
      ++m.untouched_bytes_changed;
      continue;
    }
    ++m.mismatches;
    note_mismatch(m, static_cast<int64_t>(i), ref[i], got[i]);
  }
  m.mismatches += static_cast<int64_t>(std::max(ref.size(), got.size()) - n);
  m.bit_exact = m.mismatches == 0 && m.untouched_bytes_changed == 0;
  return m;
}

Metrics compare_int32_exact(const std::vector<int32_t>& ref, const std::vector<int32_t>& got) {
  Metrics m;
  init_exact(m, static_cast<int64_t>(ref.size()));
  const size_t n = std::min(ref.size(), got.size());
  for (size_t i = 0; i < n; ++i)
    if (ref[i] != got[i]) {
      ++m.mismatches;
      note_mismatch(m, static_cast<int64_t>(i), ref[i], got[i]);
    }
  m.mismatches += static_cast<int64_t>(std::max(ref.size(), got.size()) - n);
  m.bit_exact = m.mismatches == 0;
  return m;
}

Metrics compare_tolerance(const std::vector<double>& ref, const std::vector<double>& got, const Tolerance& tol) {
  Metrics m;
  init_exact(m, static_cast<int64_t>(ref.size()));
  m.bit_exact.reset();
  double dot = 0.0, norms = 0.0;
  const size_t n = std::min(ref.size(), got.size());
  for (size_t i = 0; i < n; ++i) {
    const double r = ref[i], g = got[i];
    const bool rf = std::isfinite(r), gf = std::isfinite(g);
    if (!rf || !gf) {
      // Same non-finite value (both NaN, or the same infinity) is a match.
      const bool same = (std::isnan(r) && std::isnan(g)) || (!std::isnan(r) && r == g);
      if (!same) {
        ++m.nonfinite_mismatches;
        note_mismatch(m, static_cast<int64_t>(i), r, g);
      }
      continue;
    }
    dot += r * g;
    norms += r * r + g * g;
    const double err = std::fabs(g - r);
    m.max_abs_err = std::max(m.max_abs_err, err);
    if (r != 0.0) m.max_rel_err = std::max(m.max_rel_err, err / std::fabs(r));
    if (err > tol.abs && err > tol.rel * std::fabs(r)) {
      ++m.mismatches;
      if (m.worst_index < 0 || err > std::fabs(m.worst_got - m.worst_ref)) {
        m.worst_index = static_cast<int64_t>(i);
        m.worst_ref = r;
        m.worst_got = g;
      }
    }
  }
  m.mismatches += static_cast<int64_t>(std::max(ref.size(), got.size()) - n);
  m.cos_diff = norms > 0.0 ? 1.0 - 2.0 * dot / norms : 0.0;
  if (tol.cos >= 0.0) m.cos_tolerance = tol.cos;
  m.extra["tol_abs"] = tol.abs;
  m.extra["tol_rel"] = tol.rel;
  return m;
}

std::vector<double> widen_bf16(const std::vector<uint16_t>& v) {
  std::vector<double> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = bf16_value(v[i]);
  return out;
}

std::vector<double> widen_f32(const std::vector<float>& v) { return std::vector<double>(v.begin(), v.end()); }

void merge_into(Metrics& a, const Metrics& b) {
  // Exact and tolerance metrics do not mix: their verdict rules differ (a NaN mismatch is FAIL in
  // one, NONFINITE in the other).
  if (a.elements > 0 && b.elements > 0 && a.bit_exact.has_value() != b.bit_exact.has_value())
    throw std::logic_error("merge_into: cannot merge exact and tolerance metrics");
  auto max_nan = [](double x, double y) { return std::isnan(x) ? y : std::isnan(y) ? x : std::max(x, y); };
  if (a.worst_index < 0 && b.worst_index >= 0) {
    a.worst_index = b.worst_index;
    a.worst_ref = b.worst_ref;
    a.worst_got = b.worst_got;
  }
  if (a.elements == 0) a.bit_exact = b.bit_exact;
  else if (a.bit_exact && b.bit_exact) a.bit_exact = *a.bit_exact && *b.bit_exact;
  a.elements += b.elements;
  a.mismatches += b.mismatches;
  a.max_abs_err = max_nan(a.max_abs_err, b.max_abs_err);
  a.max_rel_err = max_nan(a.max_rel_err, b.max_rel_err);
  a.cos_diff = max_nan(a.cos_diff, b.cos_diff);
  if (std::isnan(a.cos_tolerance)) a.cos_tolerance = b.cos_tolerance;
  a.nonfinite_mismatches += b.nonfinite_mismatches;
  a.guard_bytes_changed += b.guard_bytes_changed;
  a.untouched_bytes_changed += b.untouched_bytes_changed;
  a.inputs_modified = a.inputs_modified || b.inputs_modified;
  // Counts add up; tolerances (tol_*) are settings, not counts.
  for (const auto& [k, v] : b.extra) a.extra[k] = k.rfind("tol_", 0) == 0 ? max_nan(a.extra[k], v) : a.extra[k] + v;
}

}  // namespace mla
