// UTF-8 well-formedness; see report/utf8.h.
#include "export/report/utf8.h"

#include "common/valid_utf8.h"

namespace gpuos {

size_t Utf8SequenceLength(std::string_view bytes, size_t i) { return Utf8SequenceLengthAt(bytes, i); }

}  // namespace gpuos
