// UTF-8 well-formedness, for the reports that must turn arbitrary trace bytes
// (comm names, kernel names) into valid JSON, HTML or terminal text.
#pragma once

#include <cstddef>
#include <string_view>

namespace gpuos {

// Length of the well-formed UTF-8 sequence starting at bytes[i] (Unicode
// table 3-7: no overlong forms, no surrogates, nothing above U+10FFFF), or 0
// when the byte there does not start one.
size_t Utf8SequenceLength(std::string_view bytes, size_t i);

}  // namespace gpuos
