#pragma once
// Colours of a chart. A colour is three channels in 0..1 written as 8-bit hex, so a test can compare a pixel of
// the PNG with the colour a series was given.
#include <array>
#include <cstddef>
#include <cstdint>

namespace dooly::plot {

struct Rgb {
  double r = 0.0, g = 0.0, b = 0.0;  // 0..1

  static constexpr Rgb hex(uint32_t rgb) noexcept {
    return {static_cast<double>((rgb >> 16) & 0xff) / 255.0, static_cast<double>((rgb >> 8) & 0xff) / 255.0,
            static_cast<double>(rgb & 0xff) / 255.0};
  }
  friend constexpr bool operator==(const Rgb&, const Rgb&) = default;
};

inline constexpr Rgb kInk = Rgb::hex(0x222222);    // frame, text
inline constexpr Rgb kMuted = Rgb::hex(0x666666);  // tick labels, notes
inline constexpr Rgb kGrid = Rgb::hex(0xe4e4e4);
inline constexpr Rgb kWhite = Rgb::hex(0xffffff);

// Ten colours that stay apart from one another, in print and for the common colour-vision deficiencies.
inline constexpr std::array<Rgb, 10> kPalette = {
    Rgb::hex(0x1f77b4), Rgb::hex(0xd62728), Rgb::hex(0x2ca02c), Rgb::hex(0xff7f0e), Rgb::hex(0x9467bd),
    Rgb::hex(0x8c564b), Rgb::hex(0xe377c2), Rgb::hex(0x17becf), Rgb::hex(0xbcbd22), Rgb::hex(0x7f7f7f),
};

// The i-th colour of the palette, cycling.
constexpr Rgb palette(size_t i) noexcept { return kPalette[i % kPalette.size()]; }

}  // namespace dooly::plot
