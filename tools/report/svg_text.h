// Text and numbers as the report's SVG and HTML carry them: XML escaping, and number formats for tick
// labels, tooltips and tables that a person reads (no "0.30000000000000004", no "1e-05" beside "0.0001").
#pragma once

#include <string>
#include <string_view>

namespace bertrain::report {

// & < > " ' replaced by entities: safe in element text and in attribute values of either quote.
std::string xml_escape(std::string_view text);

// How wide `text` is drawn at `font_px` in DejaVu Sans: what the charts lay their labels out with. It is the
// first font they ask for and the widest of those they name (Helvetica and Arial are narrower), so a layout
// measured with it leaves room whichever the browser has. A character beyond ASCII (an accent, CJK, the
// ellipsis) counts as a whole em, about the widest it can be.
double text_width(std::string_view text, double font_px);

// A tick label for `value` on an axis whose ticks are `step` apart: just enough decimals to tell
// neighbouring ticks apart; values below 0.001 in scientific notation ("5e-5").
std::string format_tick(double value, double step);

// A value shown exactly enough to read: 4 significant digits ("0.2025", "85.69", "1e-4"); "n/a" when not finite.
std::string format_value(double value);

// `decimals` digits after the point ("0.961", "34.0"); "n/a" when not finite.
std::string format_fixed(double value, int decimals);

// 4 significant digits in scientific notation, trailing zeros dropped: "1e-3", "8.5e-5" (learning rates).
std::string format_scientific(double value);

// A duration as a person reads it: "45.2 s" under two minutes, "12.5 min" under two hours, else "3.25 h"; "n/a"
// when not finite.
std::string format_duration(double seconds);

// A coordinate in pixels, to 0.01 px (enough for any screen, short in the file).
std::string format_px(double pixels);

// A value in a data-* attribute: 17 significant digits, so a reader gets back the very double.
std::string format_exact(double value);

}  // namespace bertrain::report
