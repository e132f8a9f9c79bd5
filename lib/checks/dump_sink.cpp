#include "lib/checks/dump_sink.h"

namespace mla {

const char* to_string(DumpRole r) {
  switch (r) {
    case DumpRole::kInput: return "input";
    case DumpRole::kOutput: return "output";
    case DumpRole::kReference: return "reference";
  }
  return "?";
}

}  // namespace mla
