// An element-wise and global tolerance (docs/semantics.md §8): an element passes when |got - ref| <= abs OR
// |got - ref| <= rel * |ref|; the cosine difference 1 - 2 sum(a r) / sum(a^2 + r^2) over the whole
// output must be <= cos (cos < 0: not checked).
#pragma once

namespace mla {

struct Tolerance {
  double abs = 1e-3;
  double rel = 2.01 / 128;
  double cos = 5e-6;
};

}  // namespace mla
