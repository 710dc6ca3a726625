#pragma once
// Reads a PNG back (through cairo, which wrote it) so tests can look at pixels, and a few checks on its bytes.
#include <cairo.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "dooly/plot/color.hpp"
#include "dooly/plot/text.hpp"

namespace dooly::plot::testing {

struct Pixel {
  int r = 0, g = 0, b = 0;
};

class Image {
 public:
  explicit Image(const std::string& path) {
    cairo_surface_t* s = cairo_image_surface_create_from_png(path.c_str());
    if (cairo_surface_status(s) != CAIRO_STATUS_SUCCESS) {
      cairo_surface_destroy(s);
      throw std::runtime_error("cannot read PNG " + path);
    }
    width_ = cairo_image_surface_get_width(s);
    height_ = cairo_image_surface_get_height(s);
    const int stride = cairo_image_surface_get_stride(s);
    const unsigned char* data = cairo_image_surface_get_data(s);
    pixels_.resize(static_cast<size_t>(width_) * height_);
    for (int y = 0; y < height_; ++y)
      for (int x = 0; x < width_; ++x) {
        uint32_t v = 0;
        std::memcpy(&v, data + static_cast<size_t>(y) * stride + 4 * static_cast<size_t>(x), 4);
        pixels_[static_cast<size_t>(y) * width_ + x] = v;
      }
    cairo_surface_destroy(s);
  }

  int width() const { return width_; }
  int height() const { return height_; }
  Pixel at(double x, double y) const {
    const int xi = static_cast<int>(x), yi = static_cast<int>(y);
    if (xi < 0 || yi < 0 || xi >= width_ || yi >= height_) throw std::out_of_range("pixel outside the image");
    const uint32_t v = pixels_[static_cast<size_t>(yi) * width_ + xi];
    return {static_cast<int>((v >> 16) & 0xff), static_cast<int>((v >> 8) & 0xff), static_cast<int>(v & 0xff)};
  }

 private:
  int width_ = 0, height_ = 0;
  std::vector<uint32_t> pixels_;
};

inline Pixel to_pixel(const Rgb& c) {
  return {static_cast<int>(c.r * 255 + 0.5), static_cast<int>(c.g * 255 + 0.5), static_cast<int>(c.b * 255 + 0.5)};
}

// `color` seen through `opacity` over white.
inline Rgb over_white(const Rgb& color, double opacity) {
  return {1 - opacity + opacity * color.r, 1 - opacity + opacity * color.g, 1 - opacity + opacity * color.b};
}

inline bool near(const Pixel& p, const Rgb& c, int tolerance = 2) {
  const Pixel q = to_pixel(c);
  return std::abs(p.r - q.r) <= tolerance && std::abs(p.g - q.g) <= tolerance && std::abs(p.b - q.b) <= tolerance;
}

// Width and height from a PNG's IHDR chunk (big-endian at bytes 16 and 20), after checking the signature.
struct PngHeader {
  uint32_t width = 0, height = 0;
  int bit_depth = 0, color_type = 0;
};
inline PngHeader png_header(const std::string& bytes) {
  if (bytes.size() < 33 || bytes.compare(0, 8, "\x89PNG\r\n\x1a\n") != 0 || bytes.compare(12, 4, "IHDR") != 0)
    throw std::runtime_error("not a PNG");
  const auto be32 = [&](size_t i) {
    uint32_t v = 0;
    for (size_t k = 0; k < 4; ++k) v = (v << 8) | static_cast<unsigned char>(bytes[i + k]);
    return v;
  };
  return {be32(16), be32(20), static_cast<unsigned char>(bytes[24]), static_cast<unsigned char>(bytes[25])};
}

// cairo and fontconfig keep font caches for the whole process; free them when the tests are done, so that
// LeakSanitizer (the asan preset) reports only what the tests themselves leak.
class ReleaseFontCaches : public ::testing::Environment {
 public:
  void TearDown() override { release_font_caches(); }
};
inline const bool kFontCachesReleased = (::testing::AddGlobalTestEnvironment(new ReleaseFontCaches), true);

}  // namespace dooly::plot::testing
