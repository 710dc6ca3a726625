#pragma once
// Getting a drawing out of cairo: surfaces encoded into memory (so a failure leaves no file behind), cairo's
// status translated once into the project's errors, and the atomic file write.
#include <functional>
#include <string>

#include <cairo.h>

namespace dooly::plot {

// Draws on a white RGB image surface of the size and returns its PNG encoding.
std::string encode_png(int width_px, int height_px, const std::function<void(cairo_t*)>& draw);
// Draws on an SVG surface of the size and returns the document.
std::string encode_svg(int width_px, int height_px, const std::function<void(cairo_t*)>& draw);

// Writes bytes to path through a temporary in the same folder and a rename: a reader never sees half a file.
// Throws InputError "cannot write '<path>': <reason> — <what to do>" when the folder is missing or not writable.
void write_file_atomic(const std::string& path, const std::string& bytes);
// Checks now that write_file_atomic(path, ...) could create its temporary, so a bad path is one line before any
// long work; throws the same InputError.
void check_writable(const std::string& path);

}  // namespace dooly::plot
