#pragma once
#include <string>
#include <string_view>

namespace dooly::signature {

// Lowercase hex SHA-256 of bytes (OpenSSL libcrypto EVP). Throws Error if libcrypto fails.
std::string sha256_hex(std::string_view bytes);

}  // namespace dooly::signature
