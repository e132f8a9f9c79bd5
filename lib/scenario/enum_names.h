// An enumeration's names as one table of {value, name} pairs: the name of a value and the value of
// a name both read it, so the two directions cannot disagree.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <utility>

namespace mla {

template <typename E>
using EnumName = std::pair<E, const char*>;

// The value's name; "?" for a value the table lacks.
template <typename E, std::size_t N>
const char* enum_name(const EnumName<E> (&names)[N], E value) {
  for (const auto& [e, name] : names)
    if (e == value) return name;
  return "?";
}

// The value named s; nullopt for a name the table lacks.
template <typename E, std::size_t N>
std::optional<E> enum_from_name(const EnumName<E> (&names)[N], const std::string& s) {
  for (const auto& [e, name] : names)
    if (s == name) return e;
  return std::nullopt;
}

}  // namespace mla
