#pragma once
// Text on a cairo context through cairo's "toy" text API: one generic family ("sans-serif", which fontconfig
// resolves to the installed DejaVu Sans), no hinting, so the same figure gives the same pixels on every
// machine with the same fonts. Text that is not UTF-8 is repaired (cairo would refuse it and stop drawing).
#include <string>
#include <string_view>

#include <cairo.h>

#include "dooly/plot/color.hpp"

namespace dooly::plot {

enum class HAlign { left, center, right };
enum class VAlign { top, middle, bottom };  // against the font's ascent and descent, not the glyphs'

class Text {
 public:
  explicit Text(cairo_t* cr);  // selects the family and font options on cr

  void font(double size_px, bool bold = false);
  double width(std::string_view text) const;
  double line_height() const;  // ascent + descent of the current font
  // Draws `text` with its box aligned to (x, y); angle turns it counter-clockwise about that point (radians).
  void draw(std::string_view text, double x, double y, HAlign h, VAlign v, const Rgb& color,
            double angle_rad = 0.0) const;
  // The text, shortened in the middle ("abc…xyz") until it is at most max_width_px wide.
  std::string fit(std::string_view text, double max_width_px) const;

 private:
  cairo_t* cr_;
  double size_px_ = 12.0;
  bool bold_ = false;
};

// Frees the font caches cairo and fontconfig keep for the whole process, so leak checkers see none at exit.
// Call it only when no cairo object is left (the end of a command, of a test program); drawing afterwards
// is fine, it fills them again.
void release_font_caches() noexcept;

}  // namespace dooly::plot
