#pragma once
// A step composition written on one line (`dooly predict step --composition`): requests separated by commas, each
// [COUNTx]NEW[@CONTEXT] -- NEW tokens computed this step over CONTEXT tokens already cached (default 0), COUNT
// such requests (default 1). "512" is a prefill chunk of 512 tokens; "8x1@1024" eight decodes at 1024 cached
// tokens; "256,8x1@1024" both in one mixed step.
#include <string>
#include <string_view>

#include "dooly/plan/composition.hpp"

namespace dooly::predict {

// Throws InputError naming the item that is not [COUNTx]NEW[@CONTEXT] (NEW >= 1, CONTEXT >= 0, COUNT >= 1).
plan::Composition parse_composition(std::string_view text);
// The same form, equal neighbouring requests as one COUNTx item: parse_composition(format_composition(c)) == c.
std::string format_composition(const plan::Composition& c);

}  // namespace dooly::predict
