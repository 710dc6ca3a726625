#include "dooly/plot/output.hpp"

#include <unistd.h>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <string_view>

#include <cairo-svg.h>
#include <fmt/format.h>

#include "dooly/common/error.hpp"

namespace dooly::plot {

namespace {

using SurfacePtr = std::unique_ptr<cairo_surface_t, decltype(&cairo_surface_destroy)>;
using ContextPtr = std::unique_ptr<cairo_t, decltype(&cairo_destroy)>;

// cairo's status, translated once: what failed and cairo's word for it.
void check(cairo_status_t status, const char* what) {
  if (status != CAIRO_STATUS_SUCCESS)
    DOOLY_THROW(Error, "free memory, or report it as a dooly bug if it persists", "cairo could not {}: {}", what,
                cairo_status_to_string(status));
}

cairo_status_t append(void* closure, const unsigned char* data, unsigned int length) {
  static_cast<std::string*>(closure)->append(reinterpret_cast<const char*>(data), length);
  return CAIRO_STATUS_SUCCESS;
}

void draw_on(cairo_surface_t* surface, const std::function<void(cairo_t*)>& draw) {
  check(cairo_surface_status(surface), "create a surface");
  const ContextPtr cr(cairo_create(surface), &cairo_destroy);
  draw(cr.get());
  check(cairo_status(cr.get()), "draw the figure");
}

// cairo names each surface of an SVG "surface<N>" from a counter global to the process, so the same figure would
// differ between the first and the second write; number them by first appearance instead.
std::string renumber_surfaces(const std::string& svg) {
  static constexpr std::string_view kWord = "surface";
  std::map<std::string, int, std::less<>> numbers;
  std::string out;
  out.reserve(svg.size());
  size_t from = 0;
  for (size_t at = svg.find(kWord); at != std::string::npos; at = svg.find(kWord, at + 1)) {
    size_t end = at + kWord.size();
    while (end < svg.size() && std::isdigit(static_cast<unsigned char>(svg[end]))) ++end;
    if (end == at + kWord.size()) continue;
    const auto [it, fresh] = numbers.try_emplace(svg.substr(at + kWord.size(), end - at - kWord.size()),
                                                 static_cast<int>(numbers.size()) + 1);
    out.append(svg, from, at - from);
    out += fmt::format("{}{}", kWord, it->second);
    from = end;
  }
  out.append(svg, from, std::string::npos);
  return out;
}

}  // namespace

std::string encode_png(int width_px, int height_px, const std::function<void(cairo_t*)>& draw) {
  const SurfacePtr surface(cairo_image_surface_create(CAIRO_FORMAT_RGB24, width_px, height_px), &cairo_surface_destroy);
  draw_on(surface.get(), draw);
  std::string bytes;
  check(cairo_surface_write_to_png_stream(surface.get(), &append, &bytes), "encode the PNG");
  return bytes;
}

std::string encode_svg(int width_px, int height_px, const std::function<void(cairo_t*)>& draw) {
  std::string text;
  {
    const SurfacePtr surface(cairo_svg_surface_create_for_stream(&append, &text, width_px, height_px),
                             &cairo_surface_destroy);
    cairo_svg_surface_restrict_to_version(surface.get(), CAIRO_SVG_VERSION_1_1);
    draw_on(surface.get(), draw);
    cairo_surface_finish(surface.get());  // writes the document out
    check(cairo_surface_status(surface.get()), "write the SVG");
  }
  return renumber_surfaces(text);
}

namespace {

constexpr const char* kFolderFix = "create its folder, or pass a path in a folder you can write";

std::string temporary_for(const std::string& path) {
  return fmt::format("{}.tmp-{}", path, static_cast<long>(::getpid()));
}

std::FILE* open_temporary(const std::string& path, const std::string& tmp) {
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f) DOOLY_THROW(InputError, kFolderFix, "cannot write '{}': {}", path, std::strerror(errno));
  return f;
}

}  // namespace

void check_writable(const std::string& path) {
  const std::string tmp = temporary_for(path);
  std::fclose(open_temporary(path, tmp));
  std::remove(tmp.c_str());
}

void write_file_atomic(const std::string& path, const std::string& bytes) {
  const std::string tmp = temporary_for(path);
  std::FILE* f = open_temporary(path, tmp);
  const bool written = std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size();
  const bool closed = std::fclose(f) == 0;
  if (!written || !closed || std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    std::remove(tmp.c_str());
    DOOLY_THROW(InputError, "free disk space, or pass a path on another disk", "writing '{}' failed: {}", path,
                std::strerror(err));
  }
}

}  // namespace dooly::plot
