#pragma once
// Kernel names as CUPTI gives them (mangled C++ or plain C) made readable once per kernel: demangled with
// abi::__cxa_demangle, plus a short form for tables (the function's own name, without its namespace, template
// arguments, parameters or return type).
#include <string>
#include <string_view>

namespace dooly::cupti {

// The demangled name; the name unchanged when it is not a mangled C++ name.
std::string demangle(const char* name);
// "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>>(int, ...)" ->
// "vectorized_elementwise_kernel"; "ampere_bf16_s16816gemm_bf16_128x128" stays as it is.
std::string short_name(std::string_view demangled);

}  // namespace dooly::cupti
